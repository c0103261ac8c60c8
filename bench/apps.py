#!/usr/bin/env python3
"""Every application of the suite in explicit mode at a footprint of several
GiB, on the GPU: time per iteration, the rate reached, and how far it is
from its floor (least bytes / GPU-memory bandwidth, or FLOPs / the datasheet
peak for GEMM). Then GEMM in every precision. One run; records printed as a
table and kept as JSON lines with --json-out.

The CPU reference is too slow at several GiB: each application is first run
at 16 MiB with --check 1 (its result compared with the CPU reference; a
failure stops the script), and the table's last column says how each
large run was verified (`none` there: the same code path, checked small).

    python3 bench/apps.py [--footprint 4G] [--apps a,b] [--gemm-n N] [--json-out FILE]"""
import argparse
import json
import time

from umscope import apps, native, probe
from umscope.model import bounds

# What bounds each application: memory traffic or arithmetic (GEMM), or neither
# (latency-bound wavefront and graph traversal: rate only).
GEMM_RUNS = [("fp64", "12288"), ("fp32", "16384"), ("tf32", "16384"), ("fp16", "16384")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--footprint", default="4G")
    ap.add_argument("--apps", default=",".join(a for a, app in apps.APPS.items()
                                               if app.suite and a not in ("qv", "gemm")))  # the suite's, not llm
    ap.add_argument("--gemm-n", help="order of the GEMMs in every precision (default: "
                    + ", ".join(f"{p} {n}" for p, n in GEMM_RUNS) + ")")
    ap.add_argument("--json-out")
    a = ap.parse_args()
    fp = probe.probe_gpu()
    desc = bounds.describe(fp)
    bw, bw_src = desc["datapaths"]["gpu_memory"]
    peaks = bounds.compute_peaks(fp)
    print(f"{fp['gpus'][0]['name']}; GPU-memory bound {bw:.0f} GB/s ({bw_src}); compute peaks "
          + ", ".join(f"{k} {v[0]:g} TFLOP/s" for k, v in peaks.items()))
    print(f"{'application':<22} {'arrays':>8} {'iters':>5} {'ms/iter':>9} {'spread':>7} {'rate':>22} "
          f"{'floor ms':>9} {'of floor':>8}  wall  verified")
    out = open(a.json_out, "w") if a.json_out else None
    names = a.apps.split(",")
    for name in names + ["gemm"]:
        app = apps.APPS[name]
        argv = [x for k, v in app.fixed.items() for x in (f"--{k}", v)] + ["--footprint", "16M", "--mode",
                                                                           "explicit", "--check", "1"]
        recs, status = native.run_case(apps.bench_of(name), *argv)
        if status["status"] == "skipped":
            print(f"{name}: check at 16 MiB skipped: {status.get('reason')}")
            continue
        if status["status"] != "ok" or not recs or recs[0].get("verified") != "cpu-reference":
            raise SystemExit(f"{name}: the check against the CPU reference at 16 MiB did not pass: "
                             f"{status.get('reason') or recs}")
        print(f"{name}: checked against the CPU reference at 16 MiB (max error {recs[0].get('max_error', 0):.3g})")
    runs = [(name, ["--footprint", a.footprint]) for name in names]
    runs += [(f"gemm {p}", ["--precision", p, "--n", a.gemm_n or n]) for p, n in GEMM_RUNS]
    for label, args in runs:
        name = label.split()[0]
        app = apps.APPS[name]
        argv = [x for k, v in app.fixed.items() for x in (f"--{k}", v)] + list(args) + ["--mode", "explicit",
                                                                                      "--check", "0"]
        t0 = time.time()
        recs, status = native.run_case(apps.bench_of(name), *argv)
        if status["status"] != "ok":
            print(f"{label:<22} {status['status']}: {status.get('reason')}")
            continue
        (r,) = recs
        floor = None
        if r.get("flops") and name in ("sgemm", "gemm", "syr2k"):
            peak = peaks.get(r.get("precision", "fp32"))
            floor = r["flops"] / (peak[0] * 1e12) * 1e3 if peak else None
            rate = f"{r['gflops'] / 1e3:.1f} TFLOP/s"
        elif r.get("traffic_bytes"):
            floor = r["traffic_bytes"] / (bw * 1e9) * 1e3
            rate = f"{r['bandwidth_gbps']:.0f} GB/s" + (f" {r['gflops']:.0f} GF/s" if r.get("gflops") else "")
        elif r.get("edges"):
            rate = f"{r['edges'] / (r['compute_ms'] * 1e-3) / 1e9:.2f} GTEPS"
        else:
            rate = ""
        share = f"{100 * floor / r['median']:.0f}%" if floor else "-"
        print(f"{label:<22} {r['bytes'] / 2**30:>6.2f}Gi {r['iterations']:>5} {r['median']:>9.3f} "
              f"{100 * r['spread']:>6.1f}% {rate:>22} {floor or 0:>9.3f} {share:>8}  {time.time() - t0:.0f} s  {r.get('verified')}")
        if out:
            out.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
