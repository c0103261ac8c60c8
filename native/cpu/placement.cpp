#include "umscope/placement.hpp"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
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
