// Contention: each processor measured alone, then both at once while the
// other loads the shared path. The GPU reads (or writes) a host-side buffer
// over the link while CPU threads stream another buffer in host memory;
// each side's bandwidth under the other's load is reported, and their sum.
//
// Overlap is guaranteed, not hoped for: the GPU's launches are queued first
// and the CPU keeps streaming until the last of them has finished; a CPU
// pass counts only if the GPU was still busy when it ended, and the GPU's
// first launch (which may start before the CPU threads) is dropped.
#include <algorithm>
#include <cmath>
#include <functional>

#include "umscope/bench.hpp"
#include "umscope/caps.hpp"
#include "umscope/cpu_kernels.hpp"
#include "umscope/errors.hpp"
#include "umscope/pattern.hpp"
#include "umscope/threads.hpp"
#include "umscope/stream_kernels.cuh"
#include "umscope/timing.hpp"

namespace umscope {
namespace {

constexpr double kWriteValue = 42.5;

void run_contention(Context& ctx) {
  KindSpec gkind = parse_kind(ctx.args.str("kind", "pinned"));
  KindSpec ckind = parse_kind(ctx.args.str("cpu-kind", "system"));
  const size_t bytes = ctx.args.page_bytes("bytes", size_t(1) << 30);
  const std::string gop = ctx.args.choices("gpu-op", "read", {"read", "write"})[0];
  const std::string cop = ctx.args.choices("cpu-op", "read", {"read", "write"})[0];
  const int nthreads = ctx.args.thread_counts("threads", "all")[0];
  if (!gpu_caps(ctx.device).present) throw Skip(gpu_caps(ctx.device).why_absent);
  UM_CUDA(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));  // the launching thread must not spin
  ctx.use_gpu();

  Buffer G(gkind, bytes, ctx.alloc), C(ckind, bytes, ctx.alloc);
  G.reach(true);  // or Skip
  C.reach(false);  // or Skip
  G.place(pattern_initializer(1, 0));
  C.place(pattern_initializer(1, 0));
  const size_t nd = bytes / sizeof(double), n2 = bytes / sizeof(double2);
  auto g = static_cast<double2*>(G.gpu());
  auto c = static_cast<double*>(C.cpu());

  double* sum = nullptr;
  UM_CUDA(cudaMalloc(&sum, sizeof(double)));
  Launch L = gop == "read" ? launch_for(read_kernel, ctx) : launch_for(write_kernel, ctx);
  auto gpu_launch = [&] {
    if (gop == "read") read_kernel<<<L.grid, L.block>>>(g, n2, sum);
    else write_kernel<<<L.grid, L.block>>>(g, n2, kWriteValue);
  };
  ThreadTeam team(nthreads);
  std::vector<double> partial(static_cast<size_t>(nthreads) * 8);
  std::function<void(int, int)> cpu_pass = [&](int t, int T) {
    size_t lo, hi;
    split_range(nd, T, t, lo, hi);
    if (cop == "read") partial[t * 8] = cpu_read(c, lo, hi);
    else cpu_write(c, lo, hi, kWriteValue);
  };

  // Queues n launches, each between two events; samples() reads launches [first, n).
  EventClock clock(0);
  auto queue_gpu = [&](int n) {
    clock.resize(n + 1);
    if (gop == "read") UM_CUDA(cudaMemsetAsync(sum, 0, sizeof(double)));
    clock.record(0);
    for (int i = 0; i < n; ++i) {
      gpu_launch();
      clock.record(i + 1);
    }
  };
  auto samples = [&](int first) {
    UM_CUDA(cudaGetLastError());
    std::vector<double> out;
    for (int i = first; i + 1 < clock.size(); ++i) out.push_back(bytes / (clock.ms(i, i + 1) * 1e-3) / 1e9);
    return out;
  };

  // Alone: the GPU, then the CPU.
  const int launches = ctx.warmup + ctx.reps;
  queue_gpu(launches);
  clock.wait(clock.last());
  std::vector<double> gpu_alone = samples(ctx.warmup);
  std::vector<double> cpu_alone;
  for (int r = 0; r < launches; ++r) {
    double s = team.run(cpu_pass);
    if (r >= ctx.warmup) cpu_alone.push_back(bytes / s / 1e9);
  }

