"""One validator per option, shared by every command and family, run before a run is created.

Each takes the text the user gave (or the value a saved run kept) and returns the value in the form
the cases carry, or raises UsageError with one line that names the option. umbench checks again,
but nothing reaches it that these refuse. The limits are documented in `umscope <command> --help`.
"""

import math
import os
import stat
from pathlib import Path

from umscope.errors import UsageError
from umscope.sizes import parse_size

MAX_ID = 2**63 - 1          # SQLite's largest rowid
MAX_TIMEOUT = 7 * 86400.0   # a case may run a week, not longer
MAX_REPS = 1_000_000
MAX_DEVICE = 1023
MAX_ITERATIONS = 1_000_000
MAX_DOS = 16.0              # degrees of oversubscription above this only measure the swap device
MAX_PERIOD = 3600.0
# --visible-gpus: every GPU visible to each case's process (all, as always), or a case on GPU 0 alone sees that
# GPU only (case: CUDA_VISIBLE_DEVICES narrowed; suite.visible_gpus_of).
VISIBLE_GPUS = ("all", "case")
SELFTEST_MODES = ("ok", "skip", "fail", "crash", "abort", "hang", "gpu-fault", "sleep")


def cpus() -> int:
    """CPUs this process may run on (what umbench's 'all' means)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def max_threads() -> int:
    """4 x the CPUs this process may use: umbench's own limit."""
    return 4 * cpus()


def _text(value, what) -> str:
    text = str(value)
    if not text.strip():
        raise UsageError(f"{what} needs a value, got an empty one")
    return text


def integer(value, what, lo, hi) -> int:
    """A whole number from lo to hi."""
    if isinstance(value, bool):
        raise UsageError(f"{what} needs a whole number, got {value!r}")
    if isinstance(value, int):
        n = value
    else:
        text = _text(value, what).strip()
        if not text.isascii():
            raise UsageError(f"{what} needs a whole number, got {text[:40]!r}")
        try:
            n = int(text, 10)
        except ValueError:
            raise UsageError(f"{what} needs a whole number, got {text[:40]!r}") from None
    if not lo <= n <= hi:
        raise UsageError(f"{what} must be from {lo} to {hi}, got {str(n)[:40]}")
    return n


def real(value, what, lo, hi, lo_open=True) -> float:
    """A finite number in (lo, hi] (or [lo, hi] with lo_open=False)."""
    if isinstance(value, bool):
        raise UsageError(f"{what} needs a number, got {value!r}")
    if isinstance(value, str) and not value.isascii():
        raise UsageError(f"{what} needs a number, got {value[:40]!r}")
    try:
        x = float(_text(value, what).strip() if not isinstance(value, (int, float)) else value)
    except (ValueError, OverflowError):
        raise UsageError(f"{what} needs a number, got {str(value)[:40]!r}") from None
    if not math.isfinite(x):
        raise UsageError(f"{what} needs a finite number, got {str(value)[:40]!r}")
    if (x <= lo if lo_open else x < lo) or x > hi:
        raise UsageError(f"{what} must be {'above' if lo_open else 'at least'} {lo:g} and at most {hi:g}, "
                         f"got {str(value)[:40]}")
    return x


