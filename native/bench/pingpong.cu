// Ping-pong: two agents take turns advancing a flag with system-scope
// compare-and-swap; the round-trip time is how long one turn takes to come
// back. Agents: a CPU thread and a GPU thread (cpu-gpu), two GPU blocks on
// different SMs (gpu-gpu), or on two GPUs (gpu-gpu --peer N), two CPU threads on different cores (cpu-cpu).
// The flag lives in the memory kind under test, alone in its own two cache
// lines; a counter for the coherence check sits a page away.
//
// Before timing, both agents increment a shared counter with system-scope
// atomics at the same time. If increments are lost (no coherent atomics
// between the two over this memory), the case is skipped with that finding.
// Every wait has a deadline: an agent that sees no turn for 10 s gives up and
// tells the other, so a platform without coherence cannot hang the case.
// Where the increments are lost, turn-taking (one writer at a time) may still
// work: it is measured and told in the skip reason, not recorded as a result.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "umscope/bench.hpp"
#include "umscope/caps.hpp"
#include "umscope/errors.hpp"
#include "umscope/os.hpp"
#include "umscope/threads.hpp"

namespace umscope {
namespace {

constexpr unsigned kAbort = 0xFFFFFFFFu;
constexpr size_t kCounterOffset = 4096;  // the counter's own page
constexpr double kTimeoutS = 10.0;

__device__ __forceinline__ unsigned long long gns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned load_sys(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned smid() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// Per agent: out[4*role + 0] = 1 on timeout, [1] ns from its first turn to
// its last, [2] SM id. Role = first_role + blockIdx.x.
__global__ void gpu_agent(unsigned* flag, int first_role, long long rounds, unsigned long long* out) {
  const int role = first_role + blockIdx.x;
  const unsigned long long patience = static_cast<unsigned long long>(kTimeoutS * 1e9);
  unsigned long long t0 = 0;
  for (long long k = 0; k < rounds; ++k) {
    const unsigned want = static_cast<unsigned>(2 * k + role);
    const unsigned long long deadline = gns() + patience;
    unsigned v;
    while ((v = load_sys(flag)) != want) {
      if (v == kAbort || gns() > deadline) {
        atomicExch_system(flag, kAbort);
        out[4 * role] = 1;
        return;
      }
    }
    atomicCAS_system(flag, want, want + 1);
    if (k == 0) t0 = gns();
  }
  out[4 * role + 1] = gns() - t0;
  out[4 * role + 2] = smid();
}

__global__ void gpu_increment(unsigned* counter, long long n) {
  for (long long i = 0; i < n; ++i) atomicAdd_system(counter, 1u);
}

// The CPU agent; returns seconds from its first turn to its last, or < 0 on timeout.
double cpu_agent(unsigned* flag, int role, long long rounds) {
  using clk = std::chrono::steady_clock;
  clk::time_point t0{};
  for (long long k = 0; k < rounds; ++k) {
    const unsigned want = static_cast<unsigned>(2 * k + role);
    const auto deadline = clk::now() + std::chrono::duration<double>(kTimeoutS);
    unsigned v;
    long spins = 0;
    while ((v = __atomic_load_n(flag, __ATOMIC_ACQUIRE)) != want) {
      if (v == kAbort || ((++spins & 1023) == 0 && clk::now() > deadline)) {
        __atomic_store_n(flag, kAbort, __ATOMIC_RELEASE);
        return -1;
      }
    }
    unsigned expected = want;
    __atomic_compare_exchange_n(flag, &expected, want + 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    if (k == 0) t0 = clk::now();
  }
  return std::chrono::duration<double>(clk::now() - t0).count();
}

void run_pingpong(Context& ctx) {
  KindSpec kind = parse_kind(ctx.args.str("kind", "pinned"));
  const std::string pair = ctx.args.choices("pair", "cpu-gpu", {"cpu-gpu", "gpu-gpu", "cpu-cpu"})[0];
  const long long rounds = ctx.args.integer("exchanges", 10000);
  if (rounds < 2 || rounds > 2000000000LL / 2) throw UsageError("--exchanges must be from 2 to 10^9");
  const long long incs = ctx.args.integer("increments", 100000);
  if (incs < 1) throw UsageError("--increments must be positive");
  const bool cpu_side = pair != "gpu-gpu", gpu_side = pair != "cpu-cpu";
  // --peer N: the second GPU agent runs on GPU N (across the peer link) instead of a second SM.
  const int peer = static_cast<int>(ctx.args.integer("peer", -1));
  if (ctx.args.has("peer") && pair != "gpu-gpu") throw UsageError("--peer goes with --pair gpu-gpu");
  const bool across = pair == "gpu-gpu" && peer >= 0;
  if (gpu_side || kind_uses_cuda(kind)) ctx.use_gpu();
  if (across) {
    if (peer == ctx.device) throw UsageError("--peer names another GPU than --device");
    int count = 0, ab = 0, ba = 0;
    UM_CUDA(cudaGetDeviceCount(&count));
    if (peer >= count) throw Skip("no GPU " + std::to_string(peer) + ": this machine has " + std::to_string(count));
    UM_CUDA(cudaDeviceCanAccessPeer(&ab, ctx.device, peer));
    UM_CUDA(cudaDeviceCanAccessPeer(&ba, peer, ctx.device));
    if (!ab || !ba) throw Skip("GPUs " + std::to_string(ctx.device) + " and " + std::to_string(peer) +
                               " have no peer access to each other");
    for (int from : {ctx.device, peer}) {  // both ways: each agent may reach the other GPU's memory
      UM_CUDA(cudaSetDevice(from));
      cudaError_t e = cudaDeviceEnablePeerAccess(from == peer ? ctx.device : peer, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
      else UM_CUDA(e);
    }
    UM_CUDA(cudaSetDevice(ctx.device));
  }
  std::vector<int> cpus = os::allowed_cpus();
  if (pair == "cpu-cpu" && cpus.size() < 2) throw Skip("cpu-cpu needs two CPUs; this process may use one");

  Buffer buf(kind, 2 * kCounterOffset, ctx.alloc);
  if (cpu_side && !buf.cpu()) throw Skip("the CPU agent cannot reach this memory: " + buf.cpu_unreachable());
  if (gpu_side && !buf.gpu()) throw Skip("the GPU agent cannot reach this memory: " + buf.gpu_unreachable());
  buf.place(Initializer{});  // zeros, written by the kind's first-touch processor
  auto* gflag = static_cast<unsigned*>(buf.gpu());
  auto* cflag = static_cast<unsigned*>(buf.cpu());
  auto* gcount = gflag ? reinterpret_cast<unsigned*>(static_cast<char*>(buf.gpu()) + kCounterOffset) : nullptr;
  auto* ccount = cflag ? reinterpret_cast<unsigned*>(static_cast<char*>(buf.cpu()) + kCounterOffset) : nullptr;
  auto reset = [&](unsigned* cpu_p, unsigned* gpu_p) {
    const unsigned zero = 0;
    if (cpu_p) __atomic_store_n(cpu_p, 0u, __ATOMIC_SEQ_CST);
    else UM_CUDA(cudaMemcpy(gpu_p, &zero, sizeof zero, cudaMemcpyDefault));  // on whichever GPU owns it
  };
  auto read = [&](unsigned* cpu_p, unsigned* gpu_p) {
    unsigned v = 0;
    if (cpu_p) v = __atomic_load_n(cpu_p, __ATOMIC_SEQ_CST);
    else UM_CUDA(cudaMemcpy(&v, gpu_p, sizeof v, cudaMemcpyDefault));
    return v;
  };

  // 1. Coherence: both agents add `incs` at once; every increment must survive.
  reset(ccount, gcount);
  ThreadTeam team(pair == "cpu-cpu" ? 2 : 1);
  if (pair == "cpu-gpu") {
    gpu_increment<<<1, 1>>>(gcount, incs);
    UM_CUDA(cudaGetLastError());
    team.run([&](int, int) {
      for (long long i = 0; i < incs; ++i) __atomic_fetch_add(ccount, 1u, __ATOMIC_SEQ_CST);
    });
    UM_CUDA(cudaDeviceSynchronize());
  } else if (across) {
    for (int d : {ctx.device, peer}) {
      UM_CUDA(cudaSetDevice(d));
      gpu_increment<<<1, 1>>>(gcount, incs);
      UM_CUDA(cudaGetLastError());
    }
    for (int d : {ctx.device, peer}) {
      UM_CUDA(cudaSetDevice(d));
      UM_CUDA(cudaDeviceSynchronize());
    }
    UM_CUDA(cudaSetDevice(ctx.device));
  } else if (pair == "gpu-gpu") {
    gpu_increment<<<2, 1>>>(gcount, incs);
    UM_CUDA(cudaGetLastError());
    UM_CUDA(cudaDeviceSynchronize());
  } else {
    team.run([&](int, int) {
      for (long long i = 0; i < incs; ++i) __atomic_fetch_add(ccount, 1u, __ATOMIC_SEQ_CST);
    });
  }
  const unsigned long long got = read(ccount, gcount), want = 2ull * incs;
  const std::string check = std::to_string(got) + " of " + std::to_string(want) + " concurrent increments kept";
  const bool coherent = got == want;

  // 2. Ping-pong, `rounds` round trips per repetition. Role 0 moves first; the
  // time is taken by role 1 over its rounds - 1 round trips.
  unsigned long long *out = nullptr, *out_peer = nullptr;
  if (gpu_side) UM_CUDA(cudaMalloc(&out, 8 * sizeof(unsigned long long)));
  if (across) {
    UM_CUDA(cudaSetDevice(peer));
    UM_CUDA(cudaMalloc(&out_peer, 8 * sizeof(unsigned long long)));
    UM_CUDA(cudaSetDevice(ctx.device));
  }
  std::vector<double> rtt;
  unsigned sm0 = 0, sm1 = 0;
  for (int r = 0; r < ctx.warmup + ctx.reps; ++r) {
    reset(cflag, gflag);
    double secs = -1;
    if (pair == "cpu-gpu") {
      UM_CUDA(cudaMemset(out, 0, 8 * sizeof(unsigned long long)));
      gpu_agent<<<1, 1>>>(gflag, 0, rounds, out);
      UM_CUDA(cudaGetLastError());
      team.run([&](int, int) { secs = cpu_agent(cflag, 1, rounds); });
      UM_CUDA(cudaDeviceSynchronize());
      unsigned long long h[8];
      UM_CUDA(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
      if (h[0]) secs = -1;
      sm0 = static_cast<unsigned>(h[2]);
    } else if (across) {
      // Role 0 on this GPU, role 1 on the peer: both kernels run at once, one per GPU.
      unsigned long long* outs[2] = {out, out_peer};
      const int devs[2] = {ctx.device, peer};
      for (int i = 0; i < 2; ++i) {
        UM_CUDA(cudaSetDevice(devs[i]));
        UM_CUDA(cudaMemset(outs[i], 0, 8 * sizeof(unsigned long long)));
        gpu_agent<<<1, 1>>>(gflag, i, rounds, outs[i]);
        UM_CUDA(cudaGetLastError());
      }
      unsigned long long h[2][8];
      for (int i = 0; i < 2; ++i) {
        UM_CUDA(cudaSetDevice(devs[i]));
        UM_CUDA(cudaDeviceSynchronize());
        UM_CUDA(cudaMemcpy(h[i], outs[i], sizeof h[i], cudaMemcpyDeviceToHost));
      }
      UM_CUDA(cudaSetDevice(ctx.device));
      secs = (h[0][0] || h[1][4]) ? -1 : h[1][5] * 1e-9;
      sm0 = static_cast<unsigned>(h[0][2]);
      sm1 = static_cast<unsigned>(h[1][6]);
    } else if (pair == "gpu-gpu") {
      UM_CUDA(cudaMemset(out, 0, 8 * sizeof(unsigned long long)));
      gpu_agent<<<2, 1>>>(gflag, 0, rounds, out);
      UM_CUDA(cudaGetLastError());
      UM_CUDA(cudaDeviceSynchronize());
      unsigned long long h[8];
      UM_CUDA(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
      secs = (h[0] || h[4]) ? -1 : h[5] * 1e-9;
      sm0 = static_cast<unsigned>(h[2]);
      sm1 = static_cast<unsigned>(h[6]);
    } else {
      double t[2] = {0, 0};
      team.run([&](int tid, int) { t[tid] = cpu_agent(cflag, tid, rounds); });
      secs = (t[0] < 0 || t[1] < 0) ? -1 : t[1];
    }
    if (secs < 0 && !coherent)
      throw Skip("no coherent atomics between " + pair + " on " + kind.str() + ": " + check +
                 "; turn-taking by CAS did not complete either (no turn seen for " + json_number(kTimeoutS) + " s)");
    if (secs < 0)
      throw VerifyError("an agent saw no turn for " + json_number(kTimeoutS) + " s: the flag's updates "
                        "did not become visible (" + pair + " on " + kind.str() + ")");
    const unsigned final_flag = read(cflag, gflag);
    if (final_flag != 2ull * rounds)
      throw VerifyError("flag ended at " + std::to_string(final_flag) + ", expected " + std::to_string(2 * rounds));
    if (r >= ctx.warmup) rtt.push_back(secs * 1e9 / (rounds - 1));
  }
  if (out) cudaFree(out);
  if (out_peer) cudaFree(out_peer);
  if (!coherent) {
    Summary t = summarize(rtt);
    auto f1 = [](double v) {
      char b[32];
      std::snprintf(b, sizeof b, "%.1f", v);
      return std::string(b);
    };
    throw Skip("no coherent atomics between " + pair + " on " + kind.str() + ": " + check +
               "; turn-taking by CAS alone (one writer at a time) still works: round trip " + f1(t.median) +
               " ns median (" + f1(t.min) + "-" + f1(t.max) + ") over " + std::to_string(rtt.size()) +
               " x " + std::to_string(rounds) + " exchanges, not recorded as a coherent result");
  }

  std::string proc = pair == "cpu-gpu"   ? "cpu-gpu" + std::to_string(ctx.device)
                     : pair == "gpu-gpu" ? "gpu" + std::to_string(ctx.device) + "-gpu" +
                                               std::to_string(across ? peer : ctx.device)
                                         : "cpu-cpu";
  JsonObject rec = ctx.record("pingpong", proc, kind, sizeof(unsigned));
  Context::put_summary(rec, "round_trip", "ns", rtt);
  rec.set("pair", pair);
  rec.set("exchanges", rounds);
  rec.set("atomics_check", check);
  if (across) rec.set("peer", peer);
  if (pair == "gpu-gpu" && !across) {
    rec.set("sms", std::to_string(sm0) + "," + std::to_string(sm1));
    if (sm0 == sm1) rec.set("note", "both blocks ran on one SM");
  }
  if (cpu_side) {
    std::string c;
    for (int x : team.cpus()) c += (c.empty() ? "" : ",") + std::to_string(x);
    rec.set("cpus", c);
  }
  rec.set("verified", "invariant:flag-count");  // the flag counted every turn
  ctx.emit(rec);
}

BenchRegistrar reg({"pingpong", "gpu|cpu",
                    "round-trip latency of a flag passed between two agents with system-scope compare-and-swap "
                    "(cpu-gpu, gpu-gpu, cpu-cpu), after a check that their atomics are coherent",
                    {"pingpong"},
                    {"kind", "pair", "exchanges", "increments", "peer"},
                    run_pingpong});

}  // namespace
}  // namespace umscope
