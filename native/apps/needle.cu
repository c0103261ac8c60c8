// Needleman-Wunsch global alignment (Rodinia needle; Schieffer et al.
// section 3.1): two random protein sequences of length n scored with
// BLOSUM62 and a linear gap penalty. score[i][j] = max(score[i-1][j-1] +
// ref[i][j], score[i][j-1] - gap, score[i-1][j] - gap), with the first row
// and column holding the gap penalties. The GPU walks the matrix in 16 x 16
// tiles along anti-diagonals (one launch per diagonal of tiles); inside a
// tile, 16 threads sweep the anti-diagonals in shared memory. The CPU fills
// ref[i][j] = BLOSUM62[a[i]][b[j]] when it initialises, as Rodinia does.
#include "umscope/app.hpp"

namespace umscope {
namespace {

constexpr int TS = 16;

// BLOSUM62 (Henikoff & Henikoff 1992), order A R N D C Q E G H I L K M F P S T W Y V B Z X *.
const int kBlosum62[24][24] = {
    {4, -1, -2, -2, 0, -1, -1, 0, -2, -1, -1, -1, -1, -2, -1, 1, 0, -3, -2, 0, -2, -1, 0, -4},
    {-1, 5, 0, -2, -3, 1, 0, -2, 0, -3, -2, 2, -1, -3, -2, -1, -1, -3, -2, -3, -1, 0, -1, -4},
    {-2, 0, 6, 1, -3, 0, 0, 0, 1, -3, -3, 0, -2, -3, -2, 1, 0, -4, -2, -3, 3, 0, -1, -4},
    {-2, -2, 1, 6, -3, 0, 2, -1, -1, -3, -4, -1, -3, -3, -1, 0, -1, -4, -3, -3, 4, 1, -1, -4},
    {0, -3, -3, -3, 9, -3, -4, -3, -3, -1, -1, -3, -1, -2, -3, -1, -1, -2, -2, -1, -3, -3, -2, -4},
    {-1, 1, 0, 0, -3, 5, 2, -2, 0, -3, -2, 1, 0, -3, -1, 0, -1, -2, -1, -2, 0, 3, -1, -4},
    {-1, 0, 0, 2, -4, 2, 5, -2, 0, -3, -3, 1, -2, -3, -1, 0, -1, -3, -2, -2, 1, 4, -1, -4},
    {0, -2, 0, -1, -3, -2, -2, 6, -2, -4, -4, -2, -3, -3, -2, 0, -2, -2, -3, -3, -1, -2, -1, -4},
    {-2, 0, 1, -1, -3, 0, 0, -2, 8, -3, -3, -1, -2, -1, -2, -1, -2, -2, 2, -3, 0, 0, -1, -4},
    {-1, -3, -3, -3, -1, -3, -3, -4, -3, 4, 2, -3, 1, 0, -3, -2, -1, -3, -1, 3, -3, -3, -1, -4},
    {-1, -2, -3, -4, -1, -2, -3, -4, -3, 2, 4, -2, 2, 0, -3, -2, -1, -2, -1, 1, -4, -3, -1, -4},
    {-1, 2, 0, -1, -3, 1, 1, -2, -1, -3, -2, 5, -1, -3, -1, 0, -1, -3, -2, -2, 0, 1, -1, -4},
    {-1, -1, -2, -3, -1, 0, -2, -3, -2, 1, 2, -1, 5, 0, -2, -1, -1, -1, -1, 1, -3, -1, -1, -4},
    {-2, -3, -3, -3, -2, -3, -3, -3, -1, 0, 0, -3, 0, 6, -4, -2, -2, 1, 3, -1, -3, -3, -1, -4},
    {-1, -2, -2, -1, -3, -1, -1, -2, -2, -3, -3, -1, -2, -4, 7, -1, -1, -4, -3, -2, -2, -1, -2, -4},
    {1, -1, 1, 0, -1, 0, 0, 0, -1, -2, -2, 0, -1, -2, -1, 4, 1, -3, -2, -2, 0, 0, 0, -4},
    {0, -1, 0, -1, -1, -1, -1, -2, -2, -1, -1, -1, -1, -2, -1, 1, 5, -2, -2, 0, -1, -1, 0, -4},
    {-3, -3, -4, -4, -2, -2, -3, -2, -2, -3, -2, -3, -1, 1, -4, -3, -2, 11, 2, -3, -4, -3, -2, -4},
    {-2, -2, -2, -3, -2, -1, -2, -3, 2, -1, -1, -2, -1, 3, -3, -2, -2, 2, 7, -1, -3, -2, -1, -4},
    {0, -3, -3, -3, -1, -2, -2, -3, -3, 3, 1, -2, 1, -1, -2, -2, 0, -3, -1, 4, -3, -2, -1, -4},
    {-2, -1, 3, 4, -3, 0, 1, -1, 0, -3, -4, 0, -3, -3, -2, 0, -1, -4, -3, -3, 4, 1, -1, -4},
    {-1, 0, 0, 1, -3, 3, 4, -2, 0, -3, -3, 1, -1, -3, -1, 0, -1, -3, -2, -2, 1, 4, -1, -4},
    {0, -1, -1, -1, -2, -1, -1, -1, -1, -1, -1, -1, -1, -1, -2, 0, 0, -2, -1, -1, -1, -1, -1, -4},
    {-4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, 1},
};

__device__ __host__ inline int best(int diag, int left, int up, int gap) {
  int m = diag > left - gap ? diag : left - gap;
  return m > up - gap ? m : up - gap;
}

// The reference's score of a cell, a second implementation on purpose (not best(), which the kernel and the CPU
// path share): the best of the diagonal's score plus the residues' similarity and a gap after the left or the
// upper cell.
int ref_score(int diag, int left, int up, int similarity, int gap) {
  return std::max({diag + similarity, left - gap, up - gap});
}

// Tiles (bi, bj) with bi + bj = d; block b is bi = first + b.
__global__ void tile_kernel(const int* __restrict__ ref, int* score, long w, int d, int first, int gap) {
  __shared__ int s[TS + 1][TS + 1];
  __shared__ int r[TS][TS];
  const int tx = threadIdx.x;
  const long bi = first + blockIdx.x, bj = d - bi;
  const long r0 = 1 + bi * TS, c0 = 1 + bj * TS;  // the tile's first cell
  if (tx == 0) s[0][0] = score[(r0 - 1) * w + c0 - 1];
  s[0][tx + 1] = score[(r0 - 1) * w + c0 + tx];
  s[tx + 1][0] = score[(r0 + tx) * w + c0 - 1];
  for (int y = 0; y < TS; ++y) r[y][tx] = ref[(r0 + y) * w + c0 + tx];
  __syncthreads();
  for (int m = 0; m < 2 * TS - 1; ++m) {
    const int y = m - tx;
    if (y >= 0 && y < TS) s[y + 1][tx + 1] = best(s[y][tx] + r[y][tx], s[y + 1][tx], s[y][tx + 1], gap);
    __syncthreads();
  }
  for (int y = 0; y < TS; ++y) score[(r0 + y) * w + c0 + tx] = s[y + 1][tx + 1];
}

void dp_cpu(const int* ref, int* score, size_t n, int gap) {
  const size_t w = n + 1;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= n; ++j)
      score[i * w + j] = best(score[(i - 1) * w + j - 1] + ref[i * w + j], score[i * w + j - 1], score[(i - 1) * w + j], gap);
}

void run_needle(Context& ctx) {
  AppRun run(ctx, "needle");
  const uint64_t seed = run.seed();
  const int gap = static_cast<int>(ctx.args.integer("penalty", 10));
  size_t n = static_cast<size_t>(ctx.args.integer("n", 0));
  if (n == 0) n = run.square_side(size_t(1) << 30, 2 * sizeof(int)) - 1;
  n = n / TS * TS;
  if (n < TS) throw UsageError("needle needs sequences of at least 16 residues (a multiple of 16)");
  const size_t w = n + 1, cells = w * w;
  auto ref = run.array<int>("reference", cells, Use::in);
  auto score = run.array<int>("score", cells, Use::inout);
  // Residues: the 20 amino acids, uniform from the seed.
  std::vector<int> a(w), b(w);
  auto gen = [&](int* rf, int* sc) {
    for (size_t i = 1; i < w; ++i) {
      a[i] = static_cast<int>(mix64(seed * 31 + i) % 20);
      b[i] = static_cast<int>(mix64((seed + 1) * 31 + i) % 20);
    }
    run.cpu_for(w, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i)
        for (size_t j = 0; j < w; ++j) {
          rf[i * w + j] = (i && j) ? kBlosum62[a[i]][b[j]] : 0;
          sc[i * w + j] = i == 0 ? -int(j) * gap : (j == 0 ? -int(i) * gap : 0);
        }
    });
  };
  run.init([&] { gen(ref.host, score.host); });
  run.dump("reference", ref.host, cells);
  run.dump("seq_a", a.data() + 1, n);
  run.dump("seq_b", b.data() + 1, n);
  run.to_gpu();
  const long tiles = static_cast<long>(n / TS);
  // Two timed halves on the GPU, as Rodinia's two kernels: the diagonals up
  // to the main one, then the rest. The CPU fills the matrix in one.
  for (int half = 0; half < (run.gpu() ? 2 : 1); ++half)
    run.iteration([&] {
      if (run.gpu()) {
        const long d0 = half == 0 ? 0 : tiles, d1 = half == 0 ? tiles : 2 * tiles - 1;
        for (long d = d0; d < d1; ++d) {
          const long first = d < tiles ? 0 : d - tiles + 1, last = d < tiles ? d : tiles - 1;
          tile_kernel<<<static_cast<unsigned>(last - first + 1), TS>>>(ref.dev, score.dev, long(w), int(d), int(first), gap);
        }
      } else {
        dp_cpu(ref.dev, score.dev, n, gap);
      }
    });
  run.back();
  run.verify([&] {
    if (run.check()) {
      // Row by row from the gap penalties, the similarities looked up from the residues (not the reference array).
      std::vector<int> sc(cells);
      for (size_t j = 0; j < w; ++j) sc[j] = -int(j) * gap;
      for (size_t i = 1; i < w; ++i) {
        sc[i * w] = -int(i) * gap;
        for (size_t j = 1; j < w; ++j)
          sc[i * w + j] = ref_score(sc[(i - 1) * w + j - 1], sc[i * w + j - 1], sc[(i - 1) * w + j],
                                    kBlosum62[a[i]][b[j]], gap);
      }
      run.compare("score", score.host, sc.data(), cells);
      return;
    }
    // Larger: every cell against the recurrence applied to its three neighbours in the result (BLOSUM62 of
    // the residues regenerated from the seed), the first row and column against the gap penalties. By
    // induction over the anti-diagonals the whole matrix then equals the reference's; the CPU threads check
    // the cells independently, where the reference's wavefront runs on one.
    const int* sc = score.host;
    run.compare_each("score", cells, [&](size_t k) { return double(sc[k]); }, [&](size_t k) {
      const size_t i = k / w, j = k % w;
      if (i == 0 || j == 0) return -double(i + j) * gap;
      return double(ref_score(sc[k - w - 1], sc[k - 1], sc[k - w], kBlosum62[a[i]][b[j]], gap));
    });
    run.verified("invariant:nw-recurrence");
  });
  run.dump("score", score.host, cells);
  JsonObject extra;
  extra.set("length", static_cast<unsigned long long>(n)).set("penalty", gap);
  extra.set("alignment_score", static_cast<long long>(score.host[cells - 1]));
  // The reference read and the scores written once, shared by the timed parts.
  run.finish(extra, double(cells) * 2 * sizeof(int) / (run.gpu() ? 2 : 1), 0);
}

AppRegistrar reg({"needle", "gpu|cpu",
                    "Needleman-Wunsch alignment, BLOSUM62, tiled anti-diagonal wavefront (Rodinia)",
                    {"app"},
                    app_params({"n", "seed", "penalty"}),
                    run_needle},
                 // Model facts: reads reference and score, rewrites score (inout): all read, half written. One pass
                 // replayed (one wavefront over the matrix; Schieffer et al.'s sweep).
                 {"dynamic programming", "needle", 1, 1.0, 1.0 / 2});

}  // namespace
}  // namespace umscope
