#!/usr/bin/env python3
"""The simulator against the tracer, and both against the truth, on the same controlled programs (GPU
machine; managed memory, in memory).

Each case is the migration benchmark on CPU-initialised managed memory, whose true movement is known from
the program (every page is valid only on the CPU before the first GPU pass; nothing is evicted in memory):
  0. GPU reads, 2 passes                 -> host-to-device = B, device-to-host = 0
  1. GPU writes, 2 passes                -> host-to-device = B, device-to-host = 0
  2. GPU reads, CPU writes one element per page between passes, 3 passes
                                         -> host-to-device = 3 B, device-to-host = 2 B
(the second pass of 0 and 1 running at HBM speed shows the pages stayed). Run under libumtrace (the CUPTI
library of `umscope profile --um-trace`); where the tracer also writes the UVM driver's own counters
(`uvm_counters` lines) they are compared too. The same page stream goes through umsim's UVM model with the
driver's parameters. Target: simulated within +-10% of what is counted.

    python3 bench/sim_validate.py [--bytes 512M] [--keep DIR] [--out docs/simulator-validation.md]
    python3 bench/sim_validate.py --from-keep DIR     # the comparison again from kept traces (no GPU)"""
import _commit  # bench/_commit.py
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from umscope import native, probe
from umscope import profile as profiler
from umscope.model import simulate as sim
from umscope.sizes import format_size, parse_size

ROOT = Path(__file__).resolve().parent.parent
PAGE = 4096

# (label, migration arguments, passes, CPU touch between passes, true htod and dtoh in units of B, umsim's
# fault window: the faults outstanding before the driver services them; 0 = the driver's batch size).
# The last case runs the read kernel on 4 blocks: its warps span one 64 KiB granule at a time, so each
# fault is serviced alone (window 1), the case where a page replay's fault count is the driver's.
CASES = [
    ("GPU reads CPU-initialised managed memory, 2 passes", ["--kind", "managed,first_touch=cpu", "--iterations", "2"],
     2, False, 1, 0, 0),
    ("GPU writes CPU-initialised managed memory, 2 passes",
     ["--kind", "managed,first_touch=cpu", "--op", "write", "--iterations", "2"], 2, False, 1, 0, 0),
    ("GPU reads, CPU writes one element per page between passes, 3 passes",
     ["--kind", "managed,first_touch=cpu", "--cpu-touch", "stride", "--iterations", "3"], 3, True, 3, 2, 0),
    ("GPU reads CPU-initialised managed memory on 4 blocks, 2 passes",
     ["--kind", "managed,first_touch=cpu", "--iterations", "2", "--blocks", "4"], 2, False, 1, 0, 1),
]


def run_traced(args, keep, name):
    """Runs the migration benchmark under libumtrace; keeps the raw trace (gzip) and records in `keep`."""
    lib = profiler.tracer_path()
    if lib is None:
        sys.exit("this umscope was built without CUPTI (no libumtrace): nothing to compare with")
    fd, tf = tempfile.mkstemp(prefix="umtrace-", suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, CUDA_INJECTION64_PATH=lib, UMSCOPE_TRACE_FILE=tf)
    res = subprocess.run([native.umbench_path(), "run", "migration", *args], env=env, capture_output=True, text=True,
                         timeout=600)
    _, status = native.parse_output(res.stdout)
    if not status or status.get("status") != "ok":
        sys.exit(f"migration {' '.join(args)}: {status}")
    Path(keep).mkdir(parents=True, exist_ok=True)
    with open(tf, "rb") as fi, gzip.open(Path(keep) / f"{name}.jsonl.gz", "wb") as fo:
        shutil.copyfileobj(fi, fo)
    (Path(keep) / f"{name}.records.jsonl").write_text(res.stdout + "\n# stderr\n" + res.stderr[-2000:])
    os.unlink(tf)


