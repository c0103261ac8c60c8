#!/usr/bin/env python3
"""Third-party unified-memory programs under `umscope profile --um-trace` and `umscope advise --trace` (issue 39,
"advise unmodified programs"): UVMBench's managed-memory Rodinia needle (nw), gaussian and pathfinder, built from their
public sources (github.com/OSU-STARLAB/UVM_benchmark), never copied into this repository.

  build --src DIR --out .thirdparty   (CPU with nvcc) DIR: a clone of UVM_benchmark; binaries and manifest.json
  run --dir .thirdparty [--budget 200] (GPU) each program plain 3 times, traced once, advised; $OUT/thirdparty.*
  readvise RESULTS                     (CPU) advise again on RESULTS' kept traces, beside the same measured runs

Each program is built with its own Makefile (make CUDA_DIR=...; nvcc reads -arch=sm_90 from NVCC_APPEND_FLAGS, so no
Makefile is edited), in three versions where the suite has them: managed (UVM_benchmarks), explicit (the suite's own
cudaMalloc/cudaMemcpy version, non_UVM_benchmarks) and, for pathfinder, its own prefetching build option (-DPREF, the
Makefile's DEF), which CUDA 13 only compiles with CUDA 12's cudaMemPrefetchAsync(ptr, bytes, device, stream) restored
by a forced include (COMPAT below): the program's source is not changed.
"""
import argparse
import gzip
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from umscope import place  # place --managed: the advice applied from outside (AS_ADVISED, its environment)

REPO = "https://github.com/OSU-STARLAB/UVM_benchmark"
COLS = 100000  # pathfinder's columns, as its run script (`./pathfinder 100000 100 20`); rows are scaled
PROGRAMS = {  # work(size) ~ run time; size from work; footprint: managed bytes; max: where the program's int indices end
    "nw": {"dir": "rodinia/nw", "exe": "needle", "args": lambda n: [str(n), "10"], "step": 16, "probe": (1024, 4096),
           "work": lambda n: n * n, "size": lambda w: w ** 0.5, "max": 32768, "bytes": lambda n: 8 * (n + 1) ** 2,
           "users": "./needle 2048 10 (its run script)", "prints_result": False},
    # gaussian in place of UVMBench's srad, whose managed build never runs its kernels (docs/simulator.md): its
    # srad_cuda_1 reads J_cuda[index_n] (one row before the array for the first block row) before it tests by == 0.
    "gaussian": {"dir": "rodinia/gaussian", "exe": "gaussian", "args": lambda n: ["-s", str(n), "-q"], "step": 16,
                 "probe": (512, 2048), "work": lambda n: n ** 3, "size": lambda w: w ** (1 / 3), "max": 46336,
                 "bytes": lambda n: 12 * n * n, "prints_result": False,
                 "users": "./gaussian -f ../../../data/gaussian/matrix256.txt (its run script; its -s N makes the "
                          "N x N matrix in the program, as the script's commented ./gaussian -s 16)"},
    "pathfinder": {"dir": "rodinia/pathfinder", "exe": "pathfinder", "args": lambda r: [str(COLS), str(r), "20"],
                   "step": 20, "probe": (100, 1000), "work": lambda r: r, "size": lambda w: w, "max": 21460,
                   "bytes": lambda r: 4 * COLS * r, "users": "./pathfinder 100000 100 20 > result.txt",
                   "prints_result": True},
}
# (binary, program, tree, make variables, the mode advise names that this build puts into practice, how)
BUILDS = [("nw", "nw", "UVM_benchmarks", [], None, "managed"),
          ("nw-explicit", "nw", "non_UVM_benchmarks", [], None, "explicit"),
          ("gaussian", "gaussian", "UVM_benchmarks", [], None, "managed"),
          ("gaussian-explicit", "gaussian", "non_UVM_benchmarks", [], None, "explicit"),
          ("pathfinder", "pathfinder", "UVM_benchmarks", [], None, "managed"),
          ("pathfinder-prefetch", "pathfinder", "UVM_benchmarks", ["DEF=-DPREF"], "managed-prefetch",
           "its Makefile's prefetch option: make DEF=-DPREF (cudaMemPrefetchAsync of every array before the kernels)"),
          ("pathfinder-explicit", "pathfinder", "non_UVM_benchmarks", [], None, "explicit")]
# CUDA 13 dropped cudaDeviceProp's deviceOverlap and clockRate, which gaussian's PrintDeviceProperties prints; main
# never calls it (its call is commented out), so two names stand in for them at compile time, the source unchanged.
NVCC_DEFINES = {"gaussian": "-DdeviceOverlap=asyncEngineCount -DclockRate=l2CacheSize"}
COMPAT = """// written by umscope's bench/thirdparty.py: CUDA 12's cudaMemPrefetchAsync(ptr, bytes, device, stream), which
// CUDA 13 replaced by a cudaMemLocation form; forced into pathfinder's -DPREF build so its source stays unchanged.
#include <cuda_runtime.h>
static inline cudaError_t cudaMemPrefetchAsync(const void *p, size_t n, int dev, cudaStream_t s) {
  cudaMemLocation loc = {};
  loc.type = dev == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
  loc.id = dev == cudaCpuDeviceId ? 0 : dev;
  return cudaMemPrefetchAsync(p, n, loc, 0, s);
}
"""
SOURCE_CHANGE = "needs a source change"


