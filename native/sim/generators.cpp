// umsim's generators: each application's page-access stream (see umsim.hpp), generated in chunks.
#include "umsim.hpp"

namespace umsim {
namespace {

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

// Each generator by the name --app takes; an application's registered model facts name its own
// (native/apps/NAME.cu), and the help lists these. mvt and gesummv keep 8192 rows in flight unless --concurrency.
struct Generator {
  const char* name;
  void (*fn)(Gen& g, uint64_t foot, int iters, bool reverse, uint64_t conc);
};
const Generator kGenerators[] = {
    {"read", [](Gen& g, uint64_t f, int it, bool, uint64_t) { gen_read(g, f, it); }},
    {"triad", [](Gen& g, uint64_t f, int it, bool, uint64_t) { gen_triad(g, f, it); }},
    {"conv2d", [](Gen& g, uint64_t f, int it, bool, uint64_t) { gen_conv2d(g, f, it); }},
    {"jacobi2d", [](Gen& g, uint64_t f, int it, bool rev, uint64_t) { gen_jacobi2d(g, f, it, rev); }},
    {"mvt", [](Gen& g, uint64_t f, int it, bool, uint64_t c) { gen_mvt(g, f, it, c ? c : 8192); }},
    {"gesummv", [](Gen& g, uint64_t f, int it, bool, uint64_t c) { gen_gesummv(g, f, it, c ? c : 8192); }},
    {"sgemm", [](Gen& g, uint64_t f, int it, bool, uint64_t c) { gen_sgemm(g, f, it, c); }},
    {"gemm", [](Gen& g, uint64_t f, int it, bool, uint64_t c) { gen_gemm(g, f, it, c); }},
    {"syr2k", [](Gen& g, uint64_t f, int it, bool, uint64_t c) { gen_syr2k(g, f, it, c); }},
    {"bfs", [](Gen& g, uint64_t f, int it, bool, uint64_t) { gen_bfs(g, f, it); }},
    {"hotspot", [](Gen& g, uint64_t f, int it, bool, uint64_t) { gen_hotspot(g, f, it); }},
    {"srad", [](Gen& g, uint64_t f, int it, bool, uint64_t) { gen_srad(g, f, it); }},
    {"pathfinder", [](Gen& g, uint64_t f, int it, bool, uint64_t) { gen_pathfinder(g, f, it); }},
    {"needle", [](Gen& g, uint64_t f, int it, bool, uint64_t) { gen_needle(g, f, it); }},
    {"himeno", [](Gen& g, uint64_t f, int it, bool, uint64_t) { gen_himeno(g, f, it); }},
};

}  // namespace

std::string generator_names() {
  std::string out;
  for (const Generator& e : kGenerators) out += (out.empty() ? "" : " ") + std::string(e.name);
  return out;
}

// An application's stream (gen_*) into the replay.
void generate(const std::string& app, Trace& t, uint32_t align, const Feed& out, uint64_t foot, int iters,
              bool reverse, uint64_t conc) {
  for (const Generator& e : kGenerators) {
    if (app != e.name) continue;
    Gen g(t, align, out);
    e.fn(g, foot, iters, reverse, conc);
    g.drain();
    return;
  }
  die("unknown --app '" + app + "'");
}

}  // namespace umsim
