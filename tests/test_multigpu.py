"""Every GPU of the node and GPU-local placement, on a GPU node (nvidia-h200-x2 for the pair tests);
skipped with the reason elsewhere."""
import json

import pytest

from conftest import run_cli, umbench
from umscope import native, probe
from umscope.report.topology import ranges

pytestmark = pytest.mark.gpu


def _out(res):
    lines = [json.loads(l) for l in res.stdout.splitlines() if l.startswith("{")]
    return [l for l in lines if l["type"] == "record"], lines[-1]


def _need_two():
    gpus = native.native_info().get("gpus") or []
    if len(gpus) < 2:
        pytest.skip(f"needs two GPUs; this machine has {len(gpus)}")


def test_info_lists_every_gpu_its_locality_and_every_pair():
    fp = probe.probe()
    topo = fp["topology"]
    n = len(fp["gpus"])
    assert [g["device"] for g in topo["gpus"]] == [g["device"] for g in fp["gpus"]]
    assert all(g["cpus"] for g in topo["gpus"])
    assert len(topo["pairs"]) == n * (n - 1)
    for p in topo["pairs"]:
        assert p["type"] in ("NVLink", "PCIe") and "cuda_p2p" in p
        if p["type"] == "NVLink":
            assert p["nvlinks"] > 0 and p["nvlink_generation"]


@pytest.mark.parametrize("engine", ["ce", "sm"])
@pytest.mark.parametrize("a,b", [(0, 1), (1, 0)])
def test_copy_both_ways_between_the_pair(engine, a, b):
    _need_two()
    for src, dst in (("device", f"peer:{b}"), (f"peer:{b}", "device")):
        res = umbench("run", "copy", "--kind", src, "--dst", dst, "--device", str(a), "--engine", engine,
                      "--bytes", "256M", "--reps", "3")
        recs, status = _out(res)
        assert status["status"] == "ok", res.stdout + res.stderr
        assert recs and all(r["verified"] and r["device"] == a and r["median"] > 10 for r in recs), recs


def test_pingpong_and_chase_across_gpus():
    _need_two()
    for kind in ("device", "peer:1", "pinned"):
        res = umbench("run", "pingpong", "--pair", "gpu-gpu", "--peer", "1", "--kind", kind, "--exchanges", "2000",
                      "--reps", "3")
        recs, status = _out(res)
        assert status["status"] in ("ok", "skipped"), res.stdout + res.stderr
        if status["status"] == "ok":
            assert recs[0]["processor"] == "gpu0-gpu1" and recs[0]["median"] > 0
    res = umbench("run", "latency", "--kind", "peer:1", "--bytes", "1M", "--reps", "2")
    recs, status = _out(res)
    assert status["status"] == "ok" and [r for r in recs if r["op"] == "chase"][0]["verified"]


def test_gemm_with_operands_on_a_peer_gpu_runs_and_is_verified():
    """Fusco et al. Fig. 15/16's peer placement: on 4 x H100 every GEMM with a peer:1 operand was skipped ("cudaMalloc
    memory is not mapped into the CPU's address space"): the runner initialised peer memory from the CPU."""
    _need_two()
    res = umbench("run", "gemm", "--n", "512", "--precision", "fp32", "--place-a", "peer:1", "--place-b", "peer:1",
                  "--place-c", "device", "--mode", "explicit", "--iterations", "2")
    recs, status = _out(res)
    assert status["status"] == "ok", res.stdout + res.stderr
    assert recs and all(r["verified"] for r in recs), recs
    assert recs[0]["place_a"] == "peer:1" and recs[0]["place_b"] == "peer:1"


def test_local_placement_pins_to_the_gpus_cpus_and_node():
    fp = probe.probe()
    local = fp["topology"]["gpus"][0]
    res = umbench("run", "copy", "--kind", "pinned", "--dst", "device", "--bytes", "64M", "--reps", "3")
    recs, status = _out(res)
    assert status["status"] == "ok"
    import os
    assert recs[0]["placement"] == "local"
    assert recs[0]["cpu_set"] == ranges(sorted(set(local["cpus"]) & os.sched_getaffinity(0)))
    if local["numa_node"] is not None:
        assert recs[0]["numa_node"] == local["numa_node"]


def test_devices_all_measures_each_gpu(store_path):
    res = run_cli("bench", "gpu-stream", "--kind", "device", "--size", "64M", "--devices", "all", "--reps", "3",
                  "--store", store_path, "--json", "--no-progress")
    assert res.returncode == 0, res.stderr
    recs = json.loads(res.stdout)
    n = len(native.native_info()["gpus"])
    assert {r["extra"]["device"] for r in recs} == set(range(n))
