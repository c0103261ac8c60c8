// umsim's command line: options, trace files, the memory check, the replay's timing and its one JSON line
// (the model and its inputs: umsim.hpp).
#include "umsim.hpp"

#include "umscope/errors.hpp"
#include "umscope/sizes.hpp"

namespace umsim {
namespace {

// ---------------------------------------------------------------- options
// A size option: umscope's size grammar (umscope/sizes.hpp), a bad one one line naming the option.
uint64_t parse_bytes(const std::string& opt, const std::string& s) {
  try {
    return umscope::parse_bytes(s);
  } catch (const umscope::UsageError& e) {
    die(opt + ": " + e.what());
  }
}

// A trace file's header (page size, allocations) into t; the file is left at its first event, their count in ne.
FILE* open_trace(const std::string& path, Trace& t, uint64_t& ne) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) die("cannot open trace '" + path + "'");
  char magic[8];
  uint32_t pb = 0, na = 0;
  if (std::fread(magic, 1, 8, f) != 8 || std::memcmp(magic, "UMSTRACE", 8) != 0) die("not a umsim trace: " + path);
  if (std::fread(&pb, 4, 1, f) != 1 || std::fread(&na, 4, 1, f) != 1) die("truncated trace header");
  // Every count in the header is checked against the file before it sizes anything: a damaged or hostile header
  // is one line, not a division by a zero page size or an allocation table of 2^32 entries.
  if (pb < 4096 || pb % 4096 || pb > (1u << 30))
    die("trace '" + path + "': page size " + std::to_string(pb) + " is not a multiple of 4096 from 4096 to 1 GiB");
  long here = std::ftell(f);
  uint64_t size = 0;
  if (here >= 0 && std::fseek(f, 0, SEEK_END) == 0) {
    const long end = std::ftell(f);
    size = end > here ? uint64_t(end - here) : 0;
    std::fseek(f, here, SEEK_SET);
  }
  if (uint64_t(na) * sizeof(Alloc) + 8 > size)
    die("trace '" + path + "' declares " + std::to_string(na) + " allocations but is too short to hold them");
  t.page_bytes = pb;
  t.allocs.resize(na);
  if (na && std::fread(t.allocs.data(), sizeof(Alloc), na, f) != na) die("truncated allocation table");
  for (size_t i = 0; i < t.allocs.size(); ++i) {
    if (uint64_t(t.allocs[i].first) + t.allocs[i].n > PAGE_MASK)
      die("trace '" + path + "': allocation " + std::to_string(i) + " reaches past the 30-bit page numbers");
    if (i && t.allocs[i].first < uint64_t(t.allocs[i - 1].first) + t.allocs[i - 1].n)
      die("allocations must be sorted and disjoint");
  }
  if (std::fread(&ne, 8, 1, f) != 1) die("truncated trace header");
  if (ne > (size - uint64_t(na) * sizeof(Alloc) - 8) / 4)
    die("trace '" + path + "' declares " + std::to_string(ne) + " events but is too short to hold them");
  return f;
}

// A trace file's events into the replay, a chunk at a time.
void stream_trace(const std::string& path, const Feed& out) {
  Trace t;
  uint64_t ne = 0;
  FILE* f = open_trace(path, t, ne);
  std::vector<uint32_t> buf(CHUNK);
  for (uint64_t left = ne; left > 0;) {
    const size_t k = size_t(std::min<uint64_t>(left, CHUNK));
    if (std::fread(buf.data(), 4, k, f) != k) die("truncated trace events");
    out(buf.data(), k);
    left -= k;
  }
  std::fclose(f);
}

