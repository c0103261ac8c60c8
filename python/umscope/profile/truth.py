"""Known against counted: the um-truth cases (`umbench run um-truth --case C`, managed-memory programs whose data
movement is known exactly) run with libumtrace injected; each case's known bytes each way are compared with what
the trace counted, per unified-memory event kind, beside the tracer's own accounting (kinds CUPTI accepted,
records written and dropped, flushes). Used by bench/um_truth.py and the GPU tests."""

import json
import os
import subprocess
import tempfile
from pathlib import Path

from umscope.profile.codes import COUNTERS
from umscope.profile.tracer import parse_trace, read_process_traces, trace_files

CASES = ["read", "writeback", "prefetch", "read-mostly", "pingpong", "host-preferred", "gpu-first", "thrash"]


def diagnostics(lines) -> dict:
    """What the tracer says about itself: kinds configured, its end line, flushes, and the UM records by
    kind, cause and (source, destination)."""
    config = [{k: e.get(k) for k in ("c", "dev", "scope", "ok", "cupti")} for e in lines if e.get("k") == "config"]
    end = next((e for e in lines if e.get("k") == "end"), None)
    um = [e for e in lines if e.get("k") == "um"]
    kinds = {}
    for e in um:
        name = COUNTERS.get(e["c"], f"counter{e['c']}")
        d = kinds.setdefault(name, {"records": 0, "value": 0, "by_flag": {}, "by_src_dst": {}, "sizes": {}})
        d["records"] += 1
        d["value"] += e["v"]
        d["by_flag"][str(e.get("f"))] = d["by_flag"].get(str(e.get("f")), 0) + e["v"]
        sd = f"{e.get('src')}->{e.get('dst')}"
        d["by_src_dst"][sd] = d["by_src_dst"].get(sd, 0) + e["v"]
        if name in ("htod", "dtoh"):
            d["sizes"][str(e["v"])] = d["sizes"].get(str(e["v"]), 0) + 1
    for d in kinds.values():  # the ten commonest record sizes
        d["sizes"] = dict(sorted(d["sizes"].items(), key=lambda kv: -kv[1])[:10])
    return {"config": config, "end": end, "devices": [e for e in lines if e.get("k") == "device"],
            "flushes": [e.get("why") for e in lines if e.get("k") == "flush"],
            "ctx_destroy_before_end": any(e.get("k") == "ctx_destroy" for e in lines),
            "errors": [e for e in lines if e.get("k") == "error"], "kinds": kinds,
            "uvm": [e for e in lines if e.get("k") in ("uvm_config", "uvm_counters")]}


def run_case(umbench, lib, case, size, env_extra, iters=None, timeout=120, extra_args=()) -> dict:
    fd, trace = tempfile.mkstemp(prefix="umtruth-", suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, CUDA_INJECTION64_PATH=lib, UMSCOPE_TRACE_FILE=trace, **env_extra)
    cmd = [umbench, "run", "um-truth", "--case", case, "--bytes", size]
    if iters:
        cmd += ["--iters", str(iters)]
    cmd += list(extra_args)
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired:
        out, rc = "", "timeout"
    rec = next((json.loads(x) for x in out.splitlines() if x.startswith("{") and '"record"' in x), None)
    status = next((json.loads(x) for x in out.splitlines() if x.startswith("{") and '"status"' in x), None)
    tr = parse_trace(trace)
    lines = read_process_traces(trace) if Path(trace).exists() else []
    for f in trace_files(trace):
        os.unlink(f)
    res = {"case": case, "bytes": size, "env": env_extra, "args": list(extra_args), "rc": rc, "status": status,
           "known_htod": rec and rec.get("known_htod_bytes"), "known_dtoh": rec and rec.get("known_dtoh_bytes"),
           "known_cause": rec and rec.get("known_cause"), "time_ms": rec and rec.get("time", {}).get("median"),
           "counted": tr.get("totals"), "driver": (tr.get("driver_counters") or {}).get("all"),
           "events": tr.get("events"), "by_cause": tr.get("by_cause"),
           "dropped": tr.get("dropped"), "complete": tr.get("complete"), "diag": diagnostics(lines)}
    for d in ("htod", "dtoh"):
        k, c = res[f"known_{d}"], (res["counted"] or {}).get(d)
        res[f"ratio_{d}"] = (c / k) if (k and k > 0 and c is not None) else None
    return res


# What the driver does not report, per (case, direction), as measured on the H100 (driver 580, CUDA 13.0) and
# written up in docs/tracing.md: the GPU tests accept a shortfall only where it is listed here, with its reason.
_QUEUE = ("CUPTI's host-to-device records of GPU-fault-driven migrations are incomplete: the UVM driver drops "
          "events when its tools event queue is full (uvm_tools.c enqueue_event), which thousands of small "
          "migrations and fault events at once overflow. H100, driver 580, 1 GiB read: 10-18% of the bytes in six "
          "runs; the same read with 4 or 132 GPU blocks (fewer faults at once): 100% and 99.8%; the driver's own "
          "counters: 1073741824 of 1073741824 B in every run (docs/tracing.md)")
NOT_REPORTED = {("read", "htod"): _QUEUE, ("writeback", "htod"): _QUEUE, ("read-mostly", "htod"): _QUEUE,
                ("pingpong", "htod"): _QUEUE,
                ("thrash", "thrashing"): "the driver reports thrashing only when its detection triggers, which "
                "depends on timing: the same program (64 MiB, 20 rounds, H100) gave 32 thrashing records in one run "
                "and none in another while 93 MB migrated in and 82 MB out (docs/tracing.md)"}

TOLERANCE = 0.02  # counted bytes within 2% of known


def verdicts(res, source="records") -> list:
    """(direction, known, counted, within tolerance, listed as not reported) for each known direction of a case;
    counted from CUPTI's records (source "records") or the UVM driver's counters ("driver")."""
    out = []
    counts = (res.get("counted") if source == "records" else res.get("driver")) or {}
    for d in ("htod", "dtoh"):
        known = res.get(f"known_{d}")
        if known is None or known < 0:
            continue
        counted = counts.get(d, 0)
        ok = abs(counted - known) <= TOLERANCE * max(known, 1) if known else counted <= TOLERANCE * _bytes(res)
        listed = NOT_REPORTED.get((res["case"], d)) if source == "records" else None
        out.append((d, known, counted, ok, listed))
    return out


def _bytes(res):
    from umscope.sizes import parse_size
    return parse_size(res["bytes"]) if isinstance(res["bytes"], str) else res["bytes"]
