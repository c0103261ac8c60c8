// HotSpot (Rodinia; Schieffer et al. section 3.1): transient 2-D thermal
// simulation of a chip from its power map. Each cell moves towards its four
// neighbours (a missing neighbour at the edge counts as the cell itself),
// the ambient and its own power. The GPU kernel uses the pyramid tiling:
// one launch advances `--pyramid` steps of a tile held in shared memory,
// recomputing a halo that shrinks by one cell per step, so the grid is read
// and written once per launch instead of once per step.
#include "umscope/app.hpp"

namespace umscope {
namespace {

constexpr int BS = 32;  // tile side (threads per block side): 1024 threads, a 28 x 28 core at --pyramid 2

// The model's constants (Rodinia's chip: 16 mm x 16 mm, 0.5 mm thick silicon; its Cap, Rx, Ry, Rz per cell).
// Rodinia's time step (the precision over the largest temperature slope the power can cause) does not depend on
// the grid, but the explicit update is only stable while a cell keeps a non-negative share of its own
// temperature: T' = T (1 - step/Cap (2/Rx + 2/Ry + 1/Rz)) + ..., and step/Cap (2/Rx + 2/Ry) grows with the
// square of the cells a side. Rodinia's step passes that limit at about 1390 cells a side, where each step
// starts to multiply the grid's finest ripple (a checkerboard) by less than -1: at 4730 a side (256 MiB) by
// -22, to 1e27 K within ten launches. So the step is Rodinia's up to about 980 cells a side and beyond that the
// one that keeps half of the cell's own temperature in each step: every new temperature is then a weighted
// average of old ones and the ambient (all weights >= 0) plus the power's heat, bounded at every size.
struct Model {
  float step_div_cap, rx1, ry1, rz1, amb;
  double step;  // seconds
};
Model model(size_t rows, size_t cols) {
  const double t_chip = 0.0005, chip_h = 0.016, chip_w = 0.016, k_si = 100, spec_heat = 1.75e6, factor = 0.5;
  const double max_pd = 3.0e6, precision = 0.001, amb = 80.0;
  const double gh = chip_h / rows, gw = chip_w / cols;
  const double cap = factor * spec_heat * t_chip * gw * gh;
  const double rx = gw / (2.0 * k_si * t_chip * gh), ry = gh / (2.0 * k_si * t_chip * gw), rz = t_chip / (k_si * gh * gw);
  const double rodinia_step = precision / (max_pd / (factor * t_chip * spec_heat));
  const double step = std::min(rodinia_step, 0.5 * cap / (2 / rx + 2 / ry + 1 / rz));
  return {float(step / cap), float(1 / rx), float(1 / ry), float(1 / rz), float(amb), step};
}

__host__ __device__ inline float cell(float t, float n, float s, float e, float w, float p, const Model& m) {
  return t + m.step_div_cap * (p + (s + n - 2.f * t) * m.ry1 + (e + w - 2.f * t) * m.rx1 + (m.amb - t) * m.rz1);
}

__global__ void pyramid_kernel(const float* __restrict__ power, const float* __restrict__ src, float* __restrict__ dst,
                               long rows, long cols, int steps, Model m) {
  __shared__ float t[BS][BS], nt[BS][BS], pw[BS][BS];
  const int small = BS - 2 * steps;  // cells a block finishes
  const int tx = threadIdx.x, ty = threadIdx.y;
  const long r = long(blockIdx.y) * small - steps + ty, c = long(blockIdx.x) * small - steps + tx;
  const bool inside = r >= 0 && r < rows && c >= 0 && c < cols;
  if (inside) {
    t[ty][tx] = src[r * cols + c];
    pw[ty][tx] = power[r * cols + c];
  }
  __syncthreads();
  for (int s = 0; s < steps; ++s) {
    const bool live = inside && tx > s && tx < BS - 1 - s && ty > s && ty < BS - 1 - s;
    if (live) {
      const float me = t[ty][tx];
      const float n = r > 0 ? t[ty - 1][tx] : me, so = r < rows - 1 ? t[ty + 1][tx] : me;
      const float w = c > 0 ? t[ty][tx - 1] : me, e = c < cols - 1 ? t[ty][tx + 1] : me;
      nt[ty][tx] = cell(me, n, so, e, w, pw[ty][tx], m);
    }
    __syncthreads();
    if (live) t[ty][tx] = nt[ty][tx];
    __syncthreads();
  }
  if (inside && tx >= steps && tx < BS - steps && ty >= steps && ty < BS - steps) dst[r * cols + c] = t[ty][tx];
}

void step_cpu(AppRun& run, const float* power, const float* src, float* dst, size_t rows, size_t cols, const Model& m) {
  run.cpu_for(rows, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i)
      for (size_t j = 0; j < cols; ++j) {
        const size_t k = i * cols + j;
        const float me = src[k];
        const float n = i > 0 ? src[k - cols] : me, s = i < rows - 1 ? src[k + cols] : me;
        const float w = j > 0 ? src[k - 1] : me, e = j < cols - 1 ? src[k + 1] : me;
        dst[k] = cell(me, n, s, e, w, power[k], m);
      }
  });
}

