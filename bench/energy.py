#!/usr/bin/env python3
"""The energy of each case and GFLOP/s per watt of GEMM and Himeno at the machine's own power limit (issue 40,
Hanawa et al.'s energy figures that need no change to the machine; docs/energy.md): a GPU stream case, GEMM in
FP64 and FP32 and Himeno, each long enough that its compute is most of the case (the per-watt figure divides the
compute's rate by the case's average power). The power limit is read, never set: power-cap and governor sweeps
change the machine and are not run.

    python3 bench/energy.py [--out DIR] [--gemm-n 8192] [--gemm-iterations 300] [--himeno-iterations 8000]

Writes the store (energy.sqlite), every record (energy.jsonl), the HTML report of the GEMM FP64 run
(energy-gemm.html) and the table (energy.md) under --out ($OUT by default), and prints the table last: per case
its wall time, the GPU's joules and average watts, the host's (RAPL/hwmon, or why not read), and for the
applications GFLOP/s, GFLOP/s per W, the power limit and the compute share. About 1 minute on one H100.
"""
import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from _commit import commit  # noqa: E402
from node_reference import run_umscope  # noqa: E402

from umscope.energy import host_joules  # noqa: E402

REPORTS = tempfile.TemporaryDirectory()
TIMEOUT_S = 300  # a guard per command (the process group is stopped there), not an estimate


def umscope(out, *args, report=None):
    """The records `umscope ARGS` stored and printed (node_reference.run_umscope), one report kept (`report`)."""
    args = [*args, "--no-progress", "--report", str(out / report) if report else str(Path(REPORTS.name) / "run.html")]
    recs, rc, wall = run_umscope(args, str(out / "energy.sqlite"), TIMEOUT_S)
    print(f"# {' '.join(args)}: {wall:.0f} s, exit {rc}", file=sys.stderr)
    if rc not in (0, 1):  # 1: a case failed (recorded, shown below)
        sys.exit(f"umscope {' '.join(args)} exited {rc}")
    return recs


def fmt(v, spec=".4g"):
    return "-" if v is None else format(v, spec)


def rows(records):
    seen, out = set(), []
    for r in records:
        x = r.get("extra") or {}
        en = x.get("energy")
        if not en or (r["case_id"], r["run_id"]) in seen:  # one row per case (a stream case has 4 records)
            continue
        seen.add((r["case_id"], r["run_id"]))
        absent = [f"{k}: {s['reason']}" for k, s in en["sources"].items() if s.get("joules") is None]
        pw = x.get("gflops_per_watt") or {}
        label = (x.get("app", "") + (" " + x["precision"] if x.get("precision") else "")) or r["case_id"]
        out.append({"case": label, "status": r["status"], "wall_s": en["wall_s"], "gpu_j": en.get("gpu_joules"),
                    "gpu_w": en.get("gpu_watts"),
                    "host_j": host_joules(en),
                    "gflops": pw.get("gflops"), "gflops_per_w": pw.get("value"),
                    "limit_w": pw.get("power_limit_w") or next(
                        (s.get("power_limit_w") for s in en["sources"].values() if s.get("used")), None),
                    "compute_share": pw.get("compute_share"), "why": pw.get("reason") or en.get("note") or "",
                    "absent": absent})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--gemm-n", default="8192")
    ap.add_argument("--gemm-iterations", default="300")
    ap.add_argument("--himeno-iterations", default="8000")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    recs = umscope(out, "bench", "gpu-stream", "--kind", "device", "--size", "1G", "--reps", "200")
    for precision in ("fp64", "fp32"):
        recs += umscope(out, "app", "run", "gemm", "--mode", "explicit", "--precision", precision, "--n", args.gemm_n,
                        "--iterations", args.gemm_iterations, report="energy-gemm.html" if precision == "fp64" else None)
    recs += umscope(out, "app", "run", "himeno", "--mode", "explicit", "--footprint", "1G",
                    "--iterations", args.himeno_iterations)
    (out / "energy.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    table = rows(recs)
    gpu = next((s.get("name") for r in recs for s in ((r.get("extra") or {}).get("energy") or {}).get("sources", {}).values()
                if s.get("used")), "no GPU source")
    lines = [f"# Energy per case and GFLOP/s per W (bench/energy.py, umscope {commit()}, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {time.time() - started:.0f} s)", "",
             f"GPU source: {gpu}", "",
             "| case | status | wall s | GPU J | GPU W | host J | GFLOP/s | GFLOP/s per W | power limit W | compute share | note |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for t in table:
        lines.append(f"| {t['case']} | {t['status']} | {t['wall_s']:.2f} | {fmt(t['gpu_j'])} | {fmt(t['gpu_w'])} | "
                     f"{fmt(t['host_j'])} | {fmt(t['gflops'])} | {fmt(t['gflops_per_w'])} | {fmt(t['limit_w'])} | "
                     f"{fmt(t['compute_share'], '.2f')} | {t['why']} |")
    absent = sorted({a for t in table for a in t["absent"]})
    if absent:
        lines += ["", "Sources not read: " + "; ".join(absent)]
    text = "\n".join(lines) + "\n"
    (out / "energy.md").write_text(text)
    print(text)
    ok = [t for t in table if t["gflops"] is not None]
    return 0 if table and all(t["gpu_j"] for t in table) and ok and all(t["gflops_per_w"] for t in ok) else 1


if __name__ == "__main__":
    sys.exit(main())
