"""libumtrace, the CUPTI injection library of `umscope profile --um-trace`: where it is, and its JSON lines
read into totals, timelines and per-allocation traffic."""

import os
from pathlib import Path

from umscope.profile.analyses import migration_ratios, nvtx_ranges
from umscope.profile.codes import ACCESS, CAUSES, COUNTERS
from umscope.profile.uvm_events import migrations_on_trace_clock, summarise


def tracer_path():
    """The CUPTI injection library, if this build has one."""
    env = os.environ.get("UMSCOPE_UMTRACE")
    if env:
        return env if Path(env).exists() else None
    lib = Path(__file__).parent.parent / "lib" / "libumtrace.so"
    return str(lib) if lib.exists() else None


def inject(env, trace_file, lib):
    """Sets env (a dict: the program's environment) so that libumtrace (lib) traces the program into trace_file.
    NVTX ranges the program emits reach CUPTI through NVTX's injection: libumtrace itself, which starts the
    trace at the first NVTX call (a range opened before any CUDA call is kept) and hands NVTX on to CUPTI;
    an NVTX injection the environment already names is kept."""
    env["CUDA_INJECTION64_PATH"] = lib
    env["UMSCOPE_TRACE_FILE"] = str(trace_file)
    if "NVTX_INJECTION64_PATH" not in env:
        env["NVTX_INJECTION64_PATH"] = lib


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


def _bus_key(bus):
    """A PCI bus id as CUDA ("0000:1B:00.0") or NVML ("00000000:1b:00.0") writes it -> (domain, bus, device,
    function); None where it does not parse."""
    try:
        dom, b, rest = str(bus).strip().split(":")
        dev, fn = rest.split(".")
        return int(dom, 16), int(b, 16), int(dev, 16), int(fn, 16)
    except (AttributeError, ValueError):
        return None


def gpu_labels(ev, gpus=()) -> dict:
    """(process, CUDA device ordinal) (what CUPTI's deviceId, srcId and dstId carry; each process numbers the GPUs
    it sees, e.g. under its own CUDA_VISIBLE_DEVICES) -> umscope's GPU label: gpuN, N the GPU's place in `gpus`
    (PCI bus ids, umscope's numbering), matched through the process's device table (ordinal -> PCI bus id, read
    from the driver). An ordinal the table or `gpus` cannot place keeps its CUDA number, labelled so ("cuda1")."""
    index = {_bus_key(b): i for i, b in enumerate(gpus or ())}
    labels = {}
    for e in ev:
        if e.get("k") == "device":
            i = index.get(_bus_key(e.get("bus")))
            labels[(e.get("_p", 0), e["id"])] = f"gpu{i}" if i is not None else f"cuda{e['id']}"
    return labels


def trace_files(path) -> list:
    """The trace file and the per-process files beside it (FILE.PID: every process of the program after the
    first that started CUDA writes its own)."""
    import glob
    return [str(path)] + sorted(f for f in glob.glob(glob.escape(str(path)) + ".*") if f.rsplit(".", 1)[1].isdigit())


def read_process_traces(path) -> list:
    """Every process's JSON lines, each event tagged with its process (_p: 0 for the trace file, then one per
    FILE.PID)."""
    ev = []
    for p, f in enumerate(trace_files(path)):
        for e in read_trace_lines(f):
            e["_p"] = p
            ev.append(e)
    return ev


# Which id of a unified-memory record names the GPU it happened on: the destination of a migration to a device or
# a device-to-device copy; the source of a migration to the host, a GPU fault, a throttling or a remote map (on
# the H100, driver 580, a GPU's mapping of host-preferred memory came with srcId 0 and dstId 0xffffffff). A
# thrashing record's srcId is a bit mask of the processors fighting; a CPU fault has no GPU.
_GPU_FIELD = {"htod": "dst", "dtoh": "src", "gpu_fault": "src", "throttling": "src", "remote_map": "src",
              "dtod": "dst"}


def record_gpus(e, name, label) -> list:
    """The GPU labels a unified-memory record belongs to ([] for CPU faults)."""
    if name == "cpu_fault":
        return []
    if name == "thrashing":
        mask = e.get("src") or 0
        return [label(i) for i in range(32) if mask >> i & 1] or [label(0)]
    return [label(e.get(_GPU_FIELD.get(name, "dst"), 0))]