def size(value, what) -> int:
    """A byte size (4G, 4g, 4GiB, 4GB, 512M, 1e9): sizes.py's grammar, whole, positive, at most 9e18."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise UsageError(f"{what} needs a size such as 4G, got an empty one")
    try:
        return parse_size(value)
    except UsageError as e:
        raise UsageError(f"{what}: {e}") from None


def size_list(value, what) -> list:
    text = _text(value, what)
    items = text.split(",")
    if any(not t.strip() for t in items):
        raise UsageError(f"{what} takes sizes separated by commas, got {text[:60]!r}")
    return [size(t, what) for t in items]


def threads(value, what="--threads") -> str:
    """Thread counts, comma-separated: each 1 to max_threads(), or 'all'. Returns the canonical list."""
    text = _text(value, what)
    items = [t.strip() for t in text.split(",")]
    if any(not t for t in items):
        raise UsageError(f"{what} takes thread counts separated by commas (or 'all'), got {text[:60]!r}")
    out = []
    for t in items:
        out.append("all" if t == "all" else str(integer(t, what + " (or 'all')", 1, max_threads())))
    return ",".join(out)


def choices(value, what, allowed, dedupe=True) -> list:
    """A comma list whose every item is one of `allowed`; repeats are dropped (each would be the same case)."""
    text = _text(value, what)
    items = [t.strip() for t in text.split(",")]
    out = []
    for t in items:
        if t not in allowed:
            raise UsageError(f"{what}: unknown value {t[:40]!r} (known: {', '.join(allowed)})")
        if t not in out or not dedupe:
            out.append(t)
    return out


def timeout(value) -> float:
    return real(value, "--timeout (seconds)", 0.0, MAX_TIMEOUT)


def reps(value) -> int:
    return integer(value, "--reps", 1, MAX_REPS)


def warmup(value) -> int:
    return integer(value, "--warmup", 0, MAX_REPS)


def device(value) -> int:
    return integer(value, "--device", 0, MAX_DEVICE)


def visible_gpus(value) -> str:
    return _one_of(value, "--visible-gpus", VISIBLE_GPUS)


def iterations(value) -> int:
    return integer(value, "--iterations", 1, MAX_ITERATIONS)


def devices(value) -> list:
    """--devices: 'all', or GPU ordinals 0 to MAX_DEVICE separated by commas (ASCII digits: '١' is not 1). The
    probe then says whether each GPU exists (devices.parse_devices)."""
    text = _text(value, "--devices").strip()
    if text == "all":
        return []
    items = text.split(",")
    if any(not t.strip() for t in items):
        raise UsageError(f"--devices takes 'all' or GPU numbers separated by commas, got {printable(text)[:60]!r}")
    return list(dict.fromkeys(integer(t, "--devices", 0, MAX_DEVICE) for t in items))


def host_mem_limit(env=None):
    """UMSCOPE_HOST_MEM_LIMIT, where set: a size umbench's host guard reads (umscope's size grammar, the same
    parser in umbench: native/core/sizes.cpp), checked before a run exists. Returns bytes or None."""
    text = (os.environ if env is None else env).get("UMSCOPE_HOST_MEM_LIMIT")
    if not text:
        return None
    if not text.isascii():
        raise UsageError(f"UMSCOPE_HOST_MEM_LIMIT takes a size such as 8G, got {printable(text)[:40]!r}")
    return size(text, "UMSCOPE_HOST_MEM_LIMIT")


def run_id(value, what="--run") -> int:
    text = "" if value is None else str(value)
    if not text.strip():
        raise UsageError(f"{what} needs a run id number, got an empty one")
    try:
        if not text.isascii():
            raise ValueError(text)
        n = int(text.strip(), 10)
    except ValueError:
        raise UsageError(f"{what} needs a run id number, got {text[:40]!r}") from None
    if not 1 <= n <= MAX_ID:
        raise UsageError(f"{what} needs a run id from 1 to {MAX_ID}, got {text[:40]}")
    return n


def dos(value, allow_oversubscription=False) -> str:
    """Degrees of oversubscription: finite, positive, at most 1 unless allowed, at most MAX_DOS."""
    text = _text(value, "--dos")
    items = text.split(",")
    if any(not t.strip() for t in items):
        raise UsageError(f"--dos takes numbers separated by commas, got {text[:60]!r}")
    levels = [real(t, "--dos", 0.0, MAX_DOS) for t in items]
    if not allow_oversubscription and any(x > 1 for x in levels):
        raise UsageError("--dos above 1 oversubscribes the GPU: only with --allow-oversubscription")
    return ",".join(f"{x:g}" for x in dict.fromkeys(levels))


def period(value) -> float:
    from umscope.profile.sampler import parse_period
    v = parse_period(value)
    if not math.isfinite(v) or v > MAX_PERIOD:
        raise UsageError(f"--period must be at most {MAX_PERIOD:g} s, got {str(value)[:40]}")
    return v


def output_path(value, what) -> Path:
    """A file the command will write at its end: checked now, so a long run does not end in a lost report.
    Refuses directories, devices and pseudo-files (/proc, /sys), and directories it cannot write in."""
    text = "" if value is None else str(value)
    if not text.strip():
        raise UsageError(f"{what} needs a file path, got an empty one")
    if "\0" in text:
        raise UsageError(f"{what}: a path cannot hold a NUL character")
    p = Path(text).expanduser()
    try:
        resolved = p.resolve()
    except (OSError, RuntimeError) as e:
        raise UsageError(f"{what} {text[:80]}: {e}") from None
    if resolved.parts[1:2] and resolved.parts[1] in ("proc", "sys", "dev"):
        raise UsageError(f"{what} {text[:80]} is a pseudo-file or device, not a file a report can be written to")
    try:
        st = p.stat()
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise UsageError(f"{what} {text[:80]}: {e.strerror}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{what} {text[:80]} is a directory; name a file in it")
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{what} {text[:80]} is not a regular file")
        if not os.access(p, os.W_OK):
            raise UsageError(f"{what} {text[:80]} is not writable")
        return p
    parent = p.parent
    # The report's directory is created if missing: its nearest existing ancestor must be a writable directory.
    anc = parent
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise UsageError(f"{what} {text[:80]}: {anc} is not a directory")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {text[:80]}: cannot write in {anc}")
    return p


def machine(value):
    """--machine: a packaged name, or a regular YAML file of at most 1 MiB (a device such as /dev/zero
    would otherwise be read without end)."""
    if value is None:
        return None
    text = str(value)
    if not text.strip():
        raise UsageError("--machine needs a file or a packaged name, got an empty one")
    p = Path(text).expanduser()
    if p.exists():
        if not p.is_file():
            raise UsageError(f"--machine {text[:80]} is not a regular file")
        if p.stat().st_size > 1 << 20:
            raise UsageError(f"--machine {text[:80]} is larger than 1 MiB: not a machine description")
    return text


def printable(text) -> str:
    """Text from the store as it may be shown on a terminal: control characters (escape sequences,
    carriage returns, newlines) become visible escapes."""
    if text is None:
        return ""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _one_of(value, what, allowed):
    text = _text(value, what)
    if text not in allowed:
        raise UsageError(f"{what}: unknown value {text[:40]!r} (known: {', '.join(allowed)})")
    return text
