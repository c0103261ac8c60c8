// GEMM with cuBLAS (Cooper et al.'s SGEMM; Fusco et al. Figs. 15-16):
// C = A B, row-major, in FP64, FP32, TF32 (FP32 data, tensor-core inputs
// rounded to TF32) or FP16 (FP32 accumulation). Each of A, B and C can be
// placed in any memory kind (--place-a/b/c), the rest follow --mode.
// --variant panels is the memory-capacity-aware SGEMM: C is computed in
// row panels sized so that one panel of A and C plus all of B fit in
// --panel-memory (default half the free GPU memory), so the working set of
// each call fits the GPU when the matrices do not.
//
// cuBLAS is loaded at run time (dlopen), so umbench starts without it and
// the case is skipped, with the reason, where it is missing.
#include <cuda_fp16.h>
#include <algorithm>
#include <string>
#include <dlfcn.h>
#include <unistd.h>

#include "umscope/app.hpp"
#include "umscope/caps.hpp"

#if __has_include(<cublas_api.h>)
#include <cublas_api.h>
#define UMSCOPE_HAVE_CUBLAS_HEADERS 1
#endif

namespace umscope {
namespace {

struct Prec {
  std::string name;
  size_t elem;
};

template <class T>
double to_d(T v) {
  return static_cast<double>(v);
}
template <>
double to_d<__half>(__half v) {
  return __half2float(v);
}
template <class T>
T from_d(double v) {
  return static_cast<T>(v);
}
template <>
__half from_d<__half>(double v) {
  return __float2half(static_cast<float>(v));
}

#ifdef UMSCOPE_HAVE_CUBLAS_HEADERS
struct Blas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  cublasStatus_t (*gemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
                         cudaDataType, int, const void*, cudaDataType, int, const void*, void*, cudaDataType, int,
                         cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  cublasHandle_t h = nullptr;
  Blas() {
    void* lib = nullptr;
    std::string tried;
    // $UMSCOPE_CUBLAS, NVIDIA's wheel beside the installed package (umscope/bin/umbench ->
    // nvidia/cu13/lib, from pip install 'umscope[cuda]'), the loader's search, then the toolkit.
    const char* home = std::getenv("CUDA_HOME");
    const char* chosen = std::getenv("UMSCOPE_CUBLAS");
    std::vector<std::string> names;
    if (chosen && *chosen) names.push_back(chosen);
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
      std::string dir(exe, static_cast<size_t>(n));
      dir = dir.substr(0, dir.rfind('/'));
      names.push_back(dir + "/../../nvidia/cu13/lib/libcublas.so.13");
    }
    for (const char* nm : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) names.push_back(nm);
    if (home) names.push_back(std::string(home) + "/lib64/libcublas.so");
    names.push_back("/usr/local/cuda/lib64/libcublas.so");
    for (const std::string& nm : names) {
      lib = dlopen(nm.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (lib) break;
      tried += (tried.empty() ? "" : ", ") + nm;
    }
    if (!lib) throw Skip("cuBLAS could not be loaded (tried " + tried + ")");
    create = reinterpret_cast<decltype(create)>(dlsym(lib, "cublasCreate_v2"));
    destroy = reinterpret_cast<decltype(destroy)>(dlsym(lib, "cublasDestroy_v2"));
    gemm = reinterpret_cast<decltype(gemm)>(dlsym(lib, "cublasGemmEx"));
    if (!create || !destroy || !gemm) throw Skip("the cuBLAS found lacks cublasGemmEx");
    if (create(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
  }
  ~Blas() {
    if (h) destroy(h);
  }
};

// Row-major C (rows x n) = A (rows x k) B (k x n): column-major C^T = B^T A^T.
void gemm_call(Blas& b, const std::string& prec, size_t rows, size_t n, size_t k, const void* A, const void* B, void* C) {
  const double one64 = 1, zero64 = 0;
  const float one32 = 1, zero32 = 0;
  cudaDataType t = CUDA_R_32F;
  cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
  const void *alpha = &one32, *beta = &zero32;
  if (prec == "fp64") {
    t = CUDA_R_64F;
    ct = CUBLAS_COMPUTE_64F;
    alpha = &one64;
    beta = &zero64;
  } else if (prec == "tf32") {
    ct = CUBLAS_COMPUTE_32F_FAST_TF32;
  } else if (prec == "fp16") {
    t = CUDA_R_16F;
  }
  cublasStatus_t st = b.gemm(b.h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(rows),
                             static_cast<int>(k), alpha, B, t, static_cast<int>(n), A, t, static_cast<int>(k), beta, C,
                             t, static_cast<int>(n), ct, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasGemmEx failed with status " + std::to_string(st));
}
#endif

#ifdef UMSCOPE_HAVE_CUBLAS_HEADERS
// cuBLAS's first GemmEx of a precision in a process loads its kernels and sets up its heuristics: 85 ms on an H200
// and 130-165 ms on an H100 (advise_validate's raw runs: explicit gemm's first iteration at a 16 MiB footprint,
// then 0.1 ms per iteration). Paid inside a timed iteration by whichever mode ran first in the process (explicit,
// in `--mode all`), it made that mode look 5-30x slower than the others. One untimed call of the run's own shape
// (on scratch GPU memory; a smaller square where that would not fit in an eighth of the free memory), before any
// phase is timed, gives every mode a warmed library; a user's program pays this once, whichever memory it uses.
// Made for every run (each has its own handle), not once per process: a handle's own first call is then never
// timed either.
template <class T>
void warm_blas(Blas& b, const std::string& prec, size_t m, size_t n, size_t k, int device) {
  const size_t free_mem = gpu_caps(device).free_mem;
  if ((m * k + k * n + m * n) * sizeof(T) > free_mem / 8) m = n = k = std::min<size_t>({m, n, k, 1024});
  void *a = nullptr, *bb = nullptr, *c = nullptr;
  UM_CUDA(cudaMalloc(&a, m * k * sizeof(T)));
  UM_CUDA(cudaMalloc(&bb, k * n * sizeof(T)));
  UM_CUDA(cudaMalloc(&c, m * n * sizeof(T)));
  UM_CUDA(cudaMemset(a, 0, m * k * sizeof(T)));
  UM_CUDA(cudaMemset(bb, 0, k * n * sizeof(T)));
  gemm_call(b, prec, m, n, k, a, bb, c);
  UM_CUDA(cudaDeviceSynchronize());
  UM_CUDA(cudaFree(a));
  UM_CUDA(cudaFree(bb));
  UM_CUDA(cudaFree(c));
}
#endif

template <class T>
void gemm_cpu(AppRun& run, const T* A, const T* B, T* C, size_t m, size_t n, size_t k) {
  run.cpu_for(m, [&](size_t lo, size_t hi) {
    std::vector<double> row(n);
    for (size_t i = lo; i < hi; ++i) {
      std::fill(row.begin(), row.end(), 0.0);
      for (size_t p = 0; p < k; ++p) {
        const double a = to_d(A[i * k + p]);
        for (size_t j = 0; j < n; ++j) row[j] += a * to_d(B[p * n + j]);
      }
      for (size_t j = 0; j < n; ++j) C[i * n + j] = from_d<T>(row[j]);
    }
  });
}

template <class T>
void run_typed(Context& ctx, AppRun& run, const std::string& prec) {
  const uint64_t seed = run.seed();
  const int iters = run.iterations(5);
  const std::string variant = ctx.args.choices("variant", "cublas", {"cublas", "panels"})[0];
  const size_t n = run.square_dim(size_t(1) << 30, 3 * sizeof(T));
  const size_t m = static_cast<size_t>(ctx.args.integer("m", static_cast<long long>(n)));
  const size_t k = static_cast<size_t>(ctx.args.integer("k", static_cast<long long>(n)));
  if (m < 1 || n < 1 || k < 1) throw UsageError("gemm needs m, n, k >= 1");
  if (m > (1u << 31) - 1 || n > (1u << 31) - 1 || k > (1u << 31) - 1) throw UsageError("gemm dimensions must be < 2^31");
#ifdef UMSCOPE_HAVE_CUBLAS_HEADERS
  std::unique_ptr<Blas> blas;
  if (run.gpu()) {
    blas.reset(new Blas());
    warm_blas<T>(*blas, prec, m, n, k, ctx.device);
  }
#else
  if (run.gpu()) throw Skip("umbench was built without the cuBLAS headers");
#endif
  auto A = run.array<T>("A", m * k, Use::in, ctx.args.str("place-a", ""));
  auto B = run.array<T>("B", k * n, Use::in, ctx.args.str("place-b", ""));
  auto C = run.array<T>("C", m * n, Use::out, ctx.args.str("place-c", ""));
  auto gen = [&](T* a, T* b) {
    run.cpu_for(m, [&](size_t lo, size_t hi) {
      for (size_t i = lo * k; i < hi * k; ++i) a[i] = from_d<T>(uniform01(seed, i) - 0.5);
    });
    run.cpu_for(k, [&](size_t lo, size_t hi) {
      for (size_t i = lo * n; i < hi * n; ++i) b[i] = from_d<T>(uniform01(seed + 1, i) - 0.5);
    });
  };
  run.init([&] { gen(A.host, B.host); });
  run.to_gpu();
  size_t panel = m;
  if (variant == "panels") {
    const size_t budget = ctx.args.bytes("panel-memory", run.gpu() ? gpu_caps(ctx.device).free_mem / 2 : (size_t(1) << 30));
    const double left = double(budget) - double(k) * n * sizeof(T);
    if (left < double(k + n) * sizeof(T))
      throw UsageError("--panel-memory " + gib_text(budget) + " does not hold B and one row of A and C");
    panel = std::max<size_t>(1, std::min<size_t>(m, static_cast<size_t>(left / (double(k + n) * sizeof(T)))));
  }
  for (int it = 0; it < iters; ++it)
    run.iteration([&] {
      for (size_t r0 = 0; r0 < m; r0 += panel) {
        const size_t rows = std::min(panel, m - r0);
        if (run.gpu()) {
#ifdef UMSCOPE_HAVE_CUBLAS_HEADERS
          gemm_call(*blas, prec, rows, n, k, A.dev + r0 * k, B.dev, C.dev + r0 * n);
#endif
        } else {
          gemm_cpu(run, A.dev + r0 * k, B.dev, C.dev + r0 * n, rows, n, k);
        }
      }
    });
  run.back();
  run.verify([&] {
    std::vector<T> a(m * k), b(k * n);
    gen(a.data(), b.data());
    const double tol = prec == "fp64" ? 1e-12 : prec == "fp32" ? 1e-5 : prec == "tf32" ? 3e-3 : 1e-2;
    std::vector<T> bt(k * n);  // B's columns as rows
    run.cpu_for(n, [&](size_t lo, size_t hi) {
      for (size_t j = lo; j < hi; ++j)
        for (size_t p = 0; p < k; ++p) bt[j * k + p] = b[p * n + j];
    });
    // The reference's element C(i, j), a second implementation on purpose (not gemm_cpu(), the CPU path): row i
    // of A times column j of B, in double.
    auto element = [&](size_t i, size_t j) {
      double s = 0;
      for (size_t p = 0; p < k; ++p) s += to_d(a[i * k + p]) * to_d(bt[j * k + p]);
      return s;
    };
    if (run.check(2.0 * m * n * k)) {  // each of m x n elements: a dot product of k
      run.compare_each("C", m * n, [&](size_t q) { return to_d(C.host[q]); },
                       [&](size_t q) { return element(q / n, q % n); }, tol);
      return;
    }
    // Larger: Freivalds' check of every element at once (C r against A (B r) for random +-1 vectors r, each
    // row of C within the same tolerance as the full reference), and sampled elements recomputed in full.
    const int kVectors = 2;
    for (int v = 0; v < kVectors; ++v) {
      std::vector<double> r(n), br(k);
      for (size_t j = 0; j < n; ++j) r[j] = (mix64(seed * 977 + v * 0x9e37 + j) & 1) ? 1.0 : -1.0;
      run.cpu_for(k, [&](size_t lo, size_t hi) {
        for (size_t p = lo; p < hi; ++p) {
          double s = 0;
          for (size_t j = 0; j < n; ++j) s += to_d(b[p * n + j]) * r[j];
          br[p] = s;
        }
      });
      run.compare_each("C r (Freivalds)", m, [&](size_t i) {
        double s = 0;
        for (size_t j = 0; j < n; ++j) s += to_d(C.host[i * n + j]) * r[j];
        return s;
      }, [&](size_t i) {
        double s = 0;
        for (size_t p = 0; p < k; ++p) s += to_d(a[i * k + p]) * br[p];
        return s;
      }, tol);
    }
    const std::vector<size_t> at = run.grid_sample(m, n);
    run.compare_each("C (sampled)", at.size(), [&](size_t q) { return to_d(C.host[at[q]]); },
                     [&](size_t q) { return element(at[q] / n, at[q] % n); }, tol);
    run.verified("freivalds:" + std::to_string(kVectors) + "+cpu-sample:" + std::to_string(at.size()));
  });
  if (run.dumping() && !std::is_same<T, __half>::value) {
    run.dump("A", A.host, m * k);
    run.dump("B", B.host, k * n);
    run.dump("C", C.host, m * n);
  }
  JsonObject extra;
  extra.set("precision", prec).set("variant", variant);
  extra.set("m", static_cast<unsigned long long>(m)).set("n_cols", static_cast<unsigned long long>(n));
  extra.set("k", static_cast<unsigned long long>(k));
  if (variant == "panels") extra.set("panel_rows", static_cast<unsigned long long>(panel));
  const std::string pa = ctx.args.str("place-a", ""), pb = ctx.args.str("place-b", ""), pc = ctx.args.str("place-c", "");
  extra.set("place_a", pa.empty() ? "mode" : pa).set("place_b", pb.empty() ? "mode" : pb);
  extra.set("place_c", pc.empty() ? "mode" : pc);
  // What crosses the link when the matrices are remote (pinned, registered), a traffic model measured with
  // the GPU's counters (bench/model_linkbytes.py, H100, fp32, 3344 x 3344, docs/model-validation.md):
  // cuBLAS runs sm80_xmma_gemm_f32f32_..._tilesize256x128x8_..._aligna4 (the profiler's kernel name), C'
  // = B'A' in cuBLAS's column-major terms (the call below) in tiles of 256 (along n) x 128 (along m): A
  // is read once per tile of 256 columns of C, B once per tile of 128 rows; C written once (beta = 0).
  // The counters: L2 sysmem read sectors = exactly that (41 x 44.7 MB per call), writes = C.
  const double reads = (double(m * k) * double((n + 255) / 256) + double(k * n) * double((m + 127) / 128)) * sizeof(T);
  extra.set("link_read_bytes", reads).set("link_write_bytes", double(m * n) * sizeof(T));
  // Those reads cross as small requests, each costing what a random remote load costs: the counters give
  // 45.0 M read requests per call (the PCIe bytes in beyond the sectors read, 12 bytes of completion
  // header each; the request headers the GPU sends, 16 bytes each, give the same count): one per 40.7
  // bytes read, where a streaming kernel sends one per 256. The calibrated model prices each request at
  // the rate of random 8-byte loads of pinned memory (gpu-stream gather: one request each), as link_runs.
  extra.set("link_runs", reads / 40.7);
  // The least a GEMM moves: A and B read once, C written once.
  run.finish(extra, double(m * k + k * n + m * n) * sizeof(T), 2.0 * m * n * k);
}

// Declared for gemm alone (umbench list --json); the run reads the same choices.
const OptionInfo kPrecision{"precision", "choice", "fp32", "gemm: fp64, fp32, tf32, fp16", {"fp64", "fp32", "tf32", "fp16"}};

void run_gemm(Context& ctx) {
  AppRun run(ctx, "gemm");
  const std::string prec = ctx.args.choices("precision", kPrecision.dflt, kPrecision.choices)[0];
  if (prec == "fp64") run_typed<double>(ctx, run, prec);
  else if (prec == "fp16") run_typed<__half>(ctx, run, prec);
  else run_typed<float>(ctx, run, prec);
}

AppRegistrar reg({"gemm", "gpu|cpu",
                    "cuBLAS GEMM in fp64/fp32/tf32/fp16 with each matrix placed in any kind (--place-a/b/c)",
                    {"app"},
                    app_params({"n", "m", "k", "seed", "iterations", "precision", "variant", "panel-memory", "place-a",
                                "place-b", "place-c"}),
                    run_gemm,
                    {kPrecision}},
                 // Model facts: reads A and B, writes C (three n x n matrices): 2/3 read, 1/3 written. umsim replays
                 // the application's default iterations (5; in no study's sweep).
                 {"dense compute", "gemm", 5, 2.0 / 3, 1.0 / 3});

}  // namespace
}  // namespace umscope
