// umbench: runs one benchmark case and prints JSON-lines records.
//
//   umbench info                 capabilities as one JSON object
//   umbench list [--json]        the registry as one JSON object (benchmarks, kinds, modes, stream operations)
//   umbench run BENCH [--key value | --flag]...
//   umbench check-kind SPEC      canonical form of a memory-kind spec, or exit 2
//   umbench batch                cases from stdin (one per line, tab-separated run arguments), each
//                                between start/end markers (core/batch.cpp)
//
// Every `run` ends with one status line {"type":"status","status":...}.
// Exit codes: 0 ok or skipped, 2 bad usage, 3 failed, 4 refused by a guard.
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "umscope/bench.hpp"
#include "umscope/caps.hpp"
#include "umscope/errors.hpp"
#include "umscope/modes.hpp"
#include "umscope/os.hpp"
#include "umscope/traffic.hpp"
#include "umscope/world.hpp"

using namespace umscope;

namespace umscope {
int run_batch(int (*run)(int, char**));  // core/batch.cpp: many cases in one process
}  // namespace umscope

#ifdef UMSCOPE_HAVE_MPI
namespace umscope {
void mpi_world_init(int* argc, char*** argv);
void mpi_world_finalize();
}  // namespace umscope
#endif

namespace {

// P2P between GPU c.device and every other GPU, as the CUDA runtime reports it.
std::string peers_json(int dev, int count) {
  std::string out = "[";
#ifdef UMSCOPE_HAVE_CUDA
  for (int p = 0; p < count; ++p) {
    if (p == dev) continue;
    int access = 0, atomics = 0, rank = -1;
    if (cudaDeviceCanAccessPeer(&access, dev, p) != cudaSuccess) access = 0;
    if (cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, dev, p) != cudaSuccess) atomics = 0;
    if (cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, dev, p) != cudaSuccess) rank = -1;
    cudaGetLastError();
    JsonObject o;
    o.set("device", p).set("access", access == 1).set("atomics", atomics == 1).set("rank", rank);
    out += (out.size() > 1 ? "," : "") + o.str();
  }
#else
  (void)dev;
  (void)count;
#endif
  return out + "]";
}

std::string gpu_json(const GpuCaps& c, int count = 0) {
  JsonObject o;
  o.set("present", c.present);
  if (!c.present) {
    o.set("why_absent", c.why_absent);
    return o.str();
  }
  o.set("device", c.device).set("name", c.name);
  o.set("compute_capability", std::to_string(c.cc_major) + "." + std::to_string(c.cc_minor));
  o.set("sms", c.sms).set("total_mem", static_cast<unsigned long long>(c.total_mem));
  o.set("free_mem", static_cast<unsigned long long>(c.free_mem)).set("l2_bytes", c.l2_bytes);
  o.set("clock_khz", c.clock_khz).set("mem_clock_khz", c.mem_clock_khz).set("mem_bus_bits", c.mem_bus_bits);
  o.set("pci_bus_id", c.pci_bus_id).set("max_threads_per_sm", c.max_threads_per_sm);
  o.set("shared_per_sm", c.shared_per_sm).set("regs_per_sm", c.regs_per_sm).set("max_blocks_per_sm", c.max_blocks_per_sm);
  o.set("managed_memory", c.managed_memory).set("concurrent_managed_access", c.concurrent_managed_access);
  o.set("pageable_memory_access", c.pageable_memory_access);
  o.set("pageable_memory_access_uses_host_page_tables", c.pageable_uses_host_page_tables);
  o.set("host_native_atomics", c.host_native_atomics);
  o.set("direct_managed_access_from_host", c.direct_managed_access_from_host);
  o.set("can_use_host_pointer_for_registered_mem", c.can_use_host_pointer_for_registered);
  o.set("can_map_host_memory", c.can_map_host_memory).set("host_register_supported", c.host_register_supported);
  o.set("numa_config", c.numa_config).set("numa_id", c.numa_id);
  o.set("addressing", c.addressing());
  o.set_raw("peers", peers_json(c.device, count));
  return o.str();
}