// Power up to 1 mW per cell, from the seed.
inline float power_at(uint64_t seed, size_t i) { return static_cast<float>(1e-3 * uniform01(seed, i)); }

// The reference's update of cell (i, j) of t (rows x cols, power p), a second implementation on purpose,
// from the model's definition rather than cell() (which the kernel and the CPU path share): the heat that flows
// in over one step through each side (a missing neighbour is the cell itself), from the ambient and from the
// power, over the cell's capacitance.
float ref_temperature(const float* t, const float* p, size_t rows, size_t cols, size_t i, size_t j, const Model& m) {
  const float me = t[i * cols + j];
  const float north = i > 0 ? t[(i - 1) * cols + j] : me, south = i + 1 < rows ? t[(i + 1) * cols + j] : me;
  const float west = j > 0 ? t[i * cols + j - 1] : me, east = j + 1 < cols ? t[i * cols + j + 1] : me;
  const float inflow = (north - me) * m.ry1 + (south - me) * m.ry1 + (west - me) * m.rx1 + (east - me) * m.rx1 +
                       (m.amb - me) * m.rz1 + p[i * cols + j];
  return me + inflow * m.step_div_cap;
}

// Rows [lo, hi) of one reference step from t into out.
void ref_rows(const float* t, const float* p, float* out, size_t rows, size_t cols, const Model& m, size_t lo,
              size_t hi) {
  for (size_t i = lo; i < hi; ++i)
    for (size_t j = 0; j < cols; ++j) out[i * cols + j] = ref_temperature(t, p, rows, cols, i, j, m);
}

// The temperature of cell k after `steps` steps from `t`, computed in the (2 steps + 1)^2 window around it
// (the power from the seed as the initialisation makes it). Cells outside the window are not known: the
// window's border uses its own value for them, a wrong value that travels inward one cell per step and so
// never reaches the centre within `steps` steps.
float last_steps(const float* t, uint64_t seed, size_t rows, size_t cols, size_t k, int steps, const Model& m) {
  const long r = long(k / cols), c = long(k % cols), R = long(rows), C = long(cols);
  const long r0 = std::max(0L, r - steps), r1 = std::min(R - 1, r + steps);
  const long c0 = std::max(0L, c - steps), c1 = std::min(C - 1, c + steps);
  const size_t h = size_t(r1 - r0 + 1), w = size_t(c1 - c0 + 1);
  std::vector<float> a(h * w), b(h * w), p(h * w);
  for (size_t i = 0; i < h; ++i)
    for (size_t j = 0; j < w; ++j) {
      const size_t g = size_t(r0 + long(i)) * cols + size_t(c0 + long(j));
      a[i * w + j] = t[g];
      p[i * w + j] = power_at(seed, g);
    }
  for (int s = 0; s < steps; ++s) {
    ref_rows(a.data(), p.data(), b.data(), h, w, m, 0, h);
    std::swap(a, b);
  }
  return a[size_t(r - r0) * w + size_t(c - c0)];
}

