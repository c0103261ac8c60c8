#include "umscope/threads.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>

#include "umscope/errors.hpp"
#include "umscope/os.hpp"

namespace umscope {

ThreadTeam::ThreadTeam(int nthreads) {
  // Placed by topology: one thread per core first, SMT siblings only when every core has one.
  std::vector<int> allowed = os::order_by_core(os::allowed_cpus());
  if (nthreads < 1) throw UsageError("thread count must be at least 1");
  for (int t = 0; t < nthreads; ++t) cpus_.push_back(allowed[t % allowed.size()]);
  for (int t = 0; t < nthreads; ++t) threads_.emplace_back([this, t] { loop(t); });
}

ThreadTeam::~ThreadTeam() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    ++generation_;
  }
  cv_start_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadTeam::loop(int tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus_[tid], &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  long seen = 0;
  for (;;) {
    const std::function<void(int, int)>* job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_start_.wait(lk, [&] { return generation_ != seen; });
      seen = generation_;
      if (stop_) return;
      job = job_;
    }
    (*job)(tid, size());
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (--remaining_ == 0) cv_done_.notify_one();
    }
  }
}

double ThreadTeam::run(const std::function<void(int, int)>& fn) {
  auto t0 = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lk(mu_);
    job_ = &fn;
    remaining_ = size();
    ++generation_;
    t0 = std::chrono::steady_clock::now();
  }
  cv_start_.notify_all();
  std::unique_lock<std::mutex> lk(mu_);
  cv_done_.wait(lk, [&] { return remaining_ == 0; });
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(t1 - t0).count();
}

void prepare_on_all_cpus(size_t n, size_t serial_below, const std::function<void(size_t, size_t, int)>& body) {
  const int cpus = static_cast<int>(os::allowed_cpus().size());
  if (n < serial_below || cpus < 2) {
    body(0, n, 0);
    return;
  }
  ThreadTeam team(std::min(cpus, kMaxPrepareParts));
  team.run([&](int t, int T) {
    size_t lo, hi;
    split_range(n, T, t, lo, hi);
    body(lo, hi, t);
  });
}

}  // namespace umscope
