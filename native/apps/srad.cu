// SRAD, speckle-reducing anisotropic diffusion (Rodinia srad v2; Schieffer
// et al. section 3.1): an iterative image filter. Each iteration takes the
// image's statistics (the speckle scale q0^2 = variance / mean^2 over the
// whole image), computes the four directional derivatives and a diffusion
// coefficient per pixel, then updates the image by the divergence. Edges
// are clamped. The statistics are summed in double, per block, in a fixed
// order, so every mode gives the same bits.
#include "umscope/app.hpp"

#include <array>
#include <memory>

namespace umscope {
namespace {

struct Derivs {
  float* c;
  float *n, *s, *w, *e;
};

// The diffusion coefficient and the four derivatives at (i, j).
struct Coeff {
  float c, n, s, w, e;
};
__host__ __device__ inline Coeff coeff_at(const float* J, size_t rows, size_t cols, size_t i, size_t j, float q0sqr) {
  const size_t k = i * cols + j;
  const float jc = J[k];
  const float dn = J[(i > 0 ? i - 1 : 0) * cols + j] - jc, ds = J[(i + 1 < rows ? i + 1 : i) * cols + j] - jc;
  const float dw = J[i * cols + (j > 0 ? j - 1 : 0)] - jc, de = J[i * cols + (j + 1 < cols ? j + 1 : j)] - jc;
  const float g2 = (dn * dn + ds * ds + dw * dw + de * de) / (jc * jc);
  const float l = (dn + ds + dw + de) / jc;
  const float num = 0.5f * g2 - (1.f / 16.f) * (l * l);
  float den = 1 + 0.25f * l;
  const float qsqr = num / (den * den);
  den = (qsqr - q0sqr) / (q0sqr * (1 + q0sqr));
  float c = 1.f / (1.f + den);
  c = c < 0 ? 0 : (c > 1 ? 1 : c);
  return {c, dn, ds, dw, de};
}

__host__ __device__ inline void coeff(const float* J, size_t rows, size_t cols, size_t i, size_t j, float q0sqr,
                                      Derivs d) {
  const size_t k = i * cols + j;
  const Coeff x = coeff_at(J, rows, cols, i, j, q0sqr);
  d.c[k] = x.c;
  d.n[k] = x.n;
  d.s[k] = x.s;
  d.w[k] = x.w;
  d.e[k] = x.e;
}

// The update of a pixel from its coefficient and derivatives and the coefficients south and east of it.
__host__ __device__ inline float diffuse(float jk, const Coeff& x, float cs, float ce, float lambda) {
  const float cn = x.c, cw = x.c;
  const float div = cn * x.n + cs * x.s + cw * x.w + ce * x.e;
  return jk + 0.25f * lambda * div;
}

__host__ __device__ inline float update(const float* J, size_t rows, size_t cols, size_t i, size_t j, float lambda,
                                        Derivs d) {
  const size_t k = i * cols + j;
  const float cs = d.c[(i + 1 < rows ? i + 1 : i) * cols + j], ce = d.c[i * cols + (j + 1 < cols ? j + 1 : j)];
  return diffuse(J[k], Coeff{d.c[k], d.n[k], d.s[k], d.w[k], d.e[k]}, cs, ce, lambda);
}

// The speckle scale q0^2 = variance / mean^2 of the image, summed in double in index order.
float speckle(const float* J, size_t n) {
  double a = 0, b = 0;
  for (size_t k = 0; k < n; ++k) {
    a += J[k];
    b += double(J[k]) * J[k];
  }
  const double mean = a / n, var = b / n - mean * mean;
  return float(var / (mean * mean));
}

// The reference, a second implementation on purpose (not coeff_at(), diffuse() and speckle(), which the kernels'
// and the CPU path share), from Rodinia's srad v2 definition. The speckle scale q0^2 of the image: the mean,
// then the mean squared deviation from it, over the mean squared. Each sum in double over 64 fixed slices
// added in order, the slices on the run's CPU threads: the same sum whatever the number of threads.
template <class F>
double ref_sum(AppRun& run, size_t n, F term) {
  constexpr size_t kSlices = 64;
  std::array<double, kSlices> part{};
  run.cpu_for(kSlices, [&](size_t lo, size_t hi) {
    for (size_t s = lo; s < hi; ++s) {
      double a = 0;
      for (size_t k = s * n / kSlices, e = (s + 1) * n / kSlices; k < e; ++k) a += term(k);
      part[s] = a;
    }
  });
  double sum = 0;
  for (double a : part) sum += a;
  return sum;
}

float ref_speckle(AppRun& run, const float* J, size_t n) {
  const double mean = ref_sum(run, n, [&](size_t k) { return double(J[k]); }) / n;
  const double dev = ref_sum(run, n, [&](size_t k) { return (J[k] - mean) * (J[k] - mean); });
  return float(dev / n / (mean * mean));
}

// The four differences from pixel (i, j) to its north, south, west and east neighbours (edges clamped).
std::array<float, 4> ref_diffs(const float* J, size_t rows, size_t cols, size_t i, size_t j) {
  const float me = J[i * cols + j];
  return {J[(i == 0 ? i : i - 1) * cols + j] - me, J[(i + 1 == rows ? i : i + 1) * cols + j] - me,
          J[i * cols + (j == 0 ? j : j - 1)] - me, J[i * cols + (j + 1 == cols ? j : j + 1)] - me};
}

// The diffusion coefficient at (i, j): the instantaneous coefficient of variation q^2 from the normalised
// gradient and Laplacian, against the speckle scale, clamped to [0, 1].
float ref_coefficient(const float* J, size_t rows, size_t cols, size_t i, size_t j, float q0sqr) {
  const float me = J[i * cols + j];
  float grad2 = 0, lap = 0;
  for (float d : ref_diffs(J, rows, cols, i, j)) {
    grad2 += d * d;
    lap += d;
  }
  grad2 /= me * me;
  lap /= me;
  const float q2 = (grad2 / 2 - lap * lap / 16) / ((1 + lap / 4) * (1 + lap / 4));
  const float c = 1 / (1 + (q2 - q0sqr) / (q0sqr * (1 + q0sqr)));
  return std::min(1.f, std::max(0.f, c));
}

// Pixel (i, j) after one iteration: the divergence of c times the differences, with the pixel's own coefficient
// on its north and west sides and the south and east neighbours' on theirs (coef(i, j) gives a coefficient).
template <class Coef>
float ref_pixel(const float* J, size_t rows, size_t cols, size_t i, size_t j, float lambda, Coef coef) {
  const std::array<float, 4> d = ref_diffs(J, rows, cols, i, j);
  const float c = coef(i, j), south = coef(i + 1 == rows ? i : i + 1, j), east = coef(i, j + 1 == cols ? j : j + 1);
  return J[i * cols + j] + lambda / 4 * (c * (d[0] + d[2]) + south * d[1] + east * d[3]);
}

// Per-block sums of J and J^2 in double; then one thread adds the blocks in order.
__global__ void stats_kernel(const float* J, size_t n, double* part) {
  __shared__ double s1[256], s2[256];
  double a = 0, b = 0;
  for (size_t k = blockIdx.x * size_t(blockDim.x) + threadIdx.x; k < n; k += size_t(gridDim.x) * blockDim.x) {
    a += J[k];
    b += double(J[k]) * J[k];
  }
  s1[threadIdx.x] = a;
  s2[threadIdx.x] = b;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h /= 2) {
    if (threadIdx.x < h) {
      s1[threadIdx.x] += s1[threadIdx.x + h];
      s2[threadIdx.x] += s2[threadIdx.x + h];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    part[2 * blockIdx.x] = s1[0];
    part[2 * blockIdx.x + 1] = s2[0];
  }
}

__global__ void q0_kernel(const double* part, int blocks, size_t n, float* q0sqr) {
  double a = 0, b = 0;
  for (int i = 0; i < blocks; ++i) {
    a += part[2 * i];
    b += part[2 * i + 1];
  }
  const double mean = a / n, var = b / n - mean * mean;
  *q0sqr = float(var / (mean * mean));
}

// One thread per column walks down a band of rows, so the rows above and
// below it were just read by the same thread (in L1): memory sees each array
// about once per pass.
constexpr int BAND = 32;
__global__ void coeff_kernel(const float* J, size_t rows, size_t cols, const float* q0sqr, Derivs d) {
  const float q = *q0sqr;
  const size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x, i0 = blockIdx.y * size_t(BAND);
  if (j >= cols) return;
  for (size_t i = i0; i < min(i0 + BAND, rows); ++i) coeff(J, rows, cols, i, j, q, d);
}

__global__ void update_kernel(float* J, size_t rows, size_t cols, float lambda, Derivs d) {
  const size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x, i0 = blockIdx.y * size_t(BAND);
  if (j >= cols) return;
  for (size_t i = i0; i < min(i0 + BAND, rows); ++i) J[i * cols + j] = update(J, rows, cols, i, j, lambda, d);
}

// The CPU: the same steps, the statistics summed in double in index order.
void iterate_cpu(AppRun& run, float* J, size_t rows, size_t cols, float lambda, Derivs d) {
  const float q = speckle(J, rows * cols);
  run.cpu_for(rows, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i)
      for (size_t j = 0; j < cols; ++j) coeff(J, rows, cols, i, j, q, d);
  });
  run.cpu_for(rows, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i)
      for (size_t j = 0; j < cols; ++j) J[i * cols + j] = update(J, rows, cols, i, j, lambda, d);
  });
}

