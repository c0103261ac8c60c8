#include "umscope/world.hpp"

#include <unistd.h>

#include "umscope/errors.hpp"

namespace umscope {

World& world() {
  static World w = [] {
    World x;
    char h[256] = {0};
    if (gethostname(h, sizeof h - 1) == 0) x.host = h;
    x.cuda_aware_why = "a single process: no MPI";
    return x;
  }();
  return w;
}

void world_agree(const std::string& why_not) {
  World& w = world();
  if (w.size == 1 || !w.gather) {
    if (!why_not.empty()) throw Skip(why_not);
    return;
  }
  // Lowest rank with a reason, then its reason to everyone.
  double first = w.max(why_not.empty() ? 0.0 : static_cast<double>(w.size - w.rank));
  if (first == 0.0) return;
  int who = w.size - static_cast<int>(first);
  char buf[1024] = {0};
  if (w.rank == who) why_not.copy(buf, sizeof buf - 1);
  w.bcast(buf, sizeof buf, who);
  throw Skip(std::string(buf) + (w.size > 1 ? " (rank " + std::to_string(who) + ")" : ""));
}

double world_max(double v) { return world().size > 1 && world().max ? world().max(v) : v; }
long long world_sum(long long v) { return world().size > 1 && world().sum ? world().sum(v) : v; }
void world_bcast(void* buf, size_t bytes, int root) {
  if (world().size > 1 && world().bcast) world().bcast(buf, bytes, root);
}
void world_barrier() {
  if (world().size > 1 && world().barrier) world().barrier();
}

}  // namespace umscope
