// The memory modes of the application suite, declared once: the kind each
// array gets in each mode. Every application (app.cu's harness, qv.cu) takes
// its kinds from here, and `umbench list --json` exports the table.
#include "umscope/modes.hpp"

#include "umscope/errors.hpp"

namespace umscope {

const std::vector<ModeInfo>& mode_registry() {
  static const std::vector<ModeInfo> r = {
      {"explicit", "malloc'd host arrays + cudaMalloc; inputs copied in, results copied back", "device", "device"},
      {"managed", "cudaMallocManaged, pages migrate on demand", "managed", "managed"},
      {"managed-prefetch", "cudaMallocManaged, prefetched to the GPU before and to the CPU after",
       "managed,prefetch=gpu", "managed,prefetch=gpu"},
      {"managed-advice", "cudaMallocManaged with advice: read_mostly for inputs, preferred:gpu for outputs",
       "managed,advise=read_mostly", "managed,advise=preferred:gpu"},
      {"pinned", "cudaMallocHost (zero copy)", "pinned", "pinned"},
      {"registered", "mmap + cudaHostRegister (zero copy)", "registered", "registered"},
      {"system", "mmap: the GPU reaches it only with HMM or ATS", "system", "system"},
  };
  return r;
}

const std::vector<std::string>& app_modes() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const ModeInfo& m : mode_registry()) n.push_back(m.name);
    return n;
  }();
  return names;
}

std::string mode_kind(const std::string& mode, bool input) {
  for (const ModeInfo& m : mode_registry())
    if (m.name == mode) return input ? m.input_kind : m.output_kind;
  throw UsageError("unknown mode '" + mode + "'");
}

}  // namespace umscope
