"""`umscope profile` on a node with two GPUs (nvidia-h200-x2): every record of the unified-memory trace and of
the hardware counters is labelled with the GPU that did the work, and a program of several processes (one per
GPU, started by a shell or by mpirun) is read as one trace. Known data movement from the um-truth family
(`--case read`: a CPU-initialised managed array read once by the GPU). Skipped with the reason elsewhere."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import run_cli
from umscope import native
from umscope.errors import UsageError
from umscope.profile import hwcounters as hc
from umscope.profile import tracer

pytestmark = pytest.mark.gpu
SIZE = 256 << 20
TOL = 0.02


@pytest.fixture(autouse=True)
def _two_gpus(monkeypatch):
    gpus = native.native_info().get("gpus") or []
    if len(gpus) < 2:
        pytest.skip(f"needs two GPUs; this machine has {len(gpus)}")
    if not tracer.tracer_path():
        pytest.skip("this build has no libumtrace (CUPTI)")
    # CUDA's ordinals in PCI order, as umscope numbers GPUs (NVML's bus ids): `--device 1` is then gpu1.
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")


def _read(device):
    return [native.umbench_path(), "run", "um-truth", "--case", "read", "--bytes", str(SIZE), "--device", str(device)]


def _profile(store_path, *cmd):
    res = run_cli("profile", "--um-trace", "--kernels", "--store", store_path, "--json", "--", *cmd, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    recs = {r["op"]: r for r in json.loads(res.stdout.strip().splitlines()[-1])}
    assert "um_trace" in recs, recs["run"]["notes"]
    return recs["um_trace"]


def _moved(um, gpu):
    return (um["driver_counters"].get(gpu) or {}).get("htod", 0)


def test_one_process_on_the_second_gpu_is_labelled_gpu1(store_path):
    um = _profile(store_path, *_read(1))
    assert um["trace_complete"] and not um["cupti_errors"], um
    assert um["processor"] == "gpu1", (um["processor"], um["by_gpu"])
    assert um["by_gpu"]["gpu1"]["kernels"] > 0 and "gpu0" not in um["by_gpu"]
    # The driver's counters per GPU: the whole array moved to gpu1, nothing to gpu0.
    assert _moved(um, "gpu1") == pytest.approx(SIZE, rel=TOL), um["driver_counters"]
    assert _moved(um, "gpu0") == 0
    assert um["by_gpu"]["gpu1"]["htod"] <= SIZE + (2 << 20)  # records: a lower bound, never more than moved


def test_two_processes_one_per_gpu_are_one_trace(store_path):
    script = f"{' '.join(_read(0))} & {' '.join(_read(1))}; wait"
    um = _profile(store_path, "bash", "-c", script)
    assert um["processes"] == 2 and um["trace_complete"], (um["processes"], um["trace_complete"])
    assert um["processor"] == "gpu0+gpu1"
    for gpu in ("gpu0", "gpu1"):
        assert um["by_gpu"][gpu]["kernels"] > 0, um["by_gpu"]
        assert _moved(um, gpu) == pytest.approx(SIZE, rel=TOL), um["driver_counters"]
    assert um["driver_counters"]["all"]["htod"] == pytest.approx(2 * SIZE, rel=TOL)


def test_mpirun_ranks_one_per_gpu_are_one_trace(store_path):
    if not shutil.which("mpirun"):
        pytest.skip("no mpirun")
    from umscope import scaleout
    launcher = scaleout.launcher_argv("mpirun", 2)
    rank_cmd = " ".join(_read("$OMPI_COMM_WORLD_LOCAL_RANK"))
    um = _profile(store_path, *launcher, "bash", "-c", rank_cmd)
    assert um["processes"] >= 2 and um["trace_complete"], (um["processes"], um["trace_complete"])
    for gpu in ("gpu0", "gpu1"):
        assert _moved(um, gpu) == pytest.approx(SIZE, rel=TOL), um["driver_counters"]


def test_counters_are_taken_on_the_gpu_that_ran_the_kernel(tmp_path):
    """A 256 MiB zero-copy read of pinned memory by a kernel on CUDA device 1: the range profiler's per-kernel
    bytes come from device 1, none from device 0."""
    lib = hc.library_path()
    if lib is None:
        pytest.skip("libumcounters is not built")
    out = tmp_path / "c.jsonl"
    env = dict(os.environ, CUDA_INJECTION64_PATH=lib, **hc.environment(out, ("kernel",), "memory", 1000))
    res = subprocess.run([native.umbench_path(), "run", "linkbytes", "--op", "zerocopy-read", "--bytes", str(SIZE),
                          "--reps", "1", "--warmup", "0", "--device", "1"], capture_output=True, text=True, env=env,
                         timeout=240)
    assert res.returncode == 0, res.stderr
    parsed = hc.read(out)
    assert not parsed["errors"] and parsed["complete"], parsed["errors"]
    reads = [b for name, b in hc.per_launch(parsed, 1) if "read_kernel" in name]
    assert reads and reads[-1]["sysmem_read"] == pytest.approx(SIZE, rel=0.03), reads
    assert not [n for n, _ in hc.per_launch(parsed, 0)]
