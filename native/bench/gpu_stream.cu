// GPU read / write / copy / triad over any GPU-reachable memory kind.
// One kernel per operation; the kind only changes the pointers it is given.
// 16-byte accesses (double2), four independent loads in flight per thread,
// grid sized from the occupancy API; timed with CUDA events per repetition.
//
// Two access patterns beside the stream, for what a kernel re-reads and gathers over the link (the
// calibrated model's zero-copy terms, python/umscope/model/calibrated.py):
//   reread  the read kernel over the first --window bytes, --passes times back to back (a working-set
//           sweep: a window the L2 holds is re-read from the L2 if the GPU caches the kind's lines, else
//           from where it lives); one record per window.
//   gather  --accesses independent 8-byte loads at random slots of the whole array (a resident grid, four
//           loads in flight per thread): random sector reads; scatter: the same as 8-byte stores;
//           gather-scatter: a random load and a random store (of another array) per access, both at once.
//   read-words  the stream read with loads of --width bytes (4, 8, 16; one record per width): what a kernel
//           of 4-byte (float, int) loads gets from the memory beside one of 16-byte loads (the model's link
//           rate by access width); the 32-bit words summed as integers, checked against the pattern's.
//   copy-words  the stream copy (b = a) in loads and stores of --width bytes; b checked element by element.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include "umscope/bench.hpp"
#include "umscope/caps.hpp"
#include "umscope/errors.hpp"
#include "umscope/pattern.hpp"
#include "umscope/traffic.hpp"
#include "umscope/stream_kernels.cuh"
#include "umscope/timing.hpp"

namespace umscope {
namespace {

constexpr double kTriadScalar = 3.0;

// The slot of access j (splitmix64's finaliser), in the kernels.
UMSCOPE_HOST_DEVICE inline size_t random_slot(unsigned long long j, size_t n) {
  unsigned long long z = j + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<size_t>((z ^ (z >> 31)) % n);
}

// The verifying CPU's slot of access j, a second implementation on purpose (not random_slot(), the kernels'):
// splitmix64's finaliser as its stages (xor-shift, multiply) on j plus the golden-ratio increment, modulo n.
size_t ref_slot(unsigned long long j, size_t n) {
  static const struct {
    int shift;
    unsigned long long mul;
  } kStages[] = {{30, 0xbf58476d1ce4e5b9ull}, {27, 0x94d049bb133111ebull}, {31, 1}};
  unsigned long long z = j + 0x9e3779b97f4a7c15ull;
  for (const auto& s : kStages) z = (z ^ (z >> s.shift)) * s.mul;
  return static_cast<size_t>(z % n);
}

constexpr unsigned long long kStoreSequence = 1ull << 60;  // gather-scatter: the stores' own sequence

// Each thread loads `per` random slots, four independent loads in flight; sums into one word.
__global__ void gather_kernel(const double* __restrict__ a, size_t n, size_t per, double* out) {
  const unsigned long long t = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t j = 0;
  for (; j + 3 < per; j += 4) {
    const unsigned long long b = t * per + j;
    const double x0 = a[random_slot(b, n)], x1 = a[random_slot(b + 1, n)], x2 = a[random_slot(b + 2, n)],
                 x3 = a[random_slot(b + 3, n)];
    s0 += x0, s1 += x1, s2 += x2, s3 += x3;
  }
  for (; j < per; ++j) s0 += a[random_slot(t * per + j, n)];
  double s = (s0 + s1) + (s2 + s3);
  for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}

// Both at once: each thread loads `per` random slots of a and stores v to `per` other random slots of c
// (the store's slot from a second sequence), the loads summed into one word.
__global__ void gather_scatter_kernel(const double* __restrict__ a, double* __restrict__ c, size_t n, size_t per,
                                      double v, double* out) {
  const unsigned long long t = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  double s = 0;
  for (size_t j = 0; j < per; ++j) {
    s += a[random_slot(t * per + j, n)];
    c[random_slot(kStoreSequence + t * per + j, n)] = v;
  }
  for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}

// Each thread stores v to `per` random slots.
__global__ void scatter_kernel(double* __restrict__ c, size_t n, size_t per, double v) {
  const unsigned long long t = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (size_t j = 0; j < per; ++j) c[random_slot(t * per + j, n)] = v;
}
constexpr double kWriteValue = 42.5;

// read-words: each thread sums the 32-bit words of its loads of type W (4, 8 or 16 bytes), four loads in
// flight, grid-stride; the sums (integers: exact in any order) into one word.
__device__ __forceinline__ unsigned long long word_sum(unsigned int w) { return w; }
__device__ __forceinline__ unsigned long long word_sum(unsigned long long w) { return (w & 0xffffffffull) + (w >> 32); }
__device__ __forceinline__ unsigned long long word_sum(uint4 w) {
  return static_cast<unsigned long long>(w.x) + w.y + w.z + w.w;
}
template <typename W>
__global__ void read_words_kernel(const W* __restrict__ a, size_t n, unsigned long long* out) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  unsigned long long s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const W x0 = a[i], x1 = a[i + stride], x2 = a[i + 2 * stride], x3 = a[i + 3 * stride];
    s0 += word_sum(x0), s1 += word_sum(x1), s2 += word_sum(x2), s3 += word_sum(x3);
  }
  for (; i < n; i += stride) s0 += word_sum(a[i]);
  unsigned long long s = (s0 + s1) + (s2 + s3);
  for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}

