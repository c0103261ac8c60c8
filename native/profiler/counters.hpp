// Hardware counters (counters.cpp) for a CUPTI library that owns the process's one subscriber.
#pragma once
#include <cupti.h>

namespace umcounters {
// Opens $UMSCOPE_COUNTERS_FILE and enables, on `sub`, the callbacks the counters need; `subscribed` is
// cuptiSubscribe's result (an error is recorded and nothing enabled unless it succeeded).
bool attach(CUpti_SubscriberHandle sub, CUptiResult subscribed);
// Every callback the subscriber receives, passed on.
void callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
}  // namespace umcounters
