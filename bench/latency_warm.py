#!/usr/bin/env python3
"""How long must a chase warm up? The default suite's latency cases (or those whose id contains --filter) run
with warm-ups of each given number of repetitions' worth of loads (--warm-steps = F x the case's steps; 8 is
umbench's default), alternated over --rounds; per footprint, each variant's median load latency and its change
from the first variant's in the same round.

    python3 bench/latency_warm.py [--factors 8,2] [--rounds 2] [--filter TEXT ...] [--out FILE]
"""
import argparse
import time
from pathlib import Path

from umscope import native, plans, probe


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--factors", default="8,2")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--filter", action="append", default=[])
    ap.add_argument("--out")
    a = ap.parse_args()
    factors = [int(f) for f in a.factors.split(",")]
    fp = probe.probe()
    cases = [c for c in plans.latency_cases(fp, sizes=plans.LATENCY_SHORT)
             if all(f in c.case_id for f in a.filter)]
    lines = [f"# Latency warm-up: {len(cases)} cases, warm-ups of {a.factors} repetitions' worth, "
             f"{a.rounds} rounds\n", "| case | footprint | round | " + " | ".join(f"x{f} ns" for f in factors)
             + " | " + " | ".join(f"x{f} vs x{factors[0]}" for f in factors[1:]) + " | spread |",
             "|---|---:|---:|" + "---:|" * (2 * len(factors) - 1) + "---:|"]
    worst, seconds = 0.0, {f: 0.0 for f in factors}
    for c in cases:
        steps = int(c.params.get("steps", 1 << 17))
        for rnd in range(a.rounds):
            got = {}
            for f in factors:
                argv = [x for k, v in c.params.items() for x in (f"--{k}", v)]
                if c.kind:
                    argv = ["--kind", c.kind] + argv
                t0 = time.monotonic()
                recs, status = native.run_case("latency", *argv, "--warm-steps", str(f * steps), timeout=600)
                seconds[f] += time.monotonic() - t0
                if status["status"] != "ok":
                    got = None
                    break
                got[f] = {r["bytes"]: (r["median"], r.get("spread") or 0.0) for r in recs if r["op"] == "chase"}
            if not got:
                lines.append(f"| {c.case_id} | ({status['status']}) | {rnd + 1} |" + " |" * (2 * len(factors)))
                break
            for b, (m0, spread) in got[factors[0]].items():
                vals = [got[f].get(b, (None,))[0] for f in factors]
                rel = [v / m0 - 1 for v in vals[1:]]
                worst = max([worst] + [abs(x) for x in rel])
                lines.append(f"| {c.case_id} | {b} | {rnd + 1} | " + " | ".join(f"{v:.4g}" for v in vals) + " | "
                             + " | ".join(f"{100 * x:+.1f}%" for x in rel) + f" | {100 * spread:.1f}% |")
    lines.append(f"\nLargest change from x{factors[0]}: {100 * worst:.1f}%. Seconds per variant: "
                 + ", ".join(f"x{f} {s:.1f} s" for f, s in seconds.items()) + ".")
    text = "\n".join(lines) + "\n"
    if a.out:
        Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
