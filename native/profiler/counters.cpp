// Hardware counters for traffic, for an unmodified program (libumcounters, loaded by the CUDA driver
// through CUDA_INJECTION64_PATH). One of two CUPTI profilers, chosen with $UMSCOPE_COUNTERS (they share the
// counter hardware: with both, the second answers CUPTI_ERROR_HARDWARE_BUSY; default sample):
//   kernel  the Range Profiler in auto-range, kernel-replay mode: one range per kernel launch, with
//           the metrics of $UMSCOPE_COUNTER_SET (link: PCIe / NVLink / C2C bytes; memory: DRAM bytes
//           and system-memory sectors at L2). CUPTI serialises kernels (and replays one that needs
//           several passes), so kernels are timed differently from an unprofiled run.
//   sample  PM sampling: the device's PCIe, DRAM and L1 <-> L2 byte counters every
//           $UMSCOPE_COUNTER_PERIOD_US microseconds (default 1000) over the whole run; copies and
//           migrations (not kernels) are seen only here.
// The metric names are Nsight Compute's. Records are JSON lines in $UMSCOPE_COUNTERS_FILE:
//   {"k":"start",...} {"k":"config",...} {"k":"range",...} {"k":"sample",...} {"k":"error",...} {"k":"end"}
// Where the profiler API is refused (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: the driver restricts
// counters to administrators) an error record says so and python/umscope/profile falls back to NVML.
// {"k":"phase",...} records time each step of the library's own work (bench/um_trace_overhead.py --phases;
// docs/counters.md, "What profiling costs").
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "counters.hpp"
#include "json_out.hpp"

namespace {

FILE* g_out = nullptr;
std::mutex g_io;
std::atomic<bool> g_done{false};

// Bytes over the host link as the GPU's PCIe unit counts them: TLP bytes, headers included (on the H100 a
// 1 GiB zero-copy read by SMs counted 1.09x: 128-byte read completions with 12-byte headers; the 16-byte
// read requests count as written). One CUPTI configuration: system counters, which CUPTI does not put in
// one configuration with DRAM or L2 counters. $UMSCOPE_COUNTER_METRICS replaces the set (NVLink:
// nvlrx__bytes.sum, nvltx__bytes.sum; Grace Hopper's C2C: ctc__rx_bytes.sum, ctc__tx_bytes.sum).
const std::vector<std::string> kLink = {"pcie__read_bytes.sum", "pcie__write_bytes.sum"};
// Payload bytes: to/from the GPU's own memory, and the L2 sectors from the SMs' L1s that went to system
// memory (zero-copy; srcunit_tex leaves out the copies between the two L2 partitions, which the plain
// aperture counter adds: 1.5x on the H100).
const std::vector<std::string> kMemory = {"dram__bytes_read.sum", "dram__bytes_write.sum",
                                          "lts__t_sectors_srcunit_tex_aperture_sysmem_op_read.sum",
                                          "lts__t_sectors_srcunit_tex_aperture_sysmem_op_write.sum"};
// PM sampling over the run: link, GPU memory and L1 <-> L2 bytes (the three tiers), as many as the GPU
// allows in one pass (a metric it refuses is left out and named in the config record).
const std::vector<std::string> kSampled = {"pcie__read_bytes.sum", "pcie__write_bytes.sum", "dram__bytes_read.sum",
                                           "dram__bytes_write.sum", "lts__t_sectors_srcunit_tex.sum"};

// A CUPTI parameter block: zeroed, with its size set.
template <class T>
T params(size_t size) {
  T p;
  std::memset(&p, 0, sizeof p);
  p.structSize = size;
  return p;
}

using umprofiler::json_string;
using umprofiler::wall_ns;

void phase(const char* what, int dev, uint64_t w0, uint64_t w1, long long n = -1, long long cpu_ns = -1) {
  if (!g_out) return;
  std::lock_guard<std::mutex> lk(g_io);
  umprofiler::write_phase(g_out, what, dev, w0, w1, n, cpu_ns);
}

// Writes a phase record for its scope, with the thread's CPU time in it: where the counters' cost in the program's
// wall time goes, and whether it was spent computing (CUPTI's availability query and set-up: CPU time, all of it
// inside the driver's ioctl, docs/counters.md) or waiting.
struct Timed {
  const char* what;
  int dev;
  uint64_t w0, c0;
  Timed(const char* w, int d = -1) : what(w), dev(d), w0(wall_ns()), c0(umprofiler::thread_cpu_ns()) {}
  ~Timed() { phase(what, dev, w0, wall_ns(), -1, static_cast<long long>(umprofiler::thread_cpu_ns() - c0)); }
};

// Joins a thread this process started; in a forked child (which has none of its parent's threads) lets go.
void join_here(std::thread& t, pid_t pid) {
  if (!t.joinable()) return;
  if (pid == getpid()) t.join();
  else t.detach();
}

bool ok(const char* what, CUptiResult r, int dev = -1) {
  if (r == CUPTI_SUCCESS) return true;
  if (!g_out) return false;
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  std::lock_guard<std::mutex> lk(g_io);
  std::fprintf(g_out, "{\"k\":\"error\",\"what\":\"%s\",\"dev\":%d,\"code\":%d,\"cupti\":", what, dev,
               static_cast<int>(r));
  json_string(g_out, s ? s : "?");
  std::fputs("}\n", g_out);
  std::fflush(g_out);
  return false;
}

std::vector<std::string> env_list(const char* name, const std::vector<std::string>& fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = v;; ++p) {
    if (*p == ',' || *p == 0) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (!*p) break;
    } else if (*p != ' ') {
      cur += *p;
    }
  }
  return out;
}

