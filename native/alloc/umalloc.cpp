// libumalloc: the allocator `umscope place` installs under PyTorch
// (torch.cuda.memory.CUDAPluggableAllocator(path, "umscope_alloc",
// "umscope_free")). Every allocation is served from a memory kind, the same
// KindSpec/Buffer code umbench measures with, its policies (first touch,
// advice, prefetch) applied once per block.
//
// Configuration (environment, read at the first allocation; or the
// umscope_place_configure call):
//   UMSCOPE_PLACE_KIND   the kind of every allocation no rule claims (default device)
//   UMSCOPE_PLACE_RULES  size rules, ';'-separated, first match wins:
//                        '>=64M:managed,advise=preferred:cpu;<64M:device'
//   UMSCOPE_PLACE_ALLOW_OVERSUBSCRIPTION=1  let managed blocks exceed the free GPU memory
//   UMSCOPE_PLACE_STATS  where to write the bookkeeping (JSON) at exit; %p stands for the process id
//   UMSCOPE_PLACE_CACHE=0  release every block at free (default: keep it for reuse)
//   UMSCOPE_PLACE_TEST_BACKEND=BYTES  tests only: blocks come from the C heap,
//                        BYTES stands for the GPU's free memory (guard, no GPU needed)
//
// Blocks are cached like PyTorch's own allocator does: a freed block is
// reused for a request of the same size class and kind on the same stream
// (stream order makes that safe), so a decode loop pays for cudaMalloc,
// cudaFree (which synchronises) and the kind's policies only while it grows.
// Size classes: below 1 MiB the next power of two (at least 512 B), from
// 1 MiB up a multiple of 2 MiB.
//
// The guard: a managed block that would take all managed bytes (live and
// cached) above the GPU memory free when the library started is refused
// unless oversubscription is allowed; the cached managed blocks are released
// and the request retried first. A refused or failed request makes
// umscope_alloc throw std::runtime_error with the reason (PyTorch turns it
// into a RuntimeError; this PyTorch's pluggable allocator does not check
// for nullptr), after one line on stderr.
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "umscope/errors.hpp"
#include "umscope/json.hpp"
#include "umscope/memory.hpp"
#include "umscope/sizes.hpp"

#define UMSCOPE_API extern "C" __attribute__((visibility("default")))

namespace {

using umscope::KindSpec;

struct Rule {
  bool at_least;  // ">=" (true) or "<" (false)
  size_t bytes;
  KindSpec kind;
  std::string text;
};

struct Counters {
  long long requests = 0, frees = 0, requested_bytes = 0, live_bytes = 0, peak_live_bytes = 0;
  long long blocks_made = 0, block_bytes = 0, peak_block_bytes = 0, reused = 0, refused = 0;
  std::map<std::string, std::pair<long long, long long>> by_class;  // size class -> (requests, bytes)
};

struct Block {
  std::unique_ptr<umscope::Buffer> buf;  // null with the test backend
  void* heap = nullptr;                  // test backend
  void* ptr = nullptr;                   // what the caller got
  size_t cls = 0;                        // size-class bytes
  size_t requested = 0;
  int kind = 0;
  void* stream = nullptr;
};

struct State {
  std::mutex mu;
  bool configured = false;
  std::vector<KindSpec> kinds;  // every kind seen; index = counters slot
  std::vector<Counters> counters;
  int default_kind = 0;
  std::vector<Rule> rules;
  bool allow_oversub = false, cache = true, test_backend = false;
  long long gpu_free_at_start = -1;  // -1: not read yet
  long long managed_block_bytes = 0;
  std::unordered_map<void*, Block*> live;
  std::map<std::tuple<int, size_t, void*>, std::vector<Block*>> free_blocks;
  std::vector<std::string> refusals;
  std::vector<std::string> phases;  // the default kind over time
  std::string config_error;
};

State& st() {
  static State* s = new State;  // never destroyed: frees may come after static destructors
  return *s;
}

size_t size_class(size_t n) {
  const size_t mib = size_t(1) << 20;
  if (n >= mib) return (n + 2 * mib - 1) / (2 * mib) * (2 * mib);
  size_t c = 512;
  while (c < n) c <<= 1;
  return c;
}

// The bookkeeping's size classes (requests by size), coarser than the cache's.
std::string class_label(size_t n) {
  static const std::pair<size_t, const char*> edges[] = {
      {size_t(64) << 10, "<64KiB"}, {size_t(1) << 20, "64KiB-1MiB"}, {size_t(16) << 20, "1MiB-16MiB"},
      {size_t(256) << 20, "16MiB-256MiB"}};
  for (auto& e : edges)
    if (n < e.first) return e.second;
  return ">=256MiB";
}

int kind_index(State& s, const KindSpec& k) {
  for (size_t i = 0; i < s.kinds.size(); ++i)
    if (s.kinds[i].str() == k.str()) return static_cast<int>(i);
  s.kinds.push_back(k);
  s.counters.emplace_back();
  return static_cast<int>(s.kinds.size() - 1);
}

std::vector<Rule> parse_rules(const std::string& text) {
  std::vector<Rule> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ';')) {
    if (item.find_first_not_of(" \t") == std::string::npos) continue;
    Rule r;
    r.text = item;
    size_t op = 0;
    if (item.rfind(">=", 0) == 0) {
      r.at_least = true;
      op = 2;
    } else if (item.rfind("<", 0) == 0) {
      r.at_least = false;
      op = 1;
    } else {
      throw umscope::UsageError("rule '" + item + "' must start with >=SIZE: or <SIZE: (e.g. '>=64M:managed')");
    }
    size_t colon = item.find(':', op);
    if (colon == std::string::npos)
      throw umscope::UsageError("rule '" + item + "' needs ':KIND' after the size (e.g. '>=64M:managed')");
    try {
      r.bytes = umscope::parse_bytes(item.substr(op, colon - op));
    } catch (const umscope::UsageError& e) {
      throw umscope::UsageError("rule '" + item + "': " + e.what());
    }
    r.kind = umscope::parse_kind(item.substr(colon + 1));
    out.push_back(r);
  }
  return out;
}

