"""Records and the terminal summary of `umscope profile`."""

import signal
import statistics
import sys


def _summary(values):
    return {"n": len(values), "median": statistics.median(values), "min": min(values), "max": max(values),
            "value": max(values)}


def record_shortfall(tr: dict) -> dict:
    """Per direction, the share of the bytes the driver's counters saw that CUPTI's records carry (1.0: all),
    where the driver's counters were read; the records' totals are short by the rest (events the driver's
    tools queue dropped)."""
    drv = (tr.get("driver_counters") or {}).get("all")
    if not drv:
        return {}
    return {d: (tr["totals"][d] / drv[d] if drv[d] else None) for d in ("htod", "dtoh")}


def trace_records(tr: dict) -> list:
    recs = []
    if not tr:
        return recs
    # One cumulative series per direction and GPU, labelled with the GPU the migrations went to or came from.
    per_gpu = tr.get("timeline_by_gpu") or {}
    for gpu in sorted(per_gpu):
        for d in ("htod", "dtoh"):
            pts = per_gpu[gpu][d]
            if pts:
                recs.append({"type": "record", "benchmark": "profile", "op": f"um_{d}_cumulative", "processor": gpu,
                             "metric": "bytes_moved", "unit": "B", **_summary([v for _, v in pts]),
                             "t": [t for t, _ in pts], "samples": [v for _, v in pts]})
    t = tr["totals"]
    allocs = [{k: a[k] for k in ("address", "bytes", "htod", "dtoh")} for a in tr["allocations"]]
    timelines = [{k: a[k] for k in ("address", "bytes", "t", "in", "out")}
                 for a in sorted(tr["allocations"], key=lambda a: -(a["htod"] + a["dtoh"]))[:6]]
    traced = sorted(tr.get("by_gpu") or {}) or ["gpu"]
    recs.append({"type": "record", "benchmark": "profile", "op": "um_trace", "processor": "+".join(traced),
                 "metric": "um_events",
                 "unit": "", "n": 1, "median": t["htod"] + t["dtoh"], "min": 0, "max": t["htod"] + t["dtoh"],
                 "value": t["htod"] + t["dtoh"], "totals": t, "events": tr["events"], "by_cause": tr["by_cause"],
                 "faults_by_access": tr["faults_by_access"], "allocations": allocs, "allocation_timelines": timelines,
                 "ranges": tr.get("ranges", []), "instants": tr.get("instants", []),
                 "clock": tr.get("clock", "trace"),
                 "kernels": tr["kernels"], "kernel_s": tr["kernel_s"], "memcpy_bytes": tr["memcpy_bytes"],
                 "memcpy_by_direction": tr.get("memcpy_by_direction"),
                 "allocations_made": tr["allocations_made"], "faults_per_migration": tr["faults_per_migration"],
                 "eviction_to_migration": tr["eviction_to_migration"], "trace_complete": tr["complete"],
                 "dropped": tr["dropped"], "by_gpu": tr.get("by_gpu", {}), "devices": tr.get("devices", {}),
                 "kinds_configured": tr.get("kinds_configured", []), "kinds_refused": tr.get("kinds_refused", []),
                 "records_lost": tr.get("records_lost"), "driver_counters": tr.get("driver_counters", {}),
                 "driver_events": tr.get("driver_events", {}),
                 "migrations_source": tr.get("migrations_source", "CUPTI records"),
                 "tracks": tr.get("tracks"),
                 "processes": tr.get("processes", 1),
                 "record_shortfall": record_shortfall(tr), "cupti_errors": [e.get("what", "") + ": " + e.get("cupti", "")
                                                            for e in tr["errors"]]})
    return recs


UNITS = {"rss": ("memory", "bytes"), "mem": ("memory", "bytes"), "mem_device": ("memory", "bytes"),
         "util": ("utilisation", "%"), "power": ("power", "W"), "host_energy": ("energy_counter", "J")}


