#!/usr/bin/env python3
"""The scale-out reference of a node with N >= 2 GPUs in one call: topology, the peer copy matrix,
ping-pong and latency across GPUs, NCCL collectives in both launch ways, MPI point-to-point with N
ranks, and (optionally) PyTorch's torch.distributed on the same collectives. It orchestrates umscope's
own commands (each run as `python3 -m umscope ... --json --store STORE`) and writes their records
into a markdown document: every figure is a record's median with its min-max, its unit, and the bound
and its source where the record has one. Nothing is measured here.

    python3 bench/node_reference.py --kind nvidia-h200-x4 --out docs/reference-h200x4.md
                                    [--quick] [--reps N] [--mpi-reps N] [--pairs all|star] [--no-torch]
                                    [--budget S] [--keep FILE [--keep-title T]] [--dry-run]
    python3 bench/node_reference.py --render docs/reference-h200x4.jsonl --out docs/reference-h200x4.md [--note TEXT]

Expected time (printed at the start from the planning figures in COST; the document records the real
one): about 2 minutes on 2 GPUs, 4 minutes on 4 (copy matrix 72 cases, 6 ping-pong pairs, 12 latency
pairs, MPI with 2 pairs), 5 on 8 with --pairs star.

N is the number of GPUs the probe sees. NCCL_NVLS_ENABLE must be 0 (set to 0 where unset; any other
value: exit 2); the machine's other multicast-off variables are kept and named in the document. Ranks
are started by the site launcher through umscope's own families (`--launcher mpirun -n N`), one per
GPU, never more ranks than CPUs. The document is rewritten after every step, so a run cut short keeps
what it measured; each section says which command made it and how long it took. Raw records go to
--records (JSON lines, default OUT with .jsonl), with the provenance, so --render can write the
document again without measuring (--note adds a line of its own under the provenance). The records
file ends with the whole run's time; the document says it, or, for an older records file without that
end line, what the steps' own times add up to."""
import argparse
import datetime
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
sys.path.insert(0, str(ROOT / "bench"))
from _commit import commit as _commit  # noqa: E402

NCCL_OPS = "allreduce,allgather,reducescatter,broadcast,alltoall"
NCCL_KINDS = ["device", "managed,first_touch=gpu"]
MPI_KINDS = ["device", "system", "pinned"]
# MPI: the latency at small messages, the bandwidths at 1 MiB and 64 MiB; mbw (k pairs at once) at 1 MiB
# and 16 MiB only where there are two pairs or more (with one pair it is bw again). A 64 MiB repetition
# moves 8 GiB one way (a window of 64, two loops), 1-2 s through host staging: 3 repetitions after one
# warm-up (on nvidia-h200-x2, bw and bibw at 1 MiB and 64 MiB took 35-41 s per kind).
MPI_LAT_SIZES = "8,1M"
MPI_BW_SIZES = "1M,64M"
MPI_MBW_SIZES = "1M,16M"
MPI_REPS = 3
MULTICAST_VARS = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
# Planning figures for the estimate printed at the start, from the runs on nvidia-h200-x2 (commits
# c25768a and 96438a7, N = 2; the document records each step's real wall time): seconds per command, or
# per case where the work grows with N (copy: 3 s for 12 cases; ping-pong: 6 s for 4 cases; latency at
# 4K,1M,1G: 8 s for 2 ordered pairs; nccl: 4 s, nccl-mpi: 11 s; mpi: 41 s and 35 s for bw and bibw of
# the two host kinds, 5 s for the latency command; mbw and torch not yet run there: guesses).
COST = {"info": 2, "copy": 0.25, "pingpong": 1.5, "latency": 4.0, "nccl": 6, "nccl-mpi": 12,
        "mpi-latency": 5, "mpi-bw": 40, "mpi-mbw": 8, "torch": 120}


def quick_settings(quick: bool) -> dict:
    """The sizes of each step: the default, or --quick's (one size per table, fewer repetitions)."""
    if quick:
        return {"copy_size": "1G", "latency_size": "1G", "nccl_size": "1G", "reps": 5}
    return {"copy_size": "1G", "latency_size": "4K,1M,1G", "nccl_size": "1M,64M,1G", "reps": 10}


