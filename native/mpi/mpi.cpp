// MPI point-to-point in the manner of the OSU micro-benchmarks, with each
// side's buffer in any memory kind. Built into umbench-mpi only and started
// by the site's launcher. Ranks [0, n/2) are side A (--kind), ranks [n/2, n)
// side B (--peer-kind); bw, bibw and latency run between rank 0 and rank n/2
// (on another node when the launcher places n/2 ranks per node), mbw runs k
// pairs (rank i with i + n/2) at once for k = 1, 2, 4, ... n/2: the aggregate
// throughput against the processes per node.
//
//   bw       a window of Isends from A, Irecvs on B, then a 4-byte ack, per window (osu_bw)
//   bibw     both sides post a window of Irecvs and Isends (osu_bibw)
//   latency  blocking ping-pong, half the round trip (osu_latency)
//   mbw      bw over k pairs at once, total bytes over the slowest pair's time (osu_mbw_mr)
//
// Device memory is passed to MPI only where the library is CUDA-aware; host
// kinds (pinned, registered, system, numa, managed through its host mapping)
// are passed as host pointers. As OSU's default, every message of a window is sent from one buffer and
// received into one (--buffers window: one per message). Each rank runs on its own cores (placement.hpp:
// plan_rank) and every record lists them. Received data is checked against the sender's
// pattern after the timed repetitions of each size.
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>

#include "umscope/bench.hpp"
#include "umscope/caps.hpp"
#include "umscope/errors.hpp"
#include "umscope/os.hpp"
#include "umscope/placement.hpp"
#include "umscope/world.hpp"

