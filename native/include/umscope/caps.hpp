// Capabilities of the machine that decide which memory kinds and which
// processor/memory pairs a case can use. Read once per process.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace umscope {

struct GpuCaps {
  bool present = false;
  std::string why_absent;  // set when !present
  int device = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sms = 0;
  size_t total_mem = 0, free_mem = 0;
  int l2_bytes = 0;
  int clock_khz = 0, mem_clock_khz = 0, mem_bus_bits = 0;
  std::string pci_bus_id;
  int max_threads_per_sm = 0, max_threads_per_block = 0;
  int shared_per_sm = 0;
  int regs_per_sm = 0, max_blocks_per_sm = 0;  // what bounds the blocks resident per SM, with the two above
  // Unified-memory attributes.
  bool managed_memory = false;
  bool concurrent_managed_access = false;
  bool pageable_memory_access = false;               // HMM or ATS
  bool pageable_uses_host_page_tables = false;       // ATS
  bool host_native_atomics = false;
  bool direct_managed_access_from_host = false;
  bool can_use_host_pointer_for_registered = false;
  bool can_map_host_memory = false;
  bool host_register_supported = false;
  int numa_config = 0;   // cudaDevAttrNumaConfig
  int numa_id = -1;      // cudaDevAttrNumaId (-1 when none)
  int driver_version = 0, runtime_version = 0;
  std::string addressing() const;  // "ATS", "HMM" or "none"
};

// Probes device `device`; never throws: an absent GPU or driver is reported
// in why_absent.
const GpuCaps& gpu_caps(int device = 0);
// Every visible GPU's PCI bus id, in CUDA's order, without creating a context on any (rank placement reads
// them before MPI_Init); empty without a GPU.
std::vector<std::string> gpu_bus_ids();
// Drops what gpu_caps read, so the next call reads it again (free memory changes): each case of a batch
// (umbench batch) starts as a fresh process would.
void forget_gpu_caps();

}  // namespace umscope