// "W1,W2,..." (weights for the values 1, 2, ...) -> a cycle of at most 1000 values, each value in proportion to
// its weight and spread out (smooth weighted round robin: each step the value with the largest credit).
std::vector<uint32_t> weight_cycle(const std::string& opt, const std::string& v, size_t maxn) {
  std::vector<uint64_t> w;
  size_t pos = 0;
  while (pos <= v.size()) {
    size_t c = v.find(',', pos);
    if (c == std::string::npos) c = v.size();
    const std::string x = v.substr(pos, c - pos);
    char* end = nullptr;
    const unsigned long long n = std::strtoull(x.c_str(), &end, 10);
    if (x.empty() || *end || x[0] == '-') die(opt + ": weights are non-negative integers: '" + v + "'");
    w.push_back(n);
    pos = c + 1;
  }
  uint64_t tot = 0;
  for (uint64_t x : w) tot += x;
  if (tot == 0 || w.size() > maxn) die(opt + ": 1 to " + std::to_string(maxn) + " weights, not all 0");
  const double scale = tot > 1000 ? 1000.0 / double(tot) : 1.0;
  std::vector<int64_t> ww(w.size()), cr(w.size(), 0);
  int64_t sum = 0;
  for (size_t k = 0; k < w.size(); ++k) { ww[k] = int64_t(double(w[k]) * scale + 0.5); sum += ww[k]; }
  if (sum == 0) die(opt + ": weights too small");
  std::vector<uint32_t> out;
  for (int64_t n = 0; n < sum; ++n) {
    size_t best = 0;
    for (size_t k = 0; k < w.size(); ++k) { cr[k] += ww[k]; if (cr[k] > cr[best]) best = k; }
    cr[best] -= sum;
    out.push_back(uint32_t(best + 1));
  }
  return out;
}

// The largest VA block / SVM range / counter region: the page-number space (30 bits) itself.
constexpr uint64_t MAX_UNIT_PAGES = PAGE_MASK + 1ull;
constexpr uint64_t MAX_ITERATIONS = 1000000;  // umscope's --iterations limit (python/umscope/validate.py)

std::string gib(uint64_t bytes) {
  char b[64];
  std::snprintf(b, sizeof b, "%.1f GiB", double(bytes) / double(1ull << 30));
  return b;
}

// Bytes of the replay's page state (Sim's vectors): per page its place, batch stamp and unit (9 bytes, one
// more under --timed), per unit its recency list, stamps and counters (40 bytes) and, under uvm, the
// prefetcher's occupancy bitmap (a bit per leaf of its tree), one unit's marks (a byte per leaf), and 64 MiB
// for the program and the stream's chunks.
uint64_t state_bytes(uint64_t pages, const Params& p) {
  const uint64_t units = pages / p.unit_pages + 8;
  uint64_t leaves = 1;
  while (leaves < p.unit_pages) leaves *= 2;
  return pages * (p.timed ? 10 : 9) + units * (40 + (p.policy == "uvm" ? (leaves + 63) / 64 * 8 : 0)) + leaves +
         (64ull << 20);
}

// Memory this process may still take: the smaller of the system's available memory and the address-space
// limit (ulimit -v) less what is mapped now; 0 where neither can be read.
uint64_t memory_left() {
  uint64_t avail = 0;
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kb = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) { avail = kb * 1024; break; }
    std::fclose(f);
  }
  struct rlimit rl {};
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    unsigned long long vm = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%llu", &vm) != 1) vm = 0;
      std::fclose(f);
    }
    const uint64_t mapped = vm * uint64_t(sysconf(_SC_PAGESIZE));
    const uint64_t left = rl.rlim_cur > mapped ? rl.rlim_cur - mapped : 0;
    avail = avail ? std::min(avail, left) : left;
  }
  return avail;
}

// Refuses, before anything runs, a replay whose page state would not fit in this machine's memory: one line
// saying what it needs, what is here and the largest footprint that fits at this page size.
void check_memory(uint64_t pages, const Params& p, uint64_t page_bytes, uint64_t foot) {
  const uint64_t need = state_bytes(pages, p), left = memory_left();
  if (!left || need <= left) return;
  const uint64_t per = state_bytes(1ull << 20, p) - state_bytes(0, p);  // bytes per 2^20 pages
  const uint64_t fit = left > state_bytes(0, p) ? (left - state_bytes(0, p)) / per * (1ull << 20) : 0;
  die(std::string(foot ? "--footprint " + gib(foot) : "the trace") + " in pages of " +
      std::to_string(page_bytes / 1024) + " KiB needs about " + gib(need) + " of memory for the simulator's page state, " +
      gib(left) + " is available here: at most " + gib(fit * page_bytes) + " at this --page (a page 16 times larger "
      "holds a footprint 16 times larger)");
}

