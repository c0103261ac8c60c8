// Quantum Volume state-vector simulator, in every memory mode.
//
// Circuit (fixed seed): depth layers (default = width); each layer is a
// random permutation of the qubits taken in pairs, and a Haar-random 4x4
// unitary on each pair (QR of a complex Gaussian matrix by Gram-Schmidt,
// whose positive diagonal makes Q Haar-distributed). Little-endian as in
// Qiskit: amplitude index bit q is qubit q, and a gate on (q0, q1) acts on
// the local basis index b(q0) + 2 b(q1).
//
// One kernel applies one two-qubit gate in one pass over the state: thread i
// owns the four amplitudes whose index is i with zeros inserted at the two
// qubit positions. The CPU implementation (threads) is the same loop; it is
// both a processor of its own and the reference the GPU result is checked
// against (fidelity). The memory mode only changes the buffer's kind.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>

#include "umscope/app.hpp"
#include "umscope/bench.hpp"
#include "umscope/caps.hpp"
#include "umscope/errors.hpp"
#include "umscope/threads.hpp"
#include "umscope/traffic.hpp"
#include "umscope/timing.hpp"

namespace umscope {
namespace {

using cd = std::complex<double>;

struct Gate {
  int q0, q1;
  cd u[16];  // row-major
};
using Layer = std::vector<Gate>;

void haar_unitary4(std::mt19937_64& rng, cd* u) {
  std::normal_distribution<double> g(0.0, 1.0);
  cd col[4][4];
  for (int c = 0; c < 4; ++c)
    for (int r = 0; r < 4; ++r) col[c][r] = cd(g(rng), g(rng)) / std::sqrt(2.0);
  for (int c = 0; c < 4; ++c) {
    for (int p = 0; p < c; ++p) {
      cd dot = 0;
      for (int r = 0; r < 4; ++r) dot += std::conj(col[p][r]) * col[c][r];
      for (int r = 0; r < 4; ++r) col[c][r] -= dot * col[p][r];
    }
    double norm = 0;
    for (int r = 0; r < 4; ++r) norm += std::norm(col[c][r]);
    norm = std::sqrt(norm);
    for (int r = 0; r < 4; ++r) col[c][r] /= norm;
  }
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) u[r * 4 + c] = col[c][r];
}

std::vector<Layer> qv_circuit(int n, int depth, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Layer> layers(depth);
  std::vector<int> perm(n);
  for (auto& layer : layers) {
    for (int i = 0; i < n; ++i) perm[i] = i;
    for (int i = n - 1; i > 0; --i) std::swap(perm[i], perm[std::uniform_int_distribution<int>(0, i)(rng)]);
    for (int k = 0; k + 1 < n; k += 2) {
      Gate gt;
      gt.q0 = perm[k];
      gt.q1 = perm[k + 1];
      haar_unitary4(rng, gt.u);
      layer.push_back(gt);
    }
  }
  return layers;
}

template <class T>
struct C2 {
  T x, y;
};

template <class T>
struct Mat4 {
  T re[16], im[16];
};

template <class T>
Mat4<T> to_mat(const Gate& g) {
  Mat4<T> m;
  for (int i = 0; i < 16; ++i) {
    m.re[i] = static_cast<T>(g.u[i].real());
    m.im[i] = static_cast<T>(g.u[i].imag());
  }
  return m;
}

__host__ __device__ inline size_t insert_zero(size_t i, int bit) {
  size_t low = i & ((size_t(1) << bit) - 1);
  return ((i >> bit) << (bit + 1)) | low;
}

template <class T>
__host__ __device__ inline void apply_group(C2<T>* s, size_t i, int q0, int q1, const Mat4<T>& m) {
  const int lo = q0 < q1 ? q0 : q1, hi = q0 < q1 ? q1 : q0;
  const size_t base = insert_zero(insert_zero(i, lo), hi);
  const size_t b0 = size_t(1) << q0, b1 = size_t(1) << q1;
  const size_t idx[4] = {base, base | b0, base | b1, base | b0 | b1};
  C2<T> a[4];
  for (int k = 0; k < 4; ++k) a[k] = s[idx[k]];
  for (int r = 0; r < 4; ++r) {
    T x = 0, y = 0;
    for (int c = 0; c < 4; ++c) {
      x += m.re[r * 4 + c] * a[c].x - m.im[r * 4 + c] * a[c].y;
      y += m.re[r * 4 + c] * a[c].y + m.im[r * 4 + c] * a[c].x;
    }
    s[idx[r]] = C2<T>{x, y};
  }
}

template <class T>
__global__ void gate_kernel(C2<T>* s, size_t groups, int q0, int q1, Mat4<T> m) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < groups; i += stride) apply_group(s, i, q0, q1, m);
}