// copy-words: b[i] = a[i] in loads and stores of type W, four in flight, grid-stride.
template <typename W>
__global__ void copy_words_kernel(const W* __restrict__ a, W* __restrict__ b, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const W x0 = a[i], x1 = a[i + stride], x2 = a[i + 2 * stride], x3 = a[i + 3 * stride];
    b[i] = x0, b[i + stride] = x1, b[i + 2 * stride] = x2, b[i + 3 * stride] = x3;
  }
  for (; i < n; i += stride) b[i] = a[i];
}

// Calls f with a value of the unsigned word type of `width` bytes (4, 8 or 16): read-words' and copy-words'
// kernels for that width.
template <typename F>
void with_word(int width, F&& f) {
  if (width == 4) f(0u);
  else if (width == 8) f(0ull);
  else f(uint4{});
}

// The sum of the 32-bit words of pattern(0..nd-1), as read-words computes it.
unsigned long long pattern_word_sum(size_t nd) {
  unsigned long long want = 0;
  for (size_t i = 0; i < nd; ++i) {
    const double v = pattern(i);
    unsigned int w[2];
    std::memcpy(w, &v, sizeof v);
    want += static_cast<unsigned long long>(w[0]) + w[1];
  }
  return want;
}

// Every operation, named once: the stream ops (core/stream_ops.cpp) and the access patterns above; --ops's
// choices and the registrar's list.
std::vector<std::string> gpu_stream_ops() {
  std::vector<std::string> o = stream_op_names();
  for (const char* x : {"reread", "gather", "scatter", "gather-scatter", "read-words", "copy-words"}) o.push_back(x);
  return o;
}

