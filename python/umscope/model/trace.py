"""Page access streams for the simulator from a program's unified-memory trace (libumtrace's JSON lines,
written by `umscope profile --um-trace`, or kept with UMSCOPE_TRACE_FILE).

The tracer sees what the driver does, not every access: the stream derived here holds, in time order,
each page the GPU migrated in on demand or faulted on (GPU accesses), each page the CPU faulted on (CPU
accesses), and a barrier at each kernel's end. Accesses to pages already resident are invisible to the
tracer, so a replay of this stream reproduces the program's first touches and re-faults, not its reuse
of resident data (say so when a result depends on reuse)."""


import bisect
from umscope.model import simulate as sim

ALIGN_PAGES = 512  # allocations placed on 2 MiB boundaries in the simulated address space


def read_jsonl(path) -> list:
    """libumtrace's JSON lines, plain or gzip-compressed (as the kept traces in docs/ are), read and checked by
    umscope.inputs.read_trace; anything else (a umsim trace too) is a usage error."""
    from umscope import inputs
    from umscope.errors import UsageError
    kind, data = inputs.read_trace(path)
    if kind != "jsonl":
        raise UsageError(f"{path}: a umsim trace, not libumtrace's JSON lines")
    return data


# The replay's limits: umsim numbers pages with 30 bits, and a stream longer than this many page events is no
# trace libumtrace wrote of one program (64 Mi events: 256 GiB migrated page by page).
MAX_PAGES = 1 << 30
MAX_EVENTS = 1 << 26