namespace umscope {
namespace {

constexpr size_t kOsuLargeMessage = 8192;  // OSU's LARGE_MESSAGE_SIZE: fewer loops above it

unsigned char pattern(int sender, size_t i) { return static_cast<unsigned char>((sender * 31 + i * 7) % 251); }

struct Side {
  std::unique_ptr<Buffer> send, recv;
  char* sp = nullptr;  // the pointers given to MPI
  char* rp = nullptr;
  bool device_ptr = false;
};

int gpu_count() {
#ifdef UMSCOPE_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
#else
  return 0;
#endif
}

// Copies what a receiver got to the host, for checking.
void from_buffer(std::vector<unsigned char>& dst, const char* src, size_t off, bool device) {
#ifdef UMSCOPE_HAVE_CUDA
  if (device) {
    UM_CUDA(cudaMemcpy(dst.data(), src + off, dst.size(), cudaMemcpyDeviceToHost));
    return;
  }
#endif
  (void)device;
  std::memcpy(dst.data(), src + off, dst.size());
}
void poison(char* p, size_t bytes, bool device) {
#ifdef UMSCOPE_HAVE_CUDA
  if (device) {
    UM_CUDA(cudaMemset(p, 0xFF, bytes));
    UM_CUDA(cudaDeviceSynchronize());
    return;
  }
#endif
  (void)device;
  std::memset(p, 0xFF, bytes);
}

// Allocates this rank's send and receive buffers (window slots of max bytes each) of `kind`.
std::string make_side(Side& s, const KindSpec& kind, size_t bytes, const AllocOptions& opt, int rank) {
  const World& w = world();
  try {
    s.send.reset(new Buffer(kind, bytes, opt));
    s.recv.reset(new Buffer(kind, bytes, opt));
    for (Buffer* b : {s.send.get(), s.recv.get()}) {
      if (!b->cpu() && !w.cuda_aware)
        return "kind " + kind.str() + " is reachable by the GPU only, and " + w.cuda_aware_why;
      if (!b->cpu() && !b->gpu()) return b->gpu_unreachable();
    }
    s.device_ptr = !s.send->cpu();
    std::vector<unsigned char> pat(bytes);
    for (size_t i = 0; i < bytes; ++i) pat[i] = pattern(rank, i);
    Initializer init;
    init.cpu = [&](void* p, size_t n) { std::memcpy(p, pat.data(), n); };
#ifdef UMSCOPE_HAVE_CUDA
    init.gpu = [&](void* p, size_t n) {
      UM_CUDA(cudaMemcpy(p, pat.data(), n, cudaMemcpyDefault));
      UM_CUDA(cudaDeviceSynchronize());
    };
#endif
    s.send->place(init);
    s.recv->place(Initializer{});
    s.sp = static_cast<char*>(s.device_ptr ? s.send->gpu() : s.send->cpu());
    s.rp = static_cast<char*>(s.device_ptr ? s.recv->gpu() : s.recv->cpu());
  } catch (const Skip& e) {
    return e.what();
  }
  return "";
}

// Windows (bw, bibw, mbw) or round trips (latency) per timed sample, as OSU's loop counts (bw: 100 windows
// up to 8 KiB, 20 above; latency: 10000 round trips up to 8 KiB, 1000 above) where a sample stays short,
// else fewer, down to one window or 10 round trips: a sample moves at most 512 MiB one way (a window of 64
// MiB messages is 4 GiB: one window).
int loops_per_sample(const std::string& op, size_t bytes, int window) {
  const bool small = bytes <= kOsuLargeMessage;
  if (op == "latency")
    return static_cast<int>(std::clamp<size_t>((size_t(256) << 20) / (2 * bytes), 10, small ? 10000 : 1000));
  return static_cast<int>(std::clamp<size_t>((size_t(512) << 20) / (window * bytes), 1, small ? 100 : 20));
}

void run_mpi(Context& ctx) {
  World& w = world();
  if (w.runtime != "mpi")
    throw UsageError("the mpi benchmark runs in umbench-mpi under a launcher: umscope bench mpi --launcher mpirun -n 2");
  const KindSpec kind_a = parse_kind(ctx.args.str("kind", "system"));
  const KindSpec kind_b = parse_kind(ctx.args.str("peer-kind", ctx.args.str("kind", "system")));
  const std::vector<std::string> ops = ctx.args.choices("op", "bw,bibw,latency,mbw", {"bw", "bibw", "latency", "mbw"});
  std::vector<size_t> sizes;
  for (const std::string& s : ctx.args.list("bytes", "8,1KiB,64KiB,1MiB,4MiB")) sizes.push_back(parse_bytes(s));
  const int window = static_cast<int>(ctx.args.integer("window", 64));
  if (window < 1 || window > 4096) throw UsageError("--window must be from 1 to 4096");
  // single: every message of a window from and into one buffer (OSU's default, -b single); window: a buffer
  // per message (OSU's -b multiple), so that a window's bytes do not stay in the CPU's caches.
  const std::string buffers = ctx.args.choices("buffers", "single", {"single", "window"})[0];
  const int slots = buffers == "single" ? 1 : window;
  const std::string launcher = ctx.args.str("launcher", "");
  if (w.size < 2) throw Skip("the mpi benchmark needs at least 2 ranks; it ran as 1 (launch it with -n 2 or more)");

  const int half = w.size / 2;
  const bool side_a = w.rank < half;
  const bool in_pairs = w.rank < 2 * half;
  const int partner = side_a ? w.rank + half : w.rank - half;
  const KindSpec& mine = side_a ? kind_a : kind_b;
  const size_t max_bytes = *std::max_element(sizes.begin(), sizes.end());

  // This rank's GPU: one per rank on the host, in local-rank order.
  std::string why;
  AllocOptions opt = ctx.alloc;
  const int gpus = gpu_count();
  if (gpus > 0) opt.device = w.local_rank % gpus;
  Side side;
  if (in_pairs) why = make_side(side, mine, slots * max_bytes, opt, w.rank);
  world_agree(why);

  // Hosts, and each rank's CPUs (where the launcher and umbench-mpi placed it: placement.hpp).
  std::vector<std::string> hosts = w.gather(w.host);
  std::set<std::string> distinct(hosts.begin(), hosts.end());
  std::vector<std::string> cpus = w.gather(cpu_ranges(os::allowed_cpus()));
  std::string rank_cpus;
  for (size_t r = 0; r < cpus.size(); ++r) rank_cpus += (r ? " " : "") + std::to_string(r) + ":" + cpus[r];
  const int pairs_max = half;
  std::vector<int> ks;
  for (int k = 1; k < pairs_max; k *= 2) ks.push_back(k);
  ks.push_back(pairs_max);

  std::vector<MPI_Request> req(2 * window);
  for (const std::string& op : ops) {
    for (size_t bytes : sizes) {
      const int loops = loops_per_sample(op, bytes, window);
      const int count = static_cast<int>(bytes);
      auto slot = [&](char* base, int i) { return base + (slots == 1 ? 0 : i * bytes); };
      for (int k : (op == "mbw" ? ks : std::vector<int>{1})) {
        const bool active = in_pairs && (w.rank % half) < k;  // ranks i and i + half for i < k
        const bool receives = active && (op == "bibw" || op == "latency" || !side_a);
        if (receives) poison(side.rp, slots * bytes, side.device_ptr);
        std::vector<double> samples;
        for (int r = 0; r < ctx.warmup + ctx.reps; ++r) {
          MPI_Barrier(MPI_COMM_WORLD);
          double t = 0;
          if (active) {
            const double t0 = MPI_Wtime();
            int ack = 0;
            for (int l = 0; l < loops; ++l) {
              if (op == "latency") {
                if (side_a) {
                  MPI_Send(side.sp, count, MPI_BYTE, partner, 1, MPI_COMM_WORLD);
                  MPI_Recv(side.rp, count, MPI_BYTE, partner, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                  MPI_Recv(side.rp, count, MPI_BYTE, partner, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                  MPI_Send(side.sp, count, MPI_BYTE, partner, 1, MPI_COMM_WORLD);
                }
              } else if (op == "bibw") {
                for (int i = 0; i < window; ++i)
                  MPI_Irecv(slot(side.rp, i), count, MPI_BYTE, partner, 2, MPI_COMM_WORLD, &req[i]);
                for (int i = 0; i < window; ++i)
                  MPI_Isend(slot(side.sp, i), count, MPI_BYTE, partner, 2, MPI_COMM_WORLD, &req[window + i]);
                MPI_Waitall(2 * window, req.data(), MPI_STATUSES_IGNORE);
              } else {  // bw, mbw: A sends a window, B receives it and acknowledges (each window, as osu_bw)
                for (int i = 0; i < window; ++i) {
                  if (side_a) MPI_Isend(slot(side.sp, i), count, MPI_BYTE, partner, 3, MPI_COMM_WORLD, &req[i]);
                  else MPI_Irecv(slot(side.rp, i), count, MPI_BYTE, partner, 3, MPI_COMM_WORLD, &req[i]);
                }
                MPI_Waitall(window, req.data(), MPI_STATUSES_IGNORE);
                if (side_a) MPI_Recv(&ack, 1, MPI_INT, partner, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                else MPI_Send(&ack, 1, MPI_INT, partner, 4, MPI_COMM_WORLD);
              }
            }
            t = MPI_Wtime() - t0;
          }
          // The slowest active rank's time (every rank takes part, inactive ones with 0).
          const double slowest = world_max(t);
          if (r < ctx.warmup) continue;
          if (op == "latency") samples.push_back(slowest / (2.0 * loops) * 1e6);
          else {
            const double moved = (op == "bibw" ? 2.0 : 1.0) * k * bytes * window * loops;
            samples.push_back(moved / slowest / 1e9);
          }
        }
        // Check what each receiver got: every buffer it received into holds the partner's pattern.
        long long bad = 0;
        if (receives) {
          const int used = op == "latency" ? 1 : slots;
          std::vector<unsigned char> got(bytes);
          for (int i = 0; i < used; ++i) {
            from_buffer(got, side.rp, i * bytes, side.device_ptr);
            for (size_t j = 0; j < bytes; ++j) bad += got[j] != pattern(partner, i * bytes + j);
          }
        }
        bad = world_sum(bad);
        if (bad) throw VerifyError(std::to_string(bad) + " received bytes differ from the sender's pattern (" + op +
                                   ", " + std::to_string(bytes) + " B)");
        JsonObject rec = ctx.record(op, "mpi", kind_a, bytes);
        Context::put_summary(rec, op == "latency" ? "latency" : "bandwidth", op == "latency" ? "us" : "GB/s", samples);
        rec.set("peer_kind", kind_b.label());
        rec.set("peer_policy", kind_b.policy_str());
        rec.set("ranks", w.size);
        rec.set("pairs", k);
        rec.set("active_processes", 2 * k);
        rec.set("hosts", static_cast<int>(distinct.size()));
        rec.set("processes_per_node", w.local_size);
        rec.set("window", op == "latency" ? 1 : window);
        rec.set("buffers", op == "latency" ? "single" : buffers);
        rec.set("loops", loops);
        rec.set("timing", op == "latency" ? "MPI_Wtime around the round trips of a sample, half the round trip"
                                          : "MPI_Wtime around the windows of a sample (each window acknowledged "
                                            "for bw and mbw), the slowest active rank's");
        rec.set("launcher", launcher);
        rec.set("rank_cpus", rank_cpus);
        rec.set("rank_placement", w.rank_placement);
        rec.set("mpi_library", w.library);
        rec.set("mpi_thread_level", w.thread_level);
        rec.set("cuda_aware", w.cuda_aware);
        rec.set("cuda_aware_why", w.cuda_aware_why);
        rec.set("pointers", side.device_ptr ? "device" : "host");
        rec.set("verified", "cpu-reference");  // compared with the exact expected values
        rec.set("verification", "every received byte compared with the sender's pattern after the timed repetitions");
        ctx.emit(rec);
      }
    }
  }
}

BenchRegistrar reg({"mpi", "cpu|gpu",
                    "MPI point-to-point (OSU style): window bandwidth, bidirectional bandwidth, latency, and the "
                    "throughput of k pairs at once; each side's buffer of any memory kind (umbench-mpi only)",
                    {"bw", "bibw", "latency", "mbw"},
                    {"kind", "peer-kind", "op", "bytes", "window", "buffers", "launcher"},
                    run_mpi});

}  // namespace
}  // namespace umscope