template <class T>
__global__ void init_kernel(C2<T>* s, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride)
    s[i] = C2<T>{static_cast<T>(i == 0 ? 1 : 0), 0};
}

// out[0] += sum of probabilities, out[1] = max probability (as bits of a non-negative double).
template <class T>
__global__ void measure_kernel(const C2<T>* s, size_t n, double* sum, unsigned long long* maxbits) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  double acc = 0, mx = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride) {
    double p = double(s[i].x) * s[i].x + double(s[i].y) * s[i].y;
    acc += p;
    mx = p > mx ? p : mx;
  }
  for (int off = 16; off > 0; off /= 2) {
    acc += __shfl_down_sync(0xffffffffu, acc, off);
    mx = fmax(mx, __shfl_down_sync(0xffffffffu, mx, off));
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(sum, acc);
    atomicMax(maxbits, static_cast<unsigned long long>(__double_as_longlong(mx)));
  }
}

template <class T>
void cpu_apply(ThreadTeam& team, C2<T>* s, int n, const Gate& g) {
  const size_t groups = size_t(1) << (n - 2);
  Mat4<T> m = to_mat<T>(g);
  team.run([&](int t, int T_) {
    size_t lo, hi;
    split_range(groups, T_, t, lo, hi);
    for (size_t i = lo; i < hi; ++i) apply_group(s, i, g.q0, g.q1, m);
  });
}

// The reference's gate, a second implementation on purpose (not apply_group(), which the kernel and the CPU path
// share), out of place from the definition: amplitude x of the new state is sum_c U[r][c] old[x with its bits
// (q0, q1) set to c], where r = b(q0) + 2 b(q1) of x.
void ref_gate(ThreadTeam& team, const cd* in, cd* out, int n, const Gate& g) {
  const size_t amps = size_t(1) << n, m0 = size_t(1) << g.q0, m1 = size_t(1) << g.q1;
  team.run([&](int t, int T_) {
    size_t lo, hi;
    split_range(amps, T_, t, lo, hi);
    for (size_t x = lo; x < hi; ++x) {
      const size_t rest = x & ~(m0 | m1);
      const int r = int((x & m0) != 0) + 2 * int((x & m1) != 0);
      cd s = 0;
      for (int c = 0; c < 4; ++c) s += g.u[r * 4 + c] * in[rest | ((c & 1) ? m0 : 0) | ((c & 2) ? m1 : 0)];
      out[x] = s;
    }
  });
}

// max |got - want| / max |want| over every amplitude, where want is the product state that one layer of
// gates on disjoint pairs makes of |0...0>: amplitude x is prod_g U_g[b(q0) + 2 b(q1)][0], zero where a qubit
// no gate touches is 1.
template <class T>
double product_layer_error(ThreadTeam& team, const C2<T>* got, int n, const Layer& layer) {
  size_t touched = 0;
  for (const Gate& g : layer) touched |= (size_t(1) << g.q0) | (size_t(1) << g.q1);
  const size_t amps = size_t(1) << n;
  std::vector<double> err(team.size(), 0), scale(team.size(), 0);
  team.run([&](int t, int T_) {
    size_t lo, hi;
    split_range(amps, T_, t, lo, hi);
    for (size_t x = lo; x < hi; ++x) {
      // The product by hand: std::complex's operator* goes through __muldc3 (its inf/nan recovery), which made
      // this check most of QV's verification time (about 150 ms of 310 at 22 qubits on 2 threads).
      double wr = 0, wi = 0;
      if (!(x & ~touched)) {
        wr = 1;
        for (const Gate& g : layer) {
          const cd u = g.u[(((x >> g.q0) & 1) + 2 * ((x >> g.q1) & 1)) * 4];
          const double r = wr * u.real() - wi * u.imag();
          wi = wr * u.imag() + wi * u.real();
          wr = r;
        }
      }
      // Squared magnitudes (no hypot per amplitude); the roots once, at the end.
      const double dr = double(got[x].x) - wr, di = double(got[x].y) - wi;
      const double e2 = dr * dr + di * di;
      err[t] = std::isnan(e2) ? INFINITY : std::max(err[t], e2);
      scale[t] = std::max(scale[t], wr * wr + wi * wi);
    }
  });
  double e = 0, sc = 0;
  for (int t = 0; t < team.size(); ++t) e = std::max(e, err[t]), sc = std::max(sc, scale[t]);
  e = std::sqrt(e), sc = std::sqrt(sc);
  return sc > 0 ? e / sc : e;
}

