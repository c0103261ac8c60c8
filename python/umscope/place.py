"""`umscope place --kind KIND [--rule '>=64M:KIND']... -- python prog.py ...`: runs an unmodified PyTorch
program with its CUDA memory served from a memory kind by libumalloc (native/alloc/umalloc.cpp). A
sitecustomize module put first on PYTHONPATH installs the route before the program's first CUDA allocation
(place_site/umscope_torch_route.py; docs/place.md): PyTorch's caching allocator stays, and the segments it
takes from the driver come from libumalloc through a torch.cuda.MemPool routed device-wide, so PyTorch's
memory statistics, CUDA graphs and torch.compile work and tell the truth. Output and exit status pass
through; the allocator's bookkeeping (segments, bytes, peaks by kind and size class, refusals) and the end
of the program's output are stored as a run.

With the profiler: `umscope profile --um-trace -- umscope place --kind managed -- python prog.py` (the
tracer's environment reaches the program through place; the trace shows the migrations and faults the
placement causes). The other order works too; each command stores its own run.

`umscope place --managed POLICY -- ./app ARGS`: any CUDA program (the runtime linked statically too) with the
managed kind's policy on its own cudaMallocManaged ranges, applied by libumtrace through CUDA's injection
(native/profiler/managed_apply.cpp): prefetch=gpu, advise=preferred:cpu+accessed_by:gpu, advise=read_mostly.
Under `profile --um-trace` (profile outside place) the policy rides in the profile's own injection."""

import argparse
import ctypes
import functools
import glob
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from umscope import native
from umscope.errors import UsageError
from umscope.passthrough import run_program

SITE = Path(__file__).resolve().parent / "place_site"


def library_path():
    """$UMSCOPE_UMALLOC, or libumalloc installed in the package; None if this build has none."""
    env = os.environ.get("UMSCOPE_UMALLOC")
    if env:
        return env if Path(env).exists() else None
    lib = Path(__file__).parent / "lib" / "libumalloc.so"
    return str(lib) if lib.exists() else None


def need_library():
    lib = library_path()
    if lib is None:
        raise UsageError("this umscope was built without libumalloc (it needs the CUDA toolkit at build time); "
                         "reinstall with nvcc available, or set UMSCOPE_UMALLOC")
    return lib


