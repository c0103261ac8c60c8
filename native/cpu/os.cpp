#include "umscope/os.hpp"

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace umscope::os {

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

std::string thp_mode() {
  // The file reads like "always [madvise] never": the bracketed word is active.
  std::string s = read_file("/sys/kernel/mm/transparent_hugepage/enabled");
  auto a = s.find('['), b = s.find(']');
  if (a == std::string::npos || b == std::string::npos || b < a) return "";
  return s.substr(a + 1, b - a - 1);
}

static size_t meminfo_kb(const std::string& text, const std::string& key) {
  auto pos = text.find(key + ":");
  if (pos == std::string::npos) return 0;
  return std::strtoull(text.c_str() + pos + key.size() + 1, nullptr, 10);
}

size_t mem_available_bytes() {
  return meminfo_kb(read_file("/proc/meminfo"), "MemAvailable") * 1024;
}

std::vector<int> numa_nodes() {
  std::vector<int> nodes;
  DIR* d = opendir("/sys/devices/system/node");
  if (!d) return nodes;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, "node", 4) == 0 && std::isdigit(static_cast<unsigned char>(e->d_name[4])))
      nodes.push_back(std::atoi(e->d_name + 4));
  }
  closedir(d);
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

size_t numa_node_mem_bytes(int node) {
  std::string text = read_file("/sys/devices/system/node/node" + std::to_string(node) + "/meminfo");
  // Lines read "Node 0 MemTotal:  123 kB".
  auto pos = text.find("MemTotal:");
  if (pos == std::string::npos) return 0;
  return std::strtoull(text.c_str() + pos + 9, nullptr, 10) * 1024;
}

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.empty()) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (int c = 0; c < n; ++c) cpus.push_back(c);
  }
  return cpus;
}

std::vector<int> order_by_core(const std::vector<int>& cpus) {
  // A CPU's rank is its place among its core's hardware threads (thread_siblings_list):
  // every core's first thread comes before any core's second.
  std::vector<std::pair<int, int>> ranked;
  for (int c : cpus) {
    std::string sib = read_file("/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/thread_siblings_list");
    int rank = 0;
    std::stringstream ss(sib);
    std::string part;
    while (std::getline(ss, part, ',')) {
      auto dash = part.find('-');
      int a = std::atoi(part.c_str()), b = dash == std::string::npos ? a : std::atoi(part.c_str() + dash + 1);
      for (int x = a; x <= b; ++x)
        if (x < c) ++rank;
    }
    ranked.push_back({rank, c});
  }
  std::stable_sort(ranked.begin(), ranked.end());
  std::vector<int> out;
  for (auto& r : ranked) out.push_back(r.second);
  return out;
}

// mbind and move_pages through raw system calls, so no libnuma is needed.
std::string bind_to_node(void* p, size_t bytes, int node) {
#ifdef SYS_mbind
  const int MPOL_BIND_ = 2;
  const unsigned MPOL_MF_STRICT_ = 1u << 0, MPOL_MF_MOVE_ = 1u << 1;
  unsigned long mask[16] = {0};
  if (node < 0 || node >= static_cast<int>(sizeof mask * 8)) return "NUMA node out of range";
  mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
  long rc = syscall(SYS_mbind, p, bytes, MPOL_BIND_, mask, sizeof mask * 8, MPOL_MF_STRICT_ | MPOL_MF_MOVE_);
  if (rc != 0) return std::string("mbind failed: ") + std::strerror(errno);
  return "";
#else
  (void)p; (void)bytes; (void)node;
  return "mbind is not available on this platform";
#endif
}

int node_of(const void* p) {
#ifdef SYS_move_pages
  void* pages[1] = {const_cast<void*>(p)};
  int status[1] = {-1};
  long rc = syscall(SYS_move_pages, 0, 1ul, pages, nullptr, status, 0);
  if (rc != 0 || status[0] < 0) return -1;
  return status[0];
#else
  (void)p;
  return -1;
#endif
}

}  // namespace umscope::os
