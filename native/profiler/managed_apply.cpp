// umscope place --managed POLICY: the managed kind's policies applied to an unmodified program's own
// cuMemAllocManaged ranges from inside libumtrace (managed_apply.hpp says what and when).
#include "managed_apply.hpp"

#include "json_out.hpp"
#include "umscope/advice.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace managed_apply {
namespace {

FILE* g_out = nullptr;
std::mutex* g_out_mu = nullptr;
std::mutex g_mu;  // the policy's state below
std::atomic<bool> g_on{false};
std::vector<std::pair<CUmem_advise, bool>> g_advice;  // (advice, on the GPU: else the host)
bool g_prefetch_gpu = false;
std::vector<std::pair<CUdeviceptr, size_t>> g_pending;  // allocated, not yet prefetched

// Each driver function at the version whose signature its PFN type (cudaTypedefs.h) declares: the type and the
// version asked of cuGetProcAddress come from one name, so they cannot disagree. (Asked at 13000, "cuCtxGetDevice"
// is CUDA 13's two-argument cuCtxGetDevice_v2: called with one, it read a stray context and the program died of
// SIGSEGV, session 16's first GPU run.)
#define UMSCOPE_DRIVER_FN(name, version) PFN_##name##_v##version p_##name = nullptr; constexpr int v_##name = version;
UMSCOPE_DRIVER_FN(cuMemAdvise, 12020)
UMSCOPE_DRIVER_FN(cuMemPrefetchAsync, 12020)
UMSCOPE_DRIVER_FN(cuCtxGetDevice, 2000)
UMSCOPE_DRIVER_FN(cuGetErrorName, 6000)
UMSCOPE_DRIVER_FN(cuStreamIsCapturing, 10000)
#undef UMSCOPE_DRIVER_FN

// The driver's functions from the libcuda.so.1 the program already loaded (a runtime linked statically opens it
// privately: not reachable through RTLD_DEFAULT).
bool resolve(std::string& why) {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!cuda) cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cuda) {
    why = "libcuda.so.1 is not loaded";
    return false;
  }
  auto get = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(cuda, "cuGetProcAddress_v2"));
  if (!get) {
    why = "the driver has no cuGetProcAddress_v2 (older than CUDA 12.0)";
    return false;
  }
  auto one = [&](const char* name, void** fn, int version) {
    CUdriverProcAddressQueryResult found;
    return get(name, fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &found) == CUDA_SUCCESS && *fn &&
           found == CU_GET_PROC_ADDRESS_SUCCESS;
  };
#define UMSCOPE_GET(name) one(#name, reinterpret_cast<void**>(&p_##name), v_##name)
  if (!UMSCOPE_GET(cuMemAdvise) || !UMSCOPE_GET(cuMemPrefetchAsync) || !UMSCOPE_GET(cuCtxGetDevice)) {
    why = "the driver has no cuMemAdvise or cuMemPrefetchAsync taking a CUmemLocation (CUDA 12.2), or no cuCtxGetDevice";
    return false;
  }
  UMSCOPE_GET(cuGetErrorName);
  UMSCOPE_GET(cuStreamIsCapturing);
#undef UMSCOPE_GET
  return true;
}

const char* error_name(CUresult r) {
  const char* s = nullptr;
  if (p_cuGetErrorName) p_cuGetErrorName(r, &s);
  return s ? s : "CUDA_ERROR_UNKNOWN";
}

void line(const std::string& what, CUdeviceptr ptr, size_t bytes, CUresult r) {
  if (!g_out || !g_out_mu) return;
  const unsigned long long w = umprofiler::wall_ns();  // the wall clock, as the trace's other "w" fields
  std::lock_guard<std::mutex> lk(*g_out_mu);
  std::fprintf(g_out, "{\"k\":\"managed_apply\",\"w\":%llu,\"what\":\"%s\",\"ptr\":%llu,\"bytes\":%zu,\"ok\":%s,"
               "\"cu\":\"%s\"}\n", w, what.c_str(), static_cast<unsigned long long>(ptr), bytes,
               r == CUDA_SUCCESS ? "true" : "false", error_name(r));
}

void policy_line(const char* policy, bool ok, const std::string& why) {  // the variable set by hand: escaped
  std::lock_guard<std::mutex> lk(*g_out_mu);
  std::fprintf(g_out, "{\"k\":\"managed_policy\",\"policy\":");
  umprofiler::json_string(g_out, policy ? policy : "");
  std::fprintf(g_out, ",\"ok\":%s,\"why\":", ok ? "true" : "false");
  umprofiler::json_string(g_out, why.c_str());
  std::fprintf(g_out, "}\n");
  std::fflush(g_out);
}

// "advise=preferred:cpu+accessed_by:gpu,prefetch=gpu" (the managed kind's grammar, kinds.cpp); "" when it is
// understood, else why not.
std::string parse(const std::string& policy) {
  size_t start = 0;
  while (start <= policy.size()) {
    size_t comma = policy.find(',', start);
    std::string item = policy.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? policy.size() + 1 : comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq), val = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key == "prefetch") {
      if (val == "gpu") g_prefetch_gpu = true;
      else if (val != "none") return "prefetch=" + val + ": only prefetch=gpu (before the first kernel after each allocation)";
    } else if (key == "advise") {
      std::vector<umscope::Advice> hints;
      std::string bad;
      if (!umscope::parse_advice(val, &hints, &bad))
        return "advise=" + bad + ": not an advice (preferred:gpu|cpu, accessed_by:gpu|cpu, read_mostly)";
      for (const auto& h : hints)
        g_advice.push_back({h.what == umscope::Advice::preferred     ? CU_MEM_ADVISE_SET_PREFERRED_LOCATION
                            : h.what == umscope::Advice::accessed_by ? CU_MEM_ADVISE_SET_ACCESSED_BY
                                                                     : CU_MEM_ADVISE_SET_READ_MOSTLY,
                            h.gpu});
    } else {
      return "'" + item + "': place --managed takes advise=... and prefetch=gpu";
    }
  }
  if (g_advice.empty() && !g_prefetch_gpu) return "no advice and no prefetch";
  return "";
}