int cmd_info() {
  JsonObject o;
#ifdef UMSCOPE_HAVE_CUDA
  o.set("built_with_cuda", true);
  o.set("cuda_build_version", std::to_string(CUDART_VERSION));
#else
  o.set("built_with_cuda", false);
#endif
  const GpuCaps& first = gpu_caps(0);
  o.set("driver_version", first.driver_version).set("runtime_version", first.runtime_version);
  std::string gpus = "[";
  if (first.present) {
    int count = 0;
#ifdef UMSCOPE_HAVE_CUDA
    cudaGetDeviceCount(&count);
#endif
    for (int d = 0; d < count; ++d) gpus += (d ? "," : "") + gpu_json(gpu_caps(d), count);
  }
  gpus += "]";
  o.set_raw("gpus", gpus);
  if (!first.present) o.set("why_no_gpu", first.why_absent);
  o.set("page_size", static_cast<unsigned long long>(os::page_size()));
  std::cout << o.str() << std::endl;
  return 0;
}

// `umbench list [--json]`: the whole registry as one JSON object, which umscope reads once per process
// (python/umscope/registry.py): benchmarks and applications with their options, memory kinds with their
// behaviour, the applications' memory modes, and the stream operations' traffic.
std::string json_array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
  return out + "]";
}

std::string exact_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

int cmd_list_json() {
  std::vector<std::string> benches, kinds, ops, modes;
  for (auto& b : bench_registry()) {
    JsonObject o;
    o.set("name", b.name).set("category", b.category).set("processor", b.processor).set("help", b.help);
    o.set("ops", b.ops).set("params", b.params);
    if (b.category == "application") {
      JsonObject m;  // fractions with every digit, so that Python reads the very doubles declared (2/3, 1/3)
      m.set("pattern", b.facts.pattern).set("generator", b.facts.generator);
      m.set("iterations", static_cast<long long>(b.facts.iterations));
      m.set_raw("read", exact_number(b.facts.read)).set_raw("written", exact_number(b.facts.written));
      m.set("not_simulated", b.facts.not_simulated);
      o.set_raw("model", m.str());
    }
    std::vector<std::string> options;  // the declared ones among its params, in its order
    for (const std::string& name : b.params) {
      const OptionInfo* opt = find_option(b, name);
      if (!opt) continue;
      JsonObject oo;
      oo.set("name", opt->name).set("type", opt->type).set("default", opt->dflt).set("help", opt->help);
      oo.set("choices", opt->choices).set("min", opt->min).set("max", opt->max).set("internal", opt->internal);
      options.push_back(oo.str());
    }
    o.set_raw("options", json_array(options));
    benches.push_back(o.str());
  }
  for (auto& k : kind_registry()) {
    JsonObject o;
    o.set("name", k.name).set("takes_arg", k.takes_arg).set("help", k.help);
    std::vector<std::string> pol;
    for (auto& p : k.policies) {
      JsonObject po;
      po.set("key", p.key).set("values", p.values).set("help", p.help).set("default", p.dflt).set("joined", p.joined);
      pol.push_back(po.str());
    }
    o.set_raw("policies", json_array(pol));
    o.set("lives", k.lives).set("reachable_by", k.reachable_by).set("needs_cuda", k.needs_cuda);
    o.set("gpu_needs_hmm_or_ats", k.gpu_needs_hmm_or_ats).set("needs_peer", k.needs_peer);
    kinds.push_back(o.str());
  }
  for (const ModeInfo& m : mode_registry()) {
    JsonObject o;
    o.set("name", m.name).set("help", m.help).set("input_kind", m.input_kind).set("output_kind", m.output_kind);
    modes.push_back(o.str());
  }
  for (const StreamOp& s : stream_ops()) {
    JsonObject o;
    o.set("name", s.name).set("reads", s.reads).set("writes", s.writes).set("formula", s.formula);
    ops.push_back(o.str());
  }
  JsonObject all;
  all.set("app_patterns", app_patterns());
  all.set_raw("benchmarks", json_array(benches)).set_raw("kinds", json_array(kinds));
  all.set_raw("stream_ops", json_array(ops)).set_raw("modes", json_array(modes));
  std::cout << all.str() << std::endl;
  return 0;
}

