// libumcounters' Range Profiler: one range per kernel launch, per context ($UMSCOPE_COUNTERS=kernel; counters.cpp).
#include "counters_internal.hpp"

namespace umcounters {
namespace detail {

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

bool KernelProfiler::start() {
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

bool KernelProfiler::setup(CUcontext c) {
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
void KernelProfiler::flush(bool again) {
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

void KernelProfiler::disable() {
  flush(false);
  if (obj) {
    auto dp = params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
    dp.pRangeProfilerObject = obj;
    ok("range profiler disable", cuptiRangeProfilerDisable(&dp), dev);
    obj = nullptr;
  }
}

}  // namespace detail
}  // namespace umcounters
