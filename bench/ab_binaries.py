#!/usr/bin/env python3
"""Same case, two builds: does a change to umbench change a figure? Default-suite cases (each picked by the
texts its id must contain) run with an older umbench and with this one, alternated over --rounds, one process
per run; per record, each build's medians, the new build's change from the old one in the same round, and the
old build's own change from round to round (the noise a change must be judged against).

    python3 bench/ab_binaries.py --old PATH [--new PATH] --case 'TEXT;TEXT' [--case ...] [--rounds 2] [--out FILE]
"""
import argparse
import subprocess
import time
from pathlib import Path

from umscope import native, plans, probe

KEYS = ("op", "bytes", "threads", "route", "stride", "processor", "load")


def run(binary, case):
    argv = case.argv({})[3:]  # [umbench, run, benchmark, ...] -> the case's own arguments
    res = subprocess.run([binary, "run", case.benchmark, *argv], capture_output=True, text=True, timeout=900)
    records, status = native.parse_output(res.stdout)
    return {tuple(r.get(k) for k in KEYS): r["median"] for r in records if r.get("median") is not None}, \
        (status or {}).get("status", "failed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the older umbench")
    ap.add_argument("--new", help="the newer umbench (default: this tree's)")
    ap.add_argument("--case", action="append", required=True, help="texts the case id contains, ';'-separated")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out")
    a = ap.parse_args()
    new = a.new or native.umbench_path()
    plan = plans.default_plan(probe.probe())
    lines = [f"# Same case, two builds: old `{a.old}`, new `{new}`, {a.rounds} rounds\n",
             "| case | record | " + " | ".join(f"old {r + 1} | new {r + 1}" for r in range(a.rounds))
             + " | new vs old (per round) | old vs old |", "|---|---|" + "---:|" * (2 * a.rounds + 2)]
    seconds = {"old": 0.0, "new": 0.0}
    summary = []
    for spec in a.case:
        texts = spec.split(";")
        case = next((c for c in plan if all(t in c.case_id for t in texts)), None)
        if case is None:
            lines.append(f"| {spec} | (no such case in the default plan) |" + " |" * (2 * a.rounds + 2))
            continue
        got = []
        for _ in range(a.rounds):
            pair = {}
            for name, binary in (("old", a.old), ("new", new)):
                t0 = time.monotonic()
                pair[name] = run(binary, case)
                seconds[name] += time.monotonic() - t0
            got.append(pair)
        statuses = {p[n][1] for p in got for n in p}
        if statuses != {"ok"}:
            lines.append(f"| {case.case_id} | ({'/'.join(sorted(statuses))}) |" + " |" * (2 * a.rounds + 2))
            continue
        for key in got[0]["old"][0]:
            olds = [p["old"][0].get(key) for p in got]
            news = [p["new"][0].get(key) for p in got]
            if None in olds or None in news:
                continue
            rel = [n / o - 1 for o, n in zip(olds, news)]
            noise = max(olds) / min(olds) - 1
            summary.append((max(abs(x) for x in rel), noise))
            label = " ".join(f"{k}={v}" for k, v in zip(KEYS, key) if v is not None)
            lines.append(f"| {case.case_id} | {label} | "
                         + " | ".join(f"{o:.4g} | {n:.4g}" for o, n in zip(olds, news)) + " | "
                         + ", ".join(f"{100 * x:+.1f}%" for x in rel) + f" | {100 * noise:.1f}% |")
    if summary:
        within = sum(1 for d, n in summary if d <= max(n, 0.05))
        lines.append(f"\n{len(summary)} figures: the new build's change from the old was within the old build's own "
                     f"round-to-round change (or 5%) for {within}; the largest change {100 * max(d for d, _ in summary):.1f}%. "
                     f"Seconds: old {seconds['old']:.1f}, new {seconds['new']:.1f}.")
    text = "\n".join(lines) + "\n"
    if a.out:
        Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
