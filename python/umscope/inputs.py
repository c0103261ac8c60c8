"""Every file a user hands umscope is read here, one reader per kind of input:

- records (`model --calibration`, `--figures`: a JSON record, a list of them, or JSON lines): read_records;
- a unified-memory trace (`simulate --trace`, `advise --trace`: libumtrace's JSON lines, their gzip, or a umsim
  trace): read_trace;
- a machine description or a packaged YAML document (`--machine FILE`, model figures, published values):
  read_yaml;
- a results store: umscope.store.Store (opened read-only by every command that only reads).

Each reader refuses what is not a file of its kind in one line (UsageError: exit 2, nothing run, nothing
created): a directory, a device (/dev/zero) or socket, a file over its size cap, text that is not UTF-8,
JSON nested deeper than MAX_DEPTH, numbers that are not finite (NaN, Infinity, 1e400) or longer than
MAX_INT_DIGITS digits, and records whose fields have the wrong type. A pipe (`--trace <(zcat t.gz)`, a named
FIFO) is read once, to its end: its writer decides when that is, and a FIFO nobody writes to reads as empty
instead of blocking the open."""

import gzip
import io
import json
import math
import os
import select
import stat

from umscope.errors import UsageError

MIB = 1 << 20
MAX_RECORDS_BYTES = 512 * MIB   # calibration and figures files (the kept raw runs are a few MiB)
MAX_TRACE_BYTES = 4096 * MIB    # libumtrace JSON lines, after gzip's decompression
MAX_YAML_BYTES = 1 * MIB        # machine descriptions, figures and published values
MAX_DEPTH = 32                  # nesting of JSON and YAML documents (umscope's own are at most 5 deep)
MAX_INT_DIGITS = 20             # a JSON integer longer than this is no count of bytes, pages or nanoseconds
MAX_YAML_NODES = 200_000        # nodes of a YAML document, aliases counted at each use
PIPE_IDLE_S = 600.0             # a pipe that sends nothing for this long is given up


def _short(text, n=80) -> str:
    from umscope.validate import printable
    return printable(str(text)[:n])


