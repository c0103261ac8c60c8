// libumtrace: a CUPTI library the CUDA driver loads into an unmodified
// program through CUDA_INJECTION64_PATH. It records unified-memory counters
// (bytes host-to-device and device-to-host with their cause, GPU page faults
// with address and access type, CPU page faults, thrashing, throttling,
// remote maps), allocations, kernels, copies and NVTX ranges, as JSON lines into
// $UMSCOPE_TRACE_FILE (FILE.PID for every later process of the program).
// Buffers are written as CUPTI completes them (and flushed every 100 ms), at
// exit, and on a fatal signal where possible. Beside CUPTI's records (which
// the driver drops when its event queue is full) it reads the UVM driver's own
// byte and fault counters at exit (docs/tracing.md).
#include <cupti.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <sys/file.h>
#include <pthread.h>
#include <unistd.h>
#include <time.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <algorithm>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "counters.hpp"  // hardware counters share CUPTI's one subscriber (with $UMSCOPE_COUNTERS_FILE)
#include "json_out.hpp"
#include "managed_apply.hpp"  // umscope place --managed: UMSCOPE_UMTRACE_MANAGED
#include "uvm_counters.hpp"  // the driver's byte and fault counters, read at the end
#include "uvm_events.hpp"  // the driver's fault events, with UMSCOPE_UMTRACE_UVM_EVENTS=1

namespace {

FILE* g_out = nullptr;
std::mutex g_mu;
pid_t g_setup_pid = 0;  // the process that opened the trace
std::atomic<bool> g_done{false};
// UM records written, per counter kind (1..8), and the records CUPTI said it dropped: the trace's own
// accounting, written at the end so a reader can tell a quiet driver from a lost record.
unsigned long long g_um_written[16] = {};
unsigned long long g_um_bytes[16] = {};
unsigned long long g_dropped = 0;
// Activity buffers of 512 KiB (UMSCOPE_UMTRACE_BUFFER_KB; they were 8 MiB): CUPTI's periodic flush delivers only full
// buffers, and a big buffer kept a whole run's records until the exit's forced flush, which then wrote them in the
// program's path (SRAD, 600 iterations, H100: all 13 000-20 000 records in 2 buffers at the exit, 11-19 ms of writing;
// 3000 iterations: an exit flush of 45-73 ms). Smaller buffers fill, and CUPTI hands them over, while the program runs.
size_t buffer_bytes() {
  static const size_t bytes = [] {
    const char* e = std::getenv("UMSCOPE_UMTRACE_BUFFER_KB");
    const long kb = e && *e ? std::atol(e) : 512;
    return static_cast<size_t>(kb > 0 ? kb : 512) << 10;
  }();
  return bytes;
}

void note(const char* what, CUptiResult r) {
  if (!g_out || r == CUPTI_SUCCESS) return;
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  std::lock_guard<std::mutex> lk(g_mu);
  std::fprintf(g_out, "{\"k\":\"error\",\"what\":\"%s\",\"cupti\":\"%s\"}\n", what, s ? s : "?");
  std::fflush(g_out);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  const size_t bytes = buffer_bytes();
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, bytes));
  *size = *buffer ? bytes : 0;
  *max_records = 0;
}

using umprofiler::json_string;
using umprofiler::wall_ns;

// A phase of the tracer's own work (umprofiler::write_phase): where its cost in the program's wall time goes.
void phase(const char* what, uint64_t w0, uint64_t w1) {
  if (!g_out) return;
  std::lock_guard<std::mutex> lk(g_mu);
  umprofiler::write_phase(g_out, what, -1, w0, w1);
}

