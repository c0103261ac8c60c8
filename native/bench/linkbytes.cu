// Link bytes: one operation whose traffic over the host link is known exactly, run once per
// repetition between quiet gaps, so that hardware counters (libumcounters, NVML) can be checked
// against it. --op:
//   zerocopy-read    a kernel reads every byte of a pinned, mapped host buffer once (device -> host
//                    read requests; the bytes cross the link host -> device)
//   h2d-copy         one cudaMemcpy of a pinned host buffer to device memory (a copy engine, no kernel)
//   managed-migrate  the CPU writes a managed buffer, then a kernel reads it once: the driver migrates
//                    every page host -> device on the GPU's faults (first touch by the GPU after the CPU)
// Every record carries known_link_bytes (bytes the operation must move over the host link) and the
// wall-clock interval of each repetition (CLOCK_REALTIME ns, to put counter samples beside it).
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "umscope/bench.hpp"
#include "umscope/errors.hpp"
#include "umscope/stream_kernels.cuh"
#include "umscope/timing.hpp"

namespace umscope {
namespace {

unsigned long long wall_ns() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<unsigned long long>(t.tv_sec) * 1000000000ull + static_cast<unsigned long long>(t.tv_nsec);
}

void run_linkbytes(Context& ctx) {
  const std::string op =
      ctx.args.choices("op", "zerocopy-read", {"zerocopy-read", "h2d-copy", "managed-migrate"})[0];
  const size_t bytes = ctx.args.page_bytes("bytes", size_t(1) << 30);
  const long long gap_ms = ctx.args.integer("gap-ms", 200);
  if (gap_ms < 0 || gap_ms > 10000) throw UsageError("--gap-ms takes 0 to 10000");
  ctx.use_gpu();
  const size_t n2 = bytes / sizeof(double2);
  double* sum = nullptr;
  UM_CUDA(cudaMalloc(&sum, sizeof(double)));
  Launch L = launch_for(read_kernel, ctx);
  // Module load and the first launch's own traffic happen here, before any measured operation.
  UM_CUDA(cudaMemset(sum, 0, sizeof(double)));
  read_kernel<<<L.grid, L.block>>>(reinterpret_cast<const double2*>(sum), 0, sum);
  UM_CUDA(cudaGetLastError());
  UM_CUDA(cudaDeviceSynchronize());
  EventClock clock;
  std::vector<double> ms;
  std::vector<unsigned long long> starts, ends;
  const double expect = 1.0 * static_cast<double>(n2) * 2;  // every double is 1.0
  for (int r = 0; r < ctx.reps; ++r) {
    void* host = nullptr;
    void* dev = nullptr;
    if (op == "managed-migrate") {
      UM_CUDA(cudaMallocManaged(&dev, bytes));
      auto* d = static_cast<double*>(dev);
      for (size_t i = 0; i < bytes / sizeof(double); ++i) d[i] = 1.0;  // pages resident on the CPU
    } else {
      UM_CUDA(cudaHostAlloc(&host, bytes, cudaHostAllocMapped));
      auto* h = static_cast<double*>(host);
      for (size_t i = 0; i < bytes / sizeof(double); ++i) h[i] = 1.0;
      if (op == "h2d-copy") UM_CUDA(cudaMalloc(&dev, bytes));
      else UM_CUDA(cudaHostGetDevicePointer(&dev, host, 0));
    }
    UM_CUDA(cudaMemset(sum, 0, sizeof(double)));
    UM_CUDA(cudaDeviceSynchronize());
    usleep(static_cast<useconds_t>(gap_ms * 1000));
    starts.push_back(wall_ns());
    ms.push_back(clock.time_ms([&] {
      if (op == "h2d-copy") {
        UM_CUDA(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
      } else {
        read_kernel<<<L.grid, L.block>>>(static_cast<const double2*>(dev), n2, sum);
      }
    }));
    ends.push_back(wall_ns());
    usleep(static_cast<useconds_t>(gap_ms * 1000));
    if (op != "h2d-copy") {
      double got = 0;
      UM_CUDA(cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost));
      if (got != expect) throw VerifyError("linkbytes: the kernel summed " + std::to_string(got) + ", expected " +
                                           std::to_string(expect));
    }
    if (op == "managed-migrate") UM_CUDA(cudaFree(dev));
    else {
      if (op == "h2d-copy") UM_CUDA(cudaFree(dev));
      UM_CUDA(cudaFreeHost(host));
    }
  }
  UM_CUDA(cudaFree(sum));
  KindSpec kind = parse_kind(op == "managed-migrate" ? "managed" : "pinned");
  JsonObject rec = ctx.record(op, op == "h2d-copy" ? "copy-engine" : "gpu" + std::to_string(ctx.device), kind, bytes);
  Context::put_summary(rec, "time", "ms", ms);
  double med = summarize(ms).median;
  if (med > 0) rec.set("gbps", static_cast<double>(bytes) / (med * 1e-3) / 1e9);
  rec.set("known_link_bytes", static_cast<unsigned long long>(bytes));
  rec.set("direction", "htod");
  rec.set("gap_ms", gap_ms);
  std::string s = "[", e = "[";
  for (size_t i = 0; i < starts.size(); ++i) {
    s += (i ? "," : "") + std::to_string(starts[i]);
    e += (i ? "," : "") + std::to_string(ends[i]);
  }
  rec.set_raw("wall_start_ns", s + "]");
  rec.set_raw("wall_end_ns", e + "]");
  rec.set("verified", op == "h2d-copy" ? "none (a copy)" : "kernel sum of every element");
  ctx.emit(rec);
}

BenchRegistrar reg({"linkbytes", "gpu",
                    "one operation with known host-link bytes (zero-copy read, copy-engine H2D copy, managed "
                    "first-touch migration) between quiet gaps, to check hardware counters against",
                    {"zerocopy-read", "h2d-copy", "managed-migrate"},
                    {"op", "bytes", "gap-ms", "block", "blocks"},
                    run_linkbytes,
                    {{"op", "choice", "zerocopy-read", "the operation: a kernel reading pinned memory in place, a "
                      "copy-engine copy, or a managed first-touch migration",
                      {"zerocopy-read", "h2d-copy", "managed-migrate"}},
                     {"bytes", "size", "1G", "bytes the operation moves host to device"},
                     {"gap-ms", "int", "200", "quiet milliseconds before and after each operation", {}, "0",
                      "10000"}}});

}  // namespace
}  // namespace umscope
