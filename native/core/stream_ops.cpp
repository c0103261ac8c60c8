// The stream operations' table (traffic.hpp): defined once, in one object, so that every user (the
// benchmarks, the records' traffic and `umbench list --json` for the bounds) reads the same table.
#include "umscope/traffic.hpp"

namespace umscope {

const std::vector<StreamOp>& stream_ops() {
  static const std::vector<StreamOp> t = {
      {"read", 1, 0, "s += a"},
      {"write", 0, 1, "c = v"},
      {"copy", 1, 1, "b = a"},
      {"triad", 2, 1, "c = a + s*b"},
  };
  return t;
}

std::vector<std::string> stream_op_names(size_t count) {
  std::vector<std::string> out;
  for (const StreamOp& o : stream_ops())
    if (count == 0 || out.size() < count) out.push_back(o.name);
  return out;
}

int stream_arrays(const std::string& op) {
  for (const StreamOp& o : stream_ops())
    if (op == o.name) return o.reads + o.writes;
  return 1;
}

}  // namespace umscope
