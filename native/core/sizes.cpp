#include "umscope/sizes.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "umscope/errors.hpp"

namespace umscope {

// The grammar is sizes.py's _SIZE, scanned by hand: spaces, a number ([0-9]*.?[0-9]+ with an optional exponent
// [eE][+-]?[0-9]+), spaces, a unit of letters, spaces. The unit is the first letter K, M, G or T, alone or
// followed by "iB" (binary) or "B" (decimal), in any case. No std::regex: libumalloc is loaded into PyTorch
// programs, whose own libraries export std::regex instantiations of another libstdc++ that the dynamic linker
// binds ours to (seen on the H100: `place --rule` crashed with SIGSEGV while the rules were parsed).
size_t parse_bytes(const std::string& s) {
  const size_t n = s.size();
  size_t i = 0;
  auto digit = [&](size_t k) { return k < n && std::isdigit(static_cast<unsigned char>(s[k])); };
  auto spaces = [&] {
    while (i < n && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  };
  const UsageError malformed("malformed size '" + s + "'");
  spaces();
  const size_t start = i;
  while (digit(i)) ++i;
  const bool whole = i > start;
  if (i < n && s[i] == '.') {
    size_t j = i + 1;
    while (digit(j)) ++j;
    if (j == i + 1) throw malformed;  // "5." : the regex needs a digit after the point
    i = j;
  } else if (!whole) {
    throw malformed;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {  // an exponent only with its digits; else the letter is the unit's
    size_t j = i + 1;
    if (j < n && (s[j] == '+' || s[j] == '-')) ++j;
    if (digit(j)) {
      while (digit(j)) ++j;
      i = j;
    }
  }
  const std::string number = s.substr(start, i - start);
  spaces();
  const size_t unit_start = i;
  while (i < n && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
  std::string unit = s.substr(unit_start, i - unit_start);
  spaces();
  if (i != n) throw malformed;
  const double v = std::strtod(number.c_str(), nullptr);
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
