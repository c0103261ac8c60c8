// The data pattern (pattern.hpp) on the host; core/pattern.cu is the GPU side.
#include "umscope/pattern.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "umscope/os.hpp"
#include "umscope/threads.hpp"

namespace umscope {

namespace {

// Filling and checking a large host array is untimed preparation, but on one thread it took about a second
// per GiB on the H100 host (a third of a 1 GiB managed gpu-stream case, a quarter of a CPU-stream case): from
// 64 MiB on, every CPU the process may use takes a contiguous share. The pages are first touched by the
// process's own CPUs under its own memory policy (placement.hpp binds it to the GPU's NUMA node), as before.
constexpr size_t kParallelElements = size_t(8) << 20;

template <class Body>  // body(lo, hi, part) over [0, n)
void over_cpus(size_t n, int parts_max, Body&& body) {
  const int cpus = static_cast<int>(os::allowed_cpus().size());
  if (n < kParallelElements || cpus < 2) {
    body(size_t(0), n, 0);
    return;
  }
  ThreadTeam team(std::min(cpus, parts_max));
  team.run([&](int t, int T) {
    size_t lo, hi;
    split_range(n, T, t, lo, hi);
    body(lo, hi, t);
  });
}

}  // namespace

double pattern_sum(size_t n) {
  const size_t period = 1021;
  double per_period = 0;  // 0.5 * (0 + 1 + ... + 1020)
  for (size_t k = 0; k < period; ++k) per_period += 0.5 * k;
  double s = per_period * static_cast<double>(n / period);
  for (size_t k = 0; k < n % period; ++k) s += 0.5 * k;
  return s;
}

void cpu_fill_pattern(double* p, size_t n, double mul, double add) {
  over_cpus(n, 1 << 20, [&](size_t lo, size_t hi, int) {
    for (size_t i = lo; i < hi; ++i) p[i] = pattern(i) * mul + add;
  });
}

size_t cpu_count_mismatch(const double* p, size_t n, double mul, double add) {
  std::vector<size_t> bad(256 * 8, 0);  // one count per part, a cache line apart
  over_cpus(n, 256, [&](size_t lo, size_t hi, int t) {
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
