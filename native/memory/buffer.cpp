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
  } else if (n == "async") {
    alloc_async();
  } else if (n == "vmm") {
    alloc_vmm();
  } else if (n == "hostalloc") {
    alloc_hostalloc();
  } else if (n == "system" || n == "numa") {
    const GpuCaps& c = gpu_caps(opt.device);
    if (c.present && c.pageable_memory_access) gpu_ = cpu_;
  }
#else
  if (!is_host_kind(n) || n == "registered")
    throw Skip("kind '" + n + "' needs CUDA, and umbench was built without it");
#endif
}

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

void Buffer::alloc_async() {
  const std::string where = kind_.get("pool", "device");
  need_gpu(opt_.device, kind_.name);
  UM_CUDA(cudaSetDevice(opt_.device));
  if (where != "device") check_host_memory(bytes_, opt_.allow_host_overcommit);
  const AsyncPool p = async_pool(opt_.device, where);
  void* ptr = nullptr;
  UM_CUDA(cudaMallocFromPoolAsync(&ptr, bytes_, p.pool, p.stream));
  UM_CUDA(cudaStreamSynchronize(p.stream));  // from here the block is usable on every stream
  base_ = gpu_ = ptr;
  pool_ = p.pool;
  if (where == "device") {
    cpu_why_ = "memory from a cudaMallocAsync pool on the GPU is not mapped into the CPU's address space";
  } else {
    cpu_ = ptr;
    count_host(bytes_);
  }
}

void Buffer::alloc_vmm() {
  const std::string where = kind_.get("location", "device");
  const int node = host_node_of(where);
  need_gpu(opt_.device, kind_.name);
  UM_CUDA(cudaSetDevice(opt_.device));
  UM_CUDA(cudaFree(nullptr));  // the device's primary context current, as the driver API needs
  const DriverApi& d = driver_api();
  if (!d.why.empty()) throw Skip("kind 'vmm': " + d.why);
  int vmm = 0;
  if (d.attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, opt_.device) != CUDA_SUCCESS || !vmm)
    throw Skip("kind 'vmm': the GPU or driver has no virtual memory management "
               "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 0)");
  const std::string what = location_text(where, opt_.device, "CU_MEM_LOCATION_TYPE_HOST", "CU_MEM_LOCATION_TYPE_HOST_NUMA");
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  const cudaMemLocation loc = mem_location(where, opt_.device);
  prop.location.type = static_cast<CUmemLocationType>(loc.type);  // the same values (static_assert above)
  prop.location.id = loc.id;
  // What the driver cannot do is a skip with its reason; running out of memory is a failure, as for cudaMalloc.
  auto refused = [&](const char* call, CUresult r) {
    release_vmm();
    std::string why = std::string("kind 'vmm': ") + call + " at " + what + " refused by the driver: " + cu_text(d, r);
    if (node >= 0) {
      int numa = -1;
      d.attribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, opt_.device);
      why += " (CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = " + std::to_string(numa) + ")";
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY) throw std::runtime_error(why);
    throw Skip(why);
  };
  if (where != "device") check_host_memory(bytes_, opt_.allow_host_overcommit);
  size_t gran = 0;
  CUresult r = d.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  if (r != CUDA_SUCCESS || gran == 0) refused("cuMemGetAllocationGranularity", r);
  vmm_size_ = (bytes_ + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h = 0;
  if ((r = d.create(&h, vmm_size_, &prop, 0)) != CUDA_SUCCESS) refused("cuMemCreate", r);
  vmm_handle_ = h;
  CUdeviceptr va = 0;
  if ((r = d.reserve(&va, vmm_size_, gran, 0, 0)) != CUDA_SUCCESS) refused("cuMemAddressReserve", r);
  base_ = reinterpret_cast<void*>(va);
  if ((r = d.map(va, vmm_size_, 0, h, 0)) != CUDA_SUCCESS) refused("cuMemMap", r);
  vmm_mapped_ = true;
  CUmemAccessDesc gpu{};
  gpu.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  gpu.location.id = opt_.device;
  gpu.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if ((r = d.set_access(va, vmm_size_, &gpu, 1)) != CUDA_SUCCESS) refused("cuMemSetAccess for the GPU", r);
  gpu_ = base_;
  if (where == "device") {
    cpu_why_ = "cuMemCreate memory at a GPU location is not mapped into the CPU's address space";
    return;
  }
  count_host(vmm_size_);
  // The CPU's access to host memory is asked for too; where the driver refuses it the GPU keeps its mapping.
  CUmemAccessDesc cpu{};
  cpu.location = prop.location;
  cpu.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if ((r = d.set_access(va, vmm_size_, &cpu, 1)) == CUDA_SUCCESS) cpu_ = base_;
  else cpu_why_ = "cuMemSetAccess for the CPU on memory at " + what + " refused by the driver: " + cu_text(d, r);
}