def die(msg):
    sys.stderr.write(f"thirdparty.py: {msg}\n")
    sys.exit(2)


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        die(message)


def git(src, *args, binary=False):
    r = subprocess.run(["git", "-C", str(src), *args], capture_output=True)
    if r.returncode:
        die(f"--src {src}: git {args[0]} failed: {r.stderr.decode(errors='replace').strip()[:200]}")
    return r.stdout if binary else r.stdout.decode().strip()


def build(a):
    src, out = Path(a.src), Path(a.out)
    if not src.is_dir():
        die(f"--src {src}: no such directory")
    nvcc = shutil.which("nvcc")
    if not nvcc:
        die("nvcc is not on PATH (the CUDA toolkit builds the programs)")
    commit = git(src, "rev-parse", "HEAD")
    paths = sorted({f"{t}/{PROGRAMS[p]['dir']}" for _, p, t, *_ in BUILDS}) + ["common/make.config"]
    listed = git(src, "ls-tree", "-r", "--name-only", "HEAD", "--", *paths).split("\n")
    for p in paths:
        if not any(f == p or f.startswith(p + "/") for f in listed):
            die(f"--src {src}: {p} is not in its commit {commit[:12]} (a clone of {REPO} is expected)")
    cuda = Path(nvcc).resolve().parent.parent
    version = next((x.strip() for x in subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
                    .split("\n") if "release" in x), "nvcc")
    (out / "bin").mkdir(parents=True, exist_ok=True)
    made = []
    with tempfile.TemporaryDirectory() as tmp:
        tar = git(src, "archive", "HEAD", "--", *paths, binary=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True)
        (Path(tmp) / "compat.h").write_text(COMPAT)
        for name, prog, tree, make_vars, mode, how in BUILDS:
            d = Path(tmp) / tree / PROGRAMS[prog]["dir"]
            flags = ("-arch=sm_90" + (f" -include {tmp}/compat.h" if "DEF=-DPREF" in make_vars else "")
                     + (f" {NVCC_DEFINES[prog]}" if prog in NVCC_DEFINES else ""))
            cmd = ["make", "-B", f"CUDA_DIR={cuda}", *make_vars]
            r = subprocess.run(cmd, cwd=d, env=dict(os.environ, NVCC_APPEND_FLAGS=flags), capture_output=True, text=True)
            if r.returncode:
                die(f"{name}: {' '.join(cmd)} failed: {(r.stderr or r.stdout).strip()[-300:]}")
            exe = out / "bin" / name
            shutil.copy2(d / PROGRAMS[prog]["exe"], exe)
            made.append({"binary": f"bin/{name}", "program": prog, "source": f"{tree}/{PROGRAMS[prog]['dir']}",
                         "mode": mode, "how": how, "make": " ".join(cmd[:1] + cmd[2:]),
                         "NVCC_APPEND_FLAGS": flags.replace(tmp, "<build>"),
                         "nvcc_line": r.stdout.strip().split("\n")[-1].replace(tmp, "<build>"),
                         "bytes": exe.stat().st_size, "sha256": hashlib.sha256(exe.read_bytes()).hexdigest()})
    man = {"repository": REPO, "commit": commit, "nvcc": version, "cuda_dir": str(cuda), "built": made}
    (out / "manifest.json").write_text(json.dumps(man, indent=1) + "\n")
    for m in made:
        print(f"{m['binary']:<26} {m['bytes']:>9} B  {m['source']} @ {commit[:12]}  {m['make']}  "
              f"NVCC_APPEND_FLAGS='{m['NVCC_APPEND_FLAGS']}'")
    print(f"built {len(made)} binaries from {REPO} commit {commit} with {version} into {out}")
    return 0


def run_prog(argv, timeout, cwd=None, env=None):
    """Runs argv; its stdout is hashed as it comes (the last 16 MiB kept), its stderr kept in a file. Returns
    {'wall_s', 'rc', 'sha256', 'tail', 'stderr'}: the process's wall time from start to exit; rc 'timeout' where it
    was stopped at the timeout."""
    import threading
    h, tail = hashlib.sha256(), bytearray()

    def read(f):
        nonlocal tail
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            tail = (tail + chunk)[-(16 << 20):]
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        # Its own process group: at the timeout every process it started goes too (`umscope profile`'s program).
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, cwd=cwd, env=env, start_new_session=True)
        reader = threading.Thread(target=read, args=(p.stdout,), daemon=True)
        reader.start()
        try:
            rc = p.wait(timeout=max(1, timeout))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rc = "timeout"
        wall = time.perf_counter() - t0
        reader.join(10)
        err.seek(0)
        stderr = err.read()[-2000:].decode(errors="replace")
    return {"wall_s": wall, "rc": rc, "sha256": h.hexdigest(), "tail": bytes(tail), "stderr": stderr}


# Every timed run (plain, as advised, explicit) under libumtrace with these records alone, so each run's GPU stream
# is timed as advise prices it: from its first GPU work (a kernel, a copy, a migration to the GPU) to the end of
# its last kernel or copy. Whole-process times cannot test advise's predictions (an H200, session 16: every
# predicted saving inside the plain runs' own range). CUPTI's unified-memory records only for migrations to the GPU
# (no per-fault records), the same set for every build.
STREAM_RECORDS, STREAM_KINDS = "kernels,copies,um", "htod"
SKIPPABLE = ("zerocopy", "managed-prefetch", "explicit", "system")  # the modes --skip-modes names


