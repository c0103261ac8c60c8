// Memory kinds as runtime values.
//
// A kind spec is "NAME[:ARG][,key=value...]", e.g. "device", "managed,
// first_touch=cpu,prefetch=gpu", "numa:1,page=thp", "managed,advise=
// preferred:cpu+accessed_by:gpu". The registry below lists every kind with
// the policies it takes; a Buffer allocates one, applies its policies and
// frees it. A kind the machine cannot serve throws Skip with the reason.
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace umscope {

struct PolicyInfo {
  std::string key;
  std::vector<std::string> values;  // allowed values; "host:N" stands for host:0, host:1, ...
  std::string help;
  std::string dflt;     // written into every spec that does not set it, so records say what was done ("": none)
  bool joined = false;  // several values joined with '+' (advise, flags)
};

class Buffer;
struct KindSpec;

// Where a kind's data sits in steady state for a case on GPU `device`, and who reaches it:
// location "gpu" (the GPU's own memory), "peer" (another GPU's) or "host"; reachable_by
// "gpu", "cpu" or "gpu+cpu" on this machine. Every record carries both.
struct KindPlace {
  std::string location, reachable_by;
};

// What a Buffer does for a kind: one object per kind, defined with the Buffer in
// native/memory/buffer.cpp and named by the kind's registry entry (kinds.cpp).
struct KindOps {
  // Allocates the Buffer's bytes after the kind's guards, sets the pointer each processor uses and, where
  // one is null, why; throws Skip where the machine cannot serve the kind (Refused where a guard refuses).
  void (*allocate)(Buffer& b);
  void (*release)(Buffer& b);                   // frees what allocate made
  std::string (*residency)(const Buffer& b);    // Buffer::residency
};

// A kind's behaviour lives with it, here: where its pages live, which
// processors reach them and what it needs. Records carry it (kind_place), so
// umscope never re-derives it from the kind's name; a Buffer allocates, frees
// and locates it through its entry's functions, never by its name.
struct KindInfo {
  std::string name;
  bool takes_arg;  // numa:N, peer:N
  std::string help;
  std::vector<PolicyInfo> policies;
  std::string lives;         // where its pages live, in words (kind_place gives the case's answer)
  std::string reachable_by;  // which processors reach it, in words
  bool needs_cuda;           // allocated through the CUDA runtime: needs a GPU even for CPU use
  bool gpu_needs_hmm_or_ats; // the GPU reaches it only through HMM or ATS
  bool needs_peer;           // the memory of another GPU (peer access)
  KindPlace (*place)(const KindSpec& k, int device);  // kind_place's answer for this kind (kinds.cpp)
  const KindOps* ops;                                  // how a Buffer allocates and frees it (buffer.cpp)
};

const std::vector<KindInfo>& kind_registry();
const KindInfo& kind_info(const std::string& name);  // of a parsed spec's name (throws UsageError otherwise)

struct KindSpec {
  std::string name;
  int arg = -1;                               // NUMA node for numa:N, GPU for peer:N
  std::map<std::string, std::string> policy;  // validated key -> value
  std::string get(const std::string& k, const std::string& dflt = "") const;
  std::string label() const;       // "name" or "name:N", as records name the kind
  std::string str() const;         // canonical spec string
  std::string policy_str() const;  // "k=v,k=v" or ""
};

// Kinds allocated through the CUDA runtime or driver (they need a GPU even for CPU use).
inline bool kind_uses_cuda(const KindSpec& k) { return kind_info(k.name).needs_cuda; }

// The NUMA node of a "host:N" policy value (async's pool, vmm's location), -1 for "host", -2 for anything else.
int host_node_of(const std::string& value);

// The case's KindPlace (above) of a parsed spec, or "none" for a record that measures no memory.
KindPlace kind_place(const KindSpec& k, int device);

// Throws UsageError on an unknown kind, policy key or value.
KindSpec parse_kind(const std::string& spec);

struct AllocOptions {
  int device = 0;
  bool allow_oversubscription = false;  // managed beyond free GPU memory
  bool allow_host_overcommit = false;   // host allocation beyond MemAvailable
};

// How a benchmark writes its initial data, one function per processor. The
// GPU one launches on the device pointer and synchronises. Either may be
// empty: the buffer is then filled with zero bytes by that processor.
struct Initializer {
  std::function<void(void* p, size_t bytes)> cpu;
  std::function<void(void* p, size_t bytes)> gpu;
};

// One allocation of one kind. cpu() / gpu() give the pointer each processor
// uses, or nullptr where that processor cannot reach the memory.
class Buffer {
 public:
  Buffer(const KindSpec& kind, size_t bytes, const AllocOptions& opt);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* cpu() const { return cpu_; }
  void* gpu() const { return gpu_; }
  size_t bytes() const { return bytes_; }
  const KindSpec& kind() const { return kind_; }
  // Why a processor cannot reach this memory ("" when it can).
  std::string cpu_unreachable() const;
  std::string gpu_unreachable() const;
  // The pointer the GPU (gpu = true) or the CPU uses; throws Skip with the
  // reason where that processor cannot reach this memory.
  void* reach(bool gpu) const;
  // Places the data as the spec says: first touch by the processor its
  // first_touch policy names (running that processor's initializer), then
  // advice, then prefetch. Throws Skip if the named processor cannot reach it.
  // First touch by the kind's first_touch processor, then the kind's advice, then its prefetch. With
  // advice=false the advice is left for advise() (the migration benchmark times it alone).
  void place(const struct Initializer& init, bool advice = true);
  void advise();  // the kind's advise=... policy (nothing without one)
  void prefetch(const std::string& where);  // "gpu" or "cpu" (managed only)
  // Where the pages are now, if the platform says ("gpu", "cpu", "mixed",
  // "unknown"); managed memory only, sampled at a few points.
  std::string residency() const;

 private:
  KindSpec kind_;
  size_t bytes_;
  AllocOptions opt_;
  const KindOps* ops_;    // the kind's functions, from its registry entry
  friend struct BufferKinds;  // every kind's functions (buffer.cpp), which fill in and free the fields below
  void* base_ = nullptr;  // what was allocated
  void* cpu_ = nullptr;
  void* gpu_ = nullptr;
  size_t mapped_ = 0;  // for mmap'd kinds: length to munmap
  bool registered_ = false;
  size_t host_counted_ = 0;  // host bytes this buffer adds to the case's total for the guard
  void count_host(size_t bytes);
  void release();  // gives back what the kind took (the destructor, and a constructor that throws)
  std::string cpu_why_, gpu_why_;  // why a processor cannot reach it, where the kind or the driver says
  void* pool_ = nullptr;           // async: the cudaMemPool_t it came from
  unsigned long long vmm_handle_ = 0;  // vmm: the cuMemCreate handle (0: none), its mapped size
  size_t vmm_size_ = 0;
  bool vmm_mapped_ = false;
};

// Throws Refused when a host allocation of `bytes`, added to the host bytes the
// case's live buffers already hold, would exceed what the OS said was available
// (MemAvailable) when the case asked for its first host buffer, unless overridden.
void check_host_memory(size_t bytes, bool allow);

// Throws Refused when `bytes` of managed memory (one allocation, or all of a
// case's arrays together) exceed the GPU's free memory now, unless
// opt.allow_oversubscription: oversubscribing a shared GPU can hang it.
void check_managed_memory(size_t bytes, const AllocOptions& opt);

// "1.50 GiB": sizes in refusal messages.
std::string gib_text(size_t bytes);

}  // namespace umscope
