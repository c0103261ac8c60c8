// umsim's replay: the four models (uvm, svm, ats, zerocopy) over a stream's events (see umsim.hpp).
#include "umsim.hpp"

namespace umsim {

enum : uint8_t { UNTOUCHED = 0, ON_CPU = 1, ON_GPU = 2 };

class Sim {
 public:
  ~Sim() { if (log_) std::fclose(log_); }
  Sim(const Sim&) = delete;
  Sim& operator=(const Sim&) = delete;
  Sim(const Trace& t, const Params& p) : t_(t), p_(p) {
    if (!p.entry_log.empty() && !(log_ = std::fopen(p.entry_log.c_str(), "w"))) die("--entry-log: cannot write " + p.entry_log);
    npages_ = t.pages();
    where_.assign(npages_, p.init == "cpu" ? ON_CPU : UNTOUCHED);
    pend_.assign(npages_, 0);
    unit_.assign(npages_, 0);
    // Units: fixed-size pieces of each allocation (VA blocks, SVM ranges, counter regions).
    for (const Alloc& a : t.allocs)
      for (uint32_t off = 0; off < a.n; off += p.unit_pages) {
        uint32_t u = uint32_t(ufirst_.size());
        uint32_t n = std::min(p.unit_pages, a.n - off);
        ufirst_.push_back(a.first + off);
        un_.push_back(n);
        for (uint32_t k = 0; k < n; ++k) unit_[a.first + off + k] = u;
      }
    size_t U = ufirst_.size();
    res_.assign(U, 0);
    prev_.assign(U, -1);
    next_.assign(U, -1);
    inlist_.assign(U, 0);
    ref_.assign(U, 0);
    flags_.assign(U, 0);
    evstamp_.assign(U, 0);
    thrash_.assign(U, 0);
    counter_.assign(U, 0);
    // Occupancy trees for the density prefetcher: per unit, a complete binary tree over the unit's
    // pages rounded up to a power of two (node 1 = root, leaves at [L, 2L)).
    leaves_ = 1;
    while (leaves_ < p.unit_pages) leaves_ *= 2;
    words_ = (leaves_ + 63) / 64;
    if (p.policy == "uvm") bits_.assign(U * size_t(words_), 0);
    mark_.assign(leaves_, 0);
    lapse_ = p.thrash_lapse ? p.thrash_lapse : p.capacity_pages;
    mode_ = p.policy == "uvm" ? 0 : p.policy == "svm" ? 1 : p.policy == "ats" ? 2 : 3;
    lru_ = p.eviction == "lru";
    clock_ = p.eviction == "clock";
  }

  // Replays the next n events of the stream.
  void feed(const uint32_t* ev, size_t n) {
    const int mode = mode_;
    const bool launch = mode == 0 && p_.resident_blocks > 0;
    s_.events += n;
    for (const uint32_t* end = ev + n; ev != end; ++ev) {
      const uint32_t e = *ev;
      ++now_;
      if (e == BARRIER) {
        ++s_.barriers;
        if (launch) p_.timed ? replay_kernel_timed() : replay_kernel();
        if (mode == 0) flush();
        continue;
      }
      uint32_t pg = e & PAGE_MASK;
      if (e & CPU) {
        if (launch) p_.timed ? replay_kernel_timed() : replay_kernel();
        cpu_access(pg, mode);
        continue;
      }
      if (launch) { kernel_.push_back(pg); continue; }
      ++s_.gpu_events;
      uint8_t w = where_[pg];
      uint32_t u = unit_[pg];
      if (w == ON_GPU) {
        ++s_.hits;
        if (lru_) { if (u != lastu_) touch(u); }
        else if (clock_) ref_[u] = 1;
        lastu_ = u;
        continue;
      }
      switch (mode) {
        case 0: uvm_fault(pg, u); break;
        case 1: svm_fault(pg, u); break;
        case 2: ats_access(pg, u); break;
        default: ++s_.remote_gpu; break;
      }
    }
  }
  uint64_t events() const { return s_.events; }
  // The end of the stream: the last launch and the pending batch; the counts.
  Stats finish() {
    if (mode_ == 0 && p_.resident_blocks > 0) p_.timed ? replay_kernel_timed() : replay_kernel();
    if (mode_ == 0) flush();
    s_.cpu_events = s_.events - s_.gpu_events - s_.barriers;
    return s_;
  }

 private:
  const Trace& t_;
  Params p_;
  uint32_t npages_;
  Stats s_;
  uint64_t now_ = 0, used_ = 0, lapse_;
  uint32_t leaves_;
  int mode_ = 0;  // uvm, svm, ats, zerocopy
  bool lru_ = false, clock_ = false;
  uint32_t lastu_ = 0xFFFFFFFFu, hand_ = 0, batch_ = 1;
  std::vector<uint8_t> where_, inlist_, ref_, flags_;
  std::vector<uint32_t> pend_, unit_, ufirst_, un_, res_, thrash_, counter_;
  std::vector<uint64_t> bits_;  // per unit: pages on (or arriving at) the GPU
  uint32_t words_ = 1;
  std::vector<int32_t> prev_, next_;
  std::vector<uint64_t> evstamp_;
  std::vector<uint32_t> batch_pages_;
  int32_t head_ = -1, tail_ = -1;  // recency list of resident units: head = most recent
  enum : uint8_t { REMOTE = 1 };

