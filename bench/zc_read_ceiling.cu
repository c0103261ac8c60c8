// What an SM-issued read of pinned host memory reaches over the link on this machine, against the copy
// engine: the ceiling a zero-copy decode (weights in host memory, read in place by the GPU's kernels) can
// reach. bench/llm.py's host-placed rows compare with it. One buffer of pinned host memory is read whole,
// per variant: plain loads of 4/8/16 bytes with 1..16 independent loads in flight per thread and grids of
// 1..8 CTAs per SM; the same with the L2 256-byte prefetch hint; TMA bulk copies (cp.async.bulk) into
// shared memory in chunks of 4..64 KiB with 2..4 stages; and the copy engine (cudaMemcpyAsync to device
// memory). Host memory kinds: cudaHostAlloc (default, and write-combined) and cudaHostRegister of
// malloc'd memory with transparent huge pages asked for. Timed with CUDA events, one untimed pass, then
// the median of --reps passes; JSON lines on stdout, one per variant: {"variant", "gbps", ...}.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o zc_read_ceiling bench/zc_read_ceiling.cu
//   ./zc_read_ceiling [--mib 512] [--reps 5] [--only plain,tma,ce,l2hint,kinds]
#include <cuda.h>
#include <cuda/barrier>
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "zc_read_ceiling: %s: %s\n", #x, cudaGetErrorString(e_));           \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

template <typename V>
__device__ __forceinline__ unsigned fold(const V& v) {
  const unsigned* w = reinterpret_cast<const unsigned*>(&v);
  unsigned s = 0;
#pragma unroll
  for (int i = 0; i < int(sizeof(V) / 4); ++i) s ^= w[i];
  return s;
}

// One load of a[i]: plain, or (Hint, 16-byte elements) with the L2 prefetch-size hint (ld.global.nc.L2::256B: L2
// may fetch 256 B per miss).
template <typename V, bool Hint>
__device__ __forceinline__ V load(const V* __restrict__ a, size_t i) {
  if constexpr (Hint) {
    static_assert(sizeof(V) == 16, "the L2::256B hint is read with 16-byte loads");
    V x;
    unsigned* w = reinterpret_cast<unsigned*>(&x);
    asm volatile("ld.global.nc.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "l"(a + i));
    return x;
  } else {
    return a[i];
  }
}

// Element type V, U independent loads in flight per thread (grid-stride over U * stride), each plain or hinted.
template <typename V, int U, bool Hint = false>
__global__ void read_plain(const V* __restrict__ a, size_t n, unsigned* out) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  unsigned s = 0;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    V x[U];
#pragma unroll
    for (int u = 0; u < U; ++u) x[u] = load<V, Hint>(a, i + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u) s ^= fold(x[u]);
  }
  for (; i < n; i += stride) s ^= fold(load<V, Hint>(a, i));
  if (s == 0x9e3779b9u) atomicAdd(out, 1u);  // keeps the loads; practically never taken
}

// TMA bulk copies (cp.async.bulk through cuda::memcpy_async with a block barrier in shared memory, 16-byte
// aligned sizes), `stages` chunks of `chunk` bytes in flight per CTA; chunks dealt to CTAs round robin.
__global__ void read_tma(const char* __restrict__ a, size_t nchunks, int chunk, int stages, unsigned* out) {
  using barrier = cuda::barrier<cuda::thread_scope_block>;
  extern __shared__ __align__(128) char smem[];
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ barrier bar[4];
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) init(&bar[s], blockDim.x);
  }
  __syncthreads();
  auto chunk_of = [&](size_t j) { return blockIdx.x + j * gridDim.x; };
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s)
      if (chunk_of(s) < nchunks)
        cuda::memcpy_async(smem + size_t(s) * chunk, a + chunk_of(s) * chunk, cuda::aligned_size_t<16>(chunk),
                           bar[s]);
  }
  unsigned acc = 0;
  for (size_t j = 0; chunk_of(j) < nchunks; ++j) {
    const int s = int(j % stages);
    barrier::arrival_token t = bar[s].arrive();
    bar[s].wait(std::move(t));
    acc ^= reinterpret_cast<const unsigned*>(smem + size_t(s) * chunk)[threadIdx.x % (chunk / 4)];
    __syncthreads();
    if (threadIdx.x == 0 && chunk_of(j + stages) < nchunks)
      cuda::memcpy_async(smem + size_t(s) * chunk, a + chunk_of(j + stages) * chunk,
                         cuda::aligned_size_t<16>(chunk), bar[s]);
  }
  if (acc == 0x9e3779b9u) atomicAdd(out, 1u);
}