def counted(keep, name) -> dict:
    """What the trace counts: CUPTI's totals (and its own record accounting) and the driver's counters."""
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "t.jsonl"
        with gzip.open(Path(keep) / f"{name}.jsonl.gz", "rb") as fi, open(f, "wb") as fo:
            shutil.copyfileobj(fi, fo)
        tr = profiler.parse_trace(f)
        lines = profiler.read_trace_lines(f)
    if not tr or "totals" not in tr:
        sys.exit(f"{name}: the tracer wrote nothing (CUPTI injection failed?)")
    drv = [e for e in lines if e.get("k") == "uvm_counters" and e.get("dev", -1) >= 0]
    end = next((e for e in lines if e.get("k") == "end"), {})
    fault_recs = sum(1 for e in lines if e.get("k") == "um" and e.get("c") == 4)
    # each distinct launch shape (the tracer's kernel records carry grid, block, registers, shared memory)
    launches = {}
    for e in lines:
        if e.get("k") == "kernel" and "g" in e:
            key = (e.get("n", "?")[:60], tuple(e["g"]), tuple(e.get("bl") or ()), e.get("rg"), e.get("sh"))
            launches[key] = launches.get(key, 0) + 1
    return {"cupti_htod": tr["totals"]["htod"], "cupti_dtoh": tr["totals"]["dtoh"],
            "cupti_faults": tr["totals"]["gpu_fault"], "cupti_fault_records": fault_recs,
            "cupti_by_cause": tr["by_cause"]["htod"], "cupti_dropped": end.get("dropped", tr.get("dropped")),
            "launches": [{"kernel": k[0], "grid": list(k[1]), "block": list(k[2]), "regs": k[3], "shared": k[4],
                          "count": n} for k, n in launches.items()],
            "driver": ({k: sum(e.get(k, 0) for e in drv) for k in ("htod", "dtoh", "gpu_faults", "cpu_faults")}
                       if drv else None)}


def stream(pages, iters, cpu_touch):
    ev = []
    for it in range(iters):
        ev.extend(range(pages))
        ev.append(sim.BARRIER)
        if cpu_touch and it + 1 < iters:
            ev.extend(p | sim.CPU | sim.WRITE for p in range(pages))
            ev.append(sim.BARRIER)
    return ev


def err(a, b):
    return (a - b) / b if b else float("nan")


