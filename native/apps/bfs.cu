// Breadth-first search (Rodinia bfs; Schieffer et al. section 3.1; Cooper et
// al. Table 2): level-synchronous over a graph in CSR form, with Rodinia's
// frontier masks. Per level, one kernel expands every node of the frontier
// (setting the cost of unvisited neighbours) and a second makes the newly
// reached nodes the next frontier and raises a flag; the host reads the
// flag to decide whether to go on. The graph is random with a fixed seed:
// every node has between 1 and 2 x --degree - 1 out-edges to uniform
// targets. 64-bit edge offsets, so graphs of billions of edges work.
#include <atomic>
#include <deque>

#include "umscope/app.hpp"

namespace umscope {
namespace {

constexpr unsigned kBlock = 256;

// One thread per node (the frontier is sparse and irregular: a resident
// grid-stride loop made a thread walk several nodes' edge lists in turn).
__global__ void expand_kernel(const int64_t* __restrict__ off, const int32_t* __restrict__ edges,
                              uint8_t* __restrict__ mask, uint8_t* __restrict__ next,
                              const uint8_t* __restrict__ visited, int32_t* __restrict__ cost, size_t n) {
  const size_t v = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (v >= n || !mask[v]) return;
  mask[v] = 0;
  const int32_t c = cost[v] + 1;
  const int64_t end = off[v + 1];
  for (int64_t e = off[v]; e < end; ++e) {
    const int32_t u = edges[e];
    if (!visited[u]) {
      cost[u] = c;
      next[u] = 1;
    }
  }
}

// Sixteen nodes per thread, read as one 16-byte word of `next`: most words
// of a level are zero, and a thread per node spent the level scheduling
// threads (24 us a level at 4M nodes). `next` bytes are 0 or 1, and expand
// has cleared every `mask` byte, so the words can be ORed and assigned.
__global__ void advance_kernel(uint8_t* __restrict__ mask, uint8_t* __restrict__ next,
                               uint8_t* __restrict__ visited, size_t n, int* more) {
  const size_t w = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  const size_t v0 = 16 * w;
  if (v0 >= n) return;
  if (v0 + 16 <= n) {
    const uint4 nx = reinterpret_cast<const uint4*>(next)[w];
    if (!(nx.x | nx.y | nx.z | nx.w)) return;
    uint4 vs = reinterpret_cast<const uint4*>(visited)[w];
    vs.x |= nx.x, vs.y |= nx.y, vs.z |= nx.z, vs.w |= nx.w;
    reinterpret_cast<uint4*>(mask)[w] = nx;
    reinterpret_cast<uint4*>(visited)[w] = vs;
    reinterpret_cast<uint4*>(next)[w] = make_uint4(0, 0, 0, 0);
    *more = 1;
    return;
  }
  for (size_t v = v0; v < n; ++v) {
    if (!next[v]) continue;
    mask[v] = 1;
    visited[v] = 1;
    next[v] = 0;
    *more = 1;
  }
}

// The CPU: the same level by level, a node list per frontier.
int bfs_cpu(const int64_t* off, const int32_t* edges, int32_t* cost, size_t n) {
  std::vector<int32_t> cur = {0}, nxt;
  int levels = 0;
  while (!cur.empty()) {
    ++levels;
    nxt.clear();
    for (int32_t v : cur)
      for (int64_t e = off[v]; e < off[v + 1]; ++e)
        if (cost[edges[e]] < 0) {
          cost[edges[e]] = cost[v] + 1;
          nxt.push_back(edges[e]);
        }
    cur.swap(nxt);
  }
  (void)n;
  return levels;
}

// The reference's levels, a second implementation on purpose (not bfs_cpu(), the CPU path): nodes taken from a
// first-in first-out queue from node 0, each unreached neighbour one level deeper.
void ref_levels(const int64_t* off, const int32_t* edges, int32_t* cost, size_t n) {
  std::fill(cost, cost + n, -1);
  std::deque<int32_t> queue = {0};
  cost[0] = 0;
  while (!queue.empty()) {
    const int32_t v = queue.front();
    queue.pop_front();
    for (int64_t e = off[v]; e < off[v + 1]; ++e) {
      const int32_t u = edges[e];
      if (cost[u] == -1) {
        cost[u] = cost[v] + 1;
        queue.push_back(u);
      }
    }
  }
}

// The target of edge k, from the seed.
inline int32_t target(uint64_t seed, int64_t k, size_t n) {
  return static_cast<int32_t>(mix64((seed + 1) * 0x9e37 + static_cast<uint64_t>(k)) % n);
}

// Checks levels from node 0 on every edge, without a traversal: cost[0] = 0 and no other node has 0; every
// edge v -> u out of a reached node reaches u with cost[u] <= cost[v] + 1; every reached node but 0 has an
// in-edge from the level before it; unreached nodes hold -1. These hold for the BFS levels and for nothing
// else (the edges bound each level from above along a shortest path, the in-edges from below), so they
// check the whole result. The CPU threads split the nodes; edges come from edge(k).
template <class E>
void check_levels(AppRun& run, const int64_t* off, E edge, const int32_t* cost, size_t n) {
  std::unique_ptr<std::atomic<uint8_t>[]> parent(new std::atomic<uint8_t>[n]);
  run.cpu_for(n, [&](size_t lo, size_t hi) {
    for (size_t v = lo; v < hi; ++v) parent[v].store(0, std::memory_order_relaxed);
  });
  auto node = [&](size_t v) { return "node " + std::to_string(v) + " (cost " + std::to_string(cost[v]) + ")"; };
  std::atomic<long long> bad_edge{-1};
  run.cpu_for(n, [&](size_t lo, size_t hi) {
    for (size_t v = lo; v < hi && bad_edge.load(std::memory_order_relaxed) < 0; ++v) {
      const int32_t c = cost[v];
      if (c < 0) continue;
      for (int64_t k = off[v]; k < off[v + 1]; ++k) {
        const int32_t u = edge(k);
        if (cost[u] < 0 || cost[u] > c + 1) bad_edge.store(k, std::memory_order_relaxed);
        else if (cost[u] == c + 1) parent[u].store(1, std::memory_order_relaxed);
      }
    }
  });
  if (bad_edge >= 0) {
    const int64_t k = bad_edge;
    const size_t v = static_cast<size_t>(std::upper_bound(off, off + n + 1, k) - off - 1);
    throw VerifyError("cost: the edge from " + node(v) + " to " + node(edge(k)) + " breaks the BFS levels");
  }
  if (cost[0] != 0) throw VerifyError("cost: the source, node 0, has cost " + std::to_string(cost[0]));
  std::atomic<long long> bad_node{-1};
  run.cpu_for(n, [&](size_t lo, size_t hi) {
    for (size_t v = std::max<size_t>(lo, 1); v < hi; ++v)
      if (cost[v] < -1 || cost[v] == 0 || (cost[v] > 0 && !parent[v].load(std::memory_order_relaxed)))
        bad_node.store(static_cast<long long>(v), std::memory_order_relaxed);
  });
  if (bad_node >= 0) throw VerifyError("cost: " + node(bad_node) + " has no in-edge from the level before it");
}

void run_bfs(Context& ctx) {
  AppRun run(ctx, "bfs");
  const uint64_t seed = run.seed();
  const int degree = static_cast<int>(ctx.args.integer("degree", 8));
  if (degree < 1 || degree > 1000) throw UsageError("--degree must be from 1 to 1000");
  size_t n = static_cast<size_t>(ctx.args.integer("nodes", 0));
  // Per node: an 8-byte offset, `degree` 4-byte edges, a 4-byte cost and three mask bytes.
  if (n == 0) n = run.footprint(size_t(1) << 30) / (8 + 4 * size_t(degree) + 4 + 3);
  if (n < 2 || n > (size_t(1) << 31) - 1) throw UsageError("bfs needs from 2 to 2^31-1 nodes");
  // Out-degrees first (the CSR offsets), then the edges.
  auto deg = [&](size_t v) { return 1 + static_cast<int64_t>(mix64(seed * 0x51ed + v) % (2 * degree - 1)); };
  std::vector<int64_t> offsets(n + 1, 0);
  for (size_t v = 0; v < n; ++v) offsets[v + 1] = offsets[v] + deg(v);
  const size_t m = static_cast<size_t>(offsets[n]);
  auto off = run.array<int64_t>("offsets", n + 1, Use::in);
  auto edges = run.array<int32_t>("edges", m, Use::in);
  auto cost = run.array<int32_t>("cost", n, Use::inout);
  auto mask = run.array<uint8_t>("mask", n, Use::inout);
  auto next = run.array<uint8_t>("next", n, Use::inout);
  auto visited = run.array<uint8_t>("visited", n, Use::inout);
  int* more = run.gpu() ? run.scratch<int>(1) : nullptr;
  auto gen = [&](int64_t* o, int32_t* e, int32_t* c, uint8_t* mk, uint8_t* nx, uint8_t* vs) {
    std::copy(offsets.begin(), offsets.end(), o);
    run.cpu_for(n, [&](size_t lo, size_t hi) {
      for (size_t v = lo; v < hi; ++v) {
        for (int64_t k = offsets[v]; k < offsets[v + 1]; ++k)
          e[k] = target(seed, k, n);
        c[v] = v == 0 ? 0 : -1;
        if (mk) {
          mk[v] = v == 0;
          nx[v] = 0;
          vs[v] = v == 0;
        }
      }
    });
  };
  run.init([&] { gen(off.host, edges.host, cost.host, mask.host, next.host, visited.host); });
  run.dump("offsets", off.host, n + 1);
  run.dump("edges", edges.host, m);
  run.to_gpu();
  int levels = 0;
  if (run.gpu()) {
    const unsigned blocks = static_cast<unsigned>((n + kBlock - 1) / kBlock);
    const unsigned word_blocks = static_cast<unsigned>((n + 16 * kBlock - 1) / (16 * kBlock));
    int flag = 1;
    while (flag) {
      run.iteration([&] {
        UM_CUDA(cudaMemsetAsync(more, 0, sizeof(int)));
        expand_kernel<<<blocks, kBlock>>>(off.dev, edges.dev, mask.dev, next.dev, visited.dev, cost.dev, n);
        advance_kernel<<<word_blocks, kBlock>>>(mask.dev, next.dev, visited.dev, n, more);
        UM_CUDA(cudaMemcpy(&flag, more, sizeof flag, cudaMemcpyDeviceToHost));
      });
      ++levels;
    }
  } else {
    run.iteration([&] { levels = bfs_cpu(off.dev, edges.dev, cost.dev, n); });
  }
  run.back();
  run.verify([&] {
    if (run.check()) {
      std::vector<int64_t> o(n + 1);
      std::vector<int32_t> e(m), c(n);
      gen(o.data(), e.data(), c.data(), nullptr, nullptr, nullptr);
      ref_levels(o.data(), e.data(), c.data(), n);
      run.compare("cost", cost.host, c.data(), n);
    } else {
      check_levels(run, offsets.data(), [&](int64_t k) { return target(seed, k, n); }, cost.host, n);
      run.verified("invariant:bfs-edges");
    }
  });
  run.dump("cost", cost.host, n);
  size_t reached = 0;
  int depth = 0;
  for (size_t v = 0; v < n; ++v)
    if (cost.host[v] >= 0) {
      ++reached;
      depth = std::max(depth, int(cost.host[v]));
    }
  // The random accesses of the traversal (counted from its result, after the timed phases): each
  // reached node's expansion reads its cost, its two offsets and its edge list (the 32-byte sectors
  // the list spans) and clears its mask byte; each of its edges reads visited[u], and an edge to the
  // next level (cost[u] = cost[v] + 1, u not yet visited when v expands) writes cost[u] and next[u].
  // Over the link (pinned, registered) each is a sector-sized request at a random place (the
  // calibrated model prices them with the gather and scatter rates of gpu-stream); mask and next are
  // scanned whole every level (traffic_bytes).
  double gather = 0, scatter = 0;
  for (size_t v = 0; v < n; ++v) {
    const int32_t cv = cost.host[v];
    if (cv < 0) continue;
    const int64_t b = offsets[v], e = offsets[v + 1];
    gather += 2 + double((e * 4 + 31) / 32 - (b * 4) / 32) + double(e - b);
    scatter += 1;
    for (int64_t k = b; k < e; ++k) {
      const int32_t u = target(seed, k, n);
      if (cost.host[u] == cv + 1) scatter += 2;
    }
  }
  JsonObject extra;
  extra.set("gather_accesses", gather).set("scatter_accesses", scatter);
  extra.set("nodes", static_cast<unsigned long long>(n)).set("edges", static_cast<unsigned long long>(m));
  extra.set("degree", degree).set("levels", levels).set("depth", depth);
  extra.set("reached", static_cast<unsigned long long>(reached));
  run.finish(extra, 2.0 * n, 0);
}

AppRegistrar reg({"bfs", "gpu|cpu",
                    "breadth-first search, level-synchronous with frontier masks (Rodinia), random graph from a seed",
                    {"app"},
                    app_params({"nodes", "degree", "seed"}),
                    run_bfs},
                 // Model facts: reads the graph and its per-node arrays; rewrites the per-node arrays (cost, mask,
                 // next, visited: 7 of the 47 bytes per node at the default degree 8, 0.15 of the footprint; declared
                 // 0.2). Several passes replayed (iterative; Schieffer et al.'s sweep): 8, as dos.py's sweep always
                 // did.
                 {"irregular", "bfs", 8, 1.0, 0.2});

}  // namespace
}  // namespace umscope
