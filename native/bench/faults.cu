// Fault cost: one processor touches one byte per stride (4 KiB, 64 KiB,
// 2 MiB, ...) of memory the other processor placed, so every touch may fault
// and migrate. Serial: one thread touches the pages one after another (the
// latency of a fault); parallel: one GPU thread or CPU thread-slice per page
// at once (the throughput of fault handling). Each repetition uses a fresh
// allocation, placed by the kind's first_touch policy.
#include <chrono>
#include <memory>

#include "umscope/bench.hpp"
#include "umscope/caps.hpp"
#include "umscope/errors.hpp"
#include "umscope/threads.hpp"
#include "umscope/traffic.hpp"
#include "umscope/timing.hpp"

namespace umscope {
namespace {

__global__ void touch_parallel(unsigned char* p, size_t pages, size_t stride) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < pages) p[i * stride] += 1;
}

__global__ void touch_serial(unsigned char* p, size_t pages, size_t stride) {
  for (size_t i = 0; i < pages; ++i) p[i * stride] += 1;
}

void run_faults(Context& ctx) {
  KindSpec kind = parse_kind(ctx.args.str("kind", "managed"));
  const std::string proc = ctx.args.choices("processor", "gpu", {"gpu", "cpu"})[0];
  const std::string mode = ctx.args.choices("mode", "parallel", {"parallel", "serial"})[0];
  const size_t bytes = ctx.args.page_bytes("bytes", size_t(1) << 30);
  std::vector<size_t> strides;
  for (const std::string& s : ctx.args.list("stride", "4K,64K,2M")) {
    size_t v = parse_bytes(s);
    if (v < 64 || v > bytes) throw UsageError("--stride must be from 64 B to --bytes");
    strides.push_back(v);
  }
  const long long max_pages = ctx.args.integer("pages", mode == "serial" ? 4096 : 0);
  const bool on_gpu = proc == "gpu";
  const bool needs_cuda = on_gpu || kind_uses_cuda(kind);
  if (needs_cuda) ctx.use_gpu();
  const int nthreads = ctx.args.thread_counts("threads", mode == "serial" ? "1" : "all")[0];
  ThreadTeam team(nthreads);
  using clk = std::chrono::steady_clock;

  for (size_t stride : strides) {
    size_t pages = bytes / stride;
    if (max_pages > 0 && static_cast<size_t>(max_pages) < pages) pages = static_cast<size_t>(max_pages);
    std::vector<double> us_per_page;
    for (int r = 0; r < ctx.warmup + ctx.reps; ++r) {
      Buffer buf(kind, bytes, ctx.alloc);
      buf.place(Initializer{});
      auto* p = static_cast<unsigned char*>(buf.reach(on_gpu));
      if (needs_cuda) UM_CUDA(cudaDeviceSynchronize());
      double secs = 0;
      if (on_gpu) {
        EventClock clock;
        secs = 1e-3 * clock.time_ms([&] {
          if (mode == "serial") touch_serial<<<1, 1>>>(p, pages, stride);
          else touch_parallel<<<static_cast<unsigned>((pages + 255) / 256), 256>>>(p, pages, stride);
        });
      } else {
        auto t0 = clk::now();
        team.run([&](int t, int T) {
          size_t lo, hi;
          split_range(pages, T, t, lo, hi);
          for (size_t i = lo; i < hi; ++i) p[i * stride] += 1;
        });
        secs = std::chrono::duration<double>(clk::now() - t0).count();
      }
      // Verify: every touched byte went from the placed 0 to 1.
      unsigned char* q = static_cast<unsigned char*>(buf.cpu());
      size_t bad = 0;
      if (q) {
        for (size_t i = 0; i < pages; ++i) bad += q[i * stride] != 1;
      } else {
        for (size_t i = 0; i < pages; ++i) {
          unsigned char v = 0;
          UM_CUDA(cudaMemcpy(&v, p + i * stride, 1, cudaMemcpyDefault));
          bad += v != 1;
        }
      }
      if (bad) throw VerifyError(std::to_string(bad) + " touched bytes wrong");
      if (r >= ctx.warmup) us_per_page.push_back(secs * 1e6 / pages);
    }
    JsonObject rec = ctx.record("touch-" + mode, on_gpu ? "gpu" + std::to_string(ctx.device) : "cpu", kind, bytes);
    Context::put_summary(rec, "time_per_page", "us", us_per_page);
    rec.set("stride", static_cast<unsigned long long>(stride));
    rec.set("pages", static_cast<unsigned long long>(pages));
    double med = summarize(us_per_page).median;
    if (med > 0) {
      rec.set("pages_per_s", 1e6 / med);
      rec.set("gbps_of_strides", gb_per_s(stride, med * 1e-6));
    }
    if (!on_gpu) rec.set("threads", nthreads);
    rec.set("verified", "cpu-reference");  // every element compared with its expected value
    ctx.emit(rec);
  }
}

BenchRegistrar reg({"faults", "gpu|cpu",
                    "one processor touches one byte per stride of memory the other placed: microseconds per page "
                    "touched (a fault and migration where the kind migrates), serial or all at once",
                    {"touch-serial", "touch-parallel"},
                    {"kind", "processor", "mode", "bytes", "stride", "pages", "threads"},
                    run_faults});

}  // namespace
}  // namespace umscope