  // Together. The GPU gets enough launches to outlast `reps` CPU passes.
  double t_gpu = bytes / (*std::min_element(gpu_alone.begin(), gpu_alone.end()) * 1e9);
  double t_cpu = bytes / (*std::min_element(cpu_alone.begin(), cpu_alone.end()) * 1e9);
  const int want = std::min(2000, std::max(launches, static_cast<int>(std::ceil(ctx.reps * t_cpu / t_gpu)) + 2));
  queue_gpu(want);
  std::vector<double> cpu_loaded;
  for (;;) {
    double s = team.run(cpu_pass);
    if (clock.done(clock.last())) break;
    cpu_loaded.push_back(bytes / s / 1e9);
  }
  std::vector<double> gpu_loaded = samples(1);

  // Verify both sides' last results.
  if (gop == "read") {
    double got = 0;
    UM_CUDA(cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost));
    double want_sum = pattern_sum(nd) * want;  // every launch of the loaded phase added once
    if (got != want_sum) throw VerifyError("GPU read sum " + json_number(got) + " != " + json_number(want_sum));
  } else {
    size_t bad = gpu_count_mismatch(reinterpret_cast<double*>(g), nd, 0, kWriteValue);
    if (bad) throw VerifyError(std::to_string(bad) + " elements wrong after the GPU's writes");
  }
  if (cop == "read") {
    double got = 0;
    for (int t = 0; t < nthreads; ++t) got += partial[t * 8];
    if (got != pattern_sum(nd)) throw VerifyError("CPU read sum " + json_number(got) + " != expected");
  } else {
    size_t bad = cpu_count_mismatch(c, nd, 0, kWriteValue);
    if (bad) throw VerifyError(std::to_string(bad) + " elements wrong after the CPU's writes");
  }
  cudaFree(sum);
  if (cpu_loaded.empty())
    throw Skip("no CPU pass finished while the GPU was busy: the GPU side is too short at this size");

  const std::string proc = "gpu" + std::to_string(ctx.device);
  const std::string gdesc = "GPU " + gop + " of " + gkind.str();
  const std::string cdesc = "CPU " + cop + " of " + ckind.str() + " on " + std::to_string(nthreads) + " threads";
  auto emit = [&](const std::string& op, const std::string& p, const KindSpec& k, const std::vector<double>& s,
                  const std::string& load, const std::vector<double>& alone) {
    JsonObject rec = ctx.record(op, p, k, bytes);
    Context::put_summary(rec, "bandwidth", "GB/s", s);
    if (p == "cpu") rec.set("threads", nthreads);
    rec.set("load", load);
    rec.set("alone_median", summarize(alone).median);
    rec.set("verified", "cpu-reference");  // every element compared with its expected value
    ctx.emit(rec);
  };
  emit(gop, proc, gkind, gpu_alone, "none", gpu_alone);
  emit(gop, proc, gkind, gpu_loaded, cdesc, gpu_alone);
  emit(cop, "cpu", ckind, cpu_alone, "none", cpu_alone);
  emit(cop, "cpu", ckind, cpu_loaded, gdesc, cpu_alone);
  // Both at once: the sum of the medians (the samples are not paired).
  Summary sg = summarize(gpu_loaded), sc = summarize(cpu_loaded);
  JsonObject rec = ctx.record("sum", proc + "+cpu", gkind, bytes);
  rec.set("metric", "bandwidth");
  rec.set("unit", "GB/s");
  rec.set("n", std::min(sg.n, sc.n));
  rec.set("median", sg.median + sc.median);
  rec.set("value", sg.median + sc.median);
  rec.set("min", sg.min + sc.min);
  rec.set("max", sg.max + sc.max);
  rec.set("spread", (sg.max + sc.max - sg.min - sc.min) / (sg.median + sc.median));
  rec.set("load", gdesc + " + " + cdesc);
  rec.set("cpu_kind", ckind.label());
  rec.set("alone_median", summarize(gpu_alone).median + summarize(cpu_alone).median);
  rec.set("verified", "cpu-reference");  // every element compared with its expected value
  ctx.emit(rec);
}

BenchRegistrar reg({"contention", "gpu+cpu",
                    "GPU and CPU threads load host memory alone, then at once: each side's bandwidth under "
                    "the other's load, and the sum",
                    {"read", "write", "sum"},
                    {"kind", "cpu-kind", "bytes", "gpu-op", "cpu-op", "threads", "block", "blocks"},
                    run_contention});

}  // namespace
}  // namespace umscope
