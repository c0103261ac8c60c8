// The CPU stream loops, shared by every benchmark that moves data with CPU
// threads (cpu-stream, the CPU side of contention). Each works on [lo, hi).
#pragma once
#include <cstddef>

namespace umscope {

// Four independent sums so the loads overlap; returns the sum of a[lo..hi).
inline double cpu_read(const double* a, size_t lo, size_t hi) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = lo;
  for (; i + 4 <= hi; i += 4) {
    s0 += a[i];
    s1 += a[i + 1];
    s2 += a[i + 2];
    s3 += a[i + 3];
  }
  for (; i < hi; ++i) s0 += a[i];
  return (s0 + s1) + (s2 + s3);
}

inline void cpu_write(double* b, size_t lo, size_t hi, double v) {
  for (size_t i = lo; i < hi; ++i) b[i] = v;
}

inline void cpu_copy(const double* a, double* b, size_t lo, size_t hi) {
  for (size_t i = lo; i < hi; ++i) b[i] = a[i];
}

}  // namespace umscope
