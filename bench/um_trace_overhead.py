"""What `umscope profile --um-trace` costs a managed-memory application: the same command run plainly, under
`umscope profile` (the sampler alone) and under `umscope profile --um-trace` (sampler + libumtrace), interleaved
(plain, profile, traced, plain, ...) --reps times; wall time of the program from its start to its exit (measured
by this script for the plain run, by umscope's own run record under profile), median and spread. The application's own time
(umbench's `total_ms` record, when the command is umbench) is reported too. One JSON object on stdout.

    python3 bench/um_trace_overhead.py [--reps 3] [-- COMMAND ...]

Default command: umbench's SRAD in managed mode, sized to run about 10 s on an H100 (--footprint, --iterations).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

from umscope import native  # noqa: E402


def app_ms(stdout: str):
    """umbench's whole-run time (ms) from its record, where the command is umbench."""
    for line in stdout.splitlines():
        if line.startswith("{") and '"record"' in line:
            r = json.loads(line)
            extra = r.get("total_ms") or (r.get("extra") or {}).get("total_ms")
            if extra:
                return float(extra)
    return None


def one(cmd, how, store):
    if how == "plain":
        full = cmd
    else:
        full = [sys.executable, "-m", "umscope", "profile", "--json", "--store", store, "--report", store + ".html"]
        full += (["--um-trace"] if how == "traced" else []) + ["--"] + cmd
    t0 = time.monotonic()
    p = subprocess.run(full, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"um_trace_overhead: {how} run failed ({p.returncode}): {p.stderr[-400:]}")
    out = p.stdout
    if how != "plain":
        # The program's own wall time as umscope measured it (its start to its exit, as here for the plain
        # run), not umscope's start-up, probe, store and report around it.
        recs = json.loads(out.strip().splitlines()[-1])
        wall = next(r["median"] for r in recs if r["op"] == "run")
    return wall, app_ms(out), p.stderr


def summary(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    med = statistics.median(xs)
    return {"n": len(xs), "median": round(med, 4), "min": round(min(xs), 4), "max": round(max(xs), 4),
            "spread": round((max(xs) - min(xs)) / med, 4) if med else None}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--footprint", default="8G")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--store", default="/tmp/um_trace_overhead.sqlite")
    ap.add_argument("command", nargs="*")
    a = ap.parse_args(argv)
    if a.reps < 1:
        sys.stderr.write("um_trace_overhead: --reps must be at least 1\n")
        return 2
    cmd = a.command or [native.umbench_path(), "run", "srad", "--mode", "managed", "--footprint", a.footprint,
                        "--iterations", str(a.iterations)]
    res = {h: {"wall_s": [], "app_ms": []} for h in ("plain", "profile", "traced")}
    notes = ""
    for r in range(a.reps):
        for how in ("plain", "profile", "traced"):
            wall, ms, err = one(cmd, how, a.store)
            res[how]["wall_s"].append(wall)
            res[how]["app_ms"].append(ms)
            if how == "traced":
                notes = err[-600:]
            sys.stderr.write(f"rep {r + 1} {how:<8} wall {wall:.3f} s app {ms} ms\n")
    out = {"command": cmd, "reps": a.reps}
    for how, d in res.items():
        out[how] = {"wall_s": summary(d["wall_s"]), "app_ms": summary(d["app_ms"])}
    base = out["plain"]["wall_s"]["median"]
    for how in ("profile", "traced"):
        out[f"{how}_overhead_wall"] = round(out[how]["wall_s"]["median"] / base - 1, 4)
        if out["plain"]["app_ms"] and out[how]["app_ms"]:
            out[f"{how}_overhead_app"] = round(out[how]["app_ms"]["median"] / out["plain"]["app_ms"]["median"] - 1, 4)
    out["traced_summary_tail"] = notes
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