const char* env(const char* k) {
  const char* v = std::getenv(k);
  return v && *v ? v : nullptr;
}

// Applies a configuration; throws UsageError on a bad kind or rule.
void configure(State& s, const std::string& kind, const std::string& rules, int allow) {
  KindSpec k = umscope::parse_kind(kind.empty() ? "device" : kind);
  std::vector<Rule> rs = parse_rules(rules);
  s.default_kind = kind_index(s, k);
  s.rules = rs;
  for (auto& r : s.rules) kind_index(s, r.kind);
  if (allow >= 0) s.allow_oversub = allow != 0;
  s.phases.push_back(k.str());
  s.configured = true;
}

void write_at_exit();

void configure_from_env(State& s) {
  if (s.configured) return;
  // Registered at the first use, after this library's statics (the kind registry) were built, so that it
  // runs before they are destroyed.
  std::atexit(write_at_exit);
  s.cache = !(env("UMSCOPE_PLACE_CACHE") && std::string(env("UMSCOPE_PLACE_CACHE")) == "0");
  if (const char* t = env("UMSCOPE_PLACE_TEST_BACKEND")) {
    s.test_backend = true;
    s.gpu_free_at_start = static_cast<long long>(umscope::parse_bytes(t));
  }
  const char* a = env("UMSCOPE_PLACE_ALLOW_OVERSUBSCRIPTION");
  try {
    configure(s, env("UMSCOPE_PLACE_KIND") ? env("UMSCOPE_PLACE_KIND") : "device",
              env("UMSCOPE_PLACE_RULES") ? env("UMSCOPE_PLACE_RULES") : "", a && std::string(a) != "0");
  } catch (const std::exception& e) {
    s.config_error = e.what();
    s.configured = true;
    s.kinds.push_back(umscope::parse_kind("device"));
    s.counters.emplace_back();
  }
}

int route(State& s, size_t bytes) {
  for (auto& r : s.rules)
    if (r.at_least ? bytes >= r.bytes : bytes < r.bytes) return kind_index(s, r.kind);
  return s.default_kind;
}

long long gpu_free(State& s, int device) {
  if (s.gpu_free_at_start >= 0) return s.gpu_free_at_start;
#ifdef UMSCOPE_HAVE_CUDA
  size_t f = 0, t = 0;
  cudaSetDevice(device);
  if (cudaMemGetInfo(&f, &t) == cudaSuccess) s.gpu_free_at_start = static_cast<long long>(f);
  else cudaGetLastError();
#else
  (void)device;
#endif
  return s.gpu_free_at_start;
}

