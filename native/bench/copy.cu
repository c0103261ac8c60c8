// Copy matrix: src kind -> dst kind, by the copy engines (cudaMemcpyAsync)
// or by SMs (the stream copy kernel), one direction or both at once.
// Sizes are a list: the largest is allocated once and prefixes are copied.
#include <algorithm>
#include <cstring>
#include <memory>

#include "stream_kernels.cuh"
#include "umscope/pattern.hpp"

namespace umscope {
namespace {

struct Pair {
  std::unique_ptr<Buffer> src, dst;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
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

  // Forward pair src->dst; with bidir a reverse pair dst_kind->src_kind runs at once.
  std::vector<Pair> pairs(direction == "bidir" ? 2 : 1);
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
    UM_CUDA(cudaStreamCreateWithFlags(&pairs[p].stream, cudaStreamNonBlocking));
    UM_CUDA(cudaEventCreate(&pairs[p].start));
    UM_CUDA(cudaEventCreate(&pairs[p].stop));
  }
  Launch L{};
  if (engine == "sm") L = launch_for(copy_kernel, ctx);

  for (size_t bytes : sizes) {
    for (auto& pr : pairs) poison(*pr.dst, bytes);
    std::vector<std::vector<double>> per_dir(pairs.size());
    std::vector<double> total;
    for (int r = 0; r < ctx.warmup + ctx.reps; ++r) {
      // A common start: every stream waits on the first stream's start event.
      UM_CUDA(cudaEventRecord(pairs[0].start, pairs[0].stream));
      for (size_t p = 1; p < pairs.size(); ++p) {
        UM_CUDA(cudaStreamWaitEvent(pairs[p].stream, pairs[0].start, 0));
        UM_CUDA(cudaEventRecord(pairs[p].start, pairs[p].stream));
      }
      for (auto& pr : pairs) {
        if (engine == "ce") {
          UM_CUDA(cudaMemcpyAsync(ce_ptr(*pr.dst), ce_ptr(*pr.src), bytes, cudaMemcpyDefault, pr.stream));
        } else {
          copy_kernel<<<L.grid, L.block, 0, pr.stream>>>(static_cast<const double2*>(pr.src->gpu()),
                                                         static_cast<double2*>(pr.dst->gpu()), bytes / 16);
          UM_CUDA(cudaGetLastError());
        }
        UM_CUDA(cudaEventRecord(pr.stop, pr.stream));
      }
      float longest = 0;
      for (size_t p = 0; p < pairs.size(); ++p) {
        UM_CUDA(cudaEventSynchronize(pairs[p].stop));
        float ms = 0;
        UM_CUDA(cudaEventElapsedTime(&ms, pairs[0].start, pairs[p].stop));
        longest = std::max(longest, ms);
        if (r >= ctx.warmup) per_dir[p].push_back(bytes / (ms * 1e-3) / 1e9);
      }
      if (r >= ctx.warmup) total.push_back(bytes * pairs.size() / (longest * 1e-3) / 1e9);
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
      rec.set("direction", direction);
      rec.set("route", p == 0 ? "forward" : "reverse");
      Context::put_summary(rec, "bandwidth", "GB/s", per_dir[p]);
      rec.set("verified", true);
      ctx.emit(rec);
    }
    if (pairs.size() > 1) {
      JsonObject rec = ctx.record(op, proc, src_kind, bytes);
      rec.set("dst_kind", dst_kind.label());
      rec.set("dst_policy", dst_kind.policy_str());
      rec.set("direction", direction);
      rec.set("route", "both");
      Context::put_summary(rec, "bandwidth", "GB/s", total);
      rec.set("verified", true);
      ctx.emit(rec);
    }
  }
  for (auto& pr : pairs) {
    cudaStreamDestroy(pr.stream);
    cudaEventDestroy(pr.start);
    cudaEventDestroy(pr.stop);
  }
}

BenchRegistrar reg({"copy", "gpu",
                    "copy src kind -> dst kind by the copy engines (--engine ce, cudaMemcpyAsync) or SMs "
                    "(--engine sm), one direction or both at once (--direction bidir); --bytes takes a list",
                    {"ce-copy", "sm-copy"},
                    {"kind", "dst", "bytes", "engine", "direction", "block", "blocks"},
                    run_copy});

}  // namespace
}  // namespace umscope