void write_record(FILE* f, CUpti_Activity* rec) {
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER: {
      auto* r = reinterpret_cast<CUpti_ActivityUnifiedMemoryCounter3*>(rec);
      unsigned c = static_cast<unsigned>(r->counterKind) & 15u;
      ++g_um_written[c];
      g_um_bytes[c] += r->value;
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
      // g, bl: the launch grid and block; rg, sh: registers per thread and shared memory per block (static +
      // dynamic, bytes): what the blocks resident per SM follow from (umsim's fault concurrency).
      std::fprintf(f,
                   "{\"k\":\"kernel\",\"d\":%u,\"s\":%llu,\"e\":%llu,\"g\":[%d,%d,%d],\"bl\":[%d,%d,%d],"
                   "\"rg\":%u,\"sh\":%llu,\"n\":",
                   r->deviceId, static_cast<unsigned long long>(r->start), static_cast<unsigned long long>(r->end),
                   r->gridX, r->gridY, r->gridZ, r->blockX, r->blockY, r->blockZ,
                   static_cast<unsigned>(r->registersPerThread),
                   static_cast<unsigned long long>(r->staticSharedMemory) + r->dynamicSharedMemory);
      json_string(f, r->name);
      std::fprintf(f, "}\n");
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* r = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
      std::fprintf(f, "{\"k\":\"memcpy\",\"d\":%u,\"b\":%llu,\"ck\":%u,\"s\":%llu,\"e\":%llu}\n", r->deviceId,
                   static_cast<unsigned long long>(r->bytes), static_cast<unsigned>(r->copyKind),
                   static_cast<unsigned long long>(r->start), static_cast<unsigned long long>(r->end));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      auto* r = reinterpret_cast<CUpti_ActivityMemory4*>(rec);
      std::fprintf(f, "{\"k\":\"mem\",\"d\":%u,\"op\":%d,\"mk\":%d,\"a\":%llu,\"b\":%llu,\"t\":%llu}\n",
                   r->deviceId, static_cast<int>(r->memoryOperationType), static_cast<int>(r->memoryKind),
                   static_cast<unsigned long long>(r->address), static_cast<unsigned long long>(r->bytes),
                   static_cast<unsigned long long>(r->timestamp));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {  // NVTX (NVTX_INJECTION64_PATH names this library, which hands NVTX to CUPTI)
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

// The time spent writing delivered buffers, their count and their records (phases at the exit: how much of the exit
// flush is CUPTI's and how much this library's writing).
std::atomic<uint64_t> g_write_ns{0}, g_write_buffers{0}, g_write_records{0};
// Buffers CUPTI delivered that are not written yet: a detach (umtrace_detach) waits for none before CUPTI goes.
std::atomic<int> g_pending{0};

// One delivered buffer, written as JSON lines (about 1 ms per 512 KiB of records) and freed.
struct Delivered {
  CUcontext ctx;
  uint32_t stream;
  uint8_t* buffer;
  size_t valid;
};

void write_buffer(const Delivered& d) {
  if (g_out && d.valid > 0) {
    const uint64_t w0 = wall_ns();
    std::lock_guard<std::mutex> lk(g_mu);
    CUpti_Activity* rec = nullptr;
    uint64_t n = 0;
    while (cuptiActivityGetNextRecord(d.buffer, d.valid, &rec) == CUPTI_SUCCESS) {
      write_record(g_out, rec);
      ++n;
    }
    // Dropped records are counted per queue: the one this buffer came from (a context's, or the
    // global one where ctx is null; unified-memory records arrive on the global queue).
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(d.ctx, d.stream, &dropped) == CUPTI_SUCCESS && dropped) {
      g_dropped += dropped;
      std::fprintf(g_out, "{\"k\":\"dropped\",\"n\":%zu}\n", dropped);
    }
    std::fflush(g_out);
    g_write_records += n;
    ++g_write_buffers;
    g_write_ns += wall_ns() - w0;
  }
  std::free(d.buffer);
  --g_pending;
}

// The writer thread: buffer_completed only queues the buffer and this thread writes it (UMSCOPE_UMTRACE_WRITER=0: it is
// written in the callback), so our JSON writing is never on CUPTI's thread, which also drains the driver's
// unified-memory event queue. Measured, it did not change how much of a migration CUPTI recorded (qv 26 qubits,
// managed, CPU-initialised, H100: 51-59% with it against 46-58% with the old 8 MiB buffers written in the callback;
// the loss seen in that test came from a flusher, since dropped: docs/counters.md); at the exit it writes the last
// buffers after the forced flush (4-5 ms at 3000 SRAD iterations).
std::mutex g_writer_mu;
std::condition_variable g_writer_cv;
std::deque<Delivered> g_writer_q;
bool g_writer_stop = false;
// Between a detach and the next attach the writer holds what CUPTI still delivers (at its finalise) unwritten:
// reading a record or the dropped count is a CUPTI call, and any CUPTI call starts CUPTI again in the process.
bool g_writer_hold = false;
std::atomic<bool> g_detached{false};  // umtrace_detach took CUPTI out and no attach put it back yet

void hold_writer(bool hold) {
  {
    std::lock_guard<std::mutex> lk(g_writer_mu);
    g_writer_hold = hold;
  }
  g_writer_cv.notify_all();
}
std::thread g_writer;
pid_t g_writer_pid = 0;

void start_writer() {
  const char* e = std::getenv("UMSCOPE_UMTRACE_WRITER");
  if (e && *e == '0') return;
  g_writer_pid = getpid();
  g_writer = std::thread([] {
    std::unique_lock<std::mutex> lk(g_writer_mu);
    for (;;) {
      g_writer_cv.wait(lk, [] { return g_writer_stop || (!g_writer_hold && !g_writer_q.empty()); });
      if (g_writer_q.empty()) return;  // stopped, and everything written
      std::deque<Delivered> batch;
      batch.swap(g_writer_q);
      lk.unlock();
      for (const auto& d : batch) write_buffer(d);
      lk.lock();
    }
  });
}

// Stops the writer once it has written everything queued; what is left (a forked child, which has no writer thread)
// is written here.
void stop_writer() {
  {
    std::lock_guard<std::mutex> lk(g_writer_mu);
    g_writer_stop = true;
  }
  g_writer_cv.notify_all();
  if (g_writer.joinable()) {
    if (g_writer_pid == getpid() && g_writer.get_id() != std::this_thread::get_id()) g_writer.join();
    else g_writer.detach();
  }
  std::deque<Delivered> rest;
  {
    std::lock_guard<std::mutex> lk(g_writer_mu);
    rest.swap(g_writer_q);
  }
  for (const auto& d : rest) write_buffer(d);
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  const Delivered d{ctx, stream, buffer, valid};
  ++g_pending;
  if (g_writer_pid == getpid()) {
    std::lock_guard<std::mutex> lk(g_writer_mu);
    if (!g_writer_stop) {
      g_writer_q.push_back(d);
      g_writer_cv.notify_one();
      return;
    }
  }
  write_buffer(d);
}

unsigned long long now_ns() {
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return static_cast<unsigned long long>(t);
}

// The driver hands unified-memory events to CUPTI a little after they happen: flush, give the last
// ones `settle_ms` to arrive, flush again.
void flush_all(const char* why, int settle_ms) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (settle_ms > 0) {
    timespec pause{settle_ms / 1000, (settle_ms % 1000) * 1000L * 1000L};  // tv_nsec must stay below 1 s
    nanosleep(&pause, nullptr);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_out) {
    std::fprintf(g_out, "{\"k\":\"flush\",\"why\":\"%s\",\"t\":%llu}\n", why, now_ns());
    std::fflush(g_out);
  }
}

// Default 0: waits of 50 ms and 1 s before the last flush changed no count (docs/tracing.md), and the 50 ms
// wait with its second flush was 55-65 ms of every traced program's wall time on the H100.
int settle_ms() {
  const char* e = std::getenv("UMSCOPE_UMTRACE_SETTLE_MS");
  return e && *e ? std::atoi(e) : 0;
}


void finish() {
  if (g_done.exchange(true)) return;
  // A child the program forked after CUDA started (and that ends through exit()) cannot use CUDA or CUPTI: a flush
  // there waited for ever (H100, a forked CuPy process). Its parent ends the trace; the child writes nothing.
  if (getpid() != g_setup_pid) {
    if (g_writer.joinable()) g_writer.detach();  // the parent's writer: not a thread of this process
    return;
  }
  const uint64_t w0 = wall_ns();
  const uint64_t written0 = g_write_ns, buffers0 = g_write_buffers, records0 = g_write_records;
  if (!g_detached) flush_all("exit", settle_ms());  // detached: CUPTI holds nothing, and a flush would start it again
  const uint64_t w1 = wall_ns();
  phase("exit: flush with settle", w0, w1);
  stop_writer();
  phase("exit: writer drained", w1, wall_ns());
  if (g_out) {
    std::lock_guard<std::mutex> lk(g_mu);
    // Of the flush, the writing of what it delivered (n: records), and over the whole run (n: buffers).
    umprofiler::write_phase(g_out, "exit: flush: writing its buffers", -1, w0, w0 + (g_write_ns - written0),
                            static_cast<long long>(g_write_records - records0));
    umprofiler::write_phase(g_out, "exit: flush: buffers it delivered", -1, w0, w0, static_cast<long long>(g_write_buffers - buffers0));
    umprofiler::write_phase(g_out, "run: buffers written (summed)", -1, 0, g_write_ns, static_cast<long long>(g_write_buffers));
  }
  uvm_events::stop();
  size_t dropped = 0;
  if (!g_detached && cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_out) {
    uvm_counters::write_counters();
    umprofiler::write_phase(g_out, "exit: tracer", -1, w0, wall_ns());
    std::fprintf(g_out, "{\"k\":\"end\",\"t\":%llu,\"w\":%llu,\"dropped\":%llu,\"um_records\":[", now_ns(),
                 static_cast<unsigned long long>(wall_ns()), g_dropped);
    for (int c = 0; c < 16; ++c) std::fprintf(g_out, "%s%llu", c ? "," : "", g_um_written[c]);
    std::fprintf(g_out, "],\"um_values\":[");
    for (int c = 0; c < 16; ++c) std::fprintf(g_out, "%s%llu", c ? "," : "", g_um_bytes[c]);
    std::fprintf(g_out, "]}\n");
    std::fflush(g_out);
  }
}


// The CUDA driver's device table (ordinal -> PCI bus id), read through the libcuda the program
// already loaded, so records (which carry the CUDA ordinal) can be put on umscope's GPU numbering.
int write_devices() {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!cuda) {
    uvm_counters::start(1, nullptr, g_out, g_mu);  // the driver's counters for every processor still work
    return 1;
  }
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using BusFn = int (*)(char*, int, int);
  auto count = reinterpret_cast<CountFn>(dlsym(cuda, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(dlsym(cuda, "cuDeviceGet"));
  auto bus = reinterpret_cast<BusFn>(dlsym(cuda, "cuDeviceGetPCIBusId"));
  int n = 0;
  if (!count || count(&n) != 0 || n < 1) n = 1;
  for (int i = 0; count && get && bus && i < n; ++i) {
    int dev = 0;
    char id[64] = {0};
    if (get(&dev, i) != 0 || bus(id, sizeof id, dev) != 0) continue;
    std::lock_guard<std::mutex> lk(g_mu);
    std::fprintf(g_out, "{\"k\":\"device\",\"id\":%d,\"bus\":", i);
    json_string(g_out, id);
    std::fprintf(g_out, "}\n");
  }
  uvm_counters::start(n, cuda, g_out, g_mu);
  dlclose(cuda);
  return n;
}

// Unified-memory counters can be configured only once the driver is initialised (CUPTI_ERROR_NOT_READY
// before): configure them on the first context created, for every device, each kind on its own first
// so the trace says which kind CUPTI refused, then all accepted kinds together.
std::atomic<bool> g_um_on{false};

// UMSCOPE_UMTRACE_RECORDS: the CUPTI activity records to enable, a comma list of um, kernels, copies, allocations,
// nvtx (default all). `umscope profile` leaves the kernel records out unless asked (--kernels): with them a
// launch-bound program (GPT-2 generation, 3 processes each on one H200) ran 1.141 x its plain time per token, without
// them 0.961 (docs/tracing.md). A kind left out is said in the trace ("note"), so that its absence is not read as
// "none happened".
bool record_wanted(const char* name, bool say = true) {
  const char* want = std::getenv("UMSCOPE_UMTRACE_RECORDS");
  if (!want || !*want) return true;
  const std::string list = std::string(",") + want + ",";
  if (list.find(std::string(",") + name + ",") != std::string::npos) return true;
  if (g_out && say) {
    std::lock_guard<std::mutex> lk(g_mu);
    std::fprintf(g_out, "{\"k\":\"note\",\"what\":\"%s records off (UMSCOPE_UMTRACE_RECORDS=%s)\"}\n", name, want);
  }
  return false;
}

int g_ndev = 1;  // the devices the first context's creation found

void configure_um(bool say);

void enable_um() {
  if (g_um_on.exchange(true)) return;
  const uint64_t w0 = wall_ns();
  g_ndev = write_devices();
  phase("devices and driver counters", w0, wall_ns());
  configure_um(true);
}

// One unified-memory counter's configuration: `kind` on device `d` (every device where `all`), on or off.
CUpti_ActivityUnifiedMemoryCounterConfig um_counter(CUpti_ActivityUnifiedMemoryCounterKind kind, int d, bool all,
                                                    bool enable) {
  CUpti_ActivityUnifiedMemoryCounterConfig cfg;
  std::memset(&cfg, 0, sizeof cfg);
  cfg.scope = all ? CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_ALL_DEVICES
                  : CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE;
  cfg.kind = kind;
  cfg.deviceId = static_cast<uint32_t>(d);
  cfg.enable = enable ? 1 : 0;
  return cfg;
}

// Configures and enables CUPTI's unified-memory records (at the first context's creation, and again at every attach
// after a detach: cuptiFinalize forgets them).
void configure_um(bool say) {
  if (!record_wanted("um", say)) return;
  const int ndev = g_ndev;
  const uint64_t w1 = wall_ns();
  const CUpti_ActivityUnifiedMemoryCounterKind kinds[] = {
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOD};
  const char* sc = std::getenv("UMSCOPE_UMTRACE_SCOPE");  // "all": one process-wide entry per kind
  const bool all = sc && std::strcmp(sc, "all") == 0;
  const int per_kind = all ? 1 : ndev;
  // UMSCOPE_UMTRACE_KINDS: the kinds to enable, by umscope's names (default all). Fewer kinds put fewer events
  // through the driver's tools queue, which drops events when full (GPU faults are most of them).
  const char* names[] = {"", "htod", "dtoh", "cpu_fault", "gpu_fault", "thrashing", "throttling", "remote_map", "dtod"};
  const char* want = std::getenv("UMSCOPE_UMTRACE_KINDS");
  std::vector<CUpti_ActivityUnifiedMemoryCounterConfig> ok;
  for (auto kind : kinds) {
    if (want && *want) {
      std::string list = std::string(",") + want + ",";
      const int k = static_cast<int>(kind);
      if (k < 1 || k > 8 || list.find(std::string(",") + names[k] + ",") == std::string::npos) continue;
    }
    for (int d = 0; d < per_kind; ++d) {
      CUpti_ActivityUnifiedMemoryCounterConfig cfg = um_counter(kind, d, all, true);
      CUptiResult r = cuptiActivityConfigureUnifiedMemoryCounter(&cfg, 1);
      const char* rs = nullptr;
      cuptiGetResultString(r, &rs);
      {
        std::lock_guard<std::mutex> lk(g_mu);
        std::fprintf(g_out, "{\"k\":\"config\",\"c\":%d,\"dev\":%d,\"scope\":\"%s\",\"ok\":%s,\"cupti\":\"%s\"}\n",
                     static_cast<int>(kind), d, all ? "all" : "single", r == CUPTI_SUCCESS ? "true" : "false",
                     rs ? rs : "?");
      }
      if (r == CUPTI_SUCCESS) ok.push_back(cfg);
    }
  }
  if (ok.empty()) {
    note("configure unified-memory counters", CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED);
    return;
  }
  CUptiResult um = cuptiActivityConfigureUnifiedMemoryCounter(ok.data(), static_cast<uint32_t>(ok.size()));
  note("configure unified-memory counters", um);
  if (um == CUPTI_SUCCESS) note("enable unified memory", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER));
  phase("configure unified-memory records", w1, wall_ns());
  std::fflush(g_out);
}

// CUPTI's one subscriber, held by this library between InitializeInjection (or umtrace_attach) and a detach.
CUpti_SubscriberHandle g_sub = nullptr;
std::atomic<bool> g_attached{false};
std::atomic<bool> g_detach_asked{false};
std::atomic<bool> g_detach_refused{false};  // hardware counters or place --managed share the subscriber: never detached
// NVTX handed to CUPTI (InitializeInjectionNvtx2): its handlers are CUPTI's, which a cuptiFinalize would leave
// behind; umtrace_detach refuses then (-3), unless UMSCOPE_UMTRACE_DETACH_NVTX=1.
std::atomic<bool> g_nvtx_handed{false};

void detach_here();

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API && g_detach_asked &&
      static_cast<const CUpti_CallbackData*>(data)->callbackSite == CUPTI_API_EXIT) {
    detach_here();  // umtrace_detach asked: this driver call's exit is the safe place
    return;
  }
  // The hardware counters' callbacks (counters.cpp); at a context's creation after the tracer's own work, which
  // calls the driver: the counters' set-up beside the program starts at the creating thread's next driver call.
  const bool created = domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED;
  if (!created) umcounters::callback(domain, cbid, data);
  managed_apply::callback(domain, cbid, data);
  if (domain != CUPTI_CB_DOMAIN_RESOURCE) return;
  if (created) {
    enable_um();
    umcounters::callback(domain, cbid, data);
  } else if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    // The runtime destroys its contexts at exit, possibly before our atexit handler runs: the trace
    // says when, and (UMSCOPE_UMTRACE_FLUSH_ON_DESTROY=1) takes what the driver has queued while the
    // context still exists.
    const char* e = std::getenv("UMSCOPE_UMTRACE_FLUSH_ON_DESTROY");
    if (e && *e == '1') {
      flush_all("context destroy", settle_ms());
    } else {
      std::lock_guard<std::mutex> lk(g_mu);
      std::fprintf(g_out, "{\"k\":\"ctx_destroy\",\"t\":%llu,\"w\":%llu}\n", now_ns(),
                   static_cast<unsigned long long>(wall_ns()));
    }
  }
}

