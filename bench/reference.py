#!/usr/bin/env python3
"""Re-measures a machine's reference figures and writes them as a markdown document in which every section
carries its own provenance line: the umscope commit, the machine kind, the exact command(s), the date, the
GPU and driver, the exit status and the wall time. Each section is the output of existing bench/*.py
scripts or umscope commands, verbatim; nothing is derived or edited by hand.

    python3 bench/reference.py --commit SHA --kind nvidia-h100-x1 --out docs/reference-h100.md
                               [--part 1|2 | --only NAME,...] [--base FILE] [--budget 140]

The sections are split in two parts, each sized to run in about 140 s on one H100 (sizes below are chosen
for that, and each section says so): `--part 1` then `--part 2 --base <part 1's document>` regenerate the
whole document in two calls of a GPU machine; with neither, every section runs in one call (about 5 min).
--base keeps the sections of an earlier document (with their own provenance lines) that this run does not
measure. --commit is required (a copy of the tree on a GPU machine may have no .git): pass
`git rev-parse --short HEAD` of the tree you copied, with `-dirty` if it had changes. A section whose
command does not finish within the remaining budget is written as "Not measured: out of time", never left
out silently; its processes are killed with it (each command runs in its own process group)."""
import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
MARK = "<!-- reference.py section: {} -->"
MARK_RE = re.compile(r"^<!-- reference\.py section: ([a-z0-9-]+) -->$", re.M)


def _bench(script, *args):
    return [PY, str(ROOT / "bench" / script), *args]


QV_PROFILE = [_bench("um_profile.py", "--power", "--", "umbench", "run", "qv", "--qubits", "27", "--mode", m,
                     "--init", "cpu") for m in ("explicit", "managed", "managed-prefetch")]
APPS_EVERY_MODE = ["bfs", "needle", "pathfinder", "hotspot", "srad", "triad", "conv2d", "jacobi2d", "mvt", "gesummv",
                   "syr2k", "sgemm", "himeno"]

# (name, part, title, commands, timeout s, what the sizes are and what is derived)
SECTIONS = [
    ("info", 1, "Machine", [["umscope", "info"]], 30, ""),
    ("bandwidth", 1, "Bandwidth: GPU streams, copy engines, zero copy, contention",
     [_bench("bandwidth.py", "--reps", "10")], 60,
     "10 timed repetitions per figure (the script's default is 30). The bound and efficiency columns are "
     "derived by the script: median / the bound it names."),
    ("um", 1, "Unified-memory dynamics",
     [_bench("um.py", "--size", "1G", "--available", "2G", "--fault-bytes", "256M")], 75,
     "1 GiB buffers (first touch, migration), 256 MiB for the fault costs and 2 GiB left free by the ballast "
     "for oversubscription, so that the section fits its budget; the script's defaults are 4 GiB, 1 GiB and "
     "8 GiB. The ratio in the first-touch paragraph is computed by the script from the two figures before it."),
    ("profile-jacobi2d", 1, "Profiler on an application: jacobi2d, managed",
     [_bench("um_profile.py", "--power", "--", "umbench", "run", "jacobi2d", "--mode", "managed", "--footprint",
             "1G", "--iterations", "10")], 40,
     "1 GiB of arrays (two 512 MiB grids), initialised by the CPU, so the GPU's first sweep migrates them."),
    ("gemm-placement", 1, "GEMM placement",
     [_bench("gemm_placement.py", "--n", "4096", "--precision", "fp32")], 45,
     "n = 4096 (64 MiB per matrix) in FP32, five GEMMs per placement, each under "
     "`umscope profile --um-trace` (through bench/um_profile.py)."),
    ("profile-qv", 1, "Profiler on QV: explicit, managed, managed-prefetch", QV_PROFILE, 45,
     "27 qubits (a 2 GiB complex128 state) initialised by the CPU, one run per mode."),
    ("qv", 1, "Quantum Volume", [_bench("qv.py", "--qubits", "28", "--modes", "explicit,managed,managed-prefetch")],
     40, "28 qubits (a 4 GiB complex128 state); the floor and 'of floor' columns are derived by the script: "
     "reading and writing the state once per gate at the GPU-memory bound it names."),
    ("latency", 2, "Latency and ping-pong",
     [_bench("latency.py", "--reps", "5", "--exchanges", "2000", "--increments", "20000")], 70,
     "5 repetitions per figure, 2000 ping-pong exchanges per repetition and 20000 concurrent increments per "
     "agent for the coherence check (the script's defaults: 7, 10000, 100000), so that the CPU-GPU round trip "
     "on managed memory (about a millisecond each) fits the budget."),
    ("apps", 2, "Applications, explicit mode, 1 GiB", [_bench("apps.py", "--footprint", "1G", "--gemm-n", "8192", "--apps", ",".join(APPS_EVERY_MODE))],
     60, "Each application first checked against its CPU reference at 16 MiB, then run at 1 GiB of arrays "
     "(the script's default is 4 GiB); GEMM at n = 8192 in every precision (the script's defaults are 12288 "
     "and 16384). Floors and 'of floor' are derived by the script: least bytes at the GPU-memory bound or "
     "FLOPs at the peak it names."),
    ("apps-modes", 2, "Applications in every mode, 64 MiB",
     [["umscope", "app", "run", a, "--mode", "all", "--footprint", "64M", "--no-progress"] for a in APPS_EVERY_MODE],
     60, "64 MiB of arrays per application (the default suite uses 64-256 MiB), every mode; every mode's "
     "checksum is compared with explicit's by the suite (`cross-mode-checksum`)."),
]
NAMES = [s[0] for s in SECTIONS]


