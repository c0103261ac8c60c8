// The kind registry and the parser of kind specs.
#include <sstream>

#include "umscope/errors.hpp"
#include "umscope/memory.hpp"

namespace umscope {

namespace {
const std::vector<std::string> kTouch = {"cpu", "gpu", "none"};
const std::vector<std::string> kWhere = {"none", "gpu", "cpu"};
const std::vector<std::string> kAdvice = {"none", "preferred:gpu", "preferred:cpu", "accessed_by:gpu",
                                          "accessed_by:cpu", "read_mostly"};
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
}  // namespace

const std::vector<KindInfo>& kind_registry() {
  static const std::vector<KindInfo> r = {
      // name, takes_arg, help, policies, lives, reachable_by, needs_cuda, gpu_needs_hmm_or_ats, needs_peer
      {"device", false, "cudaMalloc: GPU memory, reachable by the GPU only", {}, "gpu", "gpu", true, false, false},
      {"peer", true,
       "peer:N - cudaMalloc on GPU N, reached by the GPU under test over the peer link (peer access enabled)", {},
       "peer (GPU N)", "gpu", true, false, true},
      {"managed", false, "cudaMallocManaged: migrates between CPU and GPU on demand",
       {touch("cpu"), kPrefetchP, kAdviseP}, "gpu (host with advise=preferred:cpu)", "gpu+cpu", true, false, false},
      {"pinned", false, "cudaMallocHost: page-locked host memory, mapped for the GPU", {touch("cpu")}, "host",
       "gpu+cpu", true, false, false},
      {"registered", false, "mmap + cudaHostRegister: ordinary host pages locked and mapped for the GPU",
       {touch("cpu"), kPageP}, "host", "gpu+cpu", true, false, false},
      {"system", false,
       "mmap (what malloc returns for large sizes): GPU-reachable only with HMM or ATS",
       {touch("cpu"), kPageP, kPrefetchP, kAdviseP}, "host", "cpu (gpu with HMM or ATS)", false, true, false},
      {"numa", true, "numa:N - system memory bound to NUMA node N (mbind); on Grace Hopper a GPU's node too",
       {touch("cpu"), kPageP, kPrefetchP, kAdviseP}, "host (gpu when N is the GPU's NUMA node)",
       "cpu (gpu with HMM or ATS)", false, true, false},
      {"async", false,
       "cudaMallocFromPoolAsync from a pool made by cudaMemPoolCreate (stream-ordered allocation, freed by "
       "cudaFreeAsync); pool=host: a pool of page-locked host memory",
       {kPoolP}, "gpu (host with pool=host[:N])", "gpu (gpu+cpu with pool=host[:N])", true, false, false},
      {"vmm", false,
       "cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess (virtual memory management, driver API)",
       {kLocationP}, "gpu (host with location=host[:N])", "gpu (gpu+cpu with location=host[:N])", true, false,
       false},
      {"hostalloc", false, "cudaHostAlloc with its flags: page-locked host memory, mapped for the GPU",
       {touch("cpu"), kFlagsP}, "host", "gpu+cpu", true, false, false},
  };
  return r;
}

const KindInfo& kind_info(const std::string& name) {
  for (const KindInfo& k : kind_registry())
    if (k.name == name) return k;
  throw UsageError("unknown memory kind '" + name + "'");
}

namespace {
// A device attribute, or -1 where there is no such GPU or no driver. Attributes need no CUDA
// context, so a CPU-only case's record creates none.
int device_attribute(int device, int attr) {
#ifdef UMSCOPE_HAVE_CUDA
  int v = -1;
  if (cudaDeviceGetAttribute(&v, static_cast<cudaDeviceAttr>(attr), device) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return v;
#else
  (void)device;
  (void)attr;
  return -1;
#endif
}
}  // namespace

KindPlace kind_place(const KindSpec& k, int device) {
  KindPlace p;
  if (k.name == "none") {  // a record that measures no memory (latency's timer calibration, ping-pong's flags)
    p.location = "none";
    p.reachable_by = "none";
    return p;
  }
  const KindInfo& info = kind_info(k.name);
  if (info.needs_peer) p.location = "peer";
  else if (k.name == "device") p.location = "gpu";
  else if (k.name == "managed") p.location = k.get("advise").find("preferred:cpu") != std::string::npos ? "host" : "gpu";
  else if (k.name == "async") p.location = k.get("pool", "device") == "device" ? "gpu" : "host";
  else if (k.name == "vmm") p.location = k.get("location", "device") == "device" ? "gpu" : "host";
#ifdef UMSCOPE_HAVE_CUDA
  else if (k.name == "numa" && k.arg >= 0 && device_attribute(device, cudaDevAttrNumaId) == k.arg) p.location = "gpu";
#endif
  else p.location = "host";
  if (info.reachable_by == "gpu" || ((k.name == "async" || k.name == "vmm") && p.location == "gpu")) {
    p.reachable_by = "gpu";
  } else if (info.gpu_needs_hmm_or_ats) {
#ifdef UMSCOPE_HAVE_CUDA
    const bool gpu = device_attribute(device, cudaDevAttrPageableMemoryAccess) == 1;
#else
    const bool gpu = false;
#endif
    p.reachable_by = gpu ? "gpu+cpu" : "cpu";
  } else {
    p.reachable_by = "gpu+cpu";
  }
  return p;
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
