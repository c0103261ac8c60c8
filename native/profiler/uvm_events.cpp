// The UVM driver's tools event queue (uvm_events.hpp). The ioctl numbers and layouts are the driver's user
// interface (uvm_ioctl.h, uvm_types.h, uvm_tools.c of NVIDIA's open kernel modules), restated here.
#include "uvm_events.hpp"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace uvm_events {
namespace {

constexpr unsigned long kSetNotificationThreshold = 57;  // UVM_TOOLS_SET_NOTIFICATION_THRESHOLD
constexpr unsigned long kEnableEvents = 58;              // UVM_TOOLS_EVENT_QUEUE_ENABLE_EVENTS
constexpr unsigned long kInitEventTrackerV2 = 76;        // UVM_TOOLS_INIT_EVENT_TRACKER_V2 (UvmEventEntry_V2)
constexpr unsigned long kFlushEvents = 67;               // UVM_TOOLS_FLUSH_EVENTS, on /dev/nvidia-uvm itself

// Event types (UvmEventType) and the ones enabled: migrations, GPU faults, replays, fault-buffer overflows.
enum : int { kMigration = 2, kGpuFault = 3, kGpuFaultReplay = 4, kFaultBufferOverflow = 5 };
constexpr uint64_t kMask = (1ull << kMigration) | (1ull << kGpuFault) | (1ull << kGpuFaultReplay) |
                           (1ull << kFaultBufferOverflow);

struct ThresholdParams {  // UVM_TOOLS_SET_NOTIFICATION_THRESHOLD_PARAMS
  uint32_t threshold;
  uint32_t rm_status;
};

struct Control {  // UvmToolsEventControlData: the driver puts at put_*, we take at get_*
  volatile uint32_t get_ahead;
  volatile uint32_t get_behind;
  volatile uint32_t put_ahead;
  volatile uint32_t put_behind;
  uint64_t dropped[64];  // UvmEventNumTypesAll
};
static_assert(sizeof(Control) == 528, "UvmToolsEventControlData is 528 bytes");

template <typename T>
T at(const unsigned char* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

FILE* g_out = nullptr;
std::mutex* g_mu = nullptr;
int g_fd = -1;
int g_uvm_fd = -1;  // the CUDA driver's /dev/nvidia-uvm descriptor the queue is on
unsigned char* g_queue = nullptr;
Control* g_ctrl = nullptr;
uint32_t g_entries = 0;
std::thread* g_thread = nullptr;  // never destroyed: a program that exits without our exit hook must not terminate on it
std::atomic<bool> g_stop{false};
pid_t g_pid = 0;  // the process the thread runs in (a forked child has the queue's state but not the thread)
unsigned long long g_written[kTypes] = {};

uint32_t queue_entries() {
  const char* e = std::getenv("UMSCOPE_UMTRACE_UVM_QUEUE");
  long n = e && *e ? std::atol(e) : (1l << 18);  // 18 MiB of entries
  if (n < 2 || n > (1l << 24) || (n & (n - 1)) != 0) n = 1l << 18;
  return static_cast<uint32_t>(n);
}

// Takes every entry the driver has put, writes them as one group under the file's lock, hands the slots back.
void drain() {
  const uint32_t mask = g_entries - 1;
  uint32_t get = __atomic_load_n(&g_ctrl->get_behind, __ATOMIC_ACQUIRE) & mask;
  const uint32_t put = __atomic_load_n(&g_ctrl->put_behind, __ATOMIC_ACQUIRE) & mask;
  if (get == put) return;
  std::string lines;
  lines.reserve(static_cast<size_t>((put - get) & mask) * 160);
  while (get != put) {
    const int type = format_entry(g_queue + static_cast<size_t>(get) * kEntryBytes, lines);
    if (type >= 0 && type < kTypes) ++g_written[type];
    get = (get + 1) & mask;
  }
  {
    std::lock_guard<std::mutex> lk(*g_mu);
    std::fwrite(lines.data(), 1, lines.size(), g_out);
  }
  __atomic_store_n(&g_ctrl->get_ahead, get, __ATOMIC_RELEASE);
  __atomic_store_n(&g_ctrl->get_behind, get, __ATOMIC_RELEASE);
}

void run() {
  // Signals sent to the process are left to the program's threads: a handler that ends the trace (libumtrace's
  // on SIGTERM) must not run here, where it would wait for this very thread.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  while (!g_stop.load(std::memory_order_acquire)) {
    pollfd p{g_fd, POLLIN, 0};
    poll(&p, 1, 2);  // woken when an eighth of the queue is filled, else every 2 ms
    drain();
  }
}

// One line saying whether the queue is on; `why`: the step that failed, with errno `err` or the driver's status `rm`.
void say(int fd, const char* why, int err, unsigned rm) {
  std::lock_guard<std::mutex> lk(*g_mu);
  if (!why) {
    std::fprintf(g_out, "{\"k\":\"uvm_events\",\"ok\":true,\"uvm_fd\":%d,\"queue\":%u,\"entry\":%zu,\"mask\":%llu,"
                 "\"clock\":\"CLOCK_MONOTONIC_RAW\",\"raw\":%llu}\n", fd, g_entries, kEntryBytes,
                 static_cast<unsigned long long>(kMask), raw_ns());
  } else if (rm) {
    std::fprintf(g_out, "{\"k\":\"uvm_events\",\"ok\":false,\"why\":\"%s: driver status 0x%x\"}\n", why, rm);
  } else {
    std::fprintf(g_out, "{\"k\":\"uvm_events\",\"ok\":false,\"why\":\"%s: %s\"}\n", why, std::strerror(err));
  }
}

}  // namespace

