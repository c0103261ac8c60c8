#!/usr/bin/env python3
"""umscope's scale-out figures beside the public tools' in one call (issue 38), on a node of N >= 2 GPUs:

    python3 bench/scaleout.py [--anchors .anchors] [--out DIR] [--quick] [--no-torch] [--skip mpi,mbw,nccl,host]
        [--mpi-sizes 8,4096,...] [--nccl-ops allgather,...] [--nccl-sizes 1048576,...] [--nccl-launch one|ranks|both]
        [--nccl-alloc] [--nccl-bind core[,socket,none]]

1. MPI point-to-point, host (system) memory, 8 B to 64 MiB: umscope's `mpi` family (bw, bibw, latency) beside
   osu_bw, osu_bibw and osu_latency (OSU 7.2), both under one mpirun line (`-n 2 --bind-to core --map-by core`:
   the same ranks on the same cores); each umscope record lists its ranks' cores.
2. mbw (k pairs at once, k = 1 .. N_mpi/2, 2 N ranks) beside osu_mbw_mr run with 2k ranks, 1 MiB and 16 MiB.
3. NCCL all-reduce, all-gather, reduce-scatter, broadcast, all-to-all, device buffers, 1 MiB to 4 GiB (x4):
   umscope's `nccl` family in one process (ncclCommInitAll) and one rank per GPU (`mpirun -n N`), beside
   nccl-tests 2.19.6 (`*_perf -g N`, `*_perf_mpi` under the same mpirun line; out-of-place busbw) and
   PyTorch's torch.distributed (N processes, 20 calls between two CUDA events after 5 warm-ups).
4. NCCL with host-memory (pinned, registered) and peer-GPU buffers (peer:1: each rank's buffers on the next
   GPU), all-reduce and all-gather at 1 MiB and 64 MiB, as Fusco et al.'s Fig. 18; what NCCL refuses is listed
   with NCCL's own reason.

Ratio: umscope's figure over the anchor's (for latency the anchor's over umscope's), so >= 1 is at parity or
better; the targets are 0.95 (MPI, spread <= 5% from 1 MiB) and 0.98 (NCCL). Spread: (max - min) / median
of umscope's repetitions (the anchors print one figure). Anchors are looked up in --anchors (osu/, and
nccl-tests/ or nccl-tests/bin/); a missing one is skipped and said. Writes scaleout.md and scaleout.jsonl
(every umscope record) to --out (default $OUT, else .), prints the markdown. About 4-5 minutes on 4 x H100.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from umscope import probe, provenance, scaleout
from umscope.sizes import format_size
from umscope.suite import Case, execute

MPI_SIZES = [8, 64, 512, 4096, 32768, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
MBW_SIZES = [1 << 20, 16 << 20]
NCCL_SIZES = [(1 << 20) << (2 * i) for i in range(7)]  # 1 MiB .. 4 GiB, x4
NCCL_OPS = ["allreduce", "allgather", "reducescatter", "broadcast", "alltoall"]
NCCL_TESTS = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
              "broadcast": "broadcast", "alltoall": "alltoall"}
OSU = {"bw": "osu_bw", "bibw": "osu_bibw", "latency": "osu_latency"}
TARGET = {"mpi": 0.95, "nccl": 0.98}
SKIPPED = []  # (what, why)
LOG = []


def log(msg):
    LOG.append(msg)
    print(msg, file=sys.stderr, flush=True)


def sh(argv, timeout=300, env=None):
    """Runs an anchor; its stdout, or None (the reason goes to SKIPPED)."""
    t0 = time.time()
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        SKIPPED.append((shlex.join(argv), f"timed out after {timeout} s"))
        return None
    log(f"  {time.time() - t0:5.1f} s  {shlex.join(argv)}")
    if res.returncode != 0:
        SKIPPED.append((shlex.join(argv), f"exit {res.returncode}: {(res.stderr or res.stdout)[-300:]}"))
        return None
    return res.stdout


BINDS = {"core": ["--bind-to", "core", "--map-by", "core"], "socket": ["--bind-to", "socket"],
         "none": ["--bind-to", "none"]}


def mpirun(n, extra=(), bind="core"):
    """The mpirun line every rank-launched figure here runs under: umscope's ranks and the anchors' alike.
    bind: core (one core per rank, the default), socket or none (umbench-mpi then gives each of its ranks a
    slice of its GPU's local CPUs; the anchors' ranks keep what Open MPI gives them)."""
    argv = ["mpirun", "-n", str(n)] + BINDS[bind]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    for var in ("NCCL_NVLS_ENABLE", "UMSCOPE_NCCL", "LD_LIBRARY_PATH"):
        if var in os.environ:
            argv += ["-x", var]
    return argv + list(extra)


def osu_table(text):
    """{size: value} from an OSU output (the first number after the size)."""
    out = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit():
            out[int(parts[0])] = float(parts[1])
    return out


def repeated(run, reps):
    """OSU prints one figure per size; run() `reps` times gives ({size: median}, {size: (max - min) / median})
    so that its figure has a spread beside umscope's (on 4 x H100 at b7b9039 osu_bibw moved 11% at 1 MiB and
    20% at 64 MiB between two calls). Runs that printed nothing for a size are left out of it."""
    return median_range([run() for _ in range(reps)])


def alternated(runs, ours, theirs):
    """ours() then theirs(), `runs` times: ([ours' results], [theirs' results]) in the order they ran. With one
    tool run once and the other three times, a ratio compares one draw of the host's state with a median (on 4 x
    H100 host-memory MPI moved both tools 15-59% between runs of one call, session 12): alternating gives each
    tool every state the host passes through."""
    a, b = [], []
    for _ in range(runs):
        a.append(ours())
        b.append(theirs())
    return a, b


def pooled(rounds):
    """umscope's records of several runs ([[record]] per run): one per (op, bytes, pairs), its median the median of
    the runs' medians and its spread their range over it (run to run, as OSU's); each run's median kept."""
    by = {}
    for recs in rounds:
        for r in recs:
            by.setdefault((r["op"], r["bytes"], r.get("pairs")), []).append(r)
    out = []
    for rs in by.values():
        meds = [r["median"] for r in rs]
        m = statistics.median(meds)
        out.append(dict(rs[0], median=m, value=m, runs=len(meds), run_medians=meds,
                        spread=(max(meds) - min(meds)) / m if len(meds) > 1 and m else rs[0].get("spread")))
    return out


