// um-truth: managed-memory programs whose data movement is known exactly, to check a unified-memory
// trace against (`umscope profile --um-trace -- umbench run um-truth --case C`). One managed array of
// --bytes (whole 2 MiB blocks), 32-bit words; each case prints the bytes it must move each way:
//   read          CPU writes every word, one GPU kernel reads every word         htod N, dtoh 0
//   writeback     CPU writes, GPU increments every word, CPU reads every word    htod N, dtoh N
//   prefetch      CPU writes, cudaMemPrefetchAsync to the GPU, GPU reads,
//                 prefetch back to the CPU, CPU reads                            htod N, dtoh N (cause user)
//   read-mostly   advise read-mostly, CPU writes, GPU reads twice, CPU reads     htod N, dtoh 0 (duplicates)
//   pingpong      CPU writes; --iters times: GPU increments, CPU increments      htod K*N, dtoh K*N
//   host-preferred  advise preferred location CPU + accessed by the GPU, CPU
//                 writes, GPU reads twice (zero-copy over the link)              htod 0, dtoh 0 (2N read remotely)
//   gpu-first     GPU writes every word first (pages made on the GPU), CPU reads htod 0, dtoh N
//   thrash        CPU and GPU write the same pages at once for --iters rounds    no byte count known: the
//                                                                                driver's thrashing handling
// Every case checks the values it reads (a wrong value fails the run).
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "umscope/bench.hpp"
#include "umscope/caps.hpp"
#include "umscope/errors.hpp"

namespace umscope {
namespace {

constexpr size_t kBlock = size_t(2) << 20;  // the driver's migration unit upper bound: whole blocks only
constexpr size_t kPageWords = 4096 / sizeof(unsigned);

__global__ void truth_sum(const unsigned* __restrict__ a, size_t n, unsigned long long* out) {
  unsigned long long s = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) s += a[i];
  for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}

__global__ void truth_inc(unsigned* __restrict__ a, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) a[i] += 1;
}

__global__ void truth_set(unsigned* __restrict__ a, size_t n, unsigned v) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) a[i] = v;
}

// One word per 4 KiB page, `rounds` times: the GPU side of the thrash case.
__global__ void truth_touch_pages(unsigned* a, size_t pages, int rounds) {
  for (int r = 0; r < rounds; ++r)
    for (size_t p = blockIdx.x * size_t(blockDim.x) + threadIdx.x; p < pages; p += size_t(gridDim.x) * blockDim.x)
      atomicAdd(&a[p * kPageWords], 1u);
}

struct Gpu {
  int grid = 0, block = 256;
  unsigned long long* sum = nullptr;  // device memory (cudaMalloc): never migrates
};

unsigned long long gpu_sum(const Gpu& g, const unsigned* a, size_t n) {
  UM_CUDA(cudaMemset(g.sum, 0, sizeof *g.sum));
  truth_sum<<<g.grid, g.block>>>(a, n, g.sum);
  UM_CUDA(cudaGetLastError());
  unsigned long long s = 0;
  UM_CUDA(cudaMemcpy(&s, g.sum, sizeof s, cudaMemcpyDeviceToHost));
  return s;
}

void gpu_inc(const Gpu& g, unsigned* a, size_t n) {
  truth_inc<<<g.grid, g.block>>>(a, n);
  UM_CUDA(cudaGetLastError());
  UM_CUDA(cudaDeviceSynchronize());
}

void cpu_fill(unsigned* a, size_t n, unsigned v) {
  for (size_t i = 0; i < n; ++i) a[i] = v;
}

void cpu_inc(unsigned* a, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] += 1;
}

size_t cpu_count_not(const unsigned* a, size_t n, unsigned v) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += a[i] != v;
  return bad;
}

void expect(bool ok, const std::string& what) {
  if (!ok) throw VerifyError("um-truth: " + what);
}

cudaMemLocation where(bool gpu, int device) {
  cudaMemLocation loc{};
  loc.type = gpu ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  loc.id = gpu ? device : 0;
  return loc;
}

// The cases, named once: --case's choices, the operations of the records and the help.
const std::vector<std::string> kCases = {"read",           "writeback", "prefetch", "read-mostly", "pingpong",
                                         "host-preferred", "gpu-first", "thrash"};

std::string case_names() {
  std::string out;
  for (const std::string& c : kCases) out += (out.empty() ? "" : ", ") + c;
  return out;
}

