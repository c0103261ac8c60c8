// The memory modes of the application suite (native/apps/modes.cpp, the one
// definition): for each, the kind of the arrays the GPU only reads (input) and
// of those it writes (output: out and inout arrays).
#pragma once
#include <string>
#include <vector>

namespace umscope {

struct ModeInfo {
  std::string name, help, input_kind, output_kind;
};
const std::vector<ModeInfo>& mode_registry();
const std::vector<std::string>& app_modes();  // the names, in the table's order
std::string mode_kind(const std::string& mode, bool input);

}  // namespace umscope
