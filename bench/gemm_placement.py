#!/usr/bin/env python3
"""GEMM with each of A, B, C placed in GPU memory or in managed memory the CPU
initialised (the GH200 study's Figs. 15-16, on this machine's memory kinds):
time of the first GEMM (which pays for moving what is not yet on the GPU),
the median of the later ones, and the unified-memory bytes and faults CUPTI
counted (`umscope profile --um-trace` around each run).

    python3 bench/gemm_placement.py [--n 8192] [--precision fp32]"""
import argparse
import itertools
import json
import subprocess
import sys
import tempfile

from umscope import native


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="8192")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--kinds", default="device,managed", help="two kinds: on the GPU, and starting on the CPU")
    a = ap.parse_args()
    kinds = a.kinds.split(",")
    print(f"GEMM {a.precision} n={a.n}: A, B, C in {kinds}")
    print(f"{'A':<9} {'B':<9} {'C':<9} {'first ms':>9} {'later ms':>9} {'TFLOP/s':>8} {'UM in MiB':>10} "
          f"{'UM out MiB':>10} {'GPU faults':>10}")
    with tempfile.TemporaryDirectory() as d:
        for pa, pb, pc in itertools.product(kinds, repeat=3):
            cmd = [sys.executable, "-m", "umscope", "profile", "--um-trace", "--json", "--store", f"{d}/s.sqlite",
                   "--", native.umbench_path(), "run", "gemm", "--precision", a.precision, "--n", a.n,
                   "--iterations", "5", "--mode", "explicit", "--place-a", pa, "--place-b", pb, "--place-c", pc]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            lines = res.stdout.strip().splitlines()
            app = next((json.loads(l) for l in lines if l.startswith('{"type":"record"')), None)
            prof = {r["op"]: r for r in json.loads(lines[-1])} if lines and lines[-1].startswith("[") else {}
            if not app:
                status = next((json.loads(l) for l in lines if l.startswith('{"type":"status"')), {})
                print(f"{pa:<9} {pb:<9} {pc:<9} {status.get('status', 'failed')}: "
                      f"{status.get('reason') or res.stderr.strip()[-200:]}")
                continue
            um = prof.get("um_trace", {})
            t = um.get("totals", {})
            print(f"{pa:<9} {pb:<9} {pc:<9} {app['samples'][0]:>9.2f} {app['median']:>9.2f} "
                  f"{app['gflops'] / 1e3:>8.1f} {t.get('htod', 0) / 2**20:>10.1f} {t.get('dtoh', 0) / 2**20:>10.1f} "
                  f"{t.get('gpu_fault', 0):>10}")


if __name__ == "__main__":
    main()