unsigned long long raw_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &t);
  return static_cast<unsigned long long>(t.tv_sec) * 1000000000ull + static_cast<unsigned long long>(t.tv_nsec);
}

int format_entry(const unsigned char* e, std::string& line) {
  const int type = e[0];
  char b[320];
  int n = 0;
  if (type == kGpuFault) {  // UvmEventGpuFaultInfo_V2
    n = std::snprintf(b, sizeof b,
                      "{\"k\":\"uvm_fault\",\"g\":%u,\"b\":%u,\"a\":%llu,\"acc\":%u,\"ft\":%u,\"gpc\":%u,\"cl\":%u,"
                      "\"ct\":%u,\"t\":%llu,\"tg\":%llu}\n",
                      at<uint16_t>(e, 2), at<uint32_t>(e, 32), static_cast<unsigned long long>(at<uint64_t>(e, 8)),
                      e[37], e[1], at<uint16_t>(e, 4), at<uint16_t>(e, 6), e[36],
                      static_cast<unsigned long long>(at<uint64_t>(e, 16)),
                      static_cast<unsigned long long>(at<uint64_t>(e, 24)));
  } else if (type == kGpuFaultReplay) {  // UvmEventGpuFaultReplayInfo_V2
    n = std::snprintf(b, sizeof b, "{\"k\":\"uvm_replay\",\"g\":%u,\"b\":%u,\"ct\":%u,\"t\":%llu,\"tg\":%llu}\n",
                      at<uint16_t>(e, 2), at<uint32_t>(e, 4), e[1],
                      static_cast<unsigned long long>(at<uint64_t>(e, 8)),
                      static_cast<unsigned long long>(at<uint64_t>(e, 16)));
  } else if (type == kMigration) {  // UvmEventMigrationInfo_V2
    n = std::snprintf(b, sizeof b,
                      "{\"k\":\"uvm_migration\",\"src\":%u,\"dst\":%u,\"a\":%llu,\"n\":%llu,\"cause\":%u,\"t0\":%llu,"
                      "\"t1\":%llu,\"tg0\":%llu,\"tg1\":%llu}\n",
                      at<uint16_t>(e, 4), at<uint16_t>(e, 6), static_cast<unsigned long long>(at<uint64_t>(e, 16)),
                      static_cast<unsigned long long>(at<uint64_t>(e, 24)), e[1],
                      static_cast<unsigned long long>(at<uint64_t>(e, 32)),
                      static_cast<unsigned long long>(at<uint64_t>(e, 40)),
                      static_cast<unsigned long long>(at<uint64_t>(e, 56)),
                      static_cast<unsigned long long>(at<uint64_t>(e, 64)));
  } else if (type == kFaultBufferOverflow) {
    n = std::snprintf(b, sizeof b, "{\"k\":\"uvm_fault_overflow\"}\n");
  }
  if (n > 0) line.append(b, static_cast<size_t>(n));
  return type;
}