void run_hotspot(Context& ctx) {
  AppRun run(ctx, "hotspot");
  const uint64_t seed = run.seed();
  const int launches = run.iterations(10);
  const int pyr = static_cast<int>(ctx.args.integer("pyramid", 2));
  if (pyr < 1 || pyr > BS / 2 - 1) throw UsageError("--pyramid must be from 1 to " + std::to_string(BS / 2 - 1));
  size_t rows, cols;
  run.grid_dims(size_t(3) << 30, 3 * sizeof(float), 2, rows, cols);
  const size_t n = rows * cols;
  const Model m = model(rows, cols);
  auto power = run.array<float>("power", n, Use::in);
  auto temp = run.array<float>("temp", n, Use::inout);
  auto temp2 = run.array<float>("temp2", n, Use::out);
  // Temperatures around 323-343 K, power up to 1 mW per cell, from the seed.
  auto gen = [&](float* p, float* t) {
    run.cpu_for(n, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) {
        p[i] = power_at(seed, i);
        t[i] = static_cast<float>(323.0 + 20.0 * uniform01(seed + 1, i));
      }
    });
  };
  run.init([&] { gen(power.host, temp.host); });
  run.dump("power", power.host, n);
  run.dump("temp0", temp.host, n);
  run.to_gpu();
  float* buf[2] = {temp.dev, temp2.dev};
  const int small = BS - 2 * pyr;
  const dim3 grid(static_cast<unsigned>((cols + small - 1) / small), static_cast<unsigned>((rows + small - 1) / small));
  if (run.gpu() && grid.y > 65535) throw UsageError("hotspot: too many rows for one launch (at most " +
                                                    std::to_string(65535L * small) + ")");
  std::vector<float> before;  // the temperatures before the last launch, for the sampled check
  for (int l = 0; l < launches; ++l) {
    if (l == launches - 1 && !run.check()) before = run.snapshot(buf[l % 2], n);
    run.iteration([&] {
      float* src = buf[l % 2];
      float* dst = buf[(l + 1) % 2];
      if (run.gpu()) {
        pyramid_kernel<<<grid, dim3(BS, BS)>>>(power.dev, src, dst, long(rows), long(cols), pyr, m);
      } else {
        for (int s = 0; s < pyr; ++s) {  // on the CPU: step by step between the two arrays
          step_cpu(run, power.dev, src, dst, rows, cols, m);
          std::swap(src, dst);
        }
        if (pyr % 2 == 0) std::copy(src, src + n, dst);  // the result where the GPU leaves it
      }
    });
  }
  run.back();
  const float* result = launches % 2 ? temp2.host : temp.host;
  run.verify([&] {
    if (run.check()) {
      std::vector<float> p(n), a(n), b(n);
      gen(p.data(), a.data());
      for (int s = 0; s < launches * pyr; ++s) {
        run.cpu_for(rows, [&](size_t lo, size_t hi) { ref_rows(a.data(), p.data(), b.data(), rows, cols, m, lo, hi); });
        std::swap(a, b);
      }
      run.compare("temperature", result, a.data(), n, 1e-5);
      return;
    }
    // Larger: the last launch's --pyramid steps recomputed at sampled cells from the temperatures before it
    // (the power regenerated from the seed), each in the window of cells it depends on.
    const std::vector<size_t> at = run.grid_sample(rows, cols);
    run.compare_each("temperature (sampled)", at.size(), [&](size_t k) { return double(result[at[k]]); },
                     [&](size_t k) { return double(last_steps(before.data(), seed, rows, cols, at[k], pyr, m)); },
                     1e-5);
    run.verified("cpu-sample:" + std::to_string(at.size()));
  });
  run.dump("result", result, n);
  JsonObject extra;
  extra.set("rows", static_cast<unsigned long long>(rows)).set("cols", static_cast<unsigned long long>(cols));
  extra.set("pyramid", pyr).set("steps", launches * pyr);
  extra.set("step_div_cap", double(m.step_div_cap)).set("rx1", double(m.rx1)).set("ry1", double(m.ry1));
  extra.set("rz1", double(m.rz1)).set("ambient", double(m.amb)).set("step_s", m.step);
  // What crosses to memory when the arrays are remote (pinned, registered; read by the calibrated
  // model): each block loads a BS x BS tile of the temperature and the power to finish its
  // small x small core, so the reads are (BS / small)^2 times the arrays; the core is written once.
  const double halo = double(BS) * BS / (double(small) * small);
  extra.set("link_read_bytes", 2.0 * n * sizeof(float) * halo).set("link_write_bytes", double(n) * sizeof(float));
  // One launch reads the temperature and the power and writes the temperature once.
  run.finish(extra, 3.0 * n * sizeof(float), 15.0 * n * pyr);
}

AppRegistrar reg({"hotspot", "gpu|cpu",
                    "2-D thermal stencil with pyramid tiling (Rodinia); one iteration = --pyramid steps",
                    {"app"},
                    app_params({"rows", "cols", "seed", "iterations", "pyramid"}),
                    run_hotspot},
                 // Model facts: reads power and temp, writes temp and temp2: 2/3 read, 2/3 written. Several passes
                 // replayed (iterative; Schieffer et al.'s sweep): 10, as dos.py's sweep always did.
                 {"stencil", "hotspot", 10, 2.0 / 3, 2.0 / 3});

}  // namespace
}  // namespace umscope
