// PathFinder (Rodinia; Schieffer et al. section 3.1): dynamic programming
// down a grid of weights. The cost of reaching cell (r, c) is its weight
// plus the least cost of (r-1, c-1), (r-1, c), (r-1, c+1) (neighbours beyond
// the edge do not exist); the answer is the cost row of the last row. The
// GPU kernel uses Rodinia's 1-D pyramid: one launch advances `--pyramid`
// rows of a block of columns in shared memory with a halo that shrinks by
// one column per row.
#include "umscope/app.hpp"

namespace umscope {
namespace {

// 512-column blocks: with a 20-row pyramid 92% of a block's columns are
// results (216 of 256 with 256-column blocks); two shared rows used in turn,
// so one barrier per row.
constexpr int BS = 512;

// The cost of a cell from the three costs above it (left, up, right; a missing neighbour is passed as up) and
// its weight: the kernel's and the CPU path's rule.
__host__ __device__ inline int cell_cost(int left, int up, int right, int weight) {
  const int m = left < up ? left : up;
  return (right < m ? right : m) + weight;
}

// The reference's cost of column c from the previous row's costs, a second implementation on purpose (not
// cell_cost(), which the kernel and the CPU path share): the weight plus the least cost among the columns
// c - 1 .. c + 1 that exist.
int ref_cost(const int* prev, size_t cols, size_t c, int weight) {
  const size_t first = c == 0 ? 0 : c - 1, last = std::min(c + 1, cols - 1);
  return weight + *std::min_element(prev + first, prev + last + 1);
}

__global__ void rows_kernel(const int* __restrict__ wall, const int* __restrict__ src, int* __restrict__ dst,
                            long cols, long row0, int nrows) {
  __shared__ int row[2][BS];
  const int small = BS - 2 * nrows;
  const int tx = threadIdx.x;
  const long c = long(blockIdx.x) * small - nrows + tx;
  const bool inside = c >= 0 && c < cols;
  if (inside) row[0][tx] = src[c];
  __syncthreads();
  int cur = 0;
  for (int s = 0; s < nrows; ++s) {
    if (inside && tx > s && tx < BS - 1 - s) {
      const int up = row[cur][tx];
      row[1 - cur][tx] = cell_cost(c > 0 ? row[cur][tx - 1] : up, up, c < cols - 1 ? row[cur][tx + 1] : up,
                                   wall[(row0 + s) * cols + c]);
    }
    cur = 1 - cur;
    __syncthreads();
  }
  if (inside && tx >= nrows && tx < BS - nrows) dst[c] = row[cur][tx];
}

void row_cpu(AppRun& run, const int* wall_row, const int* src, int* dst, size_t cols) {
  run.cpu_for(cols, [&](size_t lo, size_t hi) {
    for (size_t c = lo; c < hi; ++c) {
      dst[c] = cell_cost(c > 0 ? src[c - 1] : src[c], src[c], c + 1 < cols ? src[c + 1] : src[c], wall_row[c]);
    }
  });
}

void run_pathfinder(Context& ctx) {
  AppRun run(ctx, "pathfinder");
  const uint64_t seed = run.seed();
  const int pyr = static_cast<int>(ctx.args.integer("pyramid", 20));
  if (pyr < 1 || pyr >= BS / 2) throw UsageError("--pyramid must be from 1 to " + std::to_string(BS / 2 - 1));
  const size_t cols = static_cast<size_t>(ctx.args.integer("cols", 1 << 20));
  size_t rows = static_cast<size_t>(ctx.args.integer("rows", 0));
  if (rows == 0) rows = run.footprint(size_t(2) << 30) / (cols * sizeof(int));
  if (rows < 2 || cols < 1) throw UsageError("pathfinder needs at least 2 rows and 1 column");
  const int groups = run.iterations(10);  // timed groups of launches
  auto wall = run.array<int>("wall", rows * cols, Use::in);
  auto res0 = run.array<int>("result0", cols, Use::out);
  auto res1 = run.array<int>("result1", cols, Use::out);
  // Weights 0-9 from the seed, as Rodinia's: cells [first, first + count) into w.
  auto gen = [&](int* w, size_t first, size_t count) {
    run.cpu_for(count, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) w[i] = static_cast<int>(mix64(seed * 0x9e37 + first + i) % 10);
    });
  };
  run.init([&] { gen(wall.host, 0, rows * cols); });
  run.dump("wall", wall.host, rows * cols);
  run.to_gpu();
  int* buf[2] = {res0.dev, res1.dev};
  int cur = 0;  // buf[cur] holds the costs of the rows done so far
  size_t done = 1;
  const int small = BS - 2 * pyr;
  const unsigned blocks = static_cast<unsigned>((cols + small - 1) / small);
  for (int gi = 0; gi < groups; ++gi) {
    const size_t until = 1 + (rows - 1) * (gi + 1) / groups;
    if (until <= done) continue;
    run.iteration([&] {
      if (done == 1) {  // row 0's costs are its weights
        if (run.gpu()) UM_CUDA(cudaMemcpyAsync(buf[0], wall.dev, cols * sizeof(int), cudaMemcpyDefault));
        else std::copy(wall.dev, wall.dev + cols, buf[0]);
      }
      while (done < until) {
        const int nr = static_cast<int>(std::min<size_t>(pyr, until - done));
        if (run.gpu()) {
          rows_kernel<<<blocks, BS>>>(wall.dev, buf[cur], buf[1 - cur], long(cols), long(done), nr);
          cur = 1 - cur;
        } else {
          for (int s = 0; s < nr; ++s) {
            row_cpu(run, wall.dev + (done + s) * cols, buf[cur], buf[1 - cur], cols);
            cur = 1 - cur;
          }
        }
        done += nr;
      }
    });
  }
  run.back();
  const int* result = cur == 0 ? res0.host : res1.host;
  // The full CPU reference at every size: each row's weights regenerated from the seed as it goes (no copy
  // of the wall), so its cost is the initialisation's again.
  run.verify([&] {
    std::vector<int> w(cols), a(cols), b(cols);
    gen(a.data(), 0, cols);
    for (size_t r = 1; r < rows; ++r) {
      gen(w.data(), r * cols, cols);
      run.cpu_for(cols, [&](size_t lo, size_t hi) {
        for (size_t c = lo; c < hi; ++c) b[c] = ref_cost(a.data(), cols, c, w[c]);
      });
      std::swap(a, b);
    }
    run.compare("costs", result, a.data(), cols);
  });
  run.dump("result", result, cols);
  long long best = result[0];
  for (size_t c = 1; c < cols; ++c) best = std::min<long long>(best, result[c]);
  JsonObject extra;
  extra.set("rows", static_cast<unsigned long long>(rows)).set("cols", static_cast<unsigned long long>(cols));
  extra.set("pyramid", pyr).set("min_cost", best);
  // Each group reads its share of the wall once.
  run.finish(extra, double(rows - 1) * cols * sizeof(int) / groups, 0);
}

AppRegistrar reg({"pathfinder", "gpu|cpu",
                    "dynamic programming down a grid of weights, 1-D pyramid tiling (Rodinia)",
                    {"app"},
                    app_params({"rows", "cols", "seed", "iterations", "pyramid"}),
                    run_pathfinder},
                 // Model facts: reads the wall; the results are two rows of the grid: 0 written. One pass replayed
                 // (one walk down the grid; Schieffer et al.'s sweep).
                 {"dynamic programming", "pathfinder", 1, 1.0, 0.0});

}  // namespace
}  // namespace umscope
