#!/usr/bin/env python3
"""The GPU mutation battery: umbench built with deliberately wrong kernels, each run through every entry
point a user has, each of which must catch it (a failed record or a non-zero exit).

    python3 bench/gpu_mutants.py [--only ID,...] [--list] [--jobs N] [--baseline] [--timeout S]

Run it on the GPU machine from the repository root after `pip install --no-build-isolation .`, whenever a
kernel changes. Each mutant is a small patch applied to a copy of the tree; the objects it touches are
recompiled with the exact commands of the existing CMake build (tests/mutants/run.py's Native: `ninja -t
commands`, all mutants compiled at once on every core) and linked into a mutant umbench of its own. Then,
with UMSCOPE_UMBENCH pointing at it, three commands run the family the mutant touches at the default sizes:

    run    umscope run --filter FAMILY          the default suite restricted to that family
    quick  umscope run --quick --filter FAMILY  the quick suite restricted to it
    app    umscope app run NAME | umscope bench FAMILY --kind device   the entry of the application or family

With --baseline the unmutated umbench first runs `umscope run --quick` whole, which must pass, else a
"caught" mutant proves nothing (about a minute more; an unmutated `umscope run` in the same call does the
same). Logs and the table go to $OUT (default ./gpu-mutants-out): gpu_mutants.log
(every command with its exit and last lines) and gpu_mutants.json. Prints the table mutant x entry point ->
caught, last; exits 0 when every mutant was caught in every entry point, 1 otherwise, 2 if it could not run.
About 7-8 minutes on one H100 with 16 cores (about a minute of compiling, then 23 mutants x 3 commands)."""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (id, file, [(old, new), ...], sources to recompile, case-id filter, the third entry's umscope arguments, what)
MUTANTS = [
    ("stream-triad-last", "native/include/umscope/stream_kernels.cuh",
     [("    c[i + stride] = fma2(a1, s, b1);", "    if (i + stride != n - 1) c[i + stride] = fma2(a1, s, b1);"),
      ("  for (; i < n; i += stride) c[i] = fma2(a[i], s, b[i]);",
       "  for (; i < n; i += stride) if (i != n - 1) c[i] = fma2(a[i], s, b[i]);")],
     ["native/bench/gpu_stream.cu", "native/apps/triad.cu"], "gpu-stream", ["bench", "gpu-stream", "--kind", "device"],
     "gpu-stream triad never writes its last element"),
    ("copy-ce-short", "native/bench/copy.cu",
     [("ce_ptr(*pr.src), bytes, cudaMemcpyDefault", "ce_ptr(*pr.src), bytes - 16, cudaMemcpyDefault")],
     ["native/bench/copy.cu"], "copy", ["bench", "copy", "--kind", "device"],
     "copy-engine copies leave out the last 16 bytes"),
    ("latency-chase-short", "native/bench/latency.cu",
     [("  long long c0 = clock64();\n  unsigned long long g0 = global_ns();\n  for (long long i = 0; i < steps; ++i)",
       "  long long c0 = clock64();\n  unsigned long long g0 = global_ns();\n  for (long long i = 1; i < steps; ++i)")],
     ["native/bench/latency.cu"], "latency", ["bench", "latency", "--kind", "device"],
     "the GPU chase takes one load fewer than it counts"),
    ("pathfinder-right-col", "native/apps/pathfinder.cu",
     [("c < cols - 1 ? row[cur][tx + 1] : up", "c < cols - 2 ? row[cur][tx + 1] : up")],
     ["native/apps/pathfinder.cu"], "pathfinder", ["app", "run", "pathfinder"],
     "pathfinder ignores the right neighbour in the next-to-last column"),
    ("needle-gap-diag", "native/apps/needle.cu",
     [("s[y][tx + 1], gap);", "s[y][tx + 1], gap + (d == 5));")],
     ["native/apps/needle.cu"], "needle", ["app", "run", "needle"], "needle's gap is 11 on one tile diagonal"),
    ("hotspot-north-row1", "native/apps/hotspot.cu",
     [("const float n = r > 0 ? t[ty - 1][tx] : me", "const float n = r > 1 ? t[ty - 1][tx] : me")],
     ["native/apps/hotspot.cu"], "hotspot", ["app", "run", "hotspot"], "hotspot's row 1 has no north neighbour"),
    ("srad-band-row", "native/apps/srad.cu",
     [("for (size_t i = i0; i < min(i0 + BAND, rows); ++i) coeff(", "for (size_t i = i0; i < min(i0 + BAND - 1, rows); ++i) coeff(")],
     ["native/apps/srad.cu"], "srad", ["app", "run", "srad"], "srad's coefficients skip the last row of each band"),
    ("bfs-unreached", "native/apps/bfs.cu",
     [("    if (!visited[u]) {", "    if (!visited[u] && (u & 1023) != 5) {")],
     ["native/apps/bfs.cu"], "bfs", ["app", "run", "bfs"], "bfs never reaches one node in 1024"),
    ("conv2d-col", "native/apps/conv2d.cu",
     [("b[i * cols + j] = (i == 0 || i == rows - 1) ? 0.f : s;", "b[i * cols + j] = (i == 0 || i == rows - 1 || j == 77) ? 0.f : s;")],
     ["native/apps/conv2d.cu"], "conv2d", ["app", "run", "conv2d"], "conv2d writes 0 into column 77"),
    ("jacobi2d-row", "native/apps/jacobi2d.cu",
     [("const float down = src[(i + 1) * cols + j];", "const float down = src[(i + 1 - (i == 40)) * cols + j];")],
     ["native/apps/jacobi2d.cu"], "jacobi2d", ["app", "run", "jacobi2d"], "jacobi2d's row 40 reads itself as south"),
    ("mvt-slab-row", "native/apps/mvt.cu",
     [("for (size_t i = lo; i < hi; ++i) s += A[i * n + j] * y[i];", "for (size_t i = lo; i + (slab == 3) < hi; ++i) s += A[i * n + j] * y[i];")],
     ["native/apps/mvt.cu"], "mvt", ["app", "run", "mvt"], "mvt's A^T y leaves out the last row of one slab"),
    ("gesummv-last", "native/apps/gesummv.cu",
     [("y[i] = kAlpha * a + kBeta * b;", "y[i] = kAlpha * a + kBeta * (i + 1 < n ? b : a);")],
     ["native/apps/gesummv.cu"], "gesummv", ["app", "run", "gesummv"], "gesummv's last row uses A x for B x"),
    ("syr2k-last-col", "native/apps/syr2k.cu",
     [("if (i < n && j < n) C[i * n + j]", "if (i < n && j + 1 < n) C[i * n + j]")],
     ["native/apps/syr2k.cu"], "syr2k", ["app", "run", "syr2k"], "syr2k never updates C's last column"),
    ("gemm-last-row", "native/apps/gemm.cu",
     [("gemm_call(*blas, prec, rows, n, k,", "gemm_call(*blas, prec, rows - (rows > 1), n, k,")],
     ["native/apps/gemm.cu"], "gemm", ["app", "run", "sgemm"], "sgemm/gemm leave C's last row uncomputed"),
    ("himeno-last-k", "native/apps/himeno.cu",
     [("for (size_t k = 1 + threadIdx.x; k < g.K - 1; k += blockDim.x) acc += point(",
       "for (size_t k = 1 + threadIdx.x; k < g.K - 2; k += blockDim.x) acc += point(")],
     ["native/apps/himeno.cu"], "himeno", ["app", "run", "himeno"], "himeno's kernel skips the last interior k"),
    ("qv-gate-swapped", "native/apps/qv.cu",
     [("i < groups; i += stride) apply_group(s, i, q0, q1, m);", "i < groups; i += stride) apply_group(s, i, q1, q0, m);")],
     ["native/apps/qv.cu"], "qv", ["app", "run", "qv"], "QV's GPU gates act on their two qubits swapped"),
    # Inside the per-point functions the kernels share with the CPU path (__host__ __device__): the references
    # have their own (tests/mutants/run.py runs the same patches on the CPU path).
    ("hotspot-cell", "native/apps/hotspot.cu",
     [("(s + n - 2.f * t) * m.ry1", "(s + n - 2.f * t) * (0.5f * m.ry1)")],
     ["native/apps/hotspot.cu"], "hotspot", ["app", "run", "hotspot"], "hotspot's cell(): half the north-south conduction"),
    ("srad-coeff", "native/apps/srad.cu", [("float den = 1 + 0.25f * l;", "float den = 1 + 0.5f * l;")],
     ["native/apps/srad.cu"], "srad", ["app", "run", "srad"], "srad's coeff_at(): the Laplacian's weight in q^2 doubled"),
    ("jacobi2d-avg5", "native/apps/jacobi2d.cu",
     [("return 0.2f * (me + w + e + s + n);", "return 0.2f * (me + w + e + s + s);")],
     ["native/apps/jacobi2d.cu"], "jacobi2d", ["app", "run", "jacobi2d"],
     "jacobi2d's avg5(): the south neighbour twice, the north never"),
    ("himeno-point", "native/apps/himeno.cu", [("q.c0[x] * p[im]", "q.c0[x] * p[ip]")],
     ["native/apps/himeno.cu"], "himeno", ["app", "run", "himeno"], "himeno's point(): the i-1 neighbour read from i+1"),
    ("pathfinder-rule", "native/apps/pathfinder.cu",
     [("return (right < m ? right : m) + weight;", "return (right < up ? right : m) + weight;")],
     ["native/apps/pathfinder.cu"], "pathfinder", ["app", "run", "pathfinder"],
     "pathfinder's cell_cost(): the right cost against the upper one only"),
    ("needle-best", "native/apps/needle.cu",
     [("return m > up - gap ? m : up - gap;", "return m > up - gap ? m : up - gap + 1;")],
     ["native/apps/needle.cu"], "needle", ["app", "run", "needle"], "needle's best(): a gap from above costs one less"),
    ("qv-group-transposed", "native/apps/qv.cu",
     [("x += m.re[r * 4 + c] * a[c].x - m.im[r * 4 + c] * a[c].y;", "x += m.re[c * 4 + r] * a[c].x - m.im[c * 4 + r] * a[c].y;"),
      ("y += m.re[r * 4 + c] * a[c].y + m.im[r * 4 + c] * a[c].x;", "y += m.re[c * 4 + r] * a[c].y + m.im[c * 4 + r] * a[c].x;")],
     ["native/apps/qv.cu"], "qv", ["app", "run", "qv"], "QV's apply_group(): every gate transposed (still unitary)"),
]
ENTRIES = ("run", "quick", "app")


def _cpu_mutants():
    """tests/mutants/run.py: its copy of the tree and its single-object rebuild (Native)."""
    spec = importlib.util.spec_from_file_location("cpu_mutants", ROOT / "tests" / "mutants" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def entry_args(m, entry) -> list:
    family, third = m[4], m[5]
    if entry == "run":
        return ["run", "--filter", family]
    if entry == "quick":
        return ["run", "--quick", "--filter", family]
    return list(third)


def umscope(args, umbench, work, timeout) -> tuple:
    """(exit status, seconds, last lines of the output): one umscope command into a store of its own."""
    store = work / f"s{time.monotonic_ns()}.sqlite"
    cmd = [sys.executable, "-m", "umscope", *args, "--store", str(store), "--no-progress",
           "--report", str(work / "report.html")]
    env = dict(os.environ, UMSCOPE_UMBENCH=umbench, NCCL_NVLS_ENABLE="0")
    t = time.time()
    try:
        res = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        rc, out = res.returncode, res.stdout + res.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = "timeout", str(e.stdout or "") + str(e.stderr or "")
    for f in work.glob(store.name + "*"):
        f.unlink()
    return rc, time.time() - t, "\n".join(out.strip().splitlines()[-6:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated mutant ids")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 4, help="parallel compiles (default: every CPU)")
    ap.add_argument("--baseline", action="store_true", help="first run the quick suite unmutated (it must pass)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per command (default 300)")
    a = ap.parse_args()
    mutants = _cpu_mutants().select(MUTANTS, a.only, a.list, "gpu_mutants", 6)
    if mutants is None:
        return 0 if a.list else 2
    out = Path(os.environ.get("OUT") or "gpu-mutants-out")
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "gpu_mutants.log", "w")

    def note(text):
        log.write(text + "\n")
        log.flush()

    t0 = time.time()
    cm = _cpu_mutants()
    umbench = cm._installed_umbench()
    work = Path(tempfile.mkdtemp(prefix="umscope-gpu-mutants-"))
    try:
        base = work / "base"
        base.mkdir()
        if a.baseline:
            rc, secs, last = umscope(["run", "--quick"], umbench, base, a.timeout * 4)
            note(f"== baseline: umscope run --quick (unmutated {umbench}): exit {rc}, {secs:.0f} s\n{last}\n")
            print(f"baseline (run --quick, unmutated): exit {rc} in {secs:.0f} s", flush=True)
            if rc != 0:
                print("gpu_mutants: the unmutated quick suite fails; a caught mutant would prove nothing "
                      f"(see {out / 'gpu_mutants.log'})")
                return 2
        # One copy of native/ per mutant (patched), all compiled at once.
        builds = {}

        def build(m):
            mid, path, patches, sources = m[:4]
            copy = work / ("tree-" + mid)
            shutil.copytree(ROOT / "native", copy / "native")
            f = copy / path
            text = f.read_text()
            for old, new in patches:
                if text.count(old) != 1:
                    return f"NOT APPLIED: {old!r} occurs {text.count(old)} times in {path}"
                text = text.replace(old, new)
            f.write_text(text)
            return cm.Native(copy, work).build_mutant(sources, mid)

        t = time.time()
        with ThreadPoolExecutor(max_workers=max(1, min(a.jobs, len(mutants)))) as pool:
            for m, exe in zip(mutants, pool.map(build, mutants)):
                builds[m[0]] = exe
                note(f"== build {m[0]}: {exe}")
        print(f"built {sum(e.startswith('/') for e in builds.values())} of {len(mutants)} mutants in "
              f"{time.time() - t:.0f} s", flush=True)
        table = {}
        for m in mutants:
            mid = m[0]
            exe = builds[mid]
            row = table[mid] = {}
            if not exe.startswith("/"):
                row.update({e: "not built" for e in ENTRIES})
                print(f"{mid:<22} NOT BUILT: {exe}", flush=True)
                continue
            mwork = work / ("run-" + mid)
            mwork.mkdir()
            for e in ENTRIES:
                args = entry_args(m, e)
                rc, secs, last = umscope(args, exe, mwork, a.timeout)
                caught = rc != 0
                row[e] = "caught" if caught else "SURVIVED"
                note(f"== {mid} [{e}] umscope {' '.join(args)}: exit {rc}, {secs:.0f} s, "
                     f"{row[e]}\n{last}\n")
            print(f"{mid:<22} " + " ".join(f"{e}={row[e]}" for e in ENTRIES), flush=True)
        total = sum(1 for r in table.values() for v in r.values() if v == "caught")
        n = len(mutants) * len(ENTRIES)
        (out / "gpu_mutants.json").write_text(json.dumps(
            {"mutants": {m[0]: {"what": m[6], "file": m[1], "family": m[4], **table[m[0]]} for m in mutants},
             "caught": total, "of": n, "seconds": round(time.time() - t0)}, indent=1))
        print("\nmutant                 " + "  ".join(f"{e:<9}" for e in ENTRIES) + "  what")
        for m in mutants:
            print(f"{m[0]:<22} " + "  ".join(f"{table[m[0]][e]:<9}" for e in ENTRIES) + f"  {m[6]}")
        print(f"gpu mutants: {total} caught of {n} (mutant x entry point), {time.time() - t0:.0f} s")
        return 0 if total == n else 1
    finally:
        log.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
