// Benchmarks register themselves here; umbench runs one case per process.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "umscope/json.hpp"
#include "umscope/memory.hpp"
#include "umscope/placement.hpp"
#include "umscope/sizes.hpp"
#include "umscope/stats.hpp"

namespace umscope {

// Arguments of one case: "--key value" pairs and bare "--flag"s.
class Args {
 public:
  Args() = default;
  explicit Args(const std::map<std::string, std::string>& kv) : kv_(kv) {}
  bool has(const std::string& k) const { return kv_.count(k) != 0; }
  std::string str(const std::string& k, const std::string& dflt = "") const;
  long long integer(const std::string& k, long long dflt) const;
  size_t bytes(const std::string& k, size_t dflt) const;  // accepts 4G, 512M, 1e9
  double real(const std::string& k, double dflt) const;
  bool flag(const std::string& k) const;
  std::vector<std::string> list(const std::string& k, const std::string& dflt) const;  // comma list
  // A comma list whose every item is one of `allowed`; throws UsageError otherwise.
  std::vector<std::string> choices(const std::string& k, const std::string& dflt,
                                   const std::vector<std::string>& allowed) const;
  // A size rounded down to whole 4 KiB pages; throws UsageError below one page.
  size_t page_bytes(const std::string& k, size_t dflt) const;
  // CPU thread counts: positive integers up to max_threads() or "all" (every CPU this process may
  // use); never empty (throws UsageError).
  std::vector<int> thread_counts(const std::string& k, const std::string& dflt) const;

 private:
  std::map<std::string, std::string> kv_;
};

int max_threads();  // the most CPU threads a --threads list may ask for (4 x the allowed CPUs)

// What a benchmark gets: its arguments and a way to emit records.
struct Context {
  Args args;
  AllocOptions alloc;
  int device = 0;
  int reps = 20;
  int warmup = 2;
  Placement placement;  // where the process runs and allocates (placement.hpp)
  // A record with the common fields filled; the benchmark adds the rest.
  JsonObject record(const std::string& op, const std::string& processor, const KindSpec& kind,
                    size_t bytes) const;
  void emit(const JsonObject& rec) const;
  // Makes GPU `device` current and creates its context, outside any timing;
  // throws Skip with the reason where there is no GPU (or no CUDA build).
  void use_gpu() const;
  // Adds n/median/min/max/spread of samples in `unit` under metric.
  static void put_summary(JsonObject& rec, const std::string& metric, const std::string& unit,
                          const std::vector<double>& samples);
  std::string benchmark;
};

// One option a case takes, declared once for umbench and umscope alike (`umbench list --json`):
// umscope builds its command line, validation and help from these.
struct OptionInfo {
  std::string name;
  std::string type;  // int, real, size, choice, threads, kind, flag, text, dims (I,J,K integers)
  std::string dflt;  // "" where the default depends on the case (the help says how)
  std::string help;
  std::vector<std::string> choices = {};  // type choice
  std::string min = "", max = "";         // int, real, dims, size (bytes): inclusive limits, as text (exact for 64-bit integers)
  bool internal = false;             // set by umscope itself or by tests, not offered to users
};

// What the model knows of an application, declared where it is registered (AppRegistrar, app.hpp).
// `umbench list --json` emits it as the application's "model"; python/umscope/model/apps.py reads it for the
// calibrated model, the simulator's commands, the oversubscription sweep and the report's headline. umbench
// refuses to start when an application's facts are incomplete (app_facts_problem).
struct AppFacts {
  std::string pattern;    // how it touches memory: one of app_patterns()
  std::string generator;  // umsim's generator of its page stream (native/sim/generators.cpp); "" where none
  int iterations;         // the iterations umsim replays (0 where not simulated)
  // Declared traffic: the fractions of its footprint the GPU reads after the CPU's initialisation and writes
  // back as results (the calibrated model's fallback where a record does not declare its arrays).
  double read, written;
  std::string not_simulated = "";  // where generator is "": why umsim has none
};

// The access patterns, in the order the report shows them (the classes of Schieffer et al. section 3.1 and
// Cooper et al. Table 2).
const std::vector<std::string>& app_patterns();
// Why an application's facts are incomplete or wrong, or "" where they are whole.
std::string app_facts_problem(const AppFacts& f);

struct BenchInfo {
  std::string name;
  std::string processor;  // "gpu", "cpu" or "gpu+cpu"
  std::string help;
  std::vector<std::string> ops;
  std::vector<std::string> params;  // argument names it reads, for `umbench list`
  std::function<void(Context&)> run;
  // Options of its own, or declared differently for it, beside option_catalogue()'s.
  std::vector<OptionInfo> options = {};
  std::string category = "family";  // "family" (a benchmark family) or "application" (AppRegistrar)
  AppFacts facts = {};               // an application's model facts (AppRegistrar); unused by a family
};

std::vector<BenchInfo>& bench_registry();

// Options shared by many benchmarks (native/core/options.cpp).
const std::vector<OptionInfo>& option_catalogue();
// The declaration of `name` for benchmark b: its own, else the catalogue's; nullptr where neither has one.
const OptionInfo* find_option(const BenchInfo& b, const std::string& name);

struct BenchRegistrar {
  explicit BenchRegistrar(BenchInfo info) { bench_registry().push_back(std::move(info)); }
};

}  // namespace umscope
