// MVT (PolyBench; Cooper et al. Table 2): x1 += A y1 and x2 += A^T y2 with
// one matrix read twice. A y1: one warp per row, a shuffle reduction. A^T y2:
// one thread per column reads a slab of rows (coalesced across the warp);
// the slabs' partial sums are added in a fixed order, so no atomics and the
// same bits in every mode. Repeated --iterations times (x1 and x2 keep
// accumulating).
#include "umscope/app.hpp"

namespace umscope {
namespace {

constexpr int SLABS = 16;

__global__ void rows_kernel(const float* __restrict__ A, const float* __restrict__ y, float* x, size_t n) {
  const size_t warps = size_t(gridDim.x) * blockDim.x / 32;
  const int lane = threadIdx.x & 31;
  for (size_t i = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) / 32; i < n; i += warps) {
    float s = 0;
    for (size_t j = lane; j < n; j += 32) s += A[i * n + j] * y[j];
    for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) x[i] += s;
  }
}

__global__ void cols_kernel(const float* __restrict__ A, const float* __restrict__ y, float* part, size_t n) {
  const size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  const int slab = blockIdx.y;
  if (j >= n) return;
  const size_t lo = n * slab / SLABS, hi = n * (slab + 1) / SLABS;
  float s = 0;
  for (size_t i = lo; i < hi; ++i) s += A[i * n + j] * y[i];
  part[size_t(slab) * n + j] = s;
}

__global__ void add_slabs_kernel(const float* part, float* x, size_t n) {
  for (size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x; j < n; j += size_t(gridDim.x) * blockDim.x) {
    float s = 0;
    for (int k = 0; k < SLABS; ++k) s += part[size_t(k) * n + j];
    x[j] += s;
  }
}

void mvt_cpu(AppRun& run, const float* A, const float* y1, const float* y2, float* x1, float* x2, size_t n) {
  run.cpu_for(n, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) {
      double s = 0;
      for (size_t j = 0; j < n; ++j) s += A[i * n + j] * y1[j];
      x1[i] += float(s);
    }
  });
  run.cpu_for(n, [&](size_t lo, size_t hi) {  // columns lo..hi, rows in order
    std::vector<double> s(hi - lo, 0.0);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = lo; j < hi; ++j) s[j - lo] += A[i * n + j] * y2[i];
    for (size_t j = lo; j < hi; ++j) x2[j] += float(s[j - lo]);
  });
}

// The inputs, from the seed: A's elements in [-0.5, 0.5), the vectors' in [0, 1).
inline float matrix(uint64_t seed, size_t i) { return float(uniform01(seed, i) - 0.5); }
inline float vec(uint64_t seed, size_t i) { return float(uniform01(seed, i)); }

void run_mvt(Context& ctx) {
  AppRun run(ctx, "mvt");
  const uint64_t seed = run.seed();
  const int iters = run.iterations(10);
  const size_t n = run.square_dim(size_t(2) << 30, sizeof(float));
  if (n < 1) throw UsageError("mvt needs n >= 1");
  auto A = run.array<float>("A", n * n, Use::in);
  auto y1 = run.array<float>("y1", n, Use::in);
  auto y2 = run.array<float>("y2", n, Use::in);
  auto x1 = run.array<float>("x1", n, Use::inout);
  auto x2 = run.array<float>("x2", n, Use::inout);
  float* part = run.scratch<float>(size_t(SLABS) * n);
  auto gen = [&](float* a, float* v1, float* v2, float* w1, float* w2) {
    run.cpu_for(n, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) {
        for (size_t j = 0; j < n; ++j) a[i * n + j] = matrix(seed, i * n + j);
        v1[i] = vec(seed + 1, i);
        v2[i] = vec(seed + 2, i);
        w1[i] = vec(seed + 3, i);
        w2[i] = vec(seed + 4, i);
      }
    });
  };
  run.init([&] { gen(A.host, y1.host, y2.host, x1.host, x2.host); });
  run.dump("A", A.host, n * n);
  run.dump("y1", y1.host, n);
  run.dump("y2", y2.host, n);
  run.dump("x1_0", x1.host, n);
  run.dump("x2_0", x2.host, n);
  run.to_gpu();
  const dim3 cgrid(static_cast<unsigned>((n + 127) / 128), SLABS);
  for (int it = 0; it < iters; ++it)
    run.iteration([&] {
      if (run.gpu()) {
        rows_kernel<<<run.grid(8), 256>>>(A.dev, y1.dev, x1.dev, n);
        cols_kernel<<<cgrid, 128>>>(A.dev, y2.dev, part, n);
        add_slabs_kernel<<<run.grid(4), 256>>>(part, x2.dev, n);
      } else {
        mvt_cpu(run, A.dev, y1.dev, y2.dev, x1.dev, x2.dev, n);
      }
    });
  run.back();
  // The full CPU reference at every size: each row (x1) and column (x2) of A regenerated from the seed as it is
  // summed (no copy of A), in double; the product added to x in float once per iteration, as the kernels do.
  run.verify([&] {
    std::vector<float> v1(n), v2(n);
    for (size_t i = 0; i < n; ++i) v1[i] = vec(seed + 1, i), v2[i] = vec(seed + 2, i);
    auto accumulated = [&](float x0, double s) {
      for (int it = 0; it < iters; ++it) x0 += float(s);
      return double(x0);
    };
    run.compare_each("x1", n, [&](size_t i) { return double(x1.host[i]); }, [&](size_t i) {
      double s = 0;
      for (size_t j = 0; j < n; ++j) s += matrix(seed, i * n + j) * v1[j];
      return accumulated(vec(seed + 3, i), s);
    }, 1e-4);
    run.compare_each("x2", n, [&](size_t j) { return double(x2.host[j]); }, [&](size_t j) {
      double s = 0;
      for (size_t i = 0; i < n; ++i) s += matrix(seed, i * n + j) * v2[i];
      return accumulated(vec(seed + 4, j), s);
    }, 1e-4);
  });
  run.dump("x1", x1.host, n);
  run.dump("x2", x2.host, n);
  JsonObject extra;
  extra.set("dim", static_cast<unsigned long long>(n));
  run.finish(extra, 2.0 * n * n * sizeof(float), 4.0 * n * n);
}

AppRegistrar reg({"mvt", "gpu|cpu", "x1 += A y1, x2 += A^T y2 (PolyBench MVT)",
                    {"app"},
                    app_params({"n", "seed", "iterations"}),
                    run_mvt},
                 // Model facts: reads A (nearly all of the footprint) and the vectors; x1 and x2, the results, are
                 // two vectors of n beside n x n: 0 written. One pass replayed: a streaming application of Cooper et
                 // al.'s sweep (Sec. 3.2: "these applications don't have data reuse").
                 {"streaming", "mvt", 1, 1.0, 0.0});

}  // namespace
}  // namespace umscope
