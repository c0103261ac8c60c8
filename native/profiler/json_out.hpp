// libumtrace's and libumcounters' JSON-lines output: one string written escaped (the only text either writes
// that is not a number or a fixed key).
#pragma once

#include <cstdio>

namespace umprofiler {

inline void json_string(FILE* f, const char* s) {
  std::fputc('"', f);
  for (; s && *s; ++s) {
    unsigned char c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') std::fprintf(f, "\\%c", c);
    else if (c < 0x20) std::fprintf(f, "\\u%04x", c);
    else std::fputc(c, f);
  }
  std::fputc('"', f);
}

}  // namespace umprofiler
