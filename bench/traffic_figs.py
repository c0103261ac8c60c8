#!/usr/bin/env python3
"""The traffic figures of schieffer2024 (Grace Hopper system memory), measured with hardware counters on
this machine, and the counters' own check against known bytes. Writes docs/traffic-figures.md.

- Counter check: umbench's linkbytes family (1 GiB zero-copy read by a kernel, 1 GiB copy-engine copy,
  1 GiB managed first-touch migration) under libumcounters: PCIe bytes per source against the known bytes,
  and the time each operation took with and without counters (the overhead).
- Fig. 10: SRAD, managed and explicit, per iteration: time (unprofiled run) and bytes read from GPU
  memory (local) and over the host link (remote), from the range profiler (one range per kernel; two runs,
  as CUPTI will not count PCIe and DRAM in one configuration).
- Fig. 12: Quantum Volume (CPU-initialised state), managed, managed-prefetch, explicit and pinned:
  throughput in three tiers (L1 <-> L2, GPU memory, host link) from PM sampling over the run.

    python3 bench/traffic_figs.py [--srad-rows 8192] [--qubits 27] [--pinned-qubits 22] [--out docs/traffic-figures.md]
Needs a GPU, umbench and libumcounters ($UMSCOPE_UMCOUNTERS or the installed package's)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _commit  # bench/_commit.py

from umscope import native, probe
from umscope.profile import hwcounters as hc
from umscope.report import traffic_figs as tf

ROOT = Path(__file__).resolve().parent.parent
GiB = 1 << 30
QV_METRICS = "pcie__read_bytes.sum,pcie__write_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum," \
             "lts__t_sectors_srcunit_tex.sum"


def umbench(args, counters=None, timeout=600):
    """(records, parsed counter file or None, wall s) of one umbench run, under libumcounters when
    counters = dict(modes=..., set=..., metrics=..., period_us=...)."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "c.jsonl"
        if counters:
            lib = hc.library_path()
            if lib is None:
                sys.exit("libumcounters not found: build with CUPTI, or set UMSCOPE_UMCOUNTERS")
            env.update(hc.environment(out, counters["modes"], counters.get("set", "link"),
                                      counters.get("period_us", 1000)))
            env["CUDA_INJECTION64_PATH"] = lib
            if counters.get("metrics"):
                env["UMSCOPE_SAMPLE_METRICS"] = counters["metrics"]
        t0 = time.time()
        res = subprocess.run([native.umbench_path(), "run", *[str(a) for a in args]], capture_output=True,
                             text=True, env=env, timeout=timeout)
        wall = time.time() - t0
        recs, status = native.parse_output(res.stdout)
        if not status or status.get("status") != "ok":
            print(f"  umbench {' '.join(map(str, args))}: {(status or {}).get('reason') or res.stderr[-300:]}")
        parsed = hc.read(out) if counters else None
        if parsed and parsed["errors"]:
            print("  counters:", "; ".join(f"{e.get('what')}: {e.get('cupti')}" for e in parsed["errors"][:3]))
        return recs, parsed, wall


def _in_ops(parsed, rec, name):
    """PM-sampled bytes of `name` in the operations' intervals (5 ms either side)."""
    return sum(hc.totals(parsed, 0, (x / 1e9 - 0.005, y / 1e9 + 0.005)).get(name, 0)
               for x, y in zip(rec["wall_start_ns"], rec["wall_end_ns"]))