def stream_environment(env: dict, trace_file: str) -> dict:
    """env with libumtrace recording STREAM_RECORDS into trace_file; under place --managed's environment (libumtrace
    already injected for the policy) its records are switched on and its trace file kept."""
    from umscope.profile import tracer
    lib = tracer.tracer_path()
    if not lib:
        return env
    if not env.get("CUDA_INJECTION64_PATH"):
        tracer.inject(env, trace_file, lib)  # as `umscope profile` injects it
    env.update(UMSCOPE_UMTRACE_RECORDS=STREAM_RECORDS, UMSCOPE_UMTRACE_KINDS=STREAM_KINDS)
    return env


def gpu_stream_ms(trace_file):
    """The GPU stream's time in a run's trace (every process of it), ms, as advise measures a traced run's
    (model.trace.gpu_stream: first kernel, copy or migration to the GPU to the end of the last kernel or copy);
    None without a kernel or copy."""
    from umscope.model import trace
    from umscope.profile import tracer
    if not trace_file or not os.path.exists(trace_file):
        return None
    s = trace.gpu_stream(list(tracer.read_process_traces(trace_file)))
    return s["span_ns"] / 1e6 if s else None


def timed_run(argv, timeout, trace_file, env=None):
    """run_prog under stream_environment, with the run's GPU stream time (gpu_stream_ms, None where not traced)."""
    env = stream_environment(dict(os.environ) if env is None else env, str(trace_file))
    r = run_prog(argv, timeout, env=env)
    r["gpu_stream_ms"] = gpu_stream_ms(env.get("UMSCOPE_TRACE_FILE"))
    return r


def classify(advice: dict, builds: list) -> dict:
    """Whether advise's recommendation can be put into practice without changing the program's source: plain
    managed memory (nothing to change), or a build of the program's own that does what it recommends."""
    rec = advice.get("recommended")
    if rec == "managed":
        return {"applicable": True, "how": "no change: the program already uses plain managed memory", "binary": None}
    for b in builds:
        if b["mode"] == rec:
            return {"applicable": True, "how": b["how"], "binary": b["binary"]}
    plain = next((b["binary"] for b in builds if b["mode"] is None and b["how"] == "managed"), None)
    if rec in place.AS_ADVISED and plain:  # the plain build with the policy applied from outside (place --managed)
        pol = place.AS_ADVISED[rec]
        return {"applicable": True, "binary": plain, "managed_policy": pol,
                "how": f"umscope place --managed {pol}: the plain build, its cudaMallocManaged ranges given the policy "
                       "by libumtrace (CUDA's injection; no source change)"}
    hint = (advice.get("hints") or [str(rec)])[0]
    return {"applicable": False, "how": f"{SOURCE_CHANGE}: {hint}", "binary": None}


def _summary(runs, key, unit):
    """{'median_UNIT', 'min_UNIT', 'max_UNIT', 'n'} of runs' `key`, over the runs that exited 0 with one; None if
    none."""
    w = [r[key] for r in runs if r.get("rc") == 0 and r.get(key) is not None]
    if not w:
        return None
    return {f"median_{unit}": statistics.median(w), f"min_{unit}": min(w), f"max_{unit}": max(w), "n": len(w)}


def stats(runs):
    return _summary(runs, "wall_s", "s")


def stream_stats(runs):
    """The runs' GPU stream times (ms)."""
    return _summary(runs, "gpu_stream_ms", "ms")


def pick_size(p, exe, target, cap, timeout):
    lo, hi = p["probe"]
    t = [run_prog([exe, *p["args"](s)], timeout) for s in (lo, hi)]
    if any(r["rc"] != 0 for r in t):
        return None, {"probe": [(s, r["rc"], r["stderr"][-200:]) for s, r in zip((lo, hi), t)]}
    per = max((t[1]["wall_s"] - t[0]["wall_s"]) / (p["work"](hi) - p["work"](lo)), 1e-15)
    size = p["size"](p["work"](hi) + max(target - t[1]["wall_s"], 0) / per)
    size = min(max(size, hi), p["max"])
    while p["bytes"](int(size)) > cap:
        size *= 0.95
    size = int(size) // p["step"] * p["step"]
    return size, {"probe": {str(s): round(r["wall_s"], 3) for s, r in zip((lo, hi), t)}, "per_work_s": per}


def gpu_free_bytes():
    """GPU 0's free memory as umscope's probe reads it (what the suite's own guards use), None without a GPU."""
    from umscope import plans, probe
    return plans.gpu_free(probe.probe()) or None


def gpu_name():
    """GPU 0's name as umscope's probe reads it (what the validated entries name), None without a GPU."""
    from umscope import probe
    gpus = probe.probe().get("gpus") or []
    return gpus[0].get("name") if gpus else None


def umscope(*args):
    return [sys.executable, "-m", "umscope", *args]


