// libumcounters' private header: the helpers and profiler state shared by counters*.cpp (not installed).
#pragma once
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "json_out.hpp"

namespace umcounters {
namespace detail {

// The records' file and its lock (counters.cpp).
extern FILE* g_out;
extern std::mutex g_io;

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

inline void phase(const char* what, int dev, uint64_t w0, uint64_t w1, long long n = -1, long long cpu_ns = -1) {
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
inline void join_here(std::thread& t, pid_t pid) {
  if (!t.joinable()) return;
  if (pid == getpid()) t.join();
  else t.detach();
}

inline bool ok(const char* what, CUptiResult r, int dev = -1) {
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

inline std::vector<std::string> env_list(const char* name, const std::vector<std::string>& fallback) {
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

inline std::vector<const char*> c_names(const std::vector<std::string>& v) {
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

inline void write_values(FILE* f, const std::vector<std::string>& metrics, const std::vector<double>& v) {
  std::fputs("\"m\":{", f);
  for (size_t i = 0; i < metrics.size(); ++i)
    std::fprintf(f, "%s\"%s\":%.17g", i ? "," : "", metrics[i].c_str(), v[i]);
  std::fputc('}', f);
}

inline void write_config(const char* profiler, int dev, const char* chip, const std::vector<std::string>& metrics,
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

inline int device_of(CUcontext ctx) {
  uint32_t d = 0;
  return ok("device of the context", cuptiGetDeviceId(ctx, &d)) ? static_cast<int>(d) : -1;
}

inline const char* chip_of(int dev) {
  auto cp = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  cp.deviceIndex = static_cast<size_t>(dev);
  if (!ok("chip name", cuptiDeviceGetChipName(&cp), dev)) return nullptr;
  return cp.pChipName;
}

// ---- Range Profiler: one range per kernel, per context (counters_range.cpp) ------------------------
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

  bool start();
  bool setup(CUcontext c);
  void flush(bool again);
  void disable();
};

// ---- PM sampling: the device's byte counters over time (counters_sampling.cpp) ----------------------
struct Sampler;
void settle_setup(Sampler* s);  // counters.cpp

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
  // Set-up beside the program (UMSCOPE_COUNTER_ASYNC, the gate in counters.cpp); state under g_gate_mu.
  enum class Setup { none, pending, running, done, abandoned } setup_state = Setup::none;
  CUcontext setup_ctx = nullptr;
  std::thread::id creator;  // the thread that created the context
  std::thread setup_thread;
  pid_t setup_pid = 0;
  // The decoding thread's own work, summed (written as phases at the end): CUPTI's decode, the metrics'
  // evaluation, and the whole of each round.
  uint64_t decode_ns = 0, eval_ns = 0, round_ns = 0;
  long long decodes = 0, evals = 0, rounds = 0;

  explicit Sampler(int d);
  bool availability(std::vector<uint8_t>& avail);
  bool prepare();
  bool start();
  bool init_data();
  void decode();
  void finish();
};

}  // namespace detail
}  // namespace umcounters