void usage() {
  std::fputs(
      "usage: umsim (--app NAME --footprint BYTES [--iterations N] [--reverse] | --trace FILE)\n"
      "             --capacity BYTES [--policy uvm|svm|ats|zerocopy] [--page BYTES] [--eviction lrf|lru|clock]\n"
      "             [--unit BYTES] [--granule BYTES] [--prefetch on|off] [--prefetch-threshold PCT]\n"
      "             [--batch N] [--fault-window N] [--resident-blocks N --sms N --block-bytes BYTES]\n"
      "             [--timed --unroll N --utlb-faults N --resident-ns NS --fetch-us US --batch-us US --page-us US\n"
      "              --update-put-ratio PCT --max-batches-per-service N [--entry-log FILE]\n"
      "              [--entry-instances W1,W2,...] [--cross-utlb-merge on|off] [--utlb-fault-weights W1,...]\n"
      "              [--replay-fetch-us US [--resume-us US]] [--interleave on|off] [--write-ns NS]\n"
      "              [--block-order ordered|shuffled|groups]\n"
      "              [--page-order pages|chunks] [--release replay|blocks] [--fault-burst-us US]\n"
      "              [--instance-order together|spread] [--instance-gap-ns NS [--instance-gap-by holding|buffer]]]\n"
      "             [--thrash-threshold N] [--thrash-lapse EVENTS] [--thrash-action remote|none]\n"
      "             [--counter-threshold N] [--concurrency N] [--init cpu|none] [--repeat N] [--progress SECONDS]\n",
      stderr);
  std::fprintf(stderr, "apps: %s\n", generator_names().c_str());
}

}  // namespace

