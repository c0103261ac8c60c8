// What `umscope place --managed POLICY` does to an unmodified program's own managed memory, from inside
// libumtrace (which the CUDA driver injects through CUDA_INJECTION64_PATH, also into programs that link the CUDA
// runtime statically): UMSCOPE_UMTRACE_MANAGED holds the managed kind's policies (native/memory/kinds.cpp), e.g.
// "advise=preferred:cpu+accessed_by:gpu" or "prefetch=gpu", and every cuMemAllocManaged range of the program
// gets them: the advice right after the allocation returns, the prefetch on the stream of the first kernel
// launched after the allocation (after the CPU's initialisation of the data, as the suite's managed-prefetch
// mode does), once per range. Each action is a line of the trace ({"k":"managed_apply",...}) with the driver's
// result, so the run says what was applied and what the driver refused.
#pragma once

#include <cupti.h>

#include <cstdio>
#include <mutex>

namespace managed_apply {

// Reads UMSCOPE_UMTRACE_MANAGED; with a policy, enables the driver callbacks it needs on `sub` and writes the
// parsed policy (or why it is refused) to the trace. Nothing without the variable.
void attach(CUpti_SubscriberHandle sub, FILE* out, std::mutex& mu);

// The subscriber's callback, for the driver API domain (allocations and launches).
void callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);

}  // namespace managed_apply