// Parses a kind spec and prints its canonical form; the Python side validates
// user input through this so there is one parser.
// The placement a rank started by a launcher takes (placement.hpp: plan_rank), from the launcher's environment,
// without pinning anything: a check of the logic on any host. --cpus LIST stands for the CPUs the launcher
// allows, --gpu-cpus "LIST;LIST;..." for each GPU's local CPUs (default: this host's), --one-core as the mpi
// family. Prints one JSON line.
int cmd_rank_placement(int argc, char** argv) {
  std::vector<int> allowed = os::allowed_cpus();
  std::vector<std::vector<int>> gpu_cpus;
  bool one_core = false, fake_gpus = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--one-core") {
      one_core = true;
    } else if ((a == "--cpus" || a == "--gpu-cpus") && i + 1 < argc) {
      std::string v = argv[++i];
      if (a == "--cpus") {
        allowed = parse_cpu_list(v);
        continue;
      }
      fake_gpus = true;
      std::stringstream ss(v);
      std::string part;
      while (std::getline(ss, part, ';')) gpu_cpus.push_back(parse_cpu_list(part));
    } else {
      std::cerr << "umbench rank-placement [--cpus LIST] [--gpu-cpus 'LIST;LIST;...'] [--one-core]\n";
      return 2;
    }
  }
  if (!fake_gpus)
    for (const std::string& bus : gpu_bus_ids()) {
      std::vector<int> cpus;
      int node = -1;
      if (bus.empty() || !gpu_locality(bus, cpus, node)) cpus.clear();
      gpu_cpus.push_back(cpus);
    }
  const LaunchRank lr = launcher_rank();
  const RankPlace p = plan_rank(lr, allowed, gpu_cpus, one_core, fake_gpus ? +[](int c) { return c; } : core_of_cpu);
  JsonObject o;
  o.set("rank", lr.rank).set("size", lr.size).set("local_rank", lr.local_rank).set("local_size", lr.local_size);
  o.set("source", lr.source).set("gpu", p.gpu).set("cpus", cpu_ranges(p.cpus)).set("how", p.how);
  std::cout << o.str() << std::endl;
  return 0;
}

int cmd_check_kind(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "umbench check-kind: give a kind spec\n";
    return 2;
  }
  try {
    std::cout << parse_kind(argv[2]).str() << std::endl;
    return 0;
  } catch (const UsageError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
}

int status_line(std::string status, std::string reason, int code) {
  World& w = world();
  if (w.size > 1) {
    // Rank 0 tells the case's outcome: its own, or the first other rank's that did not end "ok".
    std::vector<std::string> all = w.gather(std::to_string(code) + "|" + status + "|" + reason);
    if (w.rank != 0) return code;
    for (int r = 0; r < static_cast<int>(all.size()) && status == "ok"; ++r) {
      size_t a = all[r].find('|'), b = all[r].find('|', a + 1);
      if (all[r].substr(a + 1, b - a - 1) == "ok") continue;
      code = std::stoi(all[r].substr(0, a));
      status = all[r].substr(a + 1, b - a - 1);
      reason = "rank " + std::to_string(r) + ": " + all[r].substr(b + 1);
    }
  }
  JsonObject o;
  o.set("type", "status").set("status", status);
  if (!reason.empty()) o.set("reason", reason);
  std::cout << o.str() << std::endl;
  return code;
}

int cmd_run(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "umbench run: name a benchmark (umbench list)\n";
    return 2;
  }
  std::string name = argv[2];
  const BenchInfo* bench = nullptr;
  for (auto& b : bench_registry())
    if (b.name == name) bench = &b;
  try {
    if (!bench) throw UsageError("unknown benchmark '" + name + "'");
    std::map<std::string, std::string> kv;
    for (int i = 3; i < argc; ++i) {
      std::string a = argv[i];
      if (a.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + a + "'");
      a = a.substr(2);
      auto eq = a.find('=');
      if (eq != std::string::npos) kv[a.substr(0, eq)] = a.substr(eq + 1);
      else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) kv[a] = argv[++i];
      else kv[a] = "1";
    }
    std::set<std::string> known = {"device", "placement", "reps", "warmup", "allow-oversubscription", "allow-host-overcommit"};
    known.insert(bench->params.begin(), bench->params.end());
    for (auto& p : kv)
      if (!known.count(p.first)) throw UsageError("benchmark '" + name + "' takes no --" + p.first);
    Context ctx;
    ctx.args = Args(kv);
    ctx.benchmark = name;
    const long long device = ctx.args.integer("device", 0), reps = ctx.args.integer("reps", 20),
                    warmup = ctx.args.integer("warmup", 2);
    if (device < 0 || device > 1023) throw UsageError("--device takes a CUDA device ordinal 0-1023");
    if (reps < 1 || reps > 1000000 || warmup < 0 || warmup > 1000000)
      throw UsageError("--reps must be 1 to 1000000 and --warmup 0 to 1000000");
    ctx.device = static_cast<int>(device);
    ctx.reps = static_cast<int>(reps);
    ctx.warmup = static_cast<int>(warmup);
    ctx.alloc.device = ctx.device;
    ctx.alloc.allow_oversubscription = ctx.args.flag("allow-oversubscription");
    ctx.alloc.allow_host_overcommit = ctx.args.flag("allow-host-overcommit");
    {  // GPU-local placement before anything allocates host memory (placement.hpp)
      KindSpec kind;
      const bool has_kind = bench->params.end() != std::find(bench->params.begin(), bench->params.end(), "kind") &&
                            ctx.args.has("kind");
      if (has_kind) kind = parse_kind(ctx.args.str("kind"));
      ctx.placement = place_process(ctx.args.str("placement", "local"), ctx.device,
                                    bench->processor.find("gpu") != std::string::npos, has_kind ? &kind : nullptr);
    }
    bench->run(ctx);
    return status_line("ok", "", 0);
  } catch (const UsageError& e) {
    std::cerr << "umbench: " << e.what() << "\n";
    return status_line("usage", e.what(), 2);
  } catch (const Skip& e) {
    return status_line("skipped", e.what(), 0);
  } catch (const Refused& e) {
    return status_line("refused", e.what(), 4);
  } catch (const VerifyError& e) {
    return status_line("failed", std::string("verification failed: ") + e.what(), 3);
  } catch (const std::exception& e) {
    return status_line("failed", e.what(), 3);
  }
}