  // Recency list.
  void unlink(uint32_t u) {
    if (!inlist_[u]) return;
    if (prev_[u] >= 0) next_[prev_[u]] = next_[u]; else head_ = next_[u];
    if (next_[u] >= 0) prev_[next_[u]] = prev_[u]; else tail_ = prev_[u];
    prev_[u] = next_[u] = -1;
    inlist_[u] = 0;
  }
  void touch(uint32_t u) {  // move to the front (most recent)
    if (head_ == int32_t(u)) return;
    unlink(u);
    next_[u] = head_;
    if (head_ >= 0) prev_[head_] = int32_t(u);
    head_ = int32_t(u);
    if (tail_ < 0) tail_ = int32_t(u);
    inlist_[u] = 1;
  }
  // The victim: least recent resident unit other than `keep` (clock: second chance).
  int32_t victim(uint32_t keep) {
    if (clock_) {
      size_t U = ufirst_.size();
      for (size_t step = 0; step < 2 * U + 2; ++step) {
        uint32_t u = hand_;
        hand_ = uint32_t((hand_ + 1) % U);
        if (!res_[u] || u == keep) continue;
        if (ref_[u]) { ref_[u] = 0; continue; }
        return int32_t(u);
      }
      return -1;
    }
    for (int32_t u = tail_; u >= 0; u = prev_[u])
      if (uint32_t(u) != keep) return u;
    return -1;
  }
  void tree_set(uint32_t u, uint32_t off, int d) {
    if (bits_.empty()) return;
    uint64_t& w = bits_[size_t(u) * words_ + off / 64];
    if (d > 0) w |= 1ull << (off % 64); else w &= ~(1ull << (off % 64));
  }
  // Pages set in [lo, lo + size) of unit u's bitmap (size a power of two, lo aligned to it).
  uint32_t occupied(uint32_t u, uint32_t lo, uint32_t size) const {
    const uint64_t* w = &bits_[size_t(u) * words_];
    if (size < 64) return uint32_t(__builtin_popcountll((w[lo / 64] >> (lo % 64)) & ((1ull << size) - 1)));
    uint32_t c = 0;
    for (uint32_t k = lo / 64; k < (lo + size) / 64; ++k) c += uint32_t(__builtin_popcountll(w[k]));
    return c;
  }
  void to_gpu(uint32_t pg, uint32_t u) {
    where_[pg] = ON_GPU;
    ++res_[u];
    ++used_;
    tree_set(u, pg - ufirst_[u], +1);
    if (used_ > s_.peak_gpu) s_.peak_gpu = used_;
  }
  void evict(uint32_t v) {
    uint32_t f = ufirst_[v], n = un_[v];
    for (uint32_t k = 0; k < n; ++k)
      if (where_[f + k] == ON_GPU) {
        where_[f + k] = ON_CPU;
        ++s_.d2h_evict;
        --used_;
        tree_set(v, k, -1);
      }
    res_[v] = 0;
    unlink(v);
    ref_[v] = 0;
    evstamp_[v] = now_;
    ++s_.evictions;
  }
  // Makes room for `need` pages; false if it cannot (the unit itself is larger than the GPU).
  bool make_room(uint64_t need, uint32_t keep) {
    while (used_ + need > p_.capacity_pages) {
      int32_t v = victim(keep);
      if (v < 0) return false;
      evict(uint32_t(v));
    }
    return true;
  }
  // Brings page pg of unit u to the GPU, counting the transfer under `cause`.
  void bring(uint32_t pg, uint32_t u, uint64_t& cause) {
    if (where_[pg] == UNTOUCHED) ++s_.populate_gpu; else ++cause;
    to_gpu(pg, u);
    if (p_.timed) arrived_.push_back(pg);
  }
  bool thrashing(uint32_t u) {
    if (p_.thrash_threshold == 0 || evstamp_[u] == 0) return false;
    if (now_ - evstamp_[u] <= lapse_) ++thrash_[u]; else thrash_[u] = 0;
    evstamp_[u] = 0;
    if (thrash_[u] < p_.thrash_threshold) return false;
    if (p_.thrash_action == "remote") {
      flags_[u] |= REMOTE;
      ++s_.thrash_units;
      return true;
    }
    return false;  // "none": detection only
  }