// The exit's later steps, on the trace's clock: after the exit handlers, the loader finalises the libraries in the
// reverse order of their loading (those loaded after this one, such as CUPTI's profiler libraries, first), then the
// process ends and the kernel closes the driver's files. A phase of no length marks when this library's turn came.
__attribute__((destructor)) void on_unload() {
  umprofiler::write_finalised(g_out, g_mu, "exit: libumtrace finalised");
}

volatile sig_atomic_t g_fatal_sig = 0;

// finish() is not async-signal-safe: a signal that stops a thread holding a lock it needs (the trace's, the CUDA
// driver's) leaves it waiting. Never let that keep a dying program alive: 3 s after the signal, the program dies
// of it, with the trace as far as it got (a reader calls a trace without its end incomplete).
void on_alarm(int) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, g_fatal_sig);
  std::signal(g_fatal_sig, SIG_DFL);
  pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
  raise(g_fatal_sig);
  _exit(128 + g_fatal_sig);
}

void on_fatal(int sig) {
  g_fatal_sig = sig;
  if (sig != SIGTERM) {  // where the program died (this library replaced Python's faulthandler, if any): stderr
    static const char head[] = "libumtrace: fatal signal; native stack:\n";
    if (write(2, head, sizeof head - 1) < 0) {}
    void* frames[48];
    backtrace_symbols_fd(frames, backtrace(frames, 48), 2);
  }
  std::signal(SIGALRM, on_alarm);
  alarm(3);
  finish();  // best effort, the program is dying anyway
  alarm(0);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Opens the trace and enables every activity kind that needs no driver. Called by whichever comes first:
// the CUDA driver's injection (at cuInit) or NVTX's (at the program's first NVTX call, which may come
// before any CUDA call: ranges opened then are kept).
std::once_flag g_setup;
bool g_ok = false;

// The first process of the program to start CUDA writes the trace file itself (it holds a lock on it for its
// life); every later one (an MPI rank, a worker the program spawns) writes FILE.PID beside it, which the reader
// takes in too, so no process overwrites another's records.
FILE* open_trace(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 && ftruncate(fd, 0) == 0) return fdopen(fd, "w");
  if (fd >= 0) close(fd);
  std::string mine = std::string(path) + "." + std::to_string(static_cast<int>(getpid()));
  return std::fopen(mine.c_str(), "w");
}

