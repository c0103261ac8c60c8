// Buffer: allocation, placement and release of every memory kind.
#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <map>
#include <mutex>
#include <utility>

#include "umscope/advice.hpp"
#include "umscope/caps.hpp"
#include "umscope/errors.hpp"
#include "umscope/memory.hpp"
#include "umscope/os.hpp"
#include "umscope/sizes.hpp"

#ifdef UMSCOPE_HAVE_CUDA
#include <cudaTypedefs.h>  // the driver API's function types: its entry points come through the runtime, no -lcuda
#endif

namespace umscope {

namespace {
constexpr size_t kHugeAlign = size_t(2) << 20;

#ifdef UMSCOPE_HAVE_CUDA
const GpuCaps& need_gpu(int dev, const std::string& kind) {
  const GpuCaps& c = gpu_caps(dev);
  if (!c.present) throw Skip("kind '" + kind + "' needs a GPU: " + c.why_absent);
  return c;
}
#endif
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

// UMSCOPE_HOST_MEM_LIMIT: a size in umscope's grammar (umscope/sizes.hpp), a bad one named as this variable.
size_t limit_bytes(const char* text) {
  try {
    return parse_bytes(text);
  } catch (const UsageError&) {
    throw UsageError(std::string("UMSCOPE_HOST_MEM_LIMIT takes a size such as 8G, got '") + text + "'");
  }
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
    : kind_(kind), bytes_(bytes), opt_(opt), ops_(kind_info(kind.name).ops) {
  if (bytes == 0) throw UsageError("buffer size must be positive");
  try {
    ops_->allocate(*this);
  } catch (...) {
    // A constructor that throws runs no destructor: what the kind had taken by then (its host bytes in the
    // case's total, an mmap, a registration, a pool block) is given back here, or a batch's later cases would
    // be checked against host bytes no buffer holds. Every release takes a partly made buffer.
    release();
    throw;
  }
}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  g_host_live -= host_counted_;
  host_counted_ = 0;
  ops_->release(*this);
}

// Every kind's functions, which its KindOps (at the end of this file) hands to the registry entry: a Buffer
// calls them through ops_, so none of them, and nothing else here, asks for a kind by its name.
struct BufferKinds {
  // system, numa and registered: ordinary host pages from mmap, on a 2 MiB boundary, with the page= policy.
  static void map_host(Buffer& b) {
    check_host_memory(b.bytes_, b.opt_.allow_host_overcommit);
    b.count_host(b.bytes_);
    // Over-allocate so the buffer can start on a 2 MiB boundary (needed for THP).
    b.mapped_ = b.bytes_ + kHugeAlign;
    b.base_ = mmap(nullptr, b.mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b.base_ == MAP_FAILED) {
      b.base_ = nullptr;
      throw Refused("mmap of " + gib_text(b.bytes_) + " failed: " + std::strerror(errno));
    }
    auto aligned = (reinterpret_cast<uintptr_t>(b.base_) + kHugeAlign - 1) & ~(kHugeAlign - 1);
    b.cpu_ = reinterpret_cast<void*>(aligned);
    std::string page = b.kind_.get("page", "default");
    if (page == "thp" && madvise(b.cpu_, b.bytes_, MADV_HUGEPAGE) != 0)
      throw Skip(std::string("MADV_HUGEPAGE refused: ") + std::strerror(errno) + " (THP mode '" +
                 os::thp_mode() + "')");
    if (page == "base") madvise(b.cpu_, b.bytes_, MADV_NOHUGEPAGE);
  }
  static void unmap_host(Buffer& b) {
    if (b.base_ && b.mapped_) munmap(b.base_, b.mapped_);
  }
  // Pageable memory (system, numa): the GPU reaches it where the platform has HMM or ATS.
  static void pageable_for_gpu(Buffer& b) {
#ifdef UMSCOPE_HAVE_CUDA
    const GpuCaps& c = gpu_caps(b.opt_.device);
    if (c.present && c.pageable_memory_access) b.gpu_ = b.cpu_;
#endif
    if (!b.gpu_)
      b.gpu_why_ = "the GPU cannot access pageable host memory on this machine (cudaDevAttrPageableMemoryAccess = 0: "
                   "no HMM or ATS)";
  }
  static void system_allocate(Buffer& b) {
    map_host(b);
    pageable_for_gpu(b);
  }
  static void numa_allocate(Buffer& b) {
    map_host(b);
    const int node = b.kind_.arg;
    bool exists = false;
    for (int n : os::numa_nodes()) exists = exists || n == node;
    if (!exists) throw Skip("NUMA node " + std::to_string(node) + " does not exist on this machine");
    std::string err = os::bind_to_node(b.cpu_, b.bytes_, node);
    if (!err.empty()) throw Skip("cannot bind to NUMA node " + std::to_string(node) + ": " + err);
    pageable_for_gpu(b);
  }
  // The NUMA node backing a few sampled pages (move_pages), "mixed" where they differ.
  static std::string node_residency(const Buffer& b) {
    if (!b.cpu_) return "unknown";
    int first = -2;
    for (int i = 0; i < 8; ++i) {
      const char* p = static_cast<const char*>(b.cpu_) + (b.bytes_ - 1) * i / 7;
      int node = os::node_of(p);
      if (node < 0) return "unknown";
      if (first == -2) first = node;
      else if (node != first) return "mixed";
    }
    return "node" + std::to_string(first);
  }
  static std::string on_the_gpu(const Buffer& b) { return "gpu" + std::to_string(b.opt_.device); }
  static std::string on_the_peer(const Buffer& b) { return "gpu" + std::to_string(b.kind_.arg); }
  static std::string pinned_host(const Buffer&) { return "host (pinned)"; }
  // async and vmm: on the GPU, or in page-locked host memory, as their pool= or location= policy says.
  static std::string where_placed(const Buffer& b) {
    return kind_place(b.kind_, b.opt_.device).location == "gpu" ? on_the_gpu(b) : pinned_host(b);
  }

#ifdef UMSCOPE_HAVE_CUDA
  static void device_allocate(Buffer& b);
  static void peer_allocate(Buffer& b);
  static void managed_allocate(Buffer& b);
  static std::string managed_residency(const Buffer& b);
  static void pinned_allocate(Buffer& b);
  static void registered_allocate(Buffer& b);
  static void registered_release(Buffer& b);
  static void async_allocate(Buffer& b);
  static void async_release(Buffer& b);
  static void vmm_allocate(Buffer& b);
  static void vmm_release(Buffer& b);
  static void hostalloc_allocate(Buffer& b);
  static void cuda_free(Buffer& b) {
    if (b.base_) cudaFree(b.base_);
  }
  static void cuda_free_host(Buffer& b) {
    if (b.base_) cudaFreeHost(b.base_);
  }
#else
  // Without CUDA a CUDA kind is a skip with the reason (registered's once its host pages are mapped, as with
  // CUDA), and no buffer of one is made to be released or located.
  static void needs_cuda(Buffer& b) {
    throw Skip("kind '" + b.kind_.name + "' needs CUDA, and umbench was built without it");
  }
  static void registered_allocate(Buffer& b) {
    map_host(b);
    needs_cuda(b);
  }
  static void nothing(Buffer&) {}
  static std::string unknown(const Buffer&) { return "unknown"; }
  static constexpr auto device_allocate = needs_cuda, peer_allocate = needs_cuda, managed_allocate = needs_cuda,
                        pinned_allocate = needs_cuda, async_allocate = needs_cuda, vmm_allocate = needs_cuda,
                        hostalloc_allocate = needs_cuda;
  static constexpr auto cuda_free = nothing, cuda_free_host = nothing, async_release = nothing,
                        vmm_release = nothing;
  static constexpr auto registered_release = unmap_host;  // its host pages were mapped before the skip
  static constexpr auto managed_residency = unknown;
#endif
};

#ifdef UMSCOPE_HAVE_CUDA
namespace {
std::string cuda_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

// The place a pool's or cuMemCreate's location policy names, in words: "device", "host" or "host:N".
std::string location_text(const std::string& where, int device, const char* host_type, const char* numa_type) {
  if (where == "device") return "GPU " + std::to_string(device);
  const int node = host_node_of(where);
  if (node < 0) return std::string("the host (") + host_type + ")";
  return "host NUMA node " + std::to_string(node) + " (" + numa_type + ")";
}

// The location a pool=/location= policy names ("device", "host", "host:N") for GPU `device`.
cudaMemLocation mem_location(const std::string& where, int device) {
  const int node = host_node_of(where);
  cudaMemLocation loc{};
  loc.type = where == "device" ? cudaMemLocationTypeDevice : node < 0 ? cudaMemLocationTypeHost : cudaMemLocationTypeHostNuma;
  loc.id = where == "device" ? device : node < 0 ? 0 : node;
  return loc;
}
static_assert(int(cudaMemLocationTypeDevice) == int(CU_MEM_LOCATION_TYPE_DEVICE) &&
                  int(cudaMemLocationTypeHost) == int(CU_MEM_LOCATION_TYPE_HOST) &&
                  int(cudaMemLocationTypeHostNuma) == int(CU_MEM_LOCATION_TYPE_HOST_NUMA),
              "the runtime's and the driver's memory location types agree");

// async: one pool, and the stream its blocks are allocated and freed on, per GPU and location, made at first
// use and kept for the process, as a stream-ordered allocator keeps its pool. A freed block goes back to the
// pool, and the pool's unused memory back to the driver (trimmed), so a case leaves nothing reserved behind.
struct AsyncPool {
  cudaMemPool_t pool = nullptr;
  cudaStream_t stream = nullptr;
};
std::mutex g_pool_mu;
std::map<std::pair<int, std::string>, AsyncPool> g_pools;

AsyncPool async_pool(int device, const std::string& where) {
  std::lock_guard<std::mutex> lk(g_pool_mu);
  const auto key = std::make_pair(device, where);
  auto it = g_pools.find(key);
  if (it != g_pools.end()) return it->second;
  int supported = 0;
  if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess || !supported) {
    cudaGetLastError();
    throw Skip("kind 'async': the GPU or driver has no stream-ordered memory pools "
               "(cudaDevAttrMemoryPoolsSupported = 0)");
  }
  const int node = host_node_of(where);
  const std::string what = location_text(where, device, "cudaMemLocationTypeHost", "cudaMemLocationTypeHostNuma");
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location = mem_location(where, device);
  AsyncPool p;
  cudaError_t e = cudaMemPoolCreate(&p.pool, &props);
  if (e != cudaSuccess) {
    cudaGetLastError();
    std::string why = "kind 'async': cudaMemPoolCreate at " + what + " refused by the driver: " + cuda_text(e);
    if (node >= 0) {
      int numa = -1;
      if (cudaDeviceGetAttribute(&numa, cudaDevAttrHostNumaMemoryPoolsSupported, device) != cudaSuccess) cudaGetLastError();
      why += " (cudaDevAttrHostNumaMemoryPoolsSupported = " + std::to_string(numa) + ")";
    }
    throw Skip(why);
  }
  if (where != "device") {
    // A host pool is reachable from the CPU by default; the GPU under test is given read-write access.
    cudaMemAccessDesc a{};
    a.location.type = cudaMemLocationTypeDevice;
    a.location.id = device;
    a.flags = cudaMemAccessFlagsProtReadWrite;
    e = cudaMemPoolSetAccess(p.pool, &a, 1);
    if (e != cudaSuccess) {
      cudaGetLastError();
      cudaMemPoolDestroy(p.pool);
      throw Skip("kind 'async': cudaMemPoolSetAccess for GPU " + std::to_string(device) + " on a pool at " + what +
                 " refused by the driver: " + cuda_text(e));
    }
  }
  UM_CUDA(cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking));
  g_pools[key] = p;
  return p;
}

void free_async(void* ptr, void* pool, int device) {
  if (!ptr) return;
  cudaStream_t stream = nullptr;
  {
    std::lock_guard<std::mutex> lk(g_pool_mu);
    for (auto& kv : g_pools)
      if (kv.second.pool == pool) stream = kv.second.stream;
  }
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
  cudaSetDevice(device);
  // Work of any stream that used the block ends first (as cudaFree's implicit synchronisation does); then the
  // block goes back to its pool in the pool stream's order and the pool's unused memory back to the driver.
  cudaDeviceSynchronize();
  cudaFreeAsync(ptr, stream);
  cudaStreamSynchronize(stream);
  cudaMemPoolTrimTo(static_cast<cudaMemPool_t>(pool), 0);
  if (prev >= 0) cudaSetDevice(prev);
}

// vmm: the driver API's entry points, through the runtime (cudaGetDriverEntryPointByVersion), so umbench and
// libumalloc link no libcuda. ABI of CUDA 12.0; none of these changed since 10.2.
struct DriverApi {
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemAddressReserve_v10020 reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
  PFN_cuDeviceGetAttribute_v2000 attribute = nullptr;
  PFN_cuGetErrorName_v6000 error_name = nullptr;
  PFN_cuGetErrorString_v6000 error_string = nullptr;
  std::string why;  // the first entry point the driver did not give ("" when all came)
};

const DriverApi& driver_api() {
  static const DriverApi api = [] {
    DriverApi a;
    auto get = [&a](const char* name, void* fn) {
      if (!a.why.empty()) return;
      void** slot = static_cast<void**>(fn);
      cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
      const cudaError_t e = cudaGetDriverEntryPointByVersion(name, slot, 12000, cudaEnableDefault, &q);
      if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !*slot) {
        cudaGetLastError();
        a.why = std::string("the driver gives no ") + name + " (cudaGetDriverEntryPointByVersion: " +
                (e != cudaSuccess ? cuda_text(e)
                 : q == cudaDriverEntryPointVersionNotSufficent ? "the driver is older than CUDA 12.0"
                                                                 : "symbol not found") +
                ")";
      }
    };
    get("cuMemCreate", &a.create);
    get("cuMemRelease", &a.release);
    get("cuMemAddressReserve", &a.reserve);
    get("cuMemAddressFree", &a.address_free);
    get("cuMemMap", &a.map);
    get("cuMemUnmap", &a.unmap);
    get("cuMemSetAccess", &a.set_access);
    get("cuMemGetAllocationGranularity", &a.granularity);
    get("cuDeviceGetAttribute", &a.attribute);
    get("cuGetErrorName", &a.error_name);
    get("cuGetErrorString", &a.error_string);
    return a;
  }();
  return api;
}

