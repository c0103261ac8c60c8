// Buffer: allocation, placement and release of every memory kind.
#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "umscope/caps.hpp"
#include "umscope/errors.hpp"
#include "umscope/memory.hpp"
#include "umscope/os.hpp"

namespace umscope {

namespace {
constexpr size_t kHugeAlign = size_t(2) << 20;

bool is_host_kind(const std::string& n) { return n == "system" || n == "numa" || n == "registered"; }

const GpuCaps& need_gpu(int dev, const std::string& kind) {
  const GpuCaps& c = gpu_caps(dev);
  if (!c.present) throw Skip("kind '" + kind + "' needs a GPU: " + c.why_absent);
  return c;
}
}  // namespace

std::string gib_text(size_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(size_t(1) << 30));
  return buf;
}

void check_managed_memory(size_t bytes, const AllocOptions& opt) {
#ifdef UMSCOPE_HAVE_CUDA
  if (opt.allow_oversubscription) return;
  UM_CUDA(cudaSetDevice(opt.device));
  size_t free_b = 0, total_b = 0;
  UM_CUDA(cudaMemGetInfo(&free_b, &total_b));
  if (bytes > free_b)
    throw Refused("refusing " + gib_text(bytes) + " of managed memory: only " + gib_text(free_b) +
                  " of GPU memory is free, and oversubscribing a shared GPU can hang it; pass "
                  "--allow-oversubscription on a machine you own");
#else
  (void)bytes;
  (void)opt;
#endif
}

namespace {
// Host bytes held by this process's live buffers, and MemAvailable when the first of them was asked for:
// the guard compares a case's total (cpu-stream's two arrays, an application's every array), not
// each buffer, with what was free when the case started. A batch process runs many cases, one after the
// other, each freeing its buffers: MemAvailable is read again whenever no buffer is live (a new case), not
// once per process, so a later case is not checked against what was free minutes earlier.
size_t g_host_live = 0;

// UMSCOPE_HOST_MEM_LIMIT: bytes, or a number with K, M, G or T (powers of 1024). Kept here, apart
// from parse_bytes, because this file is also linked into the allocator library.
size_t limit_bytes(const char* text) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  double mult = 1;
  switch (end && *end ? std::toupper(static_cast<unsigned char>(*end)) : 0) {
    case 'K': mult = 1024.0; break;
    case 'M': mult = 1024.0 * 1024; break;
    case 'G': mult = 1024.0 * 1024 * 1024; break;
    case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
    case 0: break;
    default: throw UsageError(std::string("UMSCOPE_HOST_MEM_LIMIT takes a size such as 8G, got '") + text + "'");
  }
  const double b = v * mult;
  if (end == text || !(b >= 1) || b > 9.0e18)
    throw UsageError(std::string("UMSCOPE_HOST_MEM_LIMIT takes a size such as 8G, got '") + text + "'");
  return static_cast<size_t>(b);
}
size_t g_avail_at_start = 0;
bool g_avail_read = false;  // read at least once (g_host_live is 0 between cases)
}  // namespace

void check_host_memory(size_t bytes, bool allow) {
  if (!g_avail_read || g_host_live == 0) {
    g_avail_at_start = os::mem_available_bytes();
    // UMSCOPE_HOST_MEM_LIMIT (a size, e.g. 8G) caps what a case may take on a shared node.
    const char* limit = std::getenv("UMSCOPE_HOST_MEM_LIMIT");
    if (limit && *limit) {
      const size_t cap = limit_bytes(limit);
      if (g_avail_at_start == 0 || cap < g_avail_at_start) g_avail_at_start = cap;
    }
    g_avail_read = true;
  }
  const size_t avail = g_avail_at_start;
  const size_t total = g_host_live + bytes;
  if (allow || avail == 0 || (total >= bytes && total <= avail)) return;
  throw Refused("refusing to allocate " + gib_text(bytes) + " of host memory (" + gib_text(total) +
                " for this case in all): only " + gib_text(avail) +
                " is available (MemAvailable, or UMSCOPE_HOST_MEM_LIMIT); pass --allow-host-overcommit to try "
                "anyway");
}

void Buffer::count_host(size_t bytes) {
  host_counted_ = bytes;
  g_host_live += bytes;
}

