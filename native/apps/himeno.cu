// Himeno (RIKEN; Hanawa et al.): Jacobi iterations of a 3-D Poisson
// equation with a 19-point stencil and coefficient arrays a[4], b[3], c[3],
// a boundary mask and a source term. Each iteration computes the new
// pressure into a work array, accumulates the squared residual (gosa) and
// copies the new pressure back. Arrays are [i][j][k], k contiguous; the
// initial values are Himeno's (a = 1 but a3 = 1/6, b = 0, c = 1, p = i^2 /
// (imax-1)^2). gosa is summed in double per block in a fixed order.
#include "umscope/app.hpp"

namespace umscope {
namespace {

struct Grid {
  size_t I, J, K;
  __host__ __device__ size_t at(size_t i, size_t j, size_t k) const { return (i * J + j) * K + k; }
};

struct Coef {
  const float *a0, *a1, *a2, *a3, *b0, *b1, *b2, *c0, *c1, *c2, *bnd, *wrk1;
};

// The new value at (i, j, k) into wrk2; returns the squared residual.
__host__ __device__ inline float point(const float* p, float* wrk2, const Coef& q, Grid g, size_t i, size_t j, size_t k,
                                       float omega) {
  const size_t x = g.at(i, j, k);
  const size_t ip = g.at(i + 1, j, k), im = g.at(i - 1, j, k), jp = g.at(i, j + 1, k), jm = g.at(i, j - 1, k);
  const float s0 = q.a0[x] * p[ip] + q.a1[x] * p[jp] + q.a2[x] * p[x + 1] +
                   q.b0[x] * (p[g.at(i + 1, j + 1, k)] - p[g.at(i + 1, j - 1, k)] - p[g.at(i - 1, j + 1, k)] +
                              p[g.at(i - 1, j - 1, k)]) +
                   q.b1[x] * (p[jp + 1] - p[jm + 1] - p[jp - 1] + p[jm - 1]) +
                   q.b2[x] * (p[ip + 1] - p[im + 1] - p[ip - 1] + p[im - 1]) + q.c0[x] * p[im] + q.c1[x] * p[jm] +
                   q.c2[x] * p[x - 1] + q.wrk1[x];
  const float ss = (s0 * q.a3[x] - p[x]) * q.bnd[x];
  wrk2[x] = p[x] + omega * ss;
  return ss * ss;
}

__global__ void jacobi_kernel(const float* __restrict__ p, float* __restrict__ wrk2, Coef q, Grid g, float omega,
                              double* part) {
  __shared__ double red[256];
  double acc = 0;
  const size_t lines = (g.I - 2) * (g.J - 2);
  for (size_t l = blockIdx.x; l < lines; l += gridDim.x) {
    const size_t i = 1 + l / (g.J - 2), j = 1 + l % (g.J - 2);
    for (size_t k = 1 + threadIdx.x; k < g.K - 1; k += blockDim.x) acc += point(p, wrk2, q, g, i, j, k, omega);
  }
  red[threadIdx.x] = acc;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h /= 2) {
    if (threadIdx.x < h) red[threadIdx.x] += red[threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0) part[blockIdx.x] = red[0];
}

__global__ void copy_back_kernel(float* __restrict__ p, const float* __restrict__ wrk2, Grid g) {
  const size_t lines = (g.I - 2) * (g.J - 2);
  for (size_t l = blockIdx.x; l < lines; l += gridDim.x) {
    const size_t i = 1 + l / (g.J - 2), j = 1 + l % (g.J - 2);
    for (size_t k = 1 + threadIdx.x; k < g.K - 1; k += blockDim.x) p[g.at(i, j, k)] = wrk2[g.at(i, j, k)];
  }
}

__global__ void gosa_kernel(const double* part, int blocks, double* gosa) {
  double s = 0;
  for (int b = 0; b < blocks; ++b) s += part[b];
  *gosa = s;
}

double iterate_cpu(AppRun& run, float* p, float* wrk2, const Coef& q, Grid g, float omega) {
  const size_t lines = (g.I - 2) * (g.J - 2);
  std::vector<double> part(lines);
  run.cpu_for(lines, [&](size_t lo, size_t hi) {
    for (size_t l = lo; l < hi; ++l) {
      const size_t i = 1 + l / (g.J - 2), j = 1 + l % (g.J - 2);
      double acc = 0;
      for (size_t k = 1; k < g.K - 1; ++k) acc += point(p, wrk2, q, g, i, j, k, omega);
      part[l] = acc;
    }
  });
  run.cpu_for(lines, [&](size_t lo, size_t hi) {
    for (size_t l = lo; l < hi; ++l) {
      const size_t i = 1 + l / (g.J - 2), j = 1 + l % (g.J - 2);
      for (size_t k = 1; k < g.K - 1; ++k) p[g.at(i, j, k)] = wrk2[g.at(i, j, k)];
    }
  });
  double s = 0;
  for (double v : part) s += v;
  return s;
}

// Himeno's initial values: the coefficient arrays a0..a3, b0..b2, c0..c2, bnd, wrk1 hold one value each
// everywhere; the pressure is i^2 / (I - 1)^2.
const float kCoefValues[12] = {1, 1, 1, 1.f / 6, 0, 0, 0, 1, 1, 1, 1, 0};
inline float pressure0(Grid g, size_t i) { return float(double(i * i) / double((g.I - 1) * (g.I - 1))); }

// The reference's new pressure at interior point (i, j, k) of p, and its residual into ss: a second
// implementation on purpose (not point(), which the kernel and the CPU path share), Himeno's update written out
// with its coefficient values (each array holds one value everywhere: kCoefValues).
float ref_pressure(const float* p, Grid g, size_t i, size_t j, size_t k, float omega, float& ss) {
  const float *a = kCoefValues, *b = kCoefValues + 4, *c = kCoefValues + 7, bnd = kCoefValues[10], wrk1 = kCoefValues[11];
  auto P = [&](int di, int dj, int dk) { return p[g.at(i + size_t(di), j + size_t(dj), k + size_t(dk))]; };
  const float s0 = a[0] * P(1, 0, 0) + a[1] * P(0, 1, 0) + a[2] * P(0, 0, 1) +
                   b[0] * (P(1, 1, 0) - P(1, -1, 0) - P(-1, 1, 0) + P(-1, -1, 0)) +
                   b[1] * (P(0, 1, 1) - P(0, -1, 1) - P(0, 1, -1) + P(0, -1, -1)) +
                   b[2] * (P(1, 0, 1) - P(-1, 0, 1) - P(1, 0, -1) + P(-1, 0, -1)) + c[0] * P(-1, 0, 0) +
                   c[1] * P(0, -1, 0) + c[2] * P(0, 0, -1) + wrk1;
  ss = (s0 * a[3] - P(0, 0, 0)) * bnd;
  return P(0, 0, 0) + omega * ss;
}

// One reference iteration from p into out (the border keeps its initial value), and its gosa.
double ref_iteration(AppRun& run, const float* p, float* out, Grid g, float omega) {
  std::vector<double> part(g.I);
  run.cpu_for(g.I, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) {
      double acc = 0;
      for (size_t j = 0; j < g.J; ++j)
        for (size_t k = 0; k < g.K; ++k) {
          float ss = 0;
          const bool border = i == 0 || j == 0 || k == 0 || i == g.I - 1 || j == g.J - 1 || k == g.K - 1;
          out[g.at(i, j, k)] = border ? pressure0(g, i) : ref_pressure(p, g, i, j, k, omega, ss);
          acc += double(ss) * ss;
        }
      part[i] = acc;
    }
  });
  double s = 0;
  for (double x : part) s += x;
  return s;
}

