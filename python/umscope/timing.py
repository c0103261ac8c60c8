"""CPU-side wall time of work the host waits for (a child process, a model build, a compile, a simulation), the
one way umscope measures it: a monotonic clock (time.perf_counter), read once before and once after.

    with Stopwatch() as sw:
        work()
    seconds = sw.seconds

GPU work is timed with CUDA events instead (native/include/umscope/timing.hpp; torch.cuda.Event in the llm
application). Timestamps that say when something happened (time.time()) are not measurements: they stay as
they are."""

import time


class Stopwatch:
    """Seconds since it started (at creation, and again on entering a with block): `elapsed()` while it runs,
    `seconds` once the block has ended (None before, and when the block raised). already: seconds that had
    passed when it was made (work that began that long before, e.g. a case whose start went unseen)."""

    def __init__(self, already=0.0):
        self.start = time.perf_counter() - already
        self.seconds = None

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.seconds = self.elapsed()
        return False

    def elapsed(self) -> float:
        return time.perf_counter() - self.start
