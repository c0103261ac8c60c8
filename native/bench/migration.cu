// Migration over iterations: one GPU kernel (read, write or copy) repeated N
// times over the same buffer, every iteration timed on its own, so the curve
// shows where pages live: a first pass over CPU-resident managed memory runs
// at fault-and-migrate speed and later passes at device-memory speed; host
// memory the GPU reaches remotely stays at link speed.
//
// Variants: --cpu-touch full|stride makes the CPU write the buffer (every
// element, or one element per 4 KiB page) between GPU iterations, so
// ownership ping-pongs; --trials repeats the whole sequence on a fresh
// allocation. Oversubscription: --dos D with --available A first takes GPU
// memory with a cudaMalloc ballast until A is free, then sizes the buffer
// D x A. D > 1 needs --allow-oversubscription (never on a shared GPU).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "umscope/bench.hpp"
#include "umscope/caps.hpp"
#include "umscope/cpu_kernels.hpp"
#include "umscope/errors.hpp"
#include "umscope/pattern.hpp"
#include "umscope/threads.hpp"
#include "umscope/traffic.hpp"
#include "umscope/stream_kernels.cuh"
#include "umscope/timing.hpp"

namespace umscope {
namespace {

constexpr double kWriteValue = 42.5;

// Holds GPU memory so that only `keep` bytes stay free; released on scope exit.
struct Ballast {
  std::vector<void*> chunks;
  size_t bytes = 0;
  Ballast(size_t keep) {
    size_t free_b = 0, total_b = 0;
    UM_CUDA(cudaMemGetInfo(&free_b, &total_b));
    if (free_b <= keep) return;
    size_t want = free_b - keep;
    const size_t chunk = size_t(1) << 30;
    while (want > 0) {
      size_t n = std::min(chunk, want);
      void* p = nullptr;
      if (cudaMalloc(&p, n) != cudaSuccess) {
        cudaGetLastError();
        break;
      }
      chunks.push_back(p);
      bytes += n;
      want -= n;
    }
  }
  ~Ballast() {
    for (void* p : chunks) cudaFree(p);
  }
};

void run_migration(Context& ctx) {
  KindSpec kind = parse_kind(ctx.args.str("kind", "managed"));
  const std::string op = ctx.args.choices("op", "read", stream_op_names(3))[0];
  const long long iters_arg = ctx.args.integer("iterations", 100), trials_arg = ctx.args.integer("trials", 1);
  if (iters_arg < 1 || trials_arg < 1 || iters_arg > 1000000 || trials_arg > 1000000)
    throw UsageError("--iterations and --trials must be from 1 to 1000000");
  const int iters = static_cast<int>(iters_arg), trials = static_cast<int>(trials_arg);
  const std::string touch = ctx.args.choices("cpu-touch", "none", {"none", "full", "stride"})[0];
  const double dos = ctx.args.real("dos", 0);
  if (dos < 0 || (ctx.args.has("dos") && dos == 0)) throw UsageError("--dos must be positive");
  ctx.use_gpu();

  // Oversubscription: shrink what is free, then size the buffer from it.
  std::unique_ptr<Ballast> ballast;
  size_t available = 0, bytes = 0;
  const int arrays = stream_arrays(op);
  if (dos > 0) {
    available = ctx.args.page_bytes("available", size_t(8) << 30);
    size_t free_b = 0, total_b = 0;
    UM_CUDA(cudaMemGetInfo(&free_b, &total_b));
    if (available > free_b)
      throw Skip("--available " + gib_text(available) + " is more than the " + gib_text(free_b) + " free on the GPU");
    if (dos > 1 && !ctx.alloc.allow_oversubscription)
      throw Refused("refusing degree of oversubscription " + json_number(dos) +
                    " (> 1 oversubscribes the GPU, which can hang a shared one); pass "
                    "--allow-oversubscription on a machine you own");
    ballast.reset(new Ballast(available));
    bytes = static_cast<size_t>(dos * available / arrays) / 4096 * 4096;
  } else {
    bytes = ctx.args.page_bytes("bytes", size_t(1) << 30);
  }
  if (kind.name == "managed") check_managed_memory(bytes * arrays, ctx.alloc);
  const size_t nd = bytes / sizeof(double), n2 = bytes / sizeof(double2);
  std::vector<int> cpus = ctx.args.thread_counts("threads", "all");
  ThreadTeam team(cpus[0]);
  double* sum = nullptr;
  UM_CUDA(cudaMalloc(&sum, sizeof(double)));
  const std::string proc = "gpu" + std::to_string(ctx.device);

  // A prefetch policy is applied here rather than by the buffer, so it can be timed.
  KindSpec placed = kind;
  const std::string prefetch_to = placed.get("prefetch", "none");
  placed.policy.erase("prefetch");
  for (int trial = 0; trial < trials; ++trial) {
    std::unique_ptr<Buffer> A(new Buffer(placed, bytes, ctx.alloc)), B;
    A->reach(true);  // or Skip
    if (touch != "none" && !A->cpu()) throw Skip("--cpu-touch: " + A->cpu_unreachable());
    A->place(pattern_initializer(1, 0));
    if (op == "copy") {
      B.reset(new Buffer(placed, bytes, ctx.alloc));
      B->place(pattern_initializer(2, 0));
    }
    double prefetch_ms = -1;
    if (prefetch_to != "none") {
      UM_CUDA(cudaDeviceSynchronize());
      auto p0 = std::chrono::steady_clock::now();
      A->prefetch(prefetch_to);
      if (B) B->prefetch(prefetch_to);
      UM_CUDA(cudaDeviceSynchronize());
      prefetch_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - p0).count();
    }
    auto a = static_cast<double2*>(A->gpu());
    auto b = B ? static_cast<double2*>(B->gpu()) : nullptr;
    Launch L = op == "read" ? launch_for(read_kernel, ctx) : op == "write" ? launch_for(write_kernel, ctx)
                                                                           : launch_for(copy_kernel, ctx);
    EventClock clock;
    std::vector<double> gbps, touch_ms;
    double* ac = static_cast<double*>(A->cpu());
    // What the CPU writes is what the buffer already holds, so every
    // iteration's result can still be checked.
    const double cmul = op == "write" ? 0 : 1, cadd = op == "write" ? kWriteValue : 0;
    auto cpu_touch = [&](int it) {
      if (it > 0 && touch != "none") {
        auto c0 = std::chrono::steady_clock::now();
        const size_t step = touch == "full" ? 1 : 4096 / sizeof(double);
        team.run([&](int t, int T) {
          size_t lo, hi;
          split_range(nd / step, T, t, lo, hi);
          for (size_t i = lo; i < hi; ++i) ac[i * step] = pattern(i * step) * cmul + cadd;
        });
        touch_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count());
      }
      if (op == "read") UM_CUDA(cudaMemsetAsync(sum, 0, sizeof(double)));
    };
    auto gpu_pass = [&] {
      if (op == "read") read_kernel<<<L.grid, L.block>>>(a, n2, sum);
      else if (op == "write") write_kernel<<<L.grid, L.block>>>(a, n2, kWriteValue);
      else copy_kernel<<<L.grid, L.block>>>(a, b, n2);
    };
    // Every iteration is a sample: the first ones are the migration this family measures.
    for (double ms : repeat_ms(clock, 0, iters, gpu_pass, cpu_touch))
      gbps.push_back(gb_per_s(static_cast<double>(bytes) * arrays, ms * 1e-3));
    std::string verdict;
    if (op == "read") {
      double got = 0;
      UM_CUDA(cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost));
      if (got != pattern_sum(nd)) verdict = "read sum " + json_number(got) + " != " + json_number(pattern_sum(nd));
    } else {
      size_t bad = gpu_count_mismatch(static_cast<double*>(op == "write" ? A->gpu() : B->gpu()), nd,
                                      op == "write" ? 0 : 1, op == "write" ? kWriteValue : 0);
      if (bad) verdict = std::to_string(bad) + " elements wrong after the last " + op;
    }
    if (!verdict.empty()) throw VerifyError(verdict);

