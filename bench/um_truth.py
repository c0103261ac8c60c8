"""Known against counted: runs each `umbench run um-truth --case C` with libumtrace injected and compares the
bytes the case must move (its record's known_htod_bytes / known_dtoh_bytes) with what the trace counted, per
unified-memory event kind, with the tracer's own accounting (which kinds CUPTI accepted, records written,
dropped, flushes). One JSON line per case on stdout; a table on stderr.

    python3 bench/um_truth.py [--bytes 1G] [--case read,writeback] [--env KEY=VALUE ...]

Needs a GPU, umbench (UMSCOPE_UMBENCH or the installed package) and libumtrace (UMSCOPE_UMTRACE or the package).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

from umscope import native  # noqa: E402
from umscope.profile.tracer import COUNTERS, parse_trace, read_trace_lines, tracer_path  # noqa: E402

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
            "errors": [e for e in lines if e.get("k") == "error"], "kinds": kinds}


def run_case(umbench, lib, case, size, env_extra, iters=None, timeout=120) -> dict:
    fd, trace = tempfile.mkstemp(prefix="umtruth-", suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, CUDA_INJECTION64_PATH=lib, UMSCOPE_TRACE_FILE=trace, **env_extra)
    cmd = [umbench, "run", "um-truth", "--case", case, "--bytes", size]
    if iters:
        cmd += ["--iters", str(iters)]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired:
        out, rc = "", "timeout"
    rec = next((json.loads(x) for x in out.splitlines() if x.startswith("{") and '"record"' in x), None)
    status = next((json.loads(x) for x in out.splitlines() if x.startswith("{") and '"status"' in x), None)
    tr = parse_trace(trace)
    lines = read_trace_lines(trace) if Path(trace).exists() else []
    os.unlink(trace)
    res = {"case": case, "bytes": size, "env": env_extra, "rc": rc, "status": status,
           "known_htod": rec and rec.get("known_htod_bytes"), "known_dtoh": rec and rec.get("known_dtoh_bytes"),
           "known_cause": rec and rec.get("known_cause"), "time_ms": rec and rec.get("time", {}).get("median"),
           "counted": tr.get("totals"), "events": tr.get("events"), "by_cause": tr.get("by_cause"),
           "dropped": tr.get("dropped"), "complete": tr.get("complete"), "diag": diagnostics(lines)}
    for d in ("htod", "dtoh"):
        k, c = res[f"known_{d}"], (res["counted"] or {}).get(d)
        res[f"ratio_{d}"] = (c / k) if (k and k > 0 and c is not None) else None
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", default="1G")
    ap.add_argument("--case", default=",".join(CASES))
    ap.add_argument("--iters", type=int)
    ap.add_argument("--timeout", type=float, default=120, help="seconds per case")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the traced program (tracer options)")
    a = ap.parse_args(argv)
    cases = a.case.split(",")
    bad = [c for c in cases if c not in CASES]
    if bad:
        sys.stderr.write(f"um_truth: unknown case {bad[0]!r} (one of {', '.join(CASES)})\n")
        return 2
    env_extra = dict(kv.split("=", 1) for kv in a.env)
    lib = tracer_path()
    if not lib:
        sys.stderr.write("um_truth: no libumtrace (set UMSCOPE_UMTRACE or build with CUPTI)\n")
        return 2
    umbench = native.umbench_path()
    for c in cases:
        r = run_case(umbench, lib, c, a.bytes, env_extra, a.iters, a.timeout)
        print(json.dumps(r), flush=True)
        cnt = r["counted"] or {}
        sys.stderr.write(f"{c:<15} known htod {r['known_htod']} dtoh {r['known_dtoh']} | counted htod {cnt.get('htod')} "
                         f"dtoh {cnt.get('dtoh')} gpu_fault {cnt.get('gpu_fault')} cpu_fault {cnt.get('cpu_fault')} "
                         f"thrash {cnt.get('thrashing')} throttle {cnt.get('throttling')} remote_map "
                         f"{cnt.get('remote_map')} | ratio {r['ratio_htod']} {r['ratio_dtoh']} rc {r['rc']}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