// No umbench outlives the umscope that started it: the kernel sends SIGKILL
// when the parent dies, and a parent that died before prctl (the race) is
// caught by comparing getppid() with the pid umscope put in UMSCOPE_PARENT_PID.
void watch_parent() {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const char* want = std::getenv("UMSCOPE_PARENT_PID");
  if (want && *want && std::to_string(getppid()) != want) {
    std::cerr << "umbench: the umscope that started it (pid " << want << ") is gone; exiting\n";
    std::_Exit(3);
  }
}

// Parses each argument as a size and prints "TEXT<TAB>BYTES" or "TEXT<TAB>error": the tests compare it
// with Python's sizes.parse_size on one shared table (tests/sizes_table.txt).
int cmd_parse_sizes(int argc, char** argv) {
  for (int i = 2; i < argc; ++i) {
    std::cout << argv[i] << "\t";
    try {
      std::cout << parse_bytes(argv[i]) << "\n";
    } catch (const UsageError&) {
      std::cout << "error\n";
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  watch_parent();
  // Every application declares its model facts (app.hpp): one that lacks them or names an unknown access
  // pattern stops umbench here, before any command, with the application's name.
  for (const BenchInfo& b : bench_registry()) {
    const std::string why = b.category == "application" ? app_facts_problem(b.facts) : "";
    if (!why.empty()) {
      std::cerr << "umbench: application " << b.name << " (native/apps/" << b.name << ".cu): model facts: " << why
                << "\n";
      return 70;
    }
  }
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "info") return cmd_info();
  if (cmd == "list") return cmd_list_json();  // one writer of the registry; --json is kept for its callers
  if (cmd == "rank-placement") return cmd_rank_placement(argc, argv);
#ifdef UMSCOPE_HAVE_MPI
  if (cmd == "run") {
    // Each rank on its own cores before MPI_Init allocates (placement.hpp: plan_rank): from the launcher's
    // environment, else from MPI's view of the host once it is up. The mpi family takes one core per rank.
    const bool one_core = argc > 2 && std::string(argv[2]) == "mpi";
    LaunchRank lr = launcher_rank();
    RankPlace rp;
    try {
      if (lr.local_rank >= 0) rp = pin_rank(lr, one_core);
    } catch (const std::exception& e) {
      rp.how = std::string("not placed: ") + e.what();
    }
    mpi_world_init(&argc, &argv);
    World& w = world();
    if (lr.local_rank < 0) {
      lr = {w.rank, w.size, w.local_rank, w.local_size, "MPI_Comm_split_type (" + lr.source + ")"};
      try {
        rp = pin_rank(lr, one_core);
      } catch (const std::exception& e) {
        rp.how = std::string("not placed: ") + e.what();
      }
    }
    w.rank_placement = rp.how;
    int code = cmd_run(argc, argv);
    mpi_world_finalize();
    return code;
  }
#endif
  if (cmd == "run") return cmd_run(argc, argv);
#ifndef UMSCOPE_HAVE_MPI
  if (cmd == "batch") return run_batch(cmd_run);
#endif
  if (cmd == "check-kind") return cmd_check_kind(argc, argv);
  if (cmd == "parse-sizes") return cmd_parse_sizes(argc, argv);
  std::cerr << "usage: umbench info | list [--json] | check-kind SPEC | rank-placement [...] | parse-sizes SIZE... | run BENCH [--key value]... | batch\n";
  return 2;
}
