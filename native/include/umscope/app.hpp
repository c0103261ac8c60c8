// The application harness: what every application of the suite shares, so
// that each one is one source with the memory mode as a parameter.
//
// An application declares its arrays with the way the GPU uses them (in,
// out, inout); the harness allocates them as the mode says, times every phase
// (context, allocation, CPU initialisation, transfers, each iteration of the
// computation, results back, free), hashes the results, compares them with
// the application's CPU reference when asked, and emits one "app" record.
//
//   mode              arrays                          transfer phase        back phase
//   explicit          malloc'd host + cudaMalloc      H2D copy of in/inout  D2H copy of out/inout
//   managed           cudaMallocManaged                -                     -
//   managed-prefetch  cudaMallocManaged                prefetch to the GPU   prefetch to the CPU
//   managed-advice    cudaMallocManaged                read_mostly (in), preferred:gpu (out/inout)
//   pinned            cudaMallocHost (zero copy)       -                     -
//   registered        mmap + cudaHostRegister          -                     -
//   system            mmap (needs HMM or ATS)          -                     -
//   cpu               (--processor cpu) the CPU implementation with threads
// In every mode the back phase ends with the CPU reading all results (the
// checksum), so the CPU pays for pulling back what the GPU wrote. Scratch
// buffers the CPU never sees are device memory in every GPU mode.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <memory>
#include <type_traits>
#include <string>
#include <vector>

#include "umscope/bench.hpp"
#include "umscope/errors.hpp"
#include "umscope/modes.hpp"
#include "umscope/threads.hpp"

namespace umscope {

class EventClock;

enum class Use { in, out, inout };

// Inputs are generated from a seed and the element's index (splitmix64), so
// any thread count, processor or size gives the same data.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// Uniform in [0, 1), from the seed and an index.
inline double uniform01(uint64_t seed, uint64_t i) { return (mix64(seed * 0x2545f4914f6cdd1dull + i) >> 11) * 0x1.0p-53; }

// Registers an application: a benchmark whose category is "application", with its model facts (bench.hpp).
struct AppRegistrar {
  AppRegistrar(BenchInfo info, AppFacts facts) {
    info.category = "application";
    info.facts = std::move(facts);
    bench_registry().push_back(std::move(info));
  }
};

// The options every application takes, then its own.
std::vector<std::string> app_params(std::initializer_list<const char*> own);

template <class T>
struct Array {
  T* host = nullptr;  // what the CPU initialises and reads back
  T* dev = nullptr;   // what the computation uses (the GPU's pointer; the CPU's with --processor cpu)
  size_t n = 0;
};

class AppRun {
 public:
  // Reads --mode, --processor, --threads, --check, --dump; creates the GPU
  // context (timed). `name` is the application's.
  AppRun(Context& ctx, const std::string& name);
  ~AppRun();
  AppRun(const AppRun&) = delete;
  AppRun& operator=(const AppRun&) = delete;

  Context& ctx;
  bool gpu() const { return gpu_; }
  // The footprint the user asked for (--footprint), or dflt.
  size_t footprint(size_t dflt) const;
  // --seed (default 1) and --iterations (at least 1).
  uint64_t seed() const { return static_cast<uint64_t>(ctx.args.integer("seed", 1)); }
  int iterations(int dflt) const {
    const long long n = ctx.args.integer("iterations", dflt);
    if (n < 1 || n > 1000000) throw UsageError("--iterations must be from 1 to 1000000");
    return static_cast<int>(n);
  }
  // The side of a square of cells of `cell_bytes` (all arrays together) that fills the footprint.
  size_t square_side(size_t dflt_footprint, double cell_bytes) const;
  // A square matrix's order: --n, else square_side.
  size_t square_dim(size_t dflt_footprint, double cell_bytes) const {
    const long long n = ctx.args.integer("n", 0);
    return n != 0 ? static_cast<size_t>(n) : square_side(dflt_footprint, cell_bytes);
  }
  // --rows and --cols of a 2-D grid, by default the square that fills the footprint; at least min x min.
  void grid_dims(size_t dflt_footprint, double cell_bytes, size_t min, size_t& rows, size_t& cols) const;
  // Whether to run the full CPU reference: --check, else when all arrays
  // together are at most 64 MiB and the reference's own work (floating-point
  // operations the application counts; 0: not counted) is at most
  // kReferenceFlops. Where it does not run, the application runs its sampled
  // check (or invariant) instead: some check always runs.
  bool check(double reference_flops = 0) const;
  // 2e9: about 0.1 s on the H100 host's 16 threads. Above it the reference
  // outgrew the case it checks (H100, `umscope run`: syr2k at 64 MiB, 5.3e10,
  // took 1.9 s beside a 0.1 s case; srad at 256M, 5.6e9, 0.85 s per mode).
  static constexpr double kReferenceFlops = 2e9;
  // Runs the check (untimed; its time is the record's verify_ms).
  void verify(const std::function<void()>& fn);
  // Names the check that ran and passed, where it is not the full reference
  // (compare() over the whole result names `cpu-reference` by itself).
  void verified(const std::string& method) { method_ = method; }
  // A copy of n elements the computation uses (its pointer .dev), taken on the
  // CPU outside the timed iterations: the state before the last iteration,
  // from which a sampled check recomputes the last one. Counted in verify_ms.
  template <class T>
  std::vector<T> snapshot(const T* p, size_t n);
  // Cells (row * cols + col) of a rows x cols grid that a sampled check
  // recomputes: every cell of the two outermost rows and columns on each
  // side, two wrapped diagonals (so every row and every column has sampled
  // cells), and `random` cells drawn from the seed; sorted, no repeats.
  std::vector<size_t> grid_sample(size_t rows, size_t cols, size_t random = 4096) const;
  // Indices of a vector of n to check: the first and last two, and `random` more from the seed.
  std::vector<size_t> index_sample(size_t n, size_t random) const;

