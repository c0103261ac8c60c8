#!/usr/bin/env python3
"""The suite's time: runs `umscope run` and `umscope run --quick` (each into its own store) and writes a
per-family time table: cases, seconds spent in them (each case's elapsed time as the runner stored it), seconds
per case, and the wall time of the whole command (probe, plan, report included). Issue 19's targets on
nvidia-h100-x1: `umscope run` <= 180 s, `--quick` <= 60 s.

    python3 bench/suite_time.py --out DIR [--only full|quick] [--stop-after SECONDS] [--resume-from DIR0]
                                [--kind nvidia-h100-x1] [--note TEXT]
                                [-- extra umscope args]

--stop-after sends SIGTERM to a run still going after that many seconds (a shared GPU's time limit): the
table then covers the cases done and says how many were planned; --resume-from DIR0 finishes such a run
(`umscope run --resume` on a copy of its store) and adds the wall time of both parts. Writes DIR/suite_time.md and
DIR/suite_time.json; the stores and reports stay in DIR.

Arguments after `--` go to every umscope command it runs (and to `--resume`), and each table's header shows
them. Issue 38's A/B of `--visible-gpus case` (docs/method.md) on a 4-GPU node, each into its own DIR, in one
call (about 200 s each on 4 x H100):

    python3 bench/suite_time.py --out $OUT/all --only full --kind nvidia-h100-x4
    python3 bench/suite_time.py --out $OUT/case --only full --kind nvidia-h100-x4 -- --visible-gpus case

or, the families that keep one process per case only (about 25 s each), e.g.
`... --out $OUT/ft-all --only full -- --filter firsttouch` against `... -- --filter firsttouch --visible-gpus
case`."""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _commit import commit

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"full": 180.0, "quick": 60.0}


# What made the default suite cheaper, stated with each table (the suite's code is what the commit says).
CUTS = ("Where the time was cut without changing a figure: untimed preparation of large host arrays (pattern "
        "fills and checks, latency chains) runs on every allowed CPU instead of one; a latency chain's random cycle "
        "is built once per process (a batch of latency cases shares it) and staged to the GPU in 64 MiB pieces; "
        "syr2k's CPU loop keeps four partial sums (its check against the CPU reference took 4 s on the H100 host; "
        "the same loop is `app run syr2k --processor cpu`, a figure that changes with it: 0.68-0.80 s against "
        "1.03-1.49 s at 12 MiB on 2 CPUs of a development host, same checksum). Where fewer "
        "repetitions are timed, with the evidence that "
        "the figure does not change (the first repetitions' median against all 20, beside the spread and the "
        "change from run to run): the single-thread CPU stream (8 instead of 20) and copies slower than 15 ms a "
        "repetition (as many as fill 0.3 s, at least 8) in docs/suite-reps.md (bench/first_reps.py). On a node with "
        "several GPUs (issue 38, docs/suite-time.md): three batch processes where the plan allows (GPU 0's, every "
        "GPU's, the applications'), no process for an own-process case the probe knows will skip, one energy "
        "reading and one conditions reading between two batched cases, and no SM copies of host memory with a peer "
        "that has NVLink and the same host side as GPU 0 (they repeat GPU 0's own).\n\n")


def family_of(benchmark: str) -> str:
    """The plan family a case belongs to: the applications (their native benchmarks) count as 'apps'."""
    from umscope import apps, plans
    if benchmark in plans.FAMILIES and benchmark != "apps":
        return benchmark
    if benchmark in apps.APPS or benchmark in {apps.bench_of(n) for n in apps.APPS}:
        return "apps (qv)" if benchmark == "qv" else "apps"
    return benchmark


