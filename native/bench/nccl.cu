// NCCL collectives over buffers of any memory kind: all-reduce, all-gather,
// reduce-scatter, broadcast and all-to-all (grouped send/receive), timed with
// CUDA events and reported as algorithm and bus bandwidth by nccl-tests'
// definitions, so figures line up with all_reduce_perf and its siblings:
//
//   size   nccl-tests' size: the bytes of the larger of the send and receive
//          buffers of one rank (all-gather: what it gathers; reduce-scatter:
//          what it scatters)
//   algbw  size / time
//   busbw  algbw x factor: all-reduce 2(n-1)/n, all-gather, reduce-scatter and
//          all-to-all (n-1)/n, broadcast 1
//
// Two ways to run: one process driving every local GPU (ncclCommInitAll, no
// launcher; --launch single), or one rank per GPU under the site's launcher
// (--launch mpi, in umbench-mpi; the ncclUniqueId is broadcast over MPI).
//
// NCCL is loaded at run time (dlopen): $UMSCOPE_NCCL (a file or a directory),
// else libnccl.so.2 from the library path; without it the case is skipped
// with that reason, and umbench starts everywhere. Only the few prototypes
// used here are declared. Multicast (NVLS) stays off: NCCL_NVLS_ENABLE=0
// unless the caller set it.
//
// Data: float32, rank r's send element i = (r + 1) + (i mod 13); after the
// timed repetitions every received element is compared on the GPU with what
// the collective must produce (the sums are exact in float32).
#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "umscope/bench.hpp"
#include "umscope/caps.hpp"
#include "umscope/errors.hpp"
#include "umscope/os.hpp"
#include "umscope/placement.hpp"
#include "umscope/world.hpp"
#include "umscope/timing.hpp"

namespace umscope {
namespace {

// The ABI subset of nccl.h used here (enums are passed as int).
using nccl_result = int;
using nccl_comm = struct nccl_comm_opaque*;
struct NcclUniqueId {
  char internal[128];
};
constexpr int kFloat32 = 7, kSum = 0, kInvalidArgument = 4, kInvalidUsage = 5;

struct Nccl {
  void* handle = nullptr;
  std::string path, version;
  nccl_result (*GetVersion)(int*) = nullptr;
  const char* (*GetErrorString)(nccl_result) = nullptr;
  nccl_result (*GetUniqueId)(NcclUniqueId*) = nullptr;
  nccl_result (*CommInitRank)(nccl_comm*, int, NcclUniqueId, int) = nullptr;
  nccl_result (*CommInitAll)(nccl_comm*, int, const int*) = nullptr;
  nccl_result (*CommDestroy)(nccl_comm) = nullptr;
  nccl_result (*AllReduce)(const void*, void*, size_t, int, int, nccl_comm, cudaStream_t) = nullptr;
  nccl_result (*AllGather)(const void*, void*, size_t, int, nccl_comm, cudaStream_t) = nullptr;
  nccl_result (*ReduceScatter)(const void*, void*, size_t, int, int, nccl_comm, cudaStream_t) = nullptr;
  nccl_result (*Broadcast)(const void*, void*, size_t, int, int, nccl_comm, cudaStream_t) = nullptr;
  nccl_result (*Send)(const void*, size_t, int, int, nccl_comm, cudaStream_t) = nullptr;
  nccl_result (*Recv)(void*, size_t, int, int, nccl_comm, cudaStream_t) = nullptr;
  nccl_result (*GroupStart)() = nullptr;
  nccl_result (*GroupEnd)() = nullptr;
  const char* (*GetLastError)(nccl_comm) = nullptr;  // NCCL 2.13+: the text of the last warning
  nccl_result (*MemAlloc)(void**, size_t) = nullptr;   // NCCL 2.19+: what nccl-tests allocates its buffers with
  nccl_result (*MemFree)(void*) = nullptr;

