// CPU read / write / copy over any CPU-reachable memory kind, with a team of
// threads pinned one per allowed CPU, swept over thread counts.
#include <algorithm>
#include <memory>

#include "umscope/bench.hpp"
#include "umscope/errors.hpp"
#include "umscope/os.hpp"
#include "umscope/pattern.hpp"
#include "umscope/threads.hpp"

namespace umscope {
namespace {

constexpr double kWriteValue = 42.5;

double read_chunk(const double* a, size_t begin, size_t end) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = begin;
  for (; i + 4 <= end; i += 4) {
    s0 += a[i];
    s1 += a[i + 1];
    s2 += a[i + 2];
    s3 += a[i + 3];
  }
  for (; i < end; ++i) s0 += a[i];
  return (s0 + s1) + (s2 + s3);
}

std::vector<int> thread_counts(const Context& ctx) {
  int all = static_cast<int>(os::allowed_cpus().size());
  std::vector<int> out;
  for (const std::string& t : ctx.args.list("threads", "all")) {
    if (t == "all") {
      out.push_back(all);
      continue;
    }
    char* end = nullptr;
    long v = std::strtol(t.c_str(), &end, 10);
    if (*end || v < 1) throw UsageError("--threads takes positive integers or 'all', got '" + t + "'");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

void run_cpu_stream(Context& ctx) {
  KindSpec kind = parse_kind(ctx.args.str("kind", "system"));
  size_t bytes = ctx.args.bytes("bytes", size_t(1) << 30) / 4096 * 4096;
  if (bytes == 0) throw UsageError("--bytes must be at least 4 KiB");
  std::vector<std::string> ops = ctx.args.list("ops", "read,write,copy");
  for (auto& op : ops)
    if (op != "read" && op != "write" && op != "copy") throw UsageError("unknown op '" + op + "' (read, write, copy)");
  std::vector<int> counts = thread_counts(ctx);

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
      int arrays = op == "copy" ? 2 : 1;
      if (op == "read") {
        body = [&](int t, int T) {
          size_t lo, hi;
          split_range(n, T, t, lo, hi);
          partial[t * 8] = read_chunk(a, lo, hi);
        };
      } else if (op == "write") {
        std::fill(b, b + n, 0.0);
        body = [&](int t, int T) {
          size_t lo, hi;
          split_range(n, T, t, lo, hi);
          for (size_t i = lo; i < hi; ++i) b[i] = kWriteValue;
        };
      } else {
        std::fill(b, b + n, 0.0);
        body = [&](int t, int T) {
          size_t lo, hi;
          split_range(n, T, t, lo, hi);
          for (size_t i = lo; i < hi; ++i) b[i] = a[i];
        };
      }
      std::vector<double> gbps;
      for (int r = 0; r < ctx.warmup + ctx.reps; ++r) {
        double secs = team.run(body);
        if (r >= ctx.warmup) gbps.push_back(static_cast<double>(bytes) * arrays / secs / 1e9);
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
      rec.set("verified", true);
      rec.set("residency", A.residency());
      ctx.emit(rec);
    }
  }
}

BenchRegistrar reg({"cpu-stream", "cpu",
                    "CPU threads (pinned, one per core) read, write and copy (b=a) arrays of one memory kind",
                    {"read", "write", "copy"},
                    {"kind", "bytes", "ops", "threads"},
                    run_cpu_stream});

}  // namespace
}  // namespace umscope
