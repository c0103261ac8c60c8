// GESUMMV (PolyBench; Cooper et al. Table 2): y = alpha A x + beta B x, two
// matrices read once each. One warp per row reads both rows (coalesced) and
// reduces with shuffles: a fixed order, the same bits in every mode.
#include "umscope/app.hpp"

namespace umscope {
namespace {

constexpr float kAlpha = 1.5f, kBeta = 1.2f;

__global__ void gesummv_kernel(const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ x,
                               float* __restrict__ y, size_t n) {
  const size_t warps = size_t(gridDim.x) * blockDim.x / 32;
  const int lane = threadIdx.x & 31;
  for (size_t i = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) / 32; i < n; i += warps) {
    float a = 0, b = 0;
    for (size_t j = lane; j < n; j += 32) {
      a += A[i * n + j] * x[j];
      b += B[i * n + j] * x[j];
    }
    for (int off = 16; off > 0; off /= 2) {
      a += __shfl_down_sync(0xffffffffu, a, off);
      b += __shfl_down_sync(0xffffffffu, b, off);
    }
    if (lane == 0) y[i] = kAlpha * a + kBeta * b;
  }
}

void gesummv_cpu(AppRun& run, const float* A, const float* B, const float* x, float* y, size_t n) {
  run.cpu_for(n, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) {
      double a = 0, b = 0;
      for (size_t j = 0; j < n; ++j) {
        a += A[i * n + j] * x[j];
        b += B[i * n + j] * x[j];
      }
      y[i] = float(kAlpha * a + kBeta * b);
    }
  });
}

// The inputs, from the seed: the matrices' elements in [-0.5, 0.5), x's in [0, 1).
inline float matrix(uint64_t seed, size_t i) { return float(uniform01(seed, i) - 0.5); }
inline float vec(uint64_t seed, size_t i) { return float(uniform01(seed, i)); }

void run_gesummv(Context& ctx) {
  AppRun run(ctx, "gesummv");
  const uint64_t seed = run.seed();
  const int iters = run.iterations(10);
  const size_t n = run.square_dim(size_t(2) << 30, 2 * sizeof(float));
  if (n < 1) throw UsageError("gesummv needs n >= 1");
  auto A = run.array<float>("A", n * n, Use::in);
  auto B = run.array<float>("B", n * n, Use::in);
  auto x = run.array<float>("x", n, Use::in);
  auto y = run.array<float>("y", n, Use::out);
  auto gen = [&](float* a, float* b, float* v) {
    run.cpu_for(n, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) {
        for (size_t j = 0; j < n; ++j) {
          a[i * n + j] = matrix(seed, i * n + j);
          b[i * n + j] = matrix(seed + 1, i * n + j);
        }
        v[i] = vec(seed + 2, i);
      }
    });
  };
  run.init([&] { gen(A.host, B.host, x.host); });
  run.dump("A", A.host, n * n);
  run.dump("B", B.host, n * n);
  run.dump("x", x.host, n);
  run.to_gpu();
  for (int it = 0; it < iters; ++it)
    run.iteration([&] {
      if (run.gpu()) gesummv_kernel<<<run.grid(8), 256>>>(A.dev, B.dev, x.dev, y.dev, n);
      else gesummv_cpu(run, A.dev, B.dev, x.dev, y.dev, n);
    });
  run.back();
  // The full CPU reference at every size: each row of A and B regenerated from the seed as it is summed (no
  // copy of either), in double.
  run.verify([&] {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = vec(seed + 2, i);
    run.compare_each("y", n, [&](size_t i) { return double(y.host[i]); }, [&](size_t i) {
      double a = 0, b = 0;
      for (size_t j = 0; j < n; ++j) {
        a += matrix(seed, i * n + j) * v[j];
        b += matrix(seed + 1, i * n + j) * v[j];
      }
      return double(float(kAlpha * a + kBeta * b));
    }, 1e-4);
  });
  run.dump("y", y.host, n);
  JsonObject extra;
  extra.set("dim", static_cast<unsigned long long>(n)).set("alpha", double(kAlpha)).set("beta", double(kBeta));
  run.finish(extra, 2.0 * n * n * sizeof(float), 4.0 * n * n);
}

AppRegistrar reg({"gesummv", "gpu|cpu", "y = alpha A x + beta B x (PolyBench GESUMMV)",
                    {"app"},
                    app_params({"n", "seed", "iterations"}),
                    run_gesummv},
                 // Model facts: reads A and B (nearly all of the footprint); y, the result, is one vector of n beside
                 // two n x n matrices: 0 written. One pass replayed: a streaming application of Cooper et al.'s sweep
                 // (Sec. 3.2: "these applications don't have data reuse").
                 {"streaming", "gesummv", 1, 1.0, 0.0});

}  // namespace
}  // namespace umscope
