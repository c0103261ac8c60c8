"""What `umscope profile --um-trace [--counters]` costs a managed-memory application: the same command run plainly,
under `umscope profile --um-trace` (traced) and under `umscope profile --um-trace --counters` (counters: the tracer
and PM sampling in one library, NVML beside), interleaved (plain, traced, counters, plain, ...) --reps times.
Per variant, median and spread of: the program's wall time from its start to its exit (measured by this script for
the plain run, by umscope's own run record under profile); the whole `umscope profile` command's wall time
(umscope's start-up, machine probe, store and HTML report included); the application's own times (umbench's
`total_ms` and `compute_ms`, when the command is umbench). One JSON object on stdout.

    python3 bench/um_trace_overhead.py [--reps 3] [--with-sampler-only] [-- COMMAND ...]
    python3 bench/um_trace_overhead.py --phases [--reps 2] [--variants plain,trace,...] [--exit-mark]
                                       [--phase-env '[VARIANT:]VAR=VALUE ...'] [-- COMMAND ...]

--phases runs the program directly under each injection (the environment `umscope profile` gives it) and prints
the profiler's phase records: where its fixed cost goes (docs/counters.md, "What counting costs").
Default command: umbench's SRAD in managed mode, sized to run about 10 s on an H100 (--footprint, --iterations).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

from umscope import native  # noqa: E402


def app_ms(stdout: str, field="total_ms"):
    """umbench's whole-run time (ms; or another of its times, e.g. compute_ms) from its record, where the command
    is umbench."""
    for line in stdout.splitlines():
        if line.startswith("{") and '"record"' in line:
            r = json.loads(line)
            extra = r.get(field) or (r.get("extra") or {}).get(field)
            if extra:
                return float(extra)
    return None


def one(cmd, how, store):
    if how == "plain":
        full = cmd
    else:
        full = [sys.executable, "-m", "umscope", "profile", "--json", "--store", store, "--report", store + ".html"]
        full += (["--um-trace"] if how in ("traced", "counters") else []) + (["--counters"] if how == "counters" else [])
        full += ["--"] + cmd
    t0 = time.monotonic()
    p = subprocess.run(full, capture_output=True, text=True, timeout=600)
    wall = cmd_wall = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"um_trace_overhead: {how} run failed ({p.returncode}): {p.stderr[-400:]}")
    out = p.stdout
    if how != "plain":
        # The program's own wall time as umscope measured it (its start to its exit, as here for the plain
        # run), not umscope's start-up, probe, store and report around it.
        recs = json.loads(out.strip().splitlines()[-1])
        wall = next(r["median"] for r in recs if r["op"] == "run")
    return wall, cmd_wall, app_ms(out), app_ms(out, "compute_ms"), p.stderr


def app_phases(stdout: str):
    """umbench's own phase times (ms) and its median and first iteration, where the command is umbench: which of
    the program's phases a profiler's cost lands in."""
    for line in stdout.splitlines():
        if line.startswith("{") and '"record"' in line:
            r = json.loads(line)
            x = {**r, **(r.get("extra") or {})}
            out = {k: x[k] for k in ("context_ms", "alloc_ms", "init_ms", "transfer_ms", "compute_ms", "back_ms",
                                     "free_ms", "total_ms") if isinstance(x.get(k), (int, float))}
            if x.get("metric") == "time_per_iteration":
                out.update({f"iteration_{k}": x[k] for k in ("median", "min", "max") if k in x})
                if x.get("samples"):
                    out["iteration_first"] = x["samples"][0]
            return out
    return None


def summary(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    med = statistics.median(xs)
    return {"n": len(xs), "median": round(med, 4), "min": round(min(xs), 4), "max": round(max(xs), 4),
            "spread": round((max(xs) - min(xs)) / med, 4) if med else None}


# ---- --phases: where the profiler's fixed cost goes ---------------------------------------------------------
VARIANTS = ("plain", "trace", "counters", "trace+counters")


def injected_env(variant, tmp, extra_env=()):
    """The environment `umscope profile` gives the program for a variant (the same variables), with the files
    in tmp."""
    from umscope.profile import hwcounters, tracer
    env = dict(os.environ)
    files = {}
    if "trace" in variant:
        files["trace"] = os.path.join(tmp, "trace.jsonl")
        tracer.inject(env, files["trace"], tracer.tracer_path())
    if "counters" in variant:
        files["counters"] = os.path.join(tmp, "counters.jsonl")
        hwcounters.inject(env, files["counters"], ("sample",), tracer_injected="trace" in variant)
    env.update(dict(extra_env))
    return env, files


def phases_of(path, t0):
    """The phase records of one file, as (what, dev, start s after the program's start, duration ms, n)."""
    out, end = [], None
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError:
        return out, end
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("k") == "phase":
            start = e["w0"] / 1e9 - t0 if e["w0"] else None
            out.append({"what": e["what"], "dev": e.get("dev"), "at_s": None if start is None else round(start, 4),
                        "ms": round((e["w1"] - e["w0"]) / 1e6, 3), **({"n": e["n"]} if "n" in e else {}),
                        **({"cpu_ms": round(e["cpu"] / 1e6, 3)} if "cpu" in e else {})})
        elif e.get("k") == "start" and e.get("w"):
            out.append({"what": "start record", "at_s": round(e["w"] / 1e9 - t0, 4)})
        elif e.get("k") == "config" and e.get("profiler"):
            out.append({"what": f"config {e['profiler']}: set up {e.get('setup')}, "
                                f"hw buffer {e.get('hw_buffer')}, max samples {e.get('max_samples')}, "
                                f"metrics {len(e.get('metrics') or [])}"})
        elif e.get("k") == "diag":
            out.append(e)
        elif e.get("k") == "error":
            out.append({"what": f"ERROR {e.get('what')}: {e.get('cupti')}"})
        elif e.get("k") == "dropped":
            out.append({"what": f"DROPPED {e}"})
        elif e.get("k") == "ctx_destroy" and e.get("w"):
            out.append({"what": "context destroy starting", "at_s": round(e["w"] / 1e9 - t0, 4)})
        elif e.get("k") == "end" and e.get("w"):
            end = e["w"] / 1e9 - t0
    return out, end


# A --phase-env pseudo-variable: read NVML's PCIe byte counters beside the program, as `umscope profile --counters`
# does, to see whether those reads slow it (they are not the program's environment).
NVML_PCIE = "BENCH_NVML_PCIE"


def build_exit_mark(folder):
    """--exit-mark: bench/exitmark.c built into folder; the library's path."""
    src = Path(__file__).resolve().parent / "exitmark.c"
    lib = os.path.join(folder, "libexitmark.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib, str(src)], check=True)
    return lib


def one_phased(cmd, variant, extra_env=(), mark=None):
    import tempfile
    extra_env = list(extra_env)
    nvml_on = (NVML_PCIE, "1") in extra_env
    with tempfile.TemporaryDirectory(prefix="umphases-") as tmp:
        env, files = injected_env(variant, tmp, [kv for kv in extra_env if kv[0] != NVML_PCIE])
        import resource
        link = None
        if nvml_on:
            from umscope import probe as probe_mod
            from umscope.profile import hwcounters
            link = hwcounters.NvmlLink([g["pci_bus_id"] for g in probe_mod.probe().get("gpus", [])], 0.1)
            link.start()
        mark_file = os.path.join(tmp, "exitmark")
        if mark:
            env["LD_PRELOAD"] = ":".join(x for x in (mark, env.get("LD_PRELOAD")) if x)
            env["EXITMARK_FILE"] = mark_file
        u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=600)
        t1 = time.time()
        if link is not None:
            link.stop.set()
            link.join()
        u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        res = {"variant": variant, "env": dict(extra_env), "rc": p.returncode, "wall_s": round(t1 - t0, 4),
               **({"nvml_pcie_reads": len(link.points.get(0, []))} if link is not None else {}),
               "app_ms": app_ms(out), "compute_ms": app_ms(out, "compute_ms"), "app_phases_ms": app_phases(out),
               "cpu_user_s": round(u1.ru_utime - u0.ru_utime, 3), "cpu_sys_s": round(u1.ru_stime - u0.ru_stime, 3)}
        if p.returncode != 0:
            res["stderr"] = err[-400:]
        if mark and os.path.exists(mark_file):
            with open(mark_file, encoding="utf-8") as f:
                res["userland_end_to_exit_s"] = round(t1 - int(f.read().split()[-1]) / 1e9, 4)
        for name, path in files.items():
            ph, end = phases_of(path, t0)
            res[name] = ph
            if end is not None:
                res[name + "_end_to_exit_s"] = round(t1 - t0 - end, 4)
            res[name + "_bytes"] = os.path.getsize(path) if os.path.exists(path) else None
        return res


def phases(cmd, reps, variants, extra, mark=None):
    variants = [v for v in VARIANTS if v in variants]
    rows = []
    for r in range(reps):
        for v in variants:
            rows.append(one_phased(cmd, v, mark=mark))
            sys.stderr.write(f"phases rep {r + 1} {v:<15} wall {rows[-1]['wall_s']:.3f} s app {rows[-1]['app_ms']} ms\n")
        for kv in extra:
            variant, _, kv = kv.partition(":") if kv.split("=", 1)[0].count(":") else ("", "", kv)
            rows.append(one_phased(cmd, variant or "trace+counters", [tuple(x.split("=", 1)) for x in kv.split()], mark))
            sys.stderr.write(f"phases rep {r + 1} {kv:<15} wall {rows[-1]['wall_s']:.3f} s app {rows[-1]['app_ms']} ms\n")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--footprint", default="2G")
    ap.add_argument("--iterations", type=int, default=3000)
    ap.add_argument("--store", default="/tmp/um_trace_overhead.sqlite")
    ap.add_argument("--with-sampler-only", action="store_true",
                    help="also run `umscope profile` without --um-trace (the sampler alone)")
    ap.add_argument("--phases", action="store_true",
                    help="run the program directly under each injection (plain, trace, counters, trace+counters) and "
                         "print the profiler's phase records (where its fixed cost goes) instead")
    ap.add_argument("--phase-env", action="append", default=[], metavar="'[VARIANT:]VAR=VALUE ...'",
                    help="with --phases: also run trace+counters (or VARIANT: before them) with these variables set "
                         "(space-separated VAR=VALUE; repeatable)")
    ap.add_argument("--exit-mark", action="store_true",
                    help="with --phases: preload bench/exitmark.c (built with cc) to time the kernel's teardown of "
                         "the process after every library's finalisation (userland_end_to_exit_s)")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="with --phases: which of " + ",".join(VARIANTS) + " to run (comma-separated)")
    ap.add_argument("command", nargs="*")
    a = ap.parse_args(argv)
    if a.reps < 1:
        sys.stderr.write("um_trace_overhead: --reps must be at least 1\n")
        return 2
    cmd = a.command or [native.umbench_path(), "run", "srad", "--mode", "managed", "--footprint", a.footprint,
                        "--iterations", str(a.iterations)]
    if a.phases:
        import tempfile
        with tempfile.TemporaryDirectory(prefix="umexitmark-") as d:
            mark = build_exit_mark(d) if a.exit_mark else None
            print(json.dumps({"command": cmd, "phases": phases(cmd, a.reps, a.variants.split(","), a.phase_env, mark)}))
        return 0
    hows = ("plain", "profile", "traced", "counters") if a.with_sampler_only else ("plain", "traced", "counters")
    res = {h: {"wall_s": [], "command_wall_s": [], "app_ms": [], "compute_ms": []} for h in hows}
    notes = ""
    for r in range(a.reps):
        for how in hows:
            wall, cmd_wall, ms, compute, err = one(cmd, how, a.store)
            res[how]["wall_s"].append(wall)
            res[how]["command_wall_s"].append(cmd_wall)
            res[how]["app_ms"].append(ms)
            res[how]["compute_ms"].append(compute)
            if how == "counters":
                notes = err[-600:]
            sys.stderr.write(f"rep {r + 1} {how:<8} wall {wall:.3f} s command {cmd_wall:.3f} s app {ms} ms "
                             f"compute {compute} ms\n")
    out = {"command": cmd, "reps": a.reps}
    for how, d in res.items():
        out[how] = {k: summary(v) for k, v in d.items()}
    base = out["plain"]["wall_s"]["median"]
    for how in hows[1:]:
        out[f"{how}_overhead_wall"] = round(out[how]["wall_s"]["median"] / base - 1, 4)
        out[f"{how}_overhead_command"] = round(out[how]["command_wall_s"]["median"] / base - 1, 4)
        for k in ("app_ms", "compute_ms"):
            if out["plain"][k] and out[how][k]:
                out[f"{how}_overhead_{k[:-3]}"] = round(out[how][k]["median"] / out["plain"][k]["median"] - 1, 4)
    out["counters_summary_tail"] = notes
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
