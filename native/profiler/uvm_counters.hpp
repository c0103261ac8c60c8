// The UVM driver's own byte and fault counters for libumtrace (umtrace.cpp): a counter tracker per GPU and one
// for every processor, opened on the CUDA driver's /dev/nvidia-uvm descriptors, read at the trace's end.
#pragma once

#include <cstdio>
#include <mutex>

namespace uvm_counters {

// Opens the trackers (CUDA ordinals 0..ndev-1 through the driver's libcuda handle `cuda`, which may be null: then
// the every-processor tracker only) and, with UMSCOPE_UMTRACE_UVM_EVENTS=1, the driver's event queue; what the
// driver answered goes to `out` as uvm_config lines, under `mu`. UMSCOPE_UMTRACE_UVM_COUNTERS=0: nothing.
void start(int ndev, void* cuda, FILE* out, std::mutex& mu);

// One uvm_counters line per tracker into the trace (the caller holds the trace's lock).
void write_counters();

}  // namespace uvm_counters