  // ----- UVM, one launch at the concurrency of its grid (Params::resident_blocks)
  void replay_kernel() {
    if (kernel_.empty()) return;
    const std::vector<uint32_t>& K = kernel_;
    const uint64_t pb = t_.page_bytes, total = uint64_t(K.size()) * pb, C = std::max<uint64_t>(1, p_.block_bytes);
    const uint32_t B = p_.resident_blocks, S = std::max<uint32_t>(1, std::min(p_.sms ? p_.sms : B, B));
    // Each SM's pages (indices into K) in the order its blocks reach them.
    std::vector<std::vector<uint32_t>> src(S);
    for (uint64_t c = 0, n = (total + C - 1) / C; c < n; ++c) {
      std::vector<uint32_t>& l = src[uint32_t((c % B) % S)];
      for (uint64_t k = c * C / pb, last = (std::min(total, (c + 1) * C) - 1) / pb; k <= last; ++k)
        if (l.empty() || l.back() != uint32_t(k)) l.push_back(uint32_t(k));
    }
    std::vector<size_t> at(S, 0);
    std::vector<uint8_t> seen(K.size(), 0);
    std::vector<uint32_t> stalled;
    for (;;) {
      stalled.clear();
      bool left = false;
      for (uint32_t sm = 0; sm < S; ++sm) {
        std::vector<uint32_t>& l = src[sm];
        while (at[sm] < l.size()) {
          const uint32_t k = l[at[sm]], pg = K[k], u = unit_[pg];
          const bool first = !seen[k];
          seen[k] = 1;
          if (where_[pg] == ON_GPU) {
            if (first) ++s_.hits;
            if (lru_ && u != lastu_) touch(u);
            else if (clock_) ref_[u] = 1;
            lastu_ = u;
            ++at[sm];
            continue;
          }
          if (flags_[u] & REMOTE) { ++s_.remote_gpu; ++at[sm]; continue; }
          uvm_fault(pg, u);
          stalled.push_back(sm);
          break;
        }
        left = left || at[sm] < l.size();
      }
      if (!left) break;
      flush();
      // A stalled SM whose page could not be brought (no room) reads it remotely and goes on.
      for (uint32_t sm : stalled)
        if (at[sm] < src[sm].size() && where_[K[src[sm][at[sm]]]] != ON_GPU) { ++s_.remote_gpu; ++at[sm]; }
    }
    s_.gpu_events += K.size();
    kernel_.clear();
  }