void setup() {
  std::call_once(g_setup, [] {
    const char* path = std::getenv("UMSCOPE_TRACE_FILE");
    g_out = open_trace(path && *path ? path : "umtrace.jsonl");
    if (!g_out) return;
    g_ok = true;
    g_setup_pid = getpid();
    // A fork copies the trace's unwritten buffer into the child, which would write it again at its exit: empty it
    // first, with the file's lock held across the fork.
    pthread_atfork([] { g_mu.lock(); if (g_out) std::fflush(g_out); }, [] { g_mu.unlock(); }, [] { g_mu.unlock(); });
    unsigned long long t0 = now_ns();
    // w: wall-clock time, to put the trace on the sampler's clock
    std::fprintf(g_out, "{\"k\":\"start\",\"pid\":%d,\"t\":%llu,\"w\":%llu}\n", static_cast<int>(getpid()), t0,
                 static_cast<unsigned long long>(wall_ns()));
    note("register buffers", cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    if (record_wanted("nvtx")) note("enable NVTX markers", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MARKER));
    // CUPTI's worker thread delivers full buffers every period (ms); UMSCOPE_UMTRACE_FLUSH_MS changes it (0: CUPTI's
    // own policy). No flush of our own beside the program: cuptiActivityFlushAll every 100 ms, even only in periods
    // without unified-memory activity, cost CUPTI records (qv 26 qubits, managed, CPU-initialised: 35-48% of the
    // migrated bytes recorded against 46-59% without it; H100, docs/counters.md).
    const char* fp = std::getenv("UMSCOPE_UMTRACE_FLUSH_MS");
    cuptiActivityFlushPeriod(fp && *fp ? static_cast<uint32_t>(std::atoi(fp)) : 100u);
    start_writer();
    std::atexit(finish);
    for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGTERM}) std::signal(sig, on_fatal);
    std::fflush(g_out);
  });
}



