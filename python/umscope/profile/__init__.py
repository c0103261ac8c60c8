"""`umscope profile -- CMD`: runs an unmodified program and samples, for its
whole process tree, resident set size (per NUMA node where there are
several), the GPU memory its processes use (NVML per process; where NVML
sees no processes, as in many containers, the device's used memory minus a
baseline taken before the start, labelled so), GPU utilisation and, with
--power, GPU power and energy (NVML) and host energy (RAPL through powercap,
where readable). Output and exit status of the program pass through. The
sampler measures its own CPU time, so its overhead is reported, not assumed.
"""

import os
import signal
import subprocess
import sys
import threading
import time

from umscope import nvml
from umscope.errors import UsageError
from umscope.profile.analyses import migration_ratios, nvtx_ranges  # noqa: F401
from umscope.profile.output import UNITS, _records, _summary, print_summary, trace_records  # noqa: F401
from umscope.profile.sampler import (PAGE, Sampler, host_energy_j, numa_bytes, parse_period,  # noqa: F401
                                     process_tree, rss_bytes)
from umscope.profile.codes import ACCESS, CAUSES, COUNTERS  # noqa: F401
from umscope.profile.tracer import (OPTIONAL_RECORDS, cupti_path, inject, parse_trace,  # noqa: F401
                                    read_trace_lines, records_off, shift_trace, trace_files, tracer_path)


# The CUPTI activity records `--um-trace` enables (libumtrace's UMSCOPE_UMTRACE_RECORDS): unified memory and NVTX
# ranges always; kernels, copies and allocations only when asked (--kernels, --copies, --allocations; --keep-trace
# takes all three, --uvm-events the allocations). Each of those three is an API-correlated record: CUPTI follows
# every launch or call for it, and a launch-bound program pays it per step. Measured inside one process (libumtrace
# detached against attached, bench/overhead_ab.py --toggle tracer, one H200, docs/tracing.md, session 21): copies
# and allocations together cost Llama generation 1.0483 (95% interval 1.0347-1.0596) and GPT-2 1.0436
# (1.0160-1.0590), over issue 34's 3%; unified memory alone GPT-2 0.9695 (0.8750-1.0068). Kernel records: GPT-2
# generation 1.141 x its plain time per token with them (3 processes, H200, docs/place.md, session 14).
def records_for(kernels=False, copies=False, allocations=False) -> str:
    """UMSCOPE_UMTRACE_RECORDS for profile's options: unified memory and NVTX (the default, "um,nvtx"), and each
    of OPTIONAL_RECORDS asked for."""
    asked = [kind for kind, on in zip(OPTIONAL_RECORDS, (kernels, copies, allocations)) if on]
    return ",".join(["um", *asked, "nvtx"])