def median_range(tables):
    """[{size: figure}] of several runs -> ({size: median}, {size: (max - min) / median or None for one run})."""
    med, spread = {}, {}
    for size in sorted({k for t in tables for k in t}):
        vals = [t[size] for t in tables if size in t]
        med[size] = statistics.median(vals)
        spread[size] = (max(vals) - min(vals)) / med[size] if len(vals) > 1 and med[size] else None
    return med, spread


def nccl_tests_table(text):
    """{size: out-of-place busbw} from a nccl-tests output."""
    out = {}
    for line in (text or "").splitlines():
        p = line.split()
        if len(p) >= 8 and p[0].isdigit() and p[1].isdigit():
            out[int(p[0])] = float(p[7])
    return out


def ours_mpi(prefix, ops, sizes, reps, kind="system"):
    """umscope's mpi family under `prefix` (an mpirun line): its records, or [] (the reason to SKIPPED)."""
    params = {"op": ",".join(ops), "bytes": ",".join(str(s) for s in sizes), "launcher": shlex.join(prefix)}
    case = Case("mpi", kind, params, timeout=300, launch=prefix)
    t0 = time.time()
    out = execute(case, {"reps": reps, "warmup": 1})
    log(f"  {time.time() - t0:5.1f} s  umscope mpi {ops} ({shlex.join(prefix)})")
    if out.status != "ok":
        SKIPPED.append((f"umscope mpi {kind} {','.join(ops)}", f"{out.status}: {out.reason}"))
    return out.records


def ours_nccl(kind, ops, sizes, reps, launch=None, alloc=None):
    scaleout._prepare_env()
    params = {"op": ",".join(ops), "bytes": ",".join(str(s) for s in sizes)}
    if alloc:
        params["alloc"] = alloc
    if launch:
        params.update(launch="mpi", launcher=shlex.join(launch))
    case = Case("nccl", kind, params, timeout=600, launch=launch)
    t0 = time.time()
    out = execute(case, {"reps": reps, "warmup": 1})
    log(f"  {time.time() - t0:5.1f} s  umscope nccl {kind}{' alloc ' + alloc if alloc else ''} "
        f"({'mpirun' if launch else 'one process'})")
    if out.status != "ok":
        SKIPPED.append((f"umscope nccl {kind} {'under ' + shlex.join(launch) if launch else 'one process'}",
                        f"{out.status}: {out.reason}"))
    return out.records


