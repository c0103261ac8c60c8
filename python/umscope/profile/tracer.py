"""libumtrace, the CUPTI injection library of `umscope profile --um-trace`: where it is, and its JSON lines
read into totals, timelines and per-allocation traffic."""

import os
from pathlib import Path

from umscope.profile.analyses import migration_ratios, nvtx_ranges


def tracer_path():
    """The CUPTI injection library, if this build has one."""
    env = os.environ.get("UMSCOPE_UMTRACE")
    if env:
        return env if Path(env).exists() else None
    lib = Path(__file__).parent.parent / "lib" / "libumtrace.so"
    return str(lib) if lib.exists() else None


def cupti_path(lib):
    """The libcupti that libumtrace links (for NVTX_INJECTION64_PATH), found by loading it here."""
    import ctypes
    try:
        ctypes.CDLL(lib, mode=os.RTLD_LOCAL)
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if "libcupti" in os.path.basename(path):
                    return path
    except OSError:
        return None
    return None


CAUSES = {0: "unknown", 1: "user", 2: "coherence", 3: "prefetch", 4: "eviction", 5: "access counters"}
ACCESS = {0: "unknown", 1: "read", 2: "write", 3: "atomic", 4: "prefetch"}
COUNTERS = {1: "htod", 2: "dtoh", 3: "cpu_fault", 4: "gpu_fault", 5: "thrashing", 6: "throttling", 7: "remote_map",
            8: "dtod"}



def read_trace_lines(path) -> list:
    """libumtrace's JSON lines as dicts; a line cut by a crash is left out."""
    import json as _json
    ev = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                ev.append(_json.loads(line))
            except ValueError:
                pass  # a line cut by a crash
    return ev


def parse_trace(path) -> dict:
    """Totals, timelines and analyses from libumtrace's JSON lines."""
    try:
        ev = read_trace_lines(path)
    except OSError:
        return {}
    if not ev:
        return {}  # the library never started: the program did not initialise CUDA
    start = next((e for e in ev if e.get("k") == "start"), {})
    t0 = start.get("t")
    um = [e for e in ev if e.get("k") == "um"]
    if t0 is None:
        t0 = min((e["s"] for e in um), default=0)
    out = {"errors": [e for e in ev if e.get("k") == "error"], "complete": any(e.get("k") == "end" for e in ev),
           "dropped": sum(e.get("n", 0) for e in ev if e.get("k") == "dropped")}
    totals = {name: 0 for name in COUNTERS.values()}
    events = {name: 0 for name in COUNTERS.values()}
    by_cause = {"htod": {}, "dtoh": {}}
    faults_by_access = {}
    timeline = {"htod": [], "dtoh": []}
    cum = {"htod": 0, "dtoh": 0}
    allocs = sorted(((e["a"], e["b"]) for e in ev if e.get("k") == "mem" and e.get("op") == 1), key=lambda x: x[0])
    per_alloc = {}
    for e in sorted(um, key=lambda e: e["s"]):
        name = COUNTERS.get(e["c"], f"counter{e['c']}")
        # A CPU page-fault record is one fault (its value field is not a count on this CUPTI).
        totals[name] = totals.get(name, 0) + (1 if name == "cpu_fault" else e["v"])
        events[name] = events.get(name, 0) + 1
        if name in by_cause:
            cause = CAUSES.get(e.get("f", 0), str(e.get("f")))
            by_cause[name][cause] = by_cause[name].get(cause, 0) + e["v"]
            cum[name] += e["v"]
            timeline[name].append((round((e["e"] - t0) / 1e9, 6), cum[name]))
            for a, b in allocs:
                if a <= e["a"] < a + b:
                    slot = per_alloc.setdefault(a, {"address": a, "bytes": b, "htod": 0, "dtoh": 0, "t": [],
                                                     "in": [], "out": []})
                    slot[name] += e["v"]
                    slot["t"].append(round((e["e"] - t0) / 1e9, 6))
                    slot["in"].append(slot["htod"])
                    slot["out"].append(slot["dtoh"])
                    break
        if name == "gpu_fault":
            acc = ACCESS.get(e.get("f", 0), str(e.get("f")))
            faults_by_access[acc] = faults_by_access.get(acc, 0) + e["v"]
    ranges, instants = nvtx_ranges([e for e in ev if e.get("k") == "marker"], t0)
    for a in per_alloc.values():  # at most 400 points per allocation, the last one kept
        step = max(1, len(a["t"]) // 400)
        for k in ("t", "in", "out"):
            a[k] = a[k][::step] + ([a[k][-1]] if (len(a[k]) - 1) % step else [])
    out.update(totals=totals, events=events, by_cause=by_cause, faults_by_access=faults_by_access,
               timeline=timeline, allocations=list(per_alloc.values()), ranges=ranges, instants=instants,
               wall_start=start.get("w"),
               kernels=sum(1 for e in ev if e.get("k") == "kernel"),
               kernel_s=sum(e["e"] - e["s"] for e in ev if e.get("k") == "kernel") / 1e9,
               memcpy_bytes=sum(e["b"] for e in ev if e.get("k") == "memcpy"),
               allocations_made=len(allocs))
    # The studies' analyses: faults per migration, eviction against migration.
    out.update(migration_ratios(totals, events, by_cause))
    return out


def shift_trace(tr, offset):
    """Puts the trace's times (seconds since the tracer started) on the sampler's clock (seconds since the
    program started), so one time axis serves both."""
    sh = lambda t: None if t is None else round(t + offset, 6)  # noqa: E731
    for d in tr["timeline"]:
        tr["timeline"][d] = [(sh(t), v) for t, v in tr["timeline"][d]]
    for a in tr["allocations"]:
        a["t"] = [sh(t) for t in a["t"]]
    tr["ranges"] = [(n, sh(a), sh(b)) for n, a, b in tr["ranges"]]
    tr["instants"] = [(n, sh(t)) for n, t in tr["instants"]]
    tr["clock"] = "program"
