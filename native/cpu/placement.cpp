#include "umscope/placement.hpp"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "umscope/caps.hpp"
#include "umscope/errors.hpp"
#include "umscope/os.hpp"

namespace umscope {

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.back()))) part.pop_back();
    if (part.empty() || !std::isdigit(static_cast<unsigned char>(part[0]))) continue;
    auto dash = part.find('-');
    int a = std::atoi(part.c_str()), b = dash == std::string::npos ? a : std::atoi(part.c_str() + dash + 1);
    for (int c = a; c <= b; ++c) cpus.push_back(c);
  }
  return cpus;
}

std::string cpu_ranges(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return out;
}

bool gpu_locality(const std::string& bus, std::vector<int>& cpus, int& node) {
  std::string b = bus;
  for (auto& ch : b) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const std::string dir = "/sys/bus/pci/devices/" + b;
  std::string list = os::read_file(dir + "/local_cpulist");
  if (list.empty()) return false;
  cpus = parse_cpu_list(list);
  std::string n = os::read_file(dir + "/numa_node");
  node = n.empty() ? -1 : std::atoi(n.c_str());
  return !cpus.empty();
}

std::vector<int> node_cpus(int node) {
  return parse_cpu_list(os::read_file("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist"));
}

namespace {

std::vector<int> intersect(const std::vector<int>& a, const std::vector<int>& allowed) {
  std::vector<int> out;
  for (int c : a)
    if (std::find(allowed.begin(), allowed.end(), c) != allowed.end()) out.push_back(c);
  return out;
}

void pin(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0)
    throw std::runtime_error(std::string("sched_setaffinity failed: ") + std::strerror(errno));
}

// set_mempolicy(MPOL_BIND, {node}) through the raw system call (no libnuma needed).
std::string bind_memory(int node) {
#ifdef SYS_set_mempolicy
  const int MPOL_BIND_ = 2;
  unsigned long mask[16] = {0};
  if (node < 0 || node >= static_cast<int>(sizeof mask * 8)) return "NUMA node out of range";
  mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
  if (syscall(SYS_set_mempolicy, MPOL_BIND_, mask, sizeof mask * 8) != 0)
    return std::string("set_mempolicy failed: ") + std::strerror(errno);
  return "";
#else
  (void)node;
  return "set_mempolicy is not available on this platform";
#endif
}

}  // namespace

Placement place_process(const std::string& mode, int device, bool use_gpu, const KindSpec* kind) {
  if (mode != "local" && mode != "remote" && mode != "none")
    throw UsageError("--placement is local, remote or none, got '" + mode + "'");
  Placement p;
  p.mode = mode;
  const std::vector<int> allowed = os::allowed_cpus();
  p.cpus = allowed;
  if (mode == "none") {
    p.source = "OS default (no pinning, default memory policy)";
    return p;
  }
  // The home: the GPU's local CPUs and node, or (no GPU) nothing to be local to.
  std::vector<int> home_cpus;
  int home_node = -1;
  if (use_gpu) {
    const GpuCaps& c = gpu_caps(device);
    if (c.present && gpu_locality(c.pci_bus_id, home_cpus, home_node))
      p.source = "GPU " + std::to_string(device) + " sysfs local_cpulist/numa_node";
  }
  if (kind && kind->name == "numa" && !node_cpus(kind->arg).empty()) {
    home_cpus = node_cpus(kind->arg);  // CPU threads on the memory's node
    home_node = kind->arg;
    p.source = "the memory's NUMA node " + std::to_string(kind->arg);
  }
  if (home_cpus.empty()) {
    p.source = use_gpu ? "GPU locality unreadable: OS default" : "no GPU to be local to: OS default";
    if (mode == "local") return p;
  }
  if (mode == "remote") {
    if (home_node < 0) throw Skip("remote placement needs a NUMA node to be remote from (" + p.source + ")");
    const int local_node = home_node;
    std::vector<int> with_cpus;
    for (int n : os::numa_nodes())
      if (!intersect(node_cpus(n), allowed).empty()) with_cpus.push_back(n);
    int remote = -1;
    for (int n : with_cpus)
      if (n != home_node && remote < 0) remote = n;
    if (remote < 0)
      throw Skip("remote placement needs a second NUMA node with CPUs; this host has " +
                 std::to_string(with_cpus.size()) + " (one socket: there is no remote one)");
    home_cpus = node_cpus(remote);
    home_node = remote;
    p.source = "NUMA node " + std::to_string(remote) + " (remote from the GPU's node " +
               std::to_string(local_node) + ")";
  }
  std::vector<int> cpus = intersect(home_cpus, allowed);
  if (cpus.empty()) {
    p.source += "; none of its CPUs are allowed to this process: OS default";
    return p;
  }
  pin(cpus);
  p.cpus = cpus;
  if (home_node >= 0) {
    std::string err = bind_memory(home_node);
    if (err.empty()) p.node = home_node;
    else p.source += "; memory not bound: " + err;
  }
  return p;
}

}  // namespace umscope

namespace umscope {
namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  return *end || x < 0 ? -1 : static_cast<int>(x);
}

// Slurm's SLURM_TASKS_PER_NODE ("4(x2),3"): the count of node `node`.
int slurm_tasks_on(const char* spec, int node) {
  if (!spec || node < 0) return -1;
  std::stringstream ss(spec);
  std::string part;
  int seen = 0;
  while (std::getline(ss, part, ',')) {
    int count = std::atoi(part.c_str()), times = 1;
    auto x = part.find("(x");
    if (x != std::string::npos) times = std::atoi(part.c_str() + x + 2);
    if (node < seen + times) return count;
    seen += times;
  }
  return -1;
}

}  // namespace

