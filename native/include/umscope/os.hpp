// What the operating system tells about memory: page size, transparent huge
// pages, NUMA nodes, available memory. Linux only; every reader tolerates a
// missing file and returns an empty/zero value instead of failing.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace umscope::os {

size_t page_size();
std::string thp_mode();              // "always", "madvise", "never" or "" if unknown
size_t mem_available_bytes();        // MemAvailable from /proc/meminfo, 0 if unknown
std::vector<int> numa_nodes();       // nodes present under /sys/devices/system/node
size_t numa_node_mem_bytes(int node);  // MemTotal of that node, 0 if unknown
std::vector<int> allowed_cpus();     // CPUs this process may run on
// The same CPUs, cores before SMT siblings: each core's first hardware thread, then the second...
std::vector<int> order_by_core(const std::vector<int>& cpus);
std::string read_file(const std::string& path);  // whole file, "" if unreadable

// Binds [p, p+bytes) to NUMA node `node` (MPOL_BIND); returns an error text or "".
std::string bind_to_node(void* p, size_t bytes, int node);
// Which NUMA node backs the page holding p, -1 if unknown (move_pages query).
int node_of(const void* p);

}  // namespace umscope::os