CUmemLocation where(bool gpu, CUdevice dev) {
  CUmemLocation loc;
  loc.type = gpu ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST;
  loc.id = gpu ? dev : 0;
  return loc;
}

const char* advice_name(CUmem_advise a, bool gpu) {
  if (a == CU_MEM_ADVISE_SET_READ_MOSTLY) return "advise read_mostly";
  if (a == CU_MEM_ADVISE_SET_PREFERRED_LOCATION) return gpu ? "advise preferred:gpu" : "advise preferred:cpu";
  return gpu ? "advise accessed_by:gpu" : "advise accessed_by:cpu";
}

void allocated(CUdeviceptr ptr, size_t bytes) {
  CUdevice dev = 0;
  p_cuCtxGetDevice(&dev);
  for (const auto& a : g_advice) line(advice_name(a.first, a.second), ptr, bytes, p_cuMemAdvise(ptr, bytes, a.first, where(a.second, dev)));
  if (g_prefetch_gpu) {
    std::lock_guard<std::mutex> lk(g_mu);
    g_pending.push_back({ptr, bytes});
  }
}

void freed(CUdeviceptr ptr) {
  std::lock_guard<std::mutex> lk(g_mu);
  for (size_t i = 0; i < g_pending.size(); ++i)
    if (g_pending[i].first == ptr) {
      g_pending.erase(g_pending.begin() + static_cast<long>(i));
      return;
    }
}

void launching(CUstream stream) {
  std::vector<std::pair<CUdeviceptr, size_t>> now;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (g_pending.empty()) return;
  }
  // Never inside a graph capture: a prefetch there would join the graph or end the capture with an error. The
  // ranges wait for the next launch outside one.
  CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!p_cuStreamIsCapturing || p_cuStreamIsCapturing(stream, &cap) != CUDA_SUCCESS || cap != CU_STREAM_CAPTURE_STATUS_NONE) return;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    now.swap(g_pending);
  }
  CUdevice dev = 0;
  p_cuCtxGetDevice(&dev);
  for (const auto& r : now) line("prefetch gpu", r.first, r.second, p_cuMemPrefetchAsync(r.first, r.second, where(true, dev), 0, stream));
}

}  // namespace

void attach(CUpti_SubscriberHandle sub, FILE* out, std::mutex& mu) {
  const char* policy = std::getenv("UMSCOPE_UMTRACE_MANAGED");
  if (!policy || !*policy || !out) return;
  g_out = out;
  g_out_mu = &mu;
  std::string why = parse(policy);
  // The hardware counters (profile --counters) take the whole driver-API domain on and off for their gate and
  // read every driver callback as a launch: the two cannot share CUPTI's one subscriber.
  if (why.empty() && std::getenv("UMSCOPE_COUNTERS_FILE"))
    why = "not with hardware counters (UMSCOPE_COUNTERS_FILE, profile --counters): both need CUPTI's driver callbacks";
  if (!why.empty()) {
    policy_line(policy, false, why);
    return;
  }
  std::vector<CUpti_CallbackId> ids = {CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged};
  if (g_prefetch_gpu)  // the launches only where a prefetch waits for them (a callback on every launch costs)
    ids.insert(ids.end(), {CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                           CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
                           CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
                           CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz});
  for (CUpti_CallbackId id : ids) {
    CUptiResult r = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
    if (r != CUPTI_SUCCESS) {
      const char* rs = nullptr;
      cuptiGetResultString(r, &rs);
      policy_line(policy, false, std::string("CUPTI refused a driver callback: ") + (rs ? rs : "?"));
      return;
    }
  }
  g_on = true;
  policy_line(policy, true, "");
}

void callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (!g_on || domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  // The driver's functions, looked up at the first callback (the driver is initialised by then, not while it
  // loads this library): where it lacks one, the policy is off and the trace says why.
  static std::once_flag resolved;
  std::call_once(resolved, [] {
    std::string why;
    if (!resolve(why)) {
      g_on = false;
      policy_line(std::getenv("UMSCOPE_UMTRACE_MANAGED"), false, why);
    }
  });
  if (!g_on) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged) {
    if (cb->callbackSite != CUPTI_API_EXIT) return;
    const auto* p = static_cast<const cuMemAllocManaged_params*>(cb->functionParams);
    if (cb->functionReturnValue && *static_cast<const CUresult*>(cb->functionReturnValue) != CUDA_SUCCESS) return;
    if (p && p->dptr && *p->dptr) allocated(*p->dptr, p->bytesize);
    return;
  }
  if (cb->callbackSite != CUPTI_API_ENTER) return;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2) {
    freed(static_cast<const cuMemFree_v2_params*>(cb->functionParams)->dptr);
  } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx || cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz) {
    const CUlaunchConfig* c = static_cast<const cuLaunchKernelEx_params*>(cb->functionParams)->config;
    launching(c ? c->hStream : nullptr);
  } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel ||
             cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz) {
    launching(static_cast<const cuLaunchCooperativeKernel_params*>(cb->functionParams)->hStream);
  } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel || cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz) {
    launching(static_cast<const cuLaunchKernel_params*>(cb->functionParams)->hStream);
  }  // another callback enabled by the counters (umcounters): not ours
}

}  // namespace managed_apply
