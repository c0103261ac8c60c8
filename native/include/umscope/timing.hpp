// The one way GPU work is timed here: CUDA events recorded on a stream around
// the work, waited for, checked, and read as milliseconds; warm-up
// repetitions run the same way and are dropped from the samples.
#pragma once
#ifdef UMSCOPE_HAVE_CUDA
#include <cuda_runtime.h>

#include <vector>

#include "umscope/errors.hpp"

namespace umscope {

// A row of CUDA events on one stream, created on the GPU current at
// construction. The usual use is a pair: time_ms(work) records event 0,
// runs the work, records event 1, waits for it, checks for a launch error
// and returns the milliseconds between them. Sites with more marks (a first
// launch inside a batch, one event per launch) use record/wait/ms directly.
class EventClock {
 public:
  explicit EventClock(int events = 2, cudaStream_t stream = nullptr) : stream_(stream) { resize(events); }
  ~EventClock() { destroy(); }
  EventClock(const EventClock&) = delete;
  EventClock& operator=(const EventClock&) = delete;

  // Replaces the events by n fresh ones.
  void resize(int n) {
    destroy();
    ev_.assign(n, nullptr);
    for (auto& e : ev_) UM_CUDA(cudaEventCreate(&e));
  }
  int size() const { return static_cast<int>(ev_.size()); }
  int last() const { return size() - 1; }
  cudaStream_t stream() const { return stream_; }
  cudaEvent_t event(int i) const { return ev_[i]; }

  void record(int i) { UM_CUDA(cudaEventRecord(ev_[i], stream_)); }
  // Waits for event i, then throws on any error the work left (a failed launch).
  void wait(int i) {
    UM_CUDA(cudaEventSynchronize(ev_[i]));
    UM_CUDA(cudaGetLastError());
  }
  // Whether event i has completed, without waiting; throws on an error.
  bool done(int i) {
    cudaError_t q = cudaEventQuery(ev_[i]);
    if (q == cudaErrorNotReady) return false;
    UM_CUDA(q);
    return true;
  }
  // Milliseconds from event i to event j, both completed.
  float ms(int i, int j) const { return ms(i, *this, j); }
  // Milliseconds from this clock's event i to `other`'s event j (streams of one GPU).
  float ms(int i, const EventClock& other, int j) const {
    float out = 0;
    UM_CUDA(cudaEventElapsedTime(&out, ev_[i], other.ev_[j]));
    return out;
  }

  // The work between events 0 and 1, waited for and checked: milliseconds.
  template <class Work>
  float time_ms(Work&& work) {
    record(0);
    work();
    record(1);
    wait(1);
    return ms(0, 1);
  }

 private:
  void destroy() {
    for (auto& e : ev_)
      if (e) cudaEventDestroy(e);
    ev_.clear();
  }
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> ev_;
};

// warmup + reps repetitions of `work`, each timed with `clock` after an
// untimed `before(r)` (resetting an accumulator, touching from the CPU);
// returns the milliseconds of the last `reps`.
template <class Work, class Before>
std::vector<double> repeat_ms(EventClock& clock, int warmup, int reps, Work&& work, Before&& before) {
  std::vector<double> samples;
  samples.reserve(reps);
  for (int r = 0; r < warmup + reps; ++r) {
    before(r);
    const float ms = clock.time_ms(work);
    if (r >= warmup) samples.push_back(ms);
  }
  return samples;
}

template <class Work>
std::vector<double> repeat_ms(EventClock& clock, int warmup, int reps, Work&& work) {
  return repeat_ms(clock, warmup, reps, work, [](int) {});
}

}  // namespace umscope
#endif
