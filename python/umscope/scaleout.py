"""Plans of the scale-out families: `nccl` (collectives over every local GPU,
or one rank per GPU under the site's launcher) and `mpi` (point-to-point
between ranks). umscope starts nothing of its own across hosts: a multi-rank
case is the site's launcher line (mpirun, srun, flux) in front of umbench-mpi,
recorded in the case and in every record; rank 0 prints the records, so the
store has one writer."""

import importlib.util
import os
import shlex
import shutil
from pathlib import Path

from umscope import native
from umscope.errors import UsageError
from umscope.native import validate_kind
from umscope.sizes import parse_size_list, size_arg
from umscope.suite import Case

NCCL_OPS = ["allreduce", "allgather", "reducescatter", "broadcast", "alltoall"]
# Where each rank's send and receive buffers live: every kind NCCL's kernels can reach.
NCCL_KINDS = ["device", "managed,first_touch=gpu", "managed,first_touch=cpu",
              "managed,first_touch=cpu,prefetch=gpu", "pinned", "registered", "system"]
NCCL_SIZES = "8,1KiB,64KiB,1MiB,16MiB,256MiB,1GiB"
# --size full: 8 B to 4 GiB, doubling (as all_reduce_perf -b 8 -e 4G -f 2).
NCCL_FULL = ",".join(str(8 << i) for i in range(30))
MPI_OPS = ["bw", "bibw", "latency", "mbw"]
MPI_KINDS = ["system", "pinned", "registered", "managed", "device"]
MPI_SIZES = "8,1KiB,64KiB,1MiB,4MiB"
LAUNCHERS = ("mpirun", "srun", "flux")
# Environment a launcher must carry to remote ranks (mpirun forwards only what -x names).
FORWARD = ("NCCL_NVLS_ENABLE", "UMSCOPE_NCCL")


def add_options(parser):
    """The bench command's scale-out options (one hook line in cli.py)."""
    parser.add_argument("--launcher", choices=LAUNCHERS,
                        help="mpi, nccl: start the case as ranks under this launcher (nccl: one rank per GPU)")
    parser.add_argument("-n", "--ranks", help=f"mpi, nccl with --launcher: number of ranks, 1-{MAX_RANKS} (default 2)")
    parser.add_argument("--ppn", help=f"mpi, nccl with --launcher: ranks per node, 1-{MAX_RANKS}")
    parser.add_argument("--peer-kind", action="append", metavar="SPEC",
                        help="mpi: memory kind of the other side's buffers (default: the same as --kind)")


MAX_RANKS = 1 << 24  # ranks of one launch: more than the largest machines run


def options(args) -> dict:
    """The scale-out options, -n and --ppn checked against their limits (before a store or a run exists)."""
    from umscope import validate
    ranks, ppn = getattr(args, "ranks", None), getattr(args, "ppn", None)
    ranks = None if ranks is None else validate.integer(ranks, "-n", 1, MAX_RANKS)
    ppn = None if ppn is None else validate.integer(ppn, "--ppn", 1, MAX_RANKS)
    return {"launcher": getattr(args, "launcher", None), "ranks": ranks,
            "ppn": ppn, "peer_kinds": getattr(args, "peer_kind", None),
            "check": not getattr(args, "dry_run", False)}


def nccl_library():
    """The NCCL that umbench loads: $UMSCOPE_NCCL, else the nvidia-nccl-cu13 wheel of this Python
    (the one PyTorch uses), else None (umbench then looks for libnccl.so.2 on the library path)."""
    if os.environ.get("UMSCOPE_NCCL"):
        return os.environ["UMSCOPE_NCCL"]
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    for loc in (spec.submodule_search_locations if spec else None) or []:
        for sub in ("nccl/lib", "cu13/lib"):
            lib = Path(loc) / sub / "libnccl.so.2"
            if lib.exists():
                return str(lib)
    return None


def _prepare_env():
    # Multicast stays off on shared machines; the NCCL found here goes to every rank.
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    lib = nccl_library()
    if lib:
        os.environ.setdefault("UMSCOPE_NCCL", lib)