void start(const std::vector<int>& uvm_fds, FILE* out, std::mutex& mu) {
  if (g_out) return;
  g_out = out;
  g_mu = &mu;
  g_entries = queue_entries();
  const size_t bytes = (static_cast<size_t>(g_entries) * kEntryBytes + 4095) & ~static_cast<size_t>(4095);
  g_queue = static_cast<unsigned char*>(std::aligned_alloc(4096, bytes));
  g_ctrl = static_cast<Control*>(std::aligned_alloc(4096, 4096));
  if (!g_queue || !g_ctrl) return say(-1, "memory for the queue", ENOMEM, 0);
  std::memset(g_queue, 0, bytes);
  std::memset(g_ctrl, 0, 4096);
  int err = ENOENT;
  unsigned rm = 0;
  const char* why = "no /dev/nvidia-uvm descriptor";
  for (int ufd : uvm_fds) {
    int fd = open("/dev/nvidia-uvm-tools", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      err = errno;
      why = "open /dev/nvidia-uvm-tools";
      break;
    }
    InitParams ip{};
    ip.queue_buffer = reinterpret_cast<uint64_t>(g_queue);
    ip.queue_buffer_size = g_entries;
    ip.control_buffer = reinterpret_cast<uint64_t>(g_ctrl);
    ip.uvm_fd = static_cast<uint32_t>(ufd);
    FlagsParams fp{kMask, 0, 0};
    ThresholdParams tp{g_entries / 8, 0};
    if (ioctl(fd, kInitEventTrackerV2, &ip) != 0 || ip.rm_status != 0) {
      err = errno, rm = ip.rm_status;
      why = "UVM_TOOLS_INIT_EVENT_TRACKER_V2";
    } else if (ioctl(fd, kSetNotificationThreshold, &tp) != 0 || tp.rm_status != 0) {
      err = errno, rm = tp.rm_status;
      why = "UVM_TOOLS_SET_NOTIFICATION_THRESHOLD";
    } else if (ioctl(fd, kEnableEvents, &fp) != 0 || fp.rm_status != 0) {
      err = errno, rm = fp.rm_status;
      why = "UVM_TOOLS_EVENT_QUEUE_ENABLE_EVENTS";
    } else {
      g_fd = fd;
      g_uvm_fd = ufd;
      say(ufd, nullptr, 0, 0);
      g_pid = getpid();
      g_thread = new std::thread(run);
      return;
    }
    close(fd);
  }
  say(-1, why, err, rm);
}

void stop() {
  if (g_fd < 0 || getpid() != g_pid) return;  // never started, or a forked child: its parent ends the queue
  if (g_thread && g_thread->get_id() == std::this_thread::get_id()) return;
  g_stop.store(true, std::memory_order_release);
  if (g_thread && g_thread->joinable()) g_thread->join();
  // Migration and replay events are queued when their copies and replays complete, by the driver's own worker
  // (uvm_tools.c): have it queue every completed one before the last drain. Only on the descriptor we started
  // on, and only while it is still /dev/nvidia-uvm (the program may have closed it and the number been reused).
  char path[64], target[64];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", g_uvm_fd);
  const ssize_t n = readlink(path, target, sizeof target - 1);
  if (n > 0) {
    target[n] = 0;
    struct { uint32_t rm_status; } fp{0};
    if (std::strcmp(target, "/dev/nvidia-uvm") == 0) ioctl(g_uvm_fd, kFlushEvents, &fp);
  }
  drain();
  std::lock_guard<std::mutex> lk(*g_mu);
  std::fprintf(g_out, "{\"k\":\"uvm_events_end\",\"n\":[");
  for (int t = 0; t < kTypes; ++t) std::fprintf(g_out, "%s%llu", t ? "," : "", g_written[t]);
  std::fprintf(g_out, "],\"dropped\":[");
  for (int t = 0; t < kTypes; ++t)
    std::fprintf(g_out, "%s%llu", t ? "," : "", static_cast<unsigned long long>(
                                                    __atomic_load_n(&g_ctrl->dropped[t], __ATOMIC_SEQ_CST)));
  std::fprintf(g_out, "]}\n");
  close(g_fd);
  g_fd = -1;
}

}  // namespace uvm_events
