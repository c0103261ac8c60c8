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
#include "umscope/traffic.hpp"
#include "umscope/stream_kernels.cuh"
#include "umscope/timing.hpp"

namespace umscope {
namespace {

constexpr double kTriadScalar = 3.0;
constexpr double kWriteValue = 42.5;

void run_gpu_stream(Context& ctx) {
  KindSpec kind = parse_kind(ctx.args.str("kind", "device"));
  // Whole 4 KiB pages, so every array is made of 16-byte elements.
  size_t bytes = ctx.args.page_bytes("bytes", size_t(1) << 30);
  std::vector<std::string> ops = ctx.args.choices("ops", "read,write,copy,triad", stream_op_names());
  ctx.use_gpu();

  auto needs = [&](const char* op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); };
  bool need_a = needs("read") || needs("copy") || needs("triad");
  bool need_b = needs("copy") || needs("triad");
  bool need_c = needs("write") || needs("triad");
  // Managed arrays together must fit: the guard sees each one alone.
  if (kind.name == "managed") check_managed_memory(bytes * (need_a + need_b + need_c), ctx.alloc);
  std::unique_ptr<Buffer> A, B, C;
  if (need_a) A.reset(new Buffer(kind, bytes, ctx.alloc));
  if (need_b) B.reset(new Buffer(kind, bytes, ctx.alloc));
  if (need_c) C.reset(new Buffer(kind, bytes, ctx.alloc));
  for (Buffer* buf : {A.get(), B.get(), C.get()})
    if (buf) buf->reach(true);  // or Skip
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
  EventClock clock;
  std::string proc = "gpu" + std::to_string(ctx.device);

  for (const std::string& op : ops) {
    Launch L{};
    const int arrays = stream_arrays(op);
    std::function<void()> launch;
    double* check = nullptr;
    double mul = 1, add = 0;
    if (op == "read") {
      // The read sums into one word: a resident grid keeps the atomics few.
      L = launch_for(read_kernel, ctx);
      launch = [&] { read_kernel<<<L.grid, L.block>>>(a, n2, sum); };
    } else if (op == "write") {
      L = launch_for(write_kernel, ctx, n2);
      gpu_poison(c, bytes);
      launch = [&] { write_kernel<<<L.grid, L.block>>>(c, n2, kWriteValue); };
      check = reinterpret_cast<double*>(c), mul = 0, add = kWriteValue;
    } else if (op == "copy") {
      L = launch_for(copy_kernel, ctx, n2);
      gpu_poison(b, bytes);
      launch = [&] { copy_kernel<<<L.grid, L.block>>>(a, b, n2); };
      check = reinterpret_cast<double*>(b);
    } else {
      L = launch_for(triad_kernel, ctx, n2);
      gpu_poison(c, bytes);
      // b holds 2*pattern unless a copy ran first, which makes it pattern.
      double bmul = needs("copy") ? 1 : 2;
      launch = [&] { triad_kernel<<<L.grid, L.block>>>(a, b, c, n2, kTriadScalar); };
      check = reinterpret_cast<double*>(c), mul = 1 + kTriadScalar * bmul;
    }
    const double traffic = static_cast<double>(bytes) * arrays;
    std::vector<double> gbps;
    for (double ms : repeat_ms(clock, ctx.warmup, ctx.reps, launch, [&](int) {
           if (op == "read") UM_CUDA(cudaMemsetAsync(sum, 0, sizeof(double)));
         }))
      gbps.push_back(gb_per_s(traffic, ms * 1e-3));
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
    rec.set("verified", "cpu-reference");  // every element compared with its expected value
    if (A) rec.set("residency", A->residency());
    ctx.emit(rec);
  }
  cudaFree(sum);
}

BenchRegistrar reg({"gpu-stream", "gpu",
                    "GPU kernels read, write, copy (b=a) and triad (c=a+s*b) over arrays of one memory kind",
                    stream_op_names(),
                    {"kind", "bytes", "ops", "block", "blocks"},
                    run_gpu_stream});

}  // namespace
}  // namespace umscope