std::string cu_text(const DriverApi& d, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  d.error_name(r, &name);
  d.error_string(r, &text);
  return std::string(name ? name : "CUresult " + std::to_string(static_cast<int>(r))) + ": " + (text ? text : "");
}

unsigned host_alloc_flags(const std::string& flags) {
  unsigned f = cudaHostAllocDefault;
  size_t start = 0;
  while (start <= flags.size()) {
    const size_t plus = flags.find('+', start);
    const std::string item = flags.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
    start = plus == std::string::npos ? flags.size() + 1 : plus + 1;
    if (item == "mapped") f |= cudaHostAllocMapped;
    else if (item == "wc") f |= cudaHostAllocWriteCombined;
    else if (item == "portable") f |= cudaHostAllocPortable;
  }
  return f;
}
}  // namespace

void BufferKinds::device_allocate(Buffer& b) {
  need_gpu(b.opt_.device, b.kind_.name);
  UM_CUDA(cudaSetDevice(b.opt_.device));
  UM_CUDA(cudaMalloc(&b.base_, b.bytes_));
  b.gpu_ = b.base_;
  b.cpu_why_ = "cudaMalloc memory is not mapped into the CPU's address space";
}

void BufferKinds::peer_allocate(Buffer& b) {
  const int dev = b.opt_.device, peer = b.kind_.arg;
  need_gpu(dev, b.kind_.name);
  int count = 0;
  UM_CUDA(cudaGetDeviceCount(&count));
  if (peer == dev) throw Skip("peer:N names another GPU than the one under test (GPU " + std::to_string(dev) + ")");
  if (peer >= count) throw Skip("no GPU " + std::to_string(peer) + ": this machine has " + std::to_string(count));
  int can = 0;
  UM_CUDA(cudaDeviceCanAccessPeer(&can, dev, peer));
  if (!can) throw Skip("GPU " + std::to_string(dev) + " has no peer access to GPU " + std::to_string(peer));
  UM_CUDA(cudaSetDevice(dev));
  cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
  else UM_CUDA(e);
  UM_CUDA(cudaSetDevice(peer));
  e = cudaMalloc(&b.base_, b.bytes_);
  cudaSetDevice(dev);
  UM_CUDA(e);
  b.gpu_ = b.base_;
  b.cpu_why_ = "cudaMalloc memory is not mapped into the CPU's address space";
}