std::vector<const char*> c_names(const std::vector<std::string>& v) {
  std::vector<const char*> out;
  for (auto& s : v) out.push_back(s.c_str());
  return out;
}

// A CUPTI host object with a configuration of `metrics` for one chip; the config image and passes.
struct HostConfig {
  CUpti_Profiler_Host_Object* host = nullptr;
  std::vector<uint8_t> image;
  size_t passes = 0;
  std::vector<std::string> skipped;  // metrics the GPU would not take with the others

  bool init(CUpti_ProfilerType type, const char* chip, const uint8_t* avail, int dev) {
    auto hp = params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    hp.profilerType = type;
    hp.pChipName = chip;
    hp.pCounterAvailabilityImage = avail;
    if (!ok("host initialise", cuptiProfilerHostInitialize(&hp), dev)) return false;
    host = hp.pHostObject;
    return true;
  }
  CUptiResult add(const std::vector<std::string>& metrics) {
    auto names = c_names(metrics);
    auto ap = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    ap.pHostObject = host;
    ap.ppMetricNames = names.data();
    ap.numMetrics = names.size();
    return cuptiProfilerHostConfigAddMetrics(&ap);
  }
  void release() {
    if (host) {
      auto dp = params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
      dp.pHostObject = host;
      cuptiProfilerHostDeinitialize(&dp);
      host = nullptr;
    }
  }
  // A configuration of `metrics`; where the GPU refuses them together, the largest prefix-greedy subset it
  // takes (each metric tried on top of those already taken), the rest listed in `skipped`.
  bool build(CUpti_ProfilerType type, const char* chip, const uint8_t* avail, std::vector<std::string>& metrics,
             int dev) {
    Timed t("host config", dev);
    CUptiResult added;
    {
      Timed ti("host initialise", dev);
      if (!init(type, chip, avail, dev)) return false;
    }
    {
      Timed ta("add metrics", dev);
      added = add(metrics);
    }
    if (added != CUPTI_SUCCESS) {
      std::vector<std::string> taken;
      for (auto& m : metrics) {
        std::vector<std::string> trial = taken;
        trial.push_back(m);
        release();
        if (!init(type, chip, avail, dev)) return false;
        if (add(trial) == CUPTI_SUCCESS) taken = trial;
        else skipped.push_back(m);
      }
      release();
      if (!init(type, chip, avail, dev)) return false;
      if (taken.empty() || !ok("add metrics", add(taken), dev)) return false;
      metrics = taken;
    }
    Timed tc("config image", dev);
    auto sp = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
    sp.pHostObject = host;
    if (!ok("config image size", cuptiProfilerHostGetConfigImageSize(&sp), dev)) return false;
    image.resize(sp.configImageSize);
    auto ip = params<CUpti_Profiler_Host_GetConfigImage_Params>(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
    ip.pHostObject = host;
    ip.configImageSize = image.size();
    ip.pConfigImage = image.data();
    if (!ok("config image", cuptiProfilerHostGetConfigImage(&ip), dev)) return false;
    auto np = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
    np.configImageSize = image.size();
    np.pConfigImage = image.data();
    if (ok("passes", cuptiProfilerHostGetNumOfPasses(&np), dev)) passes = np.numOfPasses;
    return true;
  }
  bool evaluate(const std::vector<uint8_t>& data, size_t index, const std::vector<std::string>& metrics,
                std::vector<double>& values, int dev) {
    auto names = c_names(metrics);
    values.assign(metrics.size(), 0.0);
    auto ep = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    ep.pHostObject = host;
    ep.pCounterDataImage = data.data();
    ep.counterDataImageSize = data.size();
    ep.rangeIndex = index;
    ep.ppMetricNames = names.data();
    ep.numMetrics = names.size();
    ep.pMetricValues = values.data();
    return ok("evaluate", cuptiProfilerHostEvaluateToGpuValues(&ep), dev);
  }
  ~HostConfig() { release(); }
};

void write_values(FILE* f, const std::vector<std::string>& metrics, const std::vector<double>& v) {
  std::fputs("\"m\":{", f);
  for (size_t i = 0; i < metrics.size(); ++i)
    std::fprintf(f, "%s\"%s\":%.17g", i ? "," : "", metrics[i].c_str(), v[i]);
  std::fputc('}', f);
}

void write_config(const char* profiler, int dev, const char* chip, const std::vector<std::string>& metrics,
                  size_t passes, const char* extra, const std::vector<std::string>& skipped) {
  std::lock_guard<std::mutex> lk(g_io);
  std::fprintf(g_out, "{\"k\":\"config\",\"profiler\":\"%s\",\"dev\":%d,\"chip\":", profiler, dev);
  json_string(g_out, chip);
  std::fputs(",\"metrics\":[", g_out);
  for (size_t i = 0; i < metrics.size(); ++i) std::fprintf(g_out, "%s\"%s\"", i ? "," : "", metrics[i].c_str());
  std::fputs("],\"skipped\":[", g_out);
  for (size_t i = 0; i < skipped.size(); ++i) std::fprintf(g_out, "%s\"%s\"", i ? "," : "", skipped[i].c_str());
  std::fprintf(g_out, "],\"passes\":%zu%s}\n", passes, extra);
  std::fflush(g_out);
}

int device_of(CUcontext ctx) {
  uint32_t d = 0;
  return ok("device of the context", cuptiGetDeviceId(ctx, &d)) ? static_cast<int>(d) : -1;
}

const char* chip_of(int dev) {
  auto cp = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  cp.deviceIndex = static_cast<size_t>(dev);
  if (!ok("chip name", cuptiDeviceGetChipName(&cp), dev)) return nullptr;
  return cp.pChipName;
}

// ---- Range Profiler: one range per kernel, per context ----------------------------------------
constexpr size_t kRangesPerImage = 256;

struct KernelProfiler {
  CUcontext ctx = nullptr;
  int dev = -1;
  std::vector<std::string> metrics;
  HostConfig cfg;
  CUpti_RangeProfiler_Object* obj = nullptr;
  std::vector<uint8_t> data;
  std::vector<std::string> names;  // the kernel of each range in the image, from the launch callback
  size_t launched = 0, written = 0, dropped = 0;
  bool running = false;

