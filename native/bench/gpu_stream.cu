// GPU read / write / copy / triad over any GPU-reachable memory kind.
// One kernel per operation; the kind only changes the pointers it is given.
// 16-byte accesses (double2), four independent loads in flight per thread,
// grid sized from the occupancy API; timed with CUDA events per repetition.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "umscope/bench.hpp"
#include "umscope/caps.hpp"
#include "umscope/errors.hpp"
#include "umscope/pattern.hpp"

namespace umscope {
namespace {

__device__ __forceinline__ double2 fma2(double2 a, double s, double2 b) {
  return make_double2(a.x + s * b.x, a.y + s * b.y);
}

__global__ void read_kernel(const double2* __restrict__ a, size_t n, double* out) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    double2 x0 = a[i], x1 = a[i + stride], x2 = a[i + 2 * stride], x3 = a[i + 3 * stride];
    s0 += x0.x + x0.y;
    s1 += x1.x + x1.y;
    s2 += x2.x + x2.y;
    s3 += x3.x + x3.y;
  }
  for (; i < n; i += stride) s0 += a[i].x + a[i].y;
  double s = (s0 + s1) + (s2 + s3);
  for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}

__global__ void write_kernel(double2* __restrict__ c, size_t n, double v) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const double2 w = make_double2(v, v);
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    c[i] = w;
    c[i + stride] = w;
    c[i + 2 * stride] = w;
    c[i + 3 * stride] = w;
  }
  for (; i < n; i += stride) c[i] = w;
}

__global__ void copy_kernel(const double2* __restrict__ a, double2* __restrict__ b, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    double2 x0 = a[i], x1 = a[i + stride], x2 = a[i + 2 * stride], x3 = a[i + 3 * stride];
    b[i] = x0;
    b[i + stride] = x1;
    b[i + 2 * stride] = x2;
    b[i + 3 * stride] = x3;
  }
  for (; i < n; i += stride) b[i] = a[i];
}

// c = a + s * b
__global__ void triad_kernel(const double2* __restrict__ a, const double2* __restrict__ b,
                             double2* __restrict__ c, size_t n, double s) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (; i + 1 * stride < n; i += 2 * stride) {
    double2 a0 = a[i], a1 = a[i + stride], b0 = b[i], b1 = b[i + stride];
    c[i] = fma2(a0, s, b0);
    c[i + stride] = fma2(a1, s, b1);
  }
  for (; i < n; i += stride) c[i] = fma2(a[i], s, b[i]);
}

struct Launch {
  int grid, block;
};

template <class K>
Launch launch_for(K kernel, const Context& ctx) {
  const GpuCaps& caps = gpu_caps(ctx.device);
  int block = static_cast<int>(ctx.args.integer("block", 256));
  if (block < 32 || block > caps.max_threads_per_block || block % 32)
    throw UsageError("--block must be a multiple of 32 up to " + std::to_string(caps.max_threads_per_block));
  int per_sm = 0;
  UM_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, 0));
  int grid = static_cast<int>(ctx.args.integer("blocks", static_cast<long long>(per_sm) * caps.sms));
  if (grid < 1) throw UsageError("--blocks must be at least 1");
  return {grid, block};
}

constexpr double kTriadScalar = 3.0;
constexpr double kWriteValue = 42.5;

