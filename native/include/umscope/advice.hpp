// The managed kind's cudaMemAdvise hints (policy advise=..., several joined with '+'), one table for the kind
// registry (kinds.cpp), the buffers that apply them (buffer.cpp, runtime API) and `place --managed` inside
// another program (profiler/managed_apply.cpp, driver API). Header-only: libumtrace builds it without the
// rest of umbench.
#pragma once
#include <string>
#include <vector>

namespace umscope {

struct Advice {
  enum What { preferred, accessed_by, read_mostly } what;
  bool gpu;  // the location the hint names: the GPU, else the host (read_mostly names none: true)
};

struct AdviceName {
  const char* name;
  Advice advice;
};

inline const std::vector<AdviceName>& advice_names() {
  static const std::vector<AdviceName> names = {{"preferred:gpu", {Advice::preferred, true}},
                                                {"preferred:cpu", {Advice::preferred, false}},
                                                {"accessed_by:gpu", {Advice::accessed_by, true}},
                                                {"accessed_by:cpu", {Advice::accessed_by, false}},
                                                {"read_mostly", {Advice::read_mostly, true}}};
  return names;
}

// "preferred:cpu+accessed_by:gpu" -> its hints in order ("none" and empty items skipped). False, with *bad
// the first item that is no hint, where one is not.
inline bool parse_advice(const std::string& list, std::vector<Advice>* out, std::string* bad) {
  size_t start = 0;
  while (start <= list.size()) {
    const size_t plus = list.find('+', start);
    const std::string item = list.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
    start = plus == std::string::npos ? list.size() + 1 : plus + 1;
    if (item.empty() || item == "none") continue;
    bool found = false;
    for (const auto& n : advice_names())
      if (item == n.name) {
        out->push_back(n.advice);
        found = true;
        break;
      }
    if (!found) {
      *bad = item;
      return false;
    }
  }
  return true;
}

}  // namespace umscope
