// STREAM triad as an application (Cooper et al., Table 2): a = b + s * c over
// three arrays of doubles, repeated; the GPU kernel is the bandwidth suite's
// triad kernel, so the two measure the same thing.
#include "umscope/stream_kernels.cuh"
#include "umscope/app.hpp"

namespace umscope {
namespace {

void run_triad(Context& ctx) {
  AppRun run(ctx, "triad");
  const uint64_t seed = run.seed();
  const int iters = run.iterations(20);
  size_t n = static_cast<size_t>(ctx.args.integer("n", 0));
  if (n == 0) n = run.footprint(size_t(3) << 30) / (3 * sizeof(double));
  n &= ~size_t(1);  // whole 16-byte pairs
  if (n < 2) throw UsageError("triad needs at least 2 elements per array");
  const double s = 3.0;
  auto a = run.array<double>("a", n, Use::out);
  auto b = run.array<double>("b", n, Use::in);
  auto c = run.array<double>("c", n, Use::in);
  run.init([&] {
    run.cpu_for(n, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) {
        b.host[i] = uniform01(seed, i);
        c.host[i] = uniform01(seed + 1, i);
      }
    });
  });
  run.to_gpu();
  Launch l{1, 1};
  if (run.gpu()) l = launch_for(triad_kernel, ctx, n / 2);
  for (int it = 0; it < iters; ++it)
    run.iteration([&] {
      if (run.gpu()) {
        triad_kernel<<<l.grid, l.block>>>(reinterpret_cast<const double2*>(b.dev),
                                          reinterpret_cast<const double2*>(c.dev), reinterpret_cast<double2*>(a.dev),
                                          n / 2, s);
      } else {
        run.cpu_for(n, [&](size_t lo, size_t hi) {
          for (size_t i = lo; i < hi; ++i) a.dev[i] = b.dev[i] + s * c.dev[i];
        });
      }
    });
  run.back();
  // Every element against the inputs regenerated from the seed, at every size (one pass, the CPU threads).
  run.verify([&] {
    run.compare_each("a", n, [&](size_t i) { return a.host[i]; },
                     [&](size_t i) { return uniform01(seed, i) + s * uniform01(seed + 1, i); }, 1e-15);
  });
  run.dump("a", a.host, n);
  run.dump("b", b.host, n);
  run.dump("c", c.host, n);
  JsonObject extra;
  extra.set("elements", static_cast<unsigned long long>(n)).set("scalar", s);
  run.finish(extra, 3.0 * n * sizeof(double), 2.0 * n);
}

AppRegistrar reg({"triad", "gpu|cpu", "STREAM triad a = b + s*c over doubles, repeated (Cooper et al.)",
                    {"app"},
                    app_params({"n", "seed", "iterations", "block", "blocks"}),
                    run_triad},
                 // Model facts: reads b and c, writes a: 2/3 of the footprint read, 1/3 written. One pass replayed: a
                 // streaming application of Cooper et al.'s sweep (Sec. 3.2: "these applications don't have data
                 // reuse").
                 {"streaming", "triad", 1, 2.0 / 3, 1.0 / 3});

}  // namespace
}  // namespace umscope
