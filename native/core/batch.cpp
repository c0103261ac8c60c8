// umbench batch: many cases in one process, so the suite pays the process and CUDA-context start once
// instead of once per case (about 0.35 s each on an H100 host).
//
// stdin: one case per line, its `umbench run` arguments separated by tabs (BENCH --key value ...); every
// line is read before the first case starts, so the caller writes them all and closes stdin.
// stdout: per case {"type":"case","event":"start","index":I}, the case's own records and status line
// (exactly what `umbench run` prints), then {"type":"case","event":"end","index":I,"exit":CODE}.
//
// Isolation is the caller's (umscope's suite.py): it kills a case that passes its timeout and starts a
// new batch with the cases after it; a crash ends the process and likewise only its case. Here each case
// starts from the state a fresh process has: the affinity and memory policy the batch started with, no
// cached GPU capabilities (free memory is read again), no pending CUDA error. A case that fails (exit 3)
// ends the batch, so nothing runs in a context that an error may have left broken.
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "umscope/caps.hpp"
#include "umscope/json.hpp"

#ifdef UMSCOPE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace umscope {

namespace {

void marker(const char* event, size_t index, int code, bool with_code) {
  JsonObject o;
  o.set("type", "case").set("event", event).set("index", static_cast<long long>(index));
  if (with_code) o.set("exit", code);
  std::cout << o.str() << std::endl;
}

void reset_process_state(const cpu_set_t& affinity) {
  sched_setaffinity(0, sizeof affinity, &affinity);
#ifdef SYS_set_mempolicy
  syscall(SYS_set_mempolicy, 0 /* MPOL_DEFAULT */, nullptr, 0);
#endif
  forget_gpu_caps();
#ifdef UMSCOPE_HAVE_CUDA
  cudaGetLastError();
#endif
}

}  // namespace

int run_batch(int (*run)(int, char**)) {
  std::vector<std::vector<std::string>> cases;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    std::vector<std::string> args;
    std::stringstream ss(line);
    std::string a;
    while (std::getline(ss, a, '\t')) args.push_back(a);
    cases.push_back(args);
  }
  cpu_set_t affinity;
  CPU_ZERO(&affinity);
  sched_getaffinity(0, sizeof affinity, &affinity);
  for (size_t i = 0; i < cases.size(); ++i) {
    reset_process_state(affinity);
    std::vector<std::string> words = {"umbench", "run"};
    words.insert(words.end(), cases[i].begin(), cases[i].end());
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(&w[0]);
    argv.push_back(nullptr);
    marker("start", i, 0, false);
    const int code = run(static_cast<int>(words.size()), argv.data());
    std::cout.flush();
    std::cerr.flush();
    marker("end", i, code, true);
    if (code == 3) return 3;  // failed: the cases after it start in a fresh process
  }
  return 0;
}

}  // namespace umscope
