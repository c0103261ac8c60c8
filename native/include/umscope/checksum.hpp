// The checksum an application's CPU computes over its results (AppRun::back) and that
// `cpu-stream --ops checksum` times alone: a 64-bit hash of whole 8-byte words (and the tail bytes),
// in 1 MiB chunks that threads hash independently and that are combined in order, so the same bytes
// give the same checksum whatever the thread count.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "umscope/threads.hpp"

namespace umscope {

inline uint64_t hash_chunk(const unsigned char* p, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

constexpr size_t kChecksumChunk = size_t(1) << 20;

// Folds the hash of `n` bytes at `p` into `total`, the chunks hashed by `team` (nullptr: this thread).
inline uint64_t checksum_fold(uint64_t total, const unsigned char* p, size_t n, ThreadTeam* team) {
  const size_t nchunks = (n + kChecksumChunk - 1) / kChecksumChunk;
  std::vector<uint64_t> h(nchunks);
  auto body = [&](int i, int T) {
    size_t lo, hi;
    split_range(nchunks, T, i, lo, hi);
    for (size_t c = lo; c < hi; ++c)
      h[c] = hash_chunk(p + c * kChecksumChunk, std::min(kChecksumChunk, n - c * kChecksumChunk));
  };
  if (team) team->run(body);
  else body(0, 1);
  for (uint64_t v : h) total = (total ^ v) * 0x100000001b3ull;
  return total;
}

constexpr uint64_t kChecksumSeed = 0xcbf29ce484222325ull;

}  // namespace umscope
