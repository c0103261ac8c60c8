#!/usr/bin/env python3
"""Speed of the unified-memory policy simulator (umsim) on one core: page events replayed per second for
each model on streams of the suite's three categories, best of 3 replays (stream generation excluded).
Target: >= 20 million page events per second. CPU only.

    python3 bench/sim_speed.py [--footprint 1G]"""
import argparse
import os

from umscope.model import simulate as sim
from umscope.sizes import parse_size

CASES = [  # (application, iterations, DOS): streaming, iterative reuse, irregular; in memory and oversubscribed
    ("triad", 4, 78), ("triad", 4, 150), ("jacobi2d", 10, 78), ("jacobi2d", 10, 150), ("mvt", 2, 78),
    ("mvt", 2, 150), ("bfs", 8, 78), ("sgemm", 1, 150)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--footprint", default="1G")
    a = ap.parse_args()
    try:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    except (AttributeError, OSError):
        pass
    foot = parse_size(a.footprint)
    print(f"{'stream':<22} {'policy':<9} {'events':>11} {'M events/s':>11}")
    rates = []
    for app, it, d in CASES:
        for pol in ("uvm", "svm", "ats", "zerocopy"):
            s = sim.run({"app": app, "footprint": foot, "capacity": int(foot * 100 / d), "iterations": it,
                         "policy": pol, "repeat": 3})
            rates.append(s["events_per_s"])
            print(f"{app + f' x{it} DOS {d}':<22} {pol:<9} {s['events']:>11} {s['events_per_s'] / 1e6:>11.1f}",
                  flush=True)
    rates.sort()
    print(f"min {rates[0] / 1e6:.1f}, median {rates[len(rates) // 2] / 1e6:.1f} M page events/s "
          f"(target >= 20: {'met' if rates[0] >= 20e6 else 'missed'} by the slowest case)")


if __name__ == "__main__":
    main()
