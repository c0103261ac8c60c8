// First touch and page-table cost: for one kind and size, the time to
// allocate, for one processor to touch every element the first time (page
// faults, page-table population, migration) and the second time (pages in
// place), and to free; repeated on fresh allocations for median and spread.
// The studies' mitigations are cases of their own: --pretouch cpu writes one
// element per page from the CPU before the measured first touch, and the
// `registered` kind pins (and so populates) the pages when it is allocated.
// Page size is the kind's `page` policy (base pages or THP on x86).
#include <chrono>
#include <functional>
#include <memory>

#include "umscope/app.hpp"
#include "umscope/bench.hpp"
#include "umscope/caps.hpp"
#include "umscope/cpu_kernels.hpp"
#include "umscope/errors.hpp"
#include "umscope/os.hpp"
#include "umscope/pattern.hpp"
#include "umscope/threads.hpp"
#include "umscope/traffic.hpp"
#include "umscope/stream_kernels.cuh"

namespace umscope {
namespace {

constexpr double kValue = 42.5;

void run_firsttouch(Context& ctx) {
  KindSpec kind = parse_kind(ctx.args.str("kind", "system"));
  // Who touches first is --by; a first_touch policy in the kind is overridden.
  if (kind.get("prefetch", "none") != "none") throw UsageError("firsttouch takes no prefetch policy: drop it from --kind");
  const std::string by = ctx.args.choices("by", "cpu", {"cpu", "gpu"})[0];
  const std::string pretouch = ctx.args.choices("pretouch", "none", {"none", "cpu"})[0];
  // What the touching processor writes: one constant (a memory-bound stream of stores), or the suite
  // applications' inputs (--values hash: uniform01(seed, i), the generator their CPU initialisation runs),
  // which spaces the page faults out as the applications' initialisation does. CPU only.
  const std::string values = ctx.args.choices("values", "const", {"const", "hash"})[0];
  if (values == "hash" && by == "gpu") throw UsageError("--values hash is the CPU's initialisation: use it with --by cpu");
  const size_t bytes = ctx.args.page_bytes("bytes", size_t(1) << 30);
  const int nthreads = ctx.args.thread_counts("threads", "all")[0];
  const bool has_touch_policy = kind.policy.count("first_touch") != 0;
  if (has_touch_policy) kind.policy["first_touch"] = "none";  // nobody touches at allocation: this benchmark does
  const bool on_gpu = by == "gpu";
  const bool needs_cuda = on_gpu || kind_uses_cuda(kind);
  if (needs_cuda) ctx.use_gpu();
  ThreadTeam team(nthreads);
  const size_t nd = bytes / sizeof(double);
  const size_t page = os::page_size();
  using clk = std::chrono::steady_clock;
  auto ms_since = [](clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); };

  std::vector<double> alloc_ms, first_ms, second_ms, free_ms, pretouch_ms;
  for (int r = 0; r < ctx.reps; ++r) {
    auto t = clk::now();
    std::unique_ptr<Buffer> buf(new Buffer(kind, bytes, ctx.alloc));
    if (needs_cuda) UM_CUDA(cudaDeviceSynchronize());
    alloc_ms.push_back(ms_since(t));
    if (has_touch_policy) buf->place(Initializer{});  // advice and prefetch only: first_touch is none
    void* mine = buf->reach(on_gpu);
    if (pretouch == "cpu") {
      if (!buf->cpu()) throw Skip("--pretouch cpu: " + buf->cpu_unreachable());
      auto* p = static_cast<unsigned char*>(buf->cpu());
      t = clk::now();
      team.run([&](int i, int T) {
        size_t lo, hi;
        split_range(bytes / page, T, i, lo, hi);
        for (size_t k = lo; k < hi; ++k) p[k * page] = 0;
      });
      pretouch_ms.push_back(ms_since(t));
    }
    for (int pass = 0; pass < 2; ++pass) {
      t = clk::now();
      if (on_gpu) {
        Launch L = launch_for(write_kernel, ctx);
        write_kernel<<<L.grid, L.block>>>(static_cast<double2*>(mine), bytes / sizeof(double2), kValue);
        UM_CUDA(cudaGetLastError());
        UM_CUDA(cudaDeviceSynchronize());
      } else {
        auto* d = static_cast<double*>(mine);
        team.run([&](int i, int T) {
          size_t lo, hi;
          split_range(nd, T, i, lo, hi);
          if (values == "hash" && pass == 0) {
            for (size_t k = lo; k < hi; ++k) d[k] = uniform01(1, k);
          } else {
            cpu_write(d, lo, hi, kValue);
          }
        });
      }
      (pass == 0 ? first_ms : second_ms).push_back(ms_since(t));
    }
    // (the second pass wrote kValue everywhere, whatever the first wrote)
    size_t bad = on_gpu ? gpu_count_mismatch(static_cast<double*>(mine), nd, 0, kValue)
                        : cpu_count_mismatch(static_cast<double*>(mine), nd, 0, kValue);
    if (bad) throw VerifyError(std::to_string(bad) + " elements wrong after the first touch");
    t = clk::now();
    buf.reset();
    if (needs_cuda) UM_CUDA(cudaDeviceSynchronize());
    free_ms.push_back(ms_since(t));
  }

  const std::string proc = on_gpu ? "gpu" + std::to_string(ctx.device) : "cpu";
  kind.policy.erase("first_touch");
  auto emit = [&](const std::string& op, const std::string& who, const std::vector<double>& ms) {
    JsonObject rec = ctx.record(op, who, kind, bytes);
    Context::put_summary(rec, "time", "ms", ms);
    double med = summarize(ms).median;
    if (op != "alloc" && op != "free" && med > 0) rec.set("gbps", gb_per_s(bytes, med * 1e-3));
    rec.set("by", by);
    rec.set("pretouch", pretouch);
    if (who == "cpu" && op != "alloc" && op != "free") rec.set("values", values);
    rec.set("page", kind.get("page", "default"));
    rec.set("os_page_bytes", static_cast<unsigned long long>(page));
    if (who == "cpu") rec.set("threads", nthreads);
    rec.set("verified", "cpu-reference");  // every element compared with its expected value
    ctx.emit(rec);
  };
  emit("alloc", "host", alloc_ms);
  if (!pretouch_ms.empty()) emit("pretouch", "cpu", pretouch_ms);
  emit("first-touch", proc, first_ms);
  emit("second-touch", proc, second_ms);
  emit("free", "host", free_ms);
}

BenchRegistrar reg({"firsttouch", "gpu|cpu",
                    "allocation, first touch, second touch and free of one kind by one processor (--by), with an "
                    "optional CPU pre-touch; page size from the kind's page policy",
                    {"alloc", "pretouch", "first-touch", "second-touch", "free"},
                    {"kind", "by", "pretouch", "values", "bytes", "threads", "block", "blocks"},
                    run_firsttouch});

}  // namespace
}  // namespace umscope
