// Cases that misbehave on purpose, so the runner's handling of crashes,
// hangs, GPU faults and skips is tested. Not part of any default plan.
#include <csignal>
#include <cstdlib>
#include <thread>

#include "umscope/bench.hpp"
#include "umscope/errors.hpp"
#include "umscope/traffic.hpp"

namespace umscope {
#ifdef UMSCOPE_HAVE_CUDA
void selftest_gpu_fault();  // selftest_gpu.cu: a kernel that writes to an illegal address
#endif
namespace {

void run_selftest(Context& ctx) {
  std::string mode = ctx.args.str("mode", "ok");
  if (mode == "ok") {
    JsonObject rec;
    rec.set("type", "record").set("benchmark", "selftest").set("op", "ok").set("processor", "cpu");
    rec.set("metric", "value").set("unit", "1").set("value", 1.0).set("n", 1).set("verified", "none");
    ctx.emit(rec);
  } else if (mode == "summary") {
    // The statistics every record carries, over samples given by the caller (the arithmetic tests).
    std::vector<double> samples;
    for (const std::string& v : ctx.args.list("samples", "1")) samples.push_back(std::strtod(v.c_str(), nullptr));
    JsonObject rec = ctx.record("summary", "cpu", parse_kind("system"), 0);
    Context::put_summary(rec, "value", "1", samples);
    rec.set("verified", "none");
    ctx.emit(rec);
  } else if (mode == "traffic") {
    // The shared traffic arithmetic (umscope/traffic.hpp): arrays per stream operation, and 10^9 bytes in
    // one second as GB/s.
    for (const std::string& op : stream_op_names()) {
      JsonObject rec = ctx.record(op, "cpu", parse_kind("system"), 1000000000);
      rec.set("arrays", stream_arrays(op)).set("metric", "rate").set("unit", "GB/s");
      rec.set("value", gb_per_s(1e9 * stream_arrays(op), 1.0)).set("verified", "none");
      ctx.emit(rec);
    }
  } else if (mode == "skip") {
    throw Skip("selftest asked to be skipped");
  } else if (mode == "crash") {
    std::raise(SIGSEGV);
  } else if (mode == "abort") {
    std::abort();
  } else if (mode == "sleep") {
    // A case that takes --ms milliseconds and then measures: for the signal tests.
    const long long ms = ctx.args.integer("ms", 200);
    if (ms < 0 || ms > 600000) throw UsageError("--ms takes 0 to 600000 milliseconds");
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    JsonObject rec;
    rec.set("type", "record").set("benchmark", "selftest").set("op", "sleep").set("processor", "cpu");
    rec.set("metric", "value").set("unit", "ms").set("value", static_cast<double>(ms)).set("n", 1);
    ctx.emit(rec);
  } else if (mode == "hang") {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  } else if (mode == "gpu-fault") {
#ifdef UMSCOPE_HAVE_CUDA
    selftest_gpu_fault();
#else
    throw Skip("gpu-fault needs CUDA");
#endif
  } else if (mode == "fail") {
    throw std::runtime_error("selftest asked to fail");
  } else {
    throw UsageError("unknown selftest mode '" + mode + "'");
  }
}

BenchRegistrar reg({"selftest", "cpu", "misbehaves on purpose: --mode ok|skip|fail|crash|abort|hang|gpu-fault|sleep "
                    "(--ms); --mode summary --samples 1,2,3: the statistics of the given samples; --mode traffic: "
                    "arrays per stream operation",
                    {"ok"}, {"mode", "samples", "ms"}, run_selftest});

}  // namespace
}  // namespace umscope
