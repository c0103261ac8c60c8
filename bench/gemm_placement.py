#!/usr/bin/env python3
"""GEMM with each of A, B, C placed in GPU memory or in managed memory the CPU
initialised (the GH200 study's Figs. 15-16, on this machine's memory kinds):
time of the first GEMM (which pays for moving what is not yet on the GPU),
the median of the later ones, and the unified-memory bytes and faults CUPTI
counted (`umscope profile --um-trace` around each run, through bench/um_profile.py).

    python3 bench/gemm_placement.py [--n 8192] [--precision fp32]"""
import argparse
import itertools

import um_profile  # bench/um_profile.py, beside this script


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
    for pa, pb, pc in itertools.product(kinds, repeat=3):
        app, prof, summary, status = um_profile.profile(
            ["umbench", "run", "gemm", "--precision", a.precision, "--n", a.n, "--iterations", "5", "--mode",
             "explicit", "--place-a", pa, "--place-b", pb, "--place-c", pc])
        if not app:
            print(f"{pa:<9} {pb:<9} {pc:<9} {status.get('status', 'failed')}: "
                  f"{status.get('reason') or summary.strip()[-200:]}")
            continue
        t = prof.get("um_trace", {}).get("totals", {})
        print(f"{pa:<9} {pb:<9} {pc:<9} {app['samples'][0]:>9.2f} {app['median']:>9.2f} "
              f"{app['gflops'] / 1e3:>8.1f} {t.get('htod', 0) / 2**20:>10.1f} {t.get('dtoh', 0) / 2**20:>10.1f} "
              f"{t.get('gpu_fault', 0):>10}")


if __name__ == "__main__":
    main()
