// libumtrace: a CUPTI library the CUDA driver loads into an unmodified
// program through CUDA_INJECTION64_PATH. It records unified-memory counters
// (bytes host-to-device and device-to-host with their cause, GPU page faults
// with address and access type, CPU page faults, thrashing, throttling,
// remote maps), allocations, kernels, copies and NVTX ranges, as JSON lines into
// $UMSCOPE_TRACE_FILE. Buffers are written as CUPTI completes them (and
// flushed every 100 ms), at exit, and on a fatal signal where possible.
#include <cupti.h>
#include <time.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>

#include "counters.hpp"  // hardware counters share CUPTI's one subscriber (with $UMSCOPE_COUNTERS_FILE)

namespace {

FILE* g_out = nullptr;
std::mutex g_mu;
std::atomic<bool> g_done{false};
constexpr size_t kBufferBytes = 8 << 20;

void note(const char* what, CUptiResult r) {
  if (!g_out || r == CUPTI_SUCCESS) return;
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  std::lock_guard<std::mutex> lk(g_mu);
  std::fprintf(g_out, "{\"k\":\"error\",\"what\":\"%s\",\"cupti\":\"%s\"}\n", what, s ? s : "?");
  std::fflush(g_out);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void json_string(FILE* f, const char* s) {
  std::fputc('"', f);
  for (; s && *s; ++s) {
    unsigned char c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') std::fprintf(f, "\\%c", c);
    else if (c < 0x20) std::fprintf(f, "\\u%04x", c);
    else std::fputc(c, f);
  }
  std::fputc('"', f);
}

void write_record(FILE* f, CUpti_Activity* rec) {
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER: {
      auto* r = reinterpret_cast<CUpti_ActivityUnifiedMemoryCounter3*>(rec);
      std::fprintf(f,
                   "{\"k\":\"um\",\"c\":%d,\"v\":%llu,\"s\":%llu,\"e\":%llu,\"a\":%llu,\"src\":%u,\"dst\":%u,"
                   "\"f\":%u}\n",
                   static_cast<int>(r->counterKind), static_cast<unsigned long long>(r->value),
                   static_cast<unsigned long long>(r->start), static_cast<unsigned long long>(r->end),
                   static_cast<unsigned long long>(r->address), r->srcId, r->dstId, r->flags);
      break;
    }
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      auto* r = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
      std::fprintf(f, "{\"k\":\"kernel\",\"s\":%llu,\"e\":%llu,\"n\":", static_cast<unsigned long long>(r->start),
                   static_cast<unsigned long long>(r->end));
      json_string(f, r->name);
      std::fprintf(f, "}\n");
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* r = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
      std::fprintf(f, "{\"k\":\"memcpy\",\"b\":%llu,\"ck\":%u,\"s\":%llu,\"e\":%llu}\n",
                   static_cast<unsigned long long>(r->bytes), static_cast<unsigned>(r->copyKind),
                   static_cast<unsigned long long>(r->start), static_cast<unsigned long long>(r->end));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      auto* r = reinterpret_cast<CUpti_ActivityMemory4*>(rec);
      std::fprintf(f, "{\"k\":\"mem\",\"op\":%d,\"mk\":%d,\"a\":%llu,\"b\":%llu,\"t\":%llu}\n",
                   static_cast<int>(r->memoryOperationType), static_cast<int>(r->memoryKind),
                   static_cast<unsigned long long>(r->address), static_cast<unsigned long long>(r->bytes),
                   static_cast<unsigned long long>(r->timestamp));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {  // NVTX (with NVTX_INJECTION64_PATH pointing at libcupti)
      auto* r = reinterpret_cast<CUpti_ActivityMarker2*>(rec);
      std::fprintf(f, "{\"k\":\"marker\",\"fl\":%u,\"t\":%llu,\"id\":%u,\"n\":", static_cast<unsigned>(r->flags),
                   static_cast<unsigned long long>(r->timestamp), r->id);
      if (r->name) json_string(f, r->name);
      else std::fputs("null", f);
      std::fprintf(f, "}\n");
      break;
    }
    default:
      break;
  }
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  if (g_out && valid > 0) {
    std::lock_guard<std::mutex> lk(g_mu);
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) write_record(g_out, rec);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped)
      std::fprintf(g_out, "{\"k\":\"dropped\",\"n\":%zu}\n", dropped);
    std::fflush(g_out);
  }
  std::free(buffer);
}

void finish() {
  if (g_done.exchange(true)) return;
  // The driver hands unified-memory events to CUPTI a little after they happen: flush, give the
  // last ones 50 ms to arrive, flush again.
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  timespec pause{0, 50 * 1000 * 1000};
  nanosleep(&pause, nullptr);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_out) {
    std::fprintf(g_out, "{\"k\":\"end\"}\n");
    std::fflush(g_out);
  }
}

// Unified-memory counters can be configured only once a context exists
// (CUPTI_ERROR_NOT_READY before): enable them on the first context created.
std::atomic<bool> g_um_on{false};

void enable_um() {
  if (g_um_on.exchange(true)) return;
  const CUpti_ActivityUnifiedMemoryCounterKind kinds[] = {
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOD};
  constexpr size_t n = sizeof kinds / sizeof kinds[0];
  CUpti_ActivityUnifiedMemoryCounterConfig cfg[n];
  for (size_t i = 0; i < n; ++i) {
    std::memset(&cfg[i], 0, sizeof cfg[i]);
    cfg[i].scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE;
    cfg[i].kind = kinds[i];
    cfg[i].deviceId = 0;
    cfg[i].enable = 1;
  }
  CUptiResult um = cuptiActivityConfigureUnifiedMemoryCounter(cfg, n);
  note("configure unified-memory counters", um);
  if (um == CUPTI_SUCCESS) note("enable unified memory", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER));
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) enable_um();
  umcounters::callback(domain, cbid, data);
}

void on_fatal(int sig) {
  finish();  // not async-signal-safe: best effort, the program is dying anyway
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  const char* path = std::getenv("UMSCOPE_TRACE_FILE");
  g_out = std::fopen(path && *path ? path : "umtrace.jsonl", "w");
  if (!g_out) return 1;
  uint64_t t0 = 0;
  cuptiGetTimestamp(&t0);
  timespec wall{};
  clock_gettime(CLOCK_REALTIME, &wall);  // to put the trace on the sampler's clock
  std::fprintf(g_out, "{\"k\":\"start\",\"t\":%llu,\"w\":%llu}\n", static_cast<unsigned long long>(t0),
               static_cast<unsigned long long>(wall.tv_sec) * 1000000000ull + static_cast<unsigned long long>(wall.tv_nsec));

  note("register buffers", cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  CUpti_SubscriberHandle sub;
  CUptiResult subscribed = cuptiSubscribe(&sub, on_callback, nullptr);
  note("subscribe", subscribed);
  if (subscribed == CUPTI_SUCCESS)
    note("watch context creation", cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
  if (std::getenv("UMSCOPE_COUNTERS_FILE")) umcounters::attach(sub, subscribed);
  note("enable kernels", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  note("enable copies", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  note("enable allocations", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2));
  note("enable NVTX markers", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MARKER));
  cuptiActivityFlushPeriod(100);
  std::atexit(finish);
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGTERM}) std::signal(sig, on_fatal);
  std::fflush(g_out);
  return 1;
}