// The activity kinds this trace records beyond unified memory (kernels, copies, allocations), with the subscriber's
// callbacks: at injection and again at every attach.
void subscribe_and_enable(bool first) {
  CUpti_SubscriberHandle sub = nullptr;
  CUptiResult subscribed = cuptiSubscribe(&sub, on_callback, nullptr);
  note("subscribe", subscribed);
  if (subscribed == CUPTI_SUCCESS) {
    g_sub = sub;
    note("watch context creation", cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
    note("watch context destruction",
         cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING));
  }
  if (first && std::getenv("UMSCOPE_COUNTERS_FILE")) {  // hardware counters
    umcounters::attach(sub, subscribed);
    g_detach_refused = true;
  }
  if (first && subscribed == CUPTI_SUCCESS) {  // place --managed
    managed_apply::attach(sub, g_out, g_mu);
    const char* m = std::getenv("UMSCOPE_UMTRACE_MANAGED");
    if (m && *m) g_detach_refused = true;
  }
  if (record_wanted("kernels", first)) note("enable kernels", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  if (record_wanted("copies", first)) note("enable copies", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  if (record_wanted("allocations", first)) note("enable allocations", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2));
  g_attached = subscribed == CUPTI_SUCCESS;
}

// The detach itself, at the exit site of a driver call (CUPTI's advice for a safe cuptiFinalize, as its
// cupti_finalize sample does): nothing else here, umtrace_detach flushed and wrote the buffers before asking.
std::atomic<int> g_finalize_result{0};

void detach_here() {
  const uint64_t w0 = wall_ns();
  g_finalize_result = static_cast<int>(cuptiFinalize());
  phase("detach: cuptiFinalize", w0, wall_ns());
  g_sub = nullptr;
  g_attached = false;
  g_detach_asked = false;
  g_detached = true;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  const uint64_t w0 = wall_ns();
  setup();
  if (!g_ok) return 1;
  subscribe_and_enable(true);
  phase("injection", w0, wall_ns());
  std::fflush(g_out);
  return 1;
}

// Detach and attach, for measuring what the tracer costs a program inside one process (bench/overhead_ab.py --toggle
// tracer, issue 34): umtrace_detach takes CUPTI out of the process (cuptiFinalize), as if the program ran without the
// tracer; umtrace_attach puts it back with every record this trace takes. Only this library's own records: with
// hardware counters or place --managed on the same subscriber they refuse (-1). The trace says each ("detach",
// "attach"), and what it holds covers the attached periods only. Call between the program's GPU work (synchronised),
// from a thread with a current CUDA context. Return 1 when done, 0 when already so, < 0 when refused or failed.
extern "C" __attribute__((visibility("default"))) int umtrace_detach() {
  if (!g_ok || g_detach_refused) return -1;
  if (!g_attached) return 0;
  const char* nv = std::getenv("UMSCOPE_UMTRACE_DETACH_NVTX");
  if (g_nvtx_handed && !(nv && *nv == '1')) return -3;
  const uint64_t w0 = wall_ns();
  // Every record so far delivered and written first (the writer thread is idle when CUPTI goes).
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (int i = 0; i < 2000 && g_pending.load() > 0; ++i) {
    timespec ms{0, 1000L * 1000L};
    nanosleep(&ms, nullptr);
  }
  {
    std::lock_guard<std::mutex> lk(g_mu);
    std::fprintf(g_out, "{\"k\":\"detach\",\"t\":%llu,\"w\":%llu,\"unwritten\":%d}\n", now_ns(),
                 static_cast<unsigned long long>(wall_ns()), g_pending.load());
    std::fflush(g_out);
  }
  hold_writer(true);  // what CUPTI hands over from here to the attach waits (its finalise delivers the rest)
  uint64_t w1 = wall_ns();
  phase("detach: buffers written", w0, w1);
  // Diagnostics of where a detach's time goes (UMSCOPE_UMTRACE_DETACH_PREP, a comma list), each a phase of its own:
  // um-config-off configures every unified-memory counter off, um-off disables the unified-memory records, period-0
  // stops CUPTI's periodic flush, all before cuptiFinalize; direct calls it here, not at a driver call's exit.
  const char* prep = std::getenv("UMSCOPE_UMTRACE_DETACH_PREP");
  auto prep_step = [&](const char* name, const char* what, auto&& fn) {  // one diagnostic step, timed as a phase
    if (!prep || !std::strstr(prep, name)) return;
    fn();
    const uint64_t w = wall_ns();
    phase(what, w1, w);
    w1 = w;
  };
  prep_step("um-config-off", "detach: unified-memory counters configured off", [] {  // the records left enabled
    std::vector<CUpti_ActivityUnifiedMemoryCounterConfig> off;
    for (int kind = 1; kind <= 8; ++kind)
      for (int d = 0; d < std::max(1, g_ndev); ++d)
        off.push_back(um_counter(static_cast<CUpti_ActivityUnifiedMemoryCounterKind>(kind), d, false, false));
    note("configure unified memory off", cuptiActivityConfigureUnifiedMemoryCounter(off.data(), off.size()));
  });
  prep_step("um-off", "detach: unified-memory records off", [] {
    note("disable unified memory", cuptiActivityDisable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER));
  });
  prep_step("period-0", "detach: periodic flush off", [] { cuptiActivityFlushPeriod(0); });
  // direct (diagnostic): cuptiFinalize on this thread, outside any driver call (the program's work is synchronised).
  if (prep && std::strstr(prep, "direct")) detach_here();
  // The next driver call's exit (on any thread) detaches: every driver callback on, then one call made here.
  g_detach_asked = g_attached.load();
  if (g_attached) note("ask for a detach", cuptiEnableDomain(1, g_sub, CUPTI_CB_DOMAIN_DRIVER_API));
  using SyncFn = int (*)();
  static const SyncFn sync = [] {  // libcuda stays loaded while the program runs: looked up once
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return cuda ? reinterpret_cast<SyncFn>(dlsym(cuda, "cuCtxSynchronize")) : nullptr;
  }();
  for (int i = 0; i < 5000 && g_attached; ++i) {
    if (sync) sync();
    if (!g_attached) break;
    timespec ms{0, 1000L * 1000L};
    nanosleep(&ms, nullptr);
  }
  if (g_attached) {
    hold_writer(false);
    return -2;
  }
  note("detach", static_cast<CUptiResult>(g_finalize_result.load()));
  phase("detach: finalised at a driver call's exit", w1, wall_ns());
  phase("detach", w0, wall_ns());
  return 1;
}