void run_umtruth(Context& ctx) {
  const std::string c = ctx.args.choices("case", "read", kCases)[0];
  size_t bytes = ctx.args.bytes("bytes", size_t(1) << 30);
  if (bytes < kBlock || bytes % kBlock) throw UsageError("--bytes must be a whole number of 2 MiB blocks (e.g. 1G)");
  const long long iters = ctx.args.integer("iters", c == "thrash" ? 200 : 3);
  if (iters < 1 || iters > 1000) throw UsageError("--iters must be from 1 to 1000");
  ctx.use_gpu();
  const GpuCaps& caps = gpu_caps(ctx.device);
  if (!caps.concurrent_managed_access)
    throw Skip("um-truth needs concurrentManagedAccess (page-fault driven unified memory)");
  Gpu g;
  g.grid = static_cast<int>(ctx.args.integer("blocks", caps.sms * 8));  // fewer blocks: fewer faults at once
  if (g.grid < 1 || g.grid > (1 << 20)) throw UsageError("--blocks must be from 1 to 2^20");
  UM_CUDA(cudaMalloc(&g.sum, sizeof *g.sum));
  const size_t n = bytes / sizeof(unsigned);
  unsigned* a = nullptr;
  using clk = std::chrono::steady_clock;
  UM_CUDA(cudaMallocManaged(&a, bytes));
  const auto t0 = clk::now();
  long long htod = 0, dtoh = 0;  // the bytes this case must move; -1: not known
  std::string cause = "any";  // CUPTI's migration cause the bytes must carry ("user": cudaMemPrefetchAsync)
  const int dev = ctx.device;

  if (c == "read") {
    cpu_fill(a, n, 1);
    expect(gpu_sum(g, a, n) == n, "GPU sum after CPU writes");
    htod = static_cast<long long>(bytes);
  } else if (c == "writeback") {
    cpu_fill(a, n, 1);
    gpu_inc(g, a, n);
    expect(cpu_count_not(a, n, 2) == 0, "CPU read after GPU increment");
    htod = dtoh = static_cast<long long>(bytes);
  } else if (c == "prefetch") {
    cpu_fill(a, n, 1);
    UM_CUDA(cudaMemPrefetchAsync(a, bytes, where(true, dev), 0, nullptr));
    UM_CUDA(cudaDeviceSynchronize());
    expect(gpu_sum(g, a, n) == n, "GPU sum after prefetch");
    UM_CUDA(cudaMemPrefetchAsync(a, bytes, where(false, dev), 0, nullptr));
    UM_CUDA(cudaDeviceSynchronize());
    expect(cpu_count_not(a, n, 1) == 0, "CPU read after prefetch back");
    htod = dtoh = static_cast<long long>(bytes);
    cause = "user";
  } else if (c == "read-mostly") {
    UM_CUDA(cudaMemAdvise(a, bytes, cudaMemAdviseSetReadMostly, where(true, dev)));
    cpu_fill(a, n, 1);
    expect(gpu_sum(g, a, n) == n, "first GPU sum of read-mostly data");
    expect(gpu_sum(g, a, n) == n, "second GPU sum of read-mostly data");
    expect(cpu_count_not(a, n, 1) == 0, "CPU read of read-mostly data");
    htod = static_cast<long long>(bytes);
  } else if (c == "pingpong") {
    cpu_fill(a, n, 0);
    for (long long k = 0; k < iters; ++k) {
      gpu_inc(g, a, n);
      cpu_inc(a, n);
    }
    expect(cpu_count_not(a, n, static_cast<unsigned>(2 * iters)) == 0, "CPU read after the ping-pong");
    htod = dtoh = iters * static_cast<long long>(bytes);
  } else if (c == "host-preferred") {
    UM_CUDA(cudaMemAdvise(a, bytes, cudaMemAdviseSetPreferredLocation, where(false, dev)));
    UM_CUDA(cudaMemAdvise(a, bytes, cudaMemAdviseSetAccessedBy, where(true, dev)));
    cpu_fill(a, n, 1);
    expect(gpu_sum(g, a, n) == n, "first GPU sum of host-preferred data");
    expect(gpu_sum(g, a, n) == n, "second GPU sum of host-preferred data");
  } else if (c == "gpu-first") {
    truth_set<<<g.grid, g.block>>>(a, n, 3);
    UM_CUDA(cudaGetLastError());
    UM_CUDA(cudaDeviceSynchronize());
    expect(cpu_count_not(a, n, 3) == 0, "CPU read after the GPU's first touch");
    dtoh = static_cast<long long>(bytes);
  } else {  // thrash: the GPU and a CPU thread write one word of every page at once
    cpu_fill(a, n, 0);
    const size_t pages = bytes / 4096;
    std::atomic<bool> gpu_done{false};
    unsigned long long cpu_writes = 0;
    std::thread cpu([&] {
      while (!gpu_done.load()) {
        for (size_t p = 0; p < pages; ++p) reinterpret_cast<std::atomic<unsigned>*>(&a[p * kPageWords])->fetch_add(1);
        ++cpu_writes;
      }
    });
    truth_touch_pages<<<g.grid, g.block>>>(a, pages, static_cast<int>(iters));
    cudaError_t launched = cudaGetLastError();
    cudaError_t done = cudaDeviceSynchronize();
    gpu_done = true;
    cpu.join();
    UM_CUDA(launched);
    UM_CUDA(done);
    expect(a[0] == static_cast<unsigned>(iters + cpu_writes), "first page after the thrash");
    htod = dtoh = -1;
  }
  UM_CUDA(cudaDeviceSynchronize());
  const double ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  UM_CUDA(cudaFree(a));
  UM_CUDA(cudaFree(g.sum));

  KindSpec kind = parse_kind("managed");
  JsonObject rec = ctx.record(c, "gpu" + std::to_string(dev), kind, bytes);
  Context::put_summary(rec, "time", "ms", {ms});
  rec.set("case", c);
  rec.set("iters", static_cast<long long>(c == "pingpong" || c == "thrash" ? iters : 1));
  rec.set("known_htod_bytes", htod);  // -1: this case has no known byte count
  rec.set("known_dtoh_bytes", dtoh);
  rec.set("known_cause", cause);
  rec.set("address", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(a)));
  rec.set("verified", "every value read checked");
  ctx.emit(rec);
}

BenchRegistrar reg({"um-truth", "gpu",
                    "managed-memory programs whose data movement is known exactly (--case " + case_names() +
                        "); each prints the bytes it must move each way, to check a unified-memory trace against",
                    kCases,
                    {"case", "bytes", "iters", "blocks"},
                    run_umtruth});

}  // namespace
}  // namespace umscope