struct Opts {
  size_t bytes = size_t(512) << 20;
  int reps = 5;
  std::string only = "plain,l2hint,tma,ce,kinds";
};

// GB/s (1e9 B/s) of `bytes` per call of f: one untimed call, then the median of reps.
static double time_gbps(const std::function<void()>& f, size_t bytes, int reps, double* spread) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  f();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<double> g;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    g.push_back(bytes / (ms * 1e-3) / 1e9);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(g.begin(), g.end());
  *spread = (g.back() - g.front()) / g[g.size() / 2];
  return g[g.size() / 2];
}

static void emit(const char* memory, const std::string& variant, double gbps, double spread, size_t bytes,
                 int grid, int block, int reps) {
  std::printf("{\"memory\": \"%s\", \"variant\": \"%s\", \"gbps\": %.2f, \"spread\": %.4f, \"bytes\": %zu, "
              "\"grid\": %d, \"block\": %d, \"reps\": %d}\n",
              memory, variant.c_str(), gbps, spread, bytes, grid, block, reps);
  std::fflush(stdout);
}

template <typename V, int U>
static void plain(const char* mem, const void* p, size_t bytes, int sms, int ctas_per_sm, int block, int reps,
                  unsigned* out) {
  const size_t n = bytes / sizeof(V);
  const int grid = sms * ctas_per_sm;
  double sp;
  double g = time_gbps([&] { read_plain<V, U><<<grid, block>>>(static_cast<const V*>(p), n, out); }, bytes, reps, &sp);
  emit(mem, "ld" + std::to_string(sizeof(V)) + "B x" + std::to_string(U) + " in flight, " +
                std::to_string(ctas_per_sm) + " CTA/SM x " + std::to_string(block),
       g, sp, bytes, grid, block, reps);
}

