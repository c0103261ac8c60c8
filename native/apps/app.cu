// The application harness (see umscope/app.hpp).
#include "umscope/app.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <sys/stat.h>

#include "umscope/caps.hpp"
#include "umscope/checksum.hpp"
#include "umscope/traffic.hpp"
#include "umscope/timing.hpp"

namespace umscope {

namespace {
using clk = std::chrono::steady_clock;
double ms_since(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }

}  // namespace

struct AppRun::Slot {
  std::string name;
  Use use;
  std::unique_ptr<Buffer> host, dev;  // dev only where the kind is device memory (staged copies)
  bool scratch = false;
};

AppRun::AppRun(Context& c, const std::string& name) : ctx(c), name_(name) {
  const std::string proc = ctx.args.choices("processor", "gpu", {"gpu", "cpu"})[0];
  gpu_ = proc == "gpu";
  mode_ = gpu_ ? ctx.args.choices("mode", "explicit", app_modes())[0] : "cpu";
  dump_dir_ = ctx.args.str("dump", "");
  if (!dump_dir_.empty()) {
    struct stat st{};
    if (stat(dump_dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      throw UsageError("--dump needs an existing directory, got '" + dump_dir_ + "'");
  }
  team_.reset(new ThreadTeam(ctx.args.thread_counts("threads", "all")[0]));
  if (gpu_) {
    auto t = clk::now();
    ctx.use_gpu();
    context_ms_ = ms_since(t);
    sms_ = gpu_caps(ctx.device).sms;
    clock_.reset(new EventClock());
  }
}

AppRun::~AppRun() = default;

std::vector<std::string> app_params(std::initializer_list<const char*> own) {
  std::vector<std::string> p = {"mode", "processor", "threads", "check", "dump", "footprint"};
  for (const char* o : own) p.push_back(o);
  return p;
}

size_t AppRun::footprint(size_t dflt) const { return ctx.args.bytes("footprint", dflt); }

size_t AppRun::square_side(size_t dflt_footprint, double cell_bytes) const {
  return static_cast<size_t>(std::sqrt(double(footprint(dflt_footprint)) / cell_bytes));
}

void AppRun::grid_dims(size_t dflt_footprint, double cell_bytes, size_t min, size_t& rows, size_t& cols) const {
  const long long side = static_cast<long long>(square_side(dflt_footprint, cell_bytes));
  const long long r = ctx.args.integer("rows", side), c = ctx.args.integer("cols", r);
  if (r < static_cast<long long>(min) || c < static_cast<long long>(min))
    throw UsageError(name_ + " needs at least " + std::to_string(min) + " x " + std::to_string(min) + " cells");
  rows = static_cast<size_t>(r);
  cols = static_cast<size_t>(c);
}

bool AppRun::check(double reference_flops) const {
  if (ctx.args.has("check")) return ctx.args.flag("check");
  return gpu_ && data_bytes_ <= (64u << 20) && reference_flops <= kReferenceFlops;
}

void AppRun::verify(const std::function<void()>& fn) {
  auto t = clk::now();
  fn();
  verify_ms_ += ms_since(t);
}

void AppRun::copy_out(void* dst, const void* src, size_t bytes) {
  if (gpu_) UM_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  else std::memcpy(dst, src, bytes);
}

std::vector<size_t> AppRun::grid_sample(size_t rows, size_t cols, size_t random) const {
  std::vector<size_t> at;
  auto edge = [](size_t n) {
    std::vector<size_t> e;
    for (size_t k : {size_t(0), size_t(1), n - 2, n - 1})
      if (k < n) e.push_back(k);
    return e;
  };
  for (size_t r : edge(rows))
    for (size_t c = 0; c < cols; ++c) at.push_back(r * cols + c);
  for (size_t c : edge(cols))
    for (size_t r = 0; r < rows; ++r) at.push_back(r * cols + c);
  const uint64_t s = mix64(seed() ^ 0x5a3c1e0f2d4b6987ull);
  const size_t o1 = s % cols, o2 = mix64(s) % cols, span = std::max(rows, cols);
  for (size_t t = 0; t < span; ++t) {
    at.push_back((t % rows) * cols + (t + o1) % cols);
    at.push_back((t % rows) * cols + (o2 + cols - t % cols) % cols);
  }
  for (size_t k = 0; k < random; ++k) at.push_back(mix64(s + 1 + k) % (rows * cols));
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  return at;
}

std::vector<size_t> AppRun::index_sample(size_t n, size_t random) const {
  std::vector<size_t> at;
  for (size_t k : {size_t(0), size_t(1), n - 2, n - 1})
    if (k < n) at.push_back(k);
  const uint64_t s = mix64(seed() ^ 0x1f2e3d4c5b6a7988ull);
  for (size_t k = 0; k < random; ++k) at.push_back(mix64(s + k) % n);
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  return at;
}

std::string AppRun::kind_of(Use use) const {
  if (!gpu_) return "system";
  return mode_kind(mode_, use == Use::in);
}

void AppRun::add(const std::string& name, size_t bytes, Use use, const std::string& kind, void** host, void** dev) {
  if (bytes == 0) throw UsageError(name + ": an array of zero elements (the dimensions are too small)");
  KindSpec k = parse_kind(kind.empty() ? kind_of(use) : kind);
  // Memory only GPUs reach (device, async and vmm on the GPU, a peer GPU's) gets a host array beside it, copied in
  // and back (the 4 x H100 seed run skipped every GEMM with a peer:N operand: its CPU initialisation was refused).
  const KindPlace where = kind_place(k, ctx.device);
  const bool gpu_only = where.reachable_by == "gpu";
  const bool on_this_gpu = where.location == "gpu";
  if (!gpu_only) k.policy["first_touch"] = "none";  // the application initialises it
  auto t = clk::now();
  std::unique_ptr<Slot> s(new Slot{name, use, nullptr, nullptr, false});
  if (gpu_only) {
    if (on_this_gpu) device_total_ += bytes;  // a peer GPU's memory is refused by its own cudaMalloc when short
    const GpuCaps& caps = gpu_caps(ctx.device);
    if (on_this_gpu && caps.present && device_total_ > caps.free_mem)
      throw Refused(name_ + " needs " + gib_text(device_total_) + " of GPU memory so far; " +
                    gib_text(caps.free_mem) + " is free");
    s->host.reset(new Buffer(parse_kind("system,first_touch=none"), bytes, ctx.alloc));
    s->dev.reset(new Buffer(k, bytes, ctx.alloc));
    *dev = s->dev->reach(true);
  } else {
    if (k.name == "managed") {
      managed_total_ += bytes;
      check_managed_memory(managed_total_, ctx.alloc);
    }
    s->host.reset(new Buffer(k, bytes, ctx.alloc));
    *dev = s->host->reach(gpu_);
  }
  *host = s->host->reach(false);
  if (gpu_) UM_CUDA(cudaDeviceSynchronize());
  alloc_ms_ += ms_since(t);
  data_bytes_ += bytes;
  use_bytes_[use == Use::in ? 0 : use == Use::out ? 1 : 2] += bytes;
  arrays_ += (arrays_.empty() ? "" : ",") + name + ":" + (use == Use::in ? "in" : use == Use::out ? "out" : "inout") +
             ":" + std::to_string(bytes);
  slots_.push_back(std::move(s));
}

void* AppRun::add_scratch(size_t bytes) {
  if (bytes == 0) throw UsageError("a scratch array of zero elements");
  auto t = clk::now();
  std::unique_ptr<Slot> s(new Slot{"scratch", Use::inout, nullptr, nullptr, true});
  KindSpec k = parse_kind(gpu_ ? "device" : "system,first_touch=none");
  if (gpu_) {
    device_total_ += bytes;
    const GpuCaps& caps = gpu_caps(ctx.device);
    if (device_total_ > caps.free_mem)
      throw Refused(name_ + " needs " + gib_text(device_total_) + " of GPU memory so far; " +
                    gib_text(caps.free_mem) + " is free");
  }
  s->host.reset(new Buffer(k, bytes, ctx.alloc));
  void* p = s->host->reach(gpu_);
  if (gpu_) UM_CUDA(cudaDeviceSynchronize());
  alloc_ms_ += ms_since(t);
  slots_.push_back(std::move(s));
  return p;
}

void AppRun::init(const std::function<void()>& fn) {
  auto t = clk::now();
  fn();
  init_ms_ += ms_since(t);
}

void AppRun::to_gpu() {
  if (!gpu_) return;
  auto t = clk::now();
  for (auto& s : slots_) {
    if (s->scratch) continue;
    if (s->dev) {
      if (s->use != Use::out)
        UM_CUDA(cudaMemcpy(s->dev->gpu(), s->host->cpu(), s->host->bytes(), cudaMemcpyHostToDevice));
    } else {
      s->host->place(Initializer{});  // first_touch=none: only the advice and the prefetch
    }
  }
  UM_CUDA(cudaDeviceSynchronize());
  transfer_ms_ += ms_since(t);
}

double AppRun::iteration(const std::function<void()>& fn) {
  double ms = 0;
  if (gpu_) {
    ms = clock_->time_ms([&] {
      fn();
      UM_CUDA(cudaGetLastError());
    });
  } else {
    auto t = clk::now();
    fn();
    ms = ms_since(t);
  }
  iter_ms_.push_back(ms);
  return ms;
}

void AppRun::back() {
  auto t = clk::now();
  std::vector<std::pair<const unsigned char*, size_t>> outs;
  for (auto& s : slots_) {
    if (s->scratch || s->use == Use::in) continue;
    if (s->dev) {
      UM_CUDA(cudaMemcpy(s->host->cpu(), s->dev->gpu(), s->host->bytes(), cudaMemcpyDeviceToHost));
    } else if (gpu_ && s->host->kind().get("prefetch", "none") != "none") {
      s->host->prefetch("cpu");
    }
    outs.push_back({static_cast<const unsigned char*>(s->host->cpu()), s->host->bytes()});
  }
  // The checksum: the CPU reads every result.
  uint64_t total = kChecksumSeed;
  for (auto& o : outs) total = checksum_fold(total, o.first, o.second, team_.get());
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(total));
  checksum_ = buf;
  back_ms_ += ms_since(t);
}

void AppRun::compared(const std::string& what, double err, double tol) {
  max_error_ = std::max(max_error_, err);
  if (!(err <= tol))
    throw VerifyError(what + " differs from the CPU reference: max |error| / max |value| = " + json_number(err) +
                      " > " + json_number(tol));
}

void AppRun::finish(JsonObject& extra, double bytes_per_iteration, double flops_per_iteration) {
  auto t = clk::now();
  slots_.clear();
  if (gpu_) UM_CUDA(cudaDeviceSynchronize());
  free_ms_ = ms_since(t);
  if (iter_ms_.empty()) throw std::logic_error(name_ + ": no iteration was timed");
  double compute = 0;
  for (double v : iter_ms_) compute += v;
  const std::string pname = gpu_ ? "gpu" + std::to_string(ctx.device) : "cpu";
  KindSpec kind = parse_kind(kind_of(Use::inout));
  JsonObject rec = ctx.record("app", pname, kind, data_bytes_);
  Context::put_summary(rec, "time_per_iteration", "ms", iter_ms_);  // samples in iteration order
  rec.set("app", name_);
  rec.set("mode", mode_);
  rec.set("iterations", static_cast<int>(iter_ms_.size()));
  rec.set("context_ms", context_ms_);
  rec.set("alloc_ms", alloc_ms_);
  rec.set("init_ms", init_ms_);
  rec.set("transfer_ms", transfer_ms_);
  rec.set("compute_ms", compute);
  rec.set("back_ms", back_ms_);
  rec.set("free_ms", free_ms_);
  const double total = context_ms_ + alloc_ms_ + init_ms_ + transfer_ms_ + compute + back_ms_ + free_ms_;
  rec.set("total_ms", total);
  // The studies' convention for speedups: everything but the CPU's initialisation of the inputs.
  rec.set("total_excl_init_ms", total - init_ms_);
  rec.set("device_bytes", static_cast<unsigned long long>(device_total_));
  // The access profile the calibrated model reads: bytes of the arrays declared in, out and inout.
  rec.set("in_bytes", static_cast<unsigned long long>(use_bytes_[0]));
  rec.set("out_bytes", static_cast<unsigned long long>(use_bytes_[1]));
  rec.set("inout_bytes", static_cast<unsigned long long>(use_bytes_[2]));
  rec.set("arrays", arrays_);
  const double med = summarize(iter_ms_).median;
  if (bytes_per_iteration > 0) {
    rec.set("traffic_bytes", bytes_per_iteration);
    rec.set("bandwidth_gbps", gb_per_s(bytes_per_iteration, med * 1e-3));
  }
  if (flops_per_iteration > 0) {
    rec.set("flops", flops_per_iteration);
    rec.set("gflops", flops_per_iteration / (med * 1e-3) / 1e9);
  }
  rec.set("checksum", checksum_);
  if (max_error_ >= 0) rec.set("max_error", max_error_);
  rec.set("checked", true);  // some check ran (finish() refuses a record without one): `verified` names it
  if (!gpu_) rec.set("threads", team_->size());
  rec.set("verify_ms", verify_ms_);
  rec.merge(extra);
  // Set only after the check ran and passed (the checks throw otherwise): the full reference, or the
  // application's sampled check or invariant, named by it. The suite's cross-mode checksum comparison is an
  // extra check on top, never the only one.
  if (method_.empty() && max_error_ < 0) throw std::logic_error(name_ + ": no check of the result ran");
  rec.set("verified", method_.empty() ? "cpu-reference" : method_);
  ctx.emit(rec);
}

}  // namespace umscope