def launcher_argv(launcher, ranks, ppn=None, forward=FORWARD) -> list:
    """The site launcher's command line for `ranks` ranks (`ppn` per node)."""
    if launcher not in LAUNCHERS:
        raise UsageError(f"unknown launcher {launcher!r} (known: {', '.join(LAUNCHERS)})")
    if ranks is None or ranks < 1:
        raise UsageError("-n must be at least 1")
    if ppn is not None and ppn < 1:
        raise UsageError("--ppn must be at least 1")
    if launcher == "mpirun":
        argv = ["mpirun", "-n", str(ranks)]
        if ppn:
            argv += ["--map-by", f"ppr:{ppn}:node"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            argv.append("--allow-run-as-root")  # Open MPI refuses root otherwise (containers, CI)
        if not ppn and ranks > (os.cpu_count() or 1):
            argv.append("--oversubscribe")
        for var in forward:
            if var in os.environ:
                argv += ["-x", var]
        return argv
    if launcher == "srun":
        return ["srun", "-n", str(ranks)] + (["--ntasks-per-node", str(ppn)] if ppn else [])
    return ["flux", "run", "-n", str(ranks)] + (["--tasks-per-node", str(ppn)] if ppn else [])


def _check_launch(launcher):
    if not shutil.which(launcher):
        raise UsageError(f"launcher {launcher!r} is not on PATH")
    native.umbench_mpi_path()  # a clear error where umbench-mpi was not built


def _sizes(sizes, default):
    if not sizes:
        return default
    if sizes == "full":
        return NCCL_FULL
    return ",".join(size_arg(s) for s in parse_size_list(sizes))


def _ops(ops, known, default):
    items = (ops or default).split(",")
    bad = [o for o in items if o not in known]
    if bad:
        raise UsageError(f"unknown operation {bad[0]!r} (known: {', '.join(known)})")
    return ",".join(items)


def nccl_cases(fingerprint, kinds=None, sizes=None, ops=None, launcher=None, ranks=None, ppn=None, check=True,
               **_ignored) -> list:
    _prepare_env()
    params = {"op": _ops(ops, NCCL_OPS, ",".join(NCCL_OPS)), "bytes": _sizes(sizes, NCCL_SIZES)}
    launch = None
    if launcher:
        if check:
            _check_launch(launcher)
        launch = launcher_argv(launcher, 2 if ranks is None else ranks, ppn)
        params.update(launch="mpi", launcher=shlex.join(launch))
    return [Case("nccl", k, dict(params), timeout=900, launch=launch) for k in kinds or NCCL_KINDS]


def mpi_cases(fingerprint, kinds=None, sizes=None, ops=None, launcher=None, ranks=None, ppn=None, peer_kinds=None,
              check=True) -> list:
    launcher = launcher or "mpirun"
    if check:
        _check_launch(launcher)
    _prepare_env()
    launch = launcher_argv(launcher, 2 if ranks is None else ranks, ppn)
    params = {"op": _ops(ops, MPI_OPS, ",".join(MPI_OPS)), "bytes": _sizes(sizes, MPI_SIZES),
              "launcher": shlex.join(launch)}
    if peer_kinds:
        peer_kinds = [validate_kind(k) for k in peer_kinds]
    pairs = [(k, p) for k in kinds or MPI_KINDS for p in peer_kinds or [k]]
    return [Case("mpi", k, dict(params, **({"peer-kind": p} if p != k else {})), timeout=900, launch=launch)
            for k, p in pairs]


def plan(name, fingerprint, kinds=None, sizes=None, ops=None, **scale) -> list:
    if name == "nccl":
        return nccl_cases(fingerprint, kinds, sizes, ops, **scale)
    return mpi_cases(fingerprint, kinds, sizes, ops, **scale)


def default_cases(fingerprint) -> list:
    """The default suite's share: where there are two GPUs or more, one short NCCL case (device buffers,
    all-reduce and all-gather at 1 MiB and 256 MiB: a few seconds). The full families are opt-in."""
    if len(fingerprint.get("gpus") or []) < 2:
        return []
    return nccl_cases(fingerprint, ["device"], "1MiB,256MiB", "allreduce,allgather")
