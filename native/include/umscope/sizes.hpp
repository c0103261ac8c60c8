// Byte sizes as people write them: umscope's one size grammar in C++ (python/umscope/sizes.py's, character
// for character). umbench's options, umsim's, libumalloc's rules and UMSCOPE_HOST_MEM_LIMIT all read sizes
// here; tests/sizes_table.txt holds every entry point and Python to the same table.
#pragma once
#include <cstddef>
#include <string>

namespace umscope {

// A plain integer or real ("4096", "1e9") is bytes; K, M, G, T and KiB, MiB, GiB, TiB are powers of 1024;
// KB, MB, GB, TB powers of 1000; units in any case, spaces around the number and unit allowed. The result
// must be a whole number of bytes from 1 to 9e18. Throws UsageError (one line naming the text) otherwise.
size_t parse_bytes(const std::string& text);

}  // namespace umscope
