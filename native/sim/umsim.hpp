// umsim: a trace-driven, event-level simulator of unified-memory policies.
//
// An event is one access to one page by the GPU or the CPU; a barrier ends a
// kernel (and flushes the pending fault batch). The simulator replays the
// events through one of four models and counts what the model does:
//   uvm      NVIDIA UVM: GPU faults are collected in batches (batch size =
//            uvm_perf_fault_batch_count), serviced per 2 MiB VA block: the
//            faulted granule (64 KiB) plus the density prefetcher's region
//            (the largest subtree of the block's page tree holding the fault
//            whose occupancy exceeds uvm_perf_prefetch_threshold %), whole
//            VA blocks evicted under pressure (policy: lrf = least recently
//            faulted/migrated, what the driver sees; lru = least recently
//            accessed, an oracle; clock = second chance), thrashing detection
//            (a block re-faulted within --thrash-lapse events of its eviction
//            --thrash-threshold times is mapped remotely: its pages stay on
//            the CPU and the GPU reads them over the link).
//   svm      AMD SVM (Cooper et al. 2024 Sec. 2): each allocation split into
//            ranges of --range-bytes; one GPU fault migrates the whole range
//            at once (no batching), ranges evicted whole, least recently
//            faulted first.
//   ats      system memory through ATS with access counters (Schieffer et al.
//            2024 Sec. 2.2.1): pages live where first touched; GPU accesses
//            to CPU pages go over the link; each such access counts in its
//            region (--unit); at --counter-threshold the region is migrated to
//            the GPU if it fits in free GPU memory (never evicting).
//   zerocopy every GPU access to host memory goes over the link.
//
// Input: a generated application stream (--app NAME, see gen_*) or a trace
// file (--trace FILE: "UMSTRACE" magic, u32 page_bytes, u32 n_allocs,
// n_allocs x (u32 first_page, u32 n_pages), u64 n_events, n_events x u32).
// Either streams into the replay in chunks (Feed): memory holds the page
// state, never the stream (a GEMM's grows as footprint^1.5: at 200 GB it is
// about 2e10 events, 80 GB as one array).
// An event word: 0xFFFFFFFF = barrier; bit 31 = write; bit 30 = CPU access;
// bits 0-29 = page number. Output: one JSON line of counts and the
//
// The program's parts: generators.cpp (the applications' streams), simulator.cpp (the replay, class Sim) and
// main.cpp (the command line, trace files, the memory check and the output line). This header holds what they
// share: the event words, the address space of a stream, the model's parameters and counts.
#pragma once

// simulator's own speed (events per second of replay, generation excluded).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace umsim {

constexpr uint32_t BARRIER = 0xFFFFFFFFu;
constexpr uint32_t WRITE = 1u << 31;
constexpr uint32_t CPU = 1u << 30;
constexpr uint32_t PAGE_MASK = CPU - 1;

[[noreturn]] inline void die(const std::string& msg) {
  std::fprintf(stderr, "umsim: error: %s\n", msg.c_str());
  std::exit(2);
}

struct Alloc {
  uint32_t first, n;
};

// The address space of a stream: its page size and allocations (the events themselves are never stored).
struct Trace {
  uint64_t page_bytes = 4096;
  std::vector<Alloc> allocs;
  uint32_t pages() const { return allocs.empty() ? 0 : allocs.back().first + allocs.back().n; }
};

// Where a stream's events go, a chunk at a time.
using Feed = std::function<void(const uint32_t*, size_t)>;
constexpr size_t CHUNK = 1 << 16;

// The names of the generators --app takes (generators.cpp), space-separated.
std::string generator_names();
// An application's stream (generators.cpp): its allocations into t, its events into out; dies on an unknown app.
void generate(const std::string& app, Trace& t, uint32_t align, const Feed& out, uint64_t foot, int iters,
              bool reverse, uint64_t conc);