  // `kind` overrides the mode's kind for this array (GEMM placement).
  template <class T>
  Array<T> array(const std::string& name, size_t n, Use use, const std::string& kind = "") {
    Array<T> a;
    a.n = n;
    add(name, n * sizeof(T), use, kind, reinterpret_cast<void**>(&a.host), reinterpret_cast<void**>(&a.dev));
    return a;
  }
  // Working memory only the computation touches.
  template <class T>
  T* scratch(size_t n) {
    return static_cast<T*>(add_scratch(n * sizeof(T)));
  }

  // Runs fn(begin, end) over [0, n) split across the CPU threads.
  void cpu_for(size_t n, const std::function<void(size_t, size_t)>& fn) {
    team_->run([&](int i, int T) {
      size_t lo, hi;
      split_range(n, T, i, lo, hi);
      if (lo < hi) fn(lo, hi);
    });
  }

  // Phases, in this order.
  void init(const std::function<void()>& fn);  // the CPU writes in/inout arrays through .host
  void to_gpu();
  // One timed step of the computation (CUDA events on the GPU, the steady
  // clock on the CPU); checks for a kernel error. Returns milliseconds.
  double iteration(const std::function<void()>& fn);
  void back();  // results to the CPU, then the checksum over out/inout arrays

  // The comparison with the CPU reference: integers exactly, floating point
  // as max |got - want| / max |want| <= tol. Throws VerifyError; records
  // the error.
  template <class T>
  void compare(const std::string& what, const T* got, const T* want, size_t n, double tol = 0);
  // The same comparison for n values given as got(k) and want(k) (doubles), computed by the CPU threads
  // without a copy of either: a whole result checked as it is recomputed, or a sample. tol 0: exact.
  template <class G, class W>
  void compare_each(const std::string& what, size_t n, G got, W want, double tol = 0);
  // Writes an array to --dump DIR as DIR/<name>.<dtype> (raw, native order)
  // for the tests' independent references.
  template <class T>
  void dump(const std::string& name, const T* p, size_t n) const;
  bool dumping() const { return !dump_dir_.empty(); }

  // Frees (timed) and emits the record: phases, per-iteration times, the
  // checksum, and the rate from the work of one iteration (bytes it must move
  // at least, floating-point operations), either may be 0.
  void finish(JsonObject& extra, double bytes_per_iteration, double flops_per_iteration);

  // A grid of `per_sm` x SMs blocks (grid-stride kernels), at least 1.
  unsigned grid(int per_sm = 8) const { return static_cast<unsigned>(sms_ * per_sm); }

 private:
  struct Slot;
  void add(const std::string& name, size_t bytes, Use use, const std::string& kind, void** host, void** dev);
  void* add_scratch(size_t bytes);
  void compared(const std::string& what, double err, double tol);
  void copy_out(void* dst, const void* src, size_t bytes);  // GPU-visible memory to the CPU (synchronises)
  std::string kind_of(Use use) const;

