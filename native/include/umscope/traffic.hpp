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
const std::vector<StreamOp>& stream_ops();  // the table (native/core/stream_ops.cpp, its one definition)

// The names of the first `count` operations (all by default), in the table's order.
std::vector<std::string> stream_op_names(size_t count = 0);

// Arrays an operation moves (reads + writes); 1 for a name the table lacks.
int stream_arrays(const std::string& op);

// GB/s: 10^9 bytes per second (records never use GiB/s).
inline double gb_per_s(double bytes, double seconds) { return bytes / seconds / 1e9; }

}  // namespace umscope