def profile(cmd, period=0.1, power=False, gpus=(), numa_nodes=1, um_trace=False, counters=None, uvm_events=False,
            keep_trace=None, kernels=False, copies=False, allocations=False):
    """Runs cmd; returns (exit status as a shell reports it, records, notes). counters: None, or
    {"modes": ("sample",) or ("kernel",), "set": "link" | "memory"} for hardware counters (profile/hwcounters.py).
    uvm_events: with um_trace, libumtrace also reads the UVM driver's event queue (profile/uvm_events.py).
    keep_trace: with um_trace, a path the raw trace (libumtrace's JSON lines, what `simulate --trace` and
    `advise --trace` read) is moved to instead of deleted; every later process's FILE.PID goes beside it.
    kernels, copies, allocations: with um_trace, CUPTI's kernel, copy and allocation records too (records_for);
    none of them: unified memory and NVTX alone. The environment's own UMSCOPE_UMTRACE_RECORDS, where set, stands."""
    if not cmd:
        raise UsageError("profile needs a command after --, e.g. umscope profile -- ./app args")
    notes = []
    env = dict(os.environ)
    trace_file = None
    if um_trace:
        lib = tracer_path()
        if lib is None:
            notes.append("--um-trace: this umscope was built without CUPTI (no libumtrace); profiling goes on "
                         "without unified-memory events")
        else:
            import tempfile
            fd, trace_file = tempfile.mkstemp(prefix="umtrace-", suffix=".jsonl")
            os.close(fd)
            inject(env, trace_file, lib)
            if uvm_events:  # the driver's own event queue beside CUPTI (native/profiler/uvm_events.cpp)
                env["UMSCOPE_UMTRACE_UVM_EVENTS"] = "1"
            if not env.get("UMSCOPE_UMTRACE_RECORDS"):
                env["UMSCOPE_UMTRACE_RECORDS"] = records_for(kernels, copies, allocations)
    hw = None
    if counters:
        from umscope.profile import hwcounters
        hw = hwcounters.Session(counters["modes"], counters.get("set", "link"), gpus, period)
        hw.prepare(env, tracer_injected=trace_file is not None)
    baseline = {}
    for i, bus in enumerate(gpus):
        m = nvml.memory(bus)
        if m:
            baseline[i] = m["used"]
    # The sampler thread starts first and makes every query once (its first calls cost far more than
    # the later ones: tens of ms in the H100 machine's sandbox), then waits for the program.
    sampler = Sampler(None, period, list(gpus), power, numa_nodes, baseline)
    sampler.start()
    sampler.ready.wait(30)
    if hw:
        hw.start()
    start = time.time()
    try:
        proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE)
    except (FileNotFoundError, PermissionError) as err:
        sampler.stop.set()
        sampler.go.set()
        sampler.join()
        what = "command not found" if isinstance(err, FileNotFoundError) else "permission denied"
        if hw:
            hw.finish()
        raise UsageError(f"{what}: {cmd[0]}") from None
    sampler.root = proc.pid
    # The program's stderr passes through as it comes; its end is kept for the report (what a failure said).
    from umscope.passthrough import OUTPUT_KEEP, tee as _tee
    err_tail = bytearray()
    tee = threading.Thread(target=_tee, args=(proc.stderr, sys.stderr.buffer, err_tail), daemon=True)
    tee.start()
    sampler.go.set()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the program; we keep the samples
    maxrss = None
    try:
        # wait4 gives the kernel's high-water mark of the program's RSS (ru_maxrss: the largest process of
        # its tree that was waited for), exact where the sampler may miss a short peak.
        _, st, usage = os.wait4(proc.pid, 0)
        rc = proc.returncode = os.waitstatus_to_exitcode(st)
        maxrss = usage.ru_maxrss * 1024
    except ChildProcessError:
        rc = proc.wait()
    finally:
        ended = time.time()  # the program's end: what follows is umscope's own work
        signal.signal(signal.SIGINT, old)
        sampler.stop.set()
        if hw:
            hw.stop()  # NVML's last reading runs while the sampler stops and the trace is read
        sampler.join()
    wall = ended - start
    tee.join(5)  # a grandchild that keeps stderr open does not hold the profile up
    stderr_tail = err_tail[-OUTPUT_KEEP:].decode(errors="replace")
    status = rc if rc >= 0 else 128 - rc
    energy = {}
    if power:
        e1 = sampler._energy()
        energy = {k: e1[k] - sampler.energy0[k] for k in e1 if k in sampler.energy0}
    if trace_file:
        tr = parse_trace(trace_file, gpus)
        if tr and tr.get("wall_start"):
            shift_trace(tr, tr["wall_start"] / 1e9 - start)
        if not tr:
            notes.append("--um-trace: the program wrote no trace (it may not use CUDA, or CUPTI could not attach)")
        for n in (tr or {}).get("notes", []):  # a kind of CUPTI record left out: its counts are not zeros
            off = records_off(n)
            notes.append(f"--um-trace: {off} not recorded (the default; `--{off}` records them, at a cost per "
                         f"{'launch' if off == 'kernels' else 'call'})" if off else f"--um-trace: {n}")
        for err in (tr or {}).get("errors", []):
            notes.append(f"--um-trace: CUPTI refused to {err.get('what')}: {err.get('cupti')}")
        if tr and not tr.get("complete"):
            notes.append("--um-trace: the trace ended early (the program died); what was flushed is kept")
        if tr and tr.get("gpu_work"):
            notes.append(f"--um-trace: GPU WORK NOT AS LAUNCHED: {tr['gpu_work']}")
        extra = trace_records(tr)
        for f in trace_files(trace_file):
            if keep_trace and tr:
                _keep(f, str(keep_trace) + f[len(trace_file):], notes)
            else:
                os.unlink(f)
    else:
        extra = []
    if hw:
        counter_records, counter_notes = hw.finish(start)
        extra += counter_records
        notes += counter_notes
    records = _records(cmd, sampler, wall, rc, status, energy, notes, stderr_tail) + extra
    if maxrss:
        records.insert(0, {"type": "record", "benchmark": "profile", "op": "rss_peak", "processor": "host",
                           "metric": "memory", "unit": "bytes", "n": 1, "median": maxrss, "min": maxrss,
                           "max": maxrss, "value": maxrss,
                           "source": "kernel high-water mark (wait4 ru_maxrss) of the largest process"})
    return status, records, notes


def _keep(src, dst, notes):
    """Moves a trace file to where --keep-trace asked (a copy across file systems), saying so in the notes."""
    import shutil
    try:
        shutil.move(src, dst)
        notes.append(f"--keep-trace: the trace is kept in {dst}")
    except OSError as e:
        notes.append(f"--keep-trace: could not keep the trace in {dst}: {e.strerror or e}")
        if os.path.exists(src):
            os.unlink(src)
