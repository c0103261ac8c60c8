"""cmake/glibc-compat.c, linked into the wheel's binaries: its fallbacks for a glibc older than 2.30/2.32/2.36
behave as glibc's own do (this host's glibc has them all, so the test builds the fallbacks on purpose)."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CC = shutil.which("cc") or shutil.which("gcc")

HARNESS = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
extern char __libc_single_threaded;
uint32_t arc4random(void);
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int flag;
static double now(clockid_t k) { struct timespec t; clock_gettime(k, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static struct timespec in(clockid_t k, double s) {
  double t = now(k) + s; struct timespec r = {(time_t)t, (long)((t - (time_t)t) * 1e9)}; return r; }
static void *signaller(void *arg) {
  (void)arg; struct timespec d = {0, 50000000}; nanosleep(&d, NULL);
  pthread_mutex_lock(&m); flag = 1; pthread_cond_signal(&c); pthread_mutex_unlock(&m); return NULL; }
int main(void) {
  printf("single_threaded %d\n", __libc_single_threaded);
  pthread_mutex_lock(&m);
  double t0 = now(CLOCK_MONOTONIC);
  struct timespec d = in(CLOCK_MONOTONIC, 0.2);
  int rc = 0;
  while (rc == 0) rc = pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &d);   /* nobody signals */
  printf("timeout %d %.3f\n", rc == ETIMEDOUT, now(CLOCK_MONOTONIC) - t0);
  d = in(CLOCK_MONOTONIC, -1.0);
  printf("past %d\n", pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &d) == ETIMEDOUT);
  d = in(CLOCK_REALTIME, 0.05);
  rc = 0;
  while (rc == 0) rc = pthread_cond_clockwait(&c, &m, CLOCK_REALTIME, &d);
  printf("realtime %d\n", rc == ETIMEDOUT);
  printf("badclock %d\n", pthread_cond_clockwait(&c, &m, CLOCK_PROCESS_CPUTIME_ID, &d) == EINVAL);
  pthread_t th; pthread_create(&th, NULL, signaller, NULL);
  t0 = now(CLOCK_MONOTONIC);
  d = in(CLOCK_MONOTONIC, 10.0);
  rc = 0;
  while (!flag && rc == 0) rc = pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &d);
  printf("signalled %d %.3f\n", flag && rc == 0, now(CLOCK_MONOTONIC) - t0);
  pthread_mutex_unlock(&m); pthread_join(th, NULL);
  uint32_t a = arc4random(), b = arc4random(), x = arc4random(), y = arc4random();
  printf("random %d\n", !(a == b && b == x && x == y));
  return 0;
}
"""


@pytest.mark.skipif(not CC, reason="needs a C compiler (cc)")
@pytest.mark.parametrize("fallback", [True, False], ids=["as-on-glibc-2.28", "glibc-own"])
def test_glibc_compat_waits_times_out_and_draws_as_glibc_does(tmp_path, fallback):
    (tmp_path / "h.c").write_text(HARNESS)
    exe = tmp_path / "h"
    flags = ["-DUMSCOPE_COMPAT_AS_ON_GLIBC_2_28"] if fallback else []
    build = subprocess.run([CC, "-O2", "-Wall", "-Werror", *flags, str(ROOT / "cmake" / "glibc-compat.c"),
                            str(tmp_path / "h.c"), "-o", str(exe), "-pthread", "-ldl"],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines()}
    assert got["single_threaded"] == ["0"]       # atomic reference counts always
    ok, waited = got["timeout"]
    assert ok == "1" and 0.19 <= float(waited) < 2.0, got["timeout"]
    assert got["past"] == ["1"] and got["realtime"] == ["1"] and got["badclock"] == ["1"]
    ok, waited = got["signalled"]
    assert ok == "1" and float(waited) < 5.0, got["signalled"]
    assert got["random"] == ["1"]