  // ----- UVM, one launch in time (Params::timed; see Params for the rules and their sources)
  void replay_kernel_timed() {
    if (kernel_.empty()) return;
    const std::vector<uint32_t>& K = kernel_;
    const uint64_t pb = t_.page_bytes, total = uint64_t(K.size()) * pb, C = std::max<uint64_t>(1, p_.block_bytes);
    const uint32_t B = p_.resident_blocks, S = std::max<uint32_t>(1, std::min(p_.sms ? p_.sms : B, B));
    const uint32_t Un = std::max<uint32_t>(1, p_.unroll), M = std::min<uint32_t>(8, std::max<uint32_t>(1, p_.utlb_faults));
    const uint64_t nchunks = (total + C - 1) / C;
    // Each SM's (uTLB's) pages in the order its warps miss them: block b's step j covers the chunks
    // (Un j + k) B + b, k < Un (one grid stride apart), and each warp issues its Un loads at once, so the SM
    // walks the first page of each of the step's chunks, then the second page of each, ... (--page-order
    // chunks: every page of the first chunk, then of the second, ...); the blocks of one SM (b mod S) run
    // side by side (their warps interleaved).
    std::vector<std::vector<uint32_t>> src(S);
    const uint64_t steps = (nchunks + uint64_t(B) * Un - 1) / (uint64_t(B) * Un);
    const uint64_t cpages = (C + pb - 1) / pb + 1;  // pages a chunk can span (unaligned: one more)
    // --block-order shuffled or groups (see Params): the SM takes its blocks in a fixed pseudo-random order per step.
    std::vector<uint32_t> border(B);
    for (uint32_t b = 0; b < B; ++b) border[b] = b;
    auto add = [&](uint64_t j, uint32_t k, uint64_t q, uint32_t b) {
      std::vector<uint32_t>& l = src[b % S];
      const uint64_t c = (uint64_t(Un) * j + k) * B + b;
      if (c >= nchunks) return;
      const uint64_t first = c * C / pb, last = (std::min(total, (c + 1) * C) - 1) / pb;
      if (first + q > last) return;
      const uint32_t pg = uint32_t(first + q);
      if (l.empty() || l.back() != pg) l.push_back(pg);
    };
    for (uint64_t j = 0; j < steps; ++j) {
      if ((p_.shuffle_blocks || p_.group_blocks) && B > S) {
        // --block-order shuffled: each SM takes its blocks (b = sm + r S, dispatch round r) in a pseudo-random order
        // of its rounds, drawn per step and SM; groups: the SMs whose blocks share pages (sm C / page equal) take
        // the order drawn for their group's first SM, which holds every round the others hold
        const uint32_t per_sm = (B + S - 1) / S;
        std::vector<uint32_t> rounds;
        uint64_t drawn_for = ~0ull;
        for (uint32_t sm = 0; sm < S; ++sm) {
          const uint64_t key = p_.group_blocks ? uint64_t(sm) * C / pb : sm;
          if (key != drawn_for) {
            drawn_for = key;
            rounds.clear();
            for (uint32_t r = 0; r < per_sm; ++r) if (sm + r * S < B) rounds.push_back(r);
            uint64_t h = (j + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t(sm) + 1) * 0xC2B2AE3D27D4EB4Full;
            for (size_t i = rounds.size(); i > 1; --i) {
              h ^= h >> 31; h *= 0xD6E8FEB86659FD93ull; h ^= h >> 32;
              std::swap(rounds[i - 1], rounds[h % i]);
            }
          }
          uint32_t i = 0;
          for (uint32_t r : rounds) if (sm + r * S < B) border[sm + (i++) * S] = sm + r * S;
        }
      }
      if (p_.chunk_first) {  // every page of the step's first chunk, then of its second, ...
        for (uint32_t k = 0; k < Un; ++k)
          for (uint64_t q = 0; q < cpages; ++q)
            for (uint32_t bi = 0; bi < B; ++bi) add(j, k, q, border[bi]);
      } else {  // the first page of each chunk, then the second of each, ...
        for (uint64_t q = 0; q < cpages; ++q)
          for (uint32_t bi = 0; bi < B; ++bi)
            for (uint32_t k = 0; k < Un; ++k) add(j, k, q, border[bi]);
      }
    }
    // scan, scan_ev: where the uTLB's last look-ahead found its next miss (the pages before it pass, and stay so
    // until an eviction: s_.evictions was scan_ev)
    // open: with --fault-burst-us, the end of the uTLB's burst (a miss after it, with faulted pages held, stalls it)
    struct Tlb { size_t pos = 0; double t = 0; uint32_t out[8] = {}; uint32_t nout = 0; bool blocked = false; uint32_t cap = 1;
                 size_t scan = 0; uint64_t scan_ev = 0; double open = -1e300; };
    // c: the instance's round among the entry's instances (--instance-order spread: entries written at one instant
    // enter the buffer round by round)
    struct Entry { double t; uint32_t pg, u; bool q = false; uint32_t c = 0; };
    const bool spread = p_.spread_instances;
    auto by_time = [spread](const Entry& a, const Entry& b) { return a.t < b.t || (spread && a.t == b.t && a.c < b.c); };
    std::vector<Tlb> U(S);
    std::vector<Entry> buf, keep;
    std::vector<uint8_t> seen(K.size(), 0);
    if (rmt_.size() != npages_) rmt_.assign(npages_, 0);
    const double rfetch = p_.replay_fetch_us * 1e3, burst = p_.fault_burst_us * 1e3;
    // --fault-burst-us: whether the uTLB may write a miss at time t (one holding no faulted page always may: its
    // first miss starts a burst)
    auto may_write = [&](const Tlb& x, double t) { return x.nout < x.cap && (burst <= 0 || x.nout == 0 || t <= x.open); };
    const double rns = p_.resident_ns, fetch = p_.fetch_us * 1e3, fixed = p_.batch_us * 1e3, per = p_.page_us * 1e3;
    const double INF = 1e300;
    auto passes = [&](uint32_t pg) { return where_[pg] == ON_GPU || rmt_[pg] || (flags_[unit_[pg]] & REMOTE); };
    auto is_out = [&](const Tlb& x, uint32_t pg) {
      for (uint32_t i = 0; i < x.nout; ++i) if (x.out[i] == pg) return true;
      return false;
    };
    // --interleave: uTLB i's place among entries written at one instant: the bit-reversed order of i (a fixed
    // spread over the SMs: neighbouring SMs, which hold neighbouring blocks, are far apart)
    std::vector<uint32_t> rank(S);
    {
      uint32_t bits = 0;
      while ((1u << bits) < S) ++bits;
      std::vector<std::pair<uint32_t, uint32_t>> r;
      for (uint32_t i = 0; i < S; ++i) {
        uint32_t v = 0;
        for (uint32_t k = 0; k < bits; ++k) if (i >> k & 1) v |= 1u << (bits - 1 - k);
        r.push_back({v, i});
      }
      std::sort(r.begin(), r.end());
      for (uint32_t k = 0; k < S; ++k) rank[r[k].second] = k;
    }
    std::vector<uint32_t> ccount(S, 0);
    auto next_cap = [&](uint32_t i) -> uint32_t {
      const std::vector<uint32_t>& c = p_.cap_cycle;
      return c.empty() ? M : std::min<uint32_t>(8, c[(ccount[i]++ + size_t(i) * 13) % c.size()]);
    };
    for (uint32_t i = 0; i < S; ++i) U[i].cap = next_cap(i);
    std::vector<uint32_t> icount(S, 0);
    auto instances = [&](uint32_t i) -> uint32_t {  // the next entry's instances for uTLB i (uTLBs out of step)
      const std::vector<uint32_t>& c = p_.inst_cycle;
      return c.empty() ? 1 : c[(icount[i]++ + size_t(i) * 7) % c.size()];
    };
    // uTLB i's entry on page pg written at t: its instances side by side, or with --instance-gap-ns each trailing the
    // previous by the gap times the uTLBs faulting now (holding faulted pages; `joins`: i holds none yet), and the
    // uTLB's next entry after its last instance (its instances of one page stay consecutive among its own)
    const double igap = p_.instance_gap_ns;
    std::vector<double> wnext(S, -1e300);
    std::vector<uint64_t> mark(S, 0);
    uint64_t stamp = 0;
    auto write_entry = [&](uint32_t i, double t, uint32_t pg, bool joins) {
      const uint32_t n = instances(i);
      double g = 0;
      if (igap > 0) {
        uint32_t active = 0;
        if (p_.instance_gap_by_buffer) {  // the uTLBs with entries in the buffer, unfetched (the driver's per batch)
          ++stamp;
          if (mark[i] != stamp) { mark[i] = stamp; ++active; }
          for (const Entry& e : buf) if (mark[e.u] != stamp) { mark[e.u] = stamp; ++active; }
        } else {
          active = joins ? 1 : 0;
          for (const Tlb& y : U) active += y.nout > 0;
        }
        g = igap * active;
        t = std::max(t, wnext[i]);
        wnext[i] = t + g * n;
      }
      for (uint32_t c = 0; c < n; ++c) buf.push_back({t + g * c, pg, i, false, c});
    };
    // The uTLB walks its pages up to time `limit`, writing an entry at each miss it may still hold.
    auto run = [&](uint32_t i, double limit) {
      Tlb& x = U[i];
      const std::vector<uint32_t>& l = src[i];
      while (!x.blocked && x.pos < l.size() && x.t <= limit) {
        const uint32_t k = l[x.pos], pg = K[k];
        const bool first = !seen[k];
        seen[k] = 1;
        if (passes(pg) || is_out(x, pg)) {
          if (first && passes(pg)) ++s_.hits;
          x.t += rns;
          ++x.pos;
          continue;
        }
        if (may_write(x, x.t)) {
          if (burst > 0 && x.nout == 0 && x.t > x.open) x.open = x.t + burst;  // a burst starts at this miss
          write_entry(i, x.t, pg, x.nout == 0);
          x.out[x.nout++] = pg;
          x.t += rns;
          ++x.pos;
          continue;
        }
        x.blocked = true;
      }
    };
    // The time of the uTLB's next entry with the residency as it is (INF: none before a replay).
    auto peek = [&](uint32_t i) {
      Tlb& x = U[i];
      if (x.blocked) return INF;
      const std::vector<uint32_t>& l = src[i];
      size_t pos = x.pos;
      if (x.scan > pos && x.scan_ev == s_.evictions) pos = x.scan;  // the pages between pass: not walked again
      double t = x.t + double(pos - x.pos) * rns;
      x.scan_ev = s_.evictions;
      for (; pos < l.size(); ++pos, t += rns) {
        const uint32_t pg = K[l[pos]];
        if (passes(pg) || is_out(x, pg)) continue;
        x.scan = pos;
        return may_write(x, t) ? t : INF;
      }
      x.scan = pos;
      return INF;
    };
    // --write-ns: entries not yet written take their place in the buffer one write_ns after the previous one
    // (buf in time order before and after; sorted again only where a write moved an entry past another)
    double wlast = -1e300;
    auto serialize = [&]() {
      if (p_.write_ns <= 0) return;
      for (Entry& e : buf) {
        if (e.q) continue;
        e.t = std::max(e.t, wlast + p_.write_ns);
        e.q = true;
        wlast = e.t;
      }
      if (!std::is_sorted(buf.begin(), buf.end(), by_time)) std::stable_sort(buf.begin(), buf.end(), by_time);
    };
    std::vector<uint32_t> lastpg(S, BARRIER);
    double drv = 0;
    uint32_t inservice = 0;
    for (;;) {
      double first = INF;
      for (const Entry& e : buf) first = std::min(first, e.t);
      for (uint32_t i = 0; i < S; ++i) first = std::min(first, peek(i));
      if (first >= INF) break;
      double tf;
      // While servicing (after a replay), the driver fetches again at once: the entries written by then,
      // replay_fetch_us after the replay (the uTLBs' burst of faults that the replay itself causes lands in
      // the buffer within it); with none by then its service loop ends and the next fault wakes it, fetch_us
      // later.
      // (replay_fetch_us 0: umsim-3's rule, at once only for entries written before the replay.)
      const bool again = rfetch > 0 ? drv > 0 && first <= drv + rfetch : first < drv;
      if (again && inservice < p_.max_batches_per_service) { tf = drv + rfetch; ++inservice; }
      else { tf = std::max(first, drv) + fetch; inservice = 1; }
      for (uint32_t i = 0; i < S; ++i) run(i, tf);
      if (p_.interleave)  // entries written at one instant: the GPCs' in an interleaved order, not SM by SM
        std::stable_sort(buf.begin(), buf.end(), [&](const Entry& a, const Entry& b) {
          return a.t < b.t || (a.t == b.t && (spread && a.c != b.c ? a.c < b.c : rank[a.u] < rank[b.u]));
        });
      else
        std::stable_sort(buf.begin(), buf.end(), by_time);
      serialize();
      size_t present = 0;
      while (present < buf.size() && buf[present].t <= tf) ++present;
      const size_t n = std::min<size_t>(present, p_.batch_size);
      // The driver's count: one per fetched entry, less those merged with the previous entry of their uTLB
      // or the previous entry of the batch on the same page.
      uint32_t lastg = BARRIER;
      for (size_t k = 0; k < n; ++k) {
        const Entry& e = buf[k];
        const bool merged = lastpg[e.u] == e.pg || (p_.cross_merge && lastg == e.pg);
        if (!merged) {
          ++s_.entries;
          if (passes(e.pg)) ++s_.stale;
        }
        if (log_)
          std::fprintf(log_, "f %llu %u %u %d %.0f %.0f %d\n", (unsigned long long)(s_.batches + 1), e.pg, e.u,
                       merged ? 1 : 0, t_off_ + e.t, t_off_ + tf, passes(e.pg) ? 1 : 0);
        lastpg[e.u] = lastg = e.pg;
      }
      for (size_t k = 0; k < n; ++k) lastpg[buf[k].u] = BARRIER;
      // Service: the distinct pages not yet resident, as the untimed model services a batch.
      arrived_.clear();
      const uint64_t b0 = s_.batches;
      size_t distinct = 0;
      for (size_t k = 0; k < n; ++k) {
        const uint32_t pg = buf[k].pg;
        if (pend_[pg] == batch_ || passes(pg)) {
          if (pend_[pg] != batch_) { pend_[pg] = batch_; ++distinct; }
          continue;
        }
        ++distinct;
        uvm_fault(pg, unit_[pg]);
      }
      const uint64_t dups = n - distinct;
      s_.dup_faults += dups;
      if (!batch_pages_.empty()) flush();
      if (s_.batches == b0) { ++s_.batches; ++batch_; }  // every entry stale: fetched, counted, replayed
      const double tr = tf + fixed + double(arrived_.size()) * per;
      if (log_) std::fprintf(log_, "r %llu %.0f\n", (unsigned long long)s_.batches, t_off_ + tr);
      if (!s_.first_batch_pages) s_.first_batch_pages = arrived_.size();
      for (size_t k = 0; k < n; ++k)  // pages the service could not bring are read over the link from now on
        if (where_[buf[k].pg] != ON_GPU) rmt_[buf[k].pg] = 1;
      buf.erase(buf.begin(), buf.begin() + long(n));
      // Entries written while the service runs see the pages it migrates as not yet there (mapped at the end, or
      // with --release blocks as each VA block's migrations end, releasing the uTLBs whose faulted pages are all
      // mapped then).
      for (uint32_t pg : arrived_) where_[pg] = UNTOUCHED + 3;
      if (p_.block_release) {
        for (size_t k = 0; k < arrived_.size();) {
          size_t k2 = k;
          while (k2 < arrived_.size() && unit_[arrived_[k2]] == unit_[arrived_[k]]) ++k2;
          const double te = tf + fixed + double(k2) * per;  // this VA block's last migration ends
          for (uint32_t i = 0; i < S; ++i) run(i, te);
          for (size_t q = k; q < k2; ++q) where_[arrived_[q]] = ON_GPU;
          for (uint32_t i = 0; i < S; ++i) {
            Tlb& x = U[i];
            if (!x.nout) continue;
            bool all = true;
            for (uint32_t q = 0; q < x.nout && all; ++q) all = passes(x.out[q]);
            if (!all) continue;
            x.nout = 0;
            x.cap = next_cap(i);
            if (x.blocked) { x.blocked = false; x.t = std::max(x.t, te); }
          }
          k = k2;
        }
      }
      for (uint32_t i = 0; i < S; ++i) run(i, tr);
      for (uint32_t pg : arrived_) where_[pg] = ON_GPU;
      // Flush: the entries present at the fetch (the cached PUT), or every entry written by now when the
      // batch's duplicates exceed the ratio (PUT read again).
      if (p_.write_ns > 0) {  // the entries written during the service, appended SM by SM, into time order
        if (!std::is_sorted(buf.begin(), buf.end(), by_time)) std::stable_sort(buf.begin(), buf.end(), by_time);
        serialize();
      }
      const bool update_put = dups * 100 > uint64_t(n) * p_.update_put_ratio;
      s_.update_put_batches += update_put;
      const double cut = update_put ? tr : tf;
      keep.clear();
      for (const Entry& e : buf)
        if (e.t <= cut) ++s_.flushed; else keep.push_back(e);
      buf.swap(keep);
      // Replay: each uTLB's faulted pages now resident release it; the others fault again.
      for (uint32_t i = 0; i < S; ++i) {
        Tlb& x = U[i];
        const uint32_t had = x.nout;
        uint32_t w = 0;
        for (uint32_t k = 0; k < x.nout; ++k) {
          const uint32_t pg = x.out[k];
          if (passes(pg)) continue;
          x.out[w++] = pg;
          write_entry(i, tr, pg, false);
          ++s_.refaults;
        }
        x.nout = w;
        if (had && x.nout == 0) x.cap = next_cap(i);  // released: its next stall's pages
        // A released uTLB resumes once its retried accesses complete: with replay_fetch_us, after the burst of
        // re-faults (the still-missing accesses) the next fetch takes; its new misses come later (with --resume-us,
        // that long after the replay: its misses join the burst). With
        // --fault-burst-us its warps retry at the replay and its misses make the replay's burst: it resumes at the
        // replay, and every uTLB's burst window opens there.
        if (burst > 0 && (had || x.blocked)) x.open = tr + burst;
        if (x.blocked && x.nout < x.cap) {
          x.blocked = false;
          const double resume = p_.resume_us >= 0 ? p_.resume_us * 1e3 : rfetch;  // --resume-us: in the burst
          x.t = std::max(x.t, tr + (had && !x.nout && burst <= 0 ? resume : 0));
        }
      }
      drv = tr;
    }
    double end = drv;
    for (const Tlb& x : U) end = std::max(end, x.t);
    s_.timed_ns += end;
    t_off_ += end + 1e6;  // the next launch's times in the log after this one's (1 ms apart)
    s_.gpu_events += K.size();
    kernel_.clear();
  }