def pair_plan(n: int, mode: str) -> dict:
    """Which GPU pairs ping-pong and latency cover. 'all': every pair (ping-pong: a < b; latency: every
    ordered pair). 'star': each pair from GPU 0, plus one disjoint pair (2, 3) where there are four GPUs
    or more, so a link that does not touch GPU 0 is measured too."""
    if n < 2:
        raise ValueError("a node reference needs two GPUs or more")
    if mode == "all":
        return {"pingpong": [(a, b) for a in range(n) for b in range(n) if a < b],
                "latency": [(a, b) for a in range(n) for b in range(n) if a != b], "mode": "all"}
    if mode != "star":
        raise ValueError(f"unknown pair mode {mode!r}")
    star = [(0, b) for b in range(1, n)]
    extra = [(2, 3)] if n >= 4 else []
    return {"pingpong": star + extra, "latency": star + extra, "mode": "star"}


def rank_plan(n: int, cpus: int) -> dict:
    """Ranks of the launched steps: one per GPU, never more ranks than CPUs (no oversubscription). MPI
    point-to-point pairs rank i with i + n/2: an odd N leaves its last rank idle, which is said."""
    if n < 2:
        raise ValueError("a node reference needs two GPUs or more")
    if n > cpus:
        raise ValueError(f"{n} ranks (one per GPU) would oversubscribe {cpus} CPUs")
    return {"nccl": n, "mpi": n, "mpi_pairs": n // 2, "idle": n % 2}


def _filters(step: str, pairs: dict, n: int) -> list:
    """--filter lists (one command each) selecting the planned pairs of a step."""
    if pairs["mode"] == "all":
        return [["peer="]] if step == "pingpong" else [["peer"]]
    out = [["peer=" if step == "pingpong" else "peer", "device=0 "]]
    if n >= 4:
        out.append(["peer=3 " if step == "pingpong" else "latency peer:3 ", "device=2 "])
    return out


def plan(n: int, cpus: int, quick=False, reps=None, pairs="all", torch=True, mpi_reps=MPI_REPS,
         anchors=".anchors") -> list:
    """The steps, in the order they run: [(name, [argv, ...])], each argv an umscope command without the
    leading 'umscope' (a step may be several commands); 'torch' is this script's call of
    bench/scaleout.py's ranks."""
    q = quick_settings(quick)
    reps = str(reps or q["reps"])
    pp = pair_plan(n, pairs)
    ranks = rank_plan(n, cpus)
    steps = [("info", [["info", "--json"]])]
    steps.append(("copy", [["bench", "copy", "--size", q["copy_size"], "--filter", "peer", "--filter", "device",
                            "--reps", reps]]))
    steps.append(("pingpong", [["bench", "pingpong"] + [x for f in fs for x in ("--filter", f)]
                               for fs in _filters("pingpong", pp, n)]))
    steps.append(("latency", [["bench", "latency", "--size", q["latency_size"]]
                              + [x for f in fs for x in ("--filter", f)] for fs in _filters("latency", pp, n)]))
    kinds = [x for k in NCCL_KINDS for x in ("--kind", k)]
    nccl = ["bench", "nccl"] + kinds + ["--ops", NCCL_OPS, "--size", q["nccl_size"], "--reps", reps]
    steps.append(("nccl", [nccl]))
    steps.append(("nccl-mpi", [nccl + ["--launcher", "mpirun", "-n", str(ranks["nccl"])]]))
    mpi = (["bench", "mpi", "--launcher", "mpirun", "-n", str(ranks["mpi"])]
           + [x for k in MPI_KINDS for x in ("--kind", k)])
    runs = [("latency", MPI_LAT_SIZES), ("bw,bibw", MPI_BW_SIZES)]
    if ranks["mpi_pairs"] >= 2:
        runs.append(("mbw", MPI_MBW_SIZES))
    steps.append(("mpi", [mpi + ["--ops", ops, "--size", sizes, "--reps", str(mpi_reps), "--warmup", "1"]
                          for ops, sizes in runs]))
    if torch:  # optional, so last: a run cut at its budget loses it before what the issue asks for
        steps.append(("torch", [["torch", "--reps", reps, "--anchors", anchors]]))
    return steps


def estimate(steps, n: int, pairs: dict) -> float:
    """Seconds the steps should take: COST per command, or per case where the work grows with N (copy:
    6 cases per ordered pair; ping-pong: 4 flag places per pair; latency: one case per ordered pair;
    mpi: per command, its bandwidth commands per host kind that runs, pinned and managed)."""
    grow = {"copy": 6 * n * (n - 1), "pingpong": 4 * len(pairs["pingpong"]), "latency": len(pairs["latency"])}
    total = 0.0
    for name, cmds in steps:
        if name == "mpi":
            for c in cmds:
                ops = c[c.index("--ops") + 1]
                total += COST["mpi-latency"] if ops == "latency" else 2 * COST["mpi-mbw" if ops == "mbw" else "mpi-bw"]
        else:
            total += COST[name] * grow.get(name, len(cmds))
    return total


# ---------------------------------------------------------------- records


from node_reference_pages import kept_sections, render, scaleout_argv, show  # noqa: E402 - the document

def _runs(store):
    from umscope.store import Store
    if not os.path.exists(store):
        return []
    st = Store(store, readonly=True)
    try:
        return [r["id"] for r in st.runs()]
    finally:
        st.close()


def _records_of_runs(store, run_ids):
    from umscope.store import Store
    st = Store(store, readonly=True)
    try:
        return [r for i in run_ids for r in st.records(i)]
    finally:
        st.close()


def _stop(p, grace=20):
    """Ends a command's process group: SIGTERM first (umscope ends its run, stops its case and prints the
    records it has), SIGKILL after `grace` seconds."""
    try:
        os.killpg(p.pid, signal.SIGTERM)
        return p.communicate(timeout=grace)[0]
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        return p.communicate()[0]


def run_umscope(args, store, timeout):
    """(records, exit status, seconds) of `python3 -m umscope ARGS --json --store STORE`; its progress
    goes to our stderr. At the timeout its process group is stopped; the records its cases had written
    to the store are kept."""
    argv = [PY, "-m", "umscope"] + args
    bench = args[0] in ("bench", "app")  # both print their records with --json and store them
    if bench:
        argv += ["--json", "--store", store]
    before = set(_runs(store)) if bench else set()
    t0 = time.time()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=max(1, timeout))
        rc = p.returncode
    except subprocess.TimeoutExpired:
        out, rc = _stop(p), "timeout"
    try:
        data = json.loads(out) if out.strip() else []
    except ValueError:
        data = []
        sys.stderr.write(f"node_reference: {show(args)}: output is not JSON\n")
    if bench and not data:  # stopped before it printed: what its cases stored
        data = _records_of_runs(store, sorted(set(_runs(store)) - before))
    return data, rc, time.time() - t0


