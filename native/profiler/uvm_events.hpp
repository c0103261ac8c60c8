// The UVM driver's tools event queue, read by libumtrace beside CUPTI (UMSCOPE_UMTRACE_UVM_EVENTS=1).
//
// CUPTI's unified-memory records come from its own tools queue, which the driver drops events from when it is
// full (docs/tracing.md). This is a second queue of our own, large and drained by a thread of its own, holding
// what CUPTI does not give at all: every GPU fault-buffer entry with its batch id, the GPU's time stamp of the
// entry, its GPC and MMU client, and every replay, so a batch can be read entry by entry (docs/tracing.md,
// "The driver's fault events").
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace uvm_events {

// UVM_TOOLS_INIT_EVENT_TRACKER(_V2)_PARAMS (uvm_ioctl.h): a counter tracker (queue_buffer_size 0: libumtrace's
// counters, uvm_counters.cpp) or an event queue (here).
struct InitParams {
  uint64_t queue_buffer;
  uint64_t queue_buffer_size;  // 0: a counter tracker; else the queue's entries, a power of 2
  uint64_t control_buffer;     // page-aligned: the counters, or the queue's UvmToolsEventControlData
  unsigned char processor[16];
  uint32_t all_processors;
  uint32_t uvm_fd;
  uint32_t rm_status;
  uint32_t pad;
};
static_assert(sizeof(InitParams) == 56, "UVM_TOOLS_INIT_EVENT_TRACKER_PARAMS is 56 bytes");

// UVM_TOOLS_ENABLE_COUNTERS_PARAMS and UVM_TOOLS_EVENT_QUEUE_ENABLE_EVENTS_PARAMS: a bit mask of counters or events.
struct FlagsParams {
  uint64_t flags;
  uint32_t rm_status;
  uint32_t pad;
};

// The V2 event entry (UvmEventEntry_V2 in uvm_types.h of NVIDIA's open kernel modules, unchanged from 580.65 to
// 595.45): 72 bytes, the event type in its first byte.
constexpr size_t kEntryBytes = 72;
constexpr int kTypes = 16;  // event types 0..15 are counted; UvmEventNumTypes is 15 in these drivers

// Starts the queue on whichever of `uvm_fds` (the process's /dev/nvidia-uvm descriptors) carries its VA space,
// and a thread that writes what it holds into `out` (taking `mu` for each group of lines). Writes one
// {"k":"uvm_events",...} line saying whether it is on, and why not. Call once.
void start(const std::vector<int>& uvm_fds, FILE* out, std::mutex& mu);

// Writes what the queue still holds, stops the thread and writes {"k":"uvm_events_end","n":[...],"dropped":[...]}
// (events written and events the driver dropped because the queue was full, per type). `mu` must not be held.
void stop();

// The driver's clock for its events' CPU times (CLOCK_MONOTONIC_RAW, ns: NV_GETTIME in uvm_linux.h).
unsigned long long raw_ns();

// Appends one entry as a JSON line to `line` and returns its event type (types without a layout here are only
// counted: returns the type, appends nothing).
int format_entry(const unsigned char* entry, std::string& line);

}  // namespace uvm_events
