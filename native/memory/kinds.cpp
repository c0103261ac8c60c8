// The kind registry and the parser of kind specs.
#include <sstream>
#include <stdexcept>

#include "umscope/advice.hpp"
#include "umscope/errors.hpp"
#include "umscope/memory.hpp"

namespace umscope {

namespace {
const std::vector<std::string> kTouch = {"cpu", "gpu", "none"};
const std::vector<std::string> kWhere = {"none", "gpu", "cpu"};
const std::vector<std::string> kAdvice = [] {
  std::vector<std::string> v = {"none"};
  for (const auto& n : umscope::advice_names()) v.push_back(n.name);
  return v;
}();
const std::vector<std::string> kPage = {"default", "base", "thp"};

PolicyInfo touch(const std::string& dflt) {
  return {"first_touch", kTouch, "processor that writes the data first (default " + dflt + ")", dflt};
}
const PolicyInfo kPrefetchP{"prefetch", kWhere, "cudaMemPrefetchAsync to this processor after first touch", "", false};
const PolicyInfo kAdviseP{"advise", kAdvice, "cudaMemAdvise hints, several joined with '+'", "", true};
const PolicyInfo kPoolP{"pool", {"device", "host", "host:N"},
                        "where the pool's memory lives (cudaMemPoolProps location): the GPU under test "
                        "(default), host memory (cudaMemLocationTypeHost) or host NUMA node N "
                        "(cudaMemLocationTypeHostNuma)",
                        "device"};
const PolicyInfo kLocationP{"location", {"device", "host", "host:N"},
                            "cuMemCreate's location: the GPU under test (default), host memory "
                            "(CU_MEM_LOCATION_TYPE_HOST) or host NUMA node N (CU_MEM_LOCATION_TYPE_HOST_NUMA)",
                            "device"};
const PolicyInfo kFlagsP{"flags", {"default", "mapped", "wc", "portable"},
                         "cudaHostAlloc flags joined with '+': cudaHostAllocMapped, cudaHostAllocWriteCombined, "
                         "cudaHostAllocPortable (default: cudaHostAllocDefault)",
                         "default", true};
const PolicyInfo kPageP{"page", kPage,
                        "host page size hint: base pages (MADV_NOHUGEPAGE) or transparent huge pages "
                        "(MADV_HUGEPAGE); default leaves the system setting", "", false};

#ifdef UMSCOPE_HAVE_CUDA
// A device attribute, or -1 where there is no such GPU or no driver. Attributes need no CUDA
// context, so a CPU-only case's record creates none.
int device_attribute(int device, cudaDeviceAttr attr) {
  int v = -1;
  if (cudaDeviceGetAttribute(&v, attr, device) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return v;
}
#endif

// Each kind's place (kind_place): where a case's data sits and which processors reach it.
KindPlace gpu_only(const KindSpec&, int) { return {"gpu", "gpu"}; }
KindPlace on_peer(const KindSpec&, int) { return {"peer", "gpu"}; }
KindPlace mapped_host(const KindSpec&, int) { return {"host", "gpu+cpu"}; }
KindPlace managed_place(const KindSpec& k, int) {
  return {k.get("advise").find("preferred:cpu") != std::string::npos ? "host" : "gpu", "gpu+cpu"};
}
// Pageable memory: the GPU reaches it only through HMM or ATS.
std::string pageable_reach(int device) {
#ifdef UMSCOPE_HAVE_CUDA
  const bool gpu = device_attribute(device, cudaDevAttrPageableMemoryAccess) == 1;
#else
  (void)device;
  const bool gpu = false;
#endif
  return gpu ? "gpu+cpu" : "cpu";
}
KindPlace system_place(const KindSpec&, int device) { return {"host", pageable_reach(device)}; }
KindPlace numa_place(const KindSpec& k, int device) {
#ifdef UMSCOPE_HAVE_CUDA
  const bool gpu_node = k.arg >= 0 && device_attribute(device, cudaDevAttrNumaId) == k.arg;
#else
  (void)k;
  const bool gpu_node = false;
#endif
  return {gpu_node ? "gpu" : "host", pageable_reach(device)};
}
// async and vmm: on the GPU and reached by it alone, or page-locked host memory that both reach.
KindPlace placed(const std::string& where) {
  return where == "device" ? KindPlace{"gpu", "gpu"} : KindPlace{"host", "gpu+cpu"};
}
KindPlace async_place(const KindSpec& k, int) { return placed(k.get("pool", "device")); }
KindPlace vmm_place(const KindSpec& k, int) { return placed(k.get("location", "device")); }
}  // namespace

// How a Buffer allocates, frees and locates each kind: defined in buffer.cpp.
extern const KindOps kDeviceOps, kPeerOps, kManagedOps, kPinnedOps, kRegisteredOps, kSystemOps, kNumaOps,
    kAsyncOps, kVmmOps, kHostallocOps;

const std::vector<KindInfo>& kind_registry() {
  static const std::vector<KindInfo> r = {
      // name, takes_arg, help, policies, lives, reachable_by, needs_cuda, gpu_needs_hmm_or_ats, needs_peer,
      // place (above), ops (buffer.cpp)
      {"device", false, "cudaMalloc: GPU memory, reachable by the GPU only", {}, "gpu", "gpu", true, false, false,
       gpu_only, &kDeviceOps},
      {"peer", true,
       "peer:N - cudaMalloc on GPU N, reached by the GPU under test over the peer link (peer access enabled)", {},
       "peer (GPU N)", "gpu", true, false, true, on_peer, &kPeerOps},
      {"managed", false, "cudaMallocManaged: migrates between CPU and GPU on demand",
       {touch("cpu"), kPrefetchP, kAdviseP}, "gpu (host with advise=preferred:cpu)", "gpu+cpu", true, false, false,
       managed_place, &kManagedOps},
      {"pinned", false, "cudaMallocHost: page-locked host memory, mapped for the GPU", {touch("cpu")}, "host",
       "gpu+cpu", true, false, false, mapped_host, &kPinnedOps},
      {"registered", false, "mmap + cudaHostRegister: ordinary host pages locked and mapped for the GPU",
       {touch("cpu"), kPageP}, "host", "gpu+cpu", true, false, false, mapped_host, &kRegisteredOps},
      {"system", false,
       "mmap (what malloc returns for large sizes): GPU-reachable only with HMM or ATS",
       {touch("cpu"), kPageP, kPrefetchP, kAdviseP}, "host", "cpu (gpu with HMM or ATS)", false, true, false,
       system_place, &kSystemOps},
      {"numa", true, "numa:N - system memory bound to NUMA node N (mbind); on Grace Hopper a GPU's node too",
       {touch("cpu"), kPageP, kPrefetchP, kAdviseP}, "host (gpu when N is the GPU's NUMA node)",
       "cpu (gpu with HMM or ATS)", false, true, false, numa_place, &kNumaOps},
      {"async", false,
       "cudaMallocFromPoolAsync from a pool made by cudaMemPoolCreate (stream-ordered allocation, freed by "
       "cudaFreeAsync); pool=host: a pool of page-locked host memory",
       {kPoolP}, "gpu (host with pool=host[:N])", "gpu (gpu+cpu with pool=host[:N])", true, false, false,
       async_place, &kAsyncOps},
      {"vmm", false,
       "cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess (virtual memory management, driver API)",
       {kLocationP}, "gpu (host with location=host[:N])", "gpu (gpu+cpu with location=host[:N])", true, false,
       false, vmm_place, &kVmmOps},
      {"hostalloc", false, "cudaHostAlloc with its flags: page-locked host memory, mapped for the GPU",
       {touch("cpu"), kFlagsP}, "host", "gpu+cpu", true, false, false, mapped_host, &kHostallocOps},
  };
  // An entry without its functions would be a call through null at its first Buffer: every use refuses it instead.
  static const bool complete = [] {
    for (const KindInfo& k : r)
      if (!k.place || !k.ops || !k.ops->allocate || !k.ops->release || !k.ops->residency)
        throw std::logic_error("kind '" + k.name + "' names no place function or KindOps in the registry (kinds.cpp)");
    return true;
  }();
  (void)complete;
  return r;
}

const KindInfo& kind_info(const std::string& name) {
  for (const KindInfo& k : kind_registry())
    if (k.name == name) return k;
  throw UsageError("unknown memory kind '" + name + "'");
}

KindPlace kind_place(const KindSpec& k, int device) {
  if (k.name == "none") return {"none", "none"};  // a record that measures no memory (latency's timer calibration, ping-pong's flags)
  return kind_info(k.name).place(k, device);
}

std::string KindSpec::get(const std::string& k, const std::string& dflt) const {
  auto it = policy.find(k);
  return it == policy.end() ? dflt : it->second;
}

std::string KindSpec::policy_str() const {
  std::string s;
  for (auto& kv : policy) s += (s.empty() ? "" : ",") + kv.first + "=" + kv.second;
  return s;
}

std::string KindSpec::label() const { return name + (arg >= 0 ? ":" + std::to_string(arg) : ""); }

std::string KindSpec::str() const {
  std::string s = label();
  std::string p = policy_str();
  return p.empty() ? s : s + "," + p;
}

int host_node_of(const std::string& value) {
  if (value == "host") return -1;
  if (value.rfind("host:", 0) != 0) return -2;
  const std::string n = value.substr(5);
  if (n.empty() || n.size() > 6 || n.find_first_not_of("0123456789") != std::string::npos) return -2;
  return std::stoi(n);
}

static bool allowed(const PolicyInfo& p, const std::string& value) {
  // A joined policy (advise, flags) takes a '+'-joined list; everything else one value.
  std::stringstream ss(value);
  std::string item;
  int count = 0;
  while (std::getline(ss, item, p.joined ? '+' : '\0')) {
    bool ok = false;
    for (auto& v : p.values) ok = ok || (v == "host:N" ? host_node_of(item) >= 0 : v == item);
    if (!ok) return false;
    ++count;
  }
  return count > 0;
}

KindSpec parse_kind(const std::string& spec) {
  // An empty item (a trailing or doubled comma) is refused, not read as nothing: the spec is what the record says.
  if (!spec.empty() && (spec.back() == ',' || spec.find(",,") != std::string::npos))
    throw UsageError("kind '" + spec + "': an empty item (a trailing or doubled comma)");
  std::stringstream ss(spec);
  std::string head;
  std::getline(ss, head, ',');
  KindSpec k;
  auto colon = head.find(':');
  k.name = head.substr(0, colon);
  const KindInfo* info = nullptr;
  for (auto& ki : kind_registry())
    if (ki.name == k.name) info = &ki;
  if (!info) {
    std::string names;
    for (auto& ki : kind_registry()) names += (names.empty() ? "" : ", ") + ki.name + (ki.takes_arg ? ":N" : "");
    throw UsageError("unknown memory kind '" + k.name + "' (known: " + names + ")");
  }
  if (info->takes_arg) {
    std::string a = colon == std::string::npos ? "" : head.substr(colon + 1);
    if (a.empty() || a.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError("kind '" + k.name + "' needs a number (a NUMA node or a GPU), as in " + k.name + ":1");
    if (a.size() > 6) throw UsageError("kind '" + k.name + "': " + a + " is not a NUMA node or GPU number");
    k.arg = std::stoi(a);
  } else if (colon != std::string::npos) {
    throw UsageError("kind '" + k.name + "' takes no ':' argument");
  }
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto eq = item.find('=');
    std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    const PolicyInfo* pi = nullptr;
    for (auto& p : info->policies)
      if (p.key == key) pi = &p;
    if (!pi) throw UsageError("kind '" + k.name + "' takes no policy '" + key + "'");
    if (k.policy.count(key))
      throw UsageError("kind '" + spec + "': policy " + key + " given twice (" + k.policy[key] + " and " + value + ")");
    if (!allowed(*pi, value)) {
      std::string vals;
      for (auto& v : pi->values) vals += (vals.empty() ? "" : "|") + v;
      throw UsageError("policy " + key + "=" + value + " not understood (values: " + vals + ")");
    }
    k.policy[key] = value;
  }
  // Defaults are written into the spec so every record says what was done.
  for (auto& p : info->policies)
    if (!p.dflt.empty() && !k.policy.count(p.key)) k.policy[p.key] = p.dflt;
  return k;
}

}  // namespace umscope