extern "C" __attribute__((visibility("default"))) int umtrace_attach() {
  if (!g_ok || g_detach_refused) return -1;
  if (g_attached) return 0;
  const uint64_t w0 = wall_ns();
  {
    std::lock_guard<std::mutex> lk(g_mu);  // a step at a time in the trace: where an attach failed is seen
    std::fprintf(g_out, "{\"k\":\"attaching\",\"w\":%llu}\n", static_cast<unsigned long long>(wall_ns()));
    std::fflush(g_out);
  }
  subscribe_and_enable(false);
  g_detached = false;
  hold_writer(false);  // what CUPTI delivered at the detach is written now, CUPTI being back
  note("register buffers", cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  if (record_wanted("nvtx", false)) note("enable NVTX markers", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MARKER));
  const char* fp = std::getenv("UMSCOPE_UMTRACE_FLUSH_MS");
  cuptiActivityFlushPeriod(fp && *fp ? static_cast<uint32_t>(std::atoi(fp)) : 100u);
  const char* reum = std::getenv("UMSCOPE_UMTRACE_REATTACH_UM");  // 0: a diagnostic, the records not configured
  if (g_um_on && !(reum && *reum == '0'))
    configure_um(false);
  {
    std::lock_guard<std::mutex> lk(g_mu);
    std::fprintf(g_out, "{\"k\":\"attach\",\"t\":%llu,\"w\":%llu,\"ok\":%s}\n", now_ns(),
                 static_cast<unsigned long long>(wall_ns()), g_attached ? "true" : "false");
    std::fflush(g_out);
  }
  phase("attach", w0, wall_ns());
  return g_attached ? 1 : -2;
}


// NVTX_INJECTION64_PATH names this library: the tracer starts at the first NVTX call, then hands NVTX
// to CUPTI's own handler (which turns ranges into the MARKER records enabled above).
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(const void* get_export_table) {
  setup();
  using InitFn = int (*)(const void*);
  void* cupti = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  if (!cupti) cupti = dlopen("libcupti.so", RTLD_NOW | RTLD_NOLOAD);
  auto init = cupti ? reinterpret_cast<InitFn>(dlsym(cupti, "InitializeInjectionNvtx2")) : nullptr;
  if (!init) {
    note("hand NVTX to CUPTI", CUPTI_ERROR_UNKNOWN);
    return 0;
  }
  g_nvtx_handed = true;
  if (g_out) {
    std::lock_guard<std::mutex> lk(g_mu);
    std::fprintf(g_out, "{\"k\":\"nvtx\",\"w\":%llu}\n", static_cast<unsigned long long>(wall_ns()));
    std::fflush(g_out);
  }
  return init(get_export_table);
}