def pct(x):
    return "n/a" if x != x else f"{x:+.1%}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", default="512M")
    ap.add_argument("--out", default=str(ROOT / "docs" / "simulator-validation.md"))
    ap.add_argument("--keep", help="folder for the raw traces and records (default: a temporary one)")
    ap.add_argument("--from-keep", help="compare again from the traces a GPU run kept there; runs nothing")
    a = ap.parse_args()
    t0 = time.time()
    if a.from_keep:
        meta = json.loads((Path(a.from_keep) / "meta.json").read_text())
        keep = a.from_keep
    else:
        fp = probe.probe_gpu()
        if not fp.get("gpus"):
            print(f"no GPU: {fp.get('why_no_gpu', 'none found')}", file=sys.stderr)
            return 2
        keep = a.keep or tempfile.mkdtemp(prefix="simval-")
        g = fp["gpus"][0]
        meta = {"gpu": g["name"], "free_mem": int(g["free_mem"]), "bytes": a.bytes,
                # what bounds the blocks resident per SM (the faults a launch has outstanding at once)
                "props": {k: g.get(k) for k in ("sms", "max_threads_per_sm", "regs_per_sm", "max_blocks_per_sm",
                                                "shared_per_sm")},
                "uvm": probe.uvm_params(), "commit": _commit.commit(ROOT),
                "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        for n, (label, margs, *_) in enumerate(CASES):
            run_traced(margs[:2] + ["--bytes", a.bytes] + margs[2:], keep, f"case{n}")
        Path(keep, "meta.json").write_text(json.dumps(meta))
    drv = sim.driver_params(meta.get("uvm") or {})
    size = parse_size(meta["bytes"])
    pages = size // PAGE
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, (label, _, iters, touch, th, td, window) in enumerate(CASES):
            if not (Path(keep) / f"case{n}.jsonl.gz").exists():
                print(f"{label}: no trace kept (an earlier version of this script); left out", flush=True)
                continue
            c = counted(keep, f"case{n}")
            f = Path(tmp) / "t.umstrace"
            sim.write_trace(f, [(0, pages)], stream(pages, iters, touch), PAGE)
            s = sim.run(dict(drv, trace=f, capacity=int(meta["free_mem"]), init="cpu", policy="uvm",
                             fault_window=window or None))
            rows.append({"label": label, "window": window, "truth_htod": th * size, "truth_dtoh": td * size, **c,
                         "sim_htod": s["h2d_bytes"], "sim_dtoh": s["d2h_bytes"], "sim_faults": s["faults"],
                         "sim_batches": s["batches"], "sim_cpu_faults": s["cpu_faults"]})
            r = rows[-1]
            d = r["driver"] or {}
            print(f"{label}\n  htod: truth {r['truth_htod']}  driver {d.get('htod', 'n/a')}  CUPTI {r['cupti_htod']}  "
                  f"simulated {r['sim_htod']:.0f}\n  GPU faults: driver {d.get('gpu_faults', 'n/a')}  CUPTI "
                  f"{r['cupti_faults']} in {r['cupti_fault_records']} records  simulated {r['sim_faults']} "
                  f"({r['sim_batches']} batches)", flush=True)
    lines = [
        "# The simulator against the tracer and the truth (generated by bench/sim_validate.py)", "",
        f"Measured on {meta['gpu']} at commit {meta.get('commit', '?')}, {meta.get('when', '?')}, "
        f"{format_size(size)} per case; simulated with umsim {sim.VERSION} and the driver's parameters "
        f"{drv or '(not readable: defaults)'}; this file written at commit {_commit.commit(ROOT)} by "
        f"`python3 bench/sim_validate.py {' '.join(sys.argv[1:])}` ({time.time() - t0:.0f} s).", "",
        "Three counts of the same controlled program: the truth (what the program must move: every page is "
        "valid only on the CPU before the first GPU pass and nothing is evicted), the UVM driver's own "
        "counters where libumtrace wrote them (`uvm_counters`, lossless totals), and CUPTI's unified-memory "
        "records (which lose records when the driver's tools queue overflows). Target: simulated within +-10%.",
        "", "| program | true htod | driver htod | CUPTI htod | simulated htod | sim vs truth | sim vs driver | "
        "sim vs CUPTI | true dtoh | simulated dtoh |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        d = r["driver"] or {}
        lines.append(f"| {r['label']} | {r['truth_htod']} | {d.get('htod', 'not written')} | {r['cupti_htod']} | "
                     f"{r['sim_htod']:.0f} | {pct(err(r['sim_htod'], r['truth_htod']))} | "
                     f"{pct(err(r['sim_htod'], d['htod'])) if d else 'n/a'} | {pct(err(r['sim_htod'], r['cupti_htod']))} | "
                     f"{r['truth_dtoh']} | {r['sim_dtoh']:.0f} |")
    lines += ["", "GPU faults. umsim counts a fault per page not on the GPU when its batch is serviced, in a replay of "
              "one access per page; a batch is serviced when `window` faults are outstanding (0: the driver's "
              "batch size). The driver counts every fault-buffer entry it services, so its count grows with the "
              "warps in flight (many SMs faulting on the same pages before the prefetcher has brought their "
              "block): only the 4-block kernel, whose faults are serviced one at a time, is a like-for-like "
              "comparison. CUPTI reports groups of faults on the same page (its record's value) and loses "
              "records.", "",
              "| program | window | driver GPU faults | CUPTI faults (records) | simulated faults | sim vs driver | "
              "simulated batches |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        d = r["driver"] or {}
        lines.append(f"| {r['label']} | {r['window']} | {d.get('gpu_faults', 'not written')} | {r['cupti_faults']} "
                     f"({r['cupti_fault_records']}) | {r['sim_faults']} | "
                     f"{pct(err(r['sim_faults'], d['gpu_faults'])) if d else 'n/a'} | {r['sim_batches']} |")
    lines += ["", "CUPTI host-to-device bytes by cause: " + "; ".join(
        f"case {n}: {r['cupti_by_cause']}" for n, r in enumerate(rows)) + "."]
    Path(a.out).write_text("\n".join(lines) + "\n")
    if Path(a.out).resolve() == (ROOT / "docs" / "simulator-validation.md").resolve():
        from umscope.model import calibrated

        def worst(key):
            e = [abs(err(r["sim_htod"], r[key] if key != "driver" else (r["driver"] or {}).get("htod", 0)))
                 for r in rows]
            e = [x for x in e if x == x]
            return round(max(e), 4) if e else None
        calibrated.write_validated("umsim", {
            "model_version": sim.VERSION, "machine": meta["gpu"], "commit": meta.get("commit"),
            "when": meta.get("when"), "cases": len(rows),
            "htod_bytes_max_error_vs_truth": worst("truth_htod"), "htod_bytes_max_error_vs_driver": worst("driver"),
            "htod_bytes_max_error_vs_cupti": worst("cupti_htod"),
            "gpu_faults_error_vs_driver_serial_case": next(
                (round(err(r["sim_faults"], r["driver"]["gpu_faults"]), 4) for r in rows
                 if r["window"] == 1 and r["driver"]), None)})
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
