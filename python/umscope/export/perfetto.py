"""`umscope export --format perfetto --run N`: a profile run as a Chrome Trace Event JSON trace, which
ui.perfetto.dev and chrome://tracing open.

Tracks (pid/tid): the program (pid 1: its run and NVTX ranges; counters for RSS), each GPU (pid 2, 3, ...: a
thread for kernels and one for copies; counters for GPU memory, utilisation and power), and unified memory
(pid 100: a thread per allocation whose slices are the migrations of each interval, args bytes and cause;
counters for GPU page faults per interval and bytes migrated, cumulative). Times are microseconds since the
program started. Kernels and copies are the run's stored slices (merged where closer than the store keeps:
args.count says how many each holds); the tracer records no stream, so each GPU has one kernel track."""

import json

from umscope.errors import UsageError

UM_PID = 100


def _us(s) -> float:
    return round(s * 1e6, 3)


def _meta(pid, tid, name, what="thread_name"):
    return {"ph": "M", "name": what, "pid": pid, "tid": tid, "args": {"name": name}}


def _counter(pid, name, t, values):
    return {"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": _us(t), "args": values}


def events(run, records) -> list:
    """The trace's events from a profile run's records."""
    recs = [r for r in records if r.get("benchmark") == "profile" and r.get("status") in ("ok", "failed")]
    if run.get("kind") != "profile" or not recs:
        raise UsageError(f"run {run.get('id')} is a {run.get('kind')} run: --format perfetto draws a profile run "
                         "(`umscope profile --um-trace -- PROGRAM`)")
    x = lambda r: r.get("extra") or {}  # noqa: E731
    out = [_meta(1, 0, "program", "process_name"), _meta(1, 1, "run and NVTX ranges")]
    prog = next((r for r in recs if r["op"] == "run"), None)
    if prog:
        out.append({"ph": "X", "name": x(prog).get("command") or "program", "cat": "run", "pid": 1, "tid": 1,
                    "ts": 0, "dur": _us(prog["median"]), "args": {"exit_status": x(prog).get("exit_status")}})
    um = next((r for r in recs if r["op"] == "um_trace"), None)
    ux = x(um) if um else {}
    for n, a, b in ux.get("ranges") or []:
        if a is not None and b is not None:
            out.append({"ph": "X", "name": n or "range", "cat": "nvtx", "pid": 1, "tid": 1, "ts": _us(a),
                        "dur": _us(b - a)})
    for n, t in ux.get("instants") or []:
        if t is not None:
            out.append({"ph": "i", "name": n or "mark", "cat": "nvtx", "pid": 1, "tid": 1, "ts": _us(t), "s": "t"})
    gpus = {}

    def gpu_pid(label):
        if label not in gpus:
            gpus[label] = 2 + len(gpus)
            out.extend([_meta(gpus[label], 0, label, "process_name"), _meta(gpus[label], 1, "kernels"),
                        _meta(gpus[label], 2, "copies")])
        return gpus[label]
    tk = ux.get("tracks") or {}
    for g, spans in (tk.get("kernels") or {}).items():
        for a, b, n, name, _ in spans:
            out.append({"ph": "X", "name": name, "cat": "kernel", "pid": gpu_pid(g), "tid": 1, "ts": _us(a),
                        "dur": max(_us(b - a), 0.001), "args": {"count": n}})
    for g, spans in (tk.get("copies") or {}).items():
        for a, b, n, way, nb in spans:
            out.append({"ph": "X", "name": way, "cat": "copy", "pid": gpu_pid(g), "tid": 2, "ts": _us(a),
                        "dur": max(_us(b - a), 0.001), "args": {"count": n, "bytes": nb}})
    # Sampled series: RSS on the program, GPU memory, utilisation and power on their GPU.
    for r in recs:
        if not x(r).get("t") or r["unit"] == "B":
            continue
        proc = r.get("processor") or "host"
        pid = 1 if proc == "host" else gpu_pid(proc)
        name = f"{r['op']} ({'bytes' if r['unit'] == 'bytes' else r['unit']})"
        out += [_counter(pid, name, t, {"value": v}) for t, v in zip(x(r)["t"], x(r)["samples"])]
    # Unified memory: a thread per allocation, a slice per interval that migrated, per way and cause.
    if tk.get("allocations"):
        out.append(_meta(UM_PID, 0, "unified memory", "process_name"))
        t0, w = tk["start"], tk["width"]
        per_bin = {}
        faults = {}
        for tid, al in enumerate(tk["allocations"], 1):
            name = (f"0x{al['address']:x} ({al['bytes']} B)" if al.get("address") is not None
                    else "other allocations")
            out.append(_meta(UM_PID, tid, name))
            for way in ("htod", "dtoh"):
                for cause, bins in (al.get(way) or {}).items():
                    for i, v in bins:
                        out.append({"ph": "X", "name": f"{way} {cause}", "cat": "migration", "pid": UM_PID,
                                    "tid": tid, "ts": _us(t0 + i * w), "dur": _us(w),
                                    "args": {"bytes": v, "way": way, "cause": cause}})
                        per_bin[i] = per_bin.get(i, 0) + v
            for i, v in al.get("faults") or []:
                faults[i] = faults.get(i, 0) + v
        total = 0
        for i in sorted(per_bin):
            total += per_bin[i]
            out.append(_counter(UM_PID, "bytes migrated (cumulative)", t0 + (i + 1) * w, {"bytes": total}))
        for i in sorted(faults):
            out.append(_counter(UM_PID, "GPU page faults per interval", t0 + i * w, {"faults": faults[i]}))
            out.append(_counter(UM_PID, "GPU page faults per interval", t0 + (i + 1) * w, {"faults": 0}))
    return out


def write(run, records) -> str:
    um = next((r for r in records if r.get("op") == "um_trace"), None)
    meta = {"umscope_run": run.get("id"), "command": run.get("command"), "host": run.get("hostname"),
            "gpu": run.get("gpu"), "migrations_source": ((um or {}).get("extra") or {}).get("migrations_source")}
    return json.dumps({"traceEvents": events(run, records), "displayTimeUnit": "ms", "metadata": meta},
                      separators=(",", ":")) + "\n"