  // ----- UVM
  void uvm_fault(uint32_t pg, uint32_t u) {
    if (flags_[u] & REMOTE) { ++s_.remote_gpu; return; }
    if (pend_[pg] == batch_) { ++s_.dup_faults; return; }
    pend_[pg] = batch_;
    batch_pages_.push_back(pg);
    if (batch_pages_.size() >= p_.batch_size || (p_.fault_window && batch_pages_.size() >= p_.fault_window)) flush();
  }
  void flush() {
    if (batch_pages_.empty()) return;
    ++s_.batches;
    std::sort(batch_pages_.begin(), batch_pages_.end());
    size_t i = 0;
    while (i < batch_pages_.size()) {
      uint32_t u = unit_[batch_pages_[i]];
      size_t j = i;
      while (j < batch_pages_.size() && unit_[batch_pages_[j]] == u) ++j;
      service_block(u, i, j);
      i = j;
    }
    batch_pages_.clear();
    ++batch_;
  }
  void service_block(uint32_t u, size_t i, size_t j) {
    s_.faults += j - i;
    if (!res_[u] && thrashing(u)) { s_.remote_gpu += j - i; return; }
    if (flags_[u] & REMOTE) { s_.remote_gpu += j - i; return; }
    uint32_t f = ufirst_[u], n = un_[u], g = p_.granule_pages;
    // Pages to bring: the faulted granules, then (prefetch) the density regions around them.
    std::vector<uint32_t>& want = want_;
    want.clear();
    // The distinct faulted granules (the batch is sorted, so equal granules are adjacent).
    std::vector<uint32_t>& gran = gran_;
    gran.clear();
    for (size_t k = i; k < j; ++k) {
      uint32_t g0 = (batch_pages_[k] - f) / g * g;
      if (gran.empty() || gran.back() != g0) gran.push_back(g0);
    }
    for (uint32_t g0 : gran)
      for (uint32_t q = g0; q < std::min(n, g0 + g); ++q)
        if (where_[f + q] != ON_GPU && !mark_[q]) { mark_[q] = 1; want.push_back(q); }
    size_t demand = want.size();
    if (p_.prefetch && !bits_.empty()) {
      // Occupancy with the faulted granules counted as arriving (their bits set now; bring() keeps them).
      // Every faulted granule's region is computed on the same occupancy (resident pages and the batch's faulted
      // granules), as the driver's compute_prefetch_mask does (uvm_perf_prefetch.c: the bitmap tree is built
      // once per VA block and batch, and the regions' pages are added to the prefetch mask, not to the tree).
      for (uint32_t q : want) tree_set(u, q, +1);
      std::vector<std::pair<uint32_t, uint32_t>>& regs = regs_;
      regs.clear();
      for (uint32_t off : gran) {
        uint32_t blo = 0, bsize = 0;
        for (uint32_t size = 1; size <= leaves_; size *= 2) {
          if (size <= g) continue;
          uint32_t lo = off / size * size;
          if (uint64_t(occupied(u, lo, size)) * 100 > uint64_t(p_.prefetch_threshold) * size) blo = lo, bsize = size;
        }
        if (bsize && blo < n && occupied(u, blo, bsize) < std::min(bsize, n - blo)) regs.push_back({blo, bsize});
      }
      for (const auto& r : regs)
        for (uint32_t q = r.first; q < std::min(n, r.first + r.second); ++q)
          if (where_[f + q] != ON_GPU && !mark_[q]) {
            mark_[q] = 1;
            want.push_back(q);
            tree_set(u, q, +1);
          }
    }
    for (uint32_t q : want) mark_[q] = 0;
    if (want.empty()) return;
    if (!make_room(want.size(), u)) {
      for (size_t k = demand; k < want.size(); ++k) tree_set(u, want[k], -1);
      want.resize(demand);
      if (!make_room(want.size(), u)) {
        for (uint32_t q : want) tree_set(u, q, -1);
        s_.remote_gpu += j - i;
        return;
      }
    }
    for (size_t k = 0; k < want.size(); ++k) bring(f + want[k], u, k < demand ? s_.h2d_fault : s_.h2d_prefetch);
    ++s_.migrations;
    touch(u);
    ref_[u] = 1;
  }