def slim_advice(adv: dict) -> dict:
    ev = adv.get("evidence") or {}
    x = adv.get("explicit") or {}
    return {"recommended": adv.get("recommended"), "predicted_gain_vs_managed": adv.get("predicted_gain_vs_managed"),
            "hints": adv.get("hints"), "trace": adv.get("trace"), "model_version": adv.get("model_version"),
            "modelled_ms": {k: v.get("modelled_ms") for k, v in ev.items()},
            "gain_base": adv.get("gain_base"),  # plain managed memory's time the gain is against (measured or not)
            "explicit": {k: x.get(k) for k in ("verdict", "modelled_ms", "wins", "ratio")},
            "validated_error": (adv.get("advise_validated_error") or {}).get("text"), "gpu_work": adv.get("gpu_work")}


def mode_build(mode, name, builds) -> dict:
    """How a mode advise priced runs without a source change: the suite's explicit version, a build of the
    program's own, or the plain build under place --managed (classify's answer for that mode)."""
    if mode == "explicit":
        return {"binary": f"bin/{name}-explicit", "how": "the suite's own cudaMalloc/cudaMemcpy version"}
    return classify({"recommended": mode, "hints": [mode]}, builds)


def lead_rows(r):
    """r['advised'] and r['explicit']: the measured modes the tables lead with (the advised one, explicit copies),
    none where that mode was not measured."""
    for key, mode in (("advised", r["advice"]["recommended"]), ("explicit", "explicit")):
        if mode in r["modes"]:
            r[key] = r["modes"][mode]
        else:
            r.pop(key, None)


def fastest(r) -> dict:
    """The mode measured fastest on the GPU stream among those a user picks instead of explicit copies (plain
    managed memory among them), with its run-to-run band (min-max of its runs), whether the advised mode is it or
    lies within that band, and whether advise's explicit verdict holds (advise_validate.py's rules for umscope's own
    applications)."""
    med = {"managed": stream_stats(r["plain"])}
    med.update({m: c.get("stream_stats") for m, c in r["modes"].items()})
    med = {m: s for m, s in med.items() if s}
    pool = [m for m in med if m != "explicit"]
    if not pool:
        return {}
    best = min(pool, key=lambda m: med[m]["median_ms"])
    out = {"mode": best, "band_ms": [med[best]["min_ms"], med[best]["max_ms"]],
           "measured_ms": {m: s["median_ms"] for m, s in med.items()}}
    rec = r["advice"]["recommended"]
    if rec in med:
        out["advised_hit"] = rec == best or med[rec]["median_ms"] <= med[best]["max_ms"]
        out["advised_lost"] = med[rec]["median_ms"] / med[best]["median_ms"] - 1
        x, wins = med.get("explicit"), (r["advice"].get("explicit") or {}).get("wins")
        if x and wins is not None:
            a = med[rec]
            same = x["min_ms"] <= a["max_ms"] and a["min_ms"] <= x["max_ms"]  # their bands overlap
            out["explicit_right"] = same or wins == (x["median_ms"] < a["median_ms"])
    return out


def predicted(advice, mode) -> dict:
    """advise's predicted gain and saving (ms) of a mode against plain managed memory's time ({} where it priced
    none): its gain_base where it gives one (a traced run's measured stream), else its modelled managed time."""
    ms = advice["modelled_ms"]
    base = (advice.get("gain_base") or {}).get("ms", ms.get("managed"))
    if base is None or not ms.get(mode):
        return {}
    return {"predicted_gain": base / ms[mode], "predicted_saving_ms": base - ms[mode]}


def compare(r, mode, runs):
    """Predicted against measured for a build run in place of the plain one: gain (plain / it) and saving."""
    plain = r["plain_stats"]["median_s"]
    st = stats(runs)
    c = {"mode": mode, "runs": [{k: v for k, v in x.items() if k != "tail"} for x in runs], "stats": st,
         **predicted(r["advice"], mode)}
    if st:
        c["measured_gain"], c["measured_saving_ms"] = plain / st["median_s"], (plain - st["median_s"]) * 1e3
    sm = stream_stats(runs)
    pm = stream_stats(r["plain"])
    if sm and pm:
        c["stream_stats"], c["plain_stream_stats"] = sm, pm
        c["measured_stream_gain"] = pm["median_ms"] / sm["median_ms"] if sm["median_ms"] else None
        c["measured_stream_saving_ms"] = pm["median_ms"] - sm["median_ms"]
    # The plain runs' own range (max - min): a saving smaller than it cannot be told from the runs' scatter by whole-run
    # times (nw on an H200, session 16: predicted 114 ms against a plain range of 854 ms).
    c["plain_range_ms"] = (r["plain_stats"]["max_s"] - r["plain_stats"]["min_s"]) * 1e3
    c["failed_rc"] = [x["rc"] for x in runs if x["rc"] != 0]  # a run that died is said, never left as a bare "-"
    if r["prints_result"]:
        # The plain build's own runs first: where they disagree (pathfinder's plain build reads its managed results
        # without synchronising: 3 outputs in 3 runs on an H200, session 16), no output is "the plain run's".
        ref = {x["sha256"] for x in r["plain"] if x["rc"] == 0}
        if len(ref) != 1:
            c["plain_outputs"] = len(ref)
        else:
            c["same_output_as_plain"] = all(x["sha256"] in ref for x in runs if x["rc"] == 0)
    return c