def check(a, lines):
    lines += ["## Counters against known bytes", "",
              "Each operation moves 1 GiB host to device, twice (two repetitions 100 ms apart): known 2 GiB. The "
              "payload counter is the one that counts data bytes: for a kernel reading pinned memory in place, the "
              "L2 sectors its L1s sent to system memory (lts__t_sectors_srcunit_tex_aperture_sysmem_op_read.sum x "
              "32 B, range profiler, per kernel); for a copy-engine copy, the bytes written into GPU memory during "
              "the copies (dram__bytes_write.sum, PM sampling); for a managed first-touch migration, the GPU-memory "
              "writes during the kernel that faulted the pages in (range profiler). PCIe read bytes (the GPU's "
              "PCIe unit) count TLPs with their headers: shown as a ratio to the known bytes. Time per operation: "
              "CUDA events, median of the two, without counters and under each profiler.", "",
              "| operation | known GiB | payload counter | GiB | error | PCIe read / known (source) | "
              "ms plain | ms PM sampling | ms range profiler |", "|---|---:|---|---:|---:|---|---:|---:|---:|"]
    base = ["linkbytes", "--bytes", "1g", "--reps", "2", "--warmup", "0", "--gap-ms", "100"]
    for op in ("zerocopy-read", "h2d-copy", "managed-migrate"):
        plain, _, _ = umbench(base + ["--op", op])
        srec, sp, _ = umbench(base + ["--op", op], {"modes": ("sample",)})
        krec, kp, _ = (umbench(base + ["--op", op], {"modes": ("kernel",), "set": "link"}) if op != "h2d-copy"
                       else ([], None, 0))
        mrec, mp, _ = (umbench(base + ["--op", op], {"modes": ("kernel",), "set": "memory"}) if op != "h2d-copy"
                       else ([], None, 0))
        if not plain:
            lines.append(f"| {op} | failed: see the log |")
            continue
        known = plain[0]["known_link_bytes"] * 2
        kernels = lambda p: [b for n, b in hc.per_launch(p, 0) if "read_kernel" in n][1:] if p else []  # noqa: E731
        if op == "zerocopy-read":
            what, payload = "sysmem sectors from L1 (range profiler)", sum(b.get("sysmem_read", 0) for b in kernels(mp)) or None
            raw, src = sum(b.get("pcie_read", 0) for b in kernels(kp)) or None, "range profiler"
        elif op == "h2d-copy":
            what, payload = "DRAM writes in the copies (PM sampling)", _in_ops(sp, srec[0], "dram_write") if sp and srec else None
            raw, src = (_in_ops(sp, srec[0], "pcie_read") if sp and srec else None), "PM sampling"
        else:
            what, payload = "DRAM writes in the kernel (range profiler)", sum(b.get("dram_write", 0) for b in kernels(mp)) or None
            raw, src = sum(b.get("pcie_read", 0) for b in kernels(kp)) or None, "range profiler"
        err = "" if not payload else f"{100 * (payload - known) / known:+.2f}%"
        med = lambda r: f"{r[0]['median']:.2f}" if r else ""  # noqa: E731
        lines.append(f"| {op} | {known / GiB:.0f} | {what} | {'' if not payload else f'{payload / GiB:.4f}'} | {err} | "
                     f"{'' if not raw else f'{raw / known:.3f}'} ({src}) | {med(plain)} | {med(srec)} | "
                     f"{med(mrec) if mrec else ''} |")
    lines.append("")


def fig10(a, lines):
    lines += ["## Fig. 10: SRAD per iteration", "",
              f"SRAD {a.srad_rows} x {a.srad_rows} (schieffer2024 ran 20k x 20k on GH200; the figure's GH200 values "
              "are not reproduced here, only its method), 12 iterations. Time per iteration from an unprofiled run "
              "(CUDA events); local read = dram__bytes_read.sum, remote = pcie__read/write_bytes.sum, summed over "
              "each iteration's kernels (range profiler; copies between iterations, if any, are not kernels).", ""]
    args = ["srad", "--rows", a.srad_rows, "--iterations", "12"]
    # system: malloc'ed memory reached through HMM where the driver offers it (the paper's other version).
    for mode in ("managed", "explicit", "system"):
        plain, _, _ = umbench(args + ["--mode", mode])
        _, link, _ = umbench(args + ["--mode", mode], {"modes": ("kernel",), "set": "link"})
        _, mem, _ = umbench(args + ["--mode", mode], {"modes": ("kernel",), "set": "memory"})
        if not plain:
            lines += [f"{mode}: not run here (see the log)", ""]
            continue
        times = plain[0].get("samples")
        rows = tf.fig10_rows(times, hc.per_launch(link, 0) if link else [], hc.per_launch(mem, 0) if mem else [])
        lines += [tf.fig10_markdown(mode, rows), ""]