Buffer::Buffer(const KindSpec& kind, size_t bytes, const AllocOptions& opt)
    : kind_(kind), bytes_(bytes), opt_(opt) {
  if (bytes == 0) throw UsageError("buffer size must be positive");
  const std::string& n = kind.name;
  if (is_host_kind(n)) {
    check_host_memory(bytes, opt.allow_host_overcommit);
    count_host(bytes);
    // Over-allocate so the buffer can start on a 2 MiB boundary (needed for THP).
    mapped_ = bytes + kHugeAlign;
    base_ = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base_ == MAP_FAILED) {
      base_ = nullptr;
      throw Refused("mmap of " + gib_text(bytes) + " failed: " + std::strerror(errno));
    }
    auto aligned = (reinterpret_cast<uintptr_t>(base_) + kHugeAlign - 1) & ~(kHugeAlign - 1);
    cpu_ = reinterpret_cast<void*>(aligned);
    std::string page = kind.get("page", "default");
    if (page == "thp" && madvise(cpu_, bytes, MADV_HUGEPAGE) != 0)
      throw Skip(std::string("MADV_HUGEPAGE refused: ") + std::strerror(errno) + " (THP mode '" +
                 os::thp_mode() + "')");
    if (page == "base") madvise(cpu_, bytes, MADV_NOHUGEPAGE);
    if (n == "numa") {
      bool exists = false;
      for (int node : os::numa_nodes()) exists = exists || node == kind.arg;
      if (!exists) throw Skip("NUMA node " + std::to_string(kind.arg) + " does not exist on this machine");
      std::string err = os::bind_to_node(cpu_, bytes, kind.arg);
      if (!err.empty()) throw Skip("cannot bind to NUMA node " + std::to_string(kind.arg) + ": " + err);
    }
  }
