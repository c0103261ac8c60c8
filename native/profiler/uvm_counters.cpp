// The UVM driver's own byte and fault counters (/dev/nvidia-uvm-tools in counter mode), beside CUPTI's records.
// CUPTI reads unified-memory events from the driver's tools event queue, and the driver drops an event when
// that queue is full (uvm_tools.c: enqueue_event counts it in the queue's `dropped`, which CUPTI does not
// report): GPU-fault-driven migrations, thousands of small ones at once, overflow it. The counters are
// atomic additions made as each migration is issued, so they lose nothing; they give totals only (no
// addresses, times or causes). The ioctl numbers and parameter layouts are the driver's user interface
// (uvm_ioctl.h, uvm_types.h of NVIDIA's open kernel modules), restated here.
#include "uvm_counters.hpp"

#include <cupti.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "uvm_events.hpp"

namespace uvm_counters {
namespace {

FILE* g_out = nullptr;
std::mutex* g_mu = nullptr;

unsigned long long now_ns() {  // the trace's clock (CUPTI's)
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return static_cast<unsigned long long>(t);
}

constexpr unsigned long kInitEventTracker = 56;  // UVM_TOOLS_INIT_EVENT_TRACKER
constexpr unsigned long kEnableCounters = 60;    // UVM_TOOLS_ENABLE_COUNTERS
constexpr int kCounters = 10;                    // UVM_TOTAL_COUNTERS on Linux
// Counter indices: bytes host-to-device 0, device-to-host 1, CPU faults 2, prefetched bytes host-to-device 7
// and device-to-host 8 (included in 0 and 1), GPU faults 9.
constexpr uint64_t kAllFlags = 0x1 | 0x2 | 0x4 | 0x80 | 0x100 | 0x200;

using uvm_events::InitParams;  // the driver's tracker parameters (uvm_events.hpp)
using EnableParams = uvm_events::FlagsParams;

struct Tracker {
  int dev;  // CUDA ordinal, -1: every processor
  int fd;
  volatile uint64_t* counters;
};
std::vector<Tracker> g_trackers;
std::mutex g_trackers_mu;  // a context's creation may add a tracker while another thread writes the counters

// The /dev/nvidia-uvm descriptors the CUDA driver opened in this process.
std::vector<int> uvm_fds() {
  std::vector<int> fds;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return fds;
  while (dirent* e = readdir(d)) {
    char path[300], target[256];
    std::snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = 0;
    if (std::strcmp(target, "/dev/nvidia-uvm") == 0) fds.push_back(std::atoi(e->d_name));
  }
  closedir(d);
  return fds;
}

// One counter tracker for `uuid` (all processors where null); writes what the driver answered.
void open_tracker(int dev, const unsigned char* uuid, const std::vector<int>& fds) {
  for (int ufd : fds) {
    int tfd = open("/dev/nvidia-uvm-tools", O_RDWR | O_CLOEXEC);
    std::lock_guard<std::mutex> lk(*g_mu);
    if (tfd < 0) {
      std::fprintf(g_out, "{\"k\":\"uvm_config\",\"dev\":%d,\"ok\":false,\"why\":\"open /dev/nvidia-uvm-tools: %s\"}\n",
                   dev, std::strerror(errno));
      return;
    }
    auto* buf = static_cast<uint64_t*>(std::aligned_alloc(4096, 4096));
    std::memset(buf, 0, 4096);
    InitParams ip;
    std::memset(&ip, 0, sizeof ip);
    ip.control_buffer = reinterpret_cast<uint64_t>(buf);
    if (uuid) std::memcpy(ip.processor, uuid, 16);
    ip.all_processors = uuid ? 0 : 1;
    ip.uvm_fd = static_cast<uint32_t>(ufd);
    int r = ioctl(tfd, kInitEventTracker, &ip);
    EnableParams ep{kAllFlags, 0, 0};
    int r2 = (r == 0 && ip.rm_status == 0) ? ioctl(tfd, kEnableCounters, &ep) : -1;
    bool ok = r == 0 && ip.rm_status == 0 && r2 == 0 && ep.rm_status == 0;
    std::fprintf(g_out, "{\"k\":\"uvm_config\",\"dev\":%d,\"uvm_fd\":%d,\"ok\":%s,\"init\":%d,\"init_rm\":%u,\"enable\":%d,"
                 "\"enable_rm\":%u}\n", dev, ufd, ok ? "true" : "false", r, ip.rm_status, r2, ep.rm_status);
    if (ok) {
      std::lock_guard<std::mutex> lk(g_trackers_mu);
      g_trackers.push_back({dev, tfd, buf});
      return;
    }
    close(tfd);
    std::free(buf);
  }
}

}  // namespace

void start(int ndev, void* cuda, FILE* out, std::mutex& mu) {
  g_out = out;
  g_mu = &mu;
  const char* off = std::getenv("UMSCOPE_UMTRACE_UVM_COUNTERS");
  if (off && *off == '0') return;
  std::vector<int> fds = uvm_fds();
  if (fds.empty()) {
    std::lock_guard<std::mutex> lk(*g_mu);
    std::fprintf(g_out, "{\"k\":\"uvm_config\",\"dev\":-1,\"ok\":false,\"why\":\"no /dev/nvidia-uvm descriptor\"}\n");
    return;
  }
  open_tracker(-1, nullptr, fds);
  const char* ev = std::getenv("UMSCOPE_UMTRACE_UVM_EVENTS");
  if (ev && std::strcmp(ev, "1") == 0) {
    uvm_events::start(fds, g_out, *g_mu);
    // The driver's events carry CLOCK_MONOTONIC_RAW times; CUPTI's records its own clock: one reading of both.
    const unsigned long long raw = uvm_events::raw_ns(), t = now_ns();
    std::lock_guard<std::mutex> lk(*g_mu);
    std::fprintf(g_out, "{\"k\":\"clocks\",\"raw\":%llu,\"t\":%llu}\n", raw, t);
  }
  using GetFn = int (*)(int*, int);
  using UuidFn = int (*)(unsigned char*, int);
  auto get = cuda ? reinterpret_cast<GetFn>(dlsym(cuda, "cuDeviceGet")) : nullptr;
  auto uuid = cuda ? reinterpret_cast<UuidFn>(dlsym(cuda, "cuDeviceGetUuid_v2")) : nullptr;
  if (cuda && !uuid) uuid = reinterpret_cast<UuidFn>(dlsym(cuda, "cuDeviceGetUuid"));
  for (int i = 0; get && uuid && i < ndev; ++i) {
    int dev = 0;
    unsigned char id[16];
    if (get(&dev, i) == 0 && uuid(id, dev) == 0) open_tracker(i, id, fds);
  }
}

void write_counters() {
  if (!g_out) return;
  std::lock_guard<std::mutex> lk(g_trackers_mu);
  for (const Tracker& t : g_trackers) {
    uint64_t c[kCounters];
    for (int i = 0; i < kCounters; ++i) c[i] = __atomic_load_n(&t.counters[i], __ATOMIC_SEQ_CST);
    std::fprintf(g_out, "{\"k\":\"uvm_counters\",\"dev\":%d,\"htod\":%llu,\"dtoh\":%llu,\"cpu_faults\":%llu,"
                 "\"prefetch_htod\":%llu,\"prefetch_dtoh\":%llu,\"gpu_faults\":%llu,\"t\":%llu}\n", t.dev,
                 (unsigned long long)c[0], (unsigned long long)c[1], (unsigned long long)c[2], (unsigned long long)c[7],
                 (unsigned long long)c[8], (unsigned long long)c[9], now_ns());
  }
}
}  // namespace uvm_counters