  // ----- SVM: a fault migrates the whole range.
  void svm_fault(uint32_t pg, uint32_t u) {
    (void)pg;
    ++s_.faults;
    uint32_t f = ufirst_[u], n = un_[u], need = n - res_[u];
    if (!make_room(need, u)) { ++s_.remote_gpu; return; }
    for (uint32_t k = 0; k < n; ++k)
      if (where_[f + k] != ON_GPU) bring(f + k, u, s_.h2d_fault);
    ++s_.migrations;
    touch(u);
    ref_[u] = 1;
  }

  // ----- ATS with access counters
  void ats_access(uint32_t pg, uint32_t u) {
    if (where_[pg] == UNTOUCHED && used_ < p_.capacity_pages) {  // GPU first touch places the page on the GPU
      ++s_.populate_gpu;
      to_gpu(pg, u);
      if (!inlist_[u]) touch(u);
      return;
    }
    if (where_[pg] == UNTOUCHED) where_[pg] = ON_CPU;
    ++s_.remote_gpu;
    if (++counter_[u] < p_.counter_threshold) return;
    counter_[u] = 0;
    uint32_t f = ufirst_[u], n = un_[u];
    // Counter-triggered migration only into free GPU memory: system memory is not evicted to make room
    // (Schieffer et al. 2024 Sec. 7: "With system memory, no eviction is happening").
    if (used_ + (n - res_[u]) > p_.capacity_pages) { ++s_.counter_refused; return; }
    for (uint32_t k = 0; k < n; ++k)
      if (where_[f + k] == ON_CPU) bring(f + k, u, s_.h2d_counter);
    ++s_.migrations;
    ++s_.counter_migrations;
    touch(u);
    ref_[u] = 1;
  }

