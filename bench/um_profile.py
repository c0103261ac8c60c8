#!/usr/bin/env python3
"""One program under `umscope profile --um-trace --power`, summarised: the profiler's own summary (run
time, sampler overhead, memory, power, energy), then what CUPTI's unified-memory trace counted (bytes
host-to-device and device-to-host by cause, GPU faults by access type, CPU faults, per allocation) beside
the bytes the program itself says it holds, so a shortfall is visible. Output is what was measured,
nothing derived but the MiB conversions.

    python3 bench/um_profile.py [--power] -- umbench run jacobi2d --mode managed --footprint 1G

`umbench` as the program's first word is the umbench binary umscope runs."""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile

from umscope import native

MIB = 2 ** 20


def profile(cmd, power=False, timeout=900, flags=("--um-trace",)):
    """Runs cmd under `umscope profile FLAGS --json` (default --um-trace); returns (the program's first record or
    None, {op: profile record}, the profiler's summary text (its stderr), the program's status record). At the
    timeout the profiler's whole process group is stopped (nothing it started outlives it) and the status says so."""
    if cmd and cmd[0] == "umbench":
        cmd = [native.umbench_path()] + list(cmd[1:])
    with tempfile.TemporaryDirectory() as d:
        argv = [sys.executable, "-m", "umscope", "profile", *flags, "--json", "--store", f"{d}/s.sqlite",
                "--report", f"{d}/r.html"] + (["--power"] if power else []) + ["--"] + list(cmd)
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return None, {}, "", {"status": "timeout", "reason": f"stopped after {timeout:.0f} s"}
        res = subprocess.CompletedProcess(argv, p.returncode, out, err)
    lines = res.stdout.strip().splitlines()
    app = next((json.loads(x) for x in lines if x.startswith('{"type":"record"')), None)
    status = next((json.loads(x) for x in lines if x.startswith('{"type":"status"')), {})
    prof = {r["op"]: r for r in json.loads(lines[-1])} if lines and lines[-1].startswith("[") else {}
    summary = "\n".join(x for x in res.stderr.replace(cmd[0], "umbench" if cmd[0] == native.umbench_path() else cmd[0])
                         .splitlines() if not x.startswith(("report: ", "profile stored as run")))
    return app, prof, summary, status


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--power", action="store_true", help="also sample GPU power and energy")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        sys.stderr.write("um_profile.py: give the program after --\n")
        return 2
    app, prof, summary, status = profile(cmd, a.power)
    print(summary)
    if app:
        held = app.get("bytes") or app.get("data_bytes")
        print(f"program: {app.get('benchmark')} mode {app.get('mode', '-')}: {held / MIB:.1f} MiB of arrays"
              if held else f"program: {app.get('benchmark')}", end="")
        print(f", median {app['median']:.3f} {app.get('unit', '')}, verified {app.get('verified')}"
              if "median" in app else "")
    else:
        print(f"program: no record ({status.get('status', 'no status')}: {status.get('reason', '')})")
    um = prof.get("um_trace")
    if not um:
        print("unified-memory trace: none recorded")
        return 0 if app else 1
    t, ev = um["totals"], um["events"]
    print(f"unified-memory trace (CUPTI; complete {um['trace_complete']}, dropped {um['dropped']}):")
    for d, what in (("htod", "host-to-device"), ("dtoh", "device-to-host")):
        causes = ", ".join(f"{c} {v / MIB:.1f}" for c, v in sorted(um["by_cause"][d].items()))
        print(f"  {what}: {t[d] / MIB:.1f} MiB in {ev[d]} transfers ({causes or 'none'})")
    acc = ", ".join(f"{k} {v}" for k, v in sorted(um["faults_by_access"].items()))
    print(f"  GPU faults: {t['gpu_fault']} in {ev['gpu_fault']} records ({acc or 'none'}); CPU faults: {t['cpu_fault']}")
    for k in sorted(set(t) - {"htod", "dtoh", "gpu_fault", "cpu_fault"}):
        print(f"  {k}: {t[k]} in {ev.get(k, 0)} records")
    fpm = um["faults_per_migration"]
    print(f"  faults per migration {fpm:.3f}" if fpm is not None else "  faults per migration: no migrations",
          end="")
    print(f"; copies (cudaMemcpy) {um['memcpy_bytes'] / MIB:.1f} MiB; {um['kernels']} kernels, "
          f"{um['kernel_s']:.3f} s in kernels")
    for al in um["allocations"]:
        print(f"  allocation of {al['bytes'] / MIB:.1f} MiB: in {al['htod'] / MIB:.1f} MiB, out {al['dtoh'] / MIB:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