def run_torch(torch_cmd, timeout):
    """The anchors side by side: bench/scaleout.py --quick (OSU, nccl-tests and PyTorch's collectives beside
    umscope's, in the same call), in a child process so that a hang is killed with its group; its markdown."""
    t0 = time.time()
    with tempfile.TemporaryDirectory() as d:
        argv = [PY, str(ROOT / scaleout_argv(torch_cmd, d)[0])] + scaleout_argv(torch_cmd, d)[1:]
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, start_new_session=True)
        try:
            p.communicate(timeout=max(1, timeout))
            rc = p.returncode
        except subprocess.TimeoutExpired:
            _stop(p, 5)
            rc = "timeout"
        md = Path(d) / "scaleout.md"
        res = {"markdown": md.read_text()} if md.exists() else {"error": f"exit status {rc}, no table written"}
    return res, rc, time.time() - t0


def render_records(text: str, kept=None, keep=None, note=None) -> str:
    """The document again from a records file main() wrote: its run line (provenance and plan), the
    fingerprint, each step's line (commands, exit status, time) and the records that follow it; `kept`
    sections (of the document `keep`) replace the ones the run kept."""
    head, fp, results, last, end = None, {}, {}, None, {}
    for line in text.splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        what = d.get("node_reference")
        if what == "run":
            head = d
        elif what == "fingerprint":
            fp = d["fingerprint"]
        elif what == "step":
            last = results[d["step"]] = dict(d["result"], records=[])
        elif what == "end":
            end = d
        elif last is not None:
            last["records"].append(d)
    if head is None:
        raise ValueError("no run line")
    pairs = dict(head["pairs"], **{k: [tuple(x) for x in head["pairs"][k]] for k in ("pingpong", "latency")})
    meta = dict(head["meta"], **({"kept": kept, "keep": keep} if keep else {}),
                **{k: end[k] for k in ("wall", "expected") if k in end})
    meta["notes"] = list(meta.get("notes") or []) + [x for x in ([note] if isinstance(note, str) else note or [])]
    return render(meta, fp, results, head["n"], pairs, head["ranks"])


