// Load-to-use latency: one thread follows a chain of dependent loads through
// a random cyclic permutation of the slots of a buffer, on the GPU or on the
// CPU, over any memory kind the processor reaches, for a list of footprints.
//
// The chain visits every slot once per cycle in random order (Sattolo's
// algorithm), so consecutive loads fall in random pages: neither a prefetcher
// nor the TLB can hide a miss once the footprint outgrows them. Each slot
// holds the address of the next as the chasing processor sees it.
//
// GPU: one thread, timed with the SM cycle counter and the global timer; the
// two are calibrated against each other (op "timer"). CPU: one thread pinned
// to a core, timed with the steady clock.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "umscope/bench.hpp"
#include "umscope/caps.hpp"
#include "umscope/errors.hpp"
#include "umscope/os.hpp"
#include "umscope/threads.hpp"

namespace umscope {
namespace {

// Next-slot indices of one random cycle through n slots (Sattolo).
std::vector<uint64_t> build_cycle(size_t n, uint64_t seed) {
  std::vector<uint64_t> next(n);
  std::vector<uint64_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(seed);
  for (size_t i = n - 1; i > 0; --i) {
    size_t j = std::uniform_int_distribution<size_t>(0, i - 1)(rng);
    std::swap(order[i], order[j]);
  }
  for (size_t i = 0; i < n; ++i) next[order[i]] = order[(i + 1) % n];
  return next;
}

// The cycle for (n, seed), built once per process: in a batch every kind chases the same footprints with the
// same seed, and building the cycle of a 1 GiB footprint (2^23 slots) took a good part of a second, once per
// case. Untimed preparation; the cycle is a pure function of (n, seed), so a case sees the same chain either
// way. Cycles of up to 96 MiB in all are kept; a larger one is built into `own` and dropped with the case.
const std::vector<uint64_t>& random_cycle(size_t n, uint64_t seed, std::vector<uint64_t>& own) {
  static std::map<std::pair<size_t, uint64_t>, std::vector<uint64_t>> cache;
  constexpr size_t kCacheBytes = size_t(96) << 20;
  const auto key = std::make_pair(n, seed);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (n * sizeof(uint64_t) > kCacheBytes) {
    own = build_cycle(n, seed);
    return own;
  }
  size_t held = 0;
  for (auto& e : cache) held += e.second.size() * sizeof(uint64_t);
  if (held + n * sizeof(uint64_t) > kCacheBytes) cache.clear();
  return cache[key] = build_cycle(n, seed);
}

// Writes slots [lo, hi) of the chain into `dst` (which the writer can address; slot lo at dst): slot i's
// first word is `base + next[i] * stride`, the address the chasing processor uses.
void write_chain(void* dst, const std::vector<uint64_t>& next, size_t stride, uint64_t base, size_t lo, size_t hi) {
  auto* p = static_cast<unsigned char*>(dst);
  for (size_t i = lo; i < hi; ++i) {
    uint64_t v = base + next[i] * stride;
    std::memcpy(p + (i - lo) * stride, &v, sizeof v);
  }
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// out: [0] final pointer, [1] cycles, [2] ns
__global__ void chase_kernel(const uint64_t* start, long long warm, long long steps, unsigned long long* out) {
  const uint64_t* p = start;
  for (long long i = 0; i < warm; ++i) p = reinterpret_cast<const uint64_t*>(*p);
  long long c0 = clock64();
  unsigned long long g0 = global_ns();
  for (long long i = 0; i < steps; ++i) p = reinterpret_cast<const uint64_t*>(*p);
  // Make the clocks wait for the last load.
  if (p == nullptr) c0 -= 1;
  long long c1 = clock64();
  unsigned long long g1 = global_ns();
  out[0] = reinterpret_cast<unsigned long long>(p);
  out[1] = static_cast<unsigned long long>(c1 - c0);
  out[2] = g1 - g0;
}

// Spins ~`ns` nanoseconds reading both clocks; [0] cycles, [1] ns, [2] the
// smallest nonzero step of the global timer seen.
__global__ void timer_kernel(unsigned long long ns, unsigned long long* out) {
  unsigned long long g0 = global_ns(), g = g0, last = g0, step = ~0ull;
  long long c0 = clock64();
  while (g - g0 < ns) {
    g = global_ns();
    if (g != last) {
      step = min(step, g - last);
      last = g;
    }
  }
  long long c1 = clock64();
  out[0] = static_cast<unsigned long long>(c1 - c0);
  out[1] = g - g0;
  out[2] = step;
}

struct ChaseResult {
  std::vector<double> ns, cycles;
  uint64_t final_addr = 0;
};

ChaseResult gpu_chase(void* gpu_start, long long warm, long long steps, int reps) {
  unsigned long long* out = nullptr;
  UM_CUDA(cudaMalloc(&out, 3 * sizeof(unsigned long long)));
  ChaseResult r;
  // Each repetition goes on from where the last stopped, so it never replays
  // slots the previous one just pulled into the caches.
  const uint64_t* cur = static_cast<const uint64_t*>(gpu_start);
  for (int i = 0; i < reps; ++i) {
    chase_kernel<<<1, 1>>>(cur, i == 0 ? warm : 0, steps, out);
    UM_CUDA(cudaGetLastError());
    unsigned long long h[3];
    UM_CUDA(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    r.cycles.push_back(static_cast<double>(h[1]) / steps);
    r.ns.push_back(static_cast<double>(h[2]) / steps);
    r.final_addr = h[0];
    cur = reinterpret_cast<const uint64_t*>(h[0]);
  }
  cudaFree(out);
  return r;
}

// The chase on the CPU runs on a thread pinned to the first allowed CPU.
ChaseResult cpu_chase(void* start, long long warm, long long steps, int reps) {
  ChaseResult r;
  ThreadTeam one(1);
  one.run([&](int, int) {
    const uint64_t* p = static_cast<const uint64_t*>(start);
    for (long long i = 0; i < warm; ++i) p = reinterpret_cast<const uint64_t*>(*p);
    for (int k = 0; k < reps; ++k) {
      auto t0 = std::chrono::steady_clock::now();
      for (long long i = 0; i < steps; ++i) p = reinterpret_cast<const uint64_t*>(*p);
      auto t1 = std::chrono::steady_clock::now();
      r.ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / steps);
    }
    r.final_addr = reinterpret_cast<uint64_t>(p);
  });
  return r;
}

void emit_timer(Context& ctx) {
  unsigned long long* out = nullptr;
  UM_CUDA(cudaMalloc(&out, 3 * sizeof(unsigned long long)));
  std::vector<double> mhz;
  unsigned long long step = ~0ull;
  for (int i = 0; i < 5; ++i) {
    timer_kernel<<<1, 1>>>(20000000ull, out);  // 20 ms
    UM_CUDA(cudaGetLastError());
    unsigned long long h[3];
    UM_CUDA(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    mhz.push_back(static_cast<double>(h[0]) / static_cast<double>(h[1]) * 1e3);
    step = std::min(step, h[2]);
  }
  cudaFree(out);
  KindSpec none;
  none.name = "none";
  JsonObject rec = ctx.record("timer", "gpu" + std::to_string(ctx.device), none, 0);
  Context::put_summary(rec, "sm_clock", "MHz", mhz);
  rec.set("globaltimer_step_ns", static_cast<unsigned long long>(step));
  const double attr_mhz = gpu_caps(ctx.device).clock_khz / 1000.0;
  rec.set("clock_rate_attr_mhz", attr_mhz);
  // An invariant: the SM clock measured against the global timer lies within a factor of the clock the
  // device reports (a broken timer or conversion lands far outside), and the timer advanced.
  const double med = summarize(mhz).median;
  if (!(step > 0 && med > 0.2 * attr_mhz && med < 1.5 * attr_mhz))
    throw VerifyError("SM clock " + json_number(med) + " MHz against the global timer is not within 0.2-1.5 x the "
                      "device's " + json_number(attr_mhz) + " MHz");
  rec.set("verified", "invariant:clock-ratio");
  ctx.emit(rec);
}

void run_latency(Context& ctx) {
  KindSpec kind = parse_kind(ctx.args.str("kind", "device"));
  const std::string proc = ctx.args.choices("processor", "gpu", {"gpu", "cpu"})[0];
  const size_t stride = static_cast<size_t>(ctx.args.integer("stride", 128));
  if (stride < 8 || stride % 8 || stride > (1 << 20)) throw UsageError("--stride must be a multiple of 8 bytes up to 1 MiB");
  std::vector<size_t> sizes;
  for (const std::string& s : ctx.args.list("bytes", "1K,16K,256K,4M,64M,1G")) {
    size_t b = parse_bytes(s) / stride * stride;
    if (b < 2 * stride) throw UsageError("footprint '" + s + "' holds fewer than two slots of " + std::to_string(stride) + " B");
    sizes.push_back(b);
  }
  const long long steps_arg = ctx.args.integer("steps", 0);
  if (steps_arg < 0) throw UsageError("--steps must be positive");
  const uint64_t seed = static_cast<uint64_t>(ctx.args.integer("seed", 1));
  const bool on_gpu = proc == "gpu";
  if (on_gpu || kind_uses_cuda(kind)) ctx.use_gpu();
  if (on_gpu) emit_timer(ctx);
  const std::string pname = on_gpu ? "gpu" + std::to_string(ctx.device) : "cpu";

  for (size_t bytes : sizes) {
    const size_t n = bytes / stride;
    Buffer buf(kind, bytes, ctx.alloc);
    void* mine = buf.reach(on_gpu);
    std::vector<uint64_t> own;
    const std::vector<uint64_t>& next = random_cycle(n, seed, own);
    const uint64_t base = reinterpret_cast<uint64_t>(mine);
    // Whoever first-touches the buffer writes the chain: the CPU directly, the
    // GPU side by copying a staged chain in (cudaMemcpy runs on the GPU's copy engine),
    // through a host stage of at most 64 MiB (a stage of the whole footprint cost a 1 GiB fill per case).
    Initializer init;
    init.cpu = [&](void* p, size_t) {  // every allowed CPU writes a piece (and first-touches its pages)
      prepare_on_all_cpus(n, size_t(1) << 19 /* slots: 64 MiB at 128 B */, [&](size_t lo, size_t hi, int) {
        write_chain(static_cast<unsigned char*>(p) + lo * stride, next, stride, base, lo, hi);
      });
    };
    init.gpu = [&](void* p, size_t) {
      const size_t per = std::max<size_t>(1, (size_t(64) << 20) / stride);
      std::vector<unsigned char> stage(std::min(n, per) * stride);
      for (size_t lo = 0; lo < n; lo += per) {
        const size_t hi = std::min(n, lo + per);
        write_chain(stage.data(), next, stride, base, lo, hi);
        UM_CUDA(cudaMemcpy(static_cast<unsigned char*>(p) + lo * stride, stage.data(), (hi - lo) * stride,
                           cudaMemcpyDefault));
      }
    };
    buf.place(init);

    const long long steps = steps_arg ? steps_arg : 1 << 17;
    // Untimed loads before the first timed repetition: up to 8 repetitions' worth (1 Mi with the default
    // steps), at most one lap of the cycle, so a shorter --steps shortens the warm-up with it.
    const long long warm = static_cast<long long>(std::min<size_t>(n, static_cast<size_t>(8 * steps)));
    ChaseResult r = on_gpu ? gpu_chase(mine, warm, steps, ctx.reps) : cpu_chase(mine, warm, steps, ctx.reps);
    // Verify: the chain is one cycle, so after warm + reps*steps loads the
    // chase must stand on a known slot.
    const unsigned long long total = static_cast<unsigned long long>(warm + steps * ctx.reps);
    uint64_t slot = 0;
    for (unsigned long long i = 0; i < total % n; ++i) slot = next[slot];
    uint64_t expect = base + slot * stride;
    if (r.final_addr != expect)
      throw VerifyError("the chase ended at address " + std::to_string(r.final_addr) + ", not at slot " +
                        std::to_string(slot) + " (" + std::to_string(expect) + ")");
    JsonObject rec = ctx.record("chase", pname, kind, bytes);
    Context::put_summary(rec, "latency", "ns", r.ns);
    if (on_gpu) rec.set("cycles", summarize(r.cycles).median);
    rec.set("stride", static_cast<unsigned long long>(stride));
    rec.set("steps", steps);
    rec.set("residency", buf.residency());
    rec.set("verified", "invariant:chase-cycle");  // the chase ended on the slot the cycle predicts
    ctx.emit(rec);
  }
}

BenchRegistrar reg({"latency", "gpu|cpu",
                    "one thread chases dependent loads through a random cycle over a footprint of one memory "
                    "kind: ns (and GPU cycles) per load",
                    {"chase", "timer"},
                    {"kind", "processor", "bytes", "stride", "steps", "seed"},
                    run_latency});

}  // namespace
}  // namespace umscope