# ------------------------------------------------------------------ PyTorch

def _torch_rank(rank, world, init_file, sizes, out_file):
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    res = {}
    for op in NCCL_OPS:
        for size in sizes:
            n = size // 4
            per = n // world
            if op == "allreduce":
                t = torch.ones(n, device="cuda")
                call, factor, used = (lambda: dist.all_reduce(t)), 2 * (world - 1) / world, n * 4
            elif op == "broadcast":
                t = torch.ones(n, device="cuda")
                call, factor, used = (lambda: dist.broadcast(t, 0)), 1.0, n * 4
            elif op == "allgather":
                a, b = torch.ones(per, device="cuda"), torch.empty(per * world, device="cuda")
                call, factor, used = (lambda: dist.all_gather_into_tensor(b, a)), (world - 1) / world, per * world * 4
            elif op == "reducescatter":
                a, b = torch.ones(per * world, device="cuda"), torch.empty(per, device="cuda")
                call, factor, used = (lambda: dist.reduce_scatter_tensor(b, a)), (world - 1) / world, per * world * 4
            else:
                a, b = torch.ones(per * world, device="cuda"), torch.empty(per * world, device="cuda")
                call, factor, used = (lambda: dist.all_to_all_single(b, a)), (world - 1) / world, per * world * 4
            for _ in range(5):
                call()
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(20):
                call()
            e.record()
            e.synchronize()
            ms = torch.tensor([s.elapsed_time(e) / 20], device="cuda")
            dist.all_reduce(ms, op=dist.ReduceOp.MAX)
            res[f"{op} {size}"] = used / (ms.item() * 1e-3) / 1e9 * factor
            del call
            torch.cuda.empty_cache()
    if rank == 0:
        with open(out_file, "w") as f:
            json.dump(res, f)
    dist.destroy_process_group()


def torch_collectives(world, sizes):
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as e:
        SKIPPED.append(("PyTorch collectives", str(e)))
        return {}, None
    t0 = time.time()
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.json")
        try:
            mp.spawn(_torch_rank, args=(world, os.path.join(d, "init"), sizes, out), nprocs=world, join=True)
        except Exception as e:  # a failed rank: say so, keep the rest of the comparison
            SKIPPED.append(("PyTorch collectives", f"{type(e).__name__}: {str(e)[-300:]}"))
            return {}, None
        with open(out) as f:
            res = json.load(f)
    log(f"  {time.time() - t0:5.1f} s  torch.distributed {world} processes")
    return res, f"torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}"


# ------------------------------------------------------------------ tables

def ratio_cell(ratio, target):
    if ratio is None:
        return "—"
    return f"{ratio:.3f}" + ("" if ratio >= target else " **below**")


def spread_text(r):
    return f"{100 * r['spread']:.1f}%" if r and r.get("spread") is not None else "—"


def within_runs(value, runs, lower_is_better=False):
    """Where value lies against the runs' figures ([figure]): 'within' [min, max], else 'better than all' or 'worse
    than all' (a time is better lower); '—' with fewer than two runs. Whether umscope's figure is one OSU itself
    printed around on this host in this call."""
    runs = [v for v in runs if v is not None]
    if len(runs) < 2 or value is None:
        return "—"
    if min(runs) <= value <= max(runs):
        return "within"
    return "better than all" if (value < min(runs)) == lower_is_better else "worse than all"