void run_srad(Context& ctx) {
  AppRun run(ctx, "srad");
  const uint64_t seed = run.seed();
  const int iters = run.iterations(10);
  const float lambda = static_cast<float>(ctx.args.real("lambda", 0.5));
  // The image and five per-pixel work arrays.
  size_t rows, cols;
  run.grid_dims(size_t(3) << 30, 6 * sizeof(float), 2, rows, cols);
  const size_t n = rows * cols;
  auto J = run.array<float>("J", n, Use::inout);
  Derivs d{};
  float* work = run.scratch<float>(5 * n);
  d = {work, work + n, work + 2 * n, work + 3 * n, work + 4 * n};
  const unsigned sgrid = run.gpu() ? run.grid(2) : 1;
  double* part = run.gpu() ? run.scratch<double>(2 * sgrid) : nullptr;
  float* q0 = run.gpu() ? run.scratch<float>(1) : nullptr;
  // The image: exp of uniform noise, as Rodinia's srad v2.
  auto gen = [&](float* p) {
    run.cpu_for(n, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) p[i] = static_cast<float>(std::exp(uniform01(seed, i)));
    });
  };
  run.init([&] { gen(J.host); });
  run.dump("J0", J.host, n);
  run.to_gpu();
  const dim3 bands = run.gpu() ? column_bands(rows, cols, BAND, "srad") : dim3(1);
  std::vector<float> before;  // the image before the last iteration, for the sampled check
  // The full reference's work: about 50 floating-point operations per pixel and iteration (the coefficient
  // about 35, the update about 15; the speckle scale's two sums 3).
  const bool full = run.check(50.0 * double(n) * iters);
  for (int it = 0; it < iters; ++it) {
    if (it == iters - 1 && !full) before = run.snapshot(J.dev, n);
    run.iteration([&] {
      if (run.gpu()) {
        stats_kernel<<<sgrid, 256>>>(J.dev, n, part);
        q0_kernel<<<1, 1>>>(part, static_cast<int>(sgrid), n, q0);
        coeff_kernel<<<bands, 256>>>(J.dev, rows, cols, q0, d);
        update_kernel<<<bands, 256>>>(J.dev, rows, cols, lambda, d);
      } else {
        iterate_cpu(run, J.dev, rows, cols, lambda, d);
      }
    });
  }
  run.back();
  run.verify([&] {
    if (full) {
      // Written in full before they are read (gen, then each pass): no zero-filling of 3 x n floats.
      std::unique_ptr<float[]> want(new float[n]), c(new float[n]), next(new float[n]);
      gen(want.get());
      for (int it = 0; it < iters; ++it) {
        const float q = ref_speckle(run, want.get(), n);
        const float* w = want.get();
        run.cpu_for(rows, [&](size_t lo, size_t hi) {
          for (size_t i = lo; i < hi; ++i)
            for (size_t j = 0; j < cols; ++j) c[i * cols + j] = ref_coefficient(w, rows, cols, i, j, q);
        });
        run.cpu_for(rows, [&](size_t lo, size_t hi) {
          for (size_t i = lo; i < hi; ++i)
            for (size_t j = 0; j < cols; ++j)
              next[i * cols + j] = ref_pixel(w, rows, cols, i, j, lambda, [&](size_t a, size_t b) { return c[a * cols + b]; });
        });
        std::swap(want, next);
      }
      run.compare("J", J.host, want.get(), n, 1e-4);
      return;
    }
    // Larger: the last iteration recomputed at sampled pixels from the image before it (its statistics
    // summed over the whole of it).
    const float* b = before.data();
    const float q = ref_speckle(run, b, n);
    auto coef = [&](size_t i, size_t j) { return ref_coefficient(b, rows, cols, i, j, q); };
    const std::vector<size_t> at = run.grid_sample(rows, cols);
    run.compare_each("J (sampled)", at.size(), [&](size_t k) { return double(J.host[at[k]]); },
                     [&](size_t k) { return double(ref_pixel(b, rows, cols, at[k] / cols, at[k] % cols, lambda, coef)); },
                     1e-4);
    run.verified("cpu-sample:" + std::to_string(at.size()));
  });
  run.dump("J", J.host, n);
  JsonObject extra;
  extra.set("rows", static_cast<unsigned long long>(rows)).set("cols", static_cast<unsigned long long>(cols));
  extra.set("lambda", double(lambda));
  // Per iteration: J read for the statistics and for the coefficients (4 B
  // each), five work arrays written (20) and read back (20), J read and
  // written by the update (8): 56 bytes per pixel at least.
  // What crosses to memory when J is remote (pinned, registered; read by the calibrated model): the
  // five work arrays are GPU scratch, so only J's passes do: read by the statistics, the coefficients
  // (a band of 32 rows walks down each column, its neighbour rows already in the block's cache lines)
  // and the update, written by the update.
  extra.set("link_read_bytes", 12.0 * n).set("link_write_bytes", 4.0 * n);
  run.finish(extra, 56.0 * n, 35.0 * n);
}

AppRegistrar reg({"srad", "gpu|cpu",
                    "speckle-reducing anisotropic diffusion, iterative (Rodinia srad v2)",
                    {"app"},
                    app_params({"rows", "cols", "seed", "iterations", "lambda"}),
                    run_srad},
                 // Model facts: J, the image, is read and rewritten (inout; the work arrays are scratch). Several
                 // passes replayed (iterative; Schieffer et al.'s sweep): 10, as dos.py's sweep always did.
                 {"stencil", "srad", 10, 1.0, 1.0});

}  // namespace
}  // namespace umscope
