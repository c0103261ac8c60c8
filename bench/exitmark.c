/* The wall-clock time (CLOCK_REALTIME, ns) when the loader finalises this library, appended to $EXITMARK_FILE.
   bench/um_trace_overhead.py --phases --exit-mark preloads it (LD_PRELOAD: loaded first, finalised last, after the
   CUDA driver's and CUPTI's libraries): what is left of the program's wall time after it is the kernel's teardown
   of the process (the GPU driver's files closed, its memory freed). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((destructor)) static void mark(void) {
  const char* path = getenv("EXITMARK_FILE");
  struct timespec ts;
  FILE* f;
  if (!path) return;
  clock_gettime(CLOCK_REALTIME, &ts);
  f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
  fclose(f);
}
