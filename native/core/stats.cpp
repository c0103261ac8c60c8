#include "umscope/stats.hpp"

#include <algorithm>
#include <numeric>

namespace umscope {

Summary summarize(std::vector<double> s) {
  Summary r;
  r.n = static_cast<int>(s.size());
  if (s.empty()) return r;
  std::sort(s.begin(), s.end());
  r.min = s.front();
  r.max = s.back();
  size_t m = s.size() / 2;
  r.median = s.size() % 2 ? s[m] : 0.5 * (s[m - 1] + s[m]);
  r.mean = std::accumulate(s.begin(), s.end(), 0.0) / s.size();
  return r;
}

}  // namespace umscope
