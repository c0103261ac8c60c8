"""The UVM driver's own fault events, read from a libumtrace trace, summarised for the simulator's validation.

libumtrace writes them when the traced program runs with UMSCOPE_UMTRACE_UVM_EVENTS=1 (a second UVM tools
tracker in queue mode, drained by a thread): one `uvm_fault` line per fault-buffer entry instance
(g, b = batch id, a = address, acc = access type 1 read 2 write 3 atomic 4 prefetch, ft, gpc, cl = client,
ct = client type, t = CPU ns CLOCK_MONOTONIC_RAW when the driver notified it, tg = GPU ns when the GPU wrote
the entry), one `uvm_replay` per batch (t = CPU ns the replay was queued, tg = GPU ns it was done),
`uvm_migration` lines (src, dst, a, n bytes, cause 1 user 2 coherence 3 prefetch 4 eviction 5 access
counters, t0, t1), a `uvm_events` header and a `uvm_events_end` line (events and drops per type).

The driver (uvm_gpu_replayable_faults.c, 580.x) merges an entry into the previous entry of its uTLB, or into
the batch's previous entry when its access type is no more intrusive, when both are on the same page
(fetch_fault_buffer_try_merge_entry), and notifies each remaining entry once (update_batch_and_notify_fault,
also for entries that duplicate another uTLB's page after the sort); uvm_tools.c's uvm_tools_record_fault
writes an event for the entry and one for each merged instance, all with the one NV_GETTIME() taken for the
notification, and adds one to the GPU fault counter. So the counter (`uvm_counters` gpu_faults) equals the
number of distinct (batch, t) pairs: summary() reports both, and the check.

summary() keeps the figures small (a few KB per program) so the raw traces need not be kept."""

import bisect
import gzip
import math
import statistics
from collections import Counter, defaultdict

PAGE = 4096
ACCESS = {1: "read", 2: "write", 3: "atomic", 4: "prefetch"}
CAUSE = {1: "user", 2: "coherence", 3: "prefetch", 4: "eviction", 5: "access_counters"}
ENV = {"UMSCOPE_UMTRACE_UVM_EVENTS": "1"}  # what a traced program's environment needs for the events


def quantiles(values, qs=(0.0, 0.1, 0.5, 0.9, 1.0)):
    """{q: value} of a list (nearest rank, upper median), {} when empty; values rounded to 3 decimals."""
    v = sorted(values)
    if not v:
        return {}
    out = {}
    for q in qs:
        x = v[min(len(v) - 1, int(math.floor(q * len(v))))]
        out[f"p{int(q * 100)}"] = round(x, 3) if isinstance(x, float) else x
    out["mean"] = round(sum(v) / len(v), 3)
    out["n"] = len(v)
    return out


def histogram(values, cap=16):
    """Counts of small integers, the values above `cap` pooled under f'>{cap}'."""
    c = Counter(min(int(x), cap + 1) for x in values)
    return {(str(k) if k <= cap else f">{cap}"): n for k, n in sorted(c.items())}


def _merged(faults):
    """The notified entries: faults grouped by (gpu, batch, t), each group one merged entry (the first
    instance's page and the group's most intrusive access type, as the driver services it)."""
    groups = defaultdict(list)
    for f in faults:
        groups[(f.get("g", 0), f["b"], f["t"])].append(f)
    return groups