def time_run(which: str, out: Path, stop_after, extra, resume_from=None) -> dict:
    from umscope.store import Store
    store = out / f"{which.replace(':', '-')}.sqlite"
    before = 0.0
    if resume_from:  # a run stopped at a time limit, finished here: its store, and the wall time it had taken
        prev = json.loads((Path(resume_from) / "suite_time.json").read_text())
        before = sum(r["wall_s"] for r in prev if r["which"] == which)
        shutil.copyfile(Path(resume_from) / f"{which}.sqlite", store)
    elif store.exists():
        store.unlink()
    cmd = [sys.executable, "-m", "umscope"] + (["bench", which[6:]] if which.startswith("bench:") else ["run"])
    cmd += ["--store", str(store), "--report", str(out / f"{which.replace(':', '-')}.html")]
    cmd += ["--resume"] if resume_from else (["--quick"] if which == "quick" else [])
    cmd += list(extra)
    print("$ umscope " + " ".join(cmd[3:]), flush=True)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)  # progress (one line per case) goes to stderr
    stopped = False
    try:
        proc.wait(timeout=stop_after)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        stopped = True
        proc.wait()
    wall = time.monotonic() - t0 + before  # a resumed run: both parts (the probe and report counted twice)
    s = Store(str(store))
    try:
        run = s.run()
    except Exception as e:  # noqa: BLE001 - stopped before the run was created
        return {"which": which, "command": " ".join(cmd[3:]), "wall_s": round(wall, 1), "exit": proc.returncode,
                "stopped_after_s": stop_after if stopped else None, "planned": 0, "done": 0, "in_cases_s": 0.0,
                "outside_cases_s": round(wall, 1), "gpu": None, "target_s": TARGETS.get(which), "families": {},
                "statuses": {}, "error": str(e)}
    cases = s.cases(run["id"])
    planned = len(run["plan"] or [])
    fams = {}
    for c in cases:
        f = fams.setdefault(family_of(c["benchmark"]), {"cases": 0, "seconds": 0.0, "not_ok": 0})
        f["cases"] += 1
        f["seconds"] += c["elapsed"] or 0.0
        f["not_ok"] += c["status"] not in ("ok", "skipped")
    in_cases = sum(f["seconds"] for f in fams.values())
    gpu = next(iter((run["fingerprint"] or {}).get("gpus") or []), {}).get("name")
    return {"which": which, "command": " ".join(cmd[3:]), "wall_s": round(wall, 1), "exit": proc.returncode,
            "stopped_after_s": stop_after if stopped else None, "planned": planned, "done": len(cases),
            "in_cases_s": round(in_cases, 1), "outside_cases_s": round(wall - in_cases, 1), "gpu": gpu,
            "target_s": TARGETS.get(which), "families": fams, "between": between(run, cases),
            "statuses": {st: sum(1 for c in cases if c["status"] == st) for st in {c["status"] for c in cases}}}


# A pause between two cases this long is a process starting (a batch's, before its first case's start marker);
# the others are the suite's own work between two cases of a batch (NVML readings, storing the case).
START_GAP_S = 0.2


def between(run: dict, cases: list) -> dict:
    """Where a run's time outside its cases went, from the store alone: run start to the first case, the pauses
    between cases (process starts: START_GAP_S or longer; the others: the suite's work between two cases), the
    last case to the run's end (the cross-mode checks), all in seconds."""
    cs = sorted((c for c in cases if c.get("started") is not None), key=lambda c: c["started"])
    if not cs:
        return {}
    gaps = [b["started"] - (a["started"] + (a["elapsed"] or 0.0)) for a, b in zip(cs, cs[1:])]
    starts = [g for g in gaps if g >= START_GAP_S]
    short = sorted(g for g in gaps if g < START_GAP_S)
    end = cs[-1]["started"] + (cs[-1]["elapsed"] or 0.0)
    return {"to_first_case_s": round(cs[0]["started"] - run["started"], 2),
            "process_starts": len(starts), "process_starts_s": round(sum(starts), 2),
            "other_gaps": len(short), "other_gaps_s": round(sum(short), 2),
            "other_gap_median_ms": round(1000 * statistics.median(short), 1) if short else None,
            "after_last_case_s": round((run["finished"] or end) - end, 2)}