def run(a):
    d = Path(a.dir)
    try:
        man = json.loads((d / "manifest.json").read_text())
        built = {b["binary"]: b for b in man["built"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        die(f"--dir {d}: no readable manifest.json ({type(e).__name__}); run `thirdparty.py build` first")
    if not a.budget > 0 or not a.target > 0:
        die("--budget and --target must be positive seconds")
    names = a.only.split(",") if a.only else list(PROGRAMS)
    sizes = {}
    for item in filter(None, (a.size or "").split(",")):
        k, _, v = item.partition("=")
        if k not in PROGRAMS or not v.isdigit() or int(v) % PROGRAMS[k]["step"] or not 0 < int(v) <= PROGRAMS[k]["max"]:
            die(f"--size {item}: NAME=N, NAME one of {','.join(PROGRAMS)}, N a multiple of its step up to its limit "
                f"({', '.join(str((n, q['step'], q['max'])) for n, q in PROGRAMS.items())})")
        sizes[k] = int(v)
    for m in filter(None, a.skip_modes.split(",")):
        if m not in SKIPPABLE:
            die(f"--skip-modes {m}: one of {', '.join(SKIPPABLE)}")
    for n in names:
        if n not in PROGRAMS or f"bin/{n}" not in built:
            die(f"--only {n}: not a program built in {d} ({', '.join(p for p in PROGRAMS if f'bin/{p}' in built)})")
    out = Path(a.out or os.environ.get("OUT") or "thirdparty-out")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    left = lambda: a.budget - (time.monotonic() - t0)  # noqa: E731
    log = lambda m: print(f"[{time.monotonic() - t0:6.1f} s] {m}", file=sys.stderr, flush=True)  # noqa: E731
    free = gpu_free_bytes()
    cap = min(a.max_footprint << 30, free // 2 if free else a.max_footprint << 30)
    from umscope import provenance
    res = {"umscope_commit": provenance.commit(), "gpu": gpu_name(), "manifest": man, "budget_s": a.budget,
           "target_s": a.target, "gpu_free_bytes": free, "footprint_cap_bytes": cap, "programs": {}, "left": []}
    tmp = Path(tempfile.mkdtemp(prefix="thirdparty-"))
    for name in names:  # first what every program needs: size, 3 plain runs, the traced run, the advice
        p, exe = PROGRAMS[name], str(d / "bin" / name)
        r = res["programs"][name] = {"users_run": p["users"], "prints_result": p["prints_result"]}
        if left() < 6 * a.target:
            res["left"].append(f"{name}: not run (budget)")
            continue
        size = sizes.get(name)
        if size is None:
            log(f"{name}: probing sizes {p['probe']} for a {a.target} s run")
            size, r["size_chosen"] = pick_size(p, exe, a.target, cap, left())
            if size is None:
                r["error"] = "a probe run failed"
                continue
        args = p["args"](size)
        r.update(size=size, args=args, managed_bytes=p["bytes"](size))
        log(f"{name} {' '.join(args)}: 3 plain runs")
        runs = [timed_run([exe, *args], left(), tmp / f"{name}-plain-{i}.jsonl") for i in range(3)]
        r["plain"] = [{k: v for k, v in x.items() if k != "tail"} for x in runs]
        r["plain_stats"] = stats(runs)
        if not r["plain_stats"] or len(r["plain_stats"]) and r["plain_stats"]["n"] < 3:
            r["error"] = f"plain runs failed: {[x['rc'] for x in runs]} {runs[-1]['stderr'][-300:]}"
            continue
        trace = tmp / f"{name}.jsonl"
        log(f"{name}: umscope profile --um-trace")
        t = run_prog(umscope("profile", "--um-trace", "--keep-trace", str(trace), "--store", str(tmp / "s.sqlite"),
                             "--json", "--", exe, *args), left())
        recs = next((json.loads(x) for x in reversed(t["tail"].split(b"\n")) if x.startswith(b"[")), [])
        run_rec = next((x for x in recs if x.get("op") == "run"), {})
        um = next((x for x in recs if x.get("op") == "um_trace"), {})
        r["traced"] = {"wall_s": t["wall_s"], "rc": t["rc"], "program_wall_s": run_rec.get("median"),
                       "notes": run_rec.get("notes"), "um_totals": um.get("totals"),
                       "trace_complete": um.get("trace_complete"), "dropped": um.get("dropped")}
        if not trace.exists():
            r["error"] = f"profile kept no trace (rc {t['rc']}): {t['stderr'][-300:]}"
            continue
        log(f"{name}: umscope advise --trace")
        adv = subprocess.run(umscope("advise", "--trace", str(trace), "--json"), capture_output=True, text=True,
                             timeout=max(5, left()))
        try:
            r["advice"] = slim_advice(json.loads(adv.stdout))
        except ValueError:
            r["error"] = f"advise failed (rc {adv.returncode}): {adv.stderr.strip()[-300:]}"
            continue
        r["decision"] = classify(r["advice"], [b for b in man["built"] if b["program"] == name])
        with open(trace, "rb") as f, gzip.open(out / f"{name}.trace.jsonl.gz", "wb") as g:
            shutil.copyfileobj(f, g)
        if (out / f"{name}.trace.jsonl.gz").stat().st_size > a.keep_trace_mb << 20:
            (out / f"{name}.trace.jsonl.gz").unlink()
            r["trace_not_kept"] = f"over {a.keep_trace_mb} MiB gzipped"
    for name, r in res["programs"].items():  # then every mode advise priced that runs without a source change
        if "advice" not in r:
            continue
        builds = [b for b in man["built"] if b["program"] == name]
        rec = r["advice"]["recommended"]
        r["modes"] = {}
        for mode in [rec] + [m for m in r["advice"]["modelled_ms"] if m != rec]:  # the advised one first
            if mode in a.skip_modes.split(",") and mode != rec:
                continue
            dec = r["decision"] if mode == rec else mode_build(mode, name, builds)
            binary = dec.get("binary")
            if mode == "managed" or not binary or binary not in built:
                continue  # plain managed memory: the plain runs; a mode no build or policy puts into practice
            if left() < 3.5 * r["plain_stats"]["max_s"]:
                res["left"].append(f"{name}: {binary} as {mode} x3 (budget)")
                continue
            pol = dec.get("managed_policy")
            log(f"{name}: {binary} x3 as {mode}" + (f" under place --managed {pol}" if pol else ""))
            runs, applied = [], []
            for i in range(3):
                env = dict(os.environ)
                if pol:  # place --managed's own environment, without place's start-up in the timed process
                    place.managed_environment(env, pol, str(tmp / f"{name}-managed-{i}.jsonl"))
                # A mode far slower than plain (none that could be fastest) is stopped at 3 plain processes' time
                # plus 5 s: its runs say "timeout".
                runs.append(timed_run([str(d / binary), *r["args"]], min(left(), 3 * r["plain_stats"]["max_s"] + 5),
                                      tmp / f"{name}-{mode}-{i}.jsonl", env))
                if pol:
                    recs, notes = place.managed_records(pol, place.managed_summary(env["UMSCOPE_TRACE_FILE"]))
                    applied.append({"records": [{k: x[k] for k in ("what", "value", "bytes", "refused")} for x in recs],
                                    "notes": notes})
            c = r["modes"][mode] = compare(r, mode, runs)
            c["how"] = dec.get("how")
            if pol:
                c["applied"] = applied
        lead_rows(r)
        r["fastest"] = fastest(r)
    shutil.rmtree(tmp, ignore_errors=True)
    res["wall_s"] = time.monotonic() - t0
    (out / "thirdparty.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    md = render(res)
    (out / "thirdparty.md").write_text(md)
    print(md)
    return 0


_SIGNALS = {int(x) for x in signal.Signals}


def _x(c, k, fmt):
    return "-" if c.get(k) is None else fmt.format(c[k])


def _inside(rng, predicted, measured) -> str:
    """'predicted', 'measured', both joined with 'and', or '': the savings smaller than a range of the plain runs."""
    return " and ".join(w for w, v in (("predicted", predicted), ("measured", measured))
                        if v is not None and abs(v) < rng)


def _vs(c):
    """'predicted G x (S ms) / measured G x (S ms)' of a comparison."""
    failed = c.get("failed_rc") or []
    died = (f"; FAILED in {len(failed)} of {len(c['runs'])} runs (rc "
            + ", ".join(f"{x} = {signal.Signals(-x).name}" if isinstance(x, int) and x < 0 and -x in _SIGNALS else str(x)
                        for x in failed) + ")") if failed else ""
    if c.get("plain_outputs") is not None:
        output = f"; output not compared: the plain build's own runs gave {c['plain_outputs']} different outputs"
    elif c.get("same_output_as_plain") is None:
        output = ""
    else:
        output = "; output " + ("same as plain" if c["same_output_as_plain"] else "DIFFERS from plain")
    rng, pred, meas = c.get("plain_range_ms"), c.get("predicted_saving_ms"), c.get("measured_saving_ms")
    scatter = ""
    if rng is not None:
        below = _inside(rng, pred, meas)
        if below:
            scatter = (f"; {below} saving within the plain runs' own range ({rng:.4g} ms): whole-run "
                       "times of 3 runs cannot tell it")
    stream = ""
    ps, ss = c.get("plain_stream_stats"), c.get("stream_stats")
    if ps and ss:
        srng = ps["max_ms"] - ps["min_ms"]
        stream = (f"; GPU stream measured {_x(c, 'measured_stream_gain', '{:.3f}x')} "
                  f"({c['measured_stream_saving_ms']:.4g} ms: {ss['median_ms']:.4g} [{ss['min_ms']:.4g}-{ss['max_ms']:.4g}] "
                  f"against plain's {ps['median_ms']:.4g} [{ps['min_ms']:.4g}-{ps['max_ms']:.4g}] ms)")
        below = _inside(srng, pred, c["measured_stream_saving_ms"])
        if below:
            stream += f", {below} saving within plain's stream range ({srng:.4g} ms)"
    return (f"predicted {_x(c, 'predicted_gain', '{:.2f}x')} ({_x(c, 'predicted_saving_ms', '{:.4g} ms')})" + stream
            + f"; whole process measured {_x(c, 'measured_gain', '{:.3f}x')} ({_x(c, 'measured_saving_ms', '{:.4g} ms')})"
            + died + scatter + output)


def render(res) -> str:
    m = res["manifest"]
    lines = [f"# Third-party programs advised ({m['repository']} @ {m['commit'][:12]}, {m['nvcc']})", "",
             f"umscope {res['umscope_commit']}; wall times of the process (start to exit), seconds, median "
             "[min-max] of 3; predicted: advise's modelled times of the traced stream (GPU side only); measured: "
             "the GPU stream (first kernel, copy or migration to the GPU to the end of the last kernel or copy, from "
             f"libumtrace's records {STREAM_RECORDS} with migrations {STREAM_KINDS}, in every timed run) and the whole "
             "process.", "",
             "| program | args (managed memory) | plain s | traced s | advice | predicted gain | applied? | measured |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in res["programs"].items():
        st, adv, dec = r.get("plain_stats"), r.get("advice") or {}, r.get("decision") or {}
        plain = f"{st['median_s']:.3f} [{st['min_s']:.3f}-{st['max_s']:.3f}]" if st else "-"
        traced = _x(r.get("traced") or {}, "wall_s", "{:.3f}")
        gain = adv.get("predicted_gain_vs_managed")
        if "advised" in r:
            measured = _vs(r["advised"])
        elif dec.get("applicable"):
            measured = "as the plain run (nothing to change)" if dec.get("binary") is None else "not run (budget)"
        else:
            measured = r.get("error") or (f"not run: {SOURCE_CHANGE}" if dec else "not run (budget)")
        size = f"{' '.join(r.get('args', []))} ({r.get('managed_bytes', 0) / 2**30:.2f} GiB)" if "args" in r else "-"
        rec = adv.get("recommended", "-")
        if adv.get("gpu_work"):  # advise says the traced GPU work did not run as launched: its advice rests on nothing
            rec = f"{rec}, ON A TRACE WHOSE GPU WORK DID NOT RUN AS LAUNCHED ({adv['gpu_work']})"
        lines.append(f"| {name} | {size} | {plain} | {traced} | {rec} | "
                     f"{'-' if gain is None else f'{gain:.2f}x'} | {'yes: ' if dec.get('applicable') else 'no: '}"
                     f"{dec.get('how', '-')} | {measured} |")
    lines += ["", "Every mode advise priced, each run 3 times without a source change where a build or `place --managed` "
              "does it: predicted (advise's modelled time; plain managed memory's is the traced run's measured GPU "
              "stream where the trace has it) against the GPU stream measured, median [min-max] ms. The advice is a "
              "hit where it is the mode measured fastest among those a user picks instead of explicit copies, or its "
              "median lies within that mode's band; the explicit verdict is right where explicit's median is on the "
              "side advise said of the advised mode's, or their bands overlap.", "",
              "| program | mode | predicted ms | measured ms | predicted / measured - 1 | fastest? |",
              "| --- | --- | ---: | ---: | ---: | --- |"]
    for name, r in res["programs"].items():
        f = r.get("fastest") or {}
        if not f:
            continue
        adv = r["advice"]
        base = (adv.get("gain_base") or {}).get("ms")
        for mode in ["managed", *r["modes"]]:
            pred = base if mode == "managed" and base is not None else adv["modelled_ms"].get(mode)
            st = stream_stats(r["plain"]) if mode == "managed" else r["modes"][mode].get("stream_stats")
            mark = ("fastest" if mode == f["mode"] else "") + (" (advised)" if mode == adv["recommended"] else "")
            if st is None:  # every run failed or was stopped: said with what stopped it
                rcs = ", ".join(str(x) for x in r["modes"][mode]["failed_rc"]) or "no GPU stream"
                meas, err = f"not measured ({rcs})", "-"
            else:
                meas = f"{st['median_ms']:.4g} [{st['min_ms']:.4g}-{st['max_ms']:.4g}]"
                err = "-" if pred is None else f"{pred / st['median_ms'] - 1:+.1%}"
            lines.append(f"| {name} | {mode} | {'-' if pred is None else f'{pred:.4g}'} | {meas} | {err} | "
                         f"{mark.strip() or '-'} |")
        if "advised_hit" in f:
            lines.append(f"| {name} | advice {adv['recommended']} | | | | "
                         f"{'HIT' if f['advised_hit'] else 'MISS'}: {f['advised_lost']:+.1%} against {f['mode']}"
                         + ("" if "explicit_right" not in f else
                            f"; explicit verdict {'right' if f['explicit_right'] else 'WRONG'}") + " |")
    lines += ["", "Explicit copies: the suite's own cudaMalloc/cudaMemcpy version (non_UVM_benchmarks, pinned host "
              "buffers), against advise's explicit verdict.", "", "| program | advise's verdict | explicit vs plain |",
              "| --- | --- | --- |"]
    for name, r in res["programs"].items():
        if "advice" in r:
            lines.append(f"| {name} | {r['advice']['explicit']['verdict']} | "
                         f"{_vs(r['explicit']) if 'explicit' in r else 'not run (budget)'} |")
    lines += ["", "Left out: " + ("; ".join(res["left"]) or "nothing") + f". Took {res['wall_s']:.0f} s.", ""]
    return "\n".join(lines)


def readvise(a):
    """advise --trace again on a results folder's kept traces (CPU): the same measured runs against this umscope's
    predictions; the tables to stdout, nothing written."""
    d = Path(a.results)
    try:
        res = json.loads((d / "thirdparty.json").read_text())
    except (OSError, ValueError) as e:
        die(f"{d}: no readable thirdparty.json ({type(e).__name__})")
    from umscope import provenance
    res["measured_at"], res["umscope_commit"] = res.get("umscope_commit"), provenance.commit()
    for name, r in res["programs"].items():
        trace = d / f"{name}.trace.jsonl.gz"
        if "advice" not in r or not trace.exists():
            continue
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "t.jsonl"
            with gzip.open(trace, "rb") as f, open(raw, "wb") as g:
                shutil.copyfileobj(f, g)
            adv = subprocess.run(umscope("advise", "--trace", str(raw), "--json"), capture_output=True, text=True)
        if adv.returncode:
            die(f"{name}: advise failed (rc {adv.returncode}): {adv.stderr.strip()[-300:]}")
        r["advice"] = slim_advice(json.loads(adv.stdout))
        if r.get("modes") is None:  # a results folder from before every mode was measured: its rows as they are
            continue
        for mode, c in r["modes"].items():
            c.pop("predicted_gain", None), c.pop("predicted_saving_ms", None)  # the new advice's, or none
            c.update(predicted(r["advice"], mode))
        lead_rows(r)  # the JSON's copies of the advised and explicit rows are the modes' rows again
        r["fastest"] = fastest(r)
    md = render(res).replace(f"umscope {res['umscope_commit']};", f"measured at umscope {res['measured_at']}, "
                             f"predicted again at {res['umscope_commit']} from the kept traces;", 1)
    print(md)
    if a.write_validated:
        from umscope.model import calibrated
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import _commit
        if not res.get("gpu"):
            die(f"{d}/thirdparty.json names no GPU: --write-validated needs the machine its runs measured")
        path = a.validated_out or _commit.validated_path()
        try:
            data = str(d.resolve().relative_to(Path(__file__).resolve().parent.parent))
        except ValueError:
            data = str(d)
        calibrated.write_validated("advise_trace", validated_entry(res, data), path)
        print(f"wrote the advise_trace entry of {path}", file=sys.stderr)
    return 0


def validated_entry(res: dict, data: str) -> dict:
    """model/validated.json's "advise_trace" entry: advise --trace against the measured runs of each program (the
    mode measured fastest, a hit as fastest() counts it, the advised mode's modelled time and the gain against the
    GPU stream measured, the explicit verdict where explicit ran)."""
    from umscope.model import simulate as sim
    per = {}
    for name, r in res["programs"].items():
        f, adv = r.get("fastest") or {}, r.get("advice") or {}
        rec = adv.get("recommended")
        if "advised_hit" not in f:
            continue
        meas = f["measured_ms"][rec]
        plain = f["measured_ms"]["managed"]
        e = {"advised": rec, "fastest": f["mode"], "hit": f["advised_hit"], "lost": round(f["advised_lost"], 4),
             "time_error": round(adv["modelled_ms"][rec] / meas - 1, 4) if rec != "managed" else None,
             "gain_error": round(adv["predicted_gain_vs_managed"] / (plain / meas) - 1, 4)}
        if "explicit_right" in f:
            e["explicit_right"] = f["explicit_right"]
        per[name] = e
    return {"programs": len(per), "hits": sum(e["hit"] for e in per.values()), "per_program": per,
            "explicit_cases": sum("explicit_right" in e for e in per.values()),
            "explicit_right": sum(bool(e.get("explicit_right")) for e in per.values()),
            "machine": res["gpu"], "measured_at": res.get("measured_at"), "commit": res.get("umscope_commit"),
            "model_version": sim.VERSION, "repository": res["manifest"]["repository"], "data": data,
            "doc": "docs/simulator.md"}


def main(argv=None):
    ap = Parser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=Parser)
    b = sub.add_parser("build", help="build the programs with nvcc (CPU)")
    b.add_argument("--src", required=True, help="a clone of " + REPO)
    b.add_argument("--out", default=".thirdparty")
    r = sub.add_parser("run", help="run, trace and advise them (GPU)")
    r.add_argument("--dir", default=".thirdparty")
    r.add_argument("--out", help="results folder (default $OUT)")
    r.add_argument("--budget", type=float, default=200, help="seconds; what does not fit is listed as left")
    r.add_argument("--target", type=float, default=4, help="seconds a plain run should take (sizes are probed)")
    r.add_argument("--size", help="NAME=N,...: sizes instead of probing (nw, gaussian: N x N; pathfinder: rows)")
    r.add_argument("--only", help="programs, comma-separated (default: " + ",".join(PROGRAMS) + ")")
    r.add_argument("--skip-modes", default="", help="modes not measured unless advised, comma-separated ("
                   + ", ".join(SKIPPABLE) + ")")
    r.add_argument("--max-footprint", type=int, default=16, help="GiB of managed memory at most (and half the free)")
    r.add_argument("--keep-trace-mb", type=int, default=8, help="gzipped traces up to this size go to the results")
    v = sub.add_parser("readvise", help="advise again on a results folder's kept traces (CPU)")
    v.add_argument("results", help="a folder run wrote: thirdparty.json and the gzipped traces")
    v.add_argument("--write-validated", action="store_true",
                   help="write the `advise_trace` entry of model/validated.json (or --validated-out)")
    v.add_argument("--validated-out", help="where --write-validated writes (default: the source tree's "
                   "python/umscope/model/validated.json beside bench/, else the installed package's)")
    a = ap.parse_args(argv)
    return {"build": build, "run": run, "readvise": readvise}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