@functools.lru_cache(maxsize=None)
def _lib(path):
    lib = ctypes.CDLL(path)
    lib.umscope_place_configure.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                            ctypes.c_size_t]
    lib.umscope_place_set_kind.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.umscope_place_route.argtypes = [ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    lib.umscope_place_stats_json.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.umscope_place_size_class.argtypes = [ctypes.c_size_t]
    lib.umscope_place_size_class.restype = ctypes.c_size_t
    lib.umscope_place_test_alloc.argtypes = [ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.umscope_place_test_alloc.restype = ctypes.c_void_p
    lib.umscope_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
    return lib


def library(path=None):
    """The allocator library loaded in this process (ctypes): the same instance PyTorch uses when it loaded
    the same path, so set_kind() switches the kind of PyTorch's later allocations."""
    return _lib(path or need_library())


def configure(kind, rules="", allow=-1, path=None):
    """Replaces the library's configuration; UsageError with the parser's reason if bad."""
    err = ctypes.create_string_buffer(1024)
    if library(path).umscope_place_configure(kind.encode(), rules.encode(), allow, err, len(err)) != 0:
        raise UsageError(err.value.decode())


def set_kind(kind, path=None):
    err = ctypes.create_string_buffer(1024)
    if library(path).umscope_place_set_kind(kind.encode(), err, len(err)) != 0:
        raise UsageError(err.value.decode())


def stats(path=None) -> dict:
    lib = library(path)
    n = 1 << 16
    while True:
        buf = ctypes.create_string_buffer(n)
        need = lib.umscope_place_stats_json(buf, n)
        if need < n:
            return json.loads(buf.value.decode())
        n = need + 1


def check_config(kind, rules) -> None:
    """Validates the kind and the rules with the library's own parser, in a child process (the check must
    not configure this process's copy): one clear line and exit 2 on bad input, before anything runs."""
    lib = need_library()
    code = ("import sys, ctypes; L = ctypes.CDLL(sys.argv[1]); e = ctypes.create_string_buffer(1024);"
            "r = L.umscope_place_configure(sys.argv[2].encode(), sys.argv[3].encode(), -1, e, 1024);"
            "sys.stderr.write(e.value.decode()); sys.exit(r)")
    res = subprocess.run([sys.executable, "-c", code, lib, kind, rules], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, UMSCOPE_PLACE_KIND="device", UMSCOPE_PLACE_RULES=""))
    if res.returncode != 0:
        raise UsageError(res.stderr.strip() or f"bad placement {kind!r} {rules!r}")


# Kinds in pageable host memory: a GPU reaches them only through HMM or ATS.
PAGEABLE = ("system", "numa")


def check_reach(kinds, gpus) -> None:
    """Refuses, before the program starts, a kind no GPU here can reach: pageable host memory (system,
    numa:N) where no GPU has cudaDevAttrPageableMemoryAccess (no HMM, no ATS), the memory of a GPU that is not
    here (peer:N); the program would only fail at its first kernel or allocation. gpus: umbench info's list
    (none: nothing to judge by, nothing refused)."""
    names = [native.kind_name(k) for k in kinds]
    pageable = [k for k, n in zip(kinds, names) if n in PAGEABLE]
    if pageable and gpus and not any(g.get("pageable_memory_access") for g in gpus):
        raise UsageError(f"kind '{pageable[0]}' is pageable host memory, which no GPU here can access "
                         "(cudaDevAttrPageableMemoryAccess = 0: no HMM or ATS); use pinned or registered")
    for k, n in zip(kinds, names):
        target = k.partition(",")[0].partition(":")[2]
        if n == "peer" and gpus and target.isdigit() and int(target) >= len(gpus):
            raise UsageError(f"kind '{k}': there is no GPU {target} here ({len(gpus)} GPUs)")


def rule_kinds(rules) -> list:
    """The kinds of '>=64M:KIND' rules."""
    return [r.partition(":")[2] for r in rules or []]


def rules_text(rules) -> str:
    for r in rules or []:
        if ";" in r:
            raise UsageError(f"--rule {r!r}: give one rule per --rule (no ';')")
    return ";".join(rules or [])


def environment(kind, rules="", allow=False, stats_pattern=None, base=None) -> dict:
    """The program's environment: the library, its configuration, and sitecustomize first on PYTHONPATH."""
    env = dict(base if base is not None else os.environ)
    env["UMSCOPE_PLACE_LIB"] = need_library()
    env["UMSCOPE_PLACE_KIND"] = kind
    env["UMSCOPE_PLACE_RULES"] = rules
    env["UMSCOPE_PLACE_ALLOW_OVERSUBSCRIPTION"] = "1" if allow else "0"
    # PyTorch caches the segments; a segment it frees (empty_cache, out-of-memory retries) goes back to the kind.
    env.setdefault("UMSCOPE_PLACE_CACHE", "0")
    if stats_pattern:
        env["UMSCOPE_PLACE_STATS"] = stats_pattern
    env["PYTHONPATH"] = os.pathsep.join([str(SITE)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


# `--managed POLICY`: the program's own cudaMallocManaged memory, through libumtrace (native/profiler/managed_apply.cpp).
# The modes advise names for a traced program that --managed puts into practice without a change to its source
# (managed-prefetch: only the prefetch to the GPU before the kernels; the copy back before the CPU reads is the
# driver's demand migration, as without the advice).
AS_ADVISED = {"managed-prefetch": "prefetch=gpu", "zerocopy": "advise=preferred:cpu+accessed_by:gpu"}


def managed_advice() -> list:
    """The managed kind's advice names, from umbench's own kind registry (native/memory/kinds.cpp, which
    libumtrace's managed_apply.cpp parses alike): 'none' first."""
    from umscope import registry
    return next(p["values"] for p in registry.kinds()["managed"]["policies"] if p["key"] == "advise")


def check_managed(policy: str) -> str:
    """The managed kind's policies that --managed applies (advise=A+B..., prefetch=gpu), checked before anything
    runs: one clear line (exit 2) otherwise. Returns the policy."""
    items = [i for i in (policy or "").split(",") if i]
    if not items:
        raise UsageError("--managed needs a policy, e.g. 'prefetch=gpu' or 'advise=preferred:cpu+accessed_by:gpu'")
    acts = 0
    for item in items:
        key, eq, val = item.partition("=")
        if key == "prefetch" and val in ("gpu", "none"):
            acts += val == "gpu"
        elif key == "prefetch":
            raise UsageError(f"--managed {item!r}: only prefetch=gpu (each range before the first kernel launched "
                             "after its allocation)")
        elif key == "advise" and eq:
            known = managed_advice()
            bad = [a for a in val.split("+") if a not in known]
            if bad:
                raise UsageError(f"--managed advise={bad[0]!r} is not an advice ({', '.join(known[1:])}, "
                                 "joined with '+')")
            acts += any(a != "none" for a in val.split("+"))
        else:
            raise UsageError(f"--managed {item!r}: it takes advise=... and prefetch=gpu (the managed kind's policies)")
    if not acts:
        raise UsageError(f"--managed {policy!r} asks for nothing (no advice, no prefetch)")
    return policy


def managed_environment(env: dict, policy: str, trace_file: str) -> str:
    """Puts libumtrace with the policy into env (the program's environment), with no activity records of its own;
    returns the trace file its lines go to. Under `umscope profile --um-trace` (libumtrace already injected)
    only the policy is added and the profile's trace gets the lines."""
    from umscope.profile import tracer
    lib = tracer.tracer_path()
    if not lib:
        raise UsageError("place --managed needs libumtrace, which this build does not have (CUPTI was not found "
                         "when umscope was built)")
    if env.get("UMSCOPE_COUNTERS_FILE"):
        raise UsageError("place --managed cannot run under profile --counters: the hardware counters and the policy "
                         "both need CUPTI's driver callbacks (profile --um-trace without --counters works)")
    have = env.get("CUDA_INJECTION64_PATH")
    if have and os.path.realpath(have) == os.path.realpath(lib) and env.get("UMSCOPE_TRACE_FILE"):
        env["UMSCOPE_UMTRACE_MANAGED"] = policy
        return env["UMSCOPE_TRACE_FILE"]
    if have:
        raise UsageError(f"place --managed needs CUDA's injection, which CUDA_INJECTION64_PATH already gives to {have}")
    env["CUDA_INJECTION64_PATH"] = lib
    env["UMSCOPE_TRACE_FILE"] = trace_file
    env["UMSCOPE_UMTRACE_RECORDS"] = "none"
    env["UMSCOPE_UMTRACE_MANAGED"] = policy
    return trace_file


def managed_summary(trace_file: str) -> dict:
    """What libumtrace applied, from its lines in trace_file and every FILE.PID beside it (the program's other
    processes): {'policy': [(pid-file, ok, why)], 'actions': {what: {'ranges', 'bytes', 'refused', 'errors'}}}."""
    from umscope.profile import tracer
    out = {"policy": [], "actions": {}}
    for f in tracer.trace_files(trace_file):
        if not os.path.exists(f):  # the policy never loaded: no trace at all
            continue
        for ev in tracer.read_trace_lines(f):
            if ev.get("k") == "managed_policy":
                out["policy"].append((os.path.basename(f), bool(ev.get("ok")), ev.get("why") or ""))
            elif ev.get("k") == "managed_apply":
                a = out["actions"].setdefault(ev.get("what", "?"), {"ranges": 0, "bytes": 0, "refused": 0, "errors": {}})
                if ev.get("ok"):
                    a["ranges"] += 1
                    a["bytes"] += int(ev.get("bytes") or 0)
                else:
                    a["refused"] += 1
                    a["errors"][ev.get("cu", "?")] = a["errors"].get(ev.get("cu", "?"), 0) + 1
    return out


def managed_records(policy: str, summary: dict) -> tuple:
    """(records, notes) of a --managed run: one record per action, and what the run must say (the policy never
    loaded, refused by libumtrace, or actions the driver refused)."""
    recs, notes = [], []
    if not summary["policy"]:
        notes.append(f"--managed {policy}: libumtrace never loaded (the program made no CUDA call, or "
                     "CUDA_INJECTION64_PATH did not reach it): nothing was applied")
    for f, ok, why in summary["policy"]:
        if not ok:
            notes.append(f"--managed {policy}: not applied in {f}: {why}")
    if summary["policy"] and all(ok for _, ok, _ in summary["policy"]) and not summary["actions"]:
        notes.append(f"--managed {policy}: the program allocated no managed memory (cudaMallocManaged) "
                     "before its kernels: nothing to apply")
    for what, a in sorted(summary["actions"].items()):
        recs.append({"type": "record", "benchmark": "place", "op": "managed_apply", "processor": "gpu",
                     "kind": "managed", "policy": policy, "what": what, "metric": "ranges", "unit": "",
                     "n": 1, "median": a["ranges"], "min": a["ranges"], "max": a["ranges"], "value": a["ranges"],
                     "bytes": a["bytes"], "refused": a["refused"], "errors": a["errors"],
                     "verified": "the driver's return code of each call (libumtrace)"})
        if a["refused"]:
            notes.append(f"--managed {policy}: {what} refused by the driver for {a['refused']} range(s): "
                         + ", ".join(f"{k} x{v}" for k, v in sorted(a["errors"].items())))
    return recs, notes


def records_from_stats(all_stats: list) -> list:
    """One record per (process, kind): peak live bytes, with the counters and size classes."""
    recs = []
    for pid, s in all_stats:
        for kind, c in (s.get("kinds") or {}).items():
            name, _, policy = kind.partition(",")
            recs.append({"type": "record", "benchmark": "place", "op": "allocations", "processor": "gpu",
                         "kind": name, "policy": policy, "bytes": c["requested_bytes"], "metric": "peak_live_bytes",
                         "unit": "B", "n": 1, "median": c["peak_live_bytes"], "min": c["peak_live_bytes"],
                         "max": c["peak_live_bytes"], "value": c["peak_live_bytes"], "pid": pid, "counters": c,
                         "verified": "allocator bookkeeping (libumalloc)"})
        recs.append({"type": "record", "benchmark": "place", "op": "allocator", "processor": "gpu", "kind": "all",
                     "policy": "", "metric": "refused",
                     "unit": "", "n": 1, "median": s["total"]["refused"], "min": s["total"]["refused"],
                     "max": s["total"]["refused"], "value": s["total"]["refused"], "pid": pid,
                     **{k: s.get(k) for k in ("rules", "default_kind_phases", "refusals", "gpu_free_at_start",
                                             "allow_oversubscription", "cache", "total")}})
    return recs


def cmd_place(args):
    from umscope import probe
    from umscope.store import Store
    from umscope.suite import Case
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("place needs a command after --, e.g. umscope place --kind managed -- python prog.py")
    if not args.kind and not args.managed:
        raise UsageError("place needs --kind KIND for a PyTorch program's memory (e.g. device, managed, "
                         "'managed,advise=preferred:cpu+accessed_by:gpu') or --managed POLICY for any CUDA "
                         "program's own managed memory (e.g. prefetch=gpu)")
    if args.managed:
        check_managed(args.managed)
    if args.rule and not args.kind:
        raise UsageError("--rule places PyTorch's segments: give --kind with it")
    if args.managed:  # the tracer library and CUDA's injection: refused before anything runs
        managed_environment(dict(os.environ), args.managed, os.devnull)
    rules = rules_text(args.rule)
    if args.report is not None:  # a directory or an unwritable path is refused before the program runs
        from umscope import validate
        validate.output_path(args.report, "--report")
    if args.kind:
        check_config(args.kind, rules)
        kinds = [args.kind] + rule_kinds(args.rule)
        if any(native.kind_name(k) in PAGEABLE + ("peer",) for k in kinds):
            check_reach(kinds, native.native_info().get("gpus") or [])
    store = Store(args.store)  # an unwritable store fails before the program runs
    with tempfile.TemporaryDirectory(prefix="umscope-place-") as d:
        env = (environment(args.kind, rules, args.allow_oversubscription, os.path.join(d, "umalloc-%p.json"))
               if args.kind else dict(os.environ))
        trace = managed_environment(env, args.managed, os.path.join(d, "umtrace.jsonl")) if args.managed else None
        status, out, err, wall = run_program(cmd, env)
        found = []
        for f in sorted(glob.glob(os.path.join(d, "umalloc-*.json"))):
            try:
                found.append((int(Path(f).stem.split("-")[1]), json.loads(Path(f).read_text())))
            except (OSError, ValueError):
                pass
        applied = managed_summary(trace) if trace else None
    notes = []
    if args.kind and not found:
        notes.append("the allocator was never loaded: the program did not start a Python that imports torch "
                     "(only PyTorch programs are placed), or it died before exiting normally")
    recs = records_from_stats(found)
    if applied is not None:
        mrecs, mnotes = managed_records(args.managed, applied)
        recs += mrecs
        notes += mnotes
    kind_spec = args.kind or "managed," + args.managed
    recs.append({"type": "record", "benchmark": "place", "op": "run", "processor": "host",
                 "kind": kind_spec.partition(",")[0], "policy": kind_spec.partition(",")[2], "metric": "wall_time",
                 "unit": "s", "n": 1, "median": wall, "min": wall, "max": wall, "value": wall,
                 "command": " ".join(shlex.quote(c) for c in cmd), "exit_status": status, "kind_spec": args.kind,
                 "managed": args.managed, "rules": args.rule or [], "stdout_tail": out, "stderr_tail": err, "notes": notes})
    fp = probe.probe()
    command = "umscope " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    run_id = store.create_run("place", command, [], {"kind": args.kind, "managed": args.managed,
                                                    "rules": args.rule or [],
                                                    "allow_oversubscription": args.allow_oversubscription},
                              fp, args.label)
    case = Case("place", kind_spec, {"command": " ".join(cmd)})
    reason = "" if status == 0 else f"the program exited with status {status}"
    store.add_case_result(run_id, case, "ok" if status == 0 else "failed", reason, time.time() - wall, wall, recs)
    store.finish_run(run_id, "complete")
    for pid, s in found:
        t = s["total"]
        sys.stderr.write(f"umscope place: pid {pid}: {t['requests']} segments of PyTorch's allocator, "
                         f"{t['requested_bytes']} B requested, peak {t['peak_live_bytes']} B live, "
                         f"{t['refused']} refused\n")
    for r in recs:
        if r["op"] == "managed_apply":
            sys.stderr.write(f"umscope place: --managed {args.managed}: {r['what']} on {r['value']} managed "
                             f"range(s), {r['bytes']} B, {r['refused']} refused by the driver\n")
    for n in notes:
        sys.stderr.write(f"umscope place: note: {n}\n")
    if args.json:
        print(json.dumps(recs))
    sys.stderr.write(f"place stored as run {run_id} in {store.path}\n")
    from umscope.report.html import save_report
    save_report(store, run_id, args.report)  # a report that cannot be written loses nothing: the run is stored
    return status


def add_parser(sub):
    s = sub.add_parser("place", help="run a PyTorch program with its CUDA memory placed in a memory kind, or any "
                                     "CUDA program with a policy on its managed memory")
    s.add_argument("--kind", help="kind of every allocation no rule claims, e.g. managed or "
                                  "'managed,advise=preferred:cpu+accessed_by:gpu'")
    s.add_argument("--managed", metavar="POLICY",
                   help="the program's own cudaMallocManaged memory, any CUDA program (static runtime too): "
                        "'prefetch=gpu' (each range before the first kernel after its allocation), "
                        "'advise=preferred:cpu+accessed_by:gpu', 'advise=read_mostly'; applied through libumtrace "
                        "(CUDA's injection); with or without --kind")
    s.add_argument("--rule", action="append", metavar="RULE",
                   help="size rule, first match wins (repeatable): '>=64M:managed', '<64M:device'")
    s.add_argument("--allow-oversubscription", action="store_true",
                   help="let managed memory exceed the GPU memory free at the start (can hang a shared GPU)")
    s.add_argument("--label", help="a label stored with the run")
    s.add_argument("--store", help="results store (SQLite)")
    s.add_argument("--report", metavar="FILE", help="where to write the HTML report")
    s.add_argument("--json", action="store_true", help="print the records as JSON on stdout after the program")
    s.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    return s