void run_gpu_stream(Context& ctx) {
  KindSpec kind = parse_kind(ctx.args.str("kind", "device"));
  // Whole 4 KiB pages, so every array is made of 16-byte elements.
  size_t bytes = ctx.args.bytes("bytes", size_t(1) << 30) / 4096 * 4096;
  if (bytes == 0) throw UsageError("--bytes must be at least 4 KiB");
  std::vector<std::string> ops = ctx.args.list("ops", "read,write,copy,triad");
  for (auto& op : ops)
    if (op != "read" && op != "write" && op != "copy" && op != "triad")
      throw UsageError("unknown op '" + op + "' (read, write, copy, triad)");
  const GpuCaps& caps = gpu_caps(ctx.device);
  if (!caps.present) throw Skip(caps.why_absent);
  UM_CUDA(cudaSetDevice(ctx.device));

  auto needs = [&](const char* op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); };
  bool need_a = needs("read") || needs("copy") || needs("triad");
  bool need_b = needs("copy") || needs("triad");
  bool need_c = needs("write") || needs("triad");
  // Managed arrays together must fit: the guard sees each one alone.
  if (kind.name == "managed" && !ctx.alloc.allow_oversubscription) {
    size_t total = bytes * (need_a + need_b + need_c);
    if (total > caps.free_mem)
      throw Refused("refusing " + std::to_string(total >> 20) + " MiB of managed arrays with " +
                    std::to_string(caps.free_mem >> 20) +
                    " MiB of GPU memory free; pass --allow-oversubscription on a machine you own");
  }
  std::unique_ptr<Buffer> A, B, C;
  if (need_a) A.reset(new Buffer(kind, bytes, ctx.alloc));
  if (need_b) B.reset(new Buffer(kind, bytes, ctx.alloc));
  if (need_c) C.reset(new Buffer(kind, bytes, ctx.alloc));
  for (Buffer* buf : {A.get(), B.get(), C.get()})
    if (buf && !buf->gpu()) throw Skip(buf->gpu_unreachable());
  if (A) A->place(pattern_initializer(1, 0));
  if (B) B->place(pattern_initializer(2, 0));
  if (C) C->place(pattern_initializer(3, 0));

  const size_t n2 = bytes / sizeof(double2);
  const size_t nd = bytes / sizeof(double);
  auto a = A ? static_cast<double2*>(A->gpu()) : nullptr;
  auto b = B ? static_cast<double2*>(B->gpu()) : nullptr;
  auto c = C ? static_cast<double2*>(C->gpu()) : nullptr;
  double* sum = nullptr;
  UM_CUDA(cudaMalloc(&sum, sizeof(double)));
  cudaEvent_t t0, t1;
  UM_CUDA(cudaEventCreate(&t0));
  UM_CUDA(cudaEventCreate(&t1));
  std::string proc = "gpu" + std::to_string(ctx.device);

  for (const std::string& op : ops) {
    Launch L{};
    int arrays = 0;
    std::function<void()> launch;
    double* check = nullptr;
    double mul = 1, add = 0;
    if (op == "read") {
      L = launch_for(read_kernel, ctx);
      arrays = 1;
      launch = [&] { read_kernel<<<L.grid, L.block>>>(a, n2, sum); };
    } else if (op == "write") {
      L = launch_for(write_kernel, ctx);
      arrays = 1;
      gpu_poison(c, bytes);
      launch = [&] { write_kernel<<<L.grid, L.block>>>(c, n2, kWriteValue); };
      check = reinterpret_cast<double*>(c), mul = 0, add = kWriteValue;
    } else if (op == "copy") {
      L = launch_for(copy_kernel, ctx);
      arrays = 2;
      gpu_poison(b, bytes);
      launch = [&] { copy_kernel<<<L.grid, L.block>>>(a, b, n2); };
      check = reinterpret_cast<double*>(b);
    } else {
      L = launch_for(triad_kernel, ctx);
      arrays = 3;
      gpu_poison(c, bytes);
      // b holds 2*pattern unless a copy ran first, which makes it pattern.
      double bmul = needs("copy") ? 1 : 2;
      launch = [&] { triad_kernel<<<L.grid, L.block>>>(a, b, c, n2, kTriadScalar); };
      check = reinterpret_cast<double*>(c), mul = 1 + kTriadScalar * bmul;
    }
    const double traffic = static_cast<double>(bytes) * arrays;
    std::vector<double> gbps;
    for (int r = 0; r < ctx.warmup + ctx.reps; ++r) {
      if (op == "read") UM_CUDA(cudaMemsetAsync(sum, 0, sizeof(double)));
      UM_CUDA(cudaEventRecord(t0));
      launch();
      UM_CUDA(cudaEventRecord(t1));
      UM_CUDA(cudaEventSynchronize(t1));
      UM_CUDA(cudaGetLastError());
      float ms = 0;
      UM_CUDA(cudaEventElapsedTime(&ms, t0, t1));
      if (r >= ctx.warmup) gbps.push_back(traffic / (ms * 1e-3) / 1e9);
    }
    // Verify what the last repetition produced.
    std::string verdict;
    if (op == "read") {
      double got = 0;
      UM_CUDA(cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost));
      double want = pattern_sum(nd);
      if (got != want) verdict = "read sum " + json_number(got) + " != expected " + json_number(want);
    } else {
      size_t bad = gpu_count_mismatch(check, nd, mul, add);
      if (bad) verdict = std::to_string(bad) + " of " + std::to_string(nd) + " elements wrong after " + op;
    }
    if (!verdict.empty()) throw VerifyError(verdict);
    JsonObject rec = ctx.record(op, proc, kind, bytes);
    Context::put_summary(rec, "bandwidth", "GB/s", gbps);
    rec.set("traffic_bytes", static_cast<unsigned long long>(traffic));
    rec.set("grid", L.grid);
    rec.set("block", L.block);
    rec.set("verified", true);
    if (A) rec.set("residency", A->residency());
    ctx.emit(rec);
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  cudaFree(sum);
}

BenchRegistrar reg({"gpu-stream", "gpu",
                    "GPU kernels read, write, copy (b=a) and triad (c=a+s*b) over arrays of one memory kind",
                    {"read", "write", "copy", "triad"},
                    {"kind", "bytes", "ops", "block", "blocks"},
                    run_gpu_stream});

}  // namespace
}  // namespace umscope
