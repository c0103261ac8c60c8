#!/usr/bin/env python3
"""The allocation interfaces the GH200 studies compare (Schieffer et al. Table 1, Fusco et al. Table 2) as
umscope's memory kinds async (cudaMallocAsync pools), vmm (cuMemCreate + cuMemMap) and hostalloc (cudaHostAlloc
flags), measured beside device and pinned in the same call: the GPU stream family (read, write, copy, triad
from the GPU's SMs) and the copy family (each kind to and from device memory, by the copy engines and by SMs),
each record verified against its expected values. Issue 40's check: each new kind passes the stream and copy
families' verification on the H100.

    python3 bench/new_kinds.py [--out DIR] [--stream-size 1G] [--copy-size 256M] [--reps 10]

Writes the store (new_kinds.sqlite), the records (new_kinds.json) and the table (new_kinds.md) under --out
($OUT by default) and prints the table last: median GB/s and spread ((max - min) / median) per kind, each
record's `verified`, and every skip with its reason. About 1-2 minutes on one H100.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from _commit import commit  # noqa: E402

BASELINE = ["device", "pinned"]
NEW = ["async", "async,pool=host", "vmm", "vmm,location=host", "vmm,location=host:0", "hostalloc",
       "hostalloc,flags=mapped+wc+portable"]
STREAM_OPS = ["read", "write", "copy", "triad"]
REPORTS = tempfile.TemporaryDirectory()


def umscope(*args, out):
    """One umscope bench call into the script's store; its records (JSON) and its time."""
    cmd = [sys.executable, "-m", "umscope", "bench", *args, "--store", str(out / "new_kinds.sqlite"), "--json",
           "--no-progress", "--report", str(Path(REPORTS.name) / "run.html")]  # the HTML report is not kept
    t = time.time()
    res = subprocess.run(cmd, capture_output=True, text=True)
    took = time.time() - t
    if res.returncode not in (0, 1):  # 1: a case failed (recorded, shown below); anything else is the script's
        sys.exit(f"{' '.join(cmd)} exited {res.returncode}: {res.stderr.strip()[-500:]}")
    print(f"# {' '.join(cmd[3:])}: {took:.0f} s, exit {res.returncode}", file=sys.stderr)
    return json.loads(res.stdout or "[]")


def cell(r):
    if r is None:
        return "-"
    if r["status"] != "ok":
        return r["status"]
    return f"{r['median']:.1f} ({100 * r['spread']:.0f}%)"


def case_of(r):
    """(family, the kind the row is about, the column) from a record's case id, which names the kinds as they
    were given: "gpu-stream SPEC bytes=... ops=...", "copy SRC bytes=... direction=uni dst=DST engine=E"."""
    words = r["case_id"].split(" ")
    params = dict(w.split("=", 1) for w in words[2:] if "=" in w)
    if words[0] == "gpu-stream":
        return words[1], "gpu-stream " + (r["op"] or "")
    src, dst, engine = words[1], params.get("dst"), params.get("engine")
    if dst == "device":
        return src, f"{engine} kind->device"
    return dst, f"{engine} device->kind"


COLUMNS = ["gpu-stream " + op for op in STREAM_OPS] + [f"{e} {d}" for e in ("ce", "sm")
                                                       for d in ("kind->device", "device->kind")]


def table(recs, kinds):
    """Rows: kinds; columns: the stream operations, then each copy (kind -> device, device -> kind; CE, SM)."""
    cells, verified, location, skips = {}, {}, {}, []
    for r in recs:
        if r["benchmark"] == "copy" and (r.get("extra") or {}).get("route", "forward") != "forward":
            continue
        spec, col = case_of(r)
        cols = [col]
        if r["benchmark"] == "gpu-stream" and r["status"] != "ok":  # a case not run: every operation's column
            cols = [c for c in COLUMNS if c.startswith("gpu-stream")]
        if spec == "device":  # device -> device is both of the device row's copy columns
            cols.append(col.replace("kind->device", "device->kind"))
        for c in cols:
            cells.setdefault((spec, c), r)
        if r["status"] == "ok":
            verified.setdefault(spec, set()).add((r.get("extra") or {}).get("verified") or "none")
            if r["benchmark"] == "gpu-stream":
                location.setdefault(spec, set()).add(r["extra"].get("location", "?"))
        else:
            skips.append(f"- `{r['case_id']}`: {r['status']}: {r['reason']}")
    lines = ["| kind | location | " + " | ".join(COLUMNS) + " | verified |",
             "| --- | --- | " + " | ".join("---:" for _ in COLUMNS) + " | --- |"]
    for k in kinds:
        row = [cell(cells.get((k, c))) for c in COLUMNS]
        lines.append(f"| `{k}` | {','.join(sorted(location.get(k, {'-'})))} | " + " | ".join(row) +
                     f" | {','.join(sorted(verified.get(k, {'-'})))} |")
    return lines, sorted(set(skips))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for the store and the table ($OUT)")
    ap.add_argument("--stream-size", default="1G")
    ap.add_argument("--copy-size", default="256M")
    ap.add_argument("--reps", default="10")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    kinds = BASELINE + NEW
    kind_args = [x for k in kinds for x in ("--kind", k)]
    t0 = time.time()
    recs = umscope("gpu-stream", *kind_args, "--size", a.stream_size, "--ops", ",".join(STREAM_OPS), "--reps", a.reps,
                   out=out)
    # Each kind to device memory and device memory to each kind, one direction, both engines: two filtered plans
    # of the copy matrix (its case ids: "copy SRC bytes=... direction=uni dst=DST engine=E").
    common = ["copy", *kind_args, "--size", a.copy_size, "--reps", a.reps, "--filter", "direction=uni"]
    recs += umscope(*common, "--filter", "dst=device engine", out=out)
    recs += umscope(*common, "--filter", "copy device bytes", out=out)
    took = time.time() - t0
    (out / "new_kinds.json").write_text(json.dumps(recs, indent=1))
    gpu = next((r["extra"].get("gpu_name") for r in recs if r.get("extra", {}).get("gpu_name")), None)
    lines, skips = table(recs, kinds)
    head = [f"# New allocation kinds beside device and pinned (umscope {commit(ROOT)})", "",
            f"GB/s, median of {a.reps} repetitions (spread = (max - min) / median); gpu-stream on {a.stream_size} "
            f"arrays, copies of {a.copy_size}; one call, {took:.0f} s" + (f", {gpu}" if gpu else "") + ".", ""]
    text = "\n".join(head + lines + ([""] + ["Not measured:"] + skips if skips else []))
    (out / "new_kinds.md").write_text(text + "\n")
    failed = [r for r in recs if r["status"] == "failed"]
    unverified = [r for r in recs if r["status"] == "ok" and (r.get("extra") or {}).get("verified") in (None, "none")]
    # Issue 40's check: every new kind has its stream and copy records, each verified.
    missing = [k for k in NEW if any(line.startswith(f"| `{k}` |") and ("skipped" in line or "failed" in line or
                                                                      " - |" in line) for line in lines)]
    print(text)
    print(f"\n{len(recs)} records, {len(failed)} failed, {len(unverified)} without verification; "
          f"new kinds with a column not measured: {', '.join(missing) or 'none'}")
    return 1 if failed or unverified else 0


if __name__ == "__main__":
    sys.exit(main())