def _records(cmd, s, wall, rc, status, energy, notes, stderr_tail=""):
    recs = []
    for name, pts in s.series.items():
        if not pts:
            continue
        proc = "host" if name.startswith(("rss", "host")) else name.split("_")[0]
        kind = name.split("_", 1)[1] if proc != "host" else name
        metric, unit = UNITS.get(kind, UNITS.get(name.split("_")[0], ("value", "")))
        if name.startswith("rss_node"):
            metric, unit = "memory", "bytes"
        r = {"type": "record", "benchmark": "profile", "op": name, "processor": proc, "metric": metric,
             "unit": unit, **_summary([v for _, v in pts]), "t": [round(t, 4) for t, _ in pts],
             "samples": [v for _, v in pts]}
        if name == "rss" or name.startswith("rss_node"):
            r["source"] = f"sampled every {s.period * 1e3:g} ms: a peak between samples is missed"
        if name.endswith("_mem"):
            r["source"] = "NVML per-process (the driver may not count managed memory here)"
        if name.endswith("_mem_device"):
            r["source"] = "device used memory minus the baseline before the start (other processes included)"
        recs.append(r)
    for k, j in energy.items():
        recs.append({"type": "record", "benchmark": "profile", "op": "energy", "processor": k, "metric": "energy",
                     "unit": "J", "n": 1, "median": j, "min": j, "max": j, "value": j})
    overhead = s.cpu_s / wall if wall > 0 else 0.0
    recs.append({"type": "record", "benchmark": "profile", "op": "run", "processor": "host", "metric": "wall_time",
                 "unit": "s", "n": 1, "median": wall, "min": wall, "max": wall, "value": wall,
                 "command": " ".join(cmd), "exit_status": status,
                 "signal": signal.Signals(-rc).name if rc < 0 else None, "samples_taken": s.samples,
                 "period_s": s.period, "sampler_cpu_s": round(s.cpu_s, 4), "sampler_overhead": round(overhead, 5),
                 "notes": notes, "stderr_tail": stderr_tail})
    return recs


def print_summary(records, out=None):
    out = out or sys.stderr  # the stderr of the call, not the one there was when this module was imported
    run = next(r for r in records if r["op"] == "run")
    out.write(f"umscope profile: {run['command']}: exit {run['exit_status']}"
              f"{' (' + run['signal'] + ')' if run.get('signal') else ''}, {run['median']:.2f} s, "
              f"{run['samples_taken']} samples every {run['period_s'] * 1e3:g} ms, sampler CPU "
              f"{100 * run['sampler_overhead']:.2f}% of the run\n")
    for r in records:
        if r["op"] in ("run",):
            continue
        v = r["max"]
        text = f"{v / 2**20:.1f} MiB" if r["unit"] == "bytes" else f"{v:.4g} {r['unit']}"
        what = "total" if r["op"] == "energy" else "peak" if r["op"] == "rss_peak" else "sampled peak"
        out.write(f"  {r['op']:<16} {what} {text}" + (f"  [{r['source']}]" if r.get("source") else "") + "\n")
    for r in records:
        d = r.get("driver_events") or {}
        if d and not d.get("on"):
            out.write(f"  driver events    not read: {d.get('why')}\n")
        elif d:
            moved = ", ".join(f"{way} {sum(c.values()) / 2**20:.1f} MiB ("
                              + ", ".join(f"{k} {v / 2**20:.1f}" for k, v in sorted(c.items())) + ")"
                              for way, c in d["migrated"].items())
            lost = ("lost nothing" if d["complete"] else
                    "LOST " + ", ".join(f"{n} {k}" for k, n in d["dropped"].items()) + ": counts are lower bounds"
                    if d["dropped"] else "no end record: counts are lower bounds")
            out.write(f"  driver events    {d['gpu_fault_entries']} GPU fault entries ({d['gpu_fault_instances']} "
                      f"instances) in {d['batches']} batches; migrated {moved or 'nothing'}; {lost}\n")
    for n in run.get("notes") or []:
        out.write(f"  note: {n}\n")
