"""The UVM driver's own event queue in a libumtrace trace (`umscope profile --uvm-events`,
native/profiler/uvm_events.cpp): GPU fault-buffer entries with their batch, replays, and migrations with their
cause, read into a summary. The queue is ours and large, so unlike CUPTI's records it says itself whether it
lost anything (the driver's per-type `dropped` counts, read at exit)."""

import statistics

from umscope.profile.codes import ACCESS, CAUSES

TYPES = {2: "migration", 3: "gpu_fault", 4: "gpu_fault_replay", 5: "fault_buffer_overflow"}
PAGE = 4096


def _way(e) -> str:
    """A migration's direction: processor index 0 is the CPU (uvm_id_value of UVM_ID_CPU); GPUs are 1 and up."""
    return "htod" if e["src"] == 0 else "dtoh" if e["dst"] == 0 else "dtod"


def _dropped(ev) -> dict:
    """Events the driver dropped because the queue was full, per type, over every process's end line."""
    dropped = {}
    for e in ev:
        if e.get("k") == "uvm_events_end":
            for t, n in enumerate(e.get("dropped") or []):
                if n:
                    name = TYPES.get(t, f"type{t}")
                    dropped[name] = dropped.get(name, 0) + n
    return dropped


def complete(ev) -> bool:
    """Whether the trace holds every event of the driver's queue: it was on, reached its end, dropped nothing."""
    return (any(e.get("k") == "uvm_events" and e.get("ok") for e in ev)
            and any(e.get("k") == "uvm_events_end" for e in ev) and not _dropped(ev))


def clock_offsets(ev) -> dict:
    """Per process, the trace's clock minus the driver's (CLOCK_MONOTONIC_RAW), from libumtrace's `clocks` line."""
    return {e.get("_p"): e["t"] - e["raw"] for e in ev if e.get("k") == "clocks"}


def summarise(ev) -> dict:
    """`ev`: a trace's records (every process). {} when the queue was not asked for; else whether it was on
    (and why not), whether it is complete, and the counts a reader of the driver's fault path needs."""
    cfg = [e for e in ev if e.get("k") == "uvm_events"]
    if not cfg:
        return {}
    if not any(e.get("ok") for e in cfg):
        return {"on": False, "why": "; ".join(sorted({e.get("why", "?") for e in cfg}))}
    dropped = _dropped(ev)
    faults = [e for e in ev if e.get("k") == "uvm_fault"]
    replays = [e for e in ev if e.get("k") == "uvm_replay"]
    # An entry and the instances the driver merged into it are written with one time stamp (uvm_tools.c records
    # them in one call, and counts the entry once in its gpu_faults counter): distinct (process, GPU, batch, time).
    entries = {(e.get("_p"), e["g"], e["b"], e["t"]) for e in faults}
    batches = {}
    for e in faults:
        batches.setdefault((e.get("_p"), e["g"], e["b"]), []).append(e)
    replay_t = {(e.get("_p"), e["g"], e["b"]): e["t"] for e in replays}
    by_access = {}
    for e in faults:
        name = ACCESS.get(e.get("acc", 0), str(e.get("acc")))
        by_access[name] = by_access.get(name, 0) + 1
    migrated = {"htod": {}, "dtoh": {}, "dtod": {}}
    for e in ev:
        if e.get("k") != "uvm_migration":
            continue
        cause = CAUSES.get(e.get("cause", 0), str(e.get("cause")))
        migrated[_way(e)][cause] = migrated[_way(e)].get(cause, 0) + e["n"]
    per_batch_entries = [len({f["t"] for f in fs}) for fs in batches.values()]
    per_batch_pages = [len({f["a"] // PAGE for f in fs}) for fs in batches.values()]
    # A batch's service: from the driver's first look at its first entry to the replay it queued.
    service = [(replay_t[k] - min(f["t"] for f in fs)) / 1e3 for k, fs in batches.items() if k in replay_t]

    def med(xs):
        return statistics.median(xs) if xs else None

    return {"on": True, "complete": complete(ev), "dropped": dropped,
            "gpu_fault_instances": len(faults), "gpu_fault_entries": len(entries), "batches": len(batches),
            "replays": len(replays), "fault_pages": len({(e.get("_p"), e["a"] // PAGE) for e in faults}),
            "faults_by_access": by_access, "migrated": {k: v for k, v in migrated.items() if v},
            "entries_per_batch_median": med(per_batch_entries), "pages_per_batch_median": med(per_batch_pages),
            "batch_service_us_median": med(service)}


def migrations_on_trace_clock(ev):
    """The driver's migrations as (way, address, bytes, time on the trace's clock in ns, cause), in time order, or None
    where a process's trace lacks the reading of both clocks that puts them there (libumtrace's `clocks` line).
    The time is the CPU's when the driver queued the copy (t0): the event's end time (t1) is when the driver's
    worker passed the completed copy on, in bursts (a 138 ms read's 22443 migrations all carried t1 within its last
    1.5 ms, H100), and its GPU times are on the GPU's clock."""
    offset = clock_offsets(ev)
    moves = []
    for e in ev:
        if e.get("k") != "uvm_migration":
            continue
        if e.get("_p") not in offset:
            return None
        moves.append((_way(e), e["a"], e["n"], e["t0"] + offset[e.get("_p")], CAUSES.get(e.get("cause", 0), "unknown")))
    return sorted(moves, key=lambda m: m[3])
