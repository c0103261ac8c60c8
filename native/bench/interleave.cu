// Interleaved CPU and GPU writes (the GH200 study's Fig. 4): the CPU writes
// the buffer (every element, or one element per 4 KiB page), then the GPU
// writes it N times back to back; repeated for several rounds and for each N.
// On memory that migrates, the first GPU pass after the CPU's pays to bring
// the pages back and the later ones do not, so the time per GPU pass falls
// with N; on memory that stays put it does not.
#include <chrono>
#include <memory>

#include "umscope/bench.hpp"
#include "umscope/caps.hpp"
#include "umscope/errors.hpp"
#include "umscope/pattern.hpp"
#include "umscope/threads.hpp"
#include "umscope/stream_kernels.cuh"
#include "umscope/timing.hpp"

namespace umscope {
namespace {

constexpr double kGpuValue = 42.5;

void run_interleave(Context& ctx) {
  KindSpec kind = parse_kind(ctx.args.str("kind", "managed"));
  const size_t bytes = ctx.args.page_bytes("bytes", size_t(256) << 20);
  const std::string cpu_write = ctx.args.choices("cpu-write", "full", {"full", "stride"})[0];
  std::vector<int> ns;
  for (const std::string& s : ctx.args.list("n", "1,2,4,8,16,32,64,128,256")) {
    char* end = nullptr;
    long v = std::strtol(s.c_str(), &end, 10);
    if (*end || v < 1 || v > 100000) throw UsageError("--n takes counts of GPU writes from 1, got '" + s + "'");
    ns.push_back(static_cast<int>(v));
  }
  const int rounds = static_cast<int>(ctx.args.integer("rounds", 3));
  if (rounds < 1) throw UsageError("--rounds must be at least 1");
  ctx.use_gpu();
  Buffer buf(kind, bytes, ctx.alloc);
  buf.reach(true);  // or Skip
  buf.reach(false);  // or Skip
  buf.place(pattern_initializer(1, 0));
  const int nthreads = ctx.args.thread_counts("threads", "all")[0];
  ThreadTeam team(nthreads);
  auto* c = static_cast<double*>(buf.cpu());
  auto* g = static_cast<double2*>(buf.gpu());
  const size_t nd = bytes / sizeof(double);
  const size_t step = cpu_write == "full" ? 1 : 4096 / sizeof(double);
  Launch L = launch_for(write_kernel, ctx);
  EventClock clock(3);  // start, after the first GPU write, after the last
  const std::string proc = "gpu" + std::to_string(ctx.device) + "+cpu";

  for (int n : ns) {
    std::vector<double> per_pass_ms, first_ms, rest_ms, cpu_ms;
    for (int r = 0; r < rounds; ++r) {
      auto c0 = std::chrono::steady_clock::now();
      team.run([&](int t, int T) {
        size_t lo, hi;
        split_range(nd / step, T, t, lo, hi);
        for (size_t i = lo; i < hi; ++i) c[i * step] = static_cast<double>(r + 1);
      });
      cpu_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count());
      clock.record(0);
      for (int k = 0; k < n; ++k) {
        write_kernel<<<L.grid, L.block>>>(g, bytes / sizeof(double2), kGpuValue);
        if (k == 0) clock.record(1);
      }
      clock.record(2);
      clock.wait(2);
      const float all = clock.ms(0, 2), first = clock.ms(0, 1);
      per_pass_ms.push_back(all / n);
      first_ms.push_back(first);
      if (n > 1) rest_ms.push_back((all - first) / (n - 1));
    }
    size_t bad = gpu_count_mismatch(reinterpret_cast<double*>(g), nd, 0, kGpuValue);
    if (bad) throw VerifyError(std::to_string(bad) + " elements wrong after the GPU's writes");
    JsonObject rec = ctx.record("interleave", proc, kind, bytes);
    Context::put_summary(rec, "time_per_gpu_write", "ms", per_pass_ms);
    rec.set("gpu_writes", n);
    rec.set("cpu_write", cpu_write);
    rec.set("first_gpu_write_ms", summarize(first_ms).median);
    if (!rest_ms.empty()) rec.set("later_gpu_write_ms", summarize(rest_ms).median);
    rec.set("cpu_write_ms", summarize(cpu_ms).median);
    rec.set("rounds", rounds);
    rec.set("threads", nthreads);
    rec.set("verified", "cpu-reference");  // every element compared with its expected value
    ctx.emit(rec);
  }
}

BenchRegistrar reg({"interleave", "gpu+cpu",
                    "the CPU writes a buffer (all of it, or one element per page), then the GPU writes it N times; "
                    "time per GPU write against N",
                    {"interleave"},
                    {"kind", "bytes", "cpu-write", "n", "rounds", "threads", "block", "blocks"},
                    run_interleave});

}  // namespace
}  // namespace umscope