static int run_main(int argc, char** argv) {
  Params p;
  std::string app, trace;
  uint64_t foot = 0, cap = 0, page = 4096, unit = 0, granule = 65536, conc = 0;
  int iters = 1, repeat = 1;
  double progress = 0;  // seconds between progress lines on stderr (0: none)
  bool reverse = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) die("option " + a + " needs a value");
      return argv[++i];
    };
    auto num = [&](const std::string& v) -> uint64_t {
      char* end = nullptr;
      errno = 0;
      unsigned long long x = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end || v[0] == '-' || errno == ERANGE)
        die("option " + a + ": not a non-negative integer: '" + v + "'");
      return x;
    };
    // Options kept in 32-bit counters, and the iteration and repeat counts: refused above their limit, never cut.
    auto num_to = [&](const std::string& v, uint64_t hi) -> uint64_t {
      const uint64_t x = num(v);
      if (x > hi) die("option " + a + " must be at most " + std::to_string(hi) + ", got " + v);
      return x;
    };
    auto num32 = [&](const std::string& v) -> uint32_t { return uint32_t(num_to(v, UINT32_MAX)); };
    auto real = [&](const std::string& v) -> double {
      char* end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !(x >= 0) || x > 1e12) die("option " + a + ": not a non-negative number: '" + v + "'");
      return x;
    };
    if (a == "--help" || a == "-h") { usage(); return 0; }
    else if (a == "--app") app = val();
    else if (a == "--trace") trace = val();
    else if (a == "--footprint") foot = parse_bytes(a, val());
    else if (a == "--capacity") cap = parse_bytes(a, val());
    else if (a == "--page") page = parse_bytes(a, val());
    else if (a == "--unit") unit = parse_bytes(a, val());
    else if (a == "--granule") granule = parse_bytes(a, val());
    else if (a == "--iterations") iters = int(num_to(val(), MAX_ITERATIONS));
    else if (a == "--reverse") reverse = true;
    else if (a == "--policy") p.policy = val();
    else if (a == "--eviction") p.eviction = val();
    else if (a == "--prefetch") { std::string v = val(); if (v != "on" && v != "off") die("--prefetch on|off"); p.prefetch = v == "on"; }
    else if (a == "--prefetch-threshold") p.prefetch_threshold = num32(val());
    else if (a == "--batch") p.batch_size = num32(val());
    else if (a == "--fault-window") p.fault_window = num32(val());
    else if (a == "--resident-blocks") p.resident_blocks = num32(val());
    else if (a == "--sms") p.sms = num32(val());
    else if (a == "--block-bytes") p.block_bytes = parse_bytes(a, val());
    else if (a == "--timed") p.timed = true;
    else if (a == "--unroll") p.unroll = num32(val());
    else if (a == "--utlb-faults") p.utlb_faults = num32(val());
    else if (a == "--update-put-ratio") p.update_put_ratio = num32(val());
    else if (a == "--max-batches-per-service") p.max_batches_per_service = num32(val());
    else if (a == "--resident-ns") p.resident_ns = real(val());
    else if (a == "--fetch-us") p.fetch_us = real(val());
    else if (a == "--batch-us") p.batch_us = real(val());
    else if (a == "--page-us") p.page_us = real(val());
    else if (a == "--replay-fetch-us") p.replay_fetch_us = real(val());
    else if (a == "--resume-us") p.resume_us = real(val());
    else if (a == "--write-ns") p.write_ns = real(val());
    else if (a == "--fault-burst-us") p.fault_burst_us = real(val());
    else if (a == "--instance-gap-ns") p.instance_gap_ns = real(val());
    else if (a == "--instance-gap-by") { std::string v = val(); if (v != "holding" && v != "buffer") die("--instance-gap-by holding|buffer"); p.instance_gap_by_buffer = v == "buffer"; }
    else if (a == "--instance-order") { std::string v = val(); if (v != "together" && v != "spread") die("--instance-order together|spread"); p.spread_instances = v == "spread"; }
    else if (a == "--page-order") { std::string v = val(); if (v != "pages" && v != "chunks") die("--page-order pages|chunks"); p.chunk_first = v == "chunks"; }
    else if (a == "--block-order") {
      std::string v = val();
      if (v != "ordered" && v != "shuffled" && v != "groups") die("--block-order ordered|shuffled|groups");
      p.shuffle_blocks = v == "shuffled";
      p.group_blocks = v == "groups";
    }
    else if (a == "--release") { std::string v = val(); if (v != "replay" && v != "blocks") die("--release replay|blocks"); p.block_release = v == "blocks"; }
    else if (a == "--entry-log") p.entry_log = val();
    else if (a == "--interleave") { std::string v = val(); if (v != "on" && v != "off") die("--interleave on|off"); p.interleave = v == "on"; }
    else if (a == "--cross-utlb-merge") { std::string v = val(); if (v != "on" && v != "off") die("--cross-utlb-merge on|off"); p.cross_merge = v == "on"; }
    else if (a == "--entry-instances") p.inst_cycle = weight_cycle(a, val(), 64);
    else if (a == "--utlb-fault-weights") p.cap_cycle = weight_cycle(a, val(), 8);
    else if (a == "--thrash-threshold") p.thrash_threshold = num32(val());
    else if (a == "--thrash-lapse") p.thrash_lapse = num(val());
    else if (a == "--thrash-action") p.thrash_action = val();
    else if (a == "--counter-threshold") p.counter_threshold = num32(val());
    else if (a == "--concurrency") conc = num(val());
    else if (a == "--init") p.init = val();
    else if (a == "--repeat") repeat = int(num_to(val(), MAX_ITERATIONS));
    else if (a == "--progress") progress = real(val());
    else { usage(); die("unknown option '" + a + "'"); }
  }
  if (p.policy != "uvm" && p.policy != "svm" && p.policy != "ats" && p.policy != "zerocopy")
    die("--policy must be uvm, svm, ats or zerocopy");
  if (p.eviction != "lrf" && p.eviction != "lru" && p.eviction != "clock") die("--eviction must be lrf, lru or clock");
  if (p.thrash_action != "remote" && p.thrash_action != "none") die("--thrash-action must be remote or none");
  if (p.init != "cpu" && p.init != "none") die("--init must be cpu or none");
  if (app.empty() == trace.empty()) die("give exactly one of --app NAME and --trace FILE");
  if (p.prefetch_threshold > 100) die("--prefetch-threshold is a percentage (0-100)");
  if (p.batch_size == 0) die("--batch must be at least 1");
  if (repeat < 1) die("--repeat must be at least 1");

  Trace t;
  if (!trace.empty()) {
    uint64_t ne = 0;
    std::fclose(open_trace(trace, t, ne));
  } else {
    if (page < 4096 || page % 4096) die("--page must be a multiple of 4096");
    t.page_bytes = page;
  }
  if (cap == 0) die("--capacity is required (GPU memory available to the program)");
  if (cap < t.page_bytes) die("--capacity must be at least one page (" + std::to_string(t.page_bytes) + " bytes)");
  if (p.resident_blocks && (p.block_bytes == 0 || p.policy != "uvm"))
    die("--resident-blocks needs --block-bytes and --policy uvm");
  if (p.timed && !p.resident_blocks) die("--timed needs --resident-blocks (the launch it replays in time)");
  if (!p.entry_log.empty() && !p.timed) die("--entry-log needs --timed");
  if (p.resume_us >= 0 && !p.timed) die("--resume-us needs --timed");
  if (p.timed && (p.utlb_faults < 1 || p.utlb_faults > 8)) die("--utlb-faults must be 1 to 8");
  if (p.timed && (p.unroll < 1 || p.max_batches_per_service < 1)) die("--unroll and --max-batches-per-service must be at least 1");
  if (unit == 0) unit = p.policy == "svm" ? (64ull << 20) : (2ull << 20);
  if (unit < t.page_bytes || unit / t.page_bytes > MAX_UNIT_PAGES)
    die("--unit must be 1 to " + std::to_string(MAX_UNIT_PAGES) + " pages (the page-number space)");
  if (granule < t.page_bytes) granule = t.page_bytes;
  p.unit_pages = uint32_t(unit / t.page_bytes);
  p.granule_pages = uint32_t(std::min(unit, granule) / t.page_bytes);
  p.capacity_pages = cap / t.page_bytes;
  uint64_t want_pages = t.pages();
  if (trace.empty()) {
    if (foot == 0) die("--footprint is required with --app");
    if (foot / t.page_bytes >= PAGE_MASK / 2)
      die("--footprint " + gib(foot) + " is too large for 30-bit page numbers at --page " + std::to_string(t.page_bytes) +
          ": at most " + gib((PAGE_MASK / 2 - 1) * t.page_bytes) + " (a larger --page holds more)");
    // The generators' arrays: the footprint plus at most a unit of alignment per array (7 at most).
    want_pages = foot / t.page_bytes + 8ull * p.unit_pages;
  }
  check_memory(want_pages, p, t.page_bytes, trace.empty() ? foot : 0);
  Stats s;
  double best = 1e300;
  try {
    for (int r = 0; r < repeat; ++r) {
      // The replay's time only: generating or reading the stream is not counted.
      Trace tr = t;
      std::unique_ptr<Simulator> sim;
      double dt = 0;
      const std::string bad = trace.empty() ? "internal: generator '" + app + "' left its allocations"
                                            : "event page outside every allocation";
      uint32_t np = 0;
      const auto start = std::chrono::steady_clock::now();
      double said = 0;
      Feed feed = [&](const uint32_t* e, size_t n) {
        if (!sim) {
          np = tr.pages();
          sim.reset(new Simulator(tr, p));
        }
        for (size_t k = 0; k < n; ++k)
          if (e[k] != BARRIER && (e[k] & PAGE_MASK) >= np) die(bad);
        const auto t0 = std::chrono::steady_clock::now();
        sim->feed(e, n);
        const auto t1 = std::chrono::steady_clock::now();
        dt += std::chrono::duration<double>(t1 - t0).count();
        const double el = std::chrono::duration<double>(t1 - start).count();
        if (progress > 0 && el - said >= progress) {
          said = el;
          std::fprintf(stderr, "umsim: progress: %s %s: %.3g page events in %.0f s\n", p.policy.c_str(),
                       trace.empty() ? app.c_str() : "trace", double(sim->events()), el);
          std::fflush(stderr);
        }
      };
      if (trace.empty()) {
        tr.allocs.clear();
        generate(app, tr, p.unit_pages, feed, foot, iters, reverse, conc);
      } else {
        stream_trace(trace, feed);
      }
      if (!sim) sim.reset(new Simulator(tr, p));
      const auto t0 = std::chrono::steady_clock::now();
      s = sim->finish();
      dt += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, dt);
      if (r == repeat - 1) t = tr;
    }
  } catch (const std::bad_alloc&) {
    die("out of memory for the page state of " + std::to_string(want_pages) + " pages of " +
        std::to_string(t.page_bytes) + " bytes (" + gib(state_bytes(want_pages, p)) +
        " estimated): give a larger --page or a smaller footprint");
  }
  uint64_t footprint_pages = 0;
  for (auto& a : t.allocs) footprint_pages += a.n;
  const double pb = double(t.page_bytes);
  std::printf(
      "{\"type\":\"sim\",\"policy\":\"%s\",\"eviction\":\"%s\",\"app\":\"%s\",\"page_bytes\":%llu,"
      "\"unit_pages\":%u,\"granule_pages\":%u,\"prefetch\":%s,\"prefetch_threshold\":%u,\"batch_size\":%u,"
      "\"thrash_threshold\":%u,\"counter_threshold\":%u,\"capacity_pages\":%llu,\"footprint_pages\":%llu,"
      "\"allocations\":%zu,\"events\":%llu,\"gpu_events\":%llu,\"cpu_events\":%llu,\"barriers\":%llu,"
      "\"hits\":%llu,\"faults\":%llu,\"dup_faults\":%llu,\"batches\":%llu,\"migrations\":%llu,"
      "\"h2d_fault_pages\":%llu,\"h2d_prefetch_pages\":%llu,\"h2d_counter_pages\":%llu,\"populate_gpu_pages\":%llu,"
      "\"evictions\":%llu,\"d2h_evict_pages\":%llu,\"cpu_faults\":%llu,\"d2h_cpu_fault_pages\":%llu,"
      "\"remote_gpu_pages\":%llu,\"remote_cpu_pages\":%llu,\"thrash_units\":%llu,\"counter_migrations\":%llu,\"counter_refused\":%llu,"
      "\"peak_gpu_pages\":%llu,\"fault_window\":%u,\"resident_blocks\":%u,\"sms\":%u,\"block_bytes\":%llu,"
      "\"h2d_bytes\":%.0f,\"d2h_bytes\":%.0f,\"timed\":%s,\"entries\":%llu,\"stale_entries\":%llu,"
      "\"flushed_entries\":%llu,\"update_put_batches\":%llu,\"refaults\":%llu,\"first_batch_pages\":%llu,\"timed_ms\":%.4f,\"sim_seconds\":%.6f,\"events_per_s\":%.0f}\n",
      p.policy.c_str(), p.eviction.c_str(), app.empty() ? "trace" : app.c_str(), (unsigned long long)t.page_bytes,
      p.unit_pages, p.granule_pages, p.prefetch ? "true" : "false", p.prefetch_threshold, p.batch_size,
      p.thrash_threshold, p.counter_threshold, (unsigned long long)p.capacity_pages,
      (unsigned long long)footprint_pages, t.allocs.size(), (unsigned long long)s.events,
      (unsigned long long)s.gpu_events, (unsigned long long)s.cpu_events, (unsigned long long)s.barriers,
      (unsigned long long)s.hits, (unsigned long long)s.faults, (unsigned long long)s.dup_faults,
      (unsigned long long)s.batches, (unsigned long long)s.migrations, (unsigned long long)s.h2d_fault,
      (unsigned long long)s.h2d_prefetch, (unsigned long long)s.h2d_counter, (unsigned long long)s.populate_gpu,
      (unsigned long long)s.evictions, (unsigned long long)s.d2h_evict, (unsigned long long)s.cpu_faults,
      (unsigned long long)s.d2h_cpu_fault, (unsigned long long)s.remote_gpu, (unsigned long long)s.remote_cpu,
      (unsigned long long)s.thrash_units, (unsigned long long)s.counter_migrations, (unsigned long long)s.counter_refused, (unsigned long long)s.peak_gpu,
      p.fault_window, p.resident_blocks, p.sms, (unsigned long long)p.block_bytes,
      double(s.h2d_fault + s.h2d_prefetch + s.h2d_counter) * pb, double(s.d2h_evict + s.d2h_cpu_fault) * pb,
      p.timed ? "true" : "false", (unsigned long long)s.entries, (unsigned long long)s.stale,
      (unsigned long long)s.flushed, (unsigned long long)s.update_put_batches, (unsigned long long)s.refaults, (unsigned long long)s.first_batch_pages,
      s.timed_ns / 1e6, best,
      best > 0 ? double(s.events) / best : 0.0);
  return 0;
}

}  // namespace umsim

// Whatever escapes the checks above (memory the replay could not get, a library's exception) is one line and
// exit 2, never std::terminate's abort.
int main(int argc, char** argv) {
  try {
    return umsim::run_main(argc, argv);
  } catch (const std::bad_alloc&) {
    umsim::die("out of memory for the simulator's state (a smaller footprint, or a larger --page, fits)");
  } catch (const std::exception& e) {
    umsim::die(std::string("failed: ") + e.what());
  }
}