def between_text(b: dict) -> str:
    if not b:
        return ""
    return (f"Outside the cases, from the store: {b['to_first_case_s']:.2f} s from the run's start to its first "
            f"case; between cases {b['process_starts']} pauses of {START_GAP_S:g} s or more (a process starting or "
            f"ending) took {b['process_starts_s']:.2f} s and {b['other_gaps']} others {b['other_gaps_s']:.2f} s "
            f"(median {b['other_gap_median_ms']} ms: the suite's readings and storing between two cases of a "
            f"batch, and around a case in its own process); {b['after_last_case_s']:.2f} s after the last case; "
            "the rest (probe, plan, report) before and after the run.\n")


def table(r: dict) -> str:
    target = "" if r["target_s"] is None else (
        f" (target <= {r['target_s']:.0f} s: "
        f"{'met' if r['wall_s'] <= r['target_s'] and r['done'] == r['planned'] else 'not met'})")
    head = (f"### `umscope {r['command']}`: wall {r['wall_s']:.1f} s{target}; "
            f"{r['done']} of {r['planned']} cases"
            + (f", stopped after {r['stopped_after_s']:.0f} s" if r["stopped_after_s"] else "")
            + f"; GPU {r['gpu']}; statuses {r['statuses']}\n\n")
    rows = ["| family | cases | seconds | s/case | share |", "|---|---:|---:|---:|---:|"]
    for name, f in sorted(r["families"].items(), key=lambda kv: -kv[1]["seconds"]):
        rows.append(f"| {name} | {f['cases']} | {f['seconds']:.1f} | {f['seconds'] / max(f['cases'], 1):.2f} | "
                    f"{100 * f['seconds'] / max(r['wall_s'], 1e-9):.0f}% |")
    rows.append(f"| (probe, plan, report: outside the cases) | | {r['outside_cases_s']:.1f} | | "
                f"{100 * r['outside_cases_s'] / max(r['wall_s'], 1e-9):.0f}% |")
    rows.append(f"| **total** | {r['done']} | {r['wall_s']:.1f} | | |")
    return head + "\n".join(rows) + "\n" + ("\n" + between_text(r["between"]) if r.get("between") else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--only", choices=["full", "quick"])
    ap.add_argument("--bench", metavar="FAMILY", action="append", default=[],
                    help="time `umscope bench FAMILY` too (one family of the suite, e.g. apps), repeatable")
    ap.add_argument("--stop-after", type=float, help="SIGTERM a run still going after this many seconds")
    ap.add_argument("--resume-from", metavar="DIR", help="finish the runs of an earlier --out DIR that --stop-after "
                    "ended (a shared machine's time limit), adding the wall time they had taken")
    ap.add_argument("--kind", help="the machine kind it runs on (e.g. nvidia-h100-x1), stated in the document")
    ap.add_argument("--note", help="a paragraph to add under the header (e.g. the time before a change)")
    ap.add_argument("--gaps", metavar="STORE", help="only print where the newest run of STORE spent its time "
                    "between cases (no run)")
    ap.add_argument("extra", nargs="*", help="more umscope run arguments (after --)")
    a = ap.parse_args()
    if not a.out and not a.gaps:
        ap.error("--out is required (or --gaps STORE)")
    if a.gaps:
        from umscope.store import Store
        st = Store(a.gaps, readonly=True)
        run = st.run()
        b = between(run, st.cases(run["id"]))
        print(json.dumps(b))
        print(between_text(b), end="")
        return
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = [w for w in ("quick", "full") if a.only in (None, w)] if a.only or not a.bench else []
    results = [time_run(w, out, a.stop_after, a.extra, a.resume_from) for w in runs]
    results += [time_run("bench:" + f, out, a.stop_after, a.extra) for f in a.bench]
    doc = (f"# umscope suite time\n\ncommit {commit(ROOT)}, "
           + (f"machine kind {a.kind}, " if a.kind else "") + f"host {os.uname().nodename}, "
           f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; written by bench/suite_time.py. Seconds per "
           "family are the cases' own elapsed times as the runner stored them (a batch's process start falls in "
           "its first case).\n\n" + (a.note + "\n\n" if a.note else "") + CUTS
           + "\n".join(table(r) for r in results))
    (out / "suite_time.md").write_text(doc)
    (out / "suite_time.json").write_text(json.dumps(results, indent=1))
    print(doc)


if __name__ == "__main__":
    main()