void BufferKinds::managed_allocate(Buffer& b) {
  const GpuCaps& c = need_gpu(b.opt_.device, b.kind_.name);
  if (!c.managed_memory) throw Skip("the GPU does not support managed memory");
  check_managed_memory(b.bytes_, b.opt_);
  UM_CUDA(cudaSetDevice(b.opt_.device));
  if (b.kind_.get("first_touch") == "cpu") {
    check_host_memory(b.bytes_, b.opt_.allow_host_overcommit);
    b.count_host(b.bytes_);
  }
  UM_CUDA(cudaMallocManaged(&b.base_, b.bytes_, cudaMemAttachGlobal));
  b.cpu_ = b.gpu_ = b.base_;
}

std::string BufferKinds::managed_residency(const Buffer& b) {
  // What the driver answers for the whole range: the preferred location and the last prefetch's
  // destination (cudaInvalidDeviceId where none was set or the pages differ). Pages that moved on
  // demand since are not seen here: the answer names the hint, not a page census.
  void* p = b.gpu_ ? b.gpu_ : b.cpu_;
  int pref = cudaInvalidDeviceId, last = cudaInvalidDeviceId;
  if (cudaMemRangeGetAttribute(&pref, sizeof pref, cudaMemRangeAttributePreferredLocation, p, b.bytes_) !=
          cudaSuccess ||
      cudaMemRangeGetAttribute(&last, sizeof last, cudaMemRangeAttributeLastPrefetchLocation, p, b.bytes_) !=
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

void BufferKinds::pinned_allocate(Buffer& b) {
  need_gpu(b.opt_.device, b.kind_.name);
  check_host_memory(b.bytes_, b.opt_.allow_host_overcommit);
  b.count_host(b.bytes_);
  UM_CUDA(cudaSetDevice(b.opt_.device));
  UM_CUDA(cudaMallocHost(&b.base_, b.bytes_));
  b.cpu_ = b.base_;
  UM_CUDA(cudaHostGetDevicePointer(&b.gpu_, b.base_, 0));
}

void BufferKinds::registered_allocate(Buffer& b) {
  map_host(b);
  const GpuCaps& c = need_gpu(b.opt_.device, b.kind_.name);
  if (!c.host_register_supported) throw Skip("the GPU does not support cudaHostRegister");
  UM_CUDA(cudaSetDevice(b.opt_.device));
  UM_CUDA(cudaHostRegister(b.cpu_, b.bytes_, cudaHostRegisterMapped | cudaHostRegisterPortable));
  b.registered_ = true;
  UM_CUDA(cudaHostGetDevicePointer(&b.gpu_, b.cpu_, 0));
}

void BufferKinds::registered_release(Buffer& b) {
  if (b.registered_) cudaHostUnregister(b.cpu_);
  unmap_host(b);
}

void BufferKinds::async_allocate(Buffer& b) {
  const std::string where = b.kind_.get("pool", "device");
  need_gpu(b.opt_.device, b.kind_.name);
  UM_CUDA(cudaSetDevice(b.opt_.device));
  if (where != "device") check_host_memory(b.bytes_, b.opt_.allow_host_overcommit);
  const AsyncPool p = async_pool(b.opt_.device, where);
  void* ptr = nullptr;
  UM_CUDA(cudaMallocFromPoolAsync(&ptr, b.bytes_, p.pool, p.stream));
  UM_CUDA(cudaStreamSynchronize(p.stream));  // from here the block is usable on every stream
  b.base_ = b.gpu_ = ptr;
  b.pool_ = p.pool;
  if (where == "device") {
    b.cpu_why_ = "memory from a cudaMallocAsync pool on the GPU is not mapped into the CPU's address space";
  } else {
    b.cpu_ = ptr;
    b.count_host(b.bytes_);
  }
}

void BufferKinds::vmm_allocate(Buffer& b) {
  const std::string where = b.kind_.get("location", "device");
  const int node = host_node_of(where);
  need_gpu(b.opt_.device, b.kind_.name);
  UM_CUDA(cudaSetDevice(b.opt_.device));
  UM_CUDA(cudaFree(nullptr));  // the device's primary context current, as the driver API needs
  const DriverApi& d = driver_api();
  if (!d.why.empty()) throw Skip("kind 'vmm': " + d.why);
  int vmm = 0;
  if (d.attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, b.opt_.device) != CUDA_SUCCESS || !vmm)
    throw Skip("kind 'vmm': the GPU or driver has no virtual memory management "
               "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 0)");
  const std::string what = location_text(where, b.opt_.device, "CU_MEM_LOCATION_TYPE_HOST", "CU_MEM_LOCATION_TYPE_HOST_NUMA");
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  const cudaMemLocation loc = mem_location(where, b.opt_.device);
  prop.location.type = static_cast<CUmemLocationType>(loc.type);  // the same values (static_assert above)
  prop.location.id = loc.id;
  // What the driver cannot do is a skip with its reason; running out of memory is a failure, as for cudaMalloc.
  auto refused = [&](const char* call, CUresult r) {
    vmm_release(b);
    std::string why = std::string("kind 'vmm': ") + call + " at " + what + " refused by the driver: " + cu_text(d, r);
    if (node >= 0) {
      int numa = -1;
      d.attribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, b.opt_.device);
      why += " (CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = " + std::to_string(numa) + ")";
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY) throw std::runtime_error(why);
    throw Skip(why);
  };
  if (where != "device") check_host_memory(b.bytes_, b.opt_.allow_host_overcommit);
  size_t gran = 0;
  CUresult r = d.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  if (r != CUDA_SUCCESS || gran == 0) refused("cuMemGetAllocationGranularity", r);
  b.vmm_size_ = (b.bytes_ + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h = 0;
  if ((r = d.create(&h, b.vmm_size_, &prop, 0)) != CUDA_SUCCESS) refused("cuMemCreate", r);
  b.vmm_handle_ = h;
  CUdeviceptr va = 0;
  if ((r = d.reserve(&va, b.vmm_size_, gran, 0, 0)) != CUDA_SUCCESS) refused("cuMemAddressReserve", r);
  b.base_ = reinterpret_cast<void*>(va);
  if ((r = d.map(va, b.vmm_size_, 0, h, 0)) != CUDA_SUCCESS) refused("cuMemMap", r);
  b.vmm_mapped_ = true;
  CUmemAccessDesc gpu{};
  gpu.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  gpu.location.id = b.opt_.device;
  gpu.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if ((r = d.set_access(va, b.vmm_size_, &gpu, 1)) != CUDA_SUCCESS) refused("cuMemSetAccess for the GPU", r);
  b.gpu_ = b.base_;
  if (where == "device") {
    b.cpu_why_ = "cuMemCreate memory at a GPU location is not mapped into the CPU's address space";
    return;
  }
  b.count_host(b.vmm_size_);
  // The CPU's access to host memory is asked for too; where the driver refuses it the GPU keeps its mapping.
  CUmemAccessDesc cpu{};
  cpu.location = prop.location;
  cpu.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if ((r = d.set_access(va, b.vmm_size_, &cpu, 1)) == CUDA_SUCCESS) b.cpu_ = b.base_;
  else b.cpu_why_ = "cuMemSetAccess for the CPU on memory at " + what + " refused by the driver: " + cu_text(d, r);
}

void BufferKinds::vmm_release(Buffer& b) {
  if (!b.base_ && !b.vmm_handle_) return;
  const DriverApi& d = driver_api();
  const CUdeviceptr va = reinterpret_cast<CUdeviceptr>(b.base_);
  if (b.vmm_mapped_) {
    cudaDeviceSynchronize();  // no kernel or copy still uses the mapping (cudaFree's implicit synchronisation)
    d.unmap(va, b.vmm_size_);
  }
  if (b.base_) d.address_free(va, b.vmm_size_);
  if (b.vmm_handle_) d.release(b.vmm_handle_);
  b.vmm_mapped_ = false;
  b.vmm_handle_ = 0;
  b.base_ = b.cpu_ = b.gpu_ = nullptr;
}

void BufferKinds::hostalloc_allocate(Buffer& b) {
  need_gpu(b.opt_.device, b.kind_.name);
  check_host_memory(b.bytes_, b.opt_.allow_host_overcommit);
  const std::string flags = b.kind_.get("flags", "default");
  UM_CUDA(cudaSetDevice(b.opt_.device));
  UM_CUDA(cudaHostAlloc(&b.base_, b.bytes_, host_alloc_flags(flags)));
  b.count_host(b.bytes_);
  b.cpu_ = b.base_;
  // With unified addressing the driver maps page-locked memory for every GPU whatever the flags say; it gives
  // the GPU's pointer, or says why not.
  const cudaError_t e = cudaHostGetDevicePointer(&b.gpu_, b.base_, 0);
  if (e != cudaSuccess) {
    cudaGetLastError();
    b.gpu_ = nullptr;
    b.gpu_why_ = "cudaHostGetDevicePointer on cudaHostAlloc memory (flags=" + flags + "): " + cuda_text(e);
  }
}

void BufferKinds::async_release(Buffer& b) { free_async(b.base_, b.pool_, b.opt_.device); }
#endif

// Each kind's functions, as its registry entry (kinds.cpp) names them: allocate, release, residency.
extern const KindOps kDeviceOps{BufferKinds::device_allocate, BufferKinds::cuda_free, BufferKinds::on_the_gpu};
extern const KindOps kPeerOps{BufferKinds::peer_allocate, BufferKinds::cuda_free, BufferKinds::on_the_peer};
extern const KindOps kManagedOps{BufferKinds::managed_allocate, BufferKinds::cuda_free,
                                 BufferKinds::managed_residency};
extern const KindOps kPinnedOps{BufferKinds::pinned_allocate, BufferKinds::cuda_free_host, BufferKinds::pinned_host};
extern const KindOps kRegisteredOps{BufferKinds::registered_allocate, BufferKinds::registered_release,
                                    BufferKinds::node_residency};
extern const KindOps kSystemOps{BufferKinds::system_allocate, BufferKinds::unmap_host, BufferKinds::node_residency};
extern const KindOps kNumaOps{BufferKinds::numa_allocate, BufferKinds::unmap_host, BufferKinds::node_residency};
extern const KindOps kAsyncOps{BufferKinds::async_allocate, BufferKinds::async_release, BufferKinds::where_placed};
extern const KindOps kVmmOps{BufferKinds::vmm_allocate, BufferKinds::vmm_release, BufferKinds::where_placed};
extern const KindOps kHostallocOps{BufferKinds::hostalloc_allocate, BufferKinds::cuda_free_host,
                                   BufferKinds::pinned_host};

void* Buffer::reach(bool gpu) const {
  void* p = gpu ? gpu_ : cpu_;
  if (!p) throw Skip(gpu ? gpu_unreachable() : cpu_unreachable());
  return p;
}

std::string Buffer::cpu_unreachable() const {
  if (cpu_) return "";
  if (!cpu_why_.empty()) return cpu_why_;
  return "the CPU cannot reach this memory";
}

std::string Buffer::gpu_unreachable() const {
  if (gpu_) return "";
  const GpuCaps& c = gpu_caps(opt_.device);
  if (!c.present) return c.why_absent;
  if (!gpu_why_.empty()) return gpu_why_;
  return "the GPU cannot reach this memory";
}

void Buffer::place(const Initializer& init, bool advice) {
  // The first_touch policy where the kind takes one; otherwise the CPU where it reaches the memory, else the GPU.
  std::string who = kind_.get("first_touch", cpu_ ? "cpu" : "gpu");
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
  std::vector<Advice> hints;
  std::string bad;
  if (!parse_advice(kind_.get("advise", "none"), &hints, &bad)) throw UsageError("advise=" + bad + ": not an advice");
  for (const Advice& h : hints) {
    cudaMemLocation loc{};
    loc.type = h.gpu ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
    loc.id = h.gpu ? opt_.device : 0;
    const cudaMemoryAdvise a = h.what == Advice::preferred     ? cudaMemAdviseSetPreferredLocation
                               : h.what == Advice::accessed_by ? cudaMemAdviseSetAccessedBy
                                                               : cudaMemAdviseSetReadMostly;
    if (!gpu_) throw Skip("advise: " + gpu_unreachable());
    UM_CUDA(cudaMemAdvise(gpu_, bytes_, a, loc));
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

std::string Buffer::residency() const { return ops_->residency(*this); }

}  // namespace umscope