  // "" when loaded, else why not.
  std::string load() {
    const char* env = std::getenv("UMSCOPE_NCCL");
    std::string want = env && *env ? env : "libnccl.so.2";
    struct stat st {};
    if (env && *env && stat(want.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) want += "/libnccl.so.2";
    handle = dlopen(want.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* err = dlerror();
      if (env && *env) return "cannot load NCCL from UMSCOPE_NCCL=" + std::string(env) + ": " + (err ? err : "?");
      return std::string("NCCL not found (") + (err ? err : "dlopen failed") +
             "): install libnccl2 or the nvidia-nccl-cu13 wheel, or set UMSCOPE_NCCL=/path/to/libnccl.so.2";
    }
    struct link_map* lm = nullptr;
    path = dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name ? lm->l_name : want;
    std::string missing;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
      if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
    };
    sym(GetVersion, "ncclGetVersion");
    sym(GetErrorString, "ncclGetErrorString");
    sym(GetUniqueId, "ncclGetUniqueId");
    sym(CommInitRank, "ncclCommInitRank");
    sym(CommInitAll, "ncclCommInitAll");
    sym(CommDestroy, "ncclCommDestroy");
    sym(AllReduce, "ncclAllReduce");
    sym(AllGather, "ncclAllGather");
    sym(ReduceScatter, "ncclReduceScatter");
    sym(Broadcast, "ncclBroadcast");
    sym(Send, "ncclSend");
    sym(Recv, "ncclRecv");
    sym(GroupStart, "ncclGroupStart");
    sym(GroupEnd, "ncclGroupEnd");
    if (!missing.empty()) return path + " lacks " + missing + " (NCCL older than 2.7?)";
    GetLastError = reinterpret_cast<const char* (*)(nccl_comm)>(dlsym(handle, "ncclGetLastError"));
    MemAlloc = reinterpret_cast<nccl_result (*)(void**, size_t)>(dlsym(handle, "ncclMemAlloc"));
    MemFree = reinterpret_cast<nccl_result (*)(void*)>(dlsym(handle, "ncclMemFree"));
    int v = 0;
    GetVersion(&v);
    // Since 2.9: major*10000 + minor*100 + patch; before: major*1000 + minor*100 + patch.
    int major = v >= 10000 ? v / 10000 : v / 1000, minor = v >= 10000 ? (v / 100) % 100 : (v / 100) % 10;
    version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
    return "";
  }

  // Throws on an error; arguments NCCL rejects for this memory are a Skip.
  void check(nccl_result r, const char* what, const KindSpec& kind) const {
    if (r == 0) return;
    std::string msg = std::string(what) + ": " + GetErrorString(r);
    const char* last = GetLastError ? GetLastError(nullptr) : nullptr;
    if (last && *last) msg += std::string(" (NCCL: ") + last + ")";
    if (r == kInvalidArgument || r == kInvalidUsage) throw Skip("NCCL refused " + kind.str() + " buffers: " + msg);
    throw std::runtime_error(msg);
  }
};

__device__ __forceinline__ float value(size_t idx, int rank) { return float(rank + 1) + float(idx % 13); }

__global__ void fill_send(float* p, size_t n, int rank) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = value(i, rank);
}

__global__ void poison(float* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = __int_as_float(0x7fc00000);  // NaN: equal to nothing
}

enum Op { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAllToAll };

// Counts received elements that differ from what op must leave on rank `rank` of n;
// `count` is the per-rank count of the call (elements received: count, or count * n).
__global__ void check_recv(const float* p, size_t elems, int op, int n, int rank, size_t count,
                           unsigned long long* bad) {
  unsigned long long mine = 0;
  const float sum_ranks = 0.5f * n * (n + 1);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < elems; i += size_t(gridDim.x) * blockDim.x) {
    float want;
    if (op == kAllReduce) want = sum_ranks + float(n) * float(i % 13);
    else if (op == kAllGather) want = value(i % count, int(i / count));
    else if (op == kReduceScatter) want = sum_ranks + float(n) * float((rank * count + i) % 13);
    else if (op == kBroadcast) want = value(i, 0);
    else want = value(rank * count + i % count, int(i / count));  // all-to-all: block j came from rank j
    mine += p[i] != want;
  }
  if (mine) atomicAdd(bad, mine);
}

void fill_cpu(float* p, size_t n, int rank) {
  for (size_t i = 0; i < n; ++i) p[i] = float(rank + 1) + float(i % 13);
}

const char* op_name(Op op) {
  static const char* names[] = {"allreduce", "allgather", "reducescatter", "broadcast", "alltoall"};
  return names[op];
}

