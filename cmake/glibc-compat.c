/* Linked into a wheel's binaries by cmake/glibc-link only (never into a source install).
 *
 * A wheel build compiles with the host's GCC and links GCC's static libstdc++ against the stubs of an
 * older glibc (2.28 by default), so that the binaries load on RHEL 8 and anything newer. That
 * libstdc++ (GCC 12, built on glibc 2.36) and its headers use three things glibc 2.28 lacks. Each is
 * defined here, hidden (never exported, so it cannot stand in for glibc's in another object), and where
 * the glibc the program runs on has the real one (2.30, 2.32, 2.36 or newer), the real one is used:
 *   - __libc_single_threaded (glibc 2.32): libstdc++ skips atomic reference counts while it is non-zero.
 *     Zero here: the counts are always atomic, as they were before glibc 2.32 (correct in any case).
 *   - pthread_cond_clockwait (glibc 2.30): std::condition_variable's waits on steady_clock. glibc's when
 *     it has one; else the same deadline measured on CLOCK_REALTIME for pthread_cond_timedwait (what
 *     libstdc++ itself does on an older glibc: its callers check the clock again after each wake-up).
 *   - arc4random (glibc 2.36): std::random_device("arc4random") (umscope makes none). glibc's when it
 *     has one; else getrandom(2), and /dev/urandom where the kernel has no getrandom.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define HIDDEN __attribute__((visibility("hidden")))

HIDDEN char __libc_single_threaded = 0;

/* glibc's own definition of NAME at VERSION, or NULL where the running glibc is older; looked up once
 * (a race only looks it up twice). */
static void *from_glibc(void **cache, const char *name, const char *version) {
#ifdef UMSCOPE_COMPAT_AS_ON_GLIBC_2_28 /* tests/test_wheel_compat.py: the fallbacks, as on an old glibc */
  (void)cache, (void)name, (void)version;
  return NULL;
#endif
  void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
  if (f == NULL) {
    f = dlvsym(RTLD_DEFAULT, name, version);
    __atomic_store_n(cache, f ? f : (void *)-1, __ATOMIC_RELEASE);
  }
  return f == (void *)-1 ? NULL : f;
}

typedef int (*clockwait_fn)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);

HIDDEN int pthread_cond_clockwait(pthread_cond_t *cond, pthread_mutex_t *mutex, clockid_t clock,
                                  const struct timespec *abstime) {
  static void *cache;
  clockwait_fn real = (clockwait_fn)from_glibc(&cache, "pthread_cond_clockwait", "GLIBC_2.30");
  if (real) return real(cond, mutex, clock, abstime);
  if (clock == CLOCK_REALTIME) return pthread_cond_timedwait(cond, mutex, abstime);
  if (clock != CLOCK_MONOTONIC) return EINVAL; /* as glibc's: only these two clocks */
  struct timespec now, real_now, deadline;
  clock_gettime(clock, &now);
  clock_gettime(CLOCK_REALTIME, &real_now);
  int64_t left_ns = (int64_t)(abstime->tv_sec - now.tv_sec) * 1000000000 + (abstime->tv_nsec - now.tv_nsec);
  if (left_ns <= 0) return ETIMEDOUT;
  int64_t end_ns = (int64_t)real_now.tv_nsec + left_ns % 1000000000;
  deadline.tv_sec = real_now.tv_sec + (time_t)(left_ns / 1000000000) + (time_t)(end_ns / 1000000000);
  deadline.tv_nsec = (long)(end_ns % 1000000000);
  return pthread_cond_timedwait(cond, mutex, &deadline);
}

HIDDEN uint32_t arc4random(void) {
  static void *cache;
  uint32_t (*real)(void) = (uint32_t(*)(void))from_glibc(&cache, "arc4random", "GLIBC_2.36");
  if (real) return real();
  uint32_t v;
  for (;;) {
    ssize_t n = getrandom(&v, sizeof v, 0);
    if (n == (ssize_t)sizeof v) return v;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != ENOSYS) abort();
    break;
  }
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read(fd, &v, sizeof v) != (ssize_t)sizeof v) abort(); /* glibc's never fails either */
  close(fd);
  return v;
}
