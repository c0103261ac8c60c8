#!/usr/bin/env python3
"""The mutation check: applies each of a fixed list of deliberate bugs to a COPY of the tree and asserts
that the tests meant to notice it fail. Every mutant must be caught.

    python3 tests/mutants/run.py [--only ID,...] [--list]

Python mutants run the named fast test files against the mutated copy (PYTHONPATH points at it; the
installed umbench is used). C++ mutants recompile only the objects they touch, with the exact commands of
the existing CMake build (`ninja -t commands`, so `pip install .` must have built the tree first), link a
mutant umbench in a temporary directory and point UMSCOPE_UMBENCH at it. The real build is not touched.
Prints one line per mutant and `mutants: N caught of M`; exits 1 if any survived, 2 if it could not run."""
import argparse
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EACH = "each"  # a mutant's 8th field: every test it names must fail (run one by one), not just one of them
S = "tests/test_apps.py::test_every_app_checks_its_result_without_the_full_reference[{}]"
F = "tests/test_apps.py::test_every_app_checks_its_result_with_the_full_reference[{}]"

# (id, file, old text, new text, tests (pytest node ids relative to the root), what the bug is[, C++ sources to
# recompile[, EACH]])
MUTANTS = [
    # --- Python -------------------------------------------------------------------------------------------
    ("py-gb-as-gib", "python/umscope/sizes.py", '_UNITS[_p + "B"] = 1000**_i', '_UNITS[_p + "B"] = 1024**_i',
     ["tests/test_arithmetic.py::test_python_parses_the_shared_size_table"], "GB parsed as GiB in Python"),
    ("py-size-limit", "python/umscope/sizes.py", "if not 1 <= n <= 9.0e18 or", "if not 1 <= n or",
     ["tests/test_arithmetic.py::test_python_parses_the_shared_size_table"], "no upper size limit (C++ has one)"),
    ("py-gib-label", "python/umscope/sizes.py", '("GiB", 1024**3)', '("GB", 1024**3)',
     ["tests/test_arithmetic.py::test_binary_size_labels"], "GiB labelled GB"),
    ("py-host-host-once", "python/umscope/model/bounds.py",
     '            elif s == "host" and d == "host":  # through the GPU: the link both ways\n'
     '                add("h2d", n)\n                add("d2h", n)',
     '            elif s == "host" and d == "host":  # through the GPU: the link both ways\n'
     '                add("h2d", n)', ["tests/test_arithmetic.py"], "host-to-host copy crosses the link once"),
    ("py-bound-source", "python/umscope/model/bounds.py", 'rec["bound_source"] = source(desc, why)', "pass",
     ["tests/test_arithmetic.py::test_annotate_carries_the_bound_source_and_efficiency"], "bound source dropped"),
    ("py-overhead-div10", "python/umscope/profile/output.py", "overhead = s.cpu_s / wall if", "overhead = s.cpu_s / wall / 10 if",
     ["tests/test_arithmetic.py::test_profiler_overhead_is_sampler_cpu_over_wall"], "profiler overhead divided by 10"),
    ("py-profile-median", "python/umscope/profile/output.py", '"median": statistics.median(values)',
     '"median": statistics.median_low(values)', ["tests/test_arithmetic.py::test_profiler_summary_median_even_and_odd"],
     "profile median wrong for even n"),
    ("py-ref-no-commit", "bench/reference.py", 'f"Provenance: umscope commit `{a.commit}`, machine kind',
     'f"Provenance: umscope, machine kind',
     ["tests/test_reference_docs.py::test_reference_writes_provenance_per_section_and_merges_a_base"],
     "a reference section written without its commit"),
    ("py-store-drops", "python/umscope/store.py", "            for rec in rows:\n", "            for rec in rows[1:]:\n",
     ["tests/test_store.py", "tests/test_verify.py"], "the store drops a record"),
    ("py-crossmode-off", "python/umscope/verify.py", "            if got != want:", "            if False:",
     ["tests/test_verify.py"], "cross-mode disagreement not failed"),
    ("py-crossmode-uncalled", "python/umscope/suite.py", "verify.apply_checks(store, run_id).items()", "{}.items()",
     ["tests/test_verify.py::test_suite_runs_the_cross_mode_check"], "the suite skips the cross-mode check"),
    ("py-no-cpu-check-case", "python/umscope/apps/__init__.py",
     "        cases.append(Case(bench_of(name), None, dict(app.fixed, footprint=CHECK_FOOTPRINT",
     "        0 and cases.append(Case(bench_of(name), None, dict(app.fixed, footprint=CHECK_FOOTPRINT",
     ["tests/test_verify.py::test_default_suite_checks_every_application_against_the_cpu_once"],
     "default suite without its CPU-reference cases"),
    ("py-old-true-verified", "python/umscope/verify.py", "    if v is True:\n        return OLD", "    if v is True:\n        return 'cpu-reference'",
     ["tests/test_verify.py::test_method_names_and_old_stores"], "old boolean read as a named method"),
    ("py-throttle-ignored", "python/umscope/conditions.py", 'BENIGN = {"gpu_idle"}', 'BENIGN = {"gpu_idle", "sw_power_cap"}',
     ["tests/test_conditions.py"], "power-capped case not flagged"),
    ("py-shared-ignored", "python/umscope/conditions.py", "    if others:\n", "    if others and False:\n",
     ["tests/test_conditions.py"], "shared GPU not flagged"),
    # --- C++ (recompile the objects named) ------------------------------------------------------------------
    ("cc-gb-as-gib", "native/core/sizes.cpp", "mult = std::pow(1000.0, power)", "mult = std::pow(1024.0, power)",
     ["tests/test_arithmetic.py::test_umbench_parses_the_shared_size_table_like_python"], "umbench parses GB as GiB",
     ["native/core/sizes.cpp"]),
    ("cc-median-even", "native/core/stats.cpp", "r.median = s.size() % 2 ? s[m] : 0.5 * (s[m - 1] + s[m]);",
     "r.median = s[m];", ["tests/test_arithmetic.py::test_umbench_summary_statistics"], "median wrong for even n",
     ["native/core/stats.cpp"]),
    ("cc-spread-denominator", "native/include/umscope/stats.hpp", "(max - min) / median : 0", "(max - min) / max : 0",
     ["tests/test_arithmetic.py::test_umbench_summary_statistics"], "spread over max, not the median",
     ["native/core/bench.cpp"]),
    ("cc-min-is-max", "native/core/bench.cpp", 'rec.set("min", s.min);', 'rec.set("min", s.median);',
     ["tests/test_arithmetic.py::test_umbench_summary_statistics"], "min reported as the median",
     ["native/core/bench.cpp"]),
    # The stream-operation table (core/stream_ops.cpp): what the records count and the bounds read (list --json).
    ("cc-rw-swapped", "native/core/stream_ops.cpp", '{"read", 1, 0, "s += a"},\n      {"write", 0, 1,',
     '{"read", 0, 1, "s += a"},\n      {"write", 1, 0,', ["tests/test_arithmetic.py", "tests/test_bounds.py"],
     "read/write swapped in the stream table", ["native/core/stream_ops.cpp"]),
    ("cc-copy-factor", "native/core/stream_ops.cpp", '{"copy", 1, 1,', '{"copy", 1, 0,',
     ["tests/test_arithmetic.py"], "copy counted as one array (records and bounds)", ["native/core/stream_ops.cpp"]),
    ("cc-triad-factor", "native/core/stream_ops.cpp", '{"triad", 2, 1,', '{"triad", 1, 1,',
     ["tests/test_arithmetic.py"], "triad counted as two arrays (records and bounds)", ["native/core/stream_ops.cpp"]),
    ("cc-gib-as-gb", "native/include/umscope/traffic.hpp", "bytes / seconds / 1e9", "bytes / seconds / 1073741824.0",
     ["tests/test_arithmetic.py::test_cpu_stream_bytes_and_rates"], "GiB/s labelled GB/s",
     ["native/bench/cpu_stream.cpp"]),
    ("cc-qv-gate-factor", "native/apps/qv.cu", "gb_per_s(2.0 * bytes * gates_per_layer", "gb_per_s(1.0 * bytes * gates_per_layer",
     ["tests/test_arithmetic.py::test_qv_gate_rate_counts_two_passes_over_the_state"],
     "QV gate rate counts one pass over the state", ["native/apps/qv.cu"]),
    ("cc-cpu-check-off", "native/apps/app.cu", "  if (ctx.args.has(\"check\")) return ctx.args.flag(\"check\");",
     "  if (ctx.args.has(\"check\")) return false;",
     ["tests/test_apps.py::test_every_app_checks_its_result_without_the_full_reference[hotspot]"],
     "the full CPU reference switched off (--check 1 ignored)",
     ["native/apps/app.cu"]),
    # The applications' checks on the CPU path (--processor cpu): each CPU implementation made wrong, caught by the
    # check without the full reference (--check 0, as above 64 MiB) and by the full reference (--check 1): EACH
    # test named must fail (the GPU kernels: bench/gpu_mutants.py).
    ("cc-hotspot-cpu-east", "native/apps/hotspot.cu", "e = j < cols - 1 ? src[k + 1] : me;",
     "e = j < cols - 2 ? src[k + 1] : me;",
     ["tests/test_apps.py::test_every_app_checks_its_result_without_the_full_reference[hotspot]",
      "tests/test_apps.py::test_every_app_checks_its_result_with_the_full_reference[hotspot]"],
     "hotspot (CPU) ignores the east neighbour in the next-to-last column", ["native/apps/hotspot.cu"], EACH),
    ("cc-needle-cpu-gap", "native/apps/needle.cu", "score[(i - 1) * w + j], gap);",
     "score[(i - 1) * w + j], gap + (i + j == n));",
     ["tests/test_apps.py::test_every_app_checks_its_result_without_the_full_reference[needle]",
      "tests/test_apps.py::test_every_app_checks_its_result_with_the_full_reference[needle]"],
     "needle (CPU) has another gap on one anti-diagonal", ["native/apps/needle.cu"], EACH),
    ("cc-bfs-cpu-level", "native/apps/bfs.cu", "cost[edges[e]] = cost[v] + 1;",
     "cost[edges[e]] = cost[v] + 1 + (edges[e] % 97 == 3);",
     ["tests/test_apps.py::test_every_app_checks_its_result_without_the_full_reference[bfs]",
      "tests/test_apps.py::test_every_app_checks_its_result_with_the_full_reference[bfs]"],
     "bfs (CPU) puts one node in 97 a level too deep", ["native/apps/bfs.cu"], EACH),
    ("cc-jacobi2d-cpu-col", "native/apps/jacobi2d.cu", "for (size_t j = 1; j < cols - 1; ++j) {",
     "for (size_t j = 1; j < cols - 2; ++j) {",
     ["tests/test_apps.py::test_every_app_checks_its_result_without_the_full_reference[jacobi2d]",
      "tests/test_apps.py::test_every_app_checks_its_result_with_the_full_reference[jacobi2d]"],
     "jacobi2d (CPU) never updates the next-to-last column", ["native/apps/jacobi2d.cu"], EACH),
    ("cc-syr2k-cpu-sum", "native/apps/syr2k.cu", "(s[2] + s[3])) + kBeta", "(s[2])) + kBeta",
     ["tests/test_apps.py::test_every_app_checks_its_result_without_the_full_reference[syr2k]",
      "tests/test_apps.py::test_every_app_checks_its_result_with_the_full_reference[syr2k]"],
     "syr2k (CPU) drops one of its four partial sums", ["native/apps/syr2k.cu"], EACH),
    ("cc-himeno-cpu-copy", "native/apps/himeno.cu", "for (size_t k = 1; k < g.K - 1; ++k) p[g.at(i, j, k)] = wrk2",
     "for (size_t k = 1; k < g.K - 2; ++k) p[g.at(i, j, k)] = wrk2",
     ["tests/test_apps.py::test_every_app_checks_its_result_without_the_full_reference[himeno]",
      "tests/test_apps.py::test_every_app_checks_its_result_with_the_full_reference[himeno]"],
     "himeno (CPU) copies back all but the last interior k", ["native/apps/himeno.cu"], EACH),
    # The per-point functions the kernels and the CPU path share (__host__ __device__): a wrong formula there is
    # computed alike by the GPU and by the CPU path, so only a reference of its own catches it (the sampled check
    # and the full reference each have one). The same patches on the GPU: bench/gpu_mutants.py.
    ("cc-hotspot-cell", "native/apps/hotspot.cu", "(s + n - 2.f * t) * m.ry1", "(s + n - 2.f * t) * (0.5f * m.ry1)",
     [S.format("hotspot"), F.format("hotspot")], "hotspot's cell(): half the north-south conduction",
     ["native/apps/hotspot.cu"], EACH),
    ("cc-srad-coeff", "native/apps/srad.cu", "float den = 1 + 0.25f * l;", "float den = 1 + 0.5f * l;",
     [S.format("srad"), F.format("srad")], "srad's coeff_at(): the Laplacian's weight in q^2 doubled",
     ["native/apps/srad.cu"], EACH),
    ("cc-jacobi2d-avg5", "native/apps/jacobi2d.cu", "return 0.2f * (me + w + e + s + n);",
     "return 0.2f * (me + w + e + s + s);", [S.format("jacobi2d"), F.format("jacobi2d")],
     "jacobi2d's avg5(): the south neighbour twice, the north never", ["native/apps/jacobi2d.cu"], EACH),
    ("cc-himeno-point", "native/apps/himeno.cu", "q.c0[x] * p[im]", "q.c0[x] * p[ip]",
     [S.format("himeno"), F.format("himeno")], "himeno's point(): the i-1 neighbour read from i+1",
     ["native/apps/himeno.cu"], EACH),
    ("cc-pathfinder-rule", "native/apps/pathfinder.cu", "return (right < m ? right : m) + weight;",
     "return (right < up ? right : m) + weight;", [S.format("pathfinder"), F.format("pathfinder")],
     "pathfinder's cell_cost(): the right cost against the upper one only", ["native/apps/pathfinder.cu"], EACH),
    ("cc-needle-best", "native/apps/needle.cu", "return m > up - gap ? m : up - gap;",
     "return m > up - gap ? m : up - gap + 1;", [S.format("needle"), F.format("needle")],
     "needle's best(): a gap from above costs one less", ["native/apps/needle.cu"], EACH),
    ("cc-conv2d-conv-at", "native/apps/conv2d.cu", "s += k.c[di + 1][dj + 1] * a[", "s += k.c[dj + 1][di + 1] * a[",
     [S.format("conv2d"), F.format("conv2d")], "conv2d's conv_at(): the filter transposed",
     ["native/apps/conv2d.cu"], EACH),
    ("cc-qv-group-transposed", "native/apps/qv.cu",
     "x += m.re[r * 4 + c] * a[c].x - m.im[r * 4 + c] * a[c].y;\n      y += m.re[r * 4 + c] * a[c].y + m.im[r * 4 + c]",
     "x += m.re[c * 4 + r] * a[c].x - m.im[c * 4 + r] * a[c].y;\n      y += m.re[c * 4 + r] * a[c].y + m.im[c * 4 + r]",
     ["tests/test_apps.py::test_qv_beyond_the_cpu_simulator_checks_the_norm_and_an_exact_layer", F.format("qv")],
     "QV's apply_group(): every gate transposed (still unitary)", ["native/apps/qv.cu"], EACH),
    ("cc-gemm-cpu-k", "native/apps/gemm.cu", "for (size_t p = 0; p < k; ++p) {\n        const double a = to_d(A[",
     "for (size_t p = 0; p + 1 < k; ++p) {\n        const double a = to_d(A[", [S.format("gemm"), F.format("gemm")],
     "gemm (CPU) leaves out the last term of every dot product", ["native/apps/gemm.cu"], EACH),
    ("cc-qv-gate-conj", "native/apps/qv.cu", "a[c].y + m.im[r * 4 + c] * a[c].x;", "a[c].y - m.im[r * 4 + c] * a[c].x;",
     ["tests/test_apps.py::test_qv_beyond_the_cpu_simulator_checks_the_norm_and_an_exact_layer"],
     "QV gates applied conjugated (still unitary: the norm holds; the CPU simulator shares the gate code)",
     ["native/apps/qv.cu"]),
    ("cc-fill-piece-gap", "native/cpu/threads.cpp", "    split_range(n, T, t, lo, hi);\n    body(lo, hi, t);",
     "    split_range(n, T, t, lo, hi);\n    body(lo, hi - (t == 0), t);",
     ["tests/test_cpu_bench.py::test_large_arrays_are_filled_and_checked_on_every_cpu"],
     "preparation on every CPU skips one element of the first piece (left unfilled and unchecked)",
     ["native/cpu/threads.cpp"]),
]


