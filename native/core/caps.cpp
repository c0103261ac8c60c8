#include "umscope/caps.hpp"

#include <map>
#include <mutex>

#include "umscope/errors.hpp"

namespace umscope {

std::string GpuCaps::addressing() const {
  if (!present) return "none";
  if (pageable_uses_host_page_tables) return "ATS";
  if (pageable_memory_access) return "HMM";
  return "none";
}

#ifdef UMSCOPE_HAVE_CUDA
static GpuCaps probe(int dev) {
  GpuCaps c;
  c.device = dev;
  cudaRuntimeGetVersion(&c.runtime_version);
  cudaDriverGetVersion(&c.driver_version);
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (err == cudaErrorInsufficientDriver && c.driver_version == 0)
      c.why_absent = "no NVIDIA driver is installed (the CUDA runtime found no libcuda)";
    else if (err == cudaErrorNoDevice)
      c.why_absent = "the NVIDIA driver sees no CUDA GPU";
    else
      c.why_absent = std::string("no usable GPU: ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
    cudaGetLastError();
    return c;
  }
  if (dev >= count) {
    c.why_absent = "GPU " + std::to_string(dev) + " requested but only " + std::to_string(count) + " present";
    return c;
  }
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
    c.why_absent = "cudaGetDeviceProperties failed";
    cudaGetLastError();
    return c;
  }
  c.present = true;
  c.name = p.name;
  c.cc_major = p.major;
  c.cc_minor = p.minor;
  c.sms = p.multiProcessorCount;
  c.total_mem = p.totalGlobalMem;
  c.l2_bytes = p.l2CacheSize;
  c.mem_bus_bits = p.memoryBusWidth;
  c.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  c.max_threads_per_block = p.maxThreadsPerBlock;
  c.shared_per_sm = static_cast<int>(p.sharedMemPerMultiprocessor);
  c.regs_per_sm = p.regsPerMultiprocessor;
  c.max_blocks_per_sm = p.maxBlocksPerMultiProcessor;
  char bus[32] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, dev) == cudaSuccess) c.pci_bus_id = bus;
  auto attr = [&](cudaDeviceAttr a) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, a, dev) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    return v;
  };
  c.clock_khz = attr(cudaDevAttrClockRate);
  c.mem_clock_khz = attr(cudaDevAttrMemoryClockRate);
  c.managed_memory = attr(cudaDevAttrManagedMemory) == 1;
  c.concurrent_managed_access = attr(cudaDevAttrConcurrentManagedAccess) == 1;
  c.pageable_memory_access = attr(cudaDevAttrPageableMemoryAccess) == 1;
  c.pageable_uses_host_page_tables = attr(cudaDevAttrPageableMemoryAccessUsesHostPageTables) == 1;
  c.host_native_atomics = attr(cudaDevAttrHostNativeAtomicSupported) == 1;
  c.direct_managed_access_from_host = attr(cudaDevAttrDirectManagedMemAccessFromHost) == 1;
  c.can_use_host_pointer_for_registered = attr(cudaDevAttrCanUseHostPointerForRegisteredMem) == 1;
  c.can_map_host_memory = attr(cudaDevAttrCanMapHostMemory) == 1;
  c.host_register_supported = attr(cudaDevAttrHostRegisterSupported) == 1;
  c.numa_config = attr(cudaDevAttrNumaConfig);
  c.numa_id = attr(cudaDevAttrNumaId);
  if (cudaSetDevice(dev) == cudaSuccess) {
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) == cudaSuccess) c.free_mem = f;
    cudaGetLastError();
  }
  return c;
}
#else
static GpuCaps probe(int dev) {
  GpuCaps c;
  c.device = dev;
  c.why_absent = "umbench was built without CUDA (no nvcc was found at build time)";
  return c;
}
#endif

std::vector<std::string> gpu_bus_ids() {
  std::vector<std::string> out;
#ifdef UMSCOPE_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return out;
  }
  for (int d = 0; d < count; ++d) {
    char bus[32] = {0};
    out.push_back(cudaDeviceGetPCIBusId(bus, sizeof bus, d) == cudaSuccess ? bus : "");
  }
#endif
  return out;
}

namespace {
std::mutex caps_mu;
std::map<int, GpuCaps> caps_cache;
}  // namespace

const GpuCaps& gpu_caps(int device) {
  std::lock_guard<std::mutex> lk(caps_mu);
  auto it = caps_cache.find(device);
  if (it == caps_cache.end()) it = caps_cache.emplace(device, probe(device)).first;
  return it->second;
}

void forget_gpu_caps() {
  std::lock_guard<std::mutex> lk(caps_mu);
  caps_cache.clear();
}

}  // namespace umscope