    JsonObject rec = ctx.record(op, proc, kind, bytes);
    Context::put_summary(rec, "bandwidth", "GB/s", gbps);  // samples stay in iteration order
    rec.set("iterations", iters);
    rec.set("trial", trial);
    rec.set("first", gbps.front());
    std::vector<double> tail(gbps.begin() + gbps.size() / 2, gbps.end());
    rec.set("steady", summarize(tail).median);
    rec.set("cpu_touch", touch);
    if (prefetch_ms >= 0) {
      rec.set("prefetch_ms", prefetch_ms);
      rec.set("prefetch_gbps", gb_per_s(static_cast<double>(bytes) * arrays, prefetch_ms * 1e-3));
    }
    if (!touch_ms.empty()) rec.set("cpu_touch_ms", touch_ms);
    if (dos > 0) {
      rec.set("dos", dos);
      rec.set("available", static_cast<unsigned long long>(available));
      rec.set("ballast", static_cast<unsigned long long>(ballast->bytes));
    }
    rec.set("traffic_bytes", static_cast<unsigned long long>(bytes) * arrays);
    rec.set("residency", A->residency());
    rec.set("verified", "cpu-reference");  // every element compared with its expected value
    ctx.emit(rec);
  }
  cudaFree(sum);
}

BenchRegistrar reg({"migration", "gpu",
                    "a GPU kernel repeated over one buffer, every iteration timed: where the pages live over "
                    "time; with --dos, under a ballast that leaves --available free (oversubscription)",
                    stream_op_names(3),
                    {"kind", "op", "bytes", "iterations", "trials", "cpu-touch", "threads", "dos", "available",
                     "block", "blocks"},
                    run_migration});

}  // namespace
}  // namespace umscope