def _copy_tree(dst: Path):
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split("\n")
    for f in files:
        if not f or not (ROOT / f).is_file():
            continue
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dst / f)


def _build_dir() -> Path:
    dirs = sorted(glob.glob(str(ROOT / "build" / "*" / "build.ninja")), key=os.path.getmtime)
    if not dirs:
        raise SystemExit("mutants: no CMake build under build/ (run `pip install .` or `make test` first)")
    return Path(dirs[-1]).parent


def _installed_umbench() -> str:
    res = subprocess.run([sys.executable, "-c", "from umscope import native; print(native.umbench_path())"],
                         capture_output=True, text=True, cwd="/")
    if res.returncode != 0:
        raise SystemExit("mutants: umscope is not installed: " + res.stderr.strip()[-300:])
    return res.stdout.strip()


class Native:
    """Recompiles single objects of the existing build against a mutated copy and relinks umbench."""

    def __init__(self, copy: Path, work: Path):
        self.build = _build_dir()
        self.copy, self.work = copy, work
        cmds = subprocess.run(["ninja", "-C", str(self.build), "-t", "commands", "umbench"], capture_output=True,
                              text=True, check=True).stdout.splitlines()
        self.compile = {}
        self.link = None
        for c in cmds:
            m = re.search(r" -c (\S+\.(?:cpp|cu))(?: |$)", c.strip())
            if m:
                self.compile[m.group(1)] = c
            elif re.search(r"-o umbench\b", c):
                self.link = c
        if not self.link:
            raise SystemExit("mutants: no link command for umbench in the build")

    def build_mutant(self, sources: list, tag: str) -> str:
        out = self.work / tag
        out.mkdir()
        link = self.link
        for src in sources:
            full = str(ROOT / src)
            cmd = self.compile.get(full)
            if cmd is None:
                raise SystemExit(f"mutants: {src} is not compiled into umbench")
            obj = re.search(r" -o (\S+)", cmd).group(1)
            new_obj = str(out / Path(obj).name)
            cmd = cmd.replace(full, str(self.copy / src)).replace(obj, new_obj)
            cmd = cmd.replace(f"-I{ROOT}/native/include", f"-I{self.copy}/native/include")
            res = subprocess.run(cmd, shell=True, cwd=self.build, capture_output=True, text=True)
            if res.returncode != 0:
                return "compile error: " + res.stderr.strip()[-400:]
            link = link.replace(" " + obj + " ", " " + new_obj + " ")
        link = re.sub(r"-o umbench\b", f"-o {out / 'umbench'}", link)
        res = subprocess.run(link, shell=True, cwd=self.build, capture_output=True, text=True)
        if res.returncode != 0:
            return "link error: " + res.stderr.strip()[-400:]
        return str(out / "umbench")