std::string kind_for(const std::string& mode, const std::string& init) {
  // The state is read and written by every gate: an output array of the suite's modes (modes.cpp).
  if (mode == "explicit") return "device";
  return mode_kind(mode, false) + ",first_touch=" + init;
}

void write_circuit(const std::string& path, int n, int depth, uint64_t seed, const std::vector<Layer>& layers) {
  std::ofstream f(path);
  if (!f) throw UsageError("cannot write the circuit to '" + path + "'");
  f.precision(17);
  f << "{\"format\":\"umscope-qv-1\",\"qubits\":" << n << ",\"depth\":" << depth << ",\"seed\":" << seed
    << ",\"convention\":\"little-endian; a gate on [q0,q1] acts on local index b(q0)+2*b(q1); u row-major\""
    << ",\"layers\":[";
  for (size_t l = 0; l < layers.size(); ++l) {
    f << (l ? "," : "") << "[";
    for (size_t k = 0; k < layers[l].size(); ++k) {
      const Gate& g = layers[l][k];
      f << (k ? "," : "") << "{\"qubits\":[" << g.q0 << "," << g.q1 << "],\"u\":[";
      for (int i = 0; i < 16; ++i) f << (i ? "," : "") << "[" << g.u[i].real() << "," << g.u[i].imag() << "]";
      f << "]}";
    }
    f << "]";
  }
  f << "]}\n";
}