def from_umtrace(records, page_bytes=4096) -> dict:
    """{'allocs': [(first_page, n_pages)], 'events': [...], 'kernels': n, 'gpu_faults': n, 'htod_bytes': n,
    'cpu_faults': n, 'recorded_htod_bytes': n, 'driver_htod_bytes': n or None, 'prefetched_unseen_bytes': n,
    'stream': gpu_stream(records)}: the
    umsim trace of a libumtrace record list. prefetched_unseen_bytes: the pages the driver's density prefetcher
    moved to the GPU (CUPTI's cause 3, the driver's cause "prefetch") that the stream never shows the GPU reach:
    their accesses found them resident, so no record holds them (advise prices one read of each).
    recorded_htod_bytes: every host-to-device byte CUPTI's records hold (prefetches too);
    driver_htod_bytes: the UVM driver's own count over the run (libumtrace's uvm_counters, all GPUs), where the
    trace has it: where the records hold less, CUPTI dropped some and the stream is incomplete."""
    allocs = sorted({(e["a"], e["b"]) for e in records if e.get("k") == "mem" and e.get("op") == 1 and e.get("b")})
    base, table = 0, []
    from umscope.errors import UsageError
    for a, b in allocs:
        n = (b + page_bytes - 1) // page_bytes
        table.append((a, b, base, n))
        base = (base + n + ALIGN_PAGES - 1) // ALIGN_PAGES * ALIGN_PAGES
        if base >= MAX_PAGES:
            raise UsageError(f"the trace's allocations hold more than {MAX_PAGES} pages of {page_bytes} bytes: more "
                             "than the simulator's page numbers reach")

    def page_of(addr):
        for a, b, first, n in table:
            if a <= addr < a + b:
                return first + (addr - a) // page_bytes
        return None

    timed, prefetched = [], []
    stats = {"kernels": 0, "gpu_faults": 0, "htod_bytes": 0, "cpu_faults": 0, "recorded_htod_bytes": 0,
             "driver_htod_bytes": None, "gpu_source": "CUPTI records", **work_signs(records, allocs)}
    driver = _driver_gpu_stream(records, page_bytes)
    for e in records:
        k = e.get("k")
        if k == "uvm_counters" and e.get("dev") == -1 and e.get("htod") is not None:
            stats["driver_htod_bytes"] = int(e["htod"])  # the last one: the run's total
        if k == "um" and e.get("c") == 1 and driver is None:
            stats["recorded_htod_bytes"] += e.get("v", 0)
        if k == "kernel":
            timed.append((e["e"], 2, None, 0))
            stats["kernels"] += 1
        elif k == "um":
            c = sim_counter = e.get("c")
            if sim_counter == 4 and driver is None:  # GPU page fault group
                stats["gpu_faults"] += e.get("v", 0)
                timed.append((e["s"], 0, e["a"], 0))
            elif c == 1 and e.get("f") != 3 and driver is None:  # htod not caused by a prefetch: pages the GPU needed
                stats["htod_bytes"] += e.get("v", 0)
                _room(timed, e.get("v", 0) // page_bytes)
                for off in range(0, e.get("v", 0), page_bytes):
                    timed.append((e["s"], 0, e["a"] + off, 0))
            elif c == 1 and driver is None:  # the driver's speculative prefetch: not in the stream, kept apart
                _room(prefetched, e.get("v", 0) // page_bytes)
                prefetched += range(e["a"], e["a"] + e.get("v", 0), page_bytes)
            elif c == 3:  # CPU page fault
                stats["cpu_faults"] += 1
                timed.append((e["s"], 1, e["a"], sim.CPU))
    if driver is not None:
        timed += driver["timed"]
        prefetched = driver["prefetched"]
        stats.update({k: v for k, v in driver.items() if k not in ("timed", "prefetched")},
                     gpu_source="the driver's events")
    timed.sort(key=lambda x: (x[0], x[1]))
    events, last = [], None
    for _, kind, addr, flag in timed:
        if kind == 2:
            if events and events[-1] != sim.BARRIER:
                events.append(sim.BARRIER)
            continue
        p = page_of(addr)
        if p is None:
            continue
        ev = p | flag
        if ev != last:  # the same page twice in a row is one access for the replay
            events.append(ev)
            last = ev
    seen = {ev for ev in events if ev != sim.BARRIER and not ev & sim.CPU}
    unseen = {p for p in map(page_of, prefetched) if p is not None} - seen
    return dict(stats, allocs=[(first, n) for _, _, first, n in table], events=events,
                prefetched_unseen_bytes=len(unseen) * page_bytes, stream=gpu_stream(records))


def gpu_stream(records) -> dict:
    """The traced run's GPU stream, measured from CUPTI's timestamps: {'span_ns': from the first kernel, copy or
    migration to the GPU to the end of the last kernel or copy (the CPU's read-back of managed results after the
    kernels is not in it), 'idle_ns': the part of that span with no kernel, copy or migration running (the host's
    own pace between its launches, which no memory mode changes), 'kernels': kernels with both times,
    'resident_kernels', 'resident_kernel_ns': those during which no GPU fault or migration to the GPU began, and their
    summed time, 'faulting_kernel_ns': the other kernels' summed time}; None without a timed kernel or copy.
    thirdparty.py times every run with it; advise prices a traced program's own mode with it."""
    iv, starts = [], []
    t = lambda e, f: e.get(f) if type(e.get(f)) is int and e.get(f) > 0 else None  # noqa: E731 - a time, or None
    for e in records:
        k, s, f = e.get("k"), t(e, "s"), t(e, "e")
        if k in ("kernel", "memcpy") and s and f and f >= s:
            iv.append((s, f, k))
        elif k == "um" and e.get("c") == 1 and s:
            starts.append(s)
            if f and f > s:
                iv.append((s, f, k))
    ends = [b for _, b, k in iv if k != "um"]
    if not ends:
        return None
    t0, t1 = min(starts + [a for a, _, _ in iv]), max(ends)
    busy, cur = 0, None  # the union of the intervals, within [t0, t1]
    for a, b, _ in sorted((max(a, t0), min(b, t1), k) for a, b, k in iv if a < t1):
        if cur is None or a > cur[1]:
            busy += cur[1] - cur[0] if cur else 0
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    busy += cur[1] - cur[0] if cur else 0
    # Kernels during which no GPU fault or migration to the GPU began: their data was resident, so their measured
    # time is their own work, the same in every mode that has the data on the GPU before them.
    um = sorted(t(e, "s") for e in records if e.get("k") == "um" and e.get("c") in (1, 4) and t(e, "s"))
    kernels = [(a, b) for a, b, k in iv if k == "kernel"]
    resident = [b - a for a, b in kernels if bisect.bisect_right(um, b) == bisect.bisect_left(um, a)]
    return {"span_ns": t1 - t0, "idle_ns": max(0, t1 - t0 - busy), "kernels": len(kernels),
            "resident_kernels": len(resident), "resident_kernel_ns": sum(resident),
            "faulting_kernel_ns": sum(b - a for a, b in kernels) - sum(resident)}


def work_signs(records, allocs) -> dict:
    """What in a trace says its GPU work did not complete (model.driver.gpu_work_note words it): kernels CUPTI gave
    no start and no end, and GPU faults outside every allocation of allocs [(address, bytes)] (none where allocs is
    empty: allocation records can be left out)."""
    untimed = sum(1 for e in records if e.get("k") == "kernel" and not e.get("s") and not e.get("e"))
    outside = [e["a"] for e in records if allocs and e.get("k") == "um" and e.get("c") == 4 and "a" in e
               and not any(a <= e["a"] < a + b for a, b in allocs)]
    return {"kernels_untimed": untimed, "faults_outside": len(outside),
            "fault_outside_example": _nearest(outside[0], allocs) if outside else None}


def _nearest(addr, allocs):
    """(address, the nearest allocation's start, bytes from that allocation: negative before it) of a fault
    outside them all."""
    if not allocs:
        return (addr, None, None)
    a, b = min(allocs, key=lambda x: min(abs(addr - x[0]), abs(addr - (x[0] + x[1]))))
    return (addr, a, addr - a if addr < a else addr - (a + b))


def _room(timed, n):
    """Refuses a stream that would pass MAX_EVENTS page events (a record claiming petabytes migrated)."""
    if len(timed) + n > MAX_EVENTS:
        from umscope.errors import UsageError
        raise UsageError(f"the trace's stream would hold more than {MAX_EVENTS} page events: not a trace of one "
                         "program libumtrace wrote (a migration record of an absurd size?)")


def _driver_gpu_stream(records, page_bytes):
    """The GPU's side of the stream from the driver's own events (`umscope profile --uvm-events`), where they are
    complete (nothing dropped) and placed on the trace's clock: every fault entry's page, and every page migrated
    in for coherence (on demand), with the counts of both. None otherwise: CUPTI's records are used, which
    lose events under many faults at once."""
    from umscope.profile.uvm_events import clock_offsets, complete, migrations_on_trace_clock
    if not complete(records):
        return None
    moves = migrations_on_trace_clock(records)
    offset = clock_offsets(records)
    if moves is None or any(e.get("_p") not in offset for e in records if e.get("k") == "uvm_fault"):
        return None
    timed, prefetched, faults, htod, moved_in = [], [], 0, 0, 0
    for e in records:
        if e.get("k") == "uvm_fault":
            faults += 1
            timed.append((e["t"] + offset[e.get("_p")], 0, e["a"], 0))
    for way, addr, n, t, cause in moves:
        if way != "htod":
            continue
        moved_in += n
        if cause != "prefetch":  # needed by the GPU, as CUPTI's non-prefetch htod records above
            htod += n
            _room(timed, n // page_bytes)
            for off in range(0, n, page_bytes):
                timed.append((t, 0, addr + off, 0))
        else:
            _room(prefetched, n // page_bytes)
            prefetched += range(addr, addr + n, page_bytes)
    return {"timed": timed, "prefetched": prefetched, "gpu_faults": faults, "htod_bytes": htod,
            "recorded_htod_bytes": moved_in}


def write(path, tr, page_bytes=4096):
    sim.write_trace(path, tr["allocs"], tr["events"], page_bytes)
