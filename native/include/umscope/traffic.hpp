// The arithmetic every bandwidth record shares, in one place: how many arrays
// of the operation's size a stream operation moves, and the rate unit.
#pragma once
#include <string>
#include <vector>

namespace umscope {

// The stream operations, each with the arrays it reads and writes once per
// element: the one statement of their traffic. The kernels' benchmarks take
// their --ops from it, every bandwidth record counts its bytes with it, and
// `umbench list --json` exports it for the bounds (python/umscope/model/bounds.py).
struct StreamOp {
  const char* name;
  int reads, writes;
  const char* formula;
};
inline const std::vector<StreamOp>& stream_ops() {
  static const std::vector<StreamOp> t = {
      {"read", 1, 0, "s += a"},
      {"write", 0, 1, "c = v"},
      {"copy", 1, 1, "b = a"},
      {"triad", 2, 1, "c = a + s*b"},
  };
  return t;
}

// The names of the first `count` operations (all by default), in the table's order.
inline std::vector<std::string> stream_op_names(size_t count = 0) {
  std::vector<std::string> out;
  for (const StreamOp& o : stream_ops())
    if (count == 0 || out.size() < count) out.push_back(o.name);
  return out;
}

// Arrays an operation moves (reads + writes); 1 for a name the table lacks.
inline int stream_arrays(const std::string& op) {
  for (const StreamOp& o : stream_ops())
    if (op == o.name) return o.reads + o.writes;
  return 1;
}

// GB/s: 10^9 bytes per second (records never use GiB/s).
inline double gb_per_s(double bytes, double seconds) { return bytes / seconds / 1e9; }

}  // namespace umscope
