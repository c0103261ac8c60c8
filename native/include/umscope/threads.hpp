// A team of CPU threads, each pinned to one allowed CPU (cores before SMT siblings), that runs one
// function on every thread at once and times it with the steady clock from
// a common start to the last thread's finish.
#pragma once
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace umscope {

class ThreadTeam {
 public:
  explicit ThreadTeam(int nthreads);
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;
  int size() const { return static_cast<int>(threads_.size()); }
  const std::vector<int>& cpus() const { return cpus_; }
  // Runs fn(tid, nthreads) on every thread; returns elapsed seconds.
  double run(const std::function<void(int, int)>& fn);

 private:
  void loop(int tid);
  std::vector<std::thread> threads_;
  std::vector<int> cpus_;
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  const std::function<void(int, int)>* job_ = nullptr;
  long generation_ = 0;
  int remaining_ = 0;
  bool stop_ = false;
};

// Splits [0, n) into `parts` contiguous pieces; piece `i` as [begin, end).
inline void split_range(size_t n, int parts, int i, size_t& begin, size_t& end) {
  size_t chunk = n / parts, rem = n % parts;
  begin = i * chunk + (static_cast<size_t>(i) < rem ? i : rem);
  end = begin + chunk + (static_cast<size_t>(i) < rem ? 1 : 0);
}

// The most pieces prepare_on_all_cpus splits into (a caller may keep one slot per piece).
constexpr int kMaxPrepareParts = 256;

// Untimed preparation of a large array (filling it, checking it, writing a chain into it) on every CPU the
// process may use: body(begin, end, part) on contiguous pieces of [0, n), part < kMaxPrepareParts, on one thread where n is
// below `serial_below` items or one CPU is allowed. On the H100 host a 1 GiB managed gpu-stream case (three
// arrays filled by the CPU) took 3.4 s with one thread filling, 0.9 s with all 16. The pages are first touched
// by the process's own CPUs under its memory policy: with umbench's default placement (placement.hpp) bound to
// the GPU's NUMA node, as before; with --placement none on a host of several nodes, each piece lands on its
// thread's node (the CPU stream's team then reads its own piece locally, as STREAM arranges it).
void prepare_on_all_cpus(size_t n, size_t serial_below, const std::function<void(size_t, size_t, int)>& body);

}  // namespace umscope
