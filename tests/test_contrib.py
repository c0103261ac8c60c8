"""contrib/: the Spack recipe parses against a stub of Spack's package API; the ReFrame checks
run (CPU families) with reframe-hpc where it is installed."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _spack_stub():
    """Just enough of `spack.package` for a recipe to be imported: directives record their calls."""
    calls = []
    mod = types.ModuleType("spack.package")

    def directive(name):
        def f(*args, **kw):
            calls.append((name, args, kw))
        return f

    for name in ("version", "variant", "depends_on", "conflicts", "maintainers", "license", "patch", "resource",
                 "extends", "provides"):
        setattr(mod, name, directive(name))

    class PythonPackage:
        pass

    class CudaPackage:
        pass

    mod.PythonPackage, mod.CudaPackage = PythonPackage, CudaPackage
    mod.join_path = os.path.join
    spack = types.ModuleType("spack")
    spack.package = mod
    return spack, mod, calls


def test_spack_recipe_parses_and_declares_its_variants(monkeypatch):
    spack, mod, calls = _spack_stub()
    monkeypatch.setitem(sys.modules, "spack", spack)
    monkeypatch.setitem(sys.modules, "spack.package", mod)
    path = ROOT / "contrib/spack/packages/py-umscope/package.py"
    spec = importlib.util.spec_from_file_location("py_umscope_recipe", path)
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    cls = recipe.PyUmscope
    assert issubclass(cls, mod.PythonPackage) and issubclass(cls, mod.CudaPackage)
    variants = {c[1][0] for c in calls if c[0] == "variant"}
    assert {"mpi", "nccl"} <= variants
    deps = {(c[1][0], c[2].get("when")) for c in calls if c[0] == "depends_on"}
    assert ("mpi", "+mpi") in deps and ("nccl", "+nccl") in deps and ("cuda@13:", "+cuda") in deps

    class Spec:
        def __init__(self, on):
            self.on = on
            self.variants = {"cuda_arch": types.SimpleNamespace(value=("90", "100"))}

        def satisfies(self, v):
            return v in self.on

        def __getitem__(self, k):
            return types.SimpleNamespace(prefix=types.SimpleNamespace(bin="/opt/cuda/bin", lib64="/opt/cuda/lib64",
                                                                      lib="/opt/nccl/lib"))

    cfg = cls.config_settings(None, Spec({"+cuda", "+mpi"}), "/prefix")
    assert cfg["cmake.define.UMSCOPE_CUDA"] == "ON" and cfg["cmake.define.UMSCOPE_MPI"] == "ON"
    assert cfg["cmake.define.CMAKE_CUDA_ARCHITECTURES"] == "90-real;100-real"
    assert cfg["cmake.define.CMAKE_CUDA_COMPILER"] == "/opt/cuda/bin/nvcc"
    cfg = cls.config_settings(None, Spec({"~cuda"}), "/prefix")
    assert cfg["cmake.define.UMSCOPE_CUDA"] == "OFF" and "cmake.define.CMAKE_CUDA_COMPILER" not in cfg


def _reframe():
    """reframe of this Python's installation (pip puts it beside the interpreter), else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "reframe")
    return os.environ.get("UMSCOPE_REFRAME") or (beside if os.path.exists(beside) else shutil.which("reframe"))


def _run_reframe(tmp_path, *extra):
    tmp_path.mkdir(exist_ok=True)
    report = tmp_path / "report.json"
    env = dict(os.environ, UMSCOPE_RFM_REPORT=str(report))
    res = subprocess.run([_reframe(), "-C", str(ROOT / "contrib/reframe/config/local.py"),
                          "-c", str(ROOT / "contrib/reframe/umscope_checks.py"), "-t", "cpu",
                          "--prefix", str(tmp_path / "rfm"), "-S", f"umscope={sys.executable} -m umscope", *extra, "-r"],
                         capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    data = json.loads(report.read_text())
    return res, {tc["family"]: tc for run in data["runs"] for tc in run["testcases"]}


@pytest.mark.skipif(not _reframe(), reason="reframe-hpc is not installed (it is in the test extra)")
def test_reframe_cpu_families_pass_with_the_local_configuration(tmp_path):
    res, cases = _run_reframe(tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert {f for f, tc in cases.items() if tc["result"] == "pass"} == {"cpu-stream", "latency", "pingpong"}
    perf = {k.rsplit(":", 1)[-1]: v for k, v in cases["cpu-stream"]["perfvalues"].items()}
    assert set(perf) == {"read", "write", "copy"} and all(v[0] > 0 and v[4] == "GB/s" for v in perf.values())
    assert {k.rsplit(":", 1)[-1] for k in cases["pingpong"]["perfvalues"]} == {"round_trip"}


@pytest.mark.skipif(not _reframe(), reason="reframe-hpc is not installed (it is in the test extra)")
def test_reframe_references_are_efficiencies_of_the_bound(tmp_path):
    # A machine description whose host-memory peak no CPU here reaches half of: the efficiency
    # reference (at least min_efficiency of the bound) must fail the CPU stream check.
    machine = tmp_path / "machine.yaml"
    machine.write_text("name: test fixture, not a machine\ndatapaths:\n  host_memory: 100000\n")
    res, cases = _run_reframe(tmp_path, "-S", f"machine={machine}", "-n", "family=cpu-stream")
    assert res.returncode != 0
    tc = cases["cpu-stream"]
    assert tc["result"] == "fail" and tc["fail_phase"] == "performance"
    perf = {k.rsplit(":", 1)[-1]: v for k, v in tc["perfvalues"].items()}
    assert perf["copy_efficiency"][0] < 0.5 and perf["copy_efficiency"][1] == 1.0


@pytest.mark.skipif(not _reframe(), reason="reframe-hpc is not installed (it is in the test extra)")
def test_reframe_gates_the_node_against_a_baseline_file(tmp_path):
    # A baseline of this machine's own CPU stream figures, scaled: ten times them (every figure here is 90%
    # under it: the gate fails the check) or a tenth of them (every figure is far over: it passes).
    args = ["bench", "cpu-stream", "--kind", "system", "--size", "64M", "--threads", "1",
                                  "--reps", "5", "--no-progress", "--store", str(tmp_path / "fleet.sqlite")]
    subprocess.run([sys.executable, "-m", "umscope", *args], check=True, capture_output=True, timeout=300)
    base = tmp_path / "base.json"
    subprocess.run([sys.executable, "-m", "umscope", "compare", "--store", str(tmp_path / "fleet.sqlite"),
                    "--save-baseline", str(base), "-o", str(tmp_path / "c.html")], check=True, capture_output=True)
    doc = json.loads(base.read_text())
    assert {c["key"]["op"] for c in doc["cases"]} == {"read", "write", "copy"}
    for scale, result in ((10.0, "fail"), (0.1, "pass")):
        scaled = tmp_path / f"base{scale}.json"
        scaled.write_text(json.dumps(dict(doc, cases=[dict(c, value=c["value"] * scale) for c in doc["cases"]])))
        res, cases = _run_reframe(tmp_path / str(scale), "-S", f"baseline={scaled}", "-n", "family=cpu-stream")
        tc = cases["cpu-stream"]
        assert tc["result"] == result, res.stdout[-3000:]
        if result == "fail":
            assert tc["fail_phase"] == "sanity" and "node gate failed" in tc["fail_reason"], tc["fail_reason"]