def rows_mpi(recs, anchors, ops, anchor_spread=None, anchor_runs=None):
    """The MPI table's rows; with anchor_spread ({op: {size: spread}}, OSU run several times) a column of OSU's
    spread before the ratio; with anchor_runs ({op: [{size: figure} per run]}) a last column saying whether
    umscope's figure lies within OSU's own runs (within_runs)."""
    rows = []
    for op in ops:
        for r in sorted((r for r in recs if r["op"] == op), key=lambda r: r["bytes"]):
            a = anchors.get(op, {}).get(r["bytes"])
            if op == "latency":
                ratio = a / r["median"] if a else None
                ours, theirs = f"{r['median']:.3g} µs", f"{a:.3g} µs" if a else "not run"
            else:
                a = a / 1000 if a else None  # OSU prints MB/s (10^6 B/s)
                ratio = r["median"] / a if a else None
                ours, theirs = f"{r['median']:.4g} GB/s", f"{a:.4g} GB/s" if a else "not run"
            row = [op, format_size(r["bytes"]), ours, spread_text(r), theirs, ratio_cell(ratio, TARGET["mpi"])]
            if anchor_spread is not None:
                sp = anchor_spread.get(op, {}).get(r["bytes"])
                row.insert(5, f"{100 * sp:.1f}%" if sp is not None else "—")
            if anchor_runs is not None:
                scale = 1.0 if op == "latency" else 1000.0  # OSU's MB/s against umscope's GB/s
                runs = [t.get(r["bytes"]) / scale if t.get(r["bytes"]) else None for t in anchor_runs.get(op, [])]
                row.append(within_runs(r["median"], runs, lower_is_better=op == "latency"))
            rows.append(row)
    return rows


def md_table(head, rows):
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                     + ["| " + " | ".join(map(str, r)) + " |" for r in rows])


def osu_ranges(sizes):
    """OSU runs every power of two from -m MIN to MAX: one range where the sizes leave few out, else one a size."""
    if not sizes:
        return []
    lo, hi = min(sizes), max(sizes)
    between = hi.bit_length() - lo.bit_length() + 1
    return [(lo, hi)] if between <= 2 * len(sizes) else [(s, s) for s in sorted(sizes)]