// The model's parameters (umsim's options, simulator.cpp's rules).
struct Params {
  std::string policy = "uvm", eviction = "lrf";
  uint64_t capacity_pages = 0;
  uint32_t unit_pages = 512;      // uvm: VA block; svm: range; ats: counter region
  uint32_t granule_pages = 16;    // uvm: pages migrated per fault without prefetch
  bool prefetch = true;
  uint32_t prefetch_threshold = 51;
  uint32_t batch_size = 256;
  // Faults the GPU has outstanding before the driver services them (0: the batch size). A replay has one
  // access per page in program order; a GPU running few warps stalls on its first fault, one running many
  // fills the fault buffer: the window is that concurrency, which a page trace does not carry.
  uint32_t fault_window = 0;
  // The launch's concurrency (uvm), from its grid on the traced GPU: blocks resident at once, the SMs they
  // spread over, and the bytes one block covers per step of a grid-stride sweep (its threads x the bytes
  // each accesses). With resident_blocks > 0 a kernel's pages (the events between two barriers, a linear
  // sweep) are dealt out in chunks of block_bytes to the resident blocks in turn (chunk c to block c mod
  // blocks, block b on SM b mod sms), and each SM stops at its first fault until the batch holding it is
  // serviced (a replayable fault stalls the SM's translations): the batch is formed by the SMs' faults
  // at once, several SMs faulting on one page (chunks smaller than a page) being duplicate entries.
  uint32_t resident_blocks = 0, sms = 0;
  uint64_t block_bytes = 0;
  // The time-aware launch replay (--timed; umsim-3). Each SM has one uTLB (the driver's Hopper HAL: uTLBs per
  // GPC = TPCs x 2 + 1, client T1_n -> LTPn), walking the pages its blocks reach in order (a block's step: its
  // `unroll` chunks one grid stride apart, as the kernel's unrolled loop issues them) at resident_ns per page
  // while they are resident. A miss on a page not resident writes a fault-buffer entry and the uTLB goes on
  // until it holds utlb_faults faulted pages (further misses on them coalesce); at the next miss it stalls
  // until a replay. The driver (uvm_gpu_replayable_faults.c, replay policy BATCH_FLUSH): fetch_us after the
  // first entry while idle (at once while still servicing, up to max_batches_per_service batches), takes the
  // entries present, at most batch_size; every fetched entry is counted (the tools counter) after the
  // driver's merge of consecutive entries of one page; services the distinct pages (as untimed), taking
  // batch_us + page_us per migrated page; flushes the entries that were present at the fetch (all present
  // at the flush when duplicates exceed update_put_ratio %), and replays: a uTLB's faulted pages that are
  // resident release it, the others fault again (new entries). Entries written during a service for pages
  // it migrates stay in the buffer and are counted by the next batch (stale).
  bool timed = false;
  // --entry-log FILE: the timed replay's fault-buffer entries as it fetches them ("f batch page utlb merged
  // written_ns fetched_ns stale", merged 1 where the driver merges the entry into the previous one, stale 1 where
  // its page is resident when fetched) and its replays
  // ("r batch replay_ns"), for comparison with the driver's own fault events (umscope.sim_events).
  std::string entry_log;
  // --entry-instances W1,W2,...: the fault-buffer entries a uTLB writes per faulted page (instances the
  // driver merges into one, as the uTLB's consecutive entries on one page), in proportion W1 : W2 : ... for
  // 1, 2, ... instances (a measured distribution: the driver's fault events of a calibration program).
  // Empty: one. They fill the batch (at most batch_size instances) and the duplicates that decide the flush.
  std::vector<uint32_t> inst_cycle;
  // --cross-utlb-merge on|off: whether the driver's merge of an entry into the batch's previous entry on the
  // same page (another uTLB's) applies to the modelled buffer. The model's uTLBs that fault one page do so at
  // one modelled instant, so their entries sit side by side; the GPU writes one entry per 32 ns from all
  // GPCs interleaved, and another uTLB's entry on the same page is rarely the previous one (measured: the
  // driver's fault events, entries whose instances come from more than one uTLB). off: only the uTLB's own.
  bool cross_merge = true;
  // --interleave on|off: entries written at one modelled instant enter the buffer in a spread order of their
  // SMs (bit-reversed), not in SM order (the driver's fault events: a kernel's first batch holds uTLBs from
  // across the grid, its pages spanning the whole first grid stride and more)
  bool interleave = false;
  // --utlb-fault-weights W1,...,W8: the faulted pages a uTLB holds before it stalls, drawn per stall (from one
  // replay that releases it to the next) in proportion W1 : W2 : ... for 1, 2, ... pages (a measured
  // distribution: pages per uTLB per batch in the driver's fault events of calibration programs whose batches
  // stay below the batch size); empty: always utlb_faults.
  std::vector<uint32_t> cap_cycle;
  uint32_t unroll = 1, utlb_faults = 2, update_put_ratio = 50, max_batches_per_service = 20;
  double resident_ns = 0, fetch_us = 0, batch_us = 0, page_us = 0;
  // --replay-fetch-us: from a replay to the driver's next fetch in the same service (the entries the replay's
  // burst of faults writes by then are in it; measured: the driver's fault events, GPU write time of a batch's
  // entries after the previous replay's completion)
  double replay_fetch_us = 0;
  // --resume-us US (negative: off): a uTLB released by a replay (its faulted pages all resident) resumes US after the
  // replay, so its new misses join the burst of entries the replay lets go and a fetch replay_fetch_us after it takes
  // those written by then, leaving the rest for the next batch (umsim-4..7: it resumes replay_fetch_us after the
  // replay, its misses after the fetch). Measured (the driver's fault events of the calibration programs,
  // umscope.model.events.resume_delays): the GPU time from a replay to the first entry written after it.
  double resume_us = -1;
  // --block-order shuffled: an SM's resident blocks run side by side, so the first of them to miss in a grid
  // step is any of them, not the lowest-numbered (measured: the driver's fault events of um-truth with 8 blocks
  // per SM fault pages spread over the whole grid step in each batch, not the pages of its first blocks)
  bool shuffle_blocks = false;
  // --block-order groups: the SMs whose blocks share pages take their blocks in one order, the order shuffled draws
  // for the group's first SM, by dispatch round (an SM's blocks b = s + r sms, round r; SMs s and s' are one group
  // where s C / page = s' C / page, C = block_bytes: their round-r blocks share a page in every round; C >= a page:
  // every SM its own group, exactly shuffled). Measured (the driver's fault events of um-truth on 264-924 blocks,
  // calibration sets calib and calib2): two uTLBs that hold blocks of the same pages fault the same grid step and
  // round in a batch in 45-82% of the batches where both fault, two of different groups in 26-44%; shuffled draws
  // every SM's order alone.
  bool group_blocks = false;
  // --page-order chunks: an SM misses every page of an unrolled step's first chunk (its warps' first loads),
  // then every page of its second chunk, ... (measured: the driver's fault events of the migration kernel on 16
  // blocks, whose first batches hold pages 0-3 of each SM's first chunk); pages: the first page of each chunk,
  // then the second page of each, ...
  bool chunk_first = false;
  // --release blocks: the driver services a batch's VA blocks one after another (address order), each block's
  // pages mapped when its migrations are done; a uTLB whose faulted pages are all mapped then goes on before the
  // batch's replay (measured: the driver's fault events of the migration kernel on 132 blocks, where a uTLB
  // writes entries for new pages during a batch's service only once every page it faulted in that batch has
  // migrated, 72-460 us after the last of them: a VA block's remaining migrations). replay: every uTLB waits for
  // the replay.
  bool block_release = false;
  // --write-ns: the GPU writes fault-buffer entries one at a time, this far apart (measured: the driver's fault
  // events, GPU write times of a replay's burst of entries, about 21 ns apart in every program on the H100); a
  // fetch takes only those written by then. 0: all at once.
  double write_ns = 0;
  // --fault-burst-us US (0: off): the SM's warps stall at a fault until the replay that services it, and fault in
  // a burst right after each replay. A uTLB writes a miss only within US of the start of its burst (the replay
  // that re-faults its pages or releases it, or else its first miss since it was released); a later miss, while
  // it still holds faulted pages, stalls it until the next replay, where it is written in that replay's burst. A
  // released uTLB resumes at the replay itself (not after replay_fetch_us). Measured: the driver's fault events,
  // 56-91% of a batch's entries written within 2.56 us after the previous replay on the calibration programs; the
  // figure is the same burst span as replay_fetch_us (the 95th percentile of the GPU write times after the
  // previous replay). Without it a uTLB goes on writing misses between replays, up to its faulted pages' limit.
  double fault_burst_us = 0;
  // --instance-order spread: the instances of the entries several uTLBs write at one instant are written round
  // by round (every entry's first instance, then every second one, ...), not entry by entry, so with --write-ns
  // a page's later instances come one round of the others' writes after its first, and a fetch between them
  // leaves them for the next batch (counted there: stale), as do a uTLB's entries on another page between them
  // (the driver merges only into the uTLB's previous entry). Measured (the driver's fault events of the
  // calibration programs, bench/fault_decompose.py): the GPU ns between consecutive instances of one uTLB's
  // page grow with the uTLBs writing at once (medians 32-128 ns on 6-20 blocks, 350-640 ns on 132 SMs, about the
  // writes of that many uTLBs at 21 ns each), and on the migration kernel on 120-160 blocks 6-18% of a uTLB's
  // pages have instances in two batches. together (default): an entry's instances side by side.
  bool spread_instances = false;
  // --instance-gap-ns NS (0: off): a uTLB's later instances of one entry trail its first, each NS x the uTLBs
  // faulting at that moment (those holding faulted pages, itself included) after the previous one, so a fetch
  // between them leaves the trailing ones for the next batch (a second entry for the page, counted there). Measured
  // (the driver's fault events of the calibration programs, umscope.model.calibration.instance_gaps): the GPU ns
  // between consecutive instances of one uTLB's page over the uTLBs of the batch, about 5-9 ns per uTLB on the
  // migration kernel, so 30-130 ns on 6-20 blocks and 640 ns on 160 (of which 22% of a uTLB's pages then fall in
  // two batches). Applied per access type by the caller (the read kernels' figure alone, calibration.TRIED).
  double instance_gap_ns = 0;
  // --instance-gap-by holding|buffer: the uTLBs faulting at once are those holding faulted pages, or those with
  // entries in the buffer not yet fetched (what the driver's batch shows of them)
  bool instance_gap_by_buffer = false;
  uint32_t thrash_threshold = 3;  // 0: off
  uint64_t thrash_lapse = 0;      // events; 0: capacity_pages
  std::string thrash_action = "remote";
  uint32_t counter_threshold = 256;
  std::string init = "cpu";       // cpu: every page first touched by the CPU before the stream; none
};

