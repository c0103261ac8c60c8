#include "umscope/bench.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "umscope/caps.hpp"
#include "umscope/errors.hpp"
#include "umscope/os.hpp"
#include "umscope/world.hpp"

namespace umscope {

std::vector<BenchInfo>& bench_registry() {
  static std::vector<BenchInfo> r;
  return r;
}

const std::vector<std::string>& app_patterns() {
  static const std::vector<std::string> p = {"streaming", "stencil", "dynamic programming", "irregular",
                                             "dense compute"};
  return p;
}

std::string app_facts_problem(const AppFacts& f) {
  const auto& known = app_patterns();
  if (std::find(known.begin(), known.end(), f.pattern) == known.end()) {
    std::string all;
    for (const std::string& p : known) all += (all.empty() ? "" : ", ") + p;
    return "access pattern '" + f.pattern + "' is none of " + all;
  }
  if (f.generator.empty() == f.not_simulated.empty())
    return "it needs either umsim's generator or the reason it is not simulated (not both)";
  if (f.generator.empty() ? f.iterations != 0 : f.iterations < 1)
    return "iterations umsim replays: at least 1 with a generator, 0 without one";
  if (!(f.read > 0 && f.read <= 1) || !(f.written >= 0 && f.written <= 1))
    return "read must be in (0, 1] and written in [0, 1] (fractions of the footprint)";
  return "";
}

std::string Args::str(const std::string& k, const std::string& dflt) const {
  auto it = kv_.find(k);
  return it == kv_.end() ? dflt : it->second;
}

long long Args::integer(const std::string& k, long long dflt) const {
  if (!has(k)) return dflt;
  std::string v = str(k);
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end) throw UsageError("--" + k + " needs an integer, got '" + v + "'");
  if (errno == ERANGE) throw UsageError("--" + k + " is out of range: '" + v + "'");
  return x;
}

size_t Args::bytes(const std::string& k, size_t dflt) const {
  return has(k) ? parse_bytes(str(k)) : dflt;
}

double Args::real(const std::string& k, double dflt) const {
  if (!has(k)) return dflt;
  std::string v = str(k);
  char* end = nullptr;
  errno = 0;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end) throw UsageError("--" + k + " needs a number, got '" + v + "'");
  if (errno == ERANGE || !std::isfinite(x)) throw UsageError("--" + k + " needs a finite number, got '" + v + "'");
  return x;
}

bool Args::flag(const std::string& k) const {
  if (!has(k)) return false;
  std::string v = str(k);
  return v != "0" && v != "false" && v != "no";
}

std::vector<std::string> Args::list(const std::string& k, const std::string& dflt) const {
  std::vector<std::string> out;
  std::stringstream ss(has(k) ? str(k) : dflt);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<std::string> Args::choices(const std::string& k, const std::string& dflt,
                                       const std::vector<std::string>& allowed) const {
  std::vector<std::string> out = list(k, dflt);
  if (out.empty()) throw UsageError("--" + k + " needs at least one value");
  for (const std::string& v : out)
    if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
      std::string all;
      for (const std::string& a : allowed) all += (all.empty() ? "" : ", ") + a;
      throw UsageError("unknown " + k + " '" + v + "' (" + all + ")");
    }
  return out;
}

size_t Args::page_bytes(const std::string& k, size_t dflt) const {
  size_t b = bytes(k, dflt) / 4096 * 4096;
  if (b == 0) throw UsageError("--" + k + " must be at least 4 KiB");
  return b;
}

int max_threads() {
  // Oversubscribing the CPUs four times over measures the scheduler, not memory; more would
  // only spend minutes creating threads.
  return 4 * std::max<int>(1, static_cast<int>(os::allowed_cpus().size()));
}

std::vector<int> Args::thread_counts(const std::string& k, const std::string& dflt) const {
  int all = std::max<int>(1, static_cast<int>(os::allowed_cpus().size()));
  std::vector<int> out;
  for (const std::string& t : list(k, dflt)) {
    if (t == "all") {
      out.push_back(all);
      continue;
    }
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(t.c_str(), &end, 10);
    if (t.empty() || *end || v < 1) throw UsageError("--" + k + " takes positive integers or 'all', got '" + t + "'");
    if (errno == ERANGE || v > max_threads())
      throw UsageError("--" + k + " " + t + " is more than " + std::to_string(max_threads()) +
                       " (4 x the CPUs this process may use)");
    out.push_back(static_cast<int>(v));
  }
  // Callers read element 0: an empty list (--threads '' or ',') is a usage error, never a crash.
  if (out.empty()) throw UsageError("--" + k + " needs at least one thread count (or 'all')");
  return out;
}

JsonObject Context::record(const std::string& op, const std::string& processor,
                           const KindSpec& kind, size_t bytes) const {
  JsonObject r;
  r.set("type", "record");
  r.set("benchmark", benchmark);
  r.set("op", op);
  r.set("processor", processor);
  r.set("kind", kind.label());
  r.set("policy", kind.policy_str());
  const KindPlace where = kind_place(kind, device);  // the kind's behaviour (memory.hpp)
  r.set("location", where.location);
  r.set("reachable_by", where.reachable_by);
  r.set("bytes", static_cast<unsigned long long>(bytes));
  r.set("device", device);
  r.set("placement", placement.mode);
  r.set("cpu_set", cpu_ranges(placement.cpus));
  r.set("numa_node", placement.node);
  r.set("placement_source", placement.source);
  return r;
}

void Context::emit(const JsonObject& rec) const {
  if (world().rank != 0) return;  // one writer: rank 0 prints the records of a multi-rank case
  std::cout << rec.str() << "\n" << std::flush;
}

void Context::use_gpu() const {
  const GpuCaps& caps = gpu_caps(device);
  if (!caps.present) throw Skip(caps.why_absent);
#ifdef UMSCOPE_HAVE_CUDA
  UM_CUDA(cudaSetDevice(device));
  UM_CUDA(cudaFree(nullptr));
#endif
}

void Context::put_summary(JsonObject& rec, const std::string& metric, const std::string& unit,
                          const std::vector<double>& samples) {
  Summary s = summarize(samples);
  rec.set("metric", metric);
  rec.set("unit", unit);
  rec.set("n", s.n);
  rec.set("median", s.median);
  rec.set("min", s.min);
  rec.set("max", s.max);
  rec.set("value", s.median);
  rec.set("spread", s.spread());
  rec.set("samples", samples);
}

}  // namespace umscope
