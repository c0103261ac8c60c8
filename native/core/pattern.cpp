// The data pattern (pattern.hpp) on the host; core/pattern.cu is the GPU side.
#include "umscope/pattern.hpp"

#include <cstring>
#include <vector>

#include "umscope/threads.hpp"

namespace umscope {

// From 64 MiB on, filling and checking run on every allowed CPU (threads.hpp: prepare_on_all_cpus).
constexpr size_t kParallelElements = size_t(8) << 20;

double pattern_sum(size_t n) {
  const size_t period = 1021;
  double per_period = 0;  // 0.5 * (0 + 1 + ... + 1020)
  for (size_t k = 0; k < period; ++k) per_period += 0.5 * k;
  double s = per_period * static_cast<double>(n / period);
  for (size_t k = 0; k < n % period; ++k) s += 0.5 * k;
  return s;
}

void cpu_fill_pattern(double* p, size_t n, double mul, double add) {
  prepare_on_all_cpus(n, kParallelElements, [&](size_t lo, size_t hi, int) {
    for (size_t i = lo; i < hi; ++i) p[i] = pattern(i) * mul + add;
  });
}

size_t cpu_count_mismatch(const double* p, size_t n, double mul, double add) {
  std::vector<size_t> bad(kMaxPrepareParts * 8, 0);  // one count per part, a cache line apart
  prepare_on_all_cpus(n, kParallelElements, [&](size_t lo, size_t hi, int t) {
    size_t k = 0;
    for (size_t i = lo; i < hi; ++i) k += p[i] != pattern(i) * mul + add;
    bad[t * 8] = k;
  });
  size_t total = 0;
  for (size_t i = 0; i < bad.size(); i += 8) total += bad[i];
  return total;
}

Initializer pattern_initializer(double mul, double add) {
  Initializer init;
  init.cpu = [=](void* p, size_t bytes) { cpu_fill_pattern(static_cast<double*>(p), bytes / sizeof(double), mul, add); };
#ifdef UMSCOPE_HAVE_CUDA
  init.gpu = [=](void* p, size_t bytes) { gpu_fill_pattern(static_cast<double*>(p), bytes / sizeof(double), mul, add); };
#endif
  return init;
}

}  // namespace umscope