void run_gpu_stream(Context& ctx) {
  KindSpec kind = parse_kind(ctx.args.str("kind", "device"));
  // Whole 4 KiB pages, so every array is made of 16-byte elements.
  size_t bytes = ctx.args.page_bytes("bytes", size_t(1) << 30);
  std::vector<std::string> ops = ctx.args.choices("ops", "read,write,copy,triad", gpu_stream_ops());
  std::vector<size_t> windows;
  for (const std::string& w : ctx.args.list("window", "4M,16M,32M,64M,128M,256M")) {
    const size_t b = parse_bytes(w) / 4096 * 4096;
    if (b < 4096) throw UsageError("--window '" + w + "' is under one 4 KiB page");
    if (b <= bytes) windows.push_back(b);
  }
  const long long passes = ctx.args.integer("passes", 8);
  if (passes < 1 || passes > 1000) throw UsageError("--passes takes 1 to 1000");
  const long long accesses = ctx.args.integer("accesses", 1 << 24);
  if (accesses < 1 || accesses > (1LL << 34)) throw UsageError("--accesses takes 1 to 2^34");
  std::vector<int> widths;
  for (const std::string& w : ctx.args.list("width", "4,8,16")) {
    if (w != "4" && w != "8" && w != "16") throw UsageError("--width takes 4, 8 or 16 (bytes per load), not '" + w + "'");
    widths.push_back(std::stoi(w));
  }
  ctx.use_gpu();

  auto needs = [&](const char* op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); };
  if (needs("reread") && windows.empty()) throw UsageError("no --window fits in --bytes");
  bool need_a = needs("read") || needs("copy") || needs("triad") || needs("reread") || needs("gather") ||
                needs("gather-scatter") || needs("read-words") || needs("copy-words");
  bool need_b = needs("copy") || needs("triad") || needs("copy-words");
  bool need_c = needs("write") || needs("triad") || needs("scatter") || needs("gather-scatter");
  // Managed arrays together must fit: the guard sees each one alone.
  if (kind.name == "managed") check_managed_memory(bytes * (need_a + need_b + need_c), ctx.alloc);
  std::unique_ptr<Buffer> A, B, C;
  if (need_a) A.reset(new Buffer(kind, bytes, ctx.alloc));
  if (need_b) B.reset(new Buffer(kind, bytes, ctx.alloc));
  if (need_c) C.reset(new Buffer(kind, bytes, ctx.alloc));
  for (Buffer* buf : {A.get(), B.get(), C.get()})
    if (buf) buf->reach(true);  // or Skip
  if (A) A->place(pattern_initializer(1, 0));
  if (B) B->place(pattern_initializer(2, 0));
  if (C) C->place(pattern_initializer(3, 0));

  const size_t n2 = bytes / sizeof(double2);
  const size_t nd = bytes / sizeof(double);
  auto a = A ? static_cast<double2*>(A->gpu()) : nullptr;
  auto b = B ? static_cast<double2*>(B->gpu()) : nullptr;
  auto c = C ? static_cast<double2*>(C->gpu()) : nullptr;
  double* sum = nullptr;
  UM_CUDA(cudaMalloc(&sum, sizeof(double)));
  EventClock clock;
  std::string proc = "gpu" + std::to_string(ctx.device);

  for (const std::string& op : ops) {
    if (op == "reread") {
      Launch L = launch_for(read_kernel, ctx);
      for (size_t w : windows) {
        const size_t wn2 = w / sizeof(double2);
        std::vector<double> gbps;
        for (double ms : repeat_ms(
                 clock, ctx.warmup, ctx.reps,
                 [&] {
                   for (long long p = 0; p < passes; ++p) read_kernel<<<L.grid, L.block>>>(a, wn2, sum);
                 },
                 [&](int) { UM_CUDA(cudaMemsetAsync(sum, 0, sizeof(double))); }))
          gbps.push_back(gb_per_s(double(w) * passes, ms * 1e-3));
        double got = 0;
        UM_CUDA(cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost));
        const double want = double(passes) * pattern_sum(w / sizeof(double));
        if (got != want) throw VerifyError("reread sum " + json_number(got) + " != expected " + json_number(want));
        JsonObject rec = ctx.record(op, proc, kind, bytes);
        Context::put_summary(rec, "bandwidth", "GB/s", gbps);
        rec.set("window", static_cast<unsigned long long>(w));
        rec.set("passes", passes);
        rec.set("traffic_bytes", static_cast<unsigned long long>(w * passes));
        rec.set("grid", L.grid);
        rec.set("block", L.block);
        rec.set("verified", "cpu-reference");  // the sum of every pass equals the pattern's
        rec.set("residency", A->residency());
        ctx.emit(rec);
      }
      continue;
    }
    if (op == "read-words" || op == "copy-words") {
      const bool rd = op == "read-words";
      unsigned long long* wsum = nullptr;
      if (rd) UM_CUDA(cudaMalloc(&wsum, sizeof *wsum));
      const unsigned long long want = rd ? pattern_word_sum(nd) : 0;
      for (int width : widths) {
        Launch L{};
        std::function<void()> launch;
        with_word(width, [&](auto word) {
          using W = decltype(word);
          const size_t n = bytes / sizeof(W);
          const W* src = static_cast<const W*>(A->gpu());
          if (rd) {
            L = launch_for(read_words_kernel<W>, ctx);
            launch = [&, n, src] { read_words_kernel<W><<<L.grid, L.block>>>(src, n, wsum); };
          } else {
            L = launch_for(copy_words_kernel<W>, ctx);
            W* dst = static_cast<W*>(B->gpu());
            launch = [&, n, src, dst] { copy_words_kernel<W><<<L.grid, L.block>>>(src, dst, n); };
          }
        });
        if (!rd) gpu_poison(b, bytes);
        const size_t traffic = rd ? bytes : 2 * bytes;
        std::vector<double> gbps;
        for (double ms : repeat_ms(clock, ctx.warmup, ctx.reps, launch, [&](int) {
               if (rd) UM_CUDA(cudaMemsetAsync(wsum, 0, sizeof *wsum));
             }))
          gbps.push_back(gb_per_s(double(traffic), ms * 1e-3));
        if (rd) {
          unsigned long long got = 0;
          UM_CUDA(cudaMemcpy(&got, wsum, sizeof got, cudaMemcpyDeviceToHost));
          if (got != want)
            throw VerifyError("read-words width " + std::to_string(width) + ": word sum " + std::to_string(got) +
                              " != expected " + std::to_string(want));
        } else if (const size_t bad = gpu_count_mismatch(reinterpret_cast<double*>(b), nd, 1, 0)) {
          throw VerifyError(std::to_string(bad) + " of " + std::to_string(nd) +
                            " elements wrong after copy-words width " + std::to_string(width));
        }
        JsonObject rec = ctx.record(op, proc, kind, bytes);
        Context::put_summary(rec, "bandwidth", "GB/s", gbps);
        rec.set("access_bytes", width);
        rec.set("traffic_bytes", static_cast<unsigned long long>(traffic));
        rec.set("grid", L.grid);
        rec.set("block", L.block);
        // read-words: the words' sum equals the pattern's; copy-words: every element compared with its expected value
        rec.set("verified", "cpu-reference");
        rec.set("residency", A->residency());
        ctx.emit(rec);
      }
      if (wsum) cudaFree(wsum);
      continue;
    }
    if (op == "gather" || op == "scatter" || op == "gather-scatter") {
      const bool g = op == "gather", both = op == "gather-scatter";
      Launch L = g ? launch_for(gather_kernel, ctx) : both ? launch_for(gather_scatter_kernel, ctx)
                                                       : launch_for(scatter_kernel, ctx);
      const size_t threads = size_t(L.grid) * L.block;
      const size_t per = (static_cast<size_t>(accesses) + threads - 1) / threads;
      const double done = double(per) * threads;
      if (!g) gpu_poison(c, bytes);
      std::vector<double> rate;
      for (double ms : repeat_ms(
               clock, ctx.warmup, ctx.reps,
               [&] {
                 if (g) gather_kernel<<<L.grid, L.block>>>(reinterpret_cast<const double*>(a), nd, per, sum);
                 else if (both)
                   gather_scatter_kernel<<<L.grid, L.block>>>(reinterpret_cast<const double*>(a),
                                                              reinterpret_cast<double*>(c), nd, per, kWriteValue, sum);
                 else scatter_kernel<<<L.grid, L.block>>>(reinterpret_cast<double*>(c), nd, per, kWriteValue);
               },
               [&](int) {
                 if (g || both) UM_CUDA(cudaMemsetAsync(sum, 0, sizeof(double)));
               }))
        rate.push_back(done / (ms * 1e-3) / 1e9);
      // Verify on the CPU: the gathered sum over the same slots; every scattered slot holds the value.
      std::string verdict;
      if (g || both) {
        double got = 0, want = 0;
        UM_CUDA(cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost));
        for (unsigned long long j = 0; j < static_cast<unsigned long long>(done); ++j) want += pattern(ref_slot(j, nd));
        if (got != want) verdict = "gather sum " + json_number(got) + " != expected " + json_number(want);
      }
      if (!g) {
        std::vector<double> h(nd);
        UM_CUDA(cudaMemcpy(h.data(), c, bytes, cudaMemcpyDefault));
        const unsigned long long first = both ? kStoreSequence : 0;
        size_t bad = 0;
        for (unsigned long long j = 0; j < static_cast<unsigned long long>(done); ++j)
          bad += h[ref_slot(first + j, nd)] != kWriteValue;
        if (bad) verdict += (verdict.empty() ? "" : "; ") + std::to_string(bad) + " scattered slots do not hold the value";
      }
      if (!verdict.empty()) throw VerifyError(verdict);
      JsonObject rec = ctx.record(op, proc, kind, bytes);
      Context::put_summary(rec, "access_rate", "G/s", rate);
      rec.set("accesses", done);
      rec.set("access_bytes", 8);
      rec.set("traffic_bytes", done * 8);
      rec.set("grid", L.grid);
      rec.set("block", L.block);
      rec.set("verified", "cpu-reference");
      if (both) rec.set("pairs", "each access one random load and one random store");
      rec.set("residency", (g ? A : C)->residency());
      ctx.emit(rec);
      continue;
    }
    Launch L{};
    const int arrays = stream_arrays(op);
    std::function<void()> launch;
    double* check = nullptr;
    double mul = 1, add = 0;
    if (op == "read") {
      // The read sums into one word: a resident grid keeps the atomics few.
      L = launch_for(read_kernel, ctx);
      launch = [&] { read_kernel<<<L.grid, L.block>>>(a, n2, sum); };
    } else if (op == "write") {
      L = launch_for(write_kernel, ctx, n2);
      gpu_poison(c, bytes);
      launch = [&] { write_kernel<<<L.grid, L.block>>>(c, n2, kWriteValue); };
      check = reinterpret_cast<double*>(c), mul = 0, add = kWriteValue;
    } else if (op == "copy") {
      L = launch_for(copy_kernel, ctx, n2);
      gpu_poison(b, bytes);
      launch = [&] { copy_kernel<<<L.grid, L.block>>>(a, b, n2); };
      check = reinterpret_cast<double*>(b);
    } else {
      L = launch_for(triad_kernel, ctx, n2);
      gpu_poison(c, bytes);
      // b holds 2*pattern unless a copy ran first, which makes it pattern.
      double bmul = needs("copy") ? 1 : 2;
      launch = [&] { triad_kernel<<<L.grid, L.block>>>(a, b, c, n2, kTriadScalar); };
      check = reinterpret_cast<double*>(c), mul = 1 + kTriadScalar * bmul;
    }
    const double traffic = static_cast<double>(bytes) * arrays;
    std::vector<double> gbps;
    for (double ms : repeat_ms(clock, ctx.warmup, ctx.reps, launch, [&](int) {
           if (op == "read") UM_CUDA(cudaMemsetAsync(sum, 0, sizeof(double)));
         }))
      gbps.push_back(gb_per_s(traffic, ms * 1e-3));
    // Verify what the last repetition produced.
    std::string verdict;
    if (op == "read") {
      double got = 0;
      UM_CUDA(cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost));
      double want = pattern_sum(nd);
      if (got != want) verdict = "read sum " + json_number(got) + " != expected " + json_number(want);
    } else {
      size_t bad = gpu_count_mismatch(check, nd, mul, add);
      if (bad) verdict = std::to_string(bad) + " of " + std::to_string(nd) + " elements wrong after " + op;
    }
    if (!verdict.empty()) throw VerifyError(verdict);
    JsonObject rec = ctx.record(op, proc, kind, bytes);
    Context::put_summary(rec, "bandwidth", "GB/s", gbps);
    rec.set("traffic_bytes", static_cast<unsigned long long>(traffic));
    rec.set("grid", L.grid);
    rec.set("block", L.block);
    rec.set("verified", "cpu-reference");  // every element compared with its expected value
    if (A) rec.set("residency", A->residency());
    ctx.emit(rec);
  }
  cudaFree(sum);
}

BenchRegistrar reg({"gpu-stream", "gpu",
                    "GPU kernels read, write, copy (b=a) and triad (c=a+s*b) over arrays of one memory kind; "
                    "reread (a window read --passes times: the working-set sweep), gather, scatter and gather-scatter "
                    "(random 8-byte loads, stores, and both at once; --accesses of them), read-words and copy-words (the read and "
                    "the copy with loads and stores of --width 4, 8, 16 bytes)",
                    gpu_stream_ops(),
                    {"kind", "bytes", "ops", "block", "blocks", "window", "passes", "accesses", "width"},
                    run_gpu_stream});

}  // namespace
}  // namespace umscope