void release(State& s, Block* b) {
  Counters& c = s.counters[b->kind];
  c.block_bytes -= static_cast<long long>(b->cls);
  if (s.kinds[b->kind].name == "managed") s.managed_block_bytes -= static_cast<long long>(b->cls);
  if (b->heap) std::free(b->heap);
  delete b;  // the Buffer's destructor frees the kind's memory
}

void drop_cache(State& s, int kind) {
  for (auto it = s.free_blocks.begin(); it != s.free_blocks.end();) {
    if (kind >= 0 && std::get<0>(it->first) != kind) {
      ++it;
      continue;
    }
    for (Block* b : it->second) release(s, b);
    it = s.free_blocks.erase(it);
  }
}

std::string refuse(State& s, int k, size_t bytes, const std::string& why) {
  s.counters[k].refused += 1;
  std::string msg = "umscope place: refusing " + std::to_string(bytes) + " B (" + umscope::gib_text(bytes) +
                    ") of '" + s.kinds[k].str() + "': " + why;
  s.refusals.push_back(msg);
  std::fprintf(stderr, "%s\n", msg.c_str());
  return msg;
}

// The allocation path. for_gpu: return the pointer the GPU uses (PyTorch), else the CPU's (tests).
// Returns nullptr with *err set when refused or failed.
void* place_alloc(size_t bytes, int device, void* stream, bool for_gpu, std::string* err) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  configure_from_env(s);
  if (!s.config_error.empty()) {
    *err = "umscope place: bad configuration: " + s.config_error;
    return nullptr;
  }
  if (bytes == 0) return nullptr;
  int k = route(s, bytes);
  Counters& c = s.counters[k];
  size_t cls = size_class(bytes);
  Block* b = nullptr;
  auto key = std::make_tuple(k, cls, stream);
  auto fit = s.free_blocks.find(key);
  if (fit != s.free_blocks.end() && !fit->second.empty()) {
    b = fit->second.back();
    fit->second.pop_back();
    c.reused += 1;
  } else {
    const KindSpec& kind = s.kinds[k];
    bool managed = kind.name == "managed";
    if (managed && !s.allow_oversub) {
      long long free_b = gpu_free(s, device);
      if (free_b >= 0 && s.managed_block_bytes + static_cast<long long>(cls) > free_b) {
        drop_cache(s, k);
        if (s.managed_block_bytes + static_cast<long long>(cls) > free_b) {
          *err = refuse(s, k, bytes,
                        "managed blocks would total " + umscope::gib_text(s.managed_block_bytes + cls) +
                            ", more than the " + umscope::gib_text(static_cast<size_t>(free_b)) +
                            " of GPU memory free at the start, and oversubscribing a shared GPU can hang it; "
                            "pass --allow-oversubscription on a machine you own");
          return nullptr;
        }
      }
    }
    b = new Block;
    b->kind = k;
    b->cls = cls;
    try {
      if (s.test_backend) {
        b->heap = std::malloc(cls);
        if (!b->heap) throw umscope::Refused("the C heap has no " + std::to_string(cls) + " B");
        b->ptr = b->heap;
      } else {
        umscope::AllocOptions opt;
        opt.device = device;
        opt.allow_oversubscription = s.allow_oversub;
        try {
          b->buf.reset(new umscope::Buffer(kind, cls, opt));
        } catch (const umscope::Refused&) {
          drop_cache(s, -1);  // give the cached blocks back and try once more
          b->buf.reset(new umscope::Buffer(kind, cls, opt));
        }
        // PyTorch never writes a segment when it gets one, and neither does this library where only the GPU
        // reaches the block (device, peer:N, async, vmm at the GPU): the kind's default GPU first touch (a
        // memset and a device-wide synchronise) moves no page there, and inside a CUDA graph's capture, where
        // PyTorch asks for segments, the synchronise is refused and invalidates the capture (seen on the
        // H100: cudaErrorStreamCaptureUnsupported). A first_touch the user names is still applied.
        umscope::Initializer init;
        if (kind.get("first_touch").empty() && umscope::kind_place(kind, device).reachable_by == "gpu")
          init.gpu = [](void*, size_t) {};
        b->buf->place(init);
        b->ptr = for_gpu ? b->buf->reach(true) : b->buf->reach(false);
      }
    } catch (const std::exception& e) {
      delete b;
      *err = refuse(s, k, bytes, e.what());
      return nullptr;
    }
    c.blocks_made += 1;
    c.block_bytes += static_cast<long long>(cls);
    if (c.block_bytes > c.peak_block_bytes) c.peak_block_bytes = c.block_bytes;
    if (managed) s.managed_block_bytes += static_cast<long long>(cls);
  }
  // Requests are counted once served (refusals are counted apart).
  c.requests += 1;
  c.requested_bytes += static_cast<long long>(bytes);
  auto& cl = c.by_class[class_label(bytes)];
  cl.first += 1;
  cl.second += static_cast<long long>(bytes);
  b->requested = bytes;
  b->stream = stream;
  c.live_bytes += static_cast<long long>(bytes);
  if (c.live_bytes > c.peak_live_bytes) c.peak_live_bytes = c.live_bytes;
  s.live[b->ptr] = b;
  return b->ptr;
}

