// Copy matrix: src kind -> dst kind, by the copy engines (cudaMemcpyAsync)
// or by SMs (the stream copy kernel), one direction or both at once.
// Sizes are a list: the largest is allocated once and prefixes are copied.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>

#include "umscope/stream_kernels.cuh"
#include "umscope/pattern.hpp"
#include "umscope/traffic.hpp"
#include "umscope/timing.hpp"

namespace umscope {
namespace {

struct Pair {
  std::unique_ptr<Buffer> src, dst;
  int dev = 0;  // the GPU whose stream issues the copy
  cudaStream_t stream = nullptr;
  std::unique_ptr<EventClock> clock;  // 0: start, 1: stop, on the pair's stream
};

// The pointer a copy engine is given: the host address where the CPU has one
// (pageable memory must be passed as such), otherwise the device address.
void* ce_ptr(const Buffer& b) { return b.cpu() ? b.cpu() : b.gpu(); }

size_t mismatches(const Buffer& b, size_t bytes) {
  size_t n = bytes / sizeof(double);
  if (b.gpu()) return gpu_count_mismatch(static_cast<const double*>(b.gpu()), n, 1, 0);
  return cpu_count_mismatch(static_cast<const double*>(b.cpu()), n, 1, 0);
}

void poison(Buffer& b, size_t bytes) {
  if (b.gpu()) gpu_poison(b.gpu(), bytes);
  else std::memset(b.cpu(), 0xFF, bytes);
}

// Timed repetitions of one size when --reps is not given: the default count (20), or fewer where a
// repetition is slow, as many as fill kRepBudgetSec but never fewer than kMinReps. On the H100 host the
// median of the first 8 of 20 repetitions of each copy slower than 10 ms (18 figures of two full-suite runs,
// bench/first_reps.py, docs/suite-reps.md) was within 8.9% of the 20-repetition median, inside the samples'
// spread (8-72%) and the same figure's change from one run to the other (up to 26%).
constexpr double kRepBudgetSec = 0.3;
constexpr int kMinReps = 8;

int budget_reps(int reps, double first_rep_sec) {
  if (first_rep_sec <= 0) return reps;
  const double fit = std::ceil(kRepBudgetSec / first_rep_sec);
  return std::min(reps, std::max(kMinReps, static_cast<int>(std::min(fit, 1e6))));
}

void run_copy(Context& ctx) {
  KindSpec src_kind = parse_kind(ctx.args.str("kind", "pinned"));
  KindSpec dst_kind = parse_kind(ctx.args.str("dst", "device"));
  std::string engine = ctx.args.str("engine", "ce");
  std::string direction = ctx.args.str("direction", "uni");
  if (engine != "ce" && engine != "sm") throw UsageError("--engine is ce or sm");
  if (direction != "uni" && direction != "bidir") throw UsageError("--direction is uni or bidir");
  std::vector<size_t> sizes;
  for (const std::string& s : ctx.args.list("bytes", "256M")) sizes.push_back(parse_bytes(s) / 16 * 16);
  for (size_t s : sizes)
    if (s == 0) throw UsageError("copy sizes must be at least 16 bytes");
  const size_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  ctx.use_gpu();

  // Forward pair src->dst; with bidir a reverse pair dst_kind->src_kind runs at once. Between this GPU
  // and a peer's memory, the reverse copy is issued by the peer, so each GPU's copy engines pull into
  // its own memory (as nvbandwidth does); one GPU issuing both shares its engines between them.
  std::vector<Pair> pairs(direction == "bidir" ? 2 : 1);
  int peer = src_kind.name == "peer" ? src_kind.arg : dst_kind.name == "peer" ? dst_kind.arg : -1;
  const bool split = direction == "bidir" && engine == "ce" && peer >= 0 && peer != ctx.device;
  for (size_t p = 0; p < pairs.size(); ++p) {
    const KindSpec& from = p == 0 ? src_kind : dst_kind;
    const KindSpec& to = p == 0 ? dst_kind : src_kind;
    pairs[p].src.reset(new Buffer(from, max_bytes, ctx.alloc));
    pairs[p].dst.reset(new Buffer(to, max_bytes, ctx.alloc));
    if (engine == "sm")
      for (Buffer* b : {pairs[p].src.get(), pairs[p].dst.get()})
        if (!b->gpu()) throw Skip("SM copy: " + b->gpu_unreachable());
    pairs[p].src->place(pattern_initializer(1, 0));
    pairs[p].dst->place(pattern_initializer(2, 0));
    pairs[p].dev = split && p == 1 ? peer : ctx.device;
    UM_CUDA(cudaSetDevice(pairs[p].dev));
    if (pairs[p].dev != ctx.device) {
      cudaError_t e = cudaDeviceEnablePeerAccess(ctx.device, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
      else UM_CUDA(e);
    }
    UM_CUDA(cudaStreamCreateWithFlags(&pairs[p].stream, cudaStreamNonBlocking));
    pairs[p].clock.reset(new EventClock(2, pairs[p].stream));
    UM_CUDA(cudaSetDevice(ctx.device));
  }
  Launch L{};
  if (engine == "sm") L = launch_for(copy_kernel, ctx);

  for (size_t bytes : sizes) {
    for (auto& pr : pairs) poison(*pr.dst, bytes);
    std::vector<std::vector<double>> per_dir(pairs.size());
    std::vector<double> total;
    int reps = ctx.reps;
    for (int r = 0; r < ctx.warmup + reps; ++r) {
      // A common start: every stream waits on the first stream's start event.
      const auto host_t0 = std::chrono::steady_clock::now();
      pairs[0].clock->record(0);
      for (size_t p = 1; p < pairs.size(); ++p) {
        UM_CUDA(cudaSetDevice(pairs[p].dev));  // a stream takes work with its own GPU current
        UM_CUDA(cudaStreamWaitEvent(pairs[p].stream, pairs[0].clock->event(0), 0));
        pairs[p].clock->record(0);
      }
      for (auto& pr : pairs) {
        UM_CUDA(cudaSetDevice(pr.dev));
        if (engine == "ce") {
          UM_CUDA(cudaMemcpyAsync(ce_ptr(*pr.dst), ce_ptr(*pr.src), bytes, cudaMemcpyDefault, pr.stream));
        } else {
          copy_kernel<<<L.grid, L.block, 0, pr.stream>>>(static_cast<const double2*>(pr.src->gpu()),
                                                         static_cast<double2*>(pr.dst->gpu()), bytes / 16);
          UM_CUDA(cudaGetLastError());
        }
        pr.clock->record(1);
      }
      UM_CUDA(cudaSetDevice(ctx.device));
      float longest = 0;
      for (size_t p = 0; p < pairs.size(); ++p) {
        pairs[p].clock->wait(1);
        // Events of two GPUs cannot be subtracted: there, each direction from its own start, and
        // both together by the host's clock from before the first start to after the last stop.
        const float ms = (split ? pairs[p] : pairs[0]).clock->ms(0, *pairs[p].clock, 1);
        longest = std::max(longest, ms);
        if (r >= ctx.warmup) per_dir[p].push_back(gb_per_s(bytes, ms * 1e-3));
      }
      if (split)
        longest = static_cast<float>(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_t0).count());
      if (r >= ctx.warmup) total.push_back(gb_per_s(double(bytes) * pairs.size(), longest * 1e-3));
      // A slow copy (host to host through the driver's staging: 7-8 GB/s, 35-55 ms per 256 MiB) repeats
      // for a time budget instead of the default count; a --reps given is kept.
      if (r == ctx.warmup && !ctx.args.has("reps")) reps = budget_reps(ctx.reps, longest * 1e-3);
    }
    for (auto& pr : pairs) {
      size_t bad = mismatches(*pr.dst, bytes);
      if (bad) throw VerifyError(std::to_string(bad) + " elements wrong after " + engine + " copy " +
                                 pr.src->kind().str() + " -> " + pr.dst->kind().str());
    }
    std::string op = engine + "-copy";
    std::string proc = engine == "ce" ? "ce" + std::to_string(ctx.device) : "gpu" + std::to_string(ctx.device);
    for (size_t p = 0; p < pairs.size(); ++p) {
      JsonObject rec = ctx.record(op, proc, pairs[p].src->kind(), bytes);
      rec.set("dst_kind", pairs[p].dst->kind().label());
      rec.set("dst_policy", pairs[p].dst->kind().policy_str());
      rec.set("dst_location", kind_place(pairs[p].dst->kind(), ctx.device).location);
      rec.set("direction", direction);
      rec.set("route", p == 0 ? "forward" : "reverse");
      Context::put_summary(rec, "bandwidth", "GB/s", per_dir[p]);
      rec.set("verified", "cpu-reference");  // every element compared with its expected value
      ctx.emit(rec);
    }
    if (pairs.size() > 1) {
      JsonObject rec = ctx.record(op, proc, src_kind, bytes);
      rec.set("dst_kind", dst_kind.label());
      rec.set("dst_policy", dst_kind.policy_str());
      rec.set("dst_location", kind_place(dst_kind, ctx.device).location);
      rec.set("direction", direction);
      rec.set("route", "both");
      if (split) rec.set("issued_by", "each GPU its own direction; timed by the host clock");
      Context::put_summary(rec, "bandwidth", "GB/s", total);
      rec.set("verified", "cpu-reference");  // every element compared with its expected value
      ctx.emit(rec);
    }
  }
  for (auto& pr : pairs) {
    cudaSetDevice(pr.dev);
    pr.clock.reset();
    cudaStreamDestroy(pr.stream);
  }
  cudaSetDevice(ctx.device);
}

BenchRegistrar reg({"copy", "gpu",
                    "copy src kind -> dst kind by the copy engines (--engine ce, cudaMemcpyAsync) or SMs "
                    "(--engine sm), one direction or both at once (--direction bidir); --bytes takes a list",
                    {"ce-copy", "sm-copy"},
                    {"kind", "dst", "bytes", "engine", "direction", "block", "blocks"},
                    run_copy});

}  // namespace
}  // namespace umscope
