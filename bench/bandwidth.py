#!/usr/bin/env python3
"""Bandwidth figures the bandwidth issue asks for, measured in one run on the
GPU node, each against its target. Not a test: it prints what it measured.

    python3 bench/bandwidth.py [--device 0] [--reps 30]

Targets: device copy and triad >= 94% of the GPU-memory bound; copy-engine
host-to-device and device-to-host >= 54 GB/s at >= 256 MiB; SM reads of pinned
host memory >= 50 GB/s; every spread reported."""
import argparse
import sys

from umscope import native, probe
from umscope.model import bounds


def umbench(bench, *args):
    recs, status = native.run_case(bench, *args, timeout=600)
    if not recs:
        sys.exit(f"umbench {bench} {' '.join(args)} gave no records: {status}")
    return recs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="0")
    ap.add_argument("--reps", default="30", help="timed repetitions per measurement (default 30)")
    a = ap.parse_args()
    fp = dict(probe.probe(), device=int(a.device))
    desc = bounds.describe(fp)
    dev = ["--device", a.device, "--reps", a.reps]
    rows = []
    for r in umbench("gpu-stream", "--kind", "device", "--bytes", "4G", *dev):
        rows.append((f"GPU {r['op']} device 4 GiB", r, "gpu_memory", 0.94))
    for r in umbench("copy", "--kind", "device", "--dst", "device", "--bytes", "1G", *dev):
        rows.append(("CE copy device->device 1 GiB (n/t)", r, None, None))
    for src, dst, label in (("pinned", "device", "CE host-to-device"), ("device", "pinned", "CE device-to-host")):
        for r in umbench("copy", "--kind", src, "--dst", dst, "--bytes", "256M,1G", *dev):
            rows.append((f"{label} {r['bytes'] >> 20} MiB", r, 54.0, None))
    for r in umbench("copy", "--kind", "pinned", "--dst", "device", "--bytes", "1G", "--direction", "bidir", *dev):
        rows.append((f"CE both ways pinned<->device ({r['route']})", r, None, None))
    for r in umbench("gpu-stream", "--kind", "pinned", "--bytes", "1G", "--ops", "read,write", *dev):
        rows.append((f"SM {r['op']} of pinned host memory", r, 50.0 if r["op"] == "read" else None, None))
    for r in umbench("copy", "--kind", "pinned", "--dst", "device", "--bytes", "1G", "--engine", "sm", *dev):
        rows.append(("SM copy pinned->device", r, None, None))
    for r in umbench("copy", "--kind", "device", "--dst", "pinned", "--bytes", "1G", "--engine", "sm", *dev):
        rows.append(("SM copy device->pinned", r, None, None))
    for op in ("read", "write"):
        for r in umbench("contention", "--kind", "pinned", "--bytes", "1G", "--gpu-op", op, *dev):
            who = "GPU+CPU sum" if r["op"] == "sum" else f"{'CPU' if r['processor'] == 'cpu' else 'GPU'} {r['op']}"
            load = "alone" if r.get("load") == "none" else ("together" if r["op"] == "sum" else "under load")
            rows.append((f"contention (GPU {op}s pinned): {who} {load}", r, None, None))

    gpu = (probe.select_gpu(fp) or {}).get("name", "no GPU")
    print(f"\n{gpu}; bounds from {desc['name']}: " +
          ", ".join(f"{k} {v[0]:g} GB/s ({v[1]})" for k, v in desc["datapaths"].items()))
    print(f"{'measurement':<56} {'median':>9} {'min':>9} {'max':>9} {'spread':>7} {'bound':>8} {'eff':>5}  target")
    for label, r, target, frac in rows:
        bounds.annotate([r], fp, desc)
        verdict = ""
        if frac and r.get("bound"):
            verdict = f">= {frac:.0%} of bound: {'MET' if r['efficiency'] >= frac else 'MISSED'}"
        elif isinstance(target, float):
            verdict = f">= {target:g} GB/s: {'MET' if r['median'] >= target else 'MISSED'}"
        print(f"{label:<56} {r['median']:>9.1f} {r['min']:>9.1f} {r['max']:>9.1f} {100 * r['spread']:>6.1f}% "
              f"{r.get('bound', 0):>8.1f} {100 * r.get('efficiency', 0):>4.0f}%  {verdict}")


if __name__ == "__main__":
    main()
