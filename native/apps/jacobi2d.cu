// Jacobi 2-D (PolyBench jacobi-2d, Cooper et al. Table 2): each time step
// sweeps A into B and B back into A with the 5-point average. --reverse
// gives the memory-aware variant of Cooper et al. section 4.1: every other
// sweep runs bottom to top, so it starts on the rows the previous sweep
// touched last (still resident when the arrays do not fit the GPU).
#include "umscope/app.hpp"

namespace umscope {
namespace {

// The 5-point average of a cell (me) and its west, east, south and north neighbours: the kernel's and the CPU
// path's.
__host__ __device__ inline float avg5(float me, float w, float e, float s, float n) { return 0.2f * (me + w + e + s + n); }

// The reference's value of interior cell (i, j) after a sweep of a, a second implementation on purpose (not
// avg5(), which the kernel and the CPU path share): the mean of the cell and its four neighbours.
float ref_mean5(const float* a, size_t cols, size_t i, size_t j) {
  const size_t k = i * cols + j;
  return (a[k - cols] + a[k - 1] + a[k] + a[k + 1] + a[k + cols]) / 5.f;
}

// One thread per column walks down a band of rows, keeping the column's
// three rows in registers (the left and right neighbours come from the
// warp's own loads, in L1), so each element is read from memory once per
// sweep. Bands go top to bottom in block order, or bottom to top when
// `backwards` (blocks are started in index order).
constexpr int BAND = 32;
__global__ void sweep_kernel(const float* __restrict__ src, float* __restrict__ dst, size_t rows, size_t cols,
                             bool backwards) {
  const size_t j = 1 + blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  const size_t band = backwards ? gridDim.y - 1 - blockIdx.y : blockIdx.y;
  const size_t i0 = 1 + band * BAND, i1 = min(i0 + BAND, rows - 1);
  if (j >= cols - 1 || i0 >= rows - 1) return;
  float up = src[(i0 - 1) * cols + j], mid = src[i0 * cols + j];
  for (size_t i = i0; i < i1; ++i) {
    const float down = src[(i + 1) * cols + j];
    dst[i * cols + j] = avg5(mid, src[i * cols + j - 1], src[i * cols + j + 1], down, up);
    up = mid;
    mid = down;
  }
}

// PolyBench's initial values, scaled by the width: A with c = 2, B with c = 3.
inline float initial(size_t i, size_t j, size_t cols, int c) {
  return static_cast<float>((double(i) * (j + c) + c) / cols);
}

void sweep_cpu(AppRun& run, const float* src, float* dst, size_t rows, size_t cols) {
  run.cpu_for(rows - 2, [&](size_t lo, size_t hi) {
    for (size_t i = 1 + lo; i < 1 + hi; ++i)
      for (size_t j = 1; j < cols - 1; ++j) {
        const size_t k = i * cols + j;
        dst[k] = avg5(src[k], src[k - 1], src[k + 1], src[k + cols], src[k - cols]);
      }
  });
}

void run_jacobi2d(Context& ctx) {
  AppRun run(ctx, "jacobi2d");
  const int steps = run.iterations(10);
  const bool reverse = ctx.args.flag("reverse");
  size_t rows, cols;
  run.grid_dims(size_t(2) << 30, 2 * sizeof(float), 3, rows, cols);
  const size_t n = rows * cols;
  auto a = run.array<float>("A", n, Use::inout);
  auto b = run.array<float>("B", n, Use::inout);
  // PolyBench's initial values, scaled by the width.
  auto gen = [&](float* pa, float* pb) {
    run.cpu_for(rows, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i)
        for (size_t j = 0; j < cols; ++j) {
          pa[i * cols + j] = initial(i, j, cols, 2);
          pb[i * cols + j] = initial(i, j, cols, 3);
        }
    });
  };
  run.init([&] { gen(a.host, b.host); });
  run.to_gpu();
  const dim3 grid = run.gpu() ? column_bands(rows - 2, cols - 2, BAND, "jacobi2d") : dim3(1);
  std::vector<float> before;  // A before the last step, for the sampled check
  for (int t = 0; t < steps; ++t) {
    if (t == steps - 1 && !run.check()) before = run.snapshot(a.dev, n);
    run.iteration([&] {
      if (run.gpu()) {
        sweep_kernel<<<grid, 256>>>(a.dev, b.dev, rows, cols, false);
        sweep_kernel<<<grid, 256>>>(b.dev, a.dev, rows, cols, reverse);
      } else {
        sweep_cpu(run, a.dev, b.dev, rows, cols);
        sweep_cpu(run, b.dev, a.dev, rows, cols);
      }
    });
  }
  run.back();
  run.verify([&] {
    if (run.check()) {
      std::vector<float> ra(n), rb(n);
      gen(ra.data(), rb.data());
      auto sweep = [&](const float* src, float* dst) {  // the interior; the border keeps its initial values
        run.cpu_for(rows - 2, [&](size_t lo, size_t hi) {
          for (size_t i = 1 + lo; i < 1 + hi; ++i)
            for (size_t j = 1; j + 1 < cols; ++j) dst[i * cols + j] = ref_mean5(src, cols, i, j);
        });
      };
      for (int t = 0; t < steps; ++t) {
        sweep(ra.data(), rb.data());
        sweep(rb.data(), ra.data());
      }
      run.compare("A", a.host, ra.data(), n, 1e-5);
      run.compare("B", b.host, rb.data(), n, 1e-5);
      return;
    }
    // Larger: the last step's two sweeps at sampled cells, B from A before the step, then A from the final B;
    // the border, which no sweep writes, keeps its initial values.
    const std::vector<size_t> at = run.grid_sample(rows, cols);
    auto want = [&](const float* src, int c, size_t k) {
      const size_t i = k / cols, j = k % cols;
      if (i == 0 || j == 0 || i == rows - 1 || j == cols - 1) return double(initial(i, j, cols, c));
      return double(ref_mean5(src, cols, i, j));
    };
    run.compare_each("B (sampled)", at.size(), [&](size_t k) { return double(b.host[at[k]]); },
                     [&](size_t k) { return want(before.data(), 3, at[k]); }, 1e-5);
    run.compare_each("A (sampled)", at.size(), [&](size_t k) { return double(a.host[at[k]]); },
                     [&](size_t k) { return want(b.host, 2, at[k]); }, 1e-5);
    run.verified("cpu-sample:" + std::to_string(2 * at.size()));
  });
  run.dump("A", a.host, n);
  run.dump("B", b.host, n);
  JsonObject extra;
  extra.set("rows", static_cast<unsigned long long>(rows)).set("cols", static_cast<unsigned long long>(cols));
  extra.set("reverse", reverse);
  // What crosses the link when the arrays are remote (pinned, registered; read by the calibrated model),
  // from the kernel's access pattern in 32-byte sectors: a band of BAND rows reads BAND + 2 (its halo rows),
  // and a block's 256 columns start one float past a sector boundary and read one column beyond each edge,
  // 34 sectors for 32 sectors' worth (272 / 256); a warp's 32 floats (128 bytes) written at a 4-byte offset
  // touch 5 sectors, at offset 0 (one row in 8 on average) 4: 39 / 32 of the array. Checked against the
  // GPU's counters (bench/model_linkbytes.py: 148 MB read, 165 MB written per step at 128 MiB, against
  // 151 and 164 MB from these factors).
  const double sweep = double(n) * sizeof(float);
  extra.set("link_read_bytes", 2.0 * sweep * (BAND + 2.0) / BAND * (272.0 / 256.0))
      .set("link_write_bytes", 2.0 * sweep * (39.0 / 32.0));
  // Two sweeps per step, each reading one array and writing the other.
  run.finish(extra, 4.0 * n * sizeof(float), 10.0 * (rows - 2) * (cols - 2));
}

AppRegistrar reg({"jacobi2d", "gpu|cpu",
                    "Jacobi 2-D 5-point stencil (PolyBench); --reverse: every other sweep bottom-up",
                    {"app"},
                    // --seed is accepted as by every application (its inputs do not depend on it).
                    app_params({"rows", "cols", "iterations", "reverse", "seed"}),
                    run_jacobi2d},
                 // Model facts: A and B are both read and rewritten (inout). Several passes replayed (iterative;
                 // Cooper et al.'s sweep): 4, as dos.py's sweep always did.
                 {"stencil", "jacobi2d", 4, 1.0, 1.0});

}  // namespace
}  // namespace umscope