  bool gpu_ = true;
  std::string name_, mode_, dump_dir_;
  int sms_ = 1;
  std::unique_ptr<ThreadTeam> team_;
  std::vector<std::unique_ptr<Slot>> slots_;
  size_t managed_total_ = 0, device_total_ = 0, data_bytes_ = 0;
  size_t use_bytes_[3] = {0, 0, 0};  // bytes declared in, out, inout (the model's access profile)
  std::string arrays_;  // name:use:bytes of each array, comma-separated
  double context_ms_ = 0, alloc_ms_ = 0, init_ms_ = 0, transfer_ms_ = 0, back_ms_ = 0, free_ms_ = 0;
  std::vector<double> iter_ms_;
  std::string checksum_;
  double max_error_ = -1;
  double verify_ms_ = 0;
  std::string method_;  // the check that ran, where not the full reference
  std::unique_ptr<EventClock> clock_;  // times each GPU iteration (timing.hpp)
};

template <class T>
void AppRun::compare(const std::string& what, const T* got, const T* want, size_t n, double tol) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    if (std::is_integral<T>::value && got[i] != want[i])
      throw VerifyError(what + "[" + std::to_string(i) + "] = " + std::to_string(g) + ", the CPU reference has " +
                        std::to_string(w));
    const double d = std::isnan(g) ? INFINITY : std::fabs(g - w);
    worst = std::max(worst, d);
    scale = std::max(scale, std::fabs(w));
  }
  compared(what, scale > 0 ? worst / scale : worst, tol);
}

template <class G, class W>
void AppRun::compare_each(const std::string& what, size_t n, G got, W want, double tol) {
  const int T = team_->size();
  std::vector<double> worst(T, 0), scale(T, 0), gv(T, 0), wv(T, 0);
  std::vector<size_t> at(T, 0);
  team_->run([&](int t, int nt) {
    size_t lo, hi;
    split_range(n, nt, t, lo, hi);
    for (size_t k = lo; k < hi; ++k) {
      const double g = got(k), w = want(k);
      const double d = std::isnan(g) || std::isnan(w) ? INFINITY : std::fabs(g - w);
      if (d > worst[t] || (std::isinf(d) && !std::isinf(worst[t]))) {
        worst[t] = d, at[t] = k, gv[t] = g, wv[t] = w;
      }
      scale[t] = std::max(scale[t], std::fabs(w));
    }
  });
  double err = 0, sc = 0;
  int b = 0;
  for (int t = 0; t < T; ++t) {
    if (worst[t] > err) err = worst[t], b = t;
    sc = std::max(sc, scale[t]);
  }
  if (tol == 0 && err > 0)
    throw VerifyError(what + " (value " + std::to_string(at[b]) + " of " + std::to_string(n) + " checked) = " +
                      std::to_string(gv[b]) + ", the CPU's has " + std::to_string(wv[b]));
  compared(what, sc > 0 ? err / sc : err, tol);
}

template <class T>
std::vector<T> AppRun::snapshot(const T* p, size_t n) {
  const auto t = std::chrono::steady_clock::now();
  std::vector<T> out(n);
  copy_out(out.data(), p, n * sizeof(T));
  verify_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  return out;
}

template <class T>
const char* dtype_name() {
  if (std::is_same<T, float>::value) return "float32";
  if (std::is_same<T, double>::value) return "float64";
  if (std::is_same<T, int32_t>::value) return "int32";
  if (std::is_same<T, int64_t>::value) return "int64";
  if (std::is_same<T, uint8_t>::value) return "uint8";
  return "bytes";
}

template <class T>
void AppRun::dump(const std::string& name, const T* p, size_t n) const {
  if (dump_dir_.empty()) return;
  const std::string path = dump_dir_ + "/" + name + "." + dtype_name<T>();
  std::ofstream f(path, std::ios::binary);
  if (!f) throw UsageError("cannot write '" + path + "'");
  f.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n * sizeof(T)));
}

#ifdef __CUDACC__
// The grid of a column-walking kernel: 256 columns per block, `band` rows per block row.
inline dim3 column_bands(size_t rows, size_t cols, int band, const std::string& app) {
  const dim3 g(static_cast<unsigned>((cols + 255) / 256), static_cast<unsigned>((rows + band - 1) / band));
  if (g.y > 65535) throw UsageError(app + ": at most " + std::to_string(65535L * band) + " rows");
  return g;
}
#endif

}  // namespace umscope