#ifdef UMSCOPE_HAVE_CUDA
  if (n == "device") {
    need_gpu(opt.device, n);
    UM_CUDA(cudaSetDevice(opt.device));
    UM_CUDA(cudaMalloc(&base_, bytes));
    gpu_ = base_;
  } else if (n == "peer") {
    need_gpu(opt.device, n);
    int count = 0;
    UM_CUDA(cudaGetDeviceCount(&count));
    if (kind.arg == opt.device) throw Skip("peer:N names another GPU than the one under test (GPU " +
                                           std::to_string(opt.device) + ")");
    if (kind.arg >= count) throw Skip("no GPU " + std::to_string(kind.arg) + ": this machine has " +
                                      std::to_string(count));
    int can = 0;
    UM_CUDA(cudaDeviceCanAccessPeer(&can, opt.device, kind.arg));
    if (!can) throw Skip("GPU " + std::to_string(opt.device) + " has no peer access to GPU " + std::to_string(kind.arg));
    UM_CUDA(cudaSetDevice(opt.device));
    cudaError_t e = cudaDeviceEnablePeerAccess(kind.arg, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
    else UM_CUDA(e);
    UM_CUDA(cudaSetDevice(kind.arg));
    e = cudaMalloc(&base_, bytes);
    cudaSetDevice(opt.device);
    UM_CUDA(e);
    gpu_ = base_;
  } else if (n == "managed") {
    const GpuCaps& c = need_gpu(opt.device, n);
    if (!c.managed_memory) throw Skip("the GPU does not support managed memory");
    check_managed_memory(bytes, opt);
    UM_CUDA(cudaSetDevice(opt.device));
    if (kind.get("first_touch") == "cpu") {
      check_host_memory(bytes, opt.allow_host_overcommit);
      count_host(bytes);
    }
    UM_CUDA(cudaMallocManaged(&base_, bytes, cudaMemAttachGlobal));
    cpu_ = gpu_ = base_;
  } else if (n == "pinned") {
    need_gpu(opt.device, n);
    check_host_memory(bytes, opt.allow_host_overcommit);
    count_host(bytes);
    UM_CUDA(cudaSetDevice(opt.device));
    UM_CUDA(cudaMallocHost(&base_, bytes));
    cpu_ = base_;
    UM_CUDA(cudaHostGetDevicePointer(&gpu_, base_, 0));
  } else if (n == "registered") {
    const GpuCaps& c = need_gpu(opt.device, n);
    if (!c.host_register_supported) throw Skip("the GPU does not support cudaHostRegister");
    UM_CUDA(cudaSetDevice(opt.device));
    UM_CUDA(cudaHostRegister(cpu_, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
    registered_ = true;
    UM_CUDA(cudaHostGetDevicePointer(&gpu_, cpu_, 0));
  } else if (n == "system" || n == "numa") {
    const GpuCaps& c = gpu_caps(opt.device);
    if (c.present && c.pageable_memory_access) gpu_ = cpu_;
  }
#else
  if (!is_host_kind(n) || n == "registered")
    throw Skip("kind '" + n + "' needs CUDA, and umbench was built without it");
#endif
}

Buffer::~Buffer() {
  g_host_live -= host_counted_;
#ifdef UMSCOPE_HAVE_CUDA
  if (registered_) cudaHostUnregister(cpu_);
  if (kind_.name == "device" || kind_.name == "managed" || kind_.name == "peer") {
    if (base_) cudaFree(base_);
    return;
  }
  if (kind_.name == "pinned") {
    if (base_) cudaFreeHost(base_);
    return;
  }
#endif
  if (base_ && mapped_) munmap(base_, mapped_);
}

void* Buffer::reach(bool gpu) const {
  void* p = gpu ? gpu_ : cpu_;
  if (!p) throw Skip(gpu ? gpu_unreachable() : cpu_unreachable());
  return p;
}

std::string Buffer::cpu_unreachable() const {
  if (cpu_) return "";
  if (kind_.name == "device" || kind_.name == "peer")
    return "cudaMalloc memory is not mapped into the CPU's address space";
  return "the CPU cannot reach this memory";
}

std::string Buffer::gpu_unreachable() const {
  if (gpu_) return "";
  const GpuCaps& c = gpu_caps(opt_.device);
  if (!c.present) return c.why_absent;
  if (kind_.name == "system" || kind_.name == "numa")
    return "the GPU cannot access pageable host memory on this machine (cudaDevAttrPageableMemoryAccess = 0: "
           "no HMM or ATS)";
  return "the GPU cannot reach this memory";
}

void Buffer::place(const Initializer& init, bool advice) {
  std::string who = kind_.name == "device" || kind_.name == "peer" ? "gpu" : kind_.get("first_touch", "cpu");
  if (who == "cpu") {
    if (!cpu_) throw Skip("first_touch=cpu: " + cpu_unreachable());
    if (init.cpu) init.cpu(cpu_, bytes_);
    else std::memset(cpu_, 0, bytes_);
  } else if (who == "gpu") {
    if (!gpu_) throw Skip("first_touch=gpu: " + gpu_unreachable());
#ifdef UMSCOPE_HAVE_CUDA
    if (init.gpu) init.gpu(gpu_, bytes_);
    else {
      UM_CUDA(cudaMemset(gpu_, 0, bytes_));
      UM_CUDA(cudaDeviceSynchronize());
    }
#endif
  }
#ifdef UMSCOPE_HAVE_CUDA
  if (advice) this->advise();
  std::string pf = kind_.get("prefetch", "none");
  if (pf != "none") prefetch(pf);
#else
  (void)advice;
#endif
}

void Buffer::advise() {
#ifdef UMSCOPE_HAVE_CUDA
  std::string advise = kind_.get("advise", "none");
  if (advise != "none") {
    std::string item;
    size_t start = 0;
    while (start <= advise.size()) {
      size_t plus = advise.find('+', start);
      item = advise.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
      start = plus == std::string::npos ? advise.size() + 1 : plus + 1;
      cudaMemLocation loc{};
      bool gpu_side = item.size() > 4 && item.compare(item.size() - 3, 3, "gpu") == 0;
      loc.type = gpu_side ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
      loc.id = gpu_side ? opt_.device : 0;
      cudaMemoryAdvise a = item.rfind("preferred", 0) == 0   ? cudaMemAdviseSetPreferredLocation
                           : item.rfind("accessed_by", 0) == 0 ? cudaMemAdviseSetAccessedBy
                                                                : cudaMemAdviseSetReadMostly;
      if (!gpu_) throw Skip("advise: " + gpu_unreachable());
      UM_CUDA(cudaMemAdvise(gpu_, bytes_, a, loc));
    }
  }
#endif
}

void Buffer::prefetch(const std::string& where) {
#ifdef UMSCOPE_HAVE_CUDA
  if (!gpu_) throw Skip("prefetch: " + gpu_unreachable());
  cudaMemLocation loc{};
  loc.type = where == "gpu" ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  loc.id = where == "gpu" ? opt_.device : 0;
  UM_CUDA(cudaMemPrefetchAsync(gpu_, bytes_, loc, 0, nullptr));
  UM_CUDA(cudaDeviceSynchronize());
#else
  (void)where;
  throw Skip("prefetch needs CUDA");
#endif
}

std::string Buffer::residency() const {
  const std::string& n = kind_.name;
  if (n == "device" || n == "peer") return "gpu" + std::to_string(n == "peer" ? kind_.arg : opt_.device);
  if (n == "pinned") return "host (pinned)";
#ifdef UMSCOPE_HAVE_CUDA
  if (n == "managed") {
    // What the driver answers for the whole range: the preferred location and the last prefetch's
    // destination (cudaInvalidDeviceId where none was set or the pages differ). Pages that moved on
    // demand since are not seen here: the answer names the hint, not a page census.
    void* p = gpu_ ? gpu_ : cpu_;
    int pref = cudaInvalidDeviceId, last = cudaInvalidDeviceId;
    if (cudaMemRangeGetAttribute(&pref, sizeof pref, cudaMemRangeAttributePreferredLocation, p, bytes_) !=
            cudaSuccess ||
        cudaMemRangeGetAttribute(&last, sizeof last, cudaMemRangeAttributeLastPrefetchLocation, p, bytes_) !=
            cudaSuccess) {
      cudaGetLastError();
      return "unknown";
    }
    auto where = [](int loc) {
      return loc == cudaCpuDeviceId ? std::string("cpu")
             : loc == cudaInvalidDeviceId ? std::string("none") : "gpu" + std::to_string(loc);
    };
    return "managed: last prefetch " + where(last) + ", preferred " + where(pref);
  }
#endif
  if (!cpu_ || !(is_host_kind(n))) return "unknown";
  // Sample a few pages with move_pages: reports the NUMA node backing each.
  int first = -2;
  for (int i = 0; i < 8; ++i) {
    const char* p = static_cast<const char*>(cpu_) + (bytes_ - 1) * i / 7;
    int node = os::node_of(p);
    if (node < 0) return "unknown";
    if (first == -2) first = node;
    else if (node != first) return "mixed";
  }
  return "node" + std::to_string(first);
}

}  // namespace umscope