def read_bytes(path, what, limit) -> bytes:
    """The bytes of a regular file (at most `limit`) or of a pipe, read once; a one-line UsageError for
    anything else."""
    text = "" if path is None else os.fsdecode(path)
    if not text.strip():
        raise UsageError(f"{what} needs a file, got an empty path")
    if "\0" in text:
        raise UsageError(f"{what}: a path cannot hold a NUL character")
    name = _short(text)
    try:
        st = os.stat(text)
    except FileNotFoundError:
        raise UsageError(f"{what} {name}: no such file") from None
    except OSError as e:
        raise UsageError(f"{what} {name}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{what} {name} is a directory, not a file")
    pipe = stat.S_ISFIFO(st.st_mode)
    if not (pipe or stat.S_ISREG(st.st_mode)):
        raise UsageError(f"{what} {name} is not a regular file (a device or socket)")
    if not pipe and st.st_size > limit:
        raise UsageError(f"{what} {name} is larger than {limit >> 20} MiB: not a file of this kind")
    try:
        # O_NONBLOCK: opening a FIFO that has no writer would otherwise wait for one without end.
        fd = os.open(text, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise UsageError(f"{what} {name}: {e.strerror or e}") from None
    try:
        return _read_fd(fd, limit, what, name)
    except OSError as e:
        raise UsageError(f"{what} {name}: {e.strerror or e}") from None
    finally:
        os.close(fd)


def _read_fd(fd, limit, what, name) -> bytes:
    chunks, size = [], 0
    while True:
        try:
            b = os.read(fd, 1 << 20)
        except BlockingIOError:  # a pipe with a writer that has sent nothing yet (no writer at all reads as EOF)
            ready, _, _ = select.select([fd], [], [], PIPE_IDLE_S)
            if not ready:
                raise UsageError(f"{what} {name}: the pipe sent nothing for {PIPE_IDLE_S:.0f} s") from None
            continue
        if not b:
            return b"".join(chunks)
        size += len(b)
        if size > limit:
            raise UsageError(f"{what} {name} is larger than {limit >> 20} MiB: not a file of this kind")
        chunks.append(b)


def _gunzip(data, limit, what, name) -> bytes:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            out = f.read(limit + 1)
    except (OSError, EOFError, ValueError) as e:
        raise UsageError(f"{what} {name}: a damaged gzip file ({e})") from None
    if len(out) > limit:
        raise UsageError(f"{what} {name} holds more than {limit >> 20} MiB once decompressed")
    return out


def text_of(data, what, name) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{what} {name} is not UTF-8 text (a binary file?)") from None


# ------------------------------------------------------------------ JSON
def _no_constant(token):
    raise ValueError(f"{token} is not a finite number")


def _float(token):
    x = float(token)
    if not math.isfinite(x):
        raise ValueError(f"{token[:40]} is not a finite number")
    return x


def _int(token):
    if len(token.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"the integer {token[:24]}... has more than {MAX_INT_DIGITS} digits")
    return int(token)


def _depth(doc, limit=MAX_DEPTH, budget=None) -> int:
    """Nesting depth of a parsed document, refusing deeper than `limit` and (YAML aliases) more than
    MAX_YAML_NODES visits."""
    budget = budget if budget is not None else [MAX_YAML_NODES]
    stack = [(doc, 1)]
    deepest = 0
    while stack:
        x, d = stack.pop()
        budget[0] -= 1
        if budget[0] < 0:
            raise ValueError(f"more than {MAX_YAML_NODES} values")
        deepest = max(deepest, d)
        if d > limit:
            raise ValueError(f"nested deeper than {limit} levels")
        if isinstance(x, dict):
            stack.extend((v, d + 1) for v in x.values())
            stack.extend((k, d + 1) for k in x if not isinstance(k, (str, int, float, bool, type(None))))
        elif isinstance(x, (list, tuple)):
            stack.extend((v, d + 1) for v in x)
        elif isinstance(x, float) and not math.isfinite(x):
            raise ValueError(f"{x} is not a finite number")
    return deepest


def parse_json(text):
    """One JSON document: finite numbers, integers of at most MAX_INT_DIGITS digits, at most MAX_DEPTH deep.
    ValueError (with the reason) otherwise."""
    try:
        doc = json.loads(text, parse_constant=_no_constant, parse_float=_float, parse_int=_int)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    _depth(doc)
    return doc


# ------------------------------------------------------------------ records
# Fields of umscope and umbench records the model and the simulator compute with: each, where present, must be
# a finite number (at least 0), or a list of them (samples).
NUMBER_FIELDS = frozenset((
    "context_ms", "alloc_ms", "init_ms", "transfer_ms", "compute_ms", "back_ms", "free_ms", "total_ms",
    "iterations", "traffic_bytes", "data_bytes", "bytes", "in_bytes", "out_bytes", "inout_bytes",
    "link_read_bytes", "link_write_bytes", "link_bytes", "link_runs", "gather_accesses", "scatter_accesses",
    "flops", "threads", "place_ms", "advise_ms", "first", "steady", "prefetch_gbps", "median", "min", "max",
    "stride", "window", "dos", "value", "spread", "n"))
TEXT_FIELDS = frozenset(("app", "mode", "benchmark", "op", "kind", "policy", "by", "processor", "arrays", "values",
                         "pretouch", "cpu_touch", "direction", "dst_kind", "precision", "variant", "status"))
LIST_FIELDS = frozenset(("samples",))


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def check_record(rec, where) -> dict:
    """A record whose model fields have the types the model computes with; UsageError naming the field."""
    for k, v in rec.items():
        if v is None:
            continue
        if k in NUMBER_FIELDS and not _number(v):
            if k == "threads" and isinstance(v, str):
                continue  # umscope's own records keep the thread list as given ("1,all") in the case's params
            raise UsageError(f"{where}: field {_short(k, 40)!s} must be a finite number of at least 0, got "
                             f"{_short(json.dumps(v), 40)}")
        if k in TEXT_FIELDS and not isinstance(v, str):
            raise UsageError(f"{where}: field {k} must be text, got {_short(json.dumps(v), 40)}")
        if k in LIST_FIELDS and not (isinstance(v, list) and all(_number(x) for x in v)):
            raise UsageError(f"{where}: field {k} must be a list of finite numbers of at least 0")
    return rec


def flat(r) -> dict:
    """A record with its `extra` fields (the store's) beside its own."""
    d = dict(r.get("extra") or {}) if isinstance(r.get("extra"), dict) else {}
    d.update({k: v for k, v in r.items() if k != "extra" and v is not None})
    return d


def read_records(path, what) -> list:
    """The records (dicts, `extra` flattened) of a JSON file (one record or a list) or a JSON-lines file,
    each checked by check_record."""
    data = read_bytes(path, what, MAX_RECORDS_BYTES)
    name = _short(path)
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, MAX_RECORDS_BYTES, what, name)
    text = text_of(data, what, name)
    if not text.strip():
        raise UsageError(f"{what} {name} is empty")
    try:
        doc = parse_json(text)
        recs = doc if isinstance(doc, list) else [doc]
        lines = None
    except ValueError as whole:
        lines = [x for x in text.splitlines() if x.strip()]
        recs = []
        for i, line in enumerate(lines, 1):
            try:
                recs.append(parse_json(line))
            except ValueError as e:
                why = e if len(lines) > 1 else whole
                raise UsageError(f"{what} {name}: line {i} is not a JSON record ({_short(why, 100)})") from None
    out = []
    for i, r in enumerate(recs, 1):
        if isinstance(r, dict):
            place = f"{what} {name}: " + (f"line {i}" if lines is not None else f"record {i}")
            out.append(check_record(flat(r), place))
    if not out:
        raise UsageError(f"{what} {name}: no JSON records (objects) in it")
    return out