  bool start() {
    auto ip = params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    ip.pRangeProfilerObject = obj;
    ip.counterDataSize = data.size();
    ip.pCounterData = data.data();
    if (!ok("range profiler counter data", cuptiRangeProfilerCounterDataImageInitialize(&ip), dev)) return false;
    auto sp = params<CUpti_RangeProfiler_SetConfig_Params>(CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
    sp.pRangeProfilerObject = obj;
    sp.configSize = cfg.image.size();
    sp.pConfig = cfg.image.data();
    sp.counterDataImageSize = data.size();
    sp.pCounterDataImage = data.data();
    sp.range = CUPTI_AutoRange;
    sp.replayMode = CUPTI_KernelReplay;
    sp.maxRangesPerPass = kRangesPerImage;
    sp.numNestingLevels = 1;
    sp.minNestingLevel = 1;
    sp.passIndex = 0;
    sp.targetNestingLevel = 0;
    if (!ok("range profiler set config", cuptiRangeProfilerSetConfig(&sp), dev)) return false;
    auto st = params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
    st.pRangeProfilerObject = obj;
    running = ok("range profiler start", cuptiRangeProfilerStart(&st), dev);
    launched = 0;
    names.clear();
    return running;
  }

  bool setup(CUcontext c) {
    ctx = c;
    dev = device_of(c);
    Timed t("range profiler setup", dev);
    const char* chip = chip_of(dev);
    if (!chip) return false;
    auto ap = params<CUpti_Profiler_GetCounterAvailability_Params>(CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
    ap.ctx = ctx;
    if (!ok("counter availability", cuptiProfilerGetCounterAvailability(&ap), dev)) return false;
    std::vector<uint8_t> avail(ap.counterAvailabilityImageSize);
    ap.pCounterAvailabilityImage = avail.data();
    if (!ok("counter availability", cuptiProfilerGetCounterAvailability(&ap), dev)) return false;
    const char* set = std::getenv("UMSCOPE_COUNTER_SET");
    bool memory = set && std::strcmp(set, "memory") == 0;
    metrics = env_list("UMSCOPE_COUNTER_METRICS", memory ? kMemory : kLink);
    if (!cfg.build(CUPTI_PROFILER_TYPE_RANGE_PROFILER, chip, avail.data(), metrics, dev)) return false;
    write_config("range", dev, chip, metrics, cfg.passes, ",\"range\":\"auto\",\"replay\":\"kernel\"", cfg.skipped);
    auto ep = params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
    ep.ctx = ctx;
    if (!ok("range profiler enable", cuptiRangeProfilerEnable(&ep), dev)) return false;
    obj = ep.pRangeProfilerObject;
    auto names = c_names(metrics);
    auto sp = params<CUpti_RangeProfiler_GetCounterDataSize_Params>(CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
    sp.pRangeProfilerObject = obj;
    sp.pMetricNames = names.data();
    sp.numMetrics = names.size();
    sp.maxNumOfRanges = kRangesPerImage;
    sp.maxNumRangeTreeNodes = kRangesPerImage;
    if (!ok("range profiler counter data size", cuptiRangeProfilerGetCounterDataSize(&sp), dev)) return false;
    data.resize(sp.counterDataSize);
    return start();
  }

  // Stops, decodes and writes the ranges collected so far; restarts when `again`.
  void flush(bool again) {
    if (!running) return;
    Timed t("range profiler collect", dev);
    auto st = params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
    st.pRangeProfilerObject = obj;
    running = false;
    if (!ok("range profiler stop", cuptiRangeProfilerStop(&st), dev)) return;
    auto dp = params<CUpti_RangeProfiler_DecodeData_Params>(CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
    dp.pRangeProfilerObject = obj;
    if (!ok("range profiler decode", cuptiRangeProfilerDecodeData(&dp), dev)) return;
    dropped += dp.numOfRangeDropped;
    auto ip = params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
    ip.pCounterDataImage = data.data();
    ip.counterDataImageSize = data.size();
    if (!ok("range profiler data info", cuptiRangeProfilerGetCounterDataInfo(&ip), dev)) return;
    std::vector<double> v;
    for (size_t i = 0; i < ip.numTotalRanges; ++i) {
      auto rp = params<CUpti_RangeProfiler_CounterData_GetRangeInfo_Params>(CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE);
      rp.pCounterDataImage = data.data();
      rp.counterDataImageSize = data.size();
      rp.rangeIndex = i;
      rp.rangeDelimiter = "/";
      const char* range = ok("range name", cuptiRangeProfilerCounterDataGetRangeInfo(&rp), dev) ? rp.rangeName : "?";
      if (!cfg.evaluate(data, i, metrics, v, dev)) continue;
      std::lock_guard<std::mutex> lk(g_io);
      std::fprintf(g_out, "{\"k\":\"range\",\"dev\":%d,\"i\":%zu,\"n\":", dev, written++);
      json_string(g_out, i < names.size() ? names[i].c_str() : range);
      std::fputs(",\"rn\":", g_out);
      json_string(g_out, range);
      std::fputc(',', g_out);
      write_values(g_out, metrics, v);
      std::fputs("}\n", g_out);
    }
    if (dp.numOfRangeDropped) {
      std::lock_guard<std::mutex> lk(g_io);
      std::fprintf(g_out, "{\"k\":\"dropped\",\"profiler\":\"range\",\"dev\":%d,\"n\":%zu}\n", dev,
                   dp.numOfRangeDropped);
    }
    std::fflush(g_out);
    if (again) start();
  }

  void disable() {
    flush(false);
    if (obj) {
      auto dp = params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
      dp.pRangeProfilerObject = obj;
      ok("range profiler disable", cuptiRangeProfilerDisable(&dp), dev);
      obj = nullptr;
    }
  }
};

// ---- PM sampling: the device's byte counters over time --------------------------------------------
struct Sampler;
void settle_setup(Sampler* s);

struct Sampler {
  int dev = -1;
  std::vector<std::string> metrics;
  HostConfig cfg;
  CUpti_PmSampling_Object* obj = nullptr;
  std::vector<uint8_t> data;
  std::thread thread;
  pid_t thread_pid = 0;
  std::mutex mu;
  std::condition_variable wake;
  bool stop = false;
  size_t written = 0;
  uint64_t period_ns = 1000000;
  // Samples per counter data image: the decoding thread empties the hardware buffer every 50 ms (50 samples at
  // the default 1 ms) and decodes again while the image fills, so 256 loses nothing; each sample takes about
  // 18 KiB of image, and CUPTI initialises the whole image at the start and after every decode (4096 samples:
  // 74 MB, 19-24 ms at the start and a quarter of the decoding thread's time on the H100).
  size_t max_samples = 256;
  // The hardware buffer the GPU writes samples into (pinned host memory): setting up 256 MiB took 174-204 ms
  // in the program's path on the H100, 32 MiB 80 ms, 16 MiB 67-72 ms. With 16 MiB a 10 s SRAD run's PCIe total
  // was that of the 256 MiB buffer (1.078 and 1.081 GB) and the known-bytes tests passed; an overflow would be
  // recorded ("dropped").
  size_t hw_buffer = size_t(16) << 20;
  bool tried = false;
  const char* setup_where = "context";  // "thread": set up beside the program (UMSCOPE_COUNTER_ASYNC)
  // Set-up beside the program (UMSCOPE_COUNTER_ASYNC, the gate below); state under g_gate_mu.
  enum class Setup { none, pending, running, done, abandoned } setup_state = Setup::none;
  CUcontext setup_ctx = nullptr;
  std::thread::id creator;  // the thread that created the context
  std::thread setup_thread;
  pid_t setup_pid = 0;
  // The decoding thread's own work, summed (written as phases at the end): CUPTI's decode, the metrics'
  // evaluation, and the whole of each round.
  uint64_t decode_ns = 0, eval_ns = 0, round_ns = 0;
  long long decodes = 0, evals = 0, rounds = 0;

  explicit Sampler(int d) : dev(d) {
    const char* pe = std::getenv("UMSCOPE_COUNTER_PERIOD_US");
    if (pe && std::atoll(pe) > 0) period_ns = static_cast<uint64_t>(std::atoll(pe)) * 1000;
    const char* hb = std::getenv("UMSCOPE_PM_BUFFER_MB");
    if (hb && std::atoll(hb) > 0) hw_buffer = static_cast<size_t>(std::atoll(hb)) << 20;
    const char* ms = std::getenv("UMSCOPE_PM_MAX_SAMPLES");
    if (ms && std::atoll(ms) > 0) max_samples = static_cast<size_t>(std::atoll(ms));
  }

  // The device's counter availability image (two calls: the size, then the image: 0.02 ms and 145-185 ms on the
  // H100, the first profiler call on the device). It cannot be skipped: with an image saved from an earlier run
  // and no query the program died of SIGSEGV, and so it did with no image at all (which CUPTI's host API takes for
  // the chips it knew at release; the hardware buffer's set-up then took 104-134 ms instead of 65-75) (H100, CUDA
  // 13.0; docs/counters.md).
  bool availability(std::vector<uint8_t>& avail) {
    Timed whole("counter availability", dev);
    auto ap = params<CUpti_PmSampling_GetCounterAvailability_Params>(CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE);
    ap.deviceIndex = static_cast<size_t>(dev);
    {
      Timed t("counter availability: size", dev);
      if (!ok("PM sampling counter availability", cuptiPmSamplingGetCounterAvailability(&ap), dev)) return false;
    }
    avail.assign(ap.counterAvailabilityImageSize, 0);
    ap.pCounterAvailabilityImage = avail.data();
    Timed t("counter availability: image", dev);
    return ok("PM sampling counter availability", cuptiPmSamplingGetCounterAvailability(&ap), dev);
  }

  // Everything before the device's sampler is enabled: chip, counter availability, the configuration image and
  // the host object that evaluates the samples (6-20 ms).
  bool prepare() {
    Timed whole("PM sampling prepare", dev);
    const char* chip;
    {
      Timed t("chip name", dev);
      chip = chip_of(dev);
    }
    if (!chip) return false;
    std::vector<uint8_t> avail;
    if (!availability(avail)) return false;
    metrics = env_list("UMSCOPE_SAMPLE_METRICS", kSampled);
    if (!cfg.build(CUPTI_PROFILER_TYPE_PM_SAMPLING, chip, avail.data(), metrics, dev)) return false;
    char extra[200];
    std::snprintf(extra, sizeof extra, ",\"period_ns\":%llu,\"hw_buffer\":%zu,\"max_samples\":%zu,\"setup\":\"%s\"",
                  static_cast<unsigned long long>(period_ns), hw_buffer, max_samples, setup_where);
    write_config("pm_sampling", dev, chip, metrics, cfg.passes, extra, cfg.skipped);
    return true;
  }

  // Enables PM sampling on the device and starts it with the prepared configuration (before the program's first
  // work on the device).
  bool start() {
    Timed whole("PM sampling start (all)", dev);
    {
      Timed t("PM sampling enable", dev);
      auto ep = params<CUpti_PmSampling_Enable_Params>(CUpti_PmSampling_Enable_Params_STRUCT_SIZE);
      ep.deviceIndex = static_cast<size_t>(dev);
      if (!ok("PM sampling enable", cuptiPmSamplingEnable(&ep), dev)) return false;
      obj = ep.pPmSamplingObject;
    }
    {
      Timed t("PM sampling set config", dev);
      auto sp = params<CUpti_PmSampling_SetConfig_Params>(CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE);
      sp.pPmSamplingObject = obj;
      sp.configSize = cfg.image.size();
      sp.pConfig = cfg.image.data();
      sp.hardwareBufferSize = hw_buffer;
      sp.samplingInterval = period_ns;
      sp.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
      sp.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
      if (!ok("PM sampling set config", cuptiPmSamplingSetConfig(&sp), dev)) return false;
    }
    {
      Timed t("counter data image", dev);
      auto names = c_names(metrics);
      auto cp = params<CUpti_PmSampling_GetCounterDataSize_Params>(CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE);
      cp.pPmSamplingObject = obj;
      cp.pMetricNames = names.data();
      cp.numMetrics = names.size();
      cp.maxSamples = static_cast<uint32_t>(max_samples);
      if (!ok("PM sampling counter data size", cuptiPmSamplingGetCounterDataSize(&cp), dev)) return false;
      data.resize(cp.counterDataSize);
      if (!init_data()) return false;
    }
    {
      Timed t("PM sampling start", dev);
      auto st = params<CUpti_PmSampling_Start_Params>(CUpti_PmSampling_Start_Params_STRUCT_SIZE);
      st.pPmSamplingObject = obj;
      if (!ok("PM sampling start", cuptiPmSamplingStart(&st), dev)) return false;
    }
    thread_pid = getpid();
    thread = std::thread([this] {
      std::unique_lock<std::mutex> lk(mu);
      while (!wake.wait_for(lk, std::chrono::milliseconds(50), [this] { return stop; })) {
        lk.unlock();
        decode();
        lk.lock();
      }
    });
    return true;
  }

  bool init_data() {
    auto ip = params<CUpti_PmSampling_CounterDataImage_Initialize_Params>(CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    ip.pPmSamplingObject = obj;
    ip.counterDataSize = data.size();
    ip.pCounterData = data.data();
    return ok("PM sampling counter data", cuptiPmSamplingCounterDataImageInitialize(&ip), dev);
  }

  // Moves the hardware buffer's samples into the counter data image and writes the completed ones.
  void decode() {
    const uint64_t r0 = wall_ns();
    ++rounds;
    for (int round = 0; round < 1024; ++round) {
      auto dp = params<CUpti_PmSampling_DecodeData_Params>(CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE);
      dp.pPmSamplingObject = obj;
      dp.pCounterDataImage = data.data();
      dp.counterDataImageSize = data.size();
      uint64_t w0 = wall_ns();
      CUptiResult dr = cuptiPmSamplingDecodeData(&dp);
      decode_ns += wall_ns() - w0;
      ++decodes;
      if (!ok("PM sampling decode", dr, dev)) break;
      if (dp.overflow) {
        std::lock_guard<std::mutex> lk(g_io);
        std::fprintf(g_out, "{\"k\":\"dropped\",\"profiler\":\"pm_sampling\",\"dev\":%d,\"overflow\":1}\n", dev);
      }
      auto ip = params<CUpti_PmSampling_GetCounterDataInfo_Params>(CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE);
      ip.pCounterDataImage = data.data();
      ip.counterDataImageSize = data.size();
      if (!ok("PM sampling data info", cuptiPmSamplingGetCounterDataInfo(&ip), dev)) break;
      std::vector<double> v;
      for (size_t i = 0; i < ip.numCompletedSamples; ++i) {
        auto sp = params<CUpti_PmSampling_CounterData_GetSampleInfo_Params>(CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE);
        sp.pPmSamplingObject = obj;
        sp.pCounterDataImage = data.data();
        sp.counterDataImageSize = data.size();
        sp.sampleIndex = i;
        if (!ok("PM sampling sample info", cuptiPmSamplingCounterDataGetSampleInfo(&sp), dev)) continue;
        w0 = wall_ns();
        bool evaluated = cfg.evaluate(data, i, metrics, v, dev);
        eval_ns += wall_ns() - w0;
        ++evals;
        if (!evaluated) continue;
        std::lock_guard<std::mutex> lk(g_io);
        std::fprintf(g_out, "{\"k\":\"sample\",\"dev\":%d,\"i\":%zu,\"s\":%llu,\"e\":%llu,", dev, written++,
                     static_cast<unsigned long long>(sp.startTimestamp),
                     static_cast<unsigned long long>(sp.endTimestamp));
        write_values(g_out, metrics, v);
        std::fputs("}\n", g_out);
      }
      std::fflush(g_out);
      if (ip.numCompletedSamples > 0) init_data();
      if (dp.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) break;
    }
    round_ns += wall_ns() - r0;
  }

  void finish() {
    settle_setup(this);
    if (!obj) return;
    Timed whole("PM sampling finish", dev);
    {
      Timed t("decoding thread stop", dev);
      {
        std::lock_guard<std::mutex> lk(mu);
        stop = true;
      }
      wake.notify_all();
      join_here(thread, thread_pid);
    }
    {
      Timed t("PM sampling stop", dev);
      auto st = params<CUpti_PmSampling_Stop_Params>(CUpti_PmSampling_Stop_Params_STRUCT_SIZE);
      st.pPmSamplingObject = obj;
      ok("PM sampling stop", cuptiPmSamplingStop(&st), dev);
    }
    const uint64_t w0 = wall_ns();
    const uint64_t d0 = decode_ns, e0 = eval_ns;
    const long long n0 = evals;
    decode();
    phase("final decode (CUPTI)", dev, w0, w0 + (decode_ns - d0));
    phase("final evaluate", dev, w0, w0 + (eval_ns - e0), evals - n0);
    phase("final decode and write", dev, w0, wall_ns());
    // The decoding thread's work over the run (summed; w0 = 0): it overlaps the program, not in its path.
    phase("run: decode rounds (summed)", dev, 0, round_ns, rounds);
    phase("run: CUPTI decode (summed)", dev, 0, decode_ns, decodes);
    phase("run: evaluate (summed)", dev, 0, eval_ns, evals);
    // No cuptiPmSamplingDisable: CUPTI frees the PM sampling object itself when the context goes, and
    // disabling it first made that a double free at exit (glibc abort, exit status 134, on the H100 with
    // CUDA 13.0; with the call left out the same run exited 0 with every sample and the end record).
    obj = nullptr;
  }
};

bool g_kernel = false, g_sample = false;
std::mutex g_state;
std::map<CUcontext, KernelProfiler*> g_kernels;
std::map<int, Sampler*> g_samplers;
std::mutex g_init_mu;
bool g_profiler_ready = false;
bool profiler_init() {
  std::lock_guard<std::mutex> lk(g_init_mu);
  if (g_profiler_ready) return true;
  Timed t("profiler initialise");
  auto ip = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  g_profiler_ready = ok("profiler initialise", cuptiProfilerInitialize(&ip));
  return g_profiler_ready;
}

Sampler* sampler_for(int dev) {
  std::lock_guard<std::mutex> lk(g_state);
  auto it = g_samplers.find(dev);
  if (it != g_samplers.end()) return it->second;
  auto* s = new Sampler(dev);
  g_samplers[dev] = s;
  return s;
}

// The preload (on by default with sampling; UMSCOPE_COUNTER_PRELOAD=0 turns it off): CUPTI's profiler loads its host and target libraries (libnvperf_host,
// 32 MB, and libnvperf_target, beside libcupti) at its initialisation, in the program's path at the first
// context (70-105 ms with them on the H100; loading them alone took 80 and 54 ms in a fresh process). A thread
// started when the library is attached (at cuInit) loads them with dlopen while the driver creates the
// context, and nothing else: CUPTI's profiler calls made on such a thread at that time corrupted the heap
// (glibc abort at exit, H100, CUDA 13.0); dlopen is the loader's own thread-safe operation.
std::thread g_preload;
pid_t g_preload_pid = 0;
std::mutex g_preload_mu;

void preload_libraries() {
  const uint64_t w0 = wall_ns();
  Dl_info info{};
  int loaded = 0;
  if (dladdr(reinterpret_cast<void*>(&cuptiGetVersion), &info) && info.dli_fname) {
    std::string dir = info.dli_fname;
    dir = dir.substr(0, dir.rfind('/') + 1);
    for (const char* lib : {"libnvperf_host.so", "libnvperf_target.so"})
      if (dlopen((dir + lib).c_str(), RTLD_NOW | RTLD_LOCAL)) ++loaded;  // kept loaded: CUPTI uses them
  }
  phase("preload profiler libraries (thread)", -1, w0, wall_ns(), loaded);
}

void join_preload() {
  std::lock_guard<std::mutex> lk(g_preload_mu);
  join_here(g_preload, g_preload_pid);
}

// ---- The set-up beside the program (UMSCOPE_COUNTER_ASYNC; on by default with PM sampling alone) --------------
// Setting up PM sampling (the device's counter availability, the configuration, the hardware buffer: 230-250 ms on
// the H100) need not hold up the program's start: the program's own host work after its context exists
// (allocating, reading input, initialising data on the CPU) can go on beside it. Only the GPU's work must wait, so
// that no byte goes uncounted. So: at the context's creation nothing of CUPTI's profiler is called (profiler calls
// made while the driver was creating the context corrupted the heap, docs/counters.md); the driver-API callbacks
// are switched on; the set-up thread starts at the first driver call the creating thread makes after that (the
// context's creation has returned by then), or at the first GPU work of any thread; every driver call that puts
// work or data movement on the GPU (launches, copies, sets, prefetches, graph launches, stream memory operations)
// waits at its entry until every pending set-up has finished. Then the driver-API callbacks go off again.
// A context that ends before any GPU work was asked of it gets no sampler (nothing was there to count).
CUpti_SubscriberHandle g_sub = nullptr;
bool g_async = false;
std::mutex g_gate_mu;
std::condition_variable g_gate_cv;
int g_unfinished = 0;              // set-ups pending or running (under g_gate_mu)
std::vector<Sampler*> g_pending;   // samplers whose set-up is to run beside the program (under g_gate_mu)
std::atomic<bool> g_gate_on{false};
std::mutex g_setup_mu;             // one set-up at a time (each device's CUPTI calls, never two at once)
thread_local bool t_setup_thread = false;
constexpr int kGateTimeoutS = 20;  // never hang a program on the counters: after this, its work goes ahead

bool gpu_work(const char* fn) {
  if (!fn) return false;
  for (const char* p : {"cuLaunch", "cuMemcpy", "cuMemset", "cuMemPrefetch", "cuMemDiscard", "cuMemBatch",
                        "cuGraphLaunch", "cuStreamWriteValue", "cuStreamWaitValue", "cuStreamBatchMemOp",
                        "cuGraphicsMap"})
    if (std::strncmp(fn, p, std::strlen(p)) == 0) return true;
  return false;
}

// Done with a set-up (under g_gate_mu): when none is left, the gate opens.
void setup_finished_locked() {
  if (--g_unfinished == 0) g_gate_on.store(false);
  g_gate_cv.notify_all();
}

// The driver-API callbacks off again once no set-up is left (and no range profiler needs them). CUPTI is never
// called with g_gate_mu held: a thread waiting at the gate is inside one of CUPTI's callbacks.
void gate_quiet() {
  if (g_kernel || !g_sub) return;
  {
    std::lock_guard<std::mutex> lk(g_gate_mu);
    if (g_unfinished) return;
  }
  cuptiEnableDomain(0, g_sub, CUPTI_CB_DOMAIN_DRIVER_API);
  bool again;
  {
    std::lock_guard<std::mutex> lk(g_gate_mu);
    again = g_unfinished > 0;  // another device's context came meanwhile: its gate stays
  }
  if (again) cuptiEnableDomain(1, g_sub, CUPTI_CB_DOMAIN_DRIVER_API);
}

void set_up(Sampler* s) {
  t_setup_thread = true;
  {
    Timed t("set-up thread (beside the program)", s->dev);
    // The context current here too, as on the thread that created it.
    using SetFn = int (*)(CUcontext);
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    auto set = cuda ? reinterpret_cast<SetFn>(dlsym(cuda, "cuCtxSetCurrent")) : nullptr;
    if (set) set(s->setup_ctx);
    if (cuda) dlclose(cuda);
    join_preload();
    std::lock_guard<std::mutex> one(g_setup_mu);
    if (!profiler_init() || !s->prepare() || !s->start()) s->obj = nullptr;
  }
  {
    std::lock_guard<std::mutex> lk(g_gate_mu);
    s->setup_state = Sampler::Setup::done;
    setup_finished_locked();
  }
  gate_quiet();
}

// Starts, on their own thread, the pending set-ups that may start now (under g_gate_mu): those whose context's
// creating thread is the caller (its creation has returned), or all where the caller is about to use the GPU.
void spawn_locked(bool all) {
  const auto me = std::this_thread::get_id();
  for (Sampler* s : g_pending) {
    if (s->setup_state != Sampler::Setup::pending || !(all || s->creator == me)) continue;
    s->setup_state = Sampler::Setup::running;
    s->setup_pid = getpid();
    s->setup_thread = std::thread(set_up, s);
  }
}

// At the entry of every driver call while a set-up is unfinished.
void gate(const char* fn) {
  const bool work = gpu_work(fn);
  std::unique_lock<std::mutex> lk(g_gate_mu);
  if (g_unfinished == 0) return;
  spawn_locked(work);
  if (!work) return;
  const uint64_t w0 = wall_ns();
  const bool done = g_gate_cv.wait_for(lk, std::chrono::seconds(kGateTimeoutS), [] { return g_unfinished == 0; });
  lk.unlock();
  phase(done ? "GPU work waited for the set-up" : "GPU work waited for the set-up: gave up", -1, w0, wall_ns());
  if (!done) g_gate_on.store(false);  // never wait again: the error record says the counters may have started late
  if (!done && g_out) {
    std::lock_guard<std::mutex> io(g_io);
    std::fprintf(g_out, "{\"k\":\"error\",\"what\":\"start the counters before the GPU's first work\",\"dev\":-1,"
                 "\"code\":-1,\"cupti\":\"the set-up took over %d s; GPU work (%s) went ahead, perhaps uncounted\"}\n",
                 kGateTimeoutS, fn);
    std::fflush(g_out);
  }
}

// Before a sampler is finished (its context ending, or the exit): a set-up never started is dropped (no GPU work was
// asked for), one under way is waited for.
void settle_setup(Sampler* s) {
  std::unique_lock<std::mutex> lk(g_gate_mu);
  if (s->setup_state == Sampler::Setup::pending) {
    s->setup_state = Sampler::Setup::abandoned;
    setup_finished_locked();
    lk.unlock();
    gate_quiet();
    return;
  }
  lk.unlock();
  if (s->setup_thread.joinable()) {
    Timed t("set-up thread join", s->dev);
    join_here(s->setup_thread, s->setup_pid);
  }
}

void on_context(CUcontext ctx) {
  Timed t("context created: counters");
  if (!g_sample) return;
  int dev = device_of(ctx);
  if (dev < 0) return;
  Sampler* s = sampler_for(dev);
  if (g_async) {
    {
      std::lock_guard<std::mutex> st(g_state);
      if (s->tried) return;  // started (or to be started) for another context on the device
      s->tried = true;
      std::lock_guard<std::mutex> lk(g_gate_mu);
      s->setup_where = "thread";
      s->setup_ctx = ctx;
      s->creator = std::this_thread::get_id();
      s->setup_state = Sampler::Setup::pending;
      g_pending.push_back(s);
      ++g_unfinished;
      g_gate_on.store(true);
    }
    ok("watch the program's first GPU work", cuptiEnableDomain(1, g_sub, CUPTI_CB_DOMAIN_DRIVER_API), dev);
    return;
  }
  join_preload();
  std::lock_guard<std::mutex> lk(g_state);
  if (s->tried) return;  // started (or failed to) for another context on the device
  s->tried = true;
  if (!profiler_init() || !s->prepare() || !s->start()) s->obj = nullptr;
}

void on_launch(CUcontext ctx, bool enter, const char* symbol) {
  if (!g_kernel) return;
  std::lock_guard<std::mutex> lk(g_state);
  auto it = g_kernels.find(ctx);
  if (enter) {
    if (it == g_kernels.end()) {
      if (!profiler_init()) return;
      auto* k = new KernelProfiler;
      g_kernels[ctx] = k;
      if (!k->setup(ctx)) k->running = false;
      it = g_kernels.find(ctx);
    }
    if (it->second->running) it->second->names.push_back(symbol ? symbol : "?");
    return;
  }
  if (it == g_kernels.end() || !it->second->running) return;
  if (++it->second->launched >= kRangesPerImage) it->second->flush(true);
}

// Everything is collected before the context goes: the CUDA runtime's own exit handler can destroy it
// before ours runs (then CUPTI has freed the profilers' objects, and stopping them again freed twice).
void on_context_end(CUcontext ctx) {
  Timed t("context destroyed: counters");
  join_preload();
  std::lock_guard<std::mutex> lk(g_state);
  auto it = g_kernels.find(ctx);
  if (it != g_kernels.end()) it->second->disable();
  auto s = g_samplers.find(device_of(ctx));
  if (s != g_samplers.end()) s->second->finish();
}

void finish() {
  if (g_done.exchange(true)) return;
  {
    Timed t("exit: counters");
    join_preload();
    std::lock_guard<std::mutex> lk(g_state);
    for (auto& kv : g_kernels) kv.second->disable();
    for (auto& kv : g_samplers) kv.second->finish();
  }
  std::lock_guard<std::mutex> lk(g_io);
  if (g_out) {
    std::fprintf(g_out, "{\"k\":\"end\",\"w\":%llu}\n", static_cast<unsigned long long>(wall_ns()));
    std::fflush(g_out);
  }
}

}  // namespace

namespace umcounters {

// Hooks for a library that owns CUPTI's one subscriber (libumtrace, when $UMSCOPE_COUNTERS_FILE is set):
// attach() enables the callbacks the counters need on `sub`; every callback is passed to callback().
bool attach(CUpti_SubscriberHandle sub, CUptiResult subscribed) {
  const char* path = std::getenv("UMSCOPE_COUNTERS_FILE");
  if (g_out) return true;
  const uint64_t w_attach = wall_ns();
  g_out = std::fopen(path && *path ? path : "umcounters.jsonl", "w");
  if (!g_out) return false;
  for (auto& m : env_list("UMSCOPE_COUNTERS", {"sample"})) {
    if (m == "kernel") g_kernel = true;
    if (m == "sample") g_sample = true;
  }
  uint64_t t0 = 0;
  cuptiGetTimestamp(&t0);
  std::fprintf(g_out, "{\"k\":\"start\",\"t\":%llu,\"w\":%llu,\"kernel\":%s,\"sample\":%s}\n",
               static_cast<unsigned long long>(t0), static_cast<unsigned long long>(wall_ns()),
               g_kernel ? "true" : "false", g_sample ? "true" : "false");
  std::fflush(g_out);
  if (!ok("subscribe", subscribed)) return false;  // another CUPTI tool holds the one subscriber
  g_sub = sub;
  const char* async = std::getenv("UMSCOPE_COUNTER_ASYNC");
  g_async = g_sample && !g_kernel && !(async && *async == '0');
  // A child forked while a set-up was under way has no set-up thread: its driver calls must not wait for one.
  if (g_async) pthread_atfork(nullptr, nullptr, [] { g_gate_on.store(false); });
  ok("watch context creation", cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
  ok("watch context destruction",
     cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING));
  if (g_kernel) {
    for (CUpti_CallbackId id : {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
                                CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
                                CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
                                CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz})
      ok("watch kernel launches", cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id));
  }
  std::atexit(finish);
  const char* preload = std::getenv("UMSCOPE_COUNTER_PRELOAD");
  if (g_sample && !(preload && *preload == '0')) {
    std::lock_guard<std::mutex> lk(g_preload_mu);
    g_preload_pid = getpid();
    g_preload = std::thread(preload_libraries);
  }
  phase("attach", -1, w_attach, wall_ns());
  return true;
}

void callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (!g_out || g_done.load()) return;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    auto* r = static_cast<const CUpti_ResourceData*>(data);
    if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) on_context(r->context);
    else if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) on_context_end(r->context);
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    auto* c = static_cast<const CUpti_CallbackData*>(data);
    if (g_gate_on.load(std::memory_order_acquire) && c->callbackSite == CUPTI_API_ENTER && !t_setup_thread)
      gate(c->functionName);
    on_launch(c->context, c->callbackSite == CUPTI_API_ENTER, c->symbolName);
  }
}

}  // namespace umcounters

#ifdef UMSCOPE_COUNTERS_INJECTION
// libumcounters on its own: the driver calls this when CUDA_INJECTION64_PATH names the library.
namespace {
void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  umcounters::callback(domain, cbid, data);
}

// When the loader finalises this library at exit.
__attribute__((destructor)) void on_unload() {
  umprofiler::write_finalised(g_out, g_io, "exit: libumcounters finalised");
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  CUpti_SubscriberHandle sub = nullptr;
  umcounters::attach(sub, cuptiSubscribe(&sub, on_callback, nullptr));
  return 1;
}
#endif
