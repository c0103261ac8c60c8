// The arithmetic every bandwidth record shares, in one place: how many arrays
// of the operation's size a stream operation moves, and the rate unit.
#pragma once
#include <string>

namespace umscope {

// Arrays each stream operation reads or writes once: read 1, write 1,
// copy 2 (b = a: one read, one write), triad 3 (c = a + s*b: two reads, one write).
inline int stream_arrays(const std::string& op) { return op == "copy" ? 2 : op == "triad" ? 3 : 1; }

// GB/s: 10^9 bytes per second (records never use GiB/s).
inline double gb_per_s(double bytes, double seconds) { return bytes / seconds / 1e9; }

}  // namespace umscope
