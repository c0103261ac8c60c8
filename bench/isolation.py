#!/usr/bin/env python3
"""Does a case measure the same inside a batch as in a process of its own? The default suite's cases of the
given families, run one process per case and as one `umbench batch`, in the order given by --passes; per
record, each pass's median and how far it lies from the first pass's, beside the record's spread, and the
seconds each pass took. The evidence for (or against) taking a family out of suite.ISOLATED.

    python3 bench/isolation.py --family firsttouch [--family faults ...] [--passes iso,batch,iso] [--out FILE]
"""
import argparse
import time
from pathlib import Path

from umscope import plans, probe, suite


# Fields that tell a case's records apart (faults: one record per stride; interleave: per N; migration: per
# iteration).
KEYS = ("op", "bytes", "processor", "stride", "gpu_writes", "trial", "route", "threads")
# Figures of a record beside its median that carry the fresh-process effect: migration's first iteration,
# interleave's first GPU write.
FIRSTS = ("first", "first_gpu_write_ms")


def medians(outcome) -> dict:
    out = {}
    for r in outcome.records:
        if r.get("median") is None:
            continue
        key = tuple(r.get(k) for k in KEYS)
        out[key + ("median",)] = (r["median"], r.get("spread") or 0.0, r.get("unit"))
        for f in FIRSTS:
            if r.get(f) is not None:
                out[key + (f,)] = (r[f], r.get("spread") or 0.0, r.get("unit"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", action="append", required=True)
    ap.add_argument("--passes", default="iso,batch", help="comma list of iso and batch (default iso,batch)")
    ap.add_argument("--out", help="also write the markdown here")
    a = ap.parse_args()
    fp = probe.probe()
    cases = [c for c in plans.default_plan(fp) if c.benchmark in a.family]
    passes = a.passes.split(",")
    results, seconds = [], []
    for p in passes:
        t0 = time.monotonic()
        if p == "iso":
            got = {c.case_id: suite.execute(c, {}) for c in cases}
        elif p == "batch":
            got = {c.case_id: o for c, o in suite.execute_batch(cases, {})}
        else:
            ap.error(f"unknown pass {p!r}")
        seconds.append(time.monotonic() - t0)
        results.append(got)
    lines = [f"# {' + '.join(a.family)}: {len(cases)} cases of the default suite, passes "
             + ", ".join(f"{p} {s:.1f} s" for p, s in zip(passes, seconds)) + "\n",
             "| case | op | bytes | " + " | ".join(passes) + " | " + " | ".join(f"{p} vs first" for p in passes[1:])
             + " | spread (first) |", "|---|---|---:|" + "---:|" * (2 * len(passes) - 1) + "---:|"]
    worst = 0.0
    for c in cases:
        per = [medians(r[c.case_id]) if c.case_id in r else {} for r in results]
        statuses = {r[c.case_id].status for r in results if c.case_id in r}
        if statuses != {"ok"}:
            lines.append(f"| {c.case_id} | ({'/'.join(sorted(statuses))}) | | " + " | " * (2 * len(passes) - 1) + " |")
            continue
        for key, (m0, spread, unit) in per[0].items():
            vals = [p.get(key, (None,))[0] for p in per]
            rel = [(v / m0 - 1) if (v is not None and m0) else None for v in vals[1:]]
            worst = max([worst] + [abs(x) for x in rel if x is not None])
            extra = " ".join(f"{k}={v}" for k, v in zip(KEYS[2:], key[2:-1]) if v is not None) + " " + key[-1]
            lines.append(f"| {c.case_id} | {key[0]} {extra} | {key[1]} | "
                         + " | ".join("" if v is None else f"{v:.4g}" for v in vals) + " | "
                         + " | ".join("" if x is None else f"{100 * x:+.1f}%" for x in rel)
                         + f" | {100 * spread:.0f}% |")
    lines.append(f"\nLargest change from the first pass: {100 * worst:.1f}%.")
    text = "\n".join(lines) + "\n"
    if a.out:
        Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
