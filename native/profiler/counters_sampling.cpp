// libumcounters' PM sampling: the device's byte counters over the run ($UMSCOPE_COUNTERS=sample; counters.cpp).
#include <chrono>

#include "counters_internal.hpp"

namespace umcounters {
namespace detail {

// PM sampling over the run: link, GPU memory and L1 <-> L2 bytes (the three tiers), as many as the GPU
// allows in one pass (a metric it refuses is left out and named in the config record).
const std::vector<std::string> kSampled = {"pcie__read_bytes.sum", "pcie__write_bytes.sum", "dram__bytes_read.sum",
                                           "dram__bytes_write.sum", "lts__t_sectors_srcunit_tex.sum"};

Sampler::Sampler(int d) : dev(d) {
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
bool Sampler::availability(std::vector<uint8_t>& avail) {
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
bool Sampler::prepare() {
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
bool Sampler::start() {
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

bool Sampler::init_data() {
  auto ip = params<CUpti_PmSampling_CounterDataImage_Initialize_Params>(CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE);
  ip.pPmSamplingObject = obj;
  ip.counterDataSize = data.size();
  ip.pCounterData = data.data();
  return ok("PM sampling counter data", cuptiPmSamplingCounterDataImageInitialize(&ip), dev);
}

// Moves the hardware buffer's samples into the counter data image and writes the completed ones.
void Sampler::decode() {
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

void Sampler::finish() {
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

}  // namespace detail
}  // namespace umcounters