# ------------------------------------------------------------------ traces
# libumtrace's lines, per kind: the fields the simulator's reader computes with, each an integer (a time in ns,
# an address, a byte count, a counter id). Lines of other kinds are kept as they are and not computed with.
MAX_TRACE_INT = 1 << 63
TRACE_FIELDS = {
    "mem": {"a": True, "b": True, "op": False},
    "um": {"c": True, "s": False, "v": False, "a": False, "e": False, "f": False},
    "kernel": {"s": True, "e": True},
    "uvm_counters": {"dev": False, "htod": False},
    "uvm_fault": {"t": True, "a": True, "g": True, "b": True},
    "uvm_replay": {"t": True, "g": True, "b": True},
    "uvm_migration": {"a": True, "n": True, "t0": True, "src": True, "dst": True, "cause": False},
    "clocks": {"t": True, "raw": True},
}


# um lines of these counter kinds (host-to-device bytes, CPU faults, GPU fault groups) are replayed: they need
# their time and address.
REPLAYED_UM = {1, 3, 4}


def check_trace_line(e, where) -> dict:
    k = e.get("k")
    spec = TRACE_FIELDS.get(k) if isinstance(k, str) else None
    if spec is TRACE_FIELDS["um"] and e.get("c") in REPLAYED_UM:
        spec = dict(spec, s=True, a=True)
    if "_p" in e and (isinstance(e["_p"], bool) or not isinstance(e["_p"], (int, str))):
        raise UsageError(f"{where}: field _p (the process) must be an integer")
    for f, required in (spec or {}).items():
        v = e.get(f)
        if v is None:
            if required:
                raise UsageError(f"{where}: a {k} line without its field {f}")
            continue
        if isinstance(v, bool) or not isinstance(v, int) or not (-MAX_TRACE_INT <= v < MAX_TRACE_INT):
            raise UsageError(f"{where}: field {f} of a {k} line must be an integer, got {_short(json.dumps(v), 40)}")
        if f in ("b", "v", "n") and v < 0:
            raise UsageError(f"{where}: field {f} of a {k} line is a byte count, got {v}")
    if k == "uvm_events_end" and e.get("dropped") is not None:
        d = e["dropped"]
        if not isinstance(d, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in d):
            raise UsageError(f"{where}: field dropped of a uvm_events_end line must be a list of integers")
    return e


def read_trace(path, what="--trace"):
    """('umsim', bytes) for a umsim trace (magic UMSTRACE), else ('jsonl', records) of libumtrace's JSON lines
    (plain or gzip): each line checked by check_trace_line; a line cut by a crash is left out. The file is
    read once (a pipe works)."""
    data = read_bytes(path, what, MAX_TRACE_BYTES)
    name = _short(path)
    if data[:8] == b"UMSTRACE":
        return "umsim", data
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, MAX_TRACE_BYTES, what, name)
    text = text_of(data, what, name)
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            e = parse_json(line)
        except ValueError:
            continue  # a line cut by a crash
        if isinstance(e, dict):
            out.append(check_trace_line(e, f"{what} {name}: line {i}"))
    if not out:
        raise UsageError(f"{what} {name}: not a umsim trace, libumtrace's JSON lines or their gzip (no JSON lines "
                         "in it)")
    return "jsonl", out


# ------------------------------------------------------------------ YAML
def read_yaml(path, what, limit=MAX_YAML_BYTES):
    """A YAML document (safe_load): at most `limit` bytes, MAX_DEPTH deep, MAX_YAML_NODES values, finite
    numbers. The caller checks its shape (need_mapping, need_number)."""
    import yaml
    data = read_bytes(path, what, limit)
    name = _short(path)
    text = text_of(data, what, name)
    try:
        doc = yaml.safe_load(text)
    except RecursionError:
        raise UsageError(f"{what} {name}: nested deeper than {MAX_DEPTH} levels") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or type(e).__name__
        raise UsageError(f"{what} {name}: not valid YAML{at} ({_short(problem, 80)})") from None
    except (ValueError, TypeError, OverflowError) as e:  # a value the safe loader cannot build (a huge date, ...)
        raise UsageError(f"{what} {name}: not valid YAML ({_short(e, 80)})") from None
    try:
        _depth(doc)
    except ValueError as e:
        raise UsageError(f"{what} {name}: {e}") from None
    return doc


def need_mapping(doc, what, keys=()) -> dict:
    """doc as a mapping holding `keys`; UsageError otherwise."""
    if not isinstance(doc, dict):
        raise UsageError(f"{what}: expected a mapping (key: value), got {type(doc).__name__}")
    for k in keys:
        if k not in doc:
            raise UsageError(f"{what}: no {k!r} in it")
    return doc


def need_number(v, what, positive=False) -> float:
    """v as a finite float (at least 0; above 0 with positive=True); UsageError otherwise."""
    if not _number(v) or (positive and v <= 0):
        raise UsageError(f"{what} must be a finite number {'above' if positive else 'of at least'} 0, got "
                         f"{_short(v, 40)}")
    return float(v)
