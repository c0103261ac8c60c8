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

namespace {

constexpr uint32_t BARRIER = 0xFFFFFFFFu;
constexpr uint32_t WRITE = 1u << 31;
constexpr uint32_t CPU = 1u << 30;
constexpr uint32_t PAGE_MASK = CPU - 1;

[[noreturn]] void die(const std::string& msg) {
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

// ---------------------------------------------------------------- generators
// Sizes are in pages of 4-byte elements; arrays start on --align page
// boundaries (a VA block) as cudaMallocManaged's do.
// Every allocation comes before the first event (the replay sizes its page state from them).
struct Gen {
  Trace& t;
  uint32_t align;
  uint64_t epp;  // elements per page
  const Feed& out;
  std::vector<uint32_t> buf;
  size_t n_ = 0;
  bool started = false;
  Gen(Trace& tr, uint32_t al, const Feed& o) : t(tr), align(al), epp(tr.page_bytes / 4), out(o), buf(CHUNK) {}
  uint32_t alloc(uint64_t elems) {
    if (started) die("internal: a generator allocated after its first event");
    uint32_t n = uint32_t((elems + epp - 1) / epp);
    if (n == 0) n = 1;
    uint32_t first = t.pages();
    first = (first + align - 1) / align * align;
    t.allocs.push_back({first, n});
    return first;
  }
  void push(uint32_t e) {
    buf[n_++] = e;
    if (n_ == CHUNK) drain();
  }
  void drain() {  // hands the events so far to the replay (also at the end of the stream)
    started = true;
    if (n_) out(buf.data(), n_);
    n_ = 0;
  }
  void r(uint32_t p) { push(p); }
  void w(uint32_t p) { push(p | WRITE); }
  void bar() { push(BARRIER); }
};

// One array read page after page (the migration benchmark's GPU read).
void gen_read(Gen& g, uint64_t foot, int iters) {
  uint32_t a = g.alloc(foot / 4), np = g.t.allocs.back().n;
  for (int it = 0; it < iters; ++it) {
    for (uint32_t p = 0; p < np; ++p) g.r(a + p);
    g.bar();
  }
}

// Each array's pages in order, all arrays advancing together (STREAM triad a = b + s c).
void gen_triad(Gen& g, uint64_t foot, int iters) {
  uint64_t n = foot / 12;
  uint32_t a = g.alloc(n), b = g.alloc(n), c = g.alloc(n), np = g.t.allocs.back().n;
  for (int it = 0; it < iters; ++it) {
    for (uint32_t p = 0; p < np; ++p) { g.r(b + p); g.r(c + p); g.w(a + p); }
    g.bar();
  }
}

// Row-major square images; a stencil kernel reads rows i-1, i, i+1 of src and writes row i of dst.
void stencil_pass(Gen& g, uint32_t src, uint32_t dst, uint64_t side, bool reverse) {
  // Rows of whole pages (a row of `side` elements rounded up to pages; rows shorter than a page: one
  // page-row holds several rows).
  const uint64_t np = g.t.allocs.back().n;
  const uint64_t rowp = std::max<uint64_t>(1, (side + g.epp - 1) / g.epp);
  const uint64_t rows = (np + rowp - 1) / rowp;
  for (uint64_t k = 0; k < rows; ++k) {
    uint64_t i = reverse ? rows - 1 - k : k;
    for (uint64_t j = 0; j < rowp; ++j) {
      uint64_t p = i * rowp + j;
      if (p >= np) break;
      if (i > 0) g.r(uint32_t(src + p - rowp));
      g.r(uint32_t(src + p));
      if (p + rowp < np) g.r(uint32_t(src + p + rowp));
      g.w(uint32_t(dst + p));
    }
  }
  g.bar();
}

uint64_t square_side(uint64_t elems) {
  uint64_t s = 1;
  while ((s + 1) * (s + 1) <= elems) ++s;
  return s;
}

void gen_conv2d(Gen& g, uint64_t foot, int iters) {
  uint64_t side = square_side(foot / 8);
  uint32_t in = g.alloc(side * side), out = g.alloc(side * side);
  for (int it = 0; it < iters; ++it) stencil_pass(g, in, out, side, false);
}

// Jacobi2d: B <- stencil(A); A <- stencil(B); --reverse runs the second kernel from the last row
// (the SVM-aware order of Cooper et al. Alg. 2).
void gen_jacobi2d(Gen& g, uint64_t foot, int iters, bool reverse) {
  uint64_t side = square_side(foot / 8);
  uint32_t a = g.alloc(side * side), b = g.alloc(side * side);
  for (int it = 0; it < iters; ++it) {
    stencil_pass(g, a, b, side, false);
    stencil_pass(g, b, a, side, reverse);
  }
}

// A warp per row, all rows in flight together (up to `conc` rows): at each step every row advances
// by one page, so consecutive accesses are spread over the whole matrix.
void rows_dispersed(Gen& g, const std::vector<uint32_t>& mats, uint64_t n, uint64_t conc) {
  const uint64_t matp = (n * n + g.epp - 1) / g.epp;
  uint64_t rowp = std::max<uint64_t>(1, (n + g.epp - 1) / g.epp);
  for (uint64_t r0 = 0; r0 < n; r0 += conc) {
    uint64_t r1 = std::min(n, r0 + conc);
    for (uint64_t j = 0; j < rowp; ++j)
      for (uint64_t i = r0; i < r1; ++i) {
        uint64_t p = (i * n) / g.epp + j;  // the page holding A[i][j*epp]
        for (uint32_t m : mats) g.r(uint32_t(m + std::min<uint64_t>(p, matp - 1)));
      }
  }
}

void gen_mvt(Gen& g, uint64_t foot, int iters, uint64_t conc) {
  uint64_t n = square_side(foot / 4);
  uint32_t A = g.alloc(n * n), y1 = g.alloc(n), y2 = g.alloc(n), x1 = g.alloc(n), x2 = g.alloc(n);
  uint32_t vp = g.t.allocs.back().n, ap = g.t.allocs[0].n;
  for (int it = 0; it < iters; ++it) {
    for (uint32_t p = 0; p < vp; ++p) g.r(y1 + p);
    rows_dispersed(g, {A}, n, conc);
    for (uint32_t p = 0; p < vp; ++p) g.w(x1 + p);
    g.bar();
    for (uint32_t p = 0; p < ap; ++p) { g.r(A + p); if (p % 64 == 0) g.r(y2 + std::min(p / 64, vp - 1)); }
    for (uint32_t p = 0; p < vp; ++p) g.w(x2 + p);
    g.bar();
  }
}

void gen_gesummv(Gen& g, uint64_t foot, int iters, uint64_t conc) {
  uint64_t n = square_side(foot / 8);
  uint32_t A = g.alloc(n * n), B = g.alloc(n * n), x = g.alloc(n), y = g.alloc(n);
  uint32_t vp = g.t.allocs.back().n;
  for (int it = 0; it < iters; ++it) {
    for (uint32_t p = 0; p < vp; ++p) g.r(x + p);
    rows_dispersed(g, {A, B}, n, conc);
    for (uint32_t p = 0; p < vp; ++p) g.w(y + p);
    g.bar();
  }
}

// C = A B, n x n, row-major; TM x TN output tiles run in waves of `conc` tiles (row-major tile order);
// within a wave each k-slab of one page width reads the A pages of the wave's tile rows and the B rows of the
// slab over the wave's tile columns; C tiles written at the end of the wave.
void gemm_waves(Gen& g, uint64_t n, int iters, uint64_t conc, uint64_t TM, uint64_t TN) {
  uint32_t A = g.alloc(n * n), B = g.alloc(n * n), C = g.alloc(n * n);
  const uint64_t rtiles = (n + TM - 1) / TM, tiles = (n + TN - 1) / TN, total = rtiles * tiles;
  const uint64_t kstep = std::min<uint64_t>(g.epp, n);
  auto page = [&](uint32_t base, uint64_t i, uint64_t j) { return uint32_t(base + (i * n + j) / g.epp); };
  for (int it = 0; it < iters; ++it) {
    for (uint64_t w0 = 0; w0 < total; w0 += conc) {
      uint64_t w1 = std::min(total, w0 + conc);
      uint64_t tr0 = w0 / tiles, tr1 = (w1 - 1) / tiles;
      uint64_t tc0 = (tr0 == tr1) ? w0 % tiles : 0, tc1 = (tr0 == tr1) ? (w1 - 1) % tiles : tiles - 1;
      for (uint64_t k = 0; k < n; k += kstep) {
        uint32_t last = BARRIER;
        for (uint64_t i = tr0 * TM; i < std::min(n, (tr1 + 1) * TM); ++i) {
          for (uint64_t kk = k; kk < std::min(n, k + kstep); kk += g.epp) {
            uint32_t p = page(A, i, kk);
            if (p != last) g.r(p), last = p;
          }
        }
        for (uint64_t kk = k; kk < std::min(n, k + kstep); ++kk) {
          uint64_t j0 = tc0 * TN, j1 = std::min(n, (tc1 + 1) * TN);
          uint32_t p = page(B, kk, j0);  // page(B, kk, j0 + m epp) is p + m
          for (uint64_t j = j0; j < j1; j += g.epp, ++p)
            if (p != last) g.r(p), last = p;
          p = page(B, kk, j1 - 1);
          if (p != last) g.r(p), last = p;
        }
      }
      uint32_t last = BARRIER;
      for (uint64_t i = tr0 * TM; i < std::min(n, (tr1 + 1) * TM); ++i)
        for (uint64_t j = tc0 * TN; j < std::min(n, (tc1 + 1) * TN); j += g.epp) {
          uint32_t p = page(C, i, j);
          if (p != last) g.w(p), last = p;
        }
    }
    g.bar();
  }
}

// Cooper et al.'s SGEMM: 128 x 128 tiles, 264 in flight (two per SM of an H100) unless --concurrency.
void gen_sgemm(Gen& g, uint64_t foot, int iters, uint64_t conc) {
  gemm_waves(g, square_side(foot / 12), iters, conc ? conc : 264, 128, 128);
}

// The suite's gemm (native/apps/gemm.cu, fp32): cuBLAS's kernel on the H100 computes C in tiles of 128 rows x 256
// columns (its name and the GPU's counters, bench/model_linkbytes.py), one block per SM: 132 tiles in flight
// unless --concurrency. The order of cuBLAS's tiles is not published: row-major, as sgemm's.
void gen_gemm(Gen& g, uint64_t foot, int iters, uint64_t conc) {
  gemm_waves(g, square_side(foot / 12), iters, conc ? conc : 132, 128, 256);
}

// The suite's syr2k (native/apps/syr2k.cu): C (n x n) = alpha (A B^T + B A^T) + beta C, A and B n x n. A block
// computes a 64 x 64 tile of C from four panels: the rows of A and B of its tile row and of its tile column, all
// of k. Tiles run in waves of `conc` (default 1056: eight 256-thread blocks on each of 132 SMs) in row-major
// order; per wave and k-slab of one page, the A and B pages of the wave's rows (tile rows, then tile columns,
// as rows of A and B); then the wave's C tiles read and written.
void gen_syr2k(Gen& g, uint64_t foot, int iters, uint64_t conc) {
  const uint64_t n = square_side(foot / 12), T = 64;
  uint32_t A = g.alloc(n * n), B = g.alloc(n * n), C = g.alloc(n * n);
  const uint64_t tiles = (n + T - 1) / T, total = tiles * tiles, kstep = std::min<uint64_t>(g.epp, n);
  conc = conc ? conc : 1056;
  auto page = [&](uint32_t base, uint64_t i, uint64_t j) { return uint32_t(base + (i * n + j) / g.epp); };
  for (int it = 0; it < iters; ++it) {
    for (uint64_t w0 = 0; w0 < total; w0 += conc) {
      const uint64_t w1 = std::min(total, w0 + conc), tr0 = w0 / tiles, tr1 = (w1 - 1) / tiles;
      const uint64_t tc0 = (tr0 == tr1) ? w0 % tiles : 0, tc1 = (tr0 == tr1) ? (w1 - 1) % tiles : tiles - 1;
      const uint64_t rows[2][2] = {{tr0 * T, std::min(n, (tr1 + 1) * T)}, {tc0 * T, std::min(n, (tc1 + 1) * T)}};
      for (uint64_t k = 0; k < n; k += kstep)
        for (const auto& rr : rows)
          for (uint32_t M : {A, B}) {
            uint32_t last = BARRIER;
            for (uint64_t i = rr[0]; i < rr[1]; ++i) {
              uint32_t p = page(M, i, k);
              if (p != last) g.r(p), last = p;
            }
          }
      uint32_t last = BARRIER;
      for (uint64_t i = rows[0][0]; i < rows[0][1]; ++i)
        for (uint64_t j = rows[1][0]; j <= rows[1][1]; j += g.epp) {
          uint32_t p = page(C, i, std::min(j, rows[1][1] - 1));  // the row's last page too
          if (p != last) { g.r(p); g.w(p); last = p; }
        }
    }
    g.bar();
  }
}

// BFS (Rodinia): per level, a scan of the node mask, then the frontier's edge lists and their
// neighbours' cost/visited entries at pseudo-random pages (xorshift, fixed seed).
void gen_bfs(Gen& g, uint64_t foot, int levels) {
  uint64_t nodes = foot / 40;  // nodes: start+degree 8 B, mask/updating/visited 3 B, cost 4 B; edges 6/node x 4 B
  uint32_t N = g.alloc(nodes * 2), E = g.alloc(nodes * 6), M = g.alloc(nodes), C = g.alloc(nodes);
  uint32_t np = g.t.allocs[0].n, ep = g.t.allocs[1].n, mp = g.t.allocs[2].n, cp = g.t.allocs[3].n;
  uint64_t s = 88172645463325252ull;
  auto rnd = [&]() { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; };
  for (int l = 0; l < levels; ++l) {
    for (uint32_t p = 0; p < mp; ++p) g.r(M + p);
    uint64_t frontier = np / 4 + 1;  // pages of the frontier this level
    for (uint64_t f = 0; f < frontier; ++f) {
      uint64_t p = rnd() % np;
      g.r(uint32_t(N + p));
      g.r(uint32_t(E + (p * ep) / np));
      for (int k = 0; k < 4; ++k) {
        uint64_t q = rnd() % cp;
        g.r(uint32_t(C + q));
        g.w(uint32_t(M + (q * mp) / cp));
      }
    }
    g.bar();
  }
}

// Hotspot: temp (read, stencil), power (read), out (write); ping-pong between temp and out.
void gen_hotspot(Gen& g, uint64_t foot, int iters) {
  uint64_t side = square_side(foot / 12);
  uint32_t t0 = g.alloc(side * side), pw = g.alloc(side * side), t1 = g.alloc(side * side);
  uint32_t np = g.t.allocs.back().n;
  for (int it = 0; it < iters; ++it) {
    uint32_t src = it % 2 ? t1 : t0, dst = it % 2 ? t0 : t1;
    for (uint32_t p = 0; p < np; ++p) { g.r(src + p); g.r(pw + p); g.w(dst + p); }
    g.bar();
  }
}

// SRAD: image J and coefficient c, four derivative arrays; kernel 1 reads J writes dN..dE and c,
// kernel 2 reads them and updates J; each iteration.
void gen_srad(Gen& g, uint64_t foot, int iters) {
  uint64_t elems = foot / 24;
  std::vector<uint32_t> a(6);
  for (auto& x : a) x = g.alloc(elems);
  uint32_t np = g.t.allocs.back().n;
  for (int it = 0; it < iters; ++it) {
    for (uint32_t p = 0; p < np; ++p) { g.r(a[0] + p); for (int k = 1; k < 6; ++k) g.w(a[k] + p); }
    g.bar();
    for (uint32_t p = 0; p < np; ++p) { for (int k = 1; k < 6; ++k) g.r(a[k] + p); g.w(a[0] + p); }
    g.bar();
  }
}

// Pathfinder: the wall read once, row after row, two small result rows reused.
void gen_pathfinder(Gen& g, uint64_t foot, int) {
  uint64_t cols = 1u << 20;
  uint64_t rows = std::max<uint64_t>(2, foot / 4 / cols);
  uint32_t W = g.alloc(rows * cols), r0 = g.alloc(cols), r1 = g.alloc(cols);
  uint64_t rowp = std::max<uint64_t>(1, cols / g.epp), vp = g.t.allocs.back().n;
  for (uint64_t i = 0; i < rows; ++i) {
    uint32_t src = i % 2 ? r1 : r0, dst = i % 2 ? r0 : r1;
    for (uint64_t j = 0; j < rowp; ++j) { g.r(uint32_t(W + i * rowp + j)); g.r(uint32_t(src + j % vp)); g.w(uint32_t(dst + j % vp)); }
  }
  g.bar();
}

// Himeno (native/apps/himeno.cu): 14 arrays of I x J x K floats ([i][j][k], k contiguous; I = J = i + 1,
// K = 2 i + 1 for the footprint, as the application sizes its grid). Per iteration, the Jacobi kernel walks the
// interior lines (i, j) in order: a line reads p on the nine lines i-1..i+1, j-1..j+1, which at page granularity
// are the pages one plane (J K elements) before, at and after the line's page, reads the 12 coefficient arrays
// there and writes wrk2; then the copy back reads wrk2 and writes p.
void gen_himeno(Gen& g, uint64_t foot, int iters) {
  uint64_t i = 1;  // himeno.cu: i = floor(cbrt(footprint / 56 / 2))
  while ((i + 1) * (i + 1) * (i + 1) <= foot / 112) ++i;
  const uint64_t I = i + 1, J = i + 1, K = 2 * i + 1, n = I * J * K, plane = J * K;
  const uint32_t p = g.alloc(n);
  uint32_t coef[12];
  for (uint32_t& a : coef) a = g.alloc(n);
  const uint32_t wrk2 = g.alloc(n);
  const uint64_t q0 = plane / g.epp, q1 = ((I - 1) * plane - 1) / g.epp;  // pages of the interior planes
  for (int it = 0; it < iters; ++it) {
    for (uint64_t q = q0; q <= q1; ++q) {
      const uint64_t e = q * g.epp;
      g.r(uint32_t(p + (e - std::min(e, plane)) / g.epp));
      g.r(uint32_t(p + q));
      g.r(uint32_t(p + std::min(n - 1, e + plane) / g.epp));
      for (uint32_t a : coef) g.r(uint32_t(a + q));
      g.w(uint32_t(wrk2 + q));
    }
    g.bar();
    for (uint64_t q = q0; q <= q1; ++q) { g.r(uint32_t(wrk2 + q)); g.w(uint32_t(p + q)); }
    g.bar();
  }
}

// Needle (Needleman-Wunsch): 16x16 blocks along anti-diagonals over score and reference matrices.
void gen_needle(Gen& g, uint64_t foot, int) {
  uint64_t side = square_side(foot / 8);
  uint32_t S = g.alloc(side * side), R = g.alloc(side * side);
  const uint64_t B = 16, nb = (side + B - 1) / B;
  for (uint64_t d = 0; d < 2 * nb - 1; ++d) {
    uint32_t last = BARRIER;
    for (uint64_t bi = (d < nb ? 0 : d - nb + 1); bi <= std::min(d, nb - 1); ++bi) {
      uint64_t bj = d - bi;
      for (uint64_t i = bi * B; i < std::min(side, bi * B + B); ++i) {
        uint32_t p = uint32_t((i * side + bj * B) / g.epp);
        if (p != last) { g.r(R + p); g.w(S + p); last = p; }
      }
    }
    if (d % 64 == 63) g.bar();
  }
  g.bar();
}

// --------------------------------------------------------------- simulator
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
  // --block-order shuffled: an SM's resident blocks run side by side, so the first of them to miss in a grid
  // step is any of them, not the lowest-numbered (measured: the driver's fault events of um-truth with 8 blocks
  // per SM fault pages spread over the whole grid step in each batch, not the pages of its first blocks)
  bool shuffle_blocks = false;
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
    // --block-order shuffled (see Params): the SM takes its blocks in a fixed pseudo-random order per step.
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
      if (p_.shuffle_blocks && B > S) {  // each SM's blocks (b = sm mod S) among themselves
        const uint32_t per_sm = (B + S - 1) / S;
        for (uint32_t sm = 0; sm < S; ++sm) {
          std::vector<uint32_t> mine;
          for (uint32_t i = 0; i < per_sm; ++i) if (sm + i * S < B) mine.push_back(sm + i * S);
          uint64_t h = (j + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t(sm) + 1) * 0xC2B2AE3D27D4EB4Full;
          for (size_t i = mine.size(); i > 1; --i) {
            h ^= h >> 31; h *= 0xD6E8FEB86659FD93ull; h ^= h >> 32;
            std::swap(mine[i - 1], mine[h % i]);
          }
          for (uint32_t i = 0; i < mine.size(); ++i) border[sm + i * S] = mine[i];
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
    struct Tlb { size_t pos = 0; double t = 0; uint32_t out[8] = {}; uint32_t nout = 0; bool blocked = false; uint32_t cap = 1;
                 size_t scan = 0; uint64_t scan_ev = 0; };
    struct Entry { double t; uint32_t pg, u; bool q = false; };
    auto by_time = [](const Entry& a, const Entry& b) { return a.t < b.t; };
    std::vector<Tlb> U(S);
    std::vector<Entry> buf, keep;
    std::vector<uint8_t> seen(K.size(), 0);
    if (rmt_.size() != npages_) rmt_.assign(npages_, 0);
    const double rfetch = p_.replay_fetch_us * 1e3;
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
        if (x.nout < x.cap) {
          for (uint32_t c = instances(i); c > 0; --c) buf.push_back({x.t, pg, i});
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
        return x.nout < x.cap ? t : INF;
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
          return a.t < b.t || (a.t == b.t && rank[a.u] < rank[b.u]);
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
          for (uint32_t c = instances(i); c > 0; --c) buf.push_back({tr, pg, i});
          ++s_.refaults;
        }
        x.nout = w;
        if (had && x.nout == 0) x.cap = next_cap(i);  // released: its next stall's pages
        // A released uTLB resumes once its retried accesses complete: with replay_fetch_us, after the burst of
        // re-faults (the still-missing accesses) the next fetch takes; its new misses come later.
        if (x.blocked && x.nout < x.cap) { x.blocked = false; x.t = std::max(x.t, tr + (had && !x.nout ? rfetch : 0)); }
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
      for (uint32_t q : want) tree_set(u, q, +1);
      for (uint32_t off : gran) {
        uint32_t blo = 0, bsize = 0;
        for (uint32_t size = 1; size <= leaves_; size *= 2) {
          if (size <= g) continue;
          uint32_t lo = off / size * size;
          if (uint64_t(occupied(u, lo, size)) * 100 > uint64_t(p_.prefetch_threshold) * size) blo = lo, bsize = size;
        }
        if (!bsize || blo >= n || occupied(u, blo, bsize) >= std::min(bsize, n - blo)) continue;
        for (uint32_t q = blo; q < std::min(n, blo + bsize); ++q)
          if (where_[f + q] != ON_GPU && !mark_[q]) {
            mark_[q] = 1;
            want.push_back(q);
            tree_set(u, q, +1);
          }
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
  std::vector<uint8_t> rmt_;  // --timed: pages the GPU reads remotely (the service could not bring them)
  FILE* log_ = nullptr;       // --entry-log
  double t_off_ = 0;          // --entry-log: the current launch's start in the log's time (ns)
  std::vector<uint8_t> mark_;
};

// ---------------------------------------------------------------- options
uint64_t parse_bytes(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !(v >= 0) || v > 9.0e18) die("bad size '" + s + "'");
  std::string u(end);
  for (auto& c : u) c = char(std::toupper(c));
  double m = 1;
  if (u == "" || u == "B") m = 1;
  else if (u == "K" || u == "KIB") m = 1024.0;
  else if (u == "M" || u == "MIB") m = 1024.0 * 1024;
  else if (u == "G" || u == "GIB") m = 1024.0 * 1024 * 1024;
  else die("bad size unit in '" + s + "'");
  if (v * m > 9.0e18) die("size '" + s + "' is out of range (at most 9e18 bytes)");
  return uint64_t(v * m + 0.5);
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

// An application's stream (gen_*) into the replay.
void generate(const std::string& app, Trace& t, uint32_t align, const Feed& out, uint64_t foot, int iters,
              bool reverse, uint64_t conc) {
  Gen g(t, align, out);
  const uint64_t c = conc ? conc : 8192;
  if (app == "read") gen_read(g, foot, iters);
  else if (app == "triad") gen_triad(g, foot, iters);
  else if (app == "conv2d") gen_conv2d(g, foot, iters);
  else if (app == "jacobi2d") gen_jacobi2d(g, foot, iters, reverse);
  else if (app == "mvt") gen_mvt(g, foot, iters, c);
  else if (app == "gesummv") gen_gesummv(g, foot, iters, c);
  else if (app == "sgemm") gen_sgemm(g, foot, iters, conc);
  else if (app == "gemm") gen_gemm(g, foot, iters, conc);
  else if (app == "syr2k") gen_syr2k(g, foot, iters, conc);
  else if (app == "himeno") gen_himeno(g, foot, iters);
  else if (app == "bfs") gen_bfs(g, foot, iters);
  else if (app == "hotspot") gen_hotspot(g, foot, iters);
  else if (app == "srad") gen_srad(g, foot, iters);
  else if (app == "pathfinder") gen_pathfinder(g, foot, iters);
  else if (app == "needle") gen_needle(g, foot, iters);
  else die("unknown --app '" + app + "'");
  g.drain();
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
      "              [--replay-fetch-us US] [--interleave on|off] [--write-ns NS] [--block-order ordered|shuffled]\n"
      "              [--page-order pages|chunks] [--release replay|blocks]]\n"
      "             [--thrash-threshold N] [--thrash-lapse EVENTS] [--thrash-action remote|none]\n"
      "             [--counter-threshold N] [--concurrency N] [--init cpu|none] [--repeat N] [--progress SECONDS]\n"
      "apps: read triad conv2d jacobi2d mvt gesummv sgemm gemm syr2k bfs hotspot srad pathfinder needle himeno\n",
      stderr);
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
    else if (a == "--footprint") foot = parse_bytes(val());
    else if (a == "--capacity") cap = parse_bytes(val());
    else if (a == "--page") page = parse_bytes(val());
    else if (a == "--unit") unit = parse_bytes(val());
    else if (a == "--granule") granule = parse_bytes(val());
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
    else if (a == "--block-bytes") p.block_bytes = parse_bytes(val());
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
    else if (a == "--write-ns") p.write_ns = real(val());
    else if (a == "--page-order") { std::string v = val(); if (v != "pages" && v != "chunks") die("--page-order pages|chunks"); p.chunk_first = v == "chunks"; }
    else if (a == "--block-order") { std::string v = val(); if (v != "ordered" && v != "shuffled") die("--block-order ordered|shuffled"); p.shuffle_blocks = v == "shuffled"; }
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
      std::unique_ptr<Sim> sim;
      double dt = 0;
      const std::string bad = trace.empty() ? "internal: generator '" + app + "' left its allocations"
                                            : "event page outside every allocation";
      uint32_t np = 0;
      const auto start = std::chrono::steady_clock::now();
      double said = 0;
      Feed feed = [&](const uint32_t* e, size_t n) {
        if (!sim) {
          np = tr.pages();
          sim.reset(new Sim(tr, p));
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
      if (!sim) sim.reset(new Sim(tr, p));
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

// Whatever escapes the checks above (memory the replay could not get, a library's exception) is one line and
// exit 2, never std::terminate's abort.
int main(int argc, char** argv) {
  try {
    return run_main(argc, argv);
  } catch (const std::bad_alloc&) {
    die("out of memory for the simulator's state (a smaller footprint, or a larger --page, fits)");
  } catch (const std::exception& e) {
    die(std::string("failed: ") + e.what());
  }
}
