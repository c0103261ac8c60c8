#!/usr/bin/env python3
"""What the suite's applications move over the host link in the zero-copy modes, measured by the GPU's own
counters (CUPTI range profiler, per kernel: `umscope profile --counters kernel`), against what each
application declares (link_read_bytes / link_write_bytes, link_bytes, traffic_bytes: what the calibrated
model prices, python/umscope/model/calibrated.py). The source of the traffic models the applications declare
(cuBLAS's re-reads in gemm.cu, the stencils' neighbour re-reads): a measurement, not an assumption.

    python3 bench/model_linkbytes.py [--apps gemm,jacobi2d] [--modes pinned] [--footprint 128M]
                                     [--counter-set link|memory] [--json-out FILE]

GPU machine; about 3 s per application and mode (kernels serialised and replayed by the profiler)."""
import argparse
import json
import os
import subprocess
import sys
import time

from umscope import apps, native

from model_validate import app_argv  # bench/model_validate.py: the same in-memory case the validation runs


def measure(name, mode, footprint, counter_set, dev):
    cmd = [sys.executable, "-m", "umscope", "profile", "--counters", "kernel", "--counter-set", counter_set,
           "--store", "/tmp/umscope-linkbytes.sqlite", "--json", "--",
           native.umbench_path(), "run", apps.bench_of(name), *map(str, app_argv(name, footprint, mode, dev))]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    lines = [x for x in res.stdout.splitlines() if x.strip()]
    app_rec, recs = None, []
    for x in lines:
        try:
            v = json.loads(x)
        except ValueError:
            continue
        if isinstance(v, list):
            recs = v
        elif isinstance(v, dict) and v.get("type") == "record" and v.get("app"):
            app_rec = v
    kt = next((r for r in recs if r.get("op") == "kernel_traffic"), None)
    if not app_rec or not kt:
        return {"app": name, "mode": mode, "status": "failed", "rc": res.returncode, "stderr": res.stderr[-1500:]}
    flat = dict(app_rec.get("extra") or {}, **{k: v for k, v in app_rec.items() if k != "extra"})
    its = int(flat.get("iterations") or 1)
    return {"app": name, "mode": mode, "status": "ok", "counter_set": counter_set, "iterations": its,
            "declared": {k: flat.get(k) for k in ("link_read_bytes", "link_write_bytes", "link_bytes", "link_runs",
                                                  "traffic_bytes", "flops", "in_bytes", "out_bytes", "inout_bytes",
                                                  "compute_ms", "samples")},
            "measured_total": kt.get("by_metric"), "launches": kt.get("launches"), "passes": kt.get("passes"),
            "kernels": [{"kernel": k["kernel"][:120], "launches": k["launches"], "bytes": k["bytes"]}
                        for k in kt.get("kernels", [])[:12]]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--apps", default="gemm,jacobi2d,hotspot,himeno,srad,conv2d,triad,needle,pathfinder,bfs")
    ap.add_argument("--modes", default="pinned")
    ap.add_argument("--footprint", default="128M")
    ap.add_argument("--counter-set", default="link", choices=["link", "memory"])
    ap.add_argument("--device", default="0")
    ap.add_argument("--json-out")
    a = ap.parse_args()
    for n in a.apps.split(","):
        if n not in apps.APPS:
            print(f"unknown application {n!r}", file=sys.stderr)
            return 2
    out = []
    for n in a.apps.split(","):
        for m in a.modes.split(","):
            t = time.time()
            r = measure(n, m, a.footprint, a.counter_set, ["--device", a.device])
            out.append(r)
            if a.json_out:  # after each case: a run cut by its time limit keeps what it measured
                with open(a.json_out, "w") as f:
                    json.dump(out, f)
            if r["status"] != "ok":
                print(f"{n} {m}: failed (rc {r['rc']}): {r['stderr'][-300:]}", flush=True)
                continue
            tot = r["measured_total"] or {}
            d = r["declared"]
            per = {k: v / r["iterations"] for k, v in tot.items()}
            print(f"{n:<11} {m:<10} {r['launches']} launches; measured per iteration "
                  + ", ".join(f"{k} {v:.4g}" for k, v in sorted(per.items()))
                  + f"; declared link_read {d['link_read_bytes']} link_write {d['link_write_bytes']} link "
                  f"{d['link_bytes']} traffic {d['traffic_bytes']} ({time.time() - t:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