void place_free(void* ptr) {
  if (!ptr) return;
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = s.live.find(ptr);
  if (it == s.live.end()) {
    std::fprintf(stderr, "umscope place: free of a pointer it did not allocate (%p) ignored\n", ptr);
    return;
  }
  Block* b = it->second;
  s.live.erase(it);
  Counters& c = s.counters[b->kind];
  c.frees += 1;
  c.live_bytes -= static_cast<long long>(b->requested);
  if (s.cache) s.free_blocks[std::make_tuple(b->kind, b->cls, b->stream)].push_back(b);
  else release(s, b);
}

std::string counters_json(const Counters& c) {
  umscope::JsonObject o;
  o.set("requests", c.requests).set("frees", c.frees).set("requested_bytes", c.requested_bytes);
  o.set("live_bytes", c.live_bytes).set("peak_live_bytes", c.peak_live_bytes);
  o.set("blocks_made", c.blocks_made).set("block_bytes", c.block_bytes).set("peak_block_bytes", c.peak_block_bytes);
  o.set("reused", c.reused).set("refused", c.refused);
  umscope::JsonObject cls;
  for (auto& kv : c.by_class) {
    umscope::JsonObject one;
    one.set("requests", kv.second.first).set("bytes", kv.second.second);
    cls.set_raw(kv.first, one.str());
  }
  o.set_raw("by_size_class", cls.str());
  return o.str();
}

std::string stats_json(State& s) {
  umscope::JsonObject o;
  o.set("format", "umscope-place-1");
  Counters total;
  umscope::JsonObject kinds;
  for (size_t i = 0; i < s.kinds.size(); ++i) {
    const Counters& c = s.counters[i];
    if (c.requests == 0 && c.refused == 0) continue;
    kinds.set_raw(s.kinds[i].str(), counters_json(c));
    total.requests += c.requests;
    total.frees += c.frees;
    total.requested_bytes += c.requested_bytes;
    total.live_bytes += c.live_bytes;
    total.blocks_made += c.blocks_made;
    total.block_bytes += c.block_bytes;
    total.reused += c.reused;
    total.refused += c.refused;
    total.peak_live_bytes += c.peak_live_bytes;    // an upper bound of the joint peak
    total.peak_block_bytes += c.peak_block_bytes;  // (kinds peak at different times)
    for (auto& kv : c.by_class) {
      total.by_class[kv.first].first += kv.second.first;
      total.by_class[kv.first].second += kv.second.second;
    }
  }
  o.set_raw("kinds", kinds.str());
  o.set_raw("total", counters_json(total));
  std::vector<std::string> rules;
  for (auto& r : s.rules) rules.push_back(r.text);
  o.set("rules", rules);
  o.set("default_kind_phases", s.phases);
  o.set("refusals", s.refusals);
  o.set("gpu_free_at_start", s.gpu_free_at_start);
  o.set("managed_block_bytes", s.managed_block_bytes);
  o.set("allow_oversubscription", s.allow_oversub);
  o.set("cache", s.cache);
  o.set("test_backend", s.test_backend);
  if (!s.config_error.empty()) o.set("config_error", s.config_error);
  return o.str();
}