def _pytest(copy: Path, tests: list, umbench: str, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(copy / "python"), UMSCOPE_UMBENCH=umbench, PYTHONDONTWRITEBYTECODE="1")
    # The installed umsim and libumalloc (the copy has no bin/ or lib/): the tests that hold them to the same
    # tables as umbench run against them, unmutated.
    installed = Path(_installed_umbench()).parent
    if (installed / "umsim").exists():
        env.setdefault("UMSCOPE_UMSIM", str(installed / "umsim"))
    if (installed.parent / "lib" / "libumalloc.so").exists():
        env.setdefault("UMSCOPE_UMALLOC", str(installed.parent / "lib" / "libumalloc.so"))
    env.pop("UMSCOPE_REQUIRE_GPU", None)
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "not gpu and not browser",
           *tests]
    try:
        res = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    last = (res.stdout.strip().splitlines() or [""])[-1]
    return res.returncode, last


def select(mutants, only, listing, who, what_field):
    """The mutants --only names (all without it); with --list, prints them and gives None; an unknown id is
    said on stderr and gives None. Shared by this CPU check and bench/gpu_mutants.py."""
    if listing:
        for m in mutants:
            print(f"{m[0]:<24} {m[1]:<40} {m[what_field]}")
        return None
    if only:
        want = set(only.split(","))
        unknown = want - {m[0] for m in mutants}
        if unknown:
            sys.stderr.write(f"{who}: unknown id(s): {', '.join(sorted(unknown))}\n")
            return None
        mutants = [m for m in mutants if m[0] in want]
    return mutants


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="comma-separated mutant ids")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    mutants = select(MUTANTS, a.only, a.list, "mutants", 5)
    if mutants is None:
        return 0 if a.list else 2
    t0 = time.time()
    umbench = _installed_umbench()
    work = Path(tempfile.mkdtemp(prefix="umscope-mutants-"))
    try:
        copy = work / "tree"
        _copy_tree(copy)
        # The tests must pass on the unmutated copy, or a "caught" mutant means nothing.
        tests = sorted({t.split("::")[0] for m in mutants for t in m[4]})
        rc, last = _pytest(copy, tests, umbench, timeout=600)
        if rc != 0:
            print(f"mutants: the tests fail without any mutant ({last}); nothing checked")
            return 2
        native = Native(copy, work) if any(len(m) > 6 for m in mutants) else None
        caught = 0
        for m in mutants:
            mid, path, old, new, mtests, what = m[:6]
            f = copy / path
            text = f.read_text()
            if text.count(old) != 1:
                print(f"{mid:<24} NOT APPLIED: the text to mutate occurs {text.count(old)} times in {path}")
                continue
            f.write_text(text.replace(old, new))
            try:
                exe = umbench
                if len(m) > 6:
                    exe = native.build_mutant(m[6], mid)
                    if not exe.startswith("/"):
                        print(f"{mid:<24} NOT BUILT: {exe}")
                        continue
                t = time.time()
                if len(m) > 7 and m[7] == EACH:
                    missed = []
                    for test in mtests:
                        rc, last = _pytest(copy, [test], exe)
                        if rc in (0, None, 5):
                            missed.append(test.rsplit("::", 1)[-1])
                    ok = not missed
                    last = "every test failed" if ok else "passed: " + ", ".join(missed)
                else:
                    rc, last = _pytest(copy, mtests, exe)
                    ok = rc not in (0, None) and rc != 5
                caught += ok
                print(f"{mid:<24} {'caught' if ok else 'SURVIVED'} ({what}; {last}; {time.time() - t:.0f} s)",
                      flush=True)
            finally:
                f.write_text(text)
        print(f"mutants: {caught} caught of {len(mutants)} ({time.time() - t0:.0f} s)")
        return 0 if caught == len(mutants) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