def one_gpu(out, ev):
    """The label of the one GPU the driver's events belong to, or None. The driver numbers its GPUs its own way, not
    by CUDA ordinal: on a host with one GPU that GPU is it; with several, it is the GPU CUPTI's records (unified
    memory, kernels, copies) name where both they and the driver's migrations name a single GPU (the program used
    one)."""
    if len(out["devices"]) <= 1:
        return next(iter(out["devices"]), next(iter(out["by_gpu"]), "gpu"))
    driver = {p for e in ev if e.get("k") == "uvm_migration" for p in (e["src"], e["dst"]) if p != 0}
    return next(iter(out["by_gpu"])) if len(driver) == 1 and len(out["by_gpu"]) == 1 else None


def _add_to_allocation(per_alloc, allocs, addr, n, way, t):
    """Adds a migration of n bytes at addr (way: htod or dtoh, at t seconds) to the allocation holding it."""
    for a, b in allocs:
        if a <= addr < a + b:
            slot = per_alloc.setdefault(a, {"address": a, "bytes": b, "htod": 0, "dtoh": 0, "t": [], "in": [],
                                             "out": []})
            slot[way] += n
            slot["t"].append(t)
            slot["in"].append(slot["htod"])
            slot["out"].append(slot["dtoh"])
            return


