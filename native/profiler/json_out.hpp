// libumtrace's and libumcounters' JSON-lines output: one string written escaped (the only text either writes
// that is not a number or a fixed key).
#pragma once

#include <time.h>

#include <cstdint>
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

// Wall-clock time (CLOCK_REALTIME, ns): the clock `umscope profile` starts and reaps the program on, so a phase
// can be placed in the program's life.
inline uint64_t wall_ns() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

// The calling thread's CPU time (ns): a phase that took much longer than its CPU time waited (for the driver, the
// device or a lock) rather than computed.
inline uint64_t thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

// One phase of the profiler's own work, {"k":"phase","what":...,"dev":...,"w0":ns,"w1":ns[,"n":calls][,"cpu":ns]}:
// where its cost in the program's wall time goes (bench/um_trace_overhead.py --phases); cpu: the thread's CPU time
// in it. The caller holds the file's lock.
inline void write_phase(FILE* f, const char* what, int dev, uint64_t w0, uint64_t w1, long long n = -1,
                        long long cpu_ns = -1) {
  std::fputs("{\"k\":\"phase\",\"what\":", f);
  json_string(f, what);
  std::fprintf(f, ",\"dev\":%d,\"w0\":%llu,\"w1\":%llu", dev, static_cast<unsigned long long>(w0),
               static_cast<unsigned long long>(w1));
  if (n >= 0) std::fprintf(f, ",\"n\":%lld", n);
  if (cpu_ns >= 0) std::fprintf(f, ",\"cpu\":%lld", cpu_ns);
  std::fputs("}\n", f);
}

// A phase of no length when the loader finalises a profiler library at exit (docs/counters.md, "The set-up beside
// the program": the teardown). Never waits at exit for the file's lock, which another thread may keep.
template <typename Mutex>
inline void write_finalised(FILE* f, Mutex& mu, const char* what) {
  if (!f || !mu.try_lock()) return;
  const uint64_t w = wall_ns();
  write_phase(f, what, -1, w, w);
  std::fflush(f);
  mu.unlock();
}

}  // namespace umprofiler