LaunchRank launcher_rank() {
  LaunchRank r;
  if (env_int("OMPI_COMM_WORLD_LOCAL_RANK") >= 0) {
    r = {env_int("OMPI_COMM_WORLD_RANK"), env_int("OMPI_COMM_WORLD_SIZE"), env_int("OMPI_COMM_WORLD_LOCAL_RANK"),
         env_int("OMPI_COMM_WORLD_LOCAL_SIZE"), "Open MPI (OMPI_COMM_WORLD_*)"};
  } else if (env_int("SLURM_LOCALID") >= 0 && env_int("SLURM_PROCID") >= 0) {
    int local_size = env_int("SLURM_NTASKS_PER_NODE");
    if (local_size < 0) local_size = slurm_tasks_on(std::getenv("SLURM_STEP_TASKS_PER_NODE"), env_int("SLURM_NODEID"));
    if (local_size < 0) local_size = slurm_tasks_on(std::getenv("SLURM_TASKS_PER_NODE"), env_int("SLURM_NODEID"));
    r = {env_int("SLURM_PROCID"), env_int("SLURM_NTASKS"), env_int("SLURM_LOCALID"), local_size,
         "Slurm (SLURM_PROCID, SLURM_LOCALID, SLURM_*TASKS_PER_NODE)"};
  } else if (env_int("FLUX_TASK_LOCAL_ID") >= 0) {
    const int size = env_int("FLUX_JOB_SIZE"), nodes = env_int("FLUX_JOB_NNODES");
    r = {env_int("FLUX_TASK_RANK"), size, env_int("FLUX_TASK_LOCAL_ID"),
         size > 0 && nodes > 0 ? (size + nodes - 1) / nodes : -1, "Flux (FLUX_TASK_*, FLUX_JOB_SIZE/NNODES)"};
  } else if (env_int("MPI_LOCALRANKID") >= 0) {
    r = {env_int("PMI_RANK"), env_int("PMI_SIZE"), env_int("MPI_LOCALRANKID"), env_int("MPI_LOCALNRANKS"),
         "Hydra (PMI_RANK, MPI_LOCALRANKID, MPI_LOCALNRANKS)"};
  } else {
    r.source = "no launcher variables (OMPI_COMM_WORLD_*, SLURM_*, FLUX_TASK_*, MPI_LOCALRANKID)";
  }
  return r;
}

int core_of_cpu(int cpu) {
  std::vector<int> sib =
      parse_cpu_list(os::read_file("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list"));
  return sib.empty() ? cpu : *std::min_element(sib.begin(), sib.end());
}

RankPlace plan_rank(const LaunchRank& lr, const std::vector<int>& allowed, const std::vector<std::vector<int>>& gpu_cpus,
                    bool one_core, int (*core_of)(int)) {
  RankPlace p;
  p.cpus = allowed;
  const int gpus = static_cast<int>(gpu_cpus.size());
  if (lr.local_rank < 0 || lr.local_size < 1) {
    p.how = "the launcher's CPU set (local rank unknown: " + lr.source + ")";
    return p;
  }
  if (gpus > 0) p.gpu = lr.local_rank % gpus;
  auto home_of = [&](int local) {
    std::vector<int> h = gpus > 0 ? intersect(gpu_cpus[local % gpus], allowed) : std::vector<int>{};
    return h.empty() ? allowed : h;
  };
  const std::vector<int> home = home_of(lr.local_rank);
  // The local ranks whose GPUs have these same local CPUs share them; this rank is the j-th of m.
  int j = 0, m = 0;
  for (int r = 0; r < lr.local_size; ++r) {
    if (home_of(r) != home) continue;
    if (r == lr.local_rank) j = m;
    ++m;
  }
  // Cores in order of their first hardware thread, each with its threads.
  std::vector<std::pair<int, std::vector<int>>> cores;
  for (int c : home) {
    const int core = core_of(c);
    auto it = std::find_if(cores.begin(), cores.end(), [&](const auto& x) { return x.first == core; });
    if (it == cores.end()) cores.push_back({core, {c}});
    else it->second.push_back(c);
  }
  std::sort(cores.begin(), cores.end());
  const int n = static_cast<int>(cores.size());
  const std::string where = gpus > 0 ? "GPU " + std::to_string(p.gpu) + "'s local CPUs" : "the allowed CPUs";
  if (n < m) {
    p.how = "the launcher's CPU set (" + std::to_string(n) + " core(s) of " + where + " for " + std::to_string(m) +
            " local ranks: the launcher bound this rank)";
    p.cpus = home;
    return p;
  }
  const int first = j * n / m, last = one_core ? first + 1 : (j + 1) * n / m;
  p.cpus.clear();
  for (int i = first; i < last; ++i) p.cpus.insert(p.cpus.end(), cores[i].second.begin(), cores[i].second.end());
  std::sort(p.cpus.begin(), p.cpus.end());
  p.how = (one_core ? "core " + std::to_string(first) + " of slice " : "slice ") + std::to_string(j + 1) + " of " +
          std::to_string(m) + " of " + where + " (" + std::to_string(n) + " cores), local rank " +
          std::to_string(lr.local_rank) + " of " + std::to_string(lr.local_size) + " from " + lr.source;
  return p;
}

RankPlace pin_rank(const LaunchRank& lr, bool one_core) {
  std::vector<std::vector<int>> gpu_cpus;
  for (const std::string& bus : gpu_bus_ids()) {
    std::vector<int> cpus;
    int node = -1;
    if (bus.empty() || !gpu_locality(bus, cpus, node)) cpus.clear();
    gpu_cpus.push_back(cpus);
  }
  RankPlace p = plan_rank(lr, os::allowed_cpus(), gpu_cpus, one_core, core_of_cpu);
  if (p.cpus != os::allowed_cpus()) pin(p.cpus);
  return p;
}

}  // namespace umscope
