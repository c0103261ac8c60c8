// CPU read / write / copy over any CPU-reachable memory kind, with a team of
// threads pinned one per allowed CPU, swept over thread counts; `checksum` times
// the applications' checksum of their results (umscope/checksum.hpp) alone.
#include <algorithm>
#include <chrono>
#include <memory>

#include "umscope/bench.hpp"
#include "umscope/checksum.hpp"
#include "umscope/cpu_kernels.hpp"
#include "umscope/errors.hpp"
#include "umscope/os.hpp"
#include "umscope/pattern.hpp"
#include "umscope/threads.hpp"
#include "umscope/traffic.hpp"

namespace umscope {
namespace {

constexpr double kWriteValue = 42.5;

// The stream table's first three operations (read, write, copy) and the applications' checksum.
std::vector<std::string> cpu_ops() {
  std::vector<std::string> ops = stream_op_names(3);
  ops.push_back("checksum");
  return ops;
}

void run_cpu_stream(Context& ctx) {
  KindSpec kind = parse_kind(ctx.args.str("kind", "system"));
  size_t bytes = ctx.args.page_bytes("bytes", size_t(1) << 30);
  std::vector<std::string> ops = ctx.args.choices("ops", "read,write,copy", cpu_ops());
  std::vector<int> counts = ctx.args.thread_counts("threads", "all");

  Buffer A(kind, bytes, ctx.alloc), B(kind, bytes, ctx.alloc);
  if (!A.cpu()) throw Skip(A.cpu_unreachable());
  A.place(pattern_initializer(1, 0));
  B.place(pattern_initializer(2, 0));
  auto a = static_cast<double*>(A.cpu());
  auto b = static_cast<double*>(B.cpu());
  const size_t n = bytes / sizeof(double);
  // Untimed preparation and checks (zeroing b, counting wrong elements) run on every allowed CPU: over 4x
  // the LLC they took seconds per case on one thread.
  ThreadTeam helpers(static_cast<int>(os::allowed_cpus().size()));
  auto zero_b = [&] {
    helpers.run([&](int t, int T) {
      size_t lo, hi;
      split_range(n, T, t, lo, hi);
      std::fill(b + lo, b + hi, 0.0);
    });
  };
  auto mismatches = [&](double mul, double add) {  // elements of b that are not pattern(i) * mul + add
    std::vector<size_t> bad(static_cast<size_t>(helpers.size()) * 8, 0);
    helpers.run([&](int t, int T) {
      size_t lo, hi, k = 0;
      split_range(n, T, t, lo, hi);
      for (size_t i = lo; i < hi; ++i) k += b[i] != pattern(i) * mul + add;
      bad[t * 8] = k;
    });
    size_t total = 0;
    for (int t = 0; t < helpers.size(); ++t) total += bad[t * 8];
    return total;
  };

  for (int nt : counts) {
    ThreadTeam team(nt);
    std::vector<double> partial(static_cast<size_t>(nt) * 8);  // one cache line apart
    for (const std::string& op : ops) {
      std::function<void(int, int)> body;
      const int arrays = op == "checksum" ? 1 : stream_arrays(op);
      uint64_t sum = 0;
      if (op == "checksum") {
        body = nullptr;
      } else if (op == "read") {
        body = [&](int t, int T) {
          size_t lo, hi;
          split_range(n, T, t, lo, hi);
          partial[t * 8] = cpu_read(a, lo, hi);
        };
      } else if (op == "write") {
        zero_b();
        body = [&](int t, int T) {
          size_t lo, hi;
          split_range(n, T, t, lo, hi);
          cpu_write(b, lo, hi, kWriteValue);
        };
      } else {
        zero_b();
        body = [&](int t, int T) {
          size_t lo, hi;
          split_range(n, T, t, lo, hi);
          cpu_copy(a, b, lo, hi);
        };
      }
      std::vector<double> gbps, times;
      for (int r = 0; r < ctx.warmup + ctx.reps; ++r) {
        double secs = 0;
        if (op == "checksum") {
          const auto t0 = std::chrono::steady_clock::now();
          sum = checksum_fold(kChecksumSeed, static_cast<const unsigned char*>(A.cpu()), bytes, &team);
          secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        } else {
          secs = team.run(body);
        }
        if (r >= ctx.warmup) {
          gbps.push_back(gb_per_s(static_cast<double>(bytes) * arrays, secs));
          times.push_back(secs);
        }
      }
      std::string verdict;
      if (op == "checksum") {
        // the same bytes hashed by this one thread give the same checksum
        if (sum != checksum_fold(kChecksumSeed, static_cast<const unsigned char*>(A.cpu()), bytes, nullptr))
          verdict = "checksum of " + std::to_string(nt) + " threads differs from one thread's";
      } else if (op == "read") {
        double got = 0;
        for (int t = 0; t < nt; ++t) got += partial[t * 8];
        double want = pattern_sum(n);
        if (got != want) verdict = "read sum " + json_number(got) + " != expected " + json_number(want);
      } else {
        size_t bad = mismatches(op == "write" ? 0 : 1, op == "write" ? kWriteValue : 0);
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
                    cpu_ops(),
                    {"kind", "bytes", "ops", "threads"},
                    run_cpu_stream});

}  // namespace
}  // namespace umscope
