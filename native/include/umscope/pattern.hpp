// The data every bandwidth benchmark writes and checks: element i of an array
// of doubles holds pattern(i) * mul + add. pattern(i) takes 1021 distinct
// multiples of 0.5, so sums of up to 2^42 elements are exact in double and a
// shifted or unwritten element is caught.
#pragma once
#include <cstddef>

#include "umscope/memory.hpp"

namespace umscope {

#ifdef __CUDACC__
#define UMSCOPE_HOST_DEVICE __host__ __device__
#else
#define UMSCOPE_HOST_DEVICE
#endif

// The host and the GPU kernels (core/pattern.cu) share this one definition.
UMSCOPE_HOST_DEVICE inline double pattern(size_t i) { return static_cast<double>(i % 1021) * 0.5; }
double pattern_sum(size_t n);  // exact sum of pattern(0..n-1)

void cpu_fill_pattern(double* p, size_t n, double mul, double add);
size_t cpu_count_mismatch(const double* p, size_t n, double mul, double add);
// Initializer writing the pattern from whichever processor places the buffer.
Initializer pattern_initializer(double mul = 1, double add = 0);

#ifdef UMSCOPE_HAVE_CUDA
void gpu_fill_pattern(double* p, size_t n, double mul, double add);
size_t gpu_count_mismatch(const double* p, size_t n, double mul, double add);
void gpu_poison(void* p, size_t bytes);  // all-ones bytes: NaN as double
#endif

}  // namespace umscope
