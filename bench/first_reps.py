#!/usr/bin/env python3
"""Fewer repetitions, same figure? For each figure of runs made with the full repetition count, the median of
its first K repetitions against the median of all of them, beside the samples' own spread and the same figure's
change from one run to the other. The evidence behind the default suite's cheaper repetition counts
(docs/suite-time.md): the single-thread CPU stream (plans.SINGLE_THREAD_REPS) and slow copies (copy.cu's time
budget).

    python3 bench/first_reps.py --store A.sqlite --commit SHA_A [--store B.sqlite --commit SHA_B ...]
                                [--kind nvidia-h100-x1] [--out docs/suite-reps.md]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
from umscope.store import Store  # noqa: E402

KS = (5, 8, 10)
# (section title, which records, K the default now uses, the slowest repetition kept out: seconds or None)
FIGURES = [
    ("cpu-stream, one thread (the default now: 8 repetitions)",
     lambda r: r["benchmark"] == "cpu-stream" and r["threads"] == 1, 8, None),
    ("cpu-stream, every CPU (the default keeps 20 repetitions)",
     lambda r: r["benchmark"] == "cpu-stream" and (r["threads"] or 0) > 1, 20, None),
    ("copy, sizes whose repetition takes 10 ms or more (the default now: as many as fill 0.3 s, at least 8)",
     lambda r: r["benchmark"] == "copy", 8, 0.010),
]


def rows(path, which, slow):
    out = []
    for r in Store(path, readonly=True).records():
        if r["median"] is None or not which(r):
            continue
        case_id, op, nbytes, route = r["case_id"], r["op"], r["bytes"], r["extra"].get("route")
        s = r["extra"].get("samples") or []
        if len(s) < 20:
            continue
        med = statistics.median(s)
        if slow is not None and (not nbytes or nbytes / (med * 1e9) < slow):  # GB/s samples: seconds per rep
            continue
        out.append({"key": (case_id, op, nbytes, route), "median": med, "spread": (max(s) - min(s)) / med,
                    "first": {k: statistics.median(s[:k]) / med - 1 for k in KS}})
    return out


def run_info(path) -> str:
    first = Store(path, readonly=True).runs()[0]
    started, command, gpu = first["started"], first["command"], first["gpu"]
    return f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, GPU {gpu}, `{command}`"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", action="append", required=True, help="a store of a run with full repetitions")
    ap.add_argument("--commit", action="append", required=True, help="the umscope commit of each --store's run")
    ap.add_argument("--kind", default="nvidia-h100-x1", help="the machine kind the runs were made on")
    ap.add_argument("--out", help="write the markdown here (default: print it)")
    a = ap.parse_args()
    if len(a.store) != len(a.commit):
        ap.error("give one --commit per --store")
    lines = ["# Fewer repetitions, same figure\n",
             "Written by `bench/first_reps.py`. For each figure of the runs below (made with 20 timed repetitions), "
             "the median of the first K repetitions against the median of all 20 (in %), the spread of the 20 "
             "samples ((max - min) / median) and, where the other run has the same figure, how far apart the two "
             "runs' medians were. A cheaper default is taken where the first K stay well inside both the spread "
             "and the run-to-run change.\n"]
    for i, (path, sha) in enumerate(zip(a.store, a.commit), 1):
        lines.append(f"Provenance: run {i}: commit `{sha}`, {a.kind}, {run_info(path)}.\n")
    for title, which, k_now, slow in FIGURES:
        per_run = [rows(p, which, slow) for p in a.store]
        medians = [{r["key"]: r["median"] for r in rr} for rr in per_run]
        lines.append(f"## {title}\n")
        lines.append("| run | case | op | bytes | median | " + " | ".join(f"first {k}" for k in KS)
                     + " | spread | other run |")
        lines.append("|---|---|---|---:|---:|" + "---:|" * len(KS) + "---:|---:|")
        worst = {k: 0.0 for k in KS}
        gaps = []
        for i, rr in enumerate(per_run):
            for r in rr:
                case_id, op, nbytes, route = r["key"]
                others = [m[r["key"]] for j, m in enumerate(medians) if j != i and r["key"] in m]
                gap = max((abs(o / r["median"] - 1) for o in others), default=None)
                if gap is not None:
                    gaps.append(gap)
                for k in KS:
                    worst[k] = max(worst[k], abs(r["first"][k]))
                lines.append(f"| {i + 1} | {case_id} | {op}{'' if route in (None, 'forward') else ' ' + route} | "
                             f"{nbytes} | {r['median']:.4g} | "
                             + " | ".join(f"{100 * r['first'][k]:+.1f}" for k in KS)
                             + f" | {100 * r['spread']:.0f}% | " + ("" if gap is None else f"{100 * gap:.0f}%") + " |")
        n = sum(len(rr) for rr in per_run)
        if n:
            spreads = [r["spread"] for rr in per_run for r in rr]
            lines.append("")
            lines.append(f"{n} figures: the first 5, 8 and 10 repetitions' medians were within "
                         + ", ".join(f"{100 * worst[k]:.1f}%" for k in KS)
                         + f" of the 20-repetition median; the samples' spread was {100 * min(spreads):.0f}-"
                         f"{100 * max(spreads):.0f}%"
                         + (f"; the two runs' medians of one figure differed by up to {100 * max(gaps):.0f}%"
                            if gaps else "") + ".\n")
    text = "\n".join(lines)
    if a.out:
        Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
