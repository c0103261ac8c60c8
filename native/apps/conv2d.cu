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

__global__ void conv_kernel(const float* __restrict__ a, float* __restrict__ b, size_t rows, size_t cols, Coeffs k) {
  for (size_t i = blockIdx.x; i < rows; i += gridDim.x)
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x)
      b[i * cols + j] = (i == 0 || j == 0 || i == rows - 1 || j == cols - 1) ? 0.f : conv_at(a, cols, i, j, k);
}

void conv_cpu(AppRun& run, const float* a, float* b, size_t rows, size_t cols) {
  run.cpu_for(rows, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i)
      for (size_t j = 0; j < cols; ++j)
        b[i * cols + j] = (i == 0 || j == 0 || i == rows - 1 || j == cols - 1) ? 0.f : conv_at(a, cols, i, j, kC);
  });
}

void run_conv2d(Context& ctx) {
  AppRun run(ctx, "conv2d");
  const uint64_t seed = static_cast<uint64_t>(ctx.args.integer("seed", 1));
  const int iters = static_cast<int>(ctx.args.integer("iterations", 10));
  if (iters < 1) throw UsageError("--iterations must be at least 1");
  size_t side = static_cast<size_t>(std::sqrt(double(run.footprint(size_t(2) << 30)) / (2 * sizeof(float))));
  const size_t rows = static_cast<size_t>(ctx.args.integer("rows", static_cast<long long>(side)));
  const size_t cols = static_cast<size_t>(ctx.args.integer("cols", static_cast<long long>(rows)));
  if (rows < 3 || cols < 3) throw UsageError("conv2d needs at least 3 x 3 elements");
  auto a = run.array<float>("A", rows * cols, Use::in);
  auto b = run.array<float>("B", rows * cols, Use::out);
  auto gen = [&](float* p) {
    run.cpu_for(rows * cols, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) p[i] = static_cast<float>(uniform01(seed, i));
    });
  };
  run.init([&] { gen(a.host); });
  run.to_gpu();
  for (int it = 0; it < iters; ++it)
    run.iteration([&] {
      if (run.gpu()) conv_kernel<<<run.grid(16), 256>>>(a.dev, b.dev, rows, cols, kC);
      else conv_cpu(run, a.dev, b.dev, rows, cols);
    });
  run.back();
  if (run.check()) {
    std::vector<float> in(rows * cols), want(rows * cols);
    gen(in.data());
    conv_cpu(run, in.data(), want.data(), rows, cols);
    run.compare("B", b.host, want.data(), rows * cols, 1e-5);
  }
  run.dump("A", a.host, rows * cols);
  run.dump("B", b.host, rows * cols);
  JsonObject extra;
  extra.set("rows", static_cast<unsigned long long>(rows)).set("cols", static_cast<unsigned long long>(cols));
  run.finish(extra, 2.0 * rows * cols * sizeof(float), 17.0 * (rows - 2) * (cols - 2));
}

BenchRegistrar reg({"conv2d", "gpu|cpu", "application: 3x3 2-D convolution of a float image (PolyBench 2DCONV)",
                    {"app"},
                    {"mode", "processor", "threads", "check", "dump", "footprint", "rows", "cols", "seed", "iterations"},
                    run_conv2d});

}  // namespace
}  // namespace umscope