static void run_all(const char* mem, const void* p, size_t bytes, const Opts& o, int sms, bool full) {
  unsigned* out;
  CK(cudaMalloc(&out, sizeof(unsigned)));
  auto want = [&](const char* k) { return o.only.find(k) != std::string::npos; };
  if (want("plain")) {
    plain<uint4, 4>(mem, p, bytes, sms, 2, 1024, o.reps, out);  // umbench gpu-stream's shape (16 B x 4)
    if (full) {
      plain<unsigned, 4>(mem, p, bytes, sms, 2, 1024, o.reps, out);
      plain<uint2, 4>(mem, p, bytes, sms, 2, 1024, o.reps, out);
      plain<uint4, 1>(mem, p, bytes, sms, 2, 1024, o.reps, out);
      plain<uint4, 2>(mem, p, bytes, sms, 2, 1024, o.reps, out);
      plain<uint4, 8>(mem, p, bytes, sms, 2, 1024, o.reps, out);
      plain<uint4, 16>(mem, p, bytes, sms, 2, 512, o.reps, out);
      plain<uint4, 8>(mem, p, bytes, sms, 1, 256, o.reps, out);
      plain<uint4, 8>(mem, p, bytes, sms, 4, 256, o.reps, out);
      plain<uint4, 8>(mem, p, bytes, sms, 8, 256, o.reps, out);
      plain<uint4, 4>(mem, p, bytes, sms / 2, 2, 1024, o.reps, out);  // half the SMs
      plain<uint4, 4>(mem, p, bytes, sms / 4, 2, 1024, o.reps, out);  // a quarter
    }
  }
  if (want("l2hint")) {
    double sp;
    const size_t n = bytes / 16;
    const int grid = sms * 2;
    double g = time_gbps([&] { read_plain<uint4, 4, true><<<grid, 1024>>>(static_cast<const uint4*>(p), n, out); }, bytes,
                         o.reps, &sp);
    emit(mem, "ld16B.nc.L2::256B x4 in flight, 2 CTA/SM x 1024", g, sp, bytes, grid, 1024, o.reps);
  }
  if (want("tma")) {
    CK(cudaFuncSetAttribute(read_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    struct T { int chunk, stages, per_sm; };
    std::vector<T> ts = full ? std::vector<T>{{4096, 4, 2}, {16384, 2, 2}, {16384, 4, 2}, {65536, 2, 1},
                                              {32768, 4, 1}, {16384, 4, 4}}
                             : std::vector<T>{{16384, 4, 2}};
    for (const T& t : ts) {
      const size_t nchunks = bytes / t.chunk;
      const int grid = sms * t.per_sm;
      const size_t sh = size_t(t.chunk) * t.stages;
      double sp;
      double g = time_gbps([&] { read_tma<<<grid, 128, sh>>>(static_cast<const char*>(p), nchunks, t.chunk, t.stages,
                                                              out); }, bytes, o.reps, &sp);
      emit(mem, "tma bulk " + std::to_string(t.chunk / 1024) + " KiB x " + std::to_string(t.stages) + " stages, " +
                    std::to_string(t.per_sm) + " CTA/SM",
           g, sp, bytes, grid, 128, o.reps);
    }
  }
  if (want("ce")) {
    void* d;
    CK(cudaMalloc(&d, bytes));
    double sp;
    double g = time_gbps([&] { CK(cudaMemcpyAsync(d, p, bytes, cudaMemcpyHostToDevice)); }, bytes, o.reps, &sp);
    emit(mem, "copy engine H2D (cudaMemcpyAsync to device memory)", g, sp, bytes, 0, 0, o.reps);
    CK(cudaFree(d));
  }
  CK(cudaFree(out));
}

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc) o.bytes = size_t(std::atol(argv[++i])) << 20;
    else if (a == "--reps" && i + 1 < argc) o.reps = std::atoi(argv[++i]);
    else if (a == "--only" && i + 1 < argc) o.only = argv[++i];
    else {
      std::fprintf(stderr, "zc_read_ceiling: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (o.bytes < (size_t(64) << 20) || o.reps < 1) {
    std::fprintf(stderr, "zc_read_ceiling: --mib must be at least 64 and --reps at least 1\n");
    return 2;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("{\"device\": \"%s\", \"sms\": %d, \"pci_bus\": %d}\n", prop.name, sms, prop.pciBusID);
  void* h = nullptr;
  CK(cudaHostAlloc(&h, o.bytes, cudaHostAllocMapped));
  std::memset(h, 1, o.bytes);
  run_all("pinned (cudaHostAlloc)", h, o.bytes, o, sms, true);
  CK(cudaFreeHost(h));
  if (o.only.find("kinds") != std::string::npos) {
    CK(cudaHostAlloc(&h, o.bytes, cudaHostAllocMapped | cudaHostAllocWriteCombined));
    std::memset(h, 1, o.bytes);
    run_all("pinned write-combined (cudaHostAllocWriteCombined)", h, o.bytes, o, sms, false);
    CK(cudaFreeHost(h));
    void* m = nullptr;
    if (posix_memalign(&m, size_t(2) << 20, o.bytes) == 0) {
      madvise(m, o.bytes, MADV_HUGEPAGE);
      std::memset(m, 1, o.bytes);
      CK(cudaHostRegister(m, o.bytes, cudaHostRegisterMapped));
      void* dp = nullptr;
      CK(cudaHostGetDevicePointer(&dp, m, 0));
      run_all("registered, transparent huge pages asked (cudaHostRegister)", dp, o.bytes, o, sms, false);
      CK(cudaHostUnregister(m));
      std::free(m);
    }
  }
  return 0;
}