def find_anchor(root, *names):
    for n in names:
        p = Path(root) / n
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    SKIPPED.append((names[0], f"not built in {root} (the anchors' folder): its comparison is left out"))
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--anchors", default=".anchors", help="folder of the built anchors (osu/, nccl-tests/)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for scaleout.md and scaleout.jsonl")
    ap.add_argument("--reps", type=int, default=10, help="umscope's repetitions per figure (after one warm-up)")
    ap.add_argument("--quick", action="store_true", help="MPI 8 B, 1 MiB, 64 MiB; NCCL 1 MiB, 64 MiB, 1 GiB")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--skip", default="", help="comma list of parts to leave out: mpi,mbw,nccl,host")
    ap.add_argument("--mpi-sizes", help="comma list of MPI message sizes in bytes (default 8 B .. 64 MiB, x8)")
    ap.add_argument("--nccl-ops", help=f"comma list of collectives (default {','.join(NCCL_OPS)})")
    ap.add_argument("--nccl-sizes", help="comma list of NCCL sizes in bytes (default 1 MiB .. 4 GiB, x4)")
    ap.add_argument("--nccl-launch", choices=["both", "one", "ranks"], default="both",
                    help="NCCL in one process (one), one rank per GPU under mpirun (ranks) or both")
    ap.add_argument("--nccl-alloc", action="store_true",
                    help="also run the one-process NCCL figures over ncclMemAlloc buffers (nccl-tests' allocator)")
    ap.add_argument("--osu-reps", type=int, default=1, help="runs of each OSU command (default 1); with more, "
                    "OSU's figure is their median and its spread is shown beside umscope's")
    ap.add_argument("--alternate", type=int, default=1, help="runs of umscope's MPI family and of OSU, "
                    "alternated (default 1): each tool's figure is the median of its runs, its spread their range")
    ap.add_argument("--nccl-bind", default="core", help="comma list of rank bindings for the NCCL ranks (umscope's "
                    "and nccl-tests' _mpi under the same line): core (default: one core per rank), socket, none; "
                    "the first makes the main table, each further one adds a table of the ranks' figures under it")
    a = ap.parse_args()
    t_start = time.time()
    binds = a.nccl_bind.split(",")
    if not binds or set(binds) - set(BINDS) or len(set(binds)) != len(binds):
        ap.error(f"--nccl-bind takes a comma list of distinct {', '.join(BINDS)}")
    if a.alternate < 1 or a.osu_reps < 1 or (a.alternate > 1 and a.osu_reps > 1):
        ap.error("--alternate and --osu-reps take a count of at least 1, and only one of them more than 1")
    skip = set(filter(None, a.skip.split(",")))
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    if os.environ["NCCL_NVLS_ENABLE"] != "0":
        sys.exit("NCCL_NVLS_ENABLE must be 0 here (no multicast on shared machines)")
    scaleout._prepare_env()
    lib = scaleout.nccl_library()
    if lib:  # nccl-tests and torch load the same libnccl as umscope
        os.environ["LD_LIBRARY_PATH"] = os.path.dirname(lib) + ":" + os.environ.get("LD_LIBRARY_PATH", "")
    fp = probe.probe()  # the MPI part runs without a GPU too
    n = len(fp["gpus"])
    cpus = os.cpu_count() or 1
    mpi_sizes = [8, 1 << 20, 64 << 20] if a.quick else MPI_SIZES
    nccl_sizes = [1 << 20, 64 << 20, 1 << 30] if a.quick else NCCL_SIZES
    try:
        if a.mpi_sizes:
            mpi_sizes = sorted(int(x) for x in a.mpi_sizes.split(","))
        if a.nccl_sizes:
            nccl_sizes = sorted(int(x) for x in a.nccl_sizes.split(","))
    except ValueError:
        ap.error("--mpi-sizes and --nccl-sizes take sizes in bytes, e.g. 8,4096,1048576")
    nccl_ops = a.nccl_ops.split(",") if a.nccl_ops else NCCL_OPS
    if set(nccl_ops) - set(NCCL_OPS):
        ap.error(f"--nccl-ops takes {','.join(NCCL_OPS)}")
    osu_dir, nt_dir = Path(a.anchors) / "osu", Path(a.anchors) / "nccl-tests"
    md = ["# Scale-out beside its anchors\n",
          f"{fp['gpus'][0]['name'] if n else 'no GPU'} x{n}, {cpus} CPUs; commit {native_commit()}; "
          f"NCCL_NVLS_ENABLE={os.environ['NCCL_NVLS_ENABLE']}; NCCL library {lib or 'libnccl.so.2 on the path'}.\n"]
    records = []

    if "mpi" not in skip:
        log("MPI point-to-point, 2 ranks, host memory")
        prefix = mpirun(2)
        ops = ["bw", "bibw", "latency"]
        small = [s for s in mpi_sizes if s <= 8192]
        large = [s for s in mpi_sizes if s > 8192]

        def osu_run(op, exe):
            table = {}
            few = ["-i", "100", "-x", "10"] if op == "latency" else ["-i", "10", "-x", "2"]
            # OSU's own loop counts up to 8 KiB; fewer above (64 MiB windows are 4 GiB)
            for group, flags in ((small, []), (large, few)):
                for lo, hi in osu_ranges(group):
                    table.update(osu_table(sh(prefix + [exe, "-m", f"{lo}:{hi}"] + flags + ["H", "H"])))
            return table
        exes = {op: find_anchor(osu_dir, OSU[op]) for op in ops}
        exes = {op: e for op, e in exes.items() if e}
        anchors, anchor_spread = {}, {}
        if a.alternate > 1:
            ours_runs, osu_runs = alternated(a.alternate, lambda: ours_mpi(prefix, ops, mpi_sizes, a.reps),
                                             lambda: {op: osu_run(op, e) for op, e in exes.items()})
            recs = pooled(ours_runs)
            records += [dict(r, run=i) for i, rr in enumerate(ours_runs) for r in rr]
            for op in exes:
                anchors[op], anchor_spread[op] = median_range([t[op] for t in osu_runs])
            # OSU's own figures of every run, kept beside umscope's records (OSU's units: MB/s, latency µs).
            records += [{"type": "anchor", "tool": "osu", "op": op, "bytes": size, "run": i, "value": v,
                         "unit": "us" if op == "latency" else "MB/s"}
                        for i, t in enumerate(osu_runs) for op in exes for size, v in sorted(t[op].items())]
        else:
            recs = ours_mpi(prefix, ops, mpi_sizes, a.reps)
            records += recs
            for op, exe in exes.items():
                anchors[op], anchor_spread[op] = repeated(lambda: osu_run(op, exe), max(1, a.osu_reps))
        how = (f"; umscope and OSU run alternately {a.alternate} times (umscope's three ops, then OSU's three): each "
               "figure is the median over its runs and its spread the range of the runs over it, for both tools"
               if a.alternate > 1 else
               f", each run {a.osu_reps} times: the median, and the range over it as OSU's spread"
               if a.osu_reps > 1 else "")
        md.append(f"## MPI point-to-point, host memory, 2 ranks\n\nBoth under `{shlex.join(prefix)}`; umscope "
                  f"`mpi --kind system` ({a.reps} repetitions after one warm-up; cores per rank: "
                  f"{recs[0].get('rank_cpus') if recs else '—'}); OSU 7.2 `-m MIN:MAX H H` (its own loop counts up "
                  "to 8 KiB, `-i 10 -x 2` above, latency `-i 100 -x 10`" + how
                  + "). Ratio: umscope / OSU (latency: OSU / umscope); target 0.95.\n")
        several = a.osu_reps > 1 or a.alternate > 1
        head = ["op", "size", "umscope", "spread", "OSU 7.2"] + (["OSU spread"] if several else []) + ["ratio"] \
            + (["within OSU's runs"] if a.alternate > 1 else [])
        md.append(md_table(head, rows_mpi(recs, anchors, ops, anchor_spread if several else None,
                                          {op: [t[op] for t in osu_runs] for op in exes} if a.alternate > 1 else None)))
        if a.alternate > 1:
            md.append("\n\"Within OSU's runs\": whether umscope's figure lies between the lowest and the highest "
                      f"figure OSU printed for that size over its {a.alternate} runs in this call (OSU itself printed "
                      "figures on both sides of it on this host), or is better or worse than all of them.")

    if "mbw" not in skip and cpus >= 4:
        ranks = min(2 * n if n >= 2 else 4, cpus - cpus % 2, 8)
        log(f"mbw, {ranks} ranks")
        prefix = mpirun(ranks)
        recs = ours_mpi(prefix, ["mbw"], MBW_SIZES, a.reps)
        records += recs
        exe = find_anchor(osu_dir, "osu_mbw_mr")
        rows = []
        for r in sorted(recs, key=lambda r: (r["bytes"], r["pairs"])):
            k = r["pairs"]
            anchor = None
            if exe:
                key = ("mbw", k)
                if key not in OSU_CACHE:
                    OSU_CACHE[key] = osu_table(sh(mpirun(2 * k) + [exe, "-m", f"{min(MBW_SIZES)}:{max(MBW_SIZES)}",
                                                                 "-i", "10", "-x", "2"]))
                anchor = OSU_CACHE[key].get(r["bytes"])
                anchor = anchor / 1000 if anchor else None
            rows.append([str(k), format_size(r["bytes"]), f"{r['median']:.4g} GB/s", spread_text(r),
                         f"{anchor:.4g} GB/s" if anchor else "not run",
                         ratio_cell(r["median"] / anchor if anchor else None, TARGET["mpi"])])
        md.append(f"\n## mbw: k pairs at once (processes per node)\n\numscope `mpi --ops mbw` with {ranks} ranks under "
                  f"`{shlex.join(prefix)}` (pair i: ranks i and i + {ranks // 2}); osu_mbw_mr under the same line with "
                  "2k ranks (`-i 10 -x 2`). Total bytes over the slowest pair's time (OSU: over rank 0's).\n")
        md.append(md_table(["pairs", "size", "umscope", "spread", "osu_mbw_mr", "ratio"], rows))

    if "nccl" not in skip and n >= 2:
        log(f"NCCL, {n} GPUs")
        launch = mpirun(n, bind=binds[0])
        one = ours_nccl("device", nccl_ops, nccl_sizes, a.reps) if a.nccl_launch != "ranks" else []
        nt_one = {}
        lo, hi = min(nccl_sizes), max(nccl_sizes)
        flags = ["-b", str(lo), "-e", str(hi), "-f", "4", "-c", "1", "-n", "20", "-w", "5"]

        nt_slowest = {}  # nccl-tests _mpi with -a 3: the slowest rank's time, as umscope's ranks report it

        def ranked(line, slowest=False):
            """umscope's ranks and nccl-tests' _mpi under one mpirun line: (records, {op: {size: busbw}}); with
            slowest, nccl-tests again with -a 3 into nt_slowest (its default -a 1 averages the ranks' times)."""
            recs, nt = ours_nccl("device", nccl_ops, nccl_sizes, a.reps, launch=line), {}
            for op in nccl_ops:
                name = NCCL_TESTS[op]
                exe = find_anchor(nt_dir, f"{name}_perf_mpi", f"bin/{name}_perf_mpi")
                if exe:
                    nt[op] = nccl_tests_table(sh(line + [exe] + flags + ["-g", "1"]))
                    if slowest:
                        nt_slowest[op] = nccl_tests_table(sh(line + [exe] + flags + ["-g", "1", "-a", "3"]))
            return recs, nt

        by_bind = {b: ranked(mpirun(n, bind=b), slowest=b == binds[0]) for b in binds} \
            if a.nccl_launch != "one" else {}
        per_rank, nt_mpi = by_bind.get(binds[0], ([], {}))
        records += one + [r for recs, _ in by_bind.values() for r in recs]
        for op in nccl_ops:
            name = NCCL_TESTS[op]
            exe = find_anchor(nt_dir, f"{name}_perf", f"bin/{name}_perf") if a.nccl_launch != "ranks" else None
            if exe:
                nt_one[op] = nccl_tests_table(sh([exe] + flags + ["-g", str(n)]))
        torch_res, torch_ver = ({}, None) if a.no_torch else torch_collectives(n, nccl_sizes)
        rows = nccl_rows(one, per_rank, nt_one, nt_mpi, nt_slowest, torch_res, nccl_ops, nccl_sizes)
        md.append(f"\n## NCCL collectives, device buffers, busbw (GB/s), {n} GPUs\n\numscope `nccl --kind device` "
                  f"({a.reps} repetitions after one warm-up, each of 20 calls up to 256 MiB, 1 at 4 GiB, behind one "
                  f"untimed call) in one process (ncclCommInitAll) and under `{shlex.join(launch)}`; nccl-tests "
                  f"2.19.6 `-b {lo} -e {hi} -f 4 -n 20 -w 5` with `-g {n}` and `_mpi` under the same line "
                  f"(out-of-place busbw); PyTorch: {torch_ver or 'not run'} ({n} processes, 20 calls between two "
                  "events after 5 warm-ups, the slowest rank). Under mpirun umscope reports the slowest rank's time "
                  "(a collective ends when its last rank does); nccl-tests' `_mpi` by default averages the ranks' "
                  "times (`-a 1`), so it is run again with `-a 3` (the slowest rank's, umscope's definition). "
                  "Ratio target 0.98.\n")
        md.append(md_table(["op", "size", "umscope 1 proc (spread)", "nccl-tests -g", "ratio",
                            f"umscope {n} ranks (spread)", "nccl-tests _mpi", "ratio", "nccl-tests _mpi -a 3",
                            "ratio", "torch", "umscope/torch"], rows))
        if len(by_bind) > 1:
            md.append(f"\n## NCCL, one rank per GPU, by rank binding (busbw GB/s, {n} GPUs)\n\n"
                      + "; ".join(f"{b}: `{shlex.join(mpirun(n, bind=b))}`" for b in by_bind)
                      + ". umscope's ranks and nccl-tests' `_mpi` run under each line in turn; the cores each of "
                      "umscope's ranks ran on are its records' `rank_cpus`. Ratio target 0.98.\n")
            md.append(md_table(["op", "size"] + [x for b in by_bind for x in (f"umscope {b} (spread)",
                                                                              f"nccl-tests {b}", "ratio")],
                               bind_rows(by_bind, nccl_ops, nccl_sizes)))

    if a.nccl_alloc and "nccl" not in skip and n >= 2 and a.nccl_launch != "ranks":
        log("NCCL one process, ncclMemAlloc buffers")
        recs = ours_nccl("device", nccl_ops, nccl_sizes, a.reps, alloc="nccl")
        records += recs
        rows = []
        for op in nccl_ops:
            for size in nccl_sizes:
                m = next((r for r in recs if r["op"] == op and r["bytes"] == size), None)
                o = next((r for r in one if r["op"] == op and r["bytes"] == size), None)
                t1 = nt_one.get(op, {}).get(size)
                rows.append([op, format_size(size), f"{m['median']:.4g} ({spread_text(m)})" if m else "—",
                             f"{o['median']:.4g}" if o else "—", f"{t1:.4g}" if t1 else "—",
                             ratio_cell(m["median"] / t1 if m and t1 else None, TARGET["nccl"])])
        md.append("\n## NCCL one process over ncclMemAlloc buffers (nccl-tests' allocator since NCCL 2.19)\n\n"
                  "umscope `nccl --kind device --alloc nccl` beside the cudaMalloc figure above and nccl-tests `-g`; "
                  "busbw GB/s.\n")
        md.append(md_table(["op", "size", "ncclMemAlloc (spread)", "cudaMalloc", "nccl-tests -g", "ratio"], rows))

    if "host" not in skip and n >= 2:
        log("NCCL over host and peer memory")
        rows = []
        for kind in ("device", "pinned", "registered", "peer:1"):
            recs = ours_nccl(kind, ["allreduce", "allgather"], [1 << 20, 64 << 20], 3)
            records += recs
            for r in recs:
                rows.append([kind, r["op"], format_size(r["bytes"]), f"{r['median']:.4g} GB/s", spread_text(r),
                             r.get("buffers_on") or ""])
            if not recs:
                rows.append([kind, "allreduce, allgather", "—", "skipped", "", SKIPPED[-1][1] if SKIPPED else ""])
        md.append("\n## NCCL over host and peer-GPU memory (Fusco et al. Fig. 18), one process, busbw\n")
        md.append(md_table(["buffers", "op", "size", "busbw", "spread", "note"], rows))

    if SKIPPED:
        md.append("\n## Not run\n\n" + "\n".join(f"- `{w}`: {why}" for w, why in SKIPPED))
    md.append(f"\nWall time {time.time() - t_start:.0f} s.\n")
    text = "\n".join(md)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaleout.md").write_text(text)
    with open(out / "scaleout.jsonl", "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    print(text)


OSU_CACHE = {}


def nccl_rows(one, per_rank, nt_one, nt_mpi, nt_slowest, torch_res, ops, sizes):
    """One row per op and size: umscope in one process beside nccl-tests -g, umscope's ranks beside nccl-tests'
    _mpi (its default, the ranks' mean time) and _mpi -a 3 (the slowest rank's, as umscope's), and PyTorch."""
    rows = []
    for op in ops:
        for size in sizes:
            o = next((r for r in one if r["op"] == op and r["bytes"] == size), None)
            m = next((r for r in per_rank if r["op"] == op and r["bytes"] == size), None)
            t1, tm = nt_one.get(op, {}).get(size), nt_mpi.get(op, {}).get(size)
            ts = nt_slowest.get(op, {}).get(size)
            tt = torch_res.get(f"{op} {size}")
            rows.append([op, format_size(size),
                         f"{o['median']:.4g} ({spread_text(o)})" if o else "—", f"{t1:.4g}" if t1 else "—",
                         ratio_cell(o["median"] / t1 if o and t1 else None, TARGET["nccl"]),
                         f"{m['median']:.4g} ({spread_text(m)})" if m else "—", f"{tm:.4g}" if tm else "—",
                         ratio_cell(m["median"] / tm if m and tm else None, TARGET["nccl"]),
                         f"{ts:.4g}" if ts else "—", ratio_cell(m["median"] / ts if m and ts else None, TARGET["nccl"]),
                         f"{tt:.4g}" if tt else "—", ratio_cell(o["median"] / tt if o and tt else None, 0.98)])
    return rows


def bind_rows(by_bind, ops, sizes):
    """One row per op and size: umscope's ranks (median, spread), nccl-tests' _mpi and their ratio under each
    binding of {binding: (records, {op: {size: busbw}})}."""
    rows = []
    for op in ops:
        for size in sizes:
            row = [op, format_size(size)]
            for recs, nt in by_bind.values():
                m = next((r for r in recs if r["op"] == op and r["bytes"] == size), None)
                t = nt.get(op, {}).get(size)
                row += [f"{m['median']:.4g} ({spread_text(m)})" if m else "—", f"{t:.4g}" if t else "—",
                        ratio_cell(m["median"] / t if m and t else None, TARGET["nccl"])]
            rows.append(row)
    return rows


def native_commit():
    """The commit built into the installed package (issue 32: never the git repository around the script,
    which on a copied tree can be stale)."""
    return provenance.commit()


if __name__ == "__main__":
    main()
