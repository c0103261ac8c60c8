#include "umscope/sizes.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>

#include "umscope/errors.hpp"

namespace umscope {

// The pattern is sizes.py's _SIZE; the unit is the first letter K, M, G or T, alone or followed by "iB"
// (binary) or "B" (decimal), in any case.
size_t parse_bytes(const std::string& s) {
  static const std::regex pattern(R"(^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$)");
  std::smatch m;
  if (!std::regex_match(s, m, pattern)) throw UsageError("malformed size '" + s + "'");
  const double v = std::strtod(m[1].str().c_str(), nullptr);
  std::string unit = m[2].str();
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  double mult = 0;
  if (unit.empty() || unit == "B") {
    mult = 1;
  } else if (unit.size() <= 3) {
    const int power = unit[0] == 'K' ? 1 : unit[0] == 'M' ? 2 : unit[0] == 'G' ? 3 : unit[0] == 'T' ? 4 : 0;
    const std::string rest = unit.substr(1);
    if (power != 0 && (rest.empty() || rest == "IB")) mult = std::pow(1024.0, power);
    if (power != 0 && rest == "B") mult = std::pow(1000.0, power);
  }
  if (mult == 0) throw UsageError("unknown size unit in '" + s + "'");
  const double bytes = v * mult;
  if (!(bytes >= 1) || bytes > 9.0e18 || bytes != std::floor(bytes))
    throw UsageError("size must be a positive whole number of bytes: '" + s + "'");
  return static_cast<size_t>(bytes);
}

}  // namespace umscope