def _usage(msg):
    sys.stderr.write(f"node_reference: {msg}\n")
    return 2


def multicast_env(environ) -> dict:
    """The multicast-off variables the machine set (and NCCL_NVLS_ENABLE), as seen."""
    return {k: v for k, v in environ.items() if k in MULTICAST_VARS or "NVLS" in k or "MULTICAST" in k}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", help="the machine kind measured, e.g. nvidia-h200-x4 (required unless --render)")
    ap.add_argument("--out", required=True, help="markdown file, rewritten after every step")
    ap.add_argument("--records", help="JSON-lines file of every record (default: OUT with .jsonl)")
    ap.add_argument("--quick", action="store_true", help="one size per table and 5 repetitions")
    ap.add_argument("--reps", type=int, help="timed repetitions of copy, nccl and torch (default 10; quick 5)")
    ap.add_argument("--mpi-reps", type=int, default=MPI_REPS, help=f"timed repetitions of mpi, after one warm-up "
                    f"(default {MPI_REPS}: a 64 MiB repetition takes 1-3 s through host staging)")
    ap.add_argument("--pairs", choices=["all", "star"], help="ping-pong and latency pairs: every pair, or each "
                    "pair from GPU 0 plus one disjoint pair (default: all up to 4 GPUs, star above)")
    ap.add_argument("--no-torch", action="store_true", help="leave out the anchors' comparison (bench/scaleout.py)")
    ap.add_argument("--anchors", default=".anchors", help="folder of the built OSU and nccl-tests (bench/scaleout.py)")
    ap.add_argument("--budget", type=float, default=600, help="seconds for the whole run (default 600): a step "
                    "that would start with less than 5 s left is written as not measured")
    ap.add_argument("--keep", metavar="FILE", help="an earlier document: its sections this script does not make "
                    "are kept at the end, verbatim with their own provenance")
    ap.add_argument("--keep-title", action="append", metavar="TEXT", help="with --keep: only the sections whose "
                    "title starts with TEXT (repeatable)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and the estimate, run nothing")
    ap.add_argument("--note", action="append", metavar="TEXT", help="with --render: a line added under the "
                    "provenance (e.g. what the run was held to), repeatable; printed as given")
    ap.add_argument("--render", metavar="RECORDS", help="measure nothing: write OUT again from the records file of "
                    "an earlier run (its provenance, commands and records as they were)")
    a = ap.parse_args(argv)
    kept = []
    if a.keep_title and not a.keep:
        return _usage("--keep-title needs --keep FILE")
    if a.keep:
        try:
            kept = kept_sections(Path(a.keep).read_text(), a.keep_title)
        except OSError as e:
            return _usage(f"cannot read --keep {a.keep}: {e.strerror}")
    if a.note and not a.render:
        return _usage("--note is for --render only")
    if a.render:
        try:
            text = Path(a.render).read_text()
        except OSError as e:
            return _usage(f"cannot read --render {a.render}: {e.strerror}")
        try:
            doc = render_records(text, kept, a.keep, note=[(
                f"This document was written again from its records file, measuring nothing, by `python3 "
                f"bench/node_reference.py --render {Path(a.render).name}` at umscope commit `{_commit(ROOT)}`; the "
                "figures and their provenance are the run's above.")] + (a.note or []))
        except (ValueError, KeyError) as e:
            return _usage(f"{a.render} is not a records file of this script ({e})")
        Path(a.out).write_text(doc)
        return 0
    if not a.kind:
        return _usage("--kind is required (the machine kind measured, e.g. nvidia-h200-x4)")
    if a.reps is not None and not 1 <= a.reps <= 1000:
        return _usage("--reps must be 1-1000")
    if not 1 <= a.mpi_reps <= 1000:
        return _usage("--mpi-reps must be 1-1000")
    if a.budget <= 0:
        return _usage("--budget must be positive")
    nvls = os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    if nvls != "0":
        return _usage(f"NCCL_NVLS_ENABLE={nvls}: it must be 0 (no NVLink multicast on shared machines)")
    out = Path(a.out)
    records_path = Path(a.records) if a.records else out.with_suffix(".jsonl")
    from umscope import probe
    fp = probe.probe()
    n = len(fp.get("gpus") or [])
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        pairs = pair_plan(n, a.pairs or ("all" if n <= 4 else "star"))
        ranks = rank_plan(n, cpus)
    except ValueError as e:
        return _usage(f"{e} (this machine: {n} GPU(s), {cpus} CPUs)")
    steps = plan(n, cpus, a.quick, a.reps, pairs["mode"], not a.no_torch, a.mpi_reps, a.anchors)
    est = estimate(steps, n, pairs)
    sys.stderr.write(f"node_reference: {n} GPUs, {cpus} CPUs, {len(steps)} steps, expected about {est:.0f} s "
                     f"(budget {a.budget:.0f} s)\n")
    if a.dry_run:
        for name, cmds in steps:
            for c in cmds:
                print(f"{name}: {show(c)}")
        print(f"expected about {est:.0f} s")
        return 0
    meta = {"kind": a.kind, "commit": _commit(ROOT), "env": multicast_env(os.environ),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "argv": "python3 bench/node_reference.py " + " ".join(shlex.quote(x) for x in (argv or sys.argv[1:])),
            "records": records_path.name, "torch": not a.no_torch, "notes": [], "kept": kept,
            "keep": a.keep}
    results = {}
    start = time.time()
    with records_path.open("w") as f:
        f.write(json.dumps({"node_reference": "run", "meta": meta, "n": n, "pairs": pairs, "ranks": ranks}) + "\n")
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store.sqlite")
        for i, (name, cmds) in enumerate(steps):
            left = a.budget - (time.time() - start)
            if left < 5:
                sys.stderr.write(f"node_reference: [{i + 1}/{len(steps)}] {name}: not run, out of time\n")
                results[name] = {"not_run": f"the run's budget ({a.budget:.0f} s) was spent before this step",
                                 "records": []}
                with records_path.open("a") as f:
                    f.write(json.dumps({"node_reference": "step", "step": name,
                                        "result": {"not_run": results[name]["not_run"]}}) + "\n")
                continue
            when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
            recs, rcs, wall, res = [], [], 0.0, {"cmds": cmds, "when": when}
            for c in cmds:
                left = a.budget - (time.time() - start)
                sys.stderr.write(f"node_reference: [{i + 1}/{len(steps)} +{time.time() - start:.0f} s] {name}: "
                                 f"{show(c)}\n")
                if name == "torch":
                    t, rc, w = run_torch(c, left)
                    res["torch"] = t
                else:
                    data, rc, w = run_umscope(c, store, left)
                    if name == "info":
                        fp = data or fp
                    else:
                        recs += data
                rcs.append(rc)
                wall += w
                if rc == "timeout":
                    res["error"] = (f"stopped at the budget ({a.budget:.0f} s) while running `{show(c)}`; the records "
                                    "its finished cases had stored are in the table")
                    break
            res.update(records=recs, rc=", ".join(map(str, rcs)), wall=wall)
            results[name] = res
            with records_path.open("a") as f:
                if name == "info":
                    f.write(json.dumps({"node_reference": "fingerprint", "fingerprint": fp}) + "\n")
                f.write(json.dumps({"node_reference": "step", "step": name,
                                    "result": {k: v for k, v in res.items() if k != "records"}}) + "\n")
                for r in recs:
                    f.write(json.dumps(dict(r, node_reference_step=name)) + "\n")
            out.write_text(render(meta, fp, results, n, pairs, ranks))
            sys.stderr.write(f"node_reference: [{i + 1}/{len(steps)}] {name} done in {wall:.0f} s "
                             f"(exit {res['rc']}, {len(recs)} records)\n")
    meta["wall"], meta["expected"] = round(time.time() - start, 1), round(est)
    with records_path.open("a") as f:
        f.write(json.dumps({"node_reference": "end", "wall": meta["wall"], "expected": meta["expected"]}) + "\n")
    out.write_text(render(meta, fp, results, n, pairs, ranks))
    sys.stderr.write(f"node_reference: wrote {out} in {meta['wall']:.0f} s (expected {est:.0f} s)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
