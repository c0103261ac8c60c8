#!/usr/bin/env python3
"""What profile's NVTX records cost a PyTorch program per token or step: a bound, from how many NVTX calls the work
makes and what one call costs with NVTX handed to CUPTI (issue 34).

Why a bound and not an A/B: overhead_ab's tracer toggle detaches libumtrace between halves, and a detach is refused
once the program's NVTX calls are handed to CUPTI (its handlers would be left behind; CUB's ranges inside PyTorch
then crash, H200, session 20). So the A/Bs keep NVTX from CUPTI (NVTX_INJECTION64_PATH=/nonexistent-nvtx) and
measure everything else profile's default records; this script gives the rest:

  calls per unit   CUPTI's marker records in profile's trace of this process (its `ranges`, each a push and a pop,
                   and `instants`), less the calls this script makes itself, over every unit the work ran (warm-up
                   and model set-up included: an over-count)
  cost per call    a push and a pop, one range's calls (torch.cuda.nvtx, NVTX's global domain), timed in this
                   process, NVTX handed to CUPTI with its marker records on, as profile's default runs it; NVTX's
                   own cost without CUPTI (tens of ns) is not taken off: an over-count
  bound            calls per unit x cost per call / the unit's median time: the share NVTX adds to a unit at most

    python3 bench/nvtx_cost.py [--work llama,gpt2,train,compiled] [--reps 5] [--tokens 64] [--steps 4]
        [--calls 20000] [--out DIR]

runs each work under `umscope profile --um-trace --json` (profile's default records: unified memory and NVTX) and
prints one line per work and a RESULT JSON line; with --out writes nvtx_cost.json. Exit 2 on a bad argument."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead_ab import WORKS, time_it  # noqa: E402  (the same works, built the same way)

MARK = "NVTX_COST "
OWN = "umscope-nvtx-cost"  # the names of this script's own ranges


def child(a):
    """Inside the profiled process: the work a.reps times after a warm-up, then a.calls timed push/pop pairs."""
    import torch
    work, per, unit = WORKS[a.work](a)
    work()  # warm-up (and torch.compile's compilation)
    times = [time_it(work)[0] / per * 1e3 for _ in range(a.reps)]
    torch.cuda.nvtx.range_push(OWN + "-warm")
    torch.cuda.nvtx.range_pop()
    t0 = time.perf_counter()
    for _ in range(a.calls):
        torch.cuda.nvtx.range_push(OWN)
        torch.cuda.nvtx.range_pop()
    per_call = (time.perf_counter() - t0) / a.calls
    print(MARK + json.dumps({"work": a.work, "unit": unit, "units_run": per * (a.reps + 1),
                             "median_ms": statistics.median(times), "own_ranges": a.calls + 1,
                             "per_call_us": per_call * 1e6}), flush=True)
    return 0


def combine(mine, um):
    """The work's record from the child's line and profile's um_trace record (None where it has none)."""
    if um is None:
        return dict(mine, bound=None, why="profile kept no trace")
    names = Counter(r[0] for r in um.get("ranges", [])) + Counter(i[0] for i in um.get("instants", []))
    own = sum(v for n, v in names.items() if str(n).startswith(OWN))
    if own != mine["own_ranges"]:  # the count is only as good as CUPTI's recording of ranges
        return dict(mine, bound=None, why=f"CUPTI recorded {own} of this script's {mine['own_ranges']} ranges")
    work_calls = sum(names.values()) - own
    per_unit = work_calls / mine["units_run"]
    return dict(mine, work_calls=work_calls, calls_per_unit=per_unit,
                names=dict([(n, v) for n, v in names.most_common() if not str(n).startswith(OWN)][:8]),
                bound=per_unit * mine["per_call_us"] / 1e3 / mine["median_ms"])


def run_one(a, work):
    with tempfile.TemporaryDirectory() as d:
        cmd = ["umscope", "profile", "--um-trace", "--json", "--store", str(Path(d) / "s.sqlite"), "--",
               sys.executable, __file__, "--child", "--work", work, "--reps", str(a.reps), "--tokens", str(a.tokens),
               "--steps", str(a.steps), "--calls", str(a.calls)]
        env = {k: v for k, v in os.environ.items() if k not in ("NVTX_INJECTION64_PATH", "UMSCOPE_UMTRACE_RECORDS")}
        res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = res.stdout.strip().splitlines()
    mine = [json.loads(x[len(MARK):]) for x in lines if x.startswith(MARK)]
    if res.returncode != 0 or not mine:
        return {"work": work, "error": f"exit {res.returncode}: {(res.stderr or res.stdout)[-400:]}"}
    recs = json.loads(lines[-1])
    um = next((r for r in recs if r.get("op") == "um_trace"), None)
    return combine(mine[0], um)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", default="llama,gpt2,train,compiled")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--out", default=os.environ.get("OUT"))
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    works = [w for w in a.work.split(",") if w]
    bad = [w for w in works if w not in WORKS]
    why = (f"unknown work {','.join(bad)}" if bad else "--child runs one work" if a.child and len(works) != 1 else
           "--reps, --tokens, --steps and --calls need at least 1"
           if min(a.reps, a.tokens, a.steps, a.calls) < 1 else None)
    if why:
        print(f"nvtx_cost: {why}", file=sys.stderr)
        return 2
    if a.child:
        a.work = works[0]
        return child(a)
    out = []
    for w in works:
        r = run_one(a, w)
        out.append(r)
        if "error" in r:
            print(f"nvtx {w}: {r['error']}", flush=True)
        elif r["bound"] is None:
            print(f"nvtx {w}: {r['why']}", flush=True)
        else:
            print(f"nvtx {w}: {r['calls_per_unit']:.3g} NVTX ranges or marks per {r['unit'].split('/')[1]} x "
                  f"{r['per_call_us']:.2f} us per push and pop over {r['median_ms']:.3f} {r['unit']}: at most "
                  f"{100 * r['bound']:.2g}% ({r['names']})", flush=True)
        if a.out:
            Path(a.out).mkdir(parents=True, exist_ok=True)
            (Path(a.out) / "nvtx_cost.json").write_text(json.dumps(out, indent=1))
    print("RESULT " + json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
