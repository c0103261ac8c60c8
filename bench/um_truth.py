"""Known against counted: runs each `umbench run um-truth --case C` with libumtrace injected and compares the
bytes the case must move (its record's known_htod_bytes / known_dtoh_bytes) with what the trace counted, per
unified-memory event kind, with the tracer's own accounting (which kinds CUPTI accepted, records written,
dropped, flushes). One JSON line per case on stdout; a table on stderr.

    python3 bench/um_truth.py [--bytes 1G] [--case read,writeback] [--env KEY=VALUE ...]

Needs a GPU, umbench (UMSCOPE_UMBENCH or the installed package) and libumtrace (UMSCOPE_UMTRACE or the package).
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

from umscope import native  # noqa: E402
from umscope.profile.tracer import tracer_path  # noqa: E402
from umscope.profile.truth import CASES, run_case  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", default="1G")
    ap.add_argument("--case", default=",".join(CASES))
    ap.add_argument("--iters", type=int)
    ap.add_argument("--timeout", type=float, default=120, help="seconds per case")
    ap.add_argument("--blocks", type=int, help="GPU blocks of the case's kernels (fewer: fewer faults at once)")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the traced program (tracer options)")
    a = ap.parse_args(argv)
    cases = a.case.split(",")
    bad = [c for c in cases if c not in CASES]
    if bad:
        sys.stderr.write(f"um_truth: unknown case {bad[0]!r} (one of {', '.join(CASES)})\n")
        return 2
    env_extra = dict(kv.split("=", 1) for kv in a.env)
    lib = tracer_path()
    if not lib:
        sys.stderr.write("um_truth: no libumtrace (set UMSCOPE_UMTRACE or build with CUPTI)\n")
        return 2
    umbench = native.umbench_path()
    for c in cases:
        r = run_case(umbench, lib, c, a.bytes, env_extra, a.iters, a.timeout,
                     ["--blocks", str(a.blocks)] if a.blocks else [])
        print(json.dumps(r), flush=True)
        cnt, drv = r["counted"] or {}, r.get("driver") or {}
        sys.stderr.write(f"{c:<15} known htod {r['known_htod']} dtoh {r['known_dtoh']} | counted htod {cnt.get('htod')} "
                         f"dtoh {cnt.get('dtoh')} | driver htod {drv.get('htod')} dtoh {drv.get('dtoh')} | "
                         f"gpu_fault {cnt.get('gpu_fault')} cpu_fault {cnt.get('cpu_fault')} "
                         f"thrash {cnt.get('thrashing')} throttle {cnt.get('throttling')} remote_map "
                         f"{cnt.get('remote_map')} | ratio {r['ratio_htod']} {r['ratio_dtoh']} rc {r['rc']}\n")
        for u in r["diag"].get("uvm", []):
            sys.stderr.write(f"    {json.dumps(u)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