// One rank of the communicator that this process drives.
struct Rank {
  int dev = 0, rank = 0;
  nccl_comm comm = nullptr;
  cudaStream_t stream = nullptr;
  std::unique_ptr<EventClock> clock;  // 0: start, 1: stop, on the rank's stream
  unsigned long long* bad = nullptr;
  std::unique_ptr<Buffer> send, recv;
  float* sp = nullptr;
  float* rp = nullptr;
  bool nccl_alloc = false;  // sp and rp from ncclMemAlloc (--alloc nccl), freed with ncclMemFree
};

std::string list_text(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

void run_nccl(Context& ctx) {
  const KindSpec kind = parse_kind(ctx.args.str("kind", "device"));
  static const std::vector<std::string> kOps = {"allreduce", "allgather", "reducescatter", "broadcast", "alltoall"};
  std::vector<Op> ops;
  for (const std::string& o : ctx.args.choices("op", "allreduce,allgather", kOps))
    ops.push_back(static_cast<Op>(std::find(kOps.begin(), kOps.end(), o) - kOps.begin()));
  std::vector<size_t> sizes;
  for (const std::string& s : ctx.args.list("bytes", "64KiB,1MiB,64MiB,1GiB")) sizes.push_back(parse_bytes(s) / 4 * 4);
  for (size_t s : sizes)
    if (s == 0) throw UsageError("nccl sizes must be at least 4 bytes (one float)");
  const std::string launch = ctx.args.choices("launch", "single", {"single", "mpi"})[0];
  const std::string launcher = ctx.args.str("launcher", "");
  const std::string gpus_arg = ctx.args.str("gpus", "all");
  const long long iters_arg = ctx.args.integer("iters", 0);
  if (iters_arg < 0 || iters_arg > 10000) throw UsageError("--iters must be from 1 to 10000 (0: by size)");
  // kind: the kind's own allocator (device: cudaMalloc); nccl: ncclMemAlloc (cuMem), as nccl-tests since NCCL 2.19
  const std::string alloc = ctx.args.choices("alloc", "kind", {"kind", "nccl"})[0];
  if (alloc == "nccl" && kind.name != "device") throw UsageError("--alloc nccl is for --kind device only");
  World& w = world();
  if (launch == "mpi" && w.runtime != "mpi")
    throw UsageError("--launch mpi runs in umbench-mpi under a launcher: umscope bench nccl --launcher mpirun -n 2");
  if (launch == "single" && w.size > 1)
    throw UsageError("--launch single is one process driving every GPU; under a launcher use --launch mpi");

  Nccl nccl;
  world_agree(nccl.load());
  // peer:N: each rank's buffers on the GPU N places further along (rank on GPU d: GPU (d + N) mod GPUs), the
  // peer-memory placement of Fusco et al.'s Fig. 18; NCCL decides whether it takes them.
  if (!gpu_caps(0).present) throw Skip(gpu_caps(0).why_absent);
  int visible = 0;
  UM_CUDA(cudaGetDeviceCount(&visible));
  if (launch == "mpi") ctx.device = ctx.alloc.device = w.local_rank % visible;  // one GPU per local rank
  ctx.use_gpu();
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // never multicast on a shared machine

  std::vector<Rank> ranks;
  std::vector<int> devs;
  int n = 0;
  if (launch == "single") {
    if (gpus_arg == "all") {
      for (int d = 0; d < visible; ++d) devs.push_back(d);
    } else {
      for (const std::string& g : ctx.args.list("gpus", "")) {
        char* end = nullptr;
        long d = std::strtol(g.c_str(), &end, 10);
        if (g.empty() || *end || d < 0) throw UsageError("--gpus takes 'all' or GPU numbers, got '" + g + "'");
        if (d >= visible) throw Skip("no GPU " + g + ": this machine has " + std::to_string(visible));
        devs.push_back(static_cast<int>(d));
      }
    }
    if (devs.size() < 2)
      throw Skip("one GPU: a collective over one rank moves no data between GPUs (the nccl family needs 2 or more)");
    n = static_cast<int>(devs.size());
    ranks.resize(n);
    for (int i = 0; i < n; ++i) ranks[i].dev = devs[i], ranks[i].rank = i;
  } else {
    n = w.size;
    ranks.resize(1);
    ranks[0].dev = w.local_rank % visible;
    ranks[0].rank = w.rank;
    devs.push_back(ranks[0].dev);
  }

  // Released on every way out, the buffers of --alloc nccl too.
  struct Cleanup {
    std::vector<Rank>& ranks;
    const Nccl& nccl;
    ~Cleanup() {
      for (Rank& r : ranks) {
        cudaSetDevice(r.dev);
        if (r.comm) nccl.CommDestroy(r.comm);
        r.clock.reset();
        if (r.stream) cudaStreamDestroy(r.stream);
        if (r.bad) cudaFree(r.bad);
        if (r.nccl_alloc) {
          if (r.sp) nccl.MemFree(r.sp);
          if (r.rp) nccl.MemFree(r.rp);
        }
      }
    }
  } cleanup{ranks, nccl};

  // Buffers first (a kind this machine cannot serve is a skip on every rank), then the communicator.
  const size_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  std::string why;
  try {
    for (Rank& r : ranks) {
      AllocOptions opt = ctx.alloc;
      opt.device = r.dev;
      KindSpec k = kind;
      if (k.name == "peer") {
        if (k.arg % visible == 0)
          throw Skip("peer:" + std::to_string(k.arg) + " is the rank's own GPU on this host of " +
                     std::to_string(visible) + " GPUs (peer:N takes the GPU N places further along)");
        k.arg = (r.dev + k.arg) % visible;
      }
      if (alloc == "nccl") {
        if (!nccl.MemAlloc || !nccl.MemFree) throw Skip(nccl.path + " lacks ncclMemAlloc (NCCL older than 2.19)");
        UM_CUDA(cudaSetDevice(r.dev));
        void *sp = nullptr, *rp = nullptr;
        nccl.check(nccl.MemAlloc(&sp, max_bytes), "ncclMemAlloc", kind);
        r.sp = static_cast<float*>(sp), r.nccl_alloc = true;
        nccl.check(nccl.MemAlloc(&rp, max_bytes), "ncclMemAlloc", kind);
        r.rp = static_cast<float*>(rp);
        fill_send<<<1024, 256>>>(r.sp, max_bytes / 4, r.rank);
        UM_CUDA(cudaGetLastError());
        UM_CUDA(cudaDeviceSynchronize());
        continue;
      }
      r.send.reset(new Buffer(k, max_bytes, opt));
      r.recv.reset(new Buffer(k, max_bytes, opt));
      if (!r.send->gpu()) {
        why = "NCCL's kernels need GPU-reachable memory: " + r.send->gpu_unreachable();
        break;
      }
      UM_CUDA(cudaSetDevice(r.dev));
      const int rank = r.rank;
      Initializer init;
      init.cpu = [rank](void* p, size_t bytes) { fill_cpu(static_cast<float*>(p), bytes / 4, rank); };
      init.gpu = [rank](void* p, size_t bytes) {
        fill_send<<<1024, 256>>>(static_cast<float*>(p), bytes / 4, rank);
        UM_CUDA(cudaGetLastError());
        UM_CUDA(cudaDeviceSynchronize());
      };
      r.send->place(init);
      r.recv->place(Initializer{});
      r.sp = static_cast<float*>(r.send->gpu());
      r.rp = static_cast<float*>(r.recv->gpu());
    }
  } catch (const Skip& e) {
    why = e.what();
  }
  world_agree(why);

  for (Rank& r : ranks) {
    UM_CUDA(cudaSetDevice(r.dev));
    UM_CUDA(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    r.clock.reset(new EventClock(2, r.stream));
    UM_CUDA(cudaMalloc(&r.bad, sizeof(unsigned long long)));
  }
  if (launch == "single") {
    std::vector<nccl_comm> comms(n);
    nccl.check(nccl.CommInitAll(comms.data(), n, devs.data()), "ncclCommInitAll", kind);
    for (int i = 0; i < n; ++i) ranks[i].comm = comms[i];
  } else {
    NcclUniqueId id{};
    if (w.rank == 0) nccl.check(nccl.GetUniqueId(&id), "ncclGetUniqueId", kind);
    world_bcast(&id, sizeof id, 0);
    UM_CUDA(cudaSetDevice(ranks[0].dev));
    nccl.check(nccl.CommInitRank(&ranks[0].comm, n, id, w.rank), "ncclCommInitRank", kind);
  }

  // Issues `times` back-to-back calls of op on every rank this process drives.
  auto issue = [&](Op op, size_t count, int times) {
    for (int t = 0; t < times; ++t) {
      nccl.check(nccl.GroupStart(), "ncclGroupStart", kind);
      try {
        for (Rank& r : ranks) {
          switch (op) {
            case kAllReduce:
              nccl.check(nccl.AllReduce(r.sp, r.rp, count, kFloat32, kSum, r.comm, r.stream), "ncclAllReduce", kind);
              break;
            case kAllGather:
              nccl.check(nccl.AllGather(r.sp, r.rp, count, kFloat32, r.comm, r.stream), "ncclAllGather", kind);
              break;
            case kReduceScatter:
              nccl.check(nccl.ReduceScatter(r.sp, r.rp, count, kFloat32, kSum, r.comm, r.stream), "ncclReduceScatter",
                         kind);
              break;
            case kBroadcast:
              nccl.check(nccl.Broadcast(r.sp, r.rp, count, kFloat32, 0, r.comm, r.stream), "ncclBroadcast", kind);
              break;
            case kAllToAll:
              for (int j = 0; j < n; ++j) {
                nccl.check(nccl.Send(r.sp + j * count, count, kFloat32, j, r.comm, r.stream), "ncclSend", kind);
                nccl.check(nccl.Recv(r.rp + j * count, count, kFloat32, j, r.comm, r.stream), "ncclRecv", kind);
              }
              break;
          }
        }
      } catch (...) {
        nccl.GroupEnd();  // a refused call leaves no group open behind it
        throw;
      }
      nccl.check(nccl.GroupEnd(), "ncclGroupEnd", kind);
    }
  };
  auto sync_all = [&]() {
    for (Rank& r : ranks) {
      UM_CUDA(cudaSetDevice(r.dev));
      UM_CUDA(cudaStreamSynchronize(r.stream));
    }
  };

  std::string proc;
  if (launch == "single") {
    for (int d : devs) proc += (proc.empty() ? "gpu" : "+gpu") + std::to_string(d);
  } else {
    proc = std::to_string(n) + " ranks";
  }
  std::vector<std::string> hosts = launch == "mpi" ? w.gather(w.host) : std::vector<std::string>{w.host};
  std::vector<std::string> cpus = launch == "mpi" ? w.gather(cpu_ranges(os::allowed_cpus()))
                                                   : std::vector<std::string>{cpu_ranges(os::allowed_cpus())};
  std::string rank_cpus, peer_gpus;
  for (size_t r = 0; r < cpus.size(); ++r) rank_cpus += (r ? " " : "") + std::to_string(r) + ":" + cpus[r];
  for (Rank& r : ranks)
    if (kind.name == "peer")
      peer_gpus += (peer_gpus.empty() ? "gpu" : " gpu") + std::to_string(r.dev) + ":gpu" +
                   std::to_string((r.dev + kind.arg) % visible);
  std::sort(hosts.begin(), hosts.end());
  const int nhosts = static_cast<int>(std::unique(hosts.begin(), hosts.end()) - hosts.begin());

  for (Op op : ops) {
    const double factor = op == kAllReduce ? 2.0 * (n - 1) / n : op == kBroadcast ? 1.0 : double(n - 1) / n;
    for (size_t size : sizes) {
      const size_t elems = size / 4;
      const bool per_rank = op == kAllGather || op == kReduceScatter || op == kAllToAll;
      const size_t count = per_rank ? elems / n : elems;  // the count the NCCL call takes
      if (count == 0) continue;  // smaller than one float per rank
      const size_t used = (per_rank ? count * n : count) * 4;
      const size_t recv_elems = op == kReduceScatter ? count : per_rank ? count * n : count;
      // Calls per timed sample: nccl-tests' 20 (-n 20) up to 256 MiB, then fewer, down to 1 at 4 GiB and more
      // (a sample of at least about 4 GiB per rank); --iters sets it.
      const int inner = iters_arg ? static_cast<int>(iters_arg)
                                  : static_cast<int>(std::clamp<size_t>((size_t(4) << 30) / used, 1, 20));
      for (Rank& r : ranks) {
        UM_CUDA(cudaSetDevice(r.dev));
        poison<<<1024, 256, 0, r.stream>>>(r.rp, recv_elems);
        UM_CUDA(cudaGetLastError());
      }
      sync_all();
      issue(op, count, 1);  // untimed: connections and buffers are set up on first use
      sync_all();
      std::vector<double> busbw, algbw, time_us;
      for (int rep = 0; rep < ctx.warmup + ctx.reps; ++rep) {
        // One untimed call first: the timed ones queue behind it, so the start event fires when the GPU is
        // already busy and the sample holds neither the host's launch of the first call nor the ranks'
        // arrival skew (one call per sample at 64 MiB measured 0.91x nccl-tests' 20 back-to-back).
        issue(op, count, 1);
        for (Rank& r : ranks) {
          UM_CUDA(cudaSetDevice(r.dev));
          r.clock->record(0);
        }
        issue(op, count, inner);
        for (Rank& r : ranks) {
          UM_CUDA(cudaSetDevice(r.dev));
          r.clock->record(1);
        }
        double ms = 0;
        for (Rank& r : ranks) {
          UM_CUDA(cudaSetDevice(r.dev));
          r.clock->wait(1);
          ms = std::max(ms, double(r.clock->ms(0, 1)));
        }
        ms = world_max(ms);  // the slowest rank's time: a collective ends when its last rank does
        if (rep < ctx.warmup) continue;
        const double secs = ms * 1e-3 / inner;
        algbw.push_back(used / secs / 1e9);
        busbw.push_back(algbw.back() * factor);
        time_us.push_back(secs * 1e6);
      }
      // Verification of the last call's output on every rank.
      long long bad = 0;
      for (Rank& r : ranks) {
        UM_CUDA(cudaSetDevice(r.dev));
        UM_CUDA(cudaMemsetAsync(r.bad, 0, sizeof(unsigned long long), r.stream));
        check_recv<<<1024, 256, 0, r.stream>>>(r.rp, recv_elems, op, n, r.rank, count, r.bad);
        UM_CUDA(cudaGetLastError());
        unsigned long long b = 0;
        UM_CUDA(cudaMemcpyAsync(&b, r.bad, sizeof b, cudaMemcpyDeviceToHost, r.stream));
        UM_CUDA(cudaStreamSynchronize(r.stream));
        bad += static_cast<long long>(b);
      }
      bad = world_sum(bad);
      if (bad)
        throw VerifyError(std::to_string(bad) + " received elements differ from the expected " + op_name(op) +
                          " result (" + std::to_string(used) + " B, " + kind.str() + ")");
      JsonObject rec = ctx.record(op_name(op), proc, kind, used);
      Context::put_summary(rec, "busbw", "GB/s", busbw);
      Summary a = summarize(algbw), t = summarize(time_us);
      rec.set("algbw", a.median).set("algbw_min", a.min).set("algbw_max", a.max);
      rec.set("time_us", t.median).set("time_us_min", t.min).set("time_us_max", t.max);
      rec.set("bus_factor", factor);
      rec.set("ranks", n).set("hosts", nhosts).set("gpus", list_text(devs));
      rec.set("launch", launch).set("launcher", launcher).set("rank_cpus", rank_cpus);
      if (launch == "mpi") rec.set("rank_placement", w.rank_placement);
      if (kind.name == "peer") rec.set("buffers_on", peer_gpus);
      rec.set("ops_per_sample", inner).set("lead_in_calls", 1).set("dtype", "float32").set("in_place", false);
      rec.set("nccl_version", nccl.version).set("nccl_library", nccl.path);
      rec.set("alloc", alloc == "nccl" ? "ncclMemAlloc" : kind.name == "device" ? "cudaMalloc" : "the kind's");
      const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
      rec.set("nccl_nvls_enable", nvls ? nvls : "");
      rec.set("verified", "cpu-reference");  // compared with the exact expected values
      rec.set("verification", "every received element compared on the GPU with the exact float32 result");
      ctx.emit(rec);
    }
  }
}

BenchRegistrar reg({"nccl", "gpu",
                    "NCCL collectives (allreduce, allgather, reducescatter, broadcast, alltoall) over buffers of "
                    "any kind: algbw and busbw as nccl-tests defines them; one process for every local GPU "
                    "(--launch single) or one rank per GPU under a launcher (--launch mpi, umbench-mpi)",
                    {"allreduce", "allgather", "reducescatter", "broadcast", "alltoall"},
                    {"kind", "op", "bytes", "launch", "launcher", "gpus", "iters", "alloc"},
                    run_nccl});

}  // namespace
}  // namespace umscope
