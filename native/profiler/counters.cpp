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
// The Range Profiler is in counters_range.cpp, PM sampling in counters_sampling.cpp, the helpers they share in
// counters_internal.hpp; here: the injection entry point, the preload and the set-up beside the program.
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

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
#include "counters_internal.hpp"

namespace umcounters {
namespace detail {

FILE* g_out = nullptr;
std::mutex g_io;

}  // namespace detail
}  // namespace umcounters

using namespace umcounters::detail;

namespace {

std::atomic<bool> g_done{false};

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
    // Through a lambda of this file: a std::thread of set_up(Sampler*) itself would be exported from the library
    // (the standard library's templates keep default visibility, and Sampler is no longer local to one file).
    s->setup_thread = std::thread([s] { set_up(s); });
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

}  // namespace

// Before a sampler is finished (its context ending, or the exit): a set-up never started is dropped (no GPU work was
// asked for), one under way is waited for. (Sampler::finish calls it: declared in counters_internal.hpp.)
void umcounters::detail::settle_setup(Sampler* s) {
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

namespace {

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
