// The data pattern (pattern.hpp) on the GPU: fill, check and poison kernels; core/pattern.cpp is the host side.
#include "umscope/errors.hpp"
#include "umscope/pattern.hpp"

namespace umscope {

namespace {
__global__ void fill_kernel(double* p, size_t n, double mul, double add) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = pattern(i) * mul + add;
}

__global__ void mismatch_kernel(const double* p, size_t n, double mul, double add, unsigned long long* bad) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    mine += p[i] != pattern(i) * mul + add;
  if (mine) atomicAdd(bad, mine);
}

int grid_for(size_t n) {
  size_t blocks = (n + 255) / 256;
  return static_cast<int>(blocks < 65536 ? blocks : 65536);
}
}  // namespace

void gpu_fill_pattern(double* p, size_t n, double mul, double add) {
  fill_kernel<<<grid_for(n), 256>>>(p, n, mul, add);
  UM_CUDA(cudaGetLastError());
  UM_CUDA(cudaDeviceSynchronize());
}

size_t gpu_count_mismatch(const double* p, size_t n, double mul, double add) {
  unsigned long long* bad = nullptr;
  UM_CUDA(cudaMalloc(&bad, sizeof *bad));
  UM_CUDA(cudaMemset(bad, 0, sizeof *bad));
  mismatch_kernel<<<grid_for(n), 256>>>(p, n, mul, add, bad);
  UM_CUDA(cudaGetLastError());
  unsigned long long h = 0;
  UM_CUDA(cudaMemcpy(&h, bad, sizeof h, cudaMemcpyDeviceToHost));
  UM_CUDA(cudaFree(bad));
  return static_cast<size_t>(h);
}

void gpu_poison(void* p, size_t bytes) {
  UM_CUDA(cudaMemset(p, 0xFF, bytes));
  UM_CUDA(cudaDeviceSynchronize());
}

}  // namespace umscope