def fig12(a, lines):
    lines += ["## Fig. 12: three tiers during Quantum Volume", "",
              f"QV at {a.qubits} qubits with the state initialised by the CPU (`--init cpu`), so that managed "
              "memory migrates it; pinned memory (zero copy: every access over the link, the regime of the paper's "
              f"link-throttled managed case) at {a.pinned_qubits} qubits, as it is link-bound. schieffer2024 ran 34 "
              "qubits at 130% oversubscription of GH200's GPU memory; oversubscription is not run here. PM sampling "
              f"every {a.period_us} us of lts__t_sectors_srcunit_tex.sum x 32 B (L1 <-> L2), "
              "dram__bytes_read/write.sum (GPU memory) and pcie__read/write_bytes.sum (host link, packet headers "
              "included); mean and peak over the busy part (where L1 <-> L2 is above 5% of its peak).", ""]
    for mode, n in (("managed", a.qubits), ("managed-prefetch", a.qubits), ("explicit", a.qubits),
                    ("pinned", a.pinned_qubits)):
        recs, parsed, wall = umbench(["qv", "--qubits", n, "--mode", mode, "--init", "cpu"],
                                     {"modes": ("sample",), "metrics": QV_METRICS, "period_us": a.period_us})
        if not parsed or not parsed["samples"]:
            lines += [f"{mode}: no samples (see the log)", ""]
            continue
        summ = tf.tier_summary(tf.tiers(hc.series(parsed, 0)))
        total = recs[0].get("total_ms") if recs else None
        lines += [tf.fig12_markdown(f"{mode}, {n} qubits", summ), "",
                  f"{mode}: {len(parsed['samples'])} samples; run {total and f'{total:.0f} ms' or '?'} "
                  f"(wall {wall:.1f} s)", ""]


def overhead(a, lines):
    lines += ["## What counting costs", "",
              f"SRAD managed, {a.overhead_rows} x {a.overhead_rows}, {a.overhead_iterations} iterations, run three "
              "times each way, alternating: the application's own compute time (CUDA events around its "
              "iterations) and its total (context to free), without counters and with PM sampling "
              f"(every {a.period_us} us). The range profiler serialises every kernel and costs per kernel: see the "
              "check above (one kernel: ms range profiler against ms plain).", "",
              "| counters | compute ms (median of 3) | total ms (median of 3) |", "|---|---:|---:|"]
    args = ["srad", "--mode", "managed", "--rows", a.overhead_rows, "--iterations", a.overhead_iterations]
    got = {"none": [], "PM sampling": []}
    for _ in range(3):
        for what in got:
            recs, _, _ = umbench(args, {"modes": ("sample",), "period_us": a.period_us} if what != "none" else None)
            if recs:
                got[what].append((recs[0]["compute_ms"], recs[0]["total_ms"]))
    med = lambda v: sorted(v)[len(v) // 2] if v else None  # noqa: E731
    base = med([c for c, _ in got["none"]])
    for what, v in got.items():
        c, t = med([x for x, _ in v]), med([y for _, y in v])
        rel = f" ({100 * (c - base) / base:+.1f}%)" if c and base and what != "none" else ""
        lines.append(f"| {what} | {'' if c is None else f'{c:.1f}'}{rel} | {'' if t is None else f'{t:.1f}'} |")
    lines.append("")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--srad-rows", default="8192")
    ap.add_argument("--qubits", default="27")
    ap.add_argument("--pinned-qubits", default="22")
    ap.add_argument("--period-us", default="2000")
    ap.add_argument("--overhead-rows", default="16384")
    ap.add_argument("--overhead-iterations", default="200")
    ap.add_argument("--parts", default="check,fig10,fig12,overhead")
    ap.add_argument("--out", default=str(ROOT / "docs" / "traffic-figures.md"))
    ap.add_argument("--append", action="store_true", help="add the parts to --out under their own header line")
    a = ap.parse_args()
    fp = probe.probe_gpu()
    g = (fp.get("gpus") or [{}])[0]
    made = (f"Generated by `python3 bench/traffic_figs.py {' '.join(sys.argv[1:])}` on {g.get('name', '?')}; "
            f"commit {_commit.commit(ROOT)}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Counters: "
            "libumcounters (CUPTI range profiler and PM sampling, Nsight Compute's metric names).")
    if a.append and Path(a.out).exists():
        lines = Path(a.out).read_text().rstrip("\n").split("\n") + ["", "---", "", made, ""]
    else:
        lines = ["# Traffic from hardware counters: the counters' check, schieffer2024 Figs. 10 and 12", "", made, ""]
    for part in a.parts.split(","):
        {"check": check, "fig10": fig10, "fig12": fig12, "overhead": overhead}[part](a, lines)
        print("\n".join(lines[-30:]), flush=True)
        Path(a.out).write_text("\n".join(lines) + "\n")  # after every part: a part cut short keeps the others
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