def summary(lines, page_bytes=PAGE, batch_size=256, update_put_ratio=50) -> dict:
    """The per-program figures of the driver's fault events in a trace (see the module's doc); batch_size:
    the driver's uvm_perf_fault_batch_count (batches that fetched that many instances are counted as full,
    `batches_at_limit`); update_put_ratio: its uvm_perf_fault_replay_update_put_ratio (`flush`). None when the
    trace has no `uvm_events` header (a tracer without the events, or the program ran without
    UMSCOPE_UMTRACE_UVM_EVENTS=1)."""
    head = next((e for e in lines if e.get("k") == "uvm_events"), None)
    if head is None:
        return None
    end = next((e for e in lines if e.get("k") == "uvm_events_end"), None)
    out = {"ok": bool(head.get("ok")), "why": head.get("why"), "queue": head.get("queue"),
           "mask": head.get("mask"), "end": ({"n": end.get("n"), "dropped": end.get("dropped")} if end else None)}
    if end and any(end.get("dropped") or []):
        out["dropped_total"] = sum(end["dropped"])
    # the GPU's fault buffer overflowed (entries lost before the driver saw them)
    out["fault_buffer_overflows"] = sum(1 for e in lines if e.get("k") == "uvm_fault_overflow")
    faults = [e for e in lines if e.get("k") == "uvm_fault" and "b" in e and "t" in e]
    replays = [e for e in lines if e.get("k") == "uvm_replay" and "b" in e]
    migr = [e for e in lines if e.get("k") == "uvm_migration"]
    if not faults:
        out.update(instances=0, entries=0, batches=0, replays=len(replays))
        return out
    groups = _merged(faults)
    out["instances"] = len(faults)
    out["entries"] = len(groups)  # the driver's gpu_faults, if the reasoning above holds (checked by callers)
    out["access_instances"] = {ACCESS.get(k, str(k)): n for k, n in sorted(Counter(f.get("acc") for f in faults).items())}
    out["access_entries"] = {ACCESS.get(k, str(k)): n for k, n in sorted(Counter(
        max((f.get("acc", 0) for f in g), key=lambda x: (x != 4, x)) for g in groups.values()).items())}
    out["fault_types"] = {str(k): n for k, n in sorted(Counter(f.get("ft") for f in faults).items())}
    out["client_types"] = {str(k): n for k, n in sorted(Counter(f.get("ct") for f in faults).items())}
    out["instances_per_entry"] = histogram([len(g) for g in groups.values()], 8)
    # entries whose instances came from more than one uTLB (the driver's merge into the batch's previous entry)
    out["entries_across_utlbs"] = sum(1 for g in groups.values()
                                      if len({(f.get("gpc"), f.get("cl"), f.get("ct")) for f in g}) > 1)

    # per batch (the driver's batch id; one GPU in these programs, several are kept apart by g)
    by_batch = defaultdict(list)
    for (g, b, t), grp in groups.items():
        by_batch[(g, b)].append((t, grp))
    order = sorted(by_batch, key=lambda k: min(t for t, _ in by_batch[k]))
    out["batches"] = len(order)
    raw_pb, merged_pb, pages_pb, utlb_pb, utlbs_pb, span_pb = [], [], [], [], [], []
    utlb_pages_pb = []
    served = set()       # pages of entries in earlier batches
    stale_e = stale_i = 0  # entries on a page an earlier batch served (and not moved back to the CPU since)
    first_batches = []
    utlbs = set()
    # pages moved back to the CPU (dst 0, the tools interface's CPU index) leave `served` from then on (at
    # the time the driver queued the copy, t0: its worker stamps t1 in bursts)
    to_cpu = sorted((m.get("t0", 0), m["a"] // page_bytes, -(-m.get("n", 0) // page_bytes))
                    for m in migr if m.get("dst") == 0 and "a" in m)
    ci = 0
    for k in order:
        es = by_batch[k]
        inst = [f for _, grp in es for f in grp]
        tb = min(t for t, _ in es)
        while ci < len(to_cpu) and to_cpu[ci][0] < tb:
            served.difference_update(range(to_cpu[ci][1], to_cpu[ci][1] + to_cpu[ci][2]))
            ci += 1
        pages = {f["a"] // page_bytes for f in inst}
        raw_pb.append(len(inst))
        merged_pb.append(len(es))
        pages_pb.append(len(pages))
        per_u = defaultdict(list)
        for f in inst:
            per_u[(f.get("gpc"), f.get("cl"), f.get("ct"))].append(f["a"] // page_bytes)
        utlbs.update(per_u)
        utlbs_pb.append(len(per_u))
        for pl in per_u.values():
            utlb_pb.append(len(pl))
            utlb_pages_pb.append(len(set(pl)))
        tgs = [f["tg"] for f in inst if "tg" in f]
        if tgs:
            span_pb.append((max(tgs) - min(tgs)) / 1e3)
        for _, grp in es:
            if grp[0]["st"] if "st" in grp[0] else grp[0]["a"] // page_bytes in served:
                stale_e += 1
                stale_i += len(grp)
        if len(first_batches) < 3:
            first_batches.append({"instances": len(inst), "entries": len(es), "pages": len(pages),
                                  "page_range": [min(pages) - min(pages), max(pages) - min(pages)],
                                  "utlbs": len(per_u)})
        served |= pages
    out["per_batch"] = {"instances": quantiles(raw_pb), "entries": quantiles(merged_pb),
                        "pages": quantiles(pages_pb), "utlbs": quantiles(utlbs_pb),
                        "gpu_write_span_us": quantiles(span_pb)}
    out["batches_at_limit"] = sum(1 for x in raw_pb if x >= batch_size)
    out["per_utlb_batch"] = {"instances": histogram(utlb_pb), "pages": histogram(utlb_pages_pb),
                             "instances_q": quantiles(utlb_pb), "pages_q": quantiles(utlb_pages_pb)}
    # how often a uTLB comes back: gaps between the batch numbers (in order) it has entries in
    seen_u = defaultdict(list)
    for i, k in enumerate(order):
        for (g, b, t), grp in ((kk, groups[kk]) for kk in [(k[0], k[1], t) for t, _ in by_batch[k]]):
            for f in grp:
                u = (f.get("gpc"), f.get("cl"), f.get("ct"))
                if not seen_u[u] or seen_u[u][-1] != i:
                    seen_u[u].append(i)
    out["utlb_batch_gaps"] = histogram([b - a for l in seen_u.values() for a, b in zip(l, l[1:])], 8)
    out["utlbs"] = len(utlbs)
    out["gpcs"] = len({u[0] for u in utlbs})
    out["stale_entries"] = stale_e
    out["stale_instances"] = stale_i
    out["first_batches"] = first_batches
    pages_all = {f["a"] // page_bytes for f in faults}
    out["distinct_pages"] = len(pages_all)

    # timing: the batch's first notification to its replay (CPU clock), the gaps between batches, and the
    # entries written (GPU clock) before the previous batch's replay was done (they waited in the buffer)
    rep = {(r.get("g", 0), r["b"]): r for r in replays}
    svc, gaps, waited = [], [], 0
    prev_rep = None
    for k in order:
        t0 = min(t for t, _ in by_batch[k])
        r = rep.get(k)
        if r and "t" in r:
            svc.append((r["t"] - t0) / 1e3)
        if prev_rep is not None:
            if "t" in prev_rep:
                gaps.append((t0 - prev_rep["t"]) / 1e3)
            if "tg" in prev_rep:
                waited += sum(1 for _, grp in by_batch[k] for f in grp if f.get("tg", math.inf) < prev_rep["tg"])
        prev_rep = r
    out["replays"] = len(replays)
    out["service_us"] = quantiles(svc)
    out["replay_to_next_batch_us"] = quantiles(gaps)
    out["instances_written_before_previous_replay"] = waited
    # The burst a replay causes: each batch's entries written (GPU time, one clock) after the previous batch's
    # replay was done. Their times after it, and the GPU ns between consecutive instances of a burst of at
    # least 8 ((last - first) / (n - 1)): the rate the GPU writes the fault buffer.
    after, spacing = [], []
    prev_rep = None
    for k in order:
        if prev_rep is not None and "tg" in prev_rep:
            w = sorted(f["tg"] for _, grp in by_batch[k] for f in grp if "tg" in f and f["tg"] >= prev_rep["tg"])
            after += [(x - prev_rep["tg"]) / 1e3 for x in w]
            if len(w) >= 8:
                spacing.append((w[-1] - w[0]) / (len(w) - 1))
        prev_rep = rep.get(k)
    out["written_after_previous_replay_us"] = quantiles(after, (0.0, 0.5, 0.9, 0.95, 1.0))
    out["burst_write_ns"] = quantiles(spacing, (0.1, 0.5, 0.9))
    # How the driver flushed each batch (uvm_gpu_replayable_faults.c, replay policy BATCH_FLUSH): when the
    # batch's duplicate instances (each entry's instances but one, and all of an entry whose page an earlier
    # entry of the batch has) exceed update_put_ratio % of its instances, it reads the buffer's PUT again and
    # drops every entry written by then (UPDATE_PUT); otherwise only those up to the PUT it read at the fetch
    # (CACHED_PUT), so entries written during the service stay for the next batch. The check: no batch after an
    # UPDATE_PUT one holds an instance written (GPU time) more than 3 us before that batch's replay was recorded
    # (the replay's own burst lands up to about 1 us before its recorded time).
    shares, upd, after_upd, after_cached = [], 0, 0, 0
    for i, (k, n, npg) in enumerate(zip(order, raw_pb, pages_pb)):  # a batch's instances and distinct pages
        dup = n - npg
        shares.append(100.0 * dup / n)
        u = dup * 100 > n * update_put_ratio
        upd += u
        r = rep.get(k)
        if i + 1 < len(order) and r and "tg" in r:
            old = any(f.get("tg", math.inf) < r["tg"] - 3000 for _, grp in by_batch[order[i + 1]] for f in grp)
            if old and u:
                after_upd += 1
            elif old:
                after_cached += 1
    out["flush"] = {"update_put_ratio": update_put_ratio, "update_put": upd, "cached_put": len(order) - upd,
                    "duplicate_pct": quantiles(shares, (0.1, 0.5, 0.9)),
                    "older_entries_after_update_put": after_upd, "older_entries_after_cached_put": after_cached}
    # GPU write to CPU notification: the clocks differ by an unknown offset `off` (CPU = GPU + off); every
    # fault is notified after it was written (off <= t - tg) and every replay is done after it was queued
    # (off >= t_r - tg_r). Latencies are given against the upper bound (each a lower bound; the smallest 0)
    # with the bound's uncertainty (the interval's width).
    d = [f["t"] - f["tg"] for f in faults if "tg" in f]
    if d:
        hi = min(d)
        lo = max((r["t"] - r["tg"] for r in replays if "t" in r and "tg" in r), default=None)
        out["write_to_notify_us"] = quantiles([(x - hi) / 1e3 for x in d])
        out["clock_offset_uncertainty_us"] = round((hi - lo) / 1e3, 3) if lo is not None else None
    if migr:
        by = defaultdict(int)
        for m in migr:
            by[CAUSE.get(m.get("cause"), str(m.get("cause")))] += m.get("n", 0)
        out["migrated_bytes_by_cause"] = dict(sorted(by.items()))
        out["migrations"] = len(migr)
    return out


def check_counter(s, driver_faults):
    """The summary's merged entries against the driver's gpu_faults counter: (equal, text)."""
    if not s or not s.get("ok") or driver_faults is None:
        return None, "not comparable (no events or no counter)"
    e = s.get("entries", 0)
    dropped = s.get("dropped_total", 0)
    if e == driver_faults:
        return True, f"distinct (batch, t) pairs {e} == gpu_faults {driver_faults}"
    return False, (f"distinct (batch, t) pairs {e} != gpu_faults {driver_faults} ({e - driver_faults:+d}; "
                   f"{dropped} events dropped)")


def entry_table(lines, path, page_bytes=PAGE, limit=25000):
    """The fault entries of a trace as a small gzip'd table (calibration programs): one line per instance,
    'b page acc gpc cl ct dt_us dtg_us' with page relative to the lowest faulted page, dt and dtg from the
    first fault's t and tg (CPU and GPU clocks); the first `limit` instances (in the trace's order, the
    driver's), then the replays ('r b dt_us dtg_us'). Returns the number of fault lines written."""
    faults = [e for e in lines if e.get("k") == "uvm_fault" and "b" in e and "t" in e]
    if not faults:
        return 0
    p0 = min(f["a"] for f in faults) // page_bytes
    t0 = min(f["t"] for f in faults)
    tg0 = min((f["tg"] for f in faults if "tg" in f), default=0)
    with gzip.open(path, "wt") as fo:
        fo.write("b page acc gpc cl ct dt_us dtg_us\n")
        for f in faults[:limit]:
            fo.write(f"{f['b']} {f['a'] // page_bytes - p0} {f.get('acc', 0)} {f.get('gpc', -1)} {f.get('cl', -1)} "
                     f"{f.get('ct', 0)} {(f['t'] - t0) / 1e3:.3f} {(f.get('tg', tg0) - tg0) / 1e3:.3f}\n")
        fo.write("# replays: b dt_us dtg_us\n")
        for r in lines:
            if r.get("k") == "uvm_replay" and "b" in r:
                fo.write(f"r {r['b']} {(r.get('t', t0) - t0) / 1e3:.3f} {(r.get('tg', tg0) - tg0) / 1e3:.3f}\n")
    return min(len(faults), limit)


def table_lines(path, page_bytes=PAGE):
    """An entry table (entry_table's file) back as the trace lines summary() reads: each instance a `uvm_fault`
    (its page relative to the lowest faulted page, t and tg in ns from the first fault's), each replay a
    `uvm_replay`. The table holds a program's first instances only (entry_table's limit): its last batch may be
    cut."""
    out = []
    with gzip.open(path, "rt") as f:
        for line in f:
            p = line.split()
            if not p or p[0] in ("b", "#"):
                continue
            if p[0] == "r":
                out.append({"k": "uvm_replay", "g": 0, "b": int(p[1]), "ct": 1, "t": round(float(p[2]) * 1e3),
                            "tg": round(float(p[3]) * 1e3)})
            else:
                out.append({"k": "uvm_fault", "g": 0, "b": int(p[0]), "a": int(p[1]) * page_bytes, "acc": int(p[2]),
                            "gpc": int(p[3]), "cl": int(p[4]), "ct": int(p[5]), "t": round(float(p[6]) * 1e3),
                            "tg": round(float(p[7]) * 1e3)})
    return out


def fresh_pages(path):
    """From an entry table (entry_table's file): per batch and uTLB, the distinct pages it wrote an entry for
    after the previous batch's replay (GPU clock), as a histogram, and how many of the uTLB-batches holding
    two pages or more also held an entry written before that replay. A uTLB-batch's pages count more than the
    uTLB faulted since its last replay where an older entry waited in the buffer (written before the replay,
    not yet fetched): the uTLB then shows its new page beside an old one. The table's last batch (maybe cut at
    its instance limit) and the first (no replay before it) are left out. None without batches to count."""
    per = defaultdict(list)  # (batch, uTLB) -> [(page, GPU write time)]
    reps = {}
    for e in table_lines(path, 1):
        if e["k"] == "uvm_replay":
            reps[e["b"]] = e["tg"]
        else:
            per[(e["b"], (e["gpc"], e["cl"], e["ct"]))].append((e["a"], e["tg"]))
    last = max((b for b, _ in per), default=None)
    hist, multi, older = [], 0, 0
    for (b, _), pts in per.items():
        if b == last or b - 1 not in reps:
            continue
        new = {pg for pg, tg in pts if tg >= reps[b - 1]}
        if not new:
            continue
        hist.append(len(new))
        if len({pg for pg, _ in pts}) >= 2:
            multi += 1
            older += any(tg < reps[b - 1] for _, tg in pts)
    if not hist:
        return None
    return {"pages": histogram(hist, 8), "multi": multi, "multi_with_older": older}


def instance_gaps(lines):
    """From a calibration program's entry table (table_lines()): the GPU ns between consecutive instances of one
    uTLB's page (in GPU time order, over the batches but the table's last, which it may cut), the distinct uTLBs
    per batch, both as medians, their ratio (ns per uTLB faulting at once: umsim --instance-gap-ns) and the share
    of the uTLB's pages with several instances whose instances fall in more than one batch. None without faults."""
    faults = [e for e in lines if e.get("k") == "uvm_fault"]
    if not faults:
        return None
    last = max(e["b"] for e in faults)
    faults = [e for e in faults if e["b"] < last] or faults
    by_page, by_batch = defaultdict(list), defaultdict(set)
    for e in faults:
        u = (e.get("gpc"), e.get("cl"))
        by_page[(u, e["a"])].append(e)
        by_batch[e["b"]].add(u)
    gaps, multi, split = [], 0, 0
    for v in by_page.values():
        if len(v) < 2:
            continue
        v.sort(key=lambda e: e["tg"])
        multi += 1
        split += len({e["b"] for e in v}) > 1
        gaps += [b["tg"] - a["tg"] for a, b in zip(v, v[1:])]
    if not gaps:
        return None
    gap, utlbs = statistics.median(gaps), statistics.median(len(u) for u in by_batch.values())
    return {"gap_ns_p50": gap, "utlbs_per_batch_p50": utlbs, "ns_per_utlb": round(gap / utlbs, 3),
            "split_share": round(split / multi, 4)}


def resume_delays(lines, cap_us=50.0):
    """From a calibration program's entry table (table_lines()): per replay of a batch (but the table's last two, which
    it may cut), the GPU us from the replay to the first entry, written after it, of one of the batch's uTLBs on a page
    the batch did not hold (a uTLB the replay released going on to its next miss; umsim --resume-us), within cap_us
    (a longer wait is the launch's end, not a resume). Returns the delays' median and count, None without any."""
    reps = {e["b"]: e["tg"] for e in lines if e.get("k") == "uvm_replay" and "tg" in e}
    faults = [e for e in lines if e.get("k") == "uvm_fault" and "tg" in e]
    if not faults or not reps:
        return None
    last = max(e["b"] for e in faults)
    pages, utlbs, by_utlb = defaultdict(set), defaultdict(set), defaultdict(list)
    for e in faults:
        u = (e.get("gpc"), e.get("cl"))
        pages[e["b"]].add(e["a"] // PAGE)
        utlbs[e["b"]].add(u)
        by_utlb[u].append((e["tg"], e["a"] // PAGE))
    for v in by_utlb.values():
        v.sort()
    delays = []
    for b, r in reps.items():
        if b >= last - 1 or b not in utlbs:
            continue
        best = None
        for u in utlbs[b]:
            v = by_utlb[u]
            i = bisect.bisect_left(v, (r, -1))
            while i < len(v) and v[i][1] in pages[b]:
                i += 1
            if i < len(v) and v[i][0] - r <= cap_us * 1e3:
                best = v[i][0] - r if best is None else min(best, v[i][0] - r)
        if best is not None:
            delays.append(best / 1e3)
    if not delays:
        return None
    return {"us_p50": round(statistics.median(delays), 3), "n": len(delays)}


def replay_timeline(lines, burst_us, page_bytes=PAGE):
    """When a batch's entries were written, against the previous batch's replay (GPU clock; the model's one clock):
    each counted entry (a distinct (batch, t), written when its first instance was) of every batch after the first
    and before the last (a table's last batch may be cut), as 'before_previous_page' (written before that replay,
    on a page the previous batch held: an entry the previous service left stale), 'before_new' (before it, on
    another page: a uTLB going on through the previous service), 'burst' (within burst_us after it: the misses
    the replay lets go) or 'later'. lines: trace lines (summary()'s input; a driver's entry table through
    table_lines, the model's entry log through model_lines). Returns the counts and shares, None without batches."""
    faults = [e for e in lines if e.get("k") == "uvm_fault" and "tg" in e]
    reps = {e["b"]: e["tg"] for e in lines if e.get("k") == "uvm_replay" and "tg" in e}
    entries = defaultdict(list)  # batch -> [(page, GPU write time)]
    for (_, b, _), grp in _merged(faults).items():
        entries[b].append((grp[0]["a"] // page_bytes, min(f["tg"] for f in grp)))
    pages = {b: {pg for pg, _ in ents} for b, ents in entries.items()}
    last = max(entries, default=None)
    got = Counter()
    for b, ents in entries.items():
        if b == last or b - 1 not in reps or b - 1 not in entries:
            continue
        for pg, tg in ents:
            dt = (tg - reps[b - 1]) / 1e3
            if dt < 0:
                got["before_previous_page" if pg in pages[b - 1] else "before_new"] += 1
            else:
                got["burst" if dt <= burst_us else "later"] += 1
    n = sum(got.values())
    if not n:
        return None
    keys = ("before_previous_page", "before_new", "burst", "later")
    return {"entries": n, "burst_us": burst_us, **{k: got[k] for k in keys},
            "shares": {k: round(got[k] / n, 3) for k in keys}}


def model_lines(path, page_bytes=PAGE):
    """umsim --timed --entry-log's file as trace lines summary() reads: each entry a `uvm_fault` (gpc = the
    modelled uTLB, cl 0, read), its t the batch's fetch time plus its rank among the batch's counted entries
    (ns: one notification each), st whether its page was resident when fetched (stale), a merged entry sharing the t of the entry it merged into (the previous
    one of its uTLB, else the batch's previous one), tg its modelled write time; each replay a `uvm_replay`
    with t = tg = its modelled time (one clock in the model)."""
    out = []
    rank = {}
    last_u, last_t = {}, None
    with open(path, encoding="ascii") as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            if p[0] == "f":
                b, pg, u, merged, tw, tf = int(p[1]), int(p[2]), int(p[3]), p[4] == "1", float(p[5]), float(p[6])
                st = len(p) > 7 and p[7] == "1"
                if b not in rank:
                    rank = {b: 0}
                    last_u, last_t = {}, None
                if merged:
                    t = last_u.get(u, (None, last_t))[1] if last_u.get(u, (None,))[0] == pg else last_t
                else:
                    rank[b] += 1
                    t = tf + rank[b]
                    last_t = t
                last_u[u] = (pg, t)
                out.append({"k": "uvm_fault", "g": 0, "b": b, "a": pg * page_bytes, "acc": 1, "gpc": u, "cl": 0,
                            "ct": 1, "t": int(t), "tg": int(tw), "st": st})
            elif p[0] == "r":
                out.append({"k": "uvm_replay", "g": 0, "b": int(p[1]), "ct": 1, "t": int(float(p[2])),
                            "tg": int(float(p[2]))})
    return [{"k": "uvm_events", "ok": True, "queue": None, "mask": None, "model": True}] + out