Grid grid_for(const std::string& size, size_t footprint) {
  if (size == "S") return {65, 65, 129};
  if (size == "M") return {129, 129, 257};
  if (size == "L") return {257, 257, 513};
  if (size == "XL") return {513, 513, 1025};
  if (!size.empty()) throw UsageError("--size is S, M, L or XL (Himeno's grids), got '" + size + "'");
  // Himeno's shape (I = J = K/2, plus one) for a footprint of 14 float arrays.
  const double pts = double(footprint) / (14 * sizeof(float));
  const size_t i = static_cast<size_t>(std::cbrt(pts / 2));
  return {i + 1, i + 1, 2 * i + 1};
}

void run_himeno(Context& ctx) {
  AppRun run(ctx, "himeno");
  const int iters = run.iterations(20);
  Grid g = grid_for(ctx.args.str("size", ""), run.footprint(size_t(4) << 30));
  if (ctx.args.has("dims")) {
    auto d = ctx.args.list("dims", "");
    if (d.size() != 3) throw UsageError("--dims takes I,J,K");
    size_t dim[3];
    for (int i = 0; i < 3; ++i) {
      if (d[i].empty() || d[i].size() > 6 || d[i].find_first_not_of("0123456789") != std::string::npos)
        throw UsageError("--dims takes three whole numbers up to 999999, got '" + ctx.args.str("dims") + "'");
      dim[i] = std::stoul(d[i]);
    }
    g = {dim[0], dim[1], dim[2]};
  }
  if (g.I < 3 || g.J < 3 || g.K < 3) throw UsageError("himeno needs at least 3 x 3 x 3 points");
  const size_t n = g.I * g.J * g.K;
  const float omega = 0.8f;
  auto p = run.array<float>("p", n, Use::inout);
  const char* names[12] = {"a0", "a1", "a2", "a3", "b0", "b1", "b2", "c0", "c1", "c2", "bnd", "wrk1"};
  std::vector<Array<float>> in;
  for (const char* nm : names) in.push_back(run.array<float>(nm, n, Use::in));
  auto wrk2 = run.array<float>("wrk2", n, Use::inout);
  const unsigned grid = run.gpu() ? run.grid(8) : 1;
  double* part = run.gpu() ? run.scratch<double>(grid) : nullptr;
  double* gosa_d = run.gpu() ? run.scratch<double>(1) : nullptr;
  auto gen = [&](float* pp, std::vector<float*> arr, float* w2) {
    const float* val = kCoefValues;
    run.cpu_for(g.I, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i)
        for (size_t j = 0; j < g.J; ++j)
          for (size_t k = 0; k < g.K; ++k) {
            const size_t x = g.at(i, j, k);
            pp[x] = pressure0(g, i);
            for (int a = 0; a < 12; ++a) arr[a][x] = val[a];
            w2[x] = 0;
          }
    });
  };
  auto ptrs = [&](bool host) {
    std::vector<float*> v;
    for (auto& a : in) v.push_back(host ? a.host : a.dev);
    return v;
  };
  auto coef = [](const std::vector<float*>& v) {
    return Coef{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11]};
  };
  run.init([&] { gen(p.host, ptrs(true), wrk2.host); });
  run.to_gpu();
  const Coef q = coef(ptrs(false));
  std::vector<double> gosa;
  std::vector<float> before;  // p before the last iteration, for the check of larger grids
  for (int it = 0; it < iters; ++it) {
    if (it == iters - 1 && !run.check()) before = run.snapshot(p.dev, n);
    run.iteration([&] {
      if (run.gpu()) {
        jacobi_kernel<<<grid, 256>>>(p.dev, wrk2.dev, q, g, omega, part);
        gosa_kernel<<<1, 1>>>(part, static_cast<int>(grid), gosa_d);
        copy_back_kernel<<<grid, 256>>>(p.dev, wrk2.dev, g);
      } else {
        gosa.push_back(iterate_cpu(run, p.dev, wrk2.dev, q, g, omega));
      }
    });
  }
  double last_gosa = 0;
  if (run.gpu()) UM_CUDA(cudaMemcpy(&last_gosa, gosa_d, sizeof last_gosa, cudaMemcpyDeviceToHost));
  else last_gosa = gosa.back();
  run.back();
  run.verify([&] {
    if (!run.check()) {
      // Larger: the last iteration recomputed at every point from p before it, and its gosa.
      std::vector<float> want(n);
      const double g_want = ref_iteration(run, before.data(), want.data(), g, omega);
      run.compare("p (last iteration)", p.host, want.data(), n, 1e-5);
      run.compare("gosa (last iteration)", &last_gosa, &g_want, 1, 1e-3);
      run.verified("cpu-sample:" + std::to_string(n));
      return;
    }
    std::vector<float> rp(n), next(n);
    for (size_t x = 0; x < n; ++x) rp[x] = pressure0(g, x / (g.J * g.K));
    double want = 0;
    for (int it = 0; it < iters; ++it) {
      want = ref_iteration(run, rp.data(), next.data(), g, omega);
      std::swap(rp, next);
    }
    run.compare("p", p.host, rp.data(), n, 1e-5);
    // gosa sums squares of near-cancelling residuals: one rounding of p moves it more than p itself.
    run.compare("gosa", &last_gosa, &want, 1, 1e-3);
  });
  run.dump("p", p.host, n);
  JsonObject extra;
  extra.set("dims", std::to_string(g.I) + "x" + std::to_string(g.J) + "x" + std::to_string(g.K));
  extra.set("gosa", last_gosa);
  // Per interior point and iteration: 34 flops (Himeno's count); 13 arrays
  // read, wrk2 written, and the copy back (read wrk2, write p): 16 x 4 bytes.
  const double pts = double(g.I - 2) * (g.J - 2) * (g.K - 2);
  // What crosses to memory when the arrays are remote (pinned, registered; read by the calibrated
  // model): a block walks one (i, j) line of k at a time, so the 19-point stencil reads p from the
  // nine lines (i-1..i+1, j-1..j+1) of which only the k neighbours share the block's cache lines: p
  // is read nine times, the 12 coefficient arrays once, wrk2 once by the copy back (88 B a point);
  // wrk2 and p are written once (8 B).
  extra.set("link_read_bytes", 88.0 * pts).set("link_write_bytes", 8.0 * pts);
  run.finish(extra, 64.0 * pts, 34.0 * pts);
}

AppRegistrar reg({"himeno", "gpu|cpu",
                    "3-D Poisson Jacobi, 19-point stencil (Himeno); --size S/M/L/XL or --footprint",
                    {"app"},
                    // --seed is accepted as by every application (its inputs do not depend on it).
                    app_params({"size", "dims", "iterations", "seed"}),
                    run_himeno},
                 // Model facts: reads its 14 arrays, rewrites p and wrk2 (2 of 14: 0.14 of the footprint; declared
                 // 0.15). umsim replays the application's default iterations (20; in no study's sweep).
                 {"stencil", "himeno", 20, 1.0, 0.15});

}  // namespace
}  // namespace umscope