template <class T>
void run_qv_typed(Context& ctx) {
  const long long qubits = ctx.args.integer("qubits", 20);
  if (qubits < 2 || qubits > 40) throw UsageError("--qubits must be from 2 to 40");
  const int n = static_cast<int>(qubits);
  const long long depth_arg = ctx.args.integer("depth", n);
  if (depth_arg < 1 || depth_arg > 100000) throw UsageError("--depth must be from 1 to 100000");
  const int depth = static_cast<int>(depth_arg);
  const uint64_t seed = static_cast<uint64_t>(ctx.args.integer("seed", 11));
  const std::string mode =
      ctx.args.choices("mode", "explicit", app_modes())[0];
  const std::string init = ctx.args.choices("init", "gpu", {"gpu", "cpu"})[0];
  const std::string proc = ctx.args.choices("processor", "gpu", {"gpu", "cpu"})[0];
  const bool check = ctx.args.has("check") ? ctx.args.flag("check") : n <= 20;
  const std::string dump = ctx.args.str("dump-state", "");
  const std::string export_path = ctx.args.str("export-circuit", "");
  const int nthreads = ctx.args.thread_counts("threads", "all")[0];
  if ((check || !dump.empty()) && n > 26) throw UsageError("--check and --dump-state are for at most 26 qubits");

  const size_t amps = size_t(1) << n;
  const size_t bytes = amps * sizeof(C2<T>);
  const std::vector<Layer> layers = qv_circuit(n, depth, seed);
  if (!export_path.empty()) write_circuit(export_path, n, depth, seed, layers);
  ThreadTeam team(nthreads);
  using clk = std::chrono::steady_clock;
  auto ms_since = [](clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); };
  const bool on_gpu = proc == "gpu";
  const GpuCaps& caps = gpu_caps(ctx.device);
  if (on_gpu) ctx.use_gpu();
  KindSpec kind = parse_kind(on_gpu ? kind_for(mode, init) : "system");
  KindSpec placed = kind;
  const std::string prefetch_to = placed.get("prefetch", "none");
  placed.policy.erase("prefetch");

  double alloc_ms = 0, init_ms = 0, prefetch_ms = 0, transfer_ms = 0, measure_ms = 0, back_ms = 0, free_ms = 0;
  std::vector<double> layer_ms;
  double norm = 0, pmax = 0, verify_ms = 0, layer_error = 0;
  size_t layer_amps = 0;
  std::vector<C2<T>> host;  // explicit mode's host copy, and the CPU result
  std::vector<C2<T>> result;
  {
    auto t = clk::now();
    std::unique_ptr<Buffer> buf(new Buffer(placed, bytes, ctx.alloc));
    if (on_gpu) UM_CUDA(cudaDeviceSynchronize());
    alloc_ms = ms_since(t);
    void* mine = buf->reach(on_gpu);
    auto* s = static_cast<C2<T>*>(mine);
    Initializer ini;
    ini.cpu = [&](void* p, size_t) {
      auto* c = static_cast<C2<T>*>(p);
      team.run([&](int i, int T_) {
        size_t lo, hi;
        split_range(amps, T_, i, lo, hi);
        for (size_t k = lo; k < hi; ++k) c[k] = C2<T>{static_cast<T>(k == 0 ? 1 : 0), 0};
      });
    };
    ini.gpu = [&](void* p, size_t) {
      init_kernel<<<caps.sms * 8, 256>>>(static_cast<C2<T>*>(p), amps);
      UM_CUDA(cudaGetLastError());
      UM_CUDA(cudaDeviceSynchronize());
    };
    t = clk::now();
    if (on_gpu && mode == "explicit" && init == "cpu") {
      host.resize(amps);
      ini.cpu(host.data(), bytes);
      init_ms = ms_since(t);
      t = clk::now();
      UM_CUDA(cudaMemcpy(s, host.data(), bytes, cudaMemcpyHostToDevice));
      transfer_ms = ms_since(t);
    } else {
      buf->place(ini);
      if (on_gpu) UM_CUDA(cudaDeviceSynchronize());
      init_ms = ms_since(t);
      if (prefetch_to != "none") {
        t = clk::now();
        buf->prefetch(prefetch_to);
        prefetch_ms = ms_since(t);
      }
    }
    const size_t groups = amps / 4;
    if (on_gpu) {
      int block = 256, per_sm = 0;
      UM_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gate_kernel<T>, block, 0));
      const unsigned grid = static_cast<unsigned>(std::max(1, per_sm) * caps.sms);
      EventClock clock;
      for (const Layer& layer : layers)
        layer_ms.push_back(clock.time_ms([&] {
          for (const Gate& g : layer) gate_kernel<T><<<grid, block>>>(s, groups, g.q0, g.q1, to_mat<T>(g));
        }));
      double* sum = nullptr;
      unsigned long long* mx = nullptr;
      UM_CUDA(cudaMalloc(&sum, sizeof(double)));
      UM_CUDA(cudaMalloc(&mx, sizeof(unsigned long long)));
      UM_CUDA(cudaMemset(sum, 0, sizeof(double)));
      UM_CUDA(cudaMemset(mx, 0, sizeof(unsigned long long)));
      measure_ms = clock.time_ms([&] { measure_kernel<T><<<caps.sms * 8, 256>>>(s, amps, sum, mx); });
      unsigned long long bits = 0;
      UM_CUDA(cudaMemcpy(&norm, sum, sizeof norm, cudaMemcpyDeviceToHost));
      UM_CUDA(cudaMemcpy(&bits, mx, sizeof bits, cudaMemcpyDeviceToHost));
      std::memcpy(&pmax, &bits, sizeof pmax);
      cudaFree(sum);
      cudaFree(mx);
      if (mode == "explicit") {  // results back to the host, as an explicit program does
        if (host.size() != amps) host.resize(amps);
        t = clk::now();
        UM_CUDA(cudaMemcpy(host.data(), s, bytes, cudaMemcpyDeviceToHost));
        back_ms = ms_since(t);
      }
      if (check || !dump.empty()) {
        result.resize(amps);
        UM_CUDA(cudaMemcpy(result.data(), s, bytes, cudaMemcpyDefault));
      }
    } else {
      for (const Layer& layer : layers) {
        t = clk::now();
        for (const Gate& g : layer) cpu_apply(team, s, n, g);
        layer_ms.push_back(ms_since(t));
      }
      t = clk::now();
      for (size_t i = 0; i < amps; ++i) {
        double p = double(s[i].x) * s[i].x + double(s[i].y) * s[i].y;
        norm += p;
        pmax = std::max(pmax, p);
      }
      measure_ms = ms_since(t);
      if (check || !dump.empty()) result.assign(s, s + amps);
    }
    if (!check) {
      // Beyond the CPU simulator's reach: the norm (below) and an exact circuit at the same width in the same
      // buffer: one layer of the circuit's kind from |0...0>, whose result is the product state
      // prod_g U_g[b(q0) + 2 b(q1)][0] (the gates act on disjoint pairs), checked on every amplitude.
      // Untimed, after the measurement.
      auto vt = clk::now();
      const Layer layer = qv_circuit(n, 1, seed ^ 0x6c8e9cf570932bd5ull)[0];
      std::unique_ptr<C2<T>[]> got(new C2<T>[amps]);  // written in full below: no zero-filling of 2^n amplitudes
      if (on_gpu) {
        init_kernel<<<caps.sms * 8, 256>>>(s, amps);
        for (const Gate& g : layer) gate_kernel<T><<<caps.sms * 8, 256>>>(s, groups, g.q0, g.q1, to_mat<T>(g));
        UM_CUDA(cudaGetLastError());
        UM_CUDA(cudaMemcpy(got.get(), s, bytes, cudaMemcpyDefault));
      } else {
        ini.cpu(s, bytes);
        for (const Gate& g : layer) cpu_apply(team, s, n, g);
        std::copy(s, s + amps, got.get());
      }
      layer_error = product_layer_error(team, got.get(), n, layer);
      layer_amps = amps;
      verify_ms += ms_since(vt);
    }
    t = clk::now();
    buf.reset();
    if (on_gpu) UM_CUDA(cudaDeviceSynchronize());
    free_ms = ms_since(t);
  }
  const double tol = sizeof(T) == 8 ? 1e-9 : 1e-3;
  if (std::fabs(norm - 1) > tol) throw VerifyError("state norm " + json_number(norm) + " is not 1: the gates are not unitary");

  // Amplitudes are at most 1; the layer's roundings are those of one 4 x 4 product per gate.
  const double layer_tol = sizeof(T) == 8 ? 1e-12 : 1e-5;
  if (layer_amps && !(layer_error <= layer_tol))
    throw VerifyError("one layer from |0...0> differs from its product state by " + json_number(layer_error) +
                      " (max |amplitude error| / max |amplitude|) > " + json_number(layer_tol));
  double fidelity = -1;
  if (check) {
    auto vt = clk::now();
    // The reference: the same circuit on the CPU, in double precision, gate by gate out of place.
    std::vector<cd> ref(amps, 0), next(amps);
    ref[0] = 1;
    for (const Layer& layer : layers)
      for (const Gate& g : layer) {
        ref_gate(team, ref.data(), next.data(), n, g);
        ref.swap(next);
      }
    cd overlap = 0;
    for (size_t i = 0; i < amps; ++i) overlap += std::conj(ref[i]) * cd(result[i].x, result[i].y);
    fidelity = std::norm(overlap);
    const double need = sizeof(T) == 8 ? 1 - 1e-10 : 1 - 1e-4;
    if (fidelity < need)
      throw VerifyError("fidelity with the CPU reference " + json_number(fidelity) + " < " + json_number(need));
    verify_ms += ms_since(vt);
  }
  if (!dump.empty()) {
    std::ofstream f(dump, std::ios::binary);
    if (!f) throw UsageError("cannot write the state to '" + dump + "'");
    for (size_t i = 0; i < amps; ++i) {
      double xy[2] = {double(result[i].x), double(result[i].y)};
      f.write(reinterpret_cast<const char*>(xy), sizeof xy);
    }
  }

  const std::string pname = on_gpu ? "gpu" + std::to_string(ctx.device) : "cpu";
  double compute = 0;
  for (double v : layer_ms) compute += v;
  const int gates_per_layer = n / 2;
  JsonObject rec = ctx.record("circuit", pname, kind, bytes);
  Context::put_summary(rec, "time_per_layer", "ms", layer_ms);  // samples in layer order
  rec.set("qubits", n);
  rec.set("depth", depth);
  rec.set("gates", depth * gates_per_layer);
  rec.set("precision", sizeof(T) == 8 ? "complex128" : "complex64");
  rec.set("mode", on_gpu ? mode : "cpu");
  rec.set("init", on_gpu ? init : "cpu");
  rec.set("alloc_ms", alloc_ms);
  rec.set("init_ms", init_ms);
  if (prefetch_to != "none") rec.set("prefetch_ms", prefetch_ms);
  if (transfer_ms > 0) rec.set("transfer_ms", transfer_ms);
  rec.set("compute_ms", compute);
  rec.set("measure_ms", measure_ms);
  if (back_ms > 0) rec.set("back_ms", back_ms);
  rec.set("free_ms", free_ms);
  rec.set("total_ms", alloc_ms + init_ms + prefetch_ms + transfer_ms + compute + measure_ms + back_ms + free_ms);
  rec.set("norm", norm);
  rec.set("max_probability", pmax);
  if (fidelity >= 0) rec.set("fidelity", fidelity);
  if (!on_gpu) rec.set("threads", nthreads);
  // How the state was verified: against the CPU simulator where it ran, else the norm and the exact layer.
  const std::string verified =
      fidelity >= 0 ? "cpu-reference" : "invariant:norm+cpu-layer:" + std::to_string(layer_amps);
  if (layer_amps) rec.set("layer_error", layer_error);
  rec.set("verify_ms", verify_ms);
  rec.set("verified", verified);
  ctx.emit(rec);

  // Each gate reads and writes the whole state once: the bandwidth it reached.
  std::vector<double> gbps;
  for (double ms : layer_ms) gbps.push_back(gb_per_s(2.0 * bytes * gates_per_layer, ms * 1e-3));
  JsonObject g = ctx.record("gate", pname, kind, bytes);
  Context::put_summary(g, "bandwidth", "GB/s", gbps);
  g.set("qubits", n);
  g.set("precision", sizeof(T) == 8 ? "complex128" : "complex64");
  g.set("mode", on_gpu ? mode : "cpu");
  g.set("gate_ms", summarize(layer_ms).median / gates_per_layer);
  g.set("traffic_bytes", static_cast<unsigned long long>(2 * bytes));
  if (!on_gpu) g.set("threads", nthreads);
  g.set("verified", verified);
  ctx.emit(g);
}

