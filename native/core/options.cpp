// The options the runner's cases take, declared once: type, default, help and
// limits. `umbench list --json` exports them, and umscope builds its command
// line, its validation and its help from that list (python/umscope/registry.py).
// A benchmark names the options it reads (BenchInfo::params); one of its own
// that is not here, or that differs for it, goes in BenchInfo::options.
#include "umscope/bench.hpp"

namespace umscope {

namespace {
const char* kBig = "1099511627776";  // 2^40: dimensions
}  // namespace

const std::vector<OptionInfo>& option_catalogue() {
  static const std::vector<OptionInfo> c = {
      // What every application takes.
      {"processor", "choice", "gpu", "run the CPU implementation (threads) instead", {"gpu", "cpu"}},
      {"threads", "threads", "all", "CPU threads for --processor cpu and the CPU's share of the work (default all)"},
      {"check", "choice", "", "compare with the CPU reference (default: when the arrays total at most 64 MiB)",
       {"0", "1"}},
      {"footprint", "size", "", "total size of the application's arrays, e.g. 8G (sets its dimensions)", {}, "4096",
       "9000000000000000000"},
      {"seed", "int", "", "seed of the generated inputs", {}, "0", "9223372036854775807"},
      {"iterations", "int", "", "iterations (time steps, repetitions) of iterative applications", {}, "1", "1000000"},
      // Dimensions.
      {"n", "int", "", "order of the matrix or length of the vectors (triad, mvt, gesummv, gemm, syr2k, needle)", {},
       "1", kBig},
      {"m", "int", "", "gemm, syr2k: second dimension", {}, "1", kBig},
      {"k", "int", "", "gemm: inner dimension", {}, "1", kBig},
      {"rows", "int", "", "2-D grid rows (hotspot, pathfinder, srad, conv2d, jacobi2d)", {}, "1", kBig},
      {"cols", "int", "", "2-D grid columns", {}, "1", kBig},
      {"nodes", "int", "", "bfs: vertices", {}, "2", "2147483647"},  // bfs.cu's 32-bit vertex ids
      {"degree", "int", "", "bfs: edges per vertex", {}, "1", "1048576"},
      {"pyramid", "int", "", "hotspot, pathfinder: time steps per kernel", {}, "1", "1048576"},
      {"penalty", "int", "", "needle: gap penalty", {}, "0", "1048576"},
      {"dims", "dims", "", "himeno: grid I,J,K", {}, "3", "999999"},
      {"size", "choice", "", "himeno: grid S, M, L or XL", {"S", "M", "L", "XL"}},
      {"lambda", "real", "", "srad: update coefficient (default 0.5)", {}, "0", "1e6"},
      {"reverse", "flag", "", "jacobi2d: every other sweep bottom-up (memory-aware)"},
      {"precision", "choice", "", "gemm: fp64, fp32, tf32, fp16; qv: complex128, complex64"},
      {"variant", "choice", "", "sgemm/gemm: cublas (default) or panels (row panels that fit --panel-memory)",
       {"cublas", "panels"}},
      {"panel-memory", "size", "", "sgemm/gemm --variant panels: memory per panel (default half the free GPU)"},
      {"place-a", "kind", "", "gemm: memory kind of A (default: the mode's)"},
      {"place-b", "kind", "", "gemm: memory kind of B (default: the mode's)"},
      {"place-c", "kind", "", "gemm: memory kind of C (default: the mode's)"},
      {"qubits", "int", "", "qv: width (2-40)", {}, "2", "40"},
      {"depth", "int", "", "qv: layers (default = width)", {}, "1", "100000"},
      {"init", "choice", "", "qv: which processor initialises the state (default gpu)", {"gpu", "cpu"}},
      // Read by umbench, set by umscope itself or by tests: not offered by `umscope app run`.
      {"mode", "choice", "explicit", "memory mode (umscope app run --mode)", {}, "", "", true},
      {"dump", "text", "", "directory to write the result arrays to", {}, "", "", true},
      {"dump-state", "text", "", "file to write the final state vector to", {}, "", "", true},
      {"export-circuit", "text", "", "file to write the circuit to (JSON)", {}, "", "", true},
      {"block", "int", "1024", "threads per block", {}, "1", "1024", true},
      {"blocks", "int", "", "blocks in the grid (default: as many as fit, or one element per thread)", {}, "1",
       "2147483647", true},
  };
  return c;
}

const OptionInfo* find_option(const BenchInfo& b, const std::string& name) {
  for (const OptionInfo& o : b.options)
    if (o.name == name) return &o;
  for (const OptionInfo& o : option_catalogue())
    if (o.name == name) return &o;
  return nullptr;
}

}  // namespace umscope