def _thin(per_alloc):
    """At most 400 points per allocation's timeline, the last one kept."""
    for a in per_alloc.values():
        step = max(1, len(a["t"]) // 400)
        for k in ("t", "in", "out"):
            a[k] = a[k][::step] + ([a[k][-1]] if (len(a[k]) - 1) % step else [])


TRACK_BINS = 400      # intervals of the per-allocation migration and fault lanes, whatever the trace's length
TRACK_SPANS = 1500    # kernel (and copy) slices kept per GPU; closer ones are merged beyond that
TRACK_ALLOCS = 8      # allocations with lanes of their own (the most migrated); the rest are summed as 'other'


def _merge_spans(spans, limit=TRACK_SPANS) -> list:
    """[[start s, end s, count, name, bytes]] sorted, merged where closer than a gap that leaves at most `limit`:
    a merged slice says how many it holds, so the counts stay exact while the size stays bounded."""
    spans = sorted(spans)
    if not spans:
        return []
    extent = max(s[1] for s in spans) - spans[0][0] or 1e-9
    gap = 0.0
    while True:
        out = []
        for s in spans:
            if out and s[0] - out[-1][1] <= gap:
                last = out[-1]
                last[1] = max(last[1], s[1])
                last[2] += s[2]
                last[4] += s[4]
                if last[3] != s[3] and not last[3].endswith(" …"):
                    last[3] += " …"
            else:
                out.append(list(s))
        if len(out) <= limit:
            return [[round(a, 6), round(b, 6), n, name, nb] for a, b, n, name, nb in out]
        gap = gap * 2 if gap else extent / (4 * limit)


def event_tracks(ev, um, t0, allocs, label, moves=None) -> dict:
    """The timeline's lanes, bounded in size whatever the trace's: kernels and copies as slices per GPU
    (_merge_spans), and per allocation the bytes migrated in (by cause) and out, and the GPU page faults, in
    TRACK_BINS equal intervals (per interval, not cumulative). moves: the driver's migrations (way, address, bytes,
    ns, cause) where they are the source, else CUPTI's records."""
    ends = [e.get("e", e.get("s", e.get("t"))) for e in ev if e.get("k") in ("um", "kernel", "memcpy", "mem")]
    ends += [m[3] for m in moves or []]
    ends = [t for t in ends if t is not None]
    extent = max(1e-6, (max(ends) - t0) / 1e9) if ends else 1e-6
    width = extent / TRACK_BINS

    def b(ns):
        return max(0, min(TRACK_BINS - 1, int(((ns - t0) / 1e9) / width)))

    def owner(addr):
        for a, n in allocs:
            if a <= addr < a + n:
                return a
        return None

    lanes = {}

    def lane(addr):
        return lanes.setdefault(addr, {"address": addr, "bytes": dict(allocs).get(addr, 0), "htod": {}, "dtoh": {},
                                       "faults": {}, "moved": 0})

    def add(d, key, i, v):
        slot = d.setdefault(key, {})
        slot[i] = slot.get(i, 0) + v

    if moves is not None:
        for way, addr, n, t, cause in moves:
            if way in ("htod", "dtoh"):
                ln = lane(owner(addr))
                add(ln[way], cause, b(t), n)
                ln["moved"] += n
    for e in um:
        name = COUNTERS.get(e["c"])
        if name == "gpu_fault":
            ln = lane(owner(e.get("a", 0)))
            ln["faults"][b(e["s"])] = ln["faults"].get(b(e["s"]), 0) + e["v"]
        elif name in ("htod", "dtoh") and moves is None:
            ln = lane(owner(e["a"]))
            add(ln[name], CAUSES.get(e.get("f", 0), str(e.get("f"))), b(e["e"]), e["v"])
            ln["moved"] += e["v"]
    ranked = sorted(lanes.values(), key=lambda ln: (ln["address"] is None, -ln["moved"]))
    kept, rest = ranked[:TRACK_ALLOCS], ranked[TRACK_ALLOCS:]
    if rest:
        other = {"address": None, "bytes": sum(ln["bytes"] for ln in rest), "htod": {}, "dtoh": {}, "faults": {},
                 "moved": 0}
        for ln in rest:
            for way in ("htod", "dtoh"):
                for cause, bins in ln[way].items():
                    for i, v in bins.items():
                        add(other[way], cause, i, v)
            for i, v in ln["faults"].items():
                other["faults"][i] = other["faults"].get(i, 0) + v
            other["moved"] += ln["moved"]
        kept = [k for k in kept if k["address"] is not None] + [other]
    sparse = lambda d: sorted([i, v] for i, v in d.items())  # noqa: E731
    allocations = [{"address": ln["address"], "bytes": ln["bytes"],
                    "htod": {c: sparse(v) for c, v in ln["htod"].items()},
                    "dtoh": {c: sparse(v) for c, v in ln["dtoh"].items()}, "faults": sparse(ln["faults"])}
                   for ln in kept]
    kernels, copies = {}, {}
    for e in ev:
        if e.get("k") == "kernel" and "s" in e and "e" in e:
            kernels.setdefault(label(e["_p"], e.get("d", 0)), []).append(
                ((e["s"] - t0) / 1e9, (e["e"] - t0) / 1e9, 1, str(e.get("n", "kernel"))[:80], 0))
        elif e.get("k") == "memcpy" and "s" in e and "e" in e:
            way = {1: "host→device", 2: "device→host", 8: "device→device", 10: "peer"}.get(e.get("ck"), "copy")
            copies.setdefault(label(e["_p"], e.get("d", 0)), []).append(
                ((e["s"] - t0) / 1e9, (e["e"] - t0) / 1e9, 1, way, e.get("b", 0)))
    return {"start": 0.0, "width": width, "bins": TRACK_BINS, "allocations": allocations,
            "kernels": {g: _merge_spans(v) for g, v in kernels.items()},
            "copies": {g: _merge_spans(v) for g, v in copies.items()}}


# The record kinds profile leaves out unless asked (--kernels, --copies, --allocations): CUPTI ties each to the API
# call that made it, and a launch-bound program pays for it per launch or call (profile/__init__.py).
OPTIONAL_RECORDS = ("kernels", "copies", "allocations")


def records_off(note):
    """The optional record kind a libumtrace note says was left out, else None (umtrace.cpp record_wanted writes
    "<kind> records off (UMSCOPE_UMTRACE_RECORDS=...)" where the variable leaves a kind out)."""
    return next((kind for kind in OPTIONAL_RECORDS if note.startswith(f"{kind} records off")), None)


def _gpu_work(ev, allocs) -> str:
    """model.driver.gpu_work_note of the trace (model.trace.work_signs: what says its GPU work did not complete)."""
    from umscope.model.driver import gpu_work_note
    from umscope.model.trace import work_signs
    return gpu_work_note(dict(work_signs(ev, allocs), kernels=sum(1 for e in ev if e.get("k") == "kernel")))


def parse_trace(path, gpus=()) -> dict:
    """Totals, timelines and analyses from libumtrace's JSON lines; `gpus` (PCI bus ids, umscope's GPU order)
    puts each record on the GPU it came from."""
    try:
        ev = read_process_traces(path)
    except OSError:
        return {}
    if not ev:
        return {}  # the library never started: the program did not initialise CUDA
    start = next((e for e in ev if e.get("k") == "start"), {})
    procs = {e["_p"] for e in ev if e.get("k") == "start"}
    t0 = start.get("t")
    um = [e for e in ev if e.get("k") == "um"]
    if t0 is None:
        t0 = min((e["s"] for e in um), default=0)
    ended = {e["_p"] for e in ev if e.get("k") == "end"}
    out = {"errors": [e for e in ev if e.get("k") == "error"], "complete": bool(ended) and procs <= ended,
           "processes": len(procs),
           "dropped": sum(e.get("n", 0) for e in ev if e.get("k") == "dropped"),
           "notes": sorted({str(e.get("what")) for e in ev if e.get("k") == "note"})}  # e.g. kernel records off
    detached = sum(1 for e in ev if e.get("k") == "detach")
    if detached:  # the program took the tracer out (umtrace_detach, bench/overhead_ab.py --toggle tracer)
        out["notes"].append(f"the program detached the tracer {detached} time(s) (umtrace_detach): its records "
                            "cover the attached periods only")
    totals = {name: 0 for name in COUNTERS.values()}
    events = {name: 0 for name in COUNTERS.values()}
    by_cause = {"htod": {}, "dtoh": {}}
    faults_by_access = {}
    timeline = {"htod": [], "dtoh": []}
    cum = {"htod": 0, "dtoh": 0}
    allocs = sorted(((e["a"], e["b"]) for e in ev if e.get("k") == "mem" and e.get("op") == 1), key=lambda x: x[0])
    out["gpu_work"] = _gpu_work(ev, allocs)
    per_alloc = {}
    labels = gpu_labels(ev, gpus)
    label = lambda p, i: labels.get((p, i), f"cuda{i}")  # noqa: E731
    by_gpu = {}
    timeline_by_gpu = {}
    # Records left out (UMSCOPE_UMTRACE_RECORDS, profile's default): their counts are unknown, not zero.
    off = {records_off(n) for n in out["notes"]}
    kernels_off, copies_off, allocations_off = ("kernels" in off), ("copies" in off), ("allocations" in off)

    def gpu_slot(g):
        return by_gpu.setdefault(g, dict({name: 0 for name in COUNTERS.values() if name != "cpu_fault"},
                                         kernels=None if kernels_off else 0,
                                         kernel_s=None if kernels_off else 0.0,
                                         memcpy_bytes=None if copies_off else 0))

    for e in sorted(um, key=lambda e: e["s"]):
        name = COUNTERS.get(e["c"], f"counter{e['c']}")
        # A CPU page-fault record is one fault (its value field is not a count on this CUPTI).
        totals[name] = totals.get(name, 0) + (1 if name == "cpu_fault" else e["v"])
        events[name] = events.get(name, 0) + 1
        for g in record_gpus(e, name, lambda i, p=e["_p"]: label(p, i)):
            slot = gpu_slot(g)
            slot[name] = slot.get(name, 0) + e["v"]
            if name in ("htod", "dtoh"):
                tl = timeline_by_gpu.setdefault(g, {"htod": [], "dtoh": []})[name]
                tl.append((round((e["e"] - t0) / 1e9, 6), (tl[-1][1] if tl else 0) + e["v"]))
        if name in by_cause:
            cause = CAUSES.get(e.get("f", 0), str(e.get("f")))
            by_cause[name][cause] = by_cause[name].get(cause, 0) + e["v"]
            cum[name] += e["v"]
            timeline[name].append((round((e["e"] - t0) / 1e9, 6), cum[name]))
            _add_to_allocation(per_alloc, allocs, e["a"], e["v"], name, round((e["e"] - t0) / 1e9, 6))
        if name == "gpu_fault":
            acc = ACCESS.get(e.get("f", 0), str(e.get("f")))
            faults_by_access[acc] = faults_by_access.get(acc, 0) + e["v"]
    for e in ev:
        if e.get("k") in ("kernel", "memcpy") and "d" in e:
            slot = gpu_slot(label(e["_p"], e["d"]))
            if e["k"] == "kernel":
                slot["kernels"] += 1
                slot["kernel_s"] += (e["e"] - e["s"]) / 1e9
            else:
                slot["memcpy_bytes"] += e["b"]
    # The tracer's own accounting: kinds CUPTI refused, and records it wrote that did not reach this reader.
    ends = [e for e in ev if e.get("k") == "end"]
    refused = sorted({COUNTERS.get(e["c"], str(e["c"])) for e in ev if e.get("k") == "config" and not e.get("ok")}
                     - {COUNTERS.get(e["c"], str(e["c"])) for e in ev if e.get("k") == "config" and e.get("ok")})
    written = [e["um_records"] for e in ends if isinstance(e.get("um_records"), list)]
    lost = (sum(map(sum, written)) - len(um)) if written and len(written) == len(ends) else None
    # The UVM driver's own counters (lossless totals, read at exit): every processor, and per GPU.
    driver = {}
    for e in ev:
        if e.get("k") == "uvm_counters":
            key = "all" if e.get("dev", -1) < 0 else label(e["_p"], e["dev"])
            slot = driver.setdefault(key, {})
            for k in ("htod", "dtoh", "cpu_faults", "gpu_faults", "prefetch_htod", "prefetch_dtoh"):
                slot[k] = slot.get(k, 0) + e.get(k, 0)  # summed over the program's processes
    driver_refused = [e for e in ev if e.get("k") == "uvm_config" and not e.get("ok")]
    ranges, instants = nvtx_ranges([dict(e, id=(e["_p"], e.get("id"))) for e in ev if e.get("k") == "marker"], t0)
    _thin(per_alloc)
    out.update(totals=totals, events=events, by_cause=by_cause, faults_by_access=faults_by_access,
               timeline=timeline, allocations=list(per_alloc.values()), ranges=ranges, instants=instants,
               wall_start=start.get("w"),
               kernels=None if kernels_off else sum(1 for e in ev if e.get("k") == "kernel"),
               kernel_s=None if kernels_off else sum(e["e"] - e["s"] for e in ev if e.get("k") == "kernel") / 1e9,
               memcpy_bytes=None if copies_off else sum(e["b"] for e in ev if e.get("k") == "memcpy"),
               # CUPTI copy kinds: 1 host to device, 2 device to host (for the counters' comparison).
               memcpy_by_direction=None if copies_off else {
                   d: sum(e["b"] for e in ev if e.get("k") == "memcpy" and e.get("ck") == ck)
                   for d, ck in (("htod", 1), ("dtoh", 2))},
               allocations_made=None if allocations_off else len(allocs), by_gpu=by_gpu,
               timeline_by_gpu=timeline_by_gpu,
               devices={label(e["_p"], e["id"]): e.get("bus") for e in ev if e.get("k") == "device"},
               kinds_refused=refused, records_lost=lost, driver_counters=driver,
               driver_counters_refused=bool(driver_refused) and not driver,
               kinds_configured=sorted({COUNTERS.get(e["c"], str(e["c"])) for e in ev
                                        if e.get("k") == "config" and e.get("ok")}))
    out["driver_events"] = summarise(ev)  # the driver's own event queue, with --uvm-events
    out["migrations_source"] = "CUPTI records"
    moves = migrations_on_trace_clock(ev) if out["driver_events"].get("complete") else None
    gpu = one_gpu(out, ev) if moves is not None else None  # its scan of the records only where events are complete
    if gpu:
        # Every migration the driver made (nothing dropped), where CUPTI's records may hold a share: the timelines
        # and per-allocation figures come from them.
        timeline, cum, per_alloc = {"htod": [], "dtoh": []}, {"htod": 0, "dtoh": 0}, {}
        for way, addr, n, t, _ in moves:
            if way not in cum:
                continue
            x = round((t - t0) / 1e9, 6)
            cum[way] += n
            timeline[way].append((x, cum[way]))
            _add_to_allocation(per_alloc, allocs, addr, n, way, x)
        _thin(per_alloc)
        out.update(timeline=timeline, allocations=list(per_alloc.values()), timeline_by_gpu={gpu: timeline},
                   migrations_source="the driver's events")
    out["tracks"] = event_tracks(ev, um, t0, allocs, label,
                                 moves if out["migrations_source"] == "the driver's events" else None)
    # The studies' analyses: faults per migration, eviction against migration.
    out.update(migration_ratios(totals, events, by_cause))
    return out


def shift_trace(tr, offset):
    """Puts the trace's times (seconds since the tracer started) on the sampler's clock (seconds since the
    program started), so one time axis serves both."""
    sh = lambda t: None if t is None else round(t + offset, 6)  # noqa: E731
    for d in tr["timeline"]:
        tr["timeline"][d] = [(sh(t), v) for t, v in tr["timeline"][d]]
    for per in tr.get("timeline_by_gpu", {}).values():
        for d in per:
            per[d] = [(sh(t), v) for t, v in per[d]]
    for a in tr["allocations"]:
        a["t"] = [sh(t) for t in a["t"]]
    tr["ranges"] = [(n, sh(a), sh(b)) for n, a, b in tr["ranges"]]
    if tr.get("tracks"):
        tk = tr["tracks"]
        tk["start"] = sh(tk["start"])
        for per in (tk["kernels"], tk["copies"]):
            for spans in per.values():
                for s in spans:
                    s[0], s[1] = sh(s[0]), sh(s[1])
    tr["instants"] = [(n, sh(t)) for n, t in tr["instants"]]
    tr["clock"] = "program"
