// 2-D convolution with a 3x3 filter (PolyBench/GPU 2DCONV, Cooper et al.
// Table 2): B = A convolved with fixed coefficients; the border of B is 0.
// One thread per output element, neighbours through the caches.
#include "umscope/app.hpp"

namespace umscope {
namespace {

struct Coeffs {
  float c[3][3];  // c[di + 1][dj + 1] multiplies A[i + di][j + dj]
};
// PolyBench's coefficients: c11..c33 with the first digit the column offset.
constexpr Coeffs kC = {{{0.2f, 0.5f, -0.8f}, {-0.3f, 0.6f, -0.9f}, {0.4f, 0.7f, 0.10f}}};

__host__ __device__ inline float conv_at(const float* a, size_t cols, size_t i, size_t j, const Coeffs& k) {
  float s = 0;
  for (int di = -1; di <= 1; ++di)
    for (int dj = -1; dj <= 1; ++dj) s += k.c[di + 1][dj + 1] * a[(i + di) * cols + (j + dj)];
  return s;
}

// One thread per column walks down a band of rows with the 3 x 3 window in
// registers: each new row costs one load from memory (its left and right
// neighbours are the warp's own loads, in L1). The border of B is written 0.
constexpr int BAND = 32;
__global__ void conv_kernel(const float* __restrict__ a, float* __restrict__ b, size_t rows, size_t cols, Coeffs k) {
  const size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  const size_t i0 = blockIdx.y * size_t(BAND), i1 = min(i0 + BAND, rows);
  if (j >= cols) return;
  if (j == 0 || j == cols - 1) {
    for (size_t i = i0; i < i1; ++i) b[i * cols + j] = 0.f;
    return;
  }
  float w[3][3];  // w[r][c]: rows i-1, i, i+1; columns j-1, j, j+1
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) w[r + 1][c] = i0 + r >= 1 && i0 + r - 1 < rows ? a[(i0 + r - 1) * cols + j + c - 1] : 0.f;
  for (size_t i = i0; i < i1; ++i) {
    for (int c = 0; c < 3; ++c) {
      w[0][c] = w[1][c];
      w[1][c] = w[2][c];
      w[2][c] = i + 1 < rows ? a[(i + 1) * cols + j + c - 1] : 0.f;
    }
    float s = 0;
    for (int di = 0; di < 3; ++di)
      for (int dj = 0; dj < 3; ++dj) s += k.c[di][dj] * w[di][dj];
    b[i * cols + j] = (i == 0 || i == rows - 1) ? 0.f : s;
  }
}

// The reference's B(i, j) of an interior cell from A's 3 x 3 window around it (win[r][c] = A(i + r - 1,
// j + c - 1)), a second implementation on purpose (not conv_at(), which the CPU path uses): PolyBench's weighted
// sum, in double.
double ref_conv(const float win[3][3]) {
  double s = 0;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) s += double(kC.c[r][c]) * win[r][c];
  return s;
}

// A's elements, from the seed.
inline float input(uint64_t seed, size_t i) { return static_cast<float>(uniform01(seed, i)); }

void conv_cpu(AppRun& run, const float* a, float* b, size_t rows, size_t cols) {
  run.cpu_for(rows, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i)
      for (size_t j = 0; j < cols; ++j)
        b[i * cols + j] = (i == 0 || j == 0 || i == rows - 1 || j == cols - 1) ? 0.f : conv_at(a, cols, i, j, kC);
  });
}

void run_conv2d(Context& ctx) {
  AppRun run(ctx, "conv2d");
  const uint64_t seed = run.seed();
  const int iters = run.iterations(10);
  size_t rows, cols;
  run.grid_dims(size_t(2) << 30, 2 * sizeof(float), 3, rows, cols);
  auto a = run.array<float>("A", rows * cols, Use::in);
  auto b = run.array<float>("B", rows * cols, Use::out);
  auto gen = [&](float* p) {
    run.cpu_for(rows * cols, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) p[i] = input(seed, i);
    });
  };
  run.init([&] { gen(a.host); });
  run.to_gpu();
  const dim3 grid = run.gpu() ? column_bands(rows, cols, BAND, "conv2d") : dim3(1);
  for (int it = 0; it < iters; ++it)
    run.iteration([&] {
      if (run.gpu()) conv_kernel<<<grid, 256>>>(a.dev, b.dev, rows, cols, kC);
      else conv_cpu(run, a.dev, b.dev, rows, cols);
    });
  run.back();
  // Every element at every size, each from its 3 x 3 window of A regenerated from the seed (no copy of A).
  run.verify([&] {
    run.compare_each("B", rows * cols, [&](size_t k) { return double(b.host[k]); }, [&](size_t k) {
      const size_t i = k / cols, j = k % cols;
      if (i == 0 || j == 0 || i == rows - 1 || j == cols - 1) return 0.0;
      float w[3][3];
      for (int di = 0; di < 3; ++di)
        for (int dj = 0; dj < 3; ++dj) w[di][dj] = input(seed, (i + di - 1) * cols + j + dj - 1);
      return ref_conv(w);
    }, 1e-5);
  });
  run.dump("A", a.host, rows * cols);
  run.dump("B", b.host, rows * cols);
  JsonObject extra;
  extra.set("rows", static_cast<unsigned long long>(rows)).set("cols", static_cast<unsigned long long>(cols));
  run.finish(extra, 2.0 * rows * cols * sizeof(float), 17.0 * (rows - 2) * (cols - 2));
}

AppRegistrar reg({"conv2d", "gpu|cpu", "3x3 2-D convolution (PolyBench 2DCONV)",
                    {"app"},
                    app_params({"rows", "cols", "seed", "iterations"}),
                    run_conv2d},
                 // Model facts: reads A, writes B: half the footprint each. One pass replayed: a streaming
                 // application of Cooper et al.'s sweep (Sec. 3.2: "these applications don't have data reuse").
                 {"stencil", "conv2d", 1, 1.0 / 2, 1.0 / 2});

}  // namespace
}  // namespace umscope
