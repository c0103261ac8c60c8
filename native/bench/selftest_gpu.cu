#include "umscope/errors.hpp"

namespace umscope {
namespace {
__global__ void write_to(double* p) { *p = 1.0; }
}  // namespace

// Writes through a pointer that no allocation backs: the launch completes
// with cudaErrorIllegalAddress, which UM_CUDA turns into a failure.
void selftest_gpu_fault() {
  UM_CUDA(cudaSetDevice(0));
  write_to<<<1, 1>>>(reinterpret_cast<double*>(0x10));
  UM_CUDA(cudaGetLastError());
  UM_CUDA(cudaDeviceSynchronize());
}
}  // namespace umscope