// Declared for qv alone (umbench list --json); the run reads the same choices.
const OptionInfo kPrecision{"precision", "choice", "complex128", "qv: complex128, complex64", {"complex128", "complex64"}};

void run_qv(Context& ctx) {
  const std::string prec = ctx.args.choices("precision", kPrecision.dflt, kPrecision.choices)[0];
  if (prec == "complex128") run_qv_typed<double>(ctx);
  else run_qv_typed<float>(ctx);
}

AppRegistrar reg({"qv", "gpu|cpu",
                    "Quantum Volume state-vector simulator: depth = width layers of Haar-random SU(4) gates on random"
                    " qubit pairs",
                    {"circuit", "gate"},
                    {"qubits", "depth", "seed", "mode", "init", "processor", "precision", "check", "dump-state",
                     "export-circuit", "threads"},
                    run_qv,
                    {kPrecision}},
                 // Model facts: each two-qubit gate is one gate_kernel pass that reads and rewrites every amplitude
                 // in place (its gate records count traffic_bytes = 2 x the state), as four strided streams 2^q0
                 // and 2^q1 amplitudes apart, with no reuse inside a pass (16 complex multiply-adds per 4
                 // amplitudes: memory-bound, not dense compute); the GPU reads the whole state the CPU initialised
                 // and explicit mode copies all of it back. Not simulated, for the reason declared.
                 {"streaming", "", 0, 1.0, 1.0,
                  "no umsim generator: a pass's page order depends on the gate's qubit pair (four streams 2^q0 and "
                  "2^q1 amplitudes apart) and the circuit's gates, depth x floor(qubits/2) passes, on its options; "
                  "umsim's generators take a footprint and an iteration count only"});

}  // namespace
}  // namespace umscope