def _argv(cmd):
    if cmd[0] == "umbench":
        from umscope import native
        return [native.umbench_path()] + cmd[1:]
    if cmd[0] == "umscope":
        return [PY, "-m", "umscope"] + cmd[1:]
    return cmd


def _run(cmd, timeout):
    """(output, exit status or 'timeout', seconds). On timeout the command's whole process group is killed."""
    t0 = time.time()
    p = subprocess.Popen(_argv(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=max(1, timeout))
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        rc = "timeout"
    if rc != 0:
        out += ("\n" + err.strip()) if err.strip() else ""
    return out.strip("\n").rstrip(), rc, time.time() - t0


def show(cmd) -> str:
    """The command as the document prints it: python3 for this interpreter, paths relative to the tree."""
    return " ".join(shlex.quote("python3" if c == PY else c) for c in cmd).replace(str(ROOT) + "/", "")


def _gpu_line():
    try:
        from umscope import probe
        fp = probe.probe()
        g = (fp.get("gpus") or [{}])[0]
        return f"{g.get('name', 'no GPU')}, driver {fp.get('cuda', {}).get('driver')}"
    except Exception as e:  # the document says why instead of guessing
        return f"GPU unknown ({e})"


def split_sections(text: str) -> dict:
    """{section name: its text (marker line included)} of a document this script wrote."""
    marks = list(MARK_RE.finditer(text))
    return {m.group(1): text[m.start():(marks[i + 1].start() if i + 1 < len(marks) else len(text))].rstrip() + "\n"
            for i, m in enumerate(marks)}


def measured(text: str) -> bool:
    return "\nProvenance:" in text


def header(gpu, kind, parts_run):
    return "\n".join([
        f"# Reference measurements: {gpu} (`{kind}`)", "",
        "Written by `bench/reference.py`; every section below carries its own provenance line (umscope commit, "
        "machine kind, command, date, exit status, wall time) and the command's output verbatim: nothing is "
        "edited by hand, and figures a script derives (bounds, efficiencies, floors, ratios) are labelled so by "
        "the section's note. These are measurements of that machine, for comparison only; umscope never copies "
        "them into results. Sizes are chosen so that each of the two parts runs in about 140 s on one H100; "
        "each section names its sizes and the script's defaults. Regenerate with "
        f"`python3 bench/reference.py --commit SHA --kind {kind} --part 1 --out FILE` and then "
        f"`python3 bench/reference.py --commit SHA --kind {kind} --part 2 --base FILE --out FILE`"
        + (f" (this file's last run: {parts_run})." if parts_run else "."), ""])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", required=True, help="the umscope commit measured (git rev-parse --short HEAD)")
    ap.add_argument("--kind", required=True, help="the machine kind, e.g. nvidia-h100-x1")
    ap.add_argument("--out", help="markdown file to write, after every section (default: stdout at the end)")
    sel = ap.add_mutually_exclusive_group()
    sel.add_argument("--part", choices=["1", "2"], help="the sections of one part (each about 140 s on an H100)")
    sel.add_argument("--only", help="comma-separated section names: " + ", ".join(NAMES))
    ap.add_argument("--base", help="an earlier document of this script: its sections not measured now are kept")
    ap.add_argument("--budget", type=float, default=140, help="seconds for the selected sections (default 140)")
    a = ap.parse_args()
    only = set(a.only.split(",")) if a.only else None
    if only and only - set(NAMES):
        sys.stderr.write(f"reference.py: unknown section(s) {', '.join(sorted(only - set(NAMES)))}\n")
        return 2
    if not re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?", a.commit):
        sys.stderr.write(f"reference.py: --commit {a.commit!r} is not a git commit hash\n")
        return 2
    if a.budget <= 0:
        sys.stderr.write("reference.py: --budget must be positive\n")
        return 2
    base = {}
    if a.base:
        try:
            base = split_sections(Path(a.base).read_text())
        except OSError as e:
            sys.stderr.write(f"reference.py: cannot read --base {a.base}: {e.strerror}\n")
            return 2
    chosen = [s for s in SECTIONS if (only is None or s[0] in only) and (a.part is None or str(s[1]) == a.part)]
    gpu = _gpu_line()
    done = {}
    start = time.time()

    def write():
        body = []
        for name, part, title, cmds, _, _ in SECTIONS:
            if name in done:
                body.append(done[name])
            elif name in base and measured(base[name]):
                body.append(base[name])
            else:
                body.append("\n".join([MARK.format(name), f"## {title}", "",
                                       f"Not measured yet: `bench/reference.py --part {part}` measures it with "
                                       + "; ".join(f"`{show(c)}`" for c in cmds) + ".", ""]))
        what = (f"part {a.part}" if a.part else f"sections {','.join(sorted(only))}" if only else "every section")
        doc = header(gpu, a.kind, f"{what}, {time.strftime('%Y-%m-%d', time.gmtime())}") + "\n" + "\n".join(body)
        if a.out:
            Path(a.out).write_text(doc)
        return doc

    for name, part, title, cmds, timeout, note in chosen:
        lines = [MARK.format(name), f"## {title}", ""]
        outs, rcs, wall = [], [], 0.0
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        for cmd in cmds:
            left = a.budget - (time.time() - start)
            if left < 5:
                outs.append(f"$ {show(cmd)}\nNot measured: out of time (the budget was spent on the commands above).")
                rcs.append("not run")
                continue
            sys.stderr.write(f"reference: {name}: {show(cmd)}\n")
            out, rc, w = _run(cmd, min(timeout, left))
            wall += w
            rcs.append(rc)
            outs.append((f"$ {show(cmd)}\n" if len(cmds) > 1 else "") + out +
                        ("\nNot measured to the end: out of time (killed)." if rc == "timeout" else ""))
        if all(rc == "not run" for rc in rcs):
            lines += ["Not measured: out of time (the budget was spent on the sections above).", ""]
        else:
            status = ", ".join(str(r) for r in rcs) if len(set(map(str, rcs))) > 1 else str(rcs[0])
            lines += [f"Provenance: umscope commit `{a.commit}`, machine kind `{a.kind}`, command "
                      + "; ".join(f"`{show(c)}`" for c in cmds) + f", {when}, {gpu}; exit status {status}, "
                      f"{wall:.0f} s.", ""]
            if note:
                lines += [note, ""]
            lines += ["```", "\n".join(outs), "```", ""]
        done[name] = "\n".join(lines)
        if name in base and measured(base[name]) and not measured(done[name]):
            del done[name]  # out of time now: the earlier measurement, with its own provenance, stays
        write()
    doc = write()
    if a.out:
        sys.stderr.write(f"reference: wrote {a.out} in {time.time() - start:.0f} s\n")
    else:
        print(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
