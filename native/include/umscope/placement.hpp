// GPU-local placement of the process (as nvbandwidth does): before a case
// allocates host memory, umbench pins itself to the CPUs near the GPU under
// test and binds its host allocations to that GPU's NUMA node. Modes:
//   local  - the GPU's local CPUs and NUMA node (default); for numa:N memory
//            with CPUs on node N, that node's CPUs (the memory's node)
//   remote - the CPUs and memory of another NUMA node with CPUs (the
//            remote-socket penalty); a Skip where there is only one
//   none   - what the OS gives (no pinning, default memory policy)
// Each record carries the CPU set and NUMA node that resulted.
#pragma once
#include <string>
#include <vector>

#include "umscope/memory.hpp"

namespace umscope {

struct Placement {
  std::string mode = "none";
  std::vector<int> cpus;  // the process's CPU set after placement
  int node = -1;          // NUMA node host allocations are bound to (-1: OS default policy)
  std::string source;     // where the GPU's locality was read, or why none was applied
};

// Local CPUs and NUMA node of the GPU at PCI bus id `bus` from sysfs; false where unreadable.
bool gpu_locality(const std::string& bus, std::vector<int>& cpus, int& node);
// CPUs of NUMA node `node` (empty for a memory-only node such as a GH200 GPU's).
std::vector<int> node_cpus(int node);
// "0-3,8": a CPU list as Linux writes it, and back.
std::string cpu_ranges(const std::vector<int>& cpus);
std::vector<int> parse_cpu_list(const std::string& text);

// Applies `mode` for GPU `device` (when use_gpu) and memory `kind` (may be null);
// throws Skip for remote placement on a single node, UsageError for an unknown mode.
Placement place_process(const std::string& mode, int device, bool use_gpu, const KindSpec* kind);

// Ranks under a launcher. The launcher's environment tells a rank where it is before MPI_Init (Open MPI's
// OMPI_COMM_WORLD_*, Slurm's SLURM_*, Flux's FLUX_TASK_*, Hydra's PMI_RANK/MPI_LOCALRANKID); -1 where unknown.
struct LaunchRank {
  int rank = -1, size = -1, local_rank = -1, local_size = -1;
  std::string source;  // which variables gave it, or why none did
};
LaunchRank launcher_rank();

// Where a rank runs: GPU local_rank mod GPUs, and its own cores. The local ranks whose GPUs have the same
// local CPUs share those CPUs' cores in equal contiguous slices (hardware threads of a core stay together);
// one_core keeps the first core of the slice (the MPI family: one core per rank, as mpirun --bind-to core
// places OSU's ranks). A launcher that already bound the rank to fewer cores than the ranks that would share
// them keeps its binding. `gpu_cpus[g]` is GPU g's local CPU list (empty: unknown); `core_of(cpu)` the core
// of a CPU (its first hardware thread).
struct RankPlace {
  int gpu = -1;
  std::vector<int> cpus;
  std::string how;
};
RankPlace plan_rank(const LaunchRank& lr, const std::vector<int>& allowed, const std::vector<std::vector<int>>& gpu_cpus,
                    bool one_core, int (*core_of)(int));
int core_of_cpu(int cpu);  // from sysfs thread_siblings_list; the CPU itself where unreadable
// Pins this process to plan_rank's CPUs for this host's GPUs (sysfs); returns the plan.
RankPlace pin_rank(const LaunchRank& lr, bool one_core);

}  // namespace umscope