struct Stats {
  uint64_t events = 0, gpu_events = 0, cpu_events = 0, barriers = 0, hits = 0, faults = 0, dup_faults = 0,
           batches = 0, migrations = 0, h2d_fault = 0, h2d_prefetch = 0, h2d_counter = 0, populate_gpu = 0,
           evictions = 0, d2h_evict = 0, cpu_faults = 0, d2h_cpu_fault = 0, remote_gpu = 0, remote_cpu = 0,
           thrash_units = 0, counter_migrations = 0, counter_refused = 0, peak_gpu = 0;
  // --timed: fault-buffer entries the driver counts, of them stale (page resident when fetched), entries
  // flushed uncounted, faults written again at a replay, and the modelled time of the launches.
  uint64_t entries = 0, stale = 0, flushed = 0, refaults = 0, first_batch_pages = 0;
  uint64_t update_put_batches = 0;  // batches whose duplicates exceeded the ratio: flushed up to the PUT read again
  double timed_ns = 0;
};
class Sim;

// The replay of one stream under one model (simulator.cpp): built once the stream's allocations are known (t is
// kept by reference), fed the events a chunk at a time, finished once.
class Simulator {
 public:
  Simulator(const Trace& t, const Params& p);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;
  void feed(const uint32_t* ev, size_t n);
  uint64_t events() const;
  Stats finish();

 private:
  std::unique_ptr<Sim> sim_;
};

}  // namespace umsim
