#!/usr/bin/env python3
"""Re-measures the reference figures on a GPU machine and writes them as a
markdown document with their provenance attached to every section: the
umscope commit, the machine kind, the GPU and driver, the date, the exact
command and its wall time. Output is the commands' own output, verbatim.

    python3 bench/reference.py --commit SHA --kind nvidia-h100-x1 [--out docs/reference-h100-measured.md]
                               [--only NAME,...] [--budget 450]

--commit is required (the GPU machine's copy of the tree has no .git): pass
`git rev-parse HEAD` of the tree you copied, with `-dirty` if it had changes.
Sections whose command does not finish within the remaining budget are
written as "not measured: out of time", never left out silently."""
import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

# (name, title, command, timeout s). Sizes chosen so the whole set fits in 8 minutes on one H100.
SECTIONS = [
    ("info", "Machine", ["umscope", "info"], 60),
    ("stream", "GPU streams, device memory, 4 GiB",
     ["umbench", "run", "gpu-stream", "--kind", "device", "--bytes", "4G", "--reps", "30", "--warmup", "2"], 120),
    ("copy", "Copy engines, pinned <-> device, 256 MiB and 1 GiB",
     ["umbench", "run", "copy", "--kind", "pinned", "--dst", "device", "--bytes", "256M,1G", "--direction", "bidir",
      "--reps", "20"], 120),
    ("zero-copy", "SM read and write of pinned host memory, 1 GiB",
     ["umbench", "run", "gpu-stream", "--kind", "pinned", "--bytes", "1G", "--ops", "read,write", "--reps", "10"],
     120),
    ("latency", "Latency and ping-pong", [PY, str(ROOT / "bench" / "latency.py")], 240),
    ("qv", "Quantum Volume, 28 qubits", [PY, str(ROOT / "bench" / "qv.py"), "--qubits", "28"], 180),
]


def _run(cmd, timeout):
    env = dict(os.environ)
    if cmd[0] == "umbench":
        from umscope import native
        cmd = [native.umbench_path()] + cmd[1:]
    elif cmd[0] == "umscope":
        cmd = [PY, "-m", "umscope"] + cmd[1:]
    t0 = time.time()
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        out, rc = res.stdout + (("\n" + res.stderr.strip()) if res.returncode else ""), res.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout"
    return out.rstrip(), rc, time.time() - t0


def _gpu_line():
    try:
        from umscope import probe
        fp = probe.probe()
        g = (fp.get("gpus") or [{}])[0]
        return f"{g.get('name', 'no GPU')}, driver {fp.get('cuda', {}).get('driver')}"
    except Exception as e:  # the document says why instead of guessing
        return f"GPU unknown ({e})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", required=True, help="the umscope commit measured (git rev-parse HEAD)")
    ap.add_argument("--kind", required=True, help="the machine kind, e.g. nvidia-h100-x1")
    ap.add_argument("--out", help="markdown file to write (default: stdout)")
    ap.add_argument("--only", help="comma-separated section names: " + ", ".join(s[0] for s in SECTIONS))
    ap.add_argument("--budget", type=float, default=450, help="seconds for all sections together (default 450)")
    a = ap.parse_args()
    only = set(a.only.split(",")) if a.only else None
    if only and only - {s[0] for s in SECTIONS}:
        sys.stderr.write(f"reference.py: unknown section(s) {', '.join(sorted(only - {s[0] for s in SECTIONS}))}\n")
        return 2
    gpu = _gpu_line()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [f"# Reference measurements: {gpu}", "",
             f"Written by `bench/reference.py` on {when}: umscope commit `{a.commit}`, machine kind `{a.kind}`. "
             "Each section gives the exact command, its wall time and its output verbatim; nothing here is "
             "derived or edited by hand.", ""]
    start = time.time()
    for name, title, cmd, timeout in SECTIONS:
        if only and name not in only:
            continue
        left = a.budget - (time.time() - start)
        text = " ".join(shlex.quote(c if c != PY else "python3") for c in cmd).replace(str(ROOT) + "/", "")
        lines += [f"## {title} — `{text}`", ""]
        if left < 10:
            lines += ["Not measured: out of time (the budget was spent on the sections above).", ""]
            continue
        sys.stderr.write(f"reference: {name} ...\n")
        out, rc, wall = _run(cmd, min(timeout, left))
        lines += [f"Provenance: umscope `{a.commit}`, `{a.kind}`, {gpu}, {when}; exit status {rc}, "
                  f"{wall:.0f} s.", "", "```", out, "```", ""]
    doc = "\n".join(lines)
    if a.out:
        Path(a.out).write_text(doc)
        sys.stderr.write(f"reference: wrote {a.out} in {time.time() - start:.0f} s\n")
    else:
        print(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