void Buffer::release_vmm() {
  if (!base_ && !vmm_handle_) return;
  const DriverApi& d = driver_api();
  const CUdeviceptr va = reinterpret_cast<CUdeviceptr>(base_);
  if (vmm_mapped_) {
    cudaDeviceSynchronize();  // no kernel or copy still uses the mapping (cudaFree's implicit synchronisation)
    d.unmap(va, vmm_size_);
  }
  if (base_) d.address_free(va, vmm_size_);
  if (vmm_handle_) d.release(vmm_handle_);
  vmm_mapped_ = false;
  vmm_handle_ = 0;
  base_ = cpu_ = gpu_ = nullptr;
}

void Buffer::alloc_hostalloc() {
  need_gpu(opt_.device, kind_.name);
  check_host_memory(bytes_, opt_.allow_host_overcommit);
  const std::string flags = kind_.get("flags", "default");
  UM_CUDA(cudaSetDevice(opt_.device));
  UM_CUDA(cudaHostAlloc(&base_, bytes_, host_alloc_flags(flags)));
  count_host(bytes_);
  cpu_ = base_;
  // With unified addressing the driver maps page-locked memory for every GPU whatever the flags say; it gives
  // the GPU's pointer, or says why not.
  const cudaError_t e = cudaHostGetDevicePointer(&gpu_, base_, 0);
  if (e != cudaSuccess) {
    cudaGetLastError();
    gpu_ = nullptr;
    gpu_why_ = "cudaHostGetDevicePointer on cudaHostAlloc memory (flags=" + flags + "): " + cuda_text(e);
  }
}
#endif

Buffer::~Buffer() {
  g_host_live -= host_counted_;
#ifdef UMSCOPE_HAVE_CUDA
  if (registered_) cudaHostUnregister(cpu_);
  if (kind_.name == "async") {
    free_async(base_, pool_, opt_.device);
    return;
  }
  if (kind_.name == "vmm") {
    release_vmm();
    return;
  }
  if (kind_.name == "hostalloc") {
    if (base_) cudaFreeHost(base_);
    return;
  }
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
  if (!cpu_why_.empty()) return cpu_why_;
  if (kind_.name == "device" || kind_.name == "peer")
    return "cudaMalloc memory is not mapped into the CPU's address space";
  return "the CPU cannot reach this memory";
}

std::string Buffer::gpu_unreachable() const {
  if (gpu_) return "";
  const GpuCaps& c = gpu_caps(opt_.device);
  if (!c.present) return c.why_absent;
  if (!gpu_why_.empty()) return gpu_why_;
  if (kind_.name == "system" || kind_.name == "numa")
    return "the GPU cannot access pageable host memory on this machine (cudaDevAttrPageableMemoryAccess = 0: "
           "no HMM or ATS)";
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
  if (n == "pinned" || n == "hostalloc") return "host (pinned)";
  if (n == "async" || n == "vmm")
    return kind_place(kind_, opt_.device).location == "gpu" ? "gpu" + std::to_string(opt_.device) : "host (pinned)";
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
