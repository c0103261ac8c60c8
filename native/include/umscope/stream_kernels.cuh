// The GPU stream kernels, one per operation, shared by every benchmark that
// moves data with SMs (gpu-stream, the SM-copy of the copy matrix).
// 16-byte accesses, several independent loads in flight per thread.
#pragma once
#include <algorithm>
#include "umscope/bench.hpp"
#include "umscope/caps.hpp"
#include "umscope/errors.hpp"

namespace umscope {
namespace {

__device__ __forceinline__ double2 fma2(double2 a, double s, double2 b) {
  return make_double2(a.x + s * b.x, a.y + s * b.y);
}

__global__ void read_kernel(const double2* __restrict__ a, size_t n, double* out) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    double2 x0 = a[i], x1 = a[i + stride], x2 = a[i + 2 * stride], x3 = a[i + 3 * stride];
    s0 += x0.x + x0.y;
    s1 += x1.x + x1.y;
    s2 += x2.x + x2.y;
    s3 += x3.x + x3.y;
  }
  for (; i < n; i += stride) s0 += a[i].x + a[i].y;
  double s = (s0 + s1) + (s2 + s3);
  for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}

__global__ void write_kernel(double2* __restrict__ c, size_t n, double v) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const double2 w = make_double2(v, v);
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    c[i] = w;
    c[i + stride] = w;
    c[i + 2 * stride] = w;
    c[i + 3 * stride] = w;
  }
  for (; i < n; i += stride) c[i] = w;
}

__global__ void copy_kernel(const double2* __restrict__ a, double2* __restrict__ b, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    double2 x0 = a[i], x1 = a[i + stride], x2 = a[i + 2 * stride], x3 = a[i + 3 * stride];
    b[i] = x0;
    b[i + stride] = x1;
    b[i + 2 * stride] = x2;
    b[i + 3 * stride] = x3;
  }
  for (; i < n; i += stride) b[i] = a[i];
}

// c = a + s * b
__global__ void triad_kernel(const double2* __restrict__ a, const double2* __restrict__ b,
                             double2* __restrict__ c, size_t n, double s) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (; i + 1 * stride < n; i += 2 * stride) {
    double2 a0 = a[i], a1 = a[i + stride], b0 = b[i], b1 = b[i + stride];
    c[i] = fma2(a0, s, b0);
    c[i + stride] = fma2(a1, s, b1);
  }
  for (; i < n; i += stride) c[i] = fma2(a[i], s, b[i]);
}

struct Launch {
  int grid, block;
};

// The block size (--block, default 1024) and a grid of blocks (--blocks).
// Without `elements`, the grid is the occupancy API's resident blocks (a
// persistent grid-stride loop, used where a kernel runs beside other work).
// With `elements`, one element per thread: on an H100 at 2 GiB arrays that
// gave copy 3051 / triad 3063 / write 3275 GB/s against 2830 / 2887 / 3200
// for the resident grid (docs/method.md, "Bandwidth kernels").
template <class K>
Launch launch_for(K kernel, const Context& ctx, size_t elements = 0) {
  const GpuCaps& caps = gpu_caps(ctx.device);
  int block = static_cast<int>(ctx.args.integer("block", 1024));
  if (block < 32 || block > caps.max_threads_per_block || block % 32)
    throw UsageError("--block must be a multiple of 32 up to " + std::to_string(caps.max_threads_per_block));
  long long dflt;
  if (elements) {
    dflt = static_cast<long long>(std::min<size_t>((elements + block - 1) / block, size_t(1) << 30));
  } else {
    int per_sm = 0;
    UM_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, 0));
    dflt = static_cast<long long>(per_sm) * caps.sms;
  }
  long long grid = ctx.args.integer("blocks", dflt);
  if (grid < 1 || grid > (1LL << 31) - 1) throw UsageError("--blocks must be from 1 to 2^31-1");
  return {static_cast<int>(grid), block};
}

}  // namespace
}  // namespace umscope
