// CPU read / write / copy over any CPU-reachable memory kind, with a team of
// threads pinned one per allowed CPU, swept over thread counts.
#include <algorithm>
#include <memory>

#include "umscope/bench.hpp"
#include "umscope/cpu_kernels.hpp"
#include "umscope/errors.hpp"
#include "umscope/os.hpp"
#include "umscope/pattern.hpp"
#include "umscope/threads.hpp"
#include "umscope/traffic.hpp"

namespace umscope {
namespace {

constexpr double kWriteValue = 42.5;

void run_cpu_stream(Context& ctx) {
  KindSpec kind = parse_kind(ctx.args.str("kind", "system"));
  size_t bytes = ctx.args.page_bytes("bytes", size_t(1) << 30);
  std::vector<std::string> ops = ctx.args.choices("ops", "read,write,copy", stream_op_names(3));
  std::vector<int> counts = ctx.args.thread_counts("threads", "all");

  Buffer A(kind, bytes, ctx.alloc), B(kind, bytes, ctx.alloc);
  if (!A.cpu()) throw Skip(A.cpu_unreachable());
  A.place(pattern_initializer(1, 0));
  B.place(pattern_initializer(2, 0));
  auto a = static_cast<double*>(A.cpu());
  auto b = static_cast<double*>(B.cpu());
  const size_t n = bytes / sizeof(double);

  for (int nt : counts) {
    ThreadTeam team(nt);
    std::vector<double> partial(static_cast<size_t>(nt) * 8);  // one cache line apart
    for (const std::string& op : ops) {
      std::function<void(int, int)> body;
      const int arrays = stream_arrays(op);
      if (op == "read") {
        body = [&](int t, int T) {
          size_t lo, hi;
          split_range(n, T, t, lo, hi);
          partial[t * 8] = cpu_read(a, lo, hi);
        };
      } else if (op == "write") {
        std::fill(b, b + n, 0.0);
        body = [&](int t, int T) {
          size_t lo, hi;
          split_range(n, T, t, lo, hi);
          cpu_write(b, lo, hi, kWriteValue);
        };
      } else {
        std::fill(b, b + n, 0.0);
        body = [&](int t, int T) {
          size_t lo, hi;
          split_range(n, T, t, lo, hi);
          cpu_copy(a, b, lo, hi);
        };
      }
      std::vector<double> gbps, times;
      for (int r = 0; r < ctx.warmup + ctx.reps; ++r) {
        double secs = team.run(body);
        if (r >= ctx.warmup) {
          gbps.push_back(gb_per_s(static_cast<double>(bytes) * arrays, secs));
          times.push_back(secs);
        }
      }
      std::string verdict;
      if (op == "read") {
        double got = 0;
        for (int t = 0; t < nt; ++t) got += partial[t * 8];
        double want = pattern_sum(n);
        if (got != want) verdict = "read sum " + json_number(got) + " != expected " + json_number(want);
      } else {
        size_t bad = cpu_count_mismatch(b, n, op == "write" ? 0 : 1, op == "write" ? kWriteValue : 0);
        if (bad) verdict = std::to_string(bad) + " of " + std::to_string(n) + " elements wrong after " + op;
      }
      if (!verdict.empty()) throw VerifyError(verdict);
      JsonObject rec = ctx.record(op, "cpu", kind, bytes);
      rec.set("threads", nt);
      Context::put_summary(rec, "bandwidth", "GB/s", gbps);
      rec.set("traffic_bytes", static_cast<unsigned long long>(bytes) * arrays);
      rec.set("seconds", times);  // each repetition's time, so bandwidth = traffic_bytes / seconds / 1e9
      rec.set("verified", "cpu-reference");  // every element compared with its expected value
      rec.set("residency", A.residency());
      ctx.emit(rec);
    }
  }
}

BenchRegistrar reg({"cpu-stream", "cpu",
                    "CPU threads (pinned, one per core) read, write and copy (b=a) arrays of one memory kind",
                    stream_op_names(3),
                    {"kind", "bytes", "ops", "threads"},
                    run_cpu_stream});

}  // namespace
}  // namespace umscope