  void cpu_access(uint32_t pg, int mode) {
    uint8_t w = where_[pg];
    if (w == UNTOUCHED) { where_[pg] = ON_CPU; return; }
    if (w != ON_GPU) return;
    uint32_t u = unit_[pg];
    if (mode == 2 || mode == 3) { ++s_.remote_cpu; return; }  // coherent link: the CPU reads GPU memory
    ++s_.cpu_faults;
    if (mode == 1) {  // SVM migrates the range back
      uint32_t f = ufirst_[u], n = un_[u];
      for (uint32_t k = 0; k < n; ++k)
        if (where_[f + k] == ON_GPU) { where_[f + k] = ON_CPU; --used_; ++s_.d2h_cpu_fault; }
      res_[u] = 0;
      unlink(u);
      return;
    }
    where_[pg] = ON_CPU;  // UVM: the faulted page back to the CPU
    --used_;
    ++s_.d2h_cpu_fault;
    tree_set(u, pg - ufirst_[u], -1);
    if (--res_[u] == 0) unlink(u);
  }

  std::vector<uint32_t> want_, gran_, kernel_, arrived_;
  std::vector<std::pair<uint32_t, uint32_t>> regs_;  // service_block: the prefetch regions of one batch and VA block
  std::vector<uint8_t> rmt_;  // --timed: pages the GPU reads remotely (the service could not bring them)
  FILE* log_ = nullptr;       // --entry-log
  double t_off_ = 0;          // --entry-log: the current launch's start in the log's time (ns)
  std::vector<uint8_t> mark_;
};

Simulator::Simulator(const Trace& t, const Params& p) : sim_(new Sim(t, p)) {}
Simulator::~Simulator() = default;
void Simulator::feed(const uint32_t* ev, size_t n) { sim_->feed(ev, n); }
uint64_t Simulator::events() const { return sim_->events(); }
Stats Simulator::finish() { return sim_->finish(); }

}  // namespace umsim