int copy_out(const std::string& text, char* out, size_t len) {
  if (out && len) {
    size_t n = text.size() < len - 1 ? text.size() : len - 1;
    std::memcpy(out, text.data(), n);
    out[n] = 0;
  }
  return static_cast<int>(text.size());
}

void write_at_exit() {
  const char* path = env("UMSCOPE_PLACE_STATS");
  if (!path) return;
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  std::string p = path;  // "%p": this process's id (a program's child processes each write their own)
  size_t at = p.find("%p");
  if (at != std::string::npos) p.replace(at, 2, std::to_string(getpid()));
  std::ofstream f(p);
  if (f) f << stats_json(s) << "\n";
}

}  // namespace

// Allocating while a thread captures a CUDA graph: PyTorch asks for a segment of a graph's pool (a
// torch.cuda.MemPool served by this library) during capture. cudaMalloc*, cudaHostRegister and the
// kinds' advice are not stream work but are refused in the global capture mode; the relaxed mode lets
// them run (PyTorch's own allocator does the same around cudaMalloc).
struct RelaxedCapture {
#ifdef UMSCOPE_HAVE_CUDA
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode); }
#endif
};

// --- PyTorch's pluggable-allocator interface ----------------------------------
UMSCOPE_API void* umscope_alloc(ssize_t size, int device, void* stream) {
  RelaxedCapture relaxed;
  std::string err;
  void* p = place_alloc(static_cast<size_t>(size < 0 ? 0 : size), device, stream, true, &err);
  if (!p && size > 0) throw std::runtime_error(err.empty() ? "umscope place: allocation failed" : err);
  return p;
}

UMSCOPE_API void umscope_free(void* ptr, ssize_t, int, void*) {
  RelaxedCapture relaxed;
  place_free(ptr);
}

// --- control and bookkeeping (ctypes) ------------------------------------------
// Replaces the configuration (kind, rules; allow < 0 keeps the guard's setting). 0, or 2 with the reason.
UMSCOPE_API int umscope_place_configure(const char* kind, const char* rules, int allow, char* err, size_t len) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  configure_from_env(s);
  try {
    configure(s, kind ? kind : "", rules ? rules : "", allow);
    s.config_error.clear();
    return 0;
  } catch (const std::exception& e) {
    copy_out(e.what(), err, len);
    return 2;
  }
}

// Switches the kind of later allocations no rule claims (e.g. weights loaded, now the KV cache).
UMSCOPE_API int umscope_place_set_kind(const char* kind, char* err, size_t len) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  configure_from_env(s);
  try {
    KindSpec k = umscope::parse_kind(kind ? kind : "");
    s.default_kind = kind_index(s, k);
    s.phases.push_back(k.str());
    return 0;
  } catch (const std::exception& e) {
    copy_out(e.what(), err, len);
    return 2;
  }
}

// The kind (canonical spec) a request of `bytes` would get; returns its length.
UMSCOPE_API int umscope_place_route(size_t bytes, char* out, size_t len) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  configure_from_env(s);
  if (!s.config_error.empty()) return -copy_out(s.config_error, out, len) - 1;
  return copy_out(s.kinds[route(s, bytes)].str(), out, len);
}

UMSCOPE_API size_t umscope_place_size_class(size_t bytes) { return size_class(bytes); }

// The bookkeeping as JSON; returns its length (call again with a larger buffer if it did not fit).
UMSCOPE_API int umscope_place_stats_json(char* out, size_t len) {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  configure_from_env(s);
  return copy_out(stats_json(s), out, len);
}

// Releases the cached blocks (PyTorch's empty_cache through set_reset_fn is not exposed: call it directly).
UMSCOPE_API void umscope_place_empty_cache() {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  drop_cache(s, -1);
}

// Tests: an allocation returning the CPU's pointer, or nullptr with the reason (no exception).
UMSCOPE_API void* umscope_place_test_alloc(size_t bytes, void* stream, char* err, size_t len) {
  std::string e;
  void* p = place_alloc(bytes, 0, stream, false, &e);
  if (!p) copy_out(e, err, len);
  return p;
}
