"""GPU tests of the allocation-interface kinds (async, vmm, hostalloc) in every family that takes a kind: each
case is verified, or skipped with the driver's reason (one line) where the driver cannot serve the location."""
import json
import sys

import pytest

from conftest import run_cli, umbench
from umscope import native

pytestmark = pytest.mark.gpu

# The device-located and host-located forms of each interface. vmm at a host location needs the driver's
# host-NUMA (or host) support for cuMemCreate: a skip naming the driver's refusal is allowed there only.
NEW_KINDS = ["async", "async,pool=host", "vmm", "vmm,location=host", "vmm,location=host:0",
             "hostalloc", "hostalloc,flags=mapped+wc+portable", "hostalloc,flags=wc"]
MAY_SKIP = ("vmm,location=host", "async,pool=host")  # the driver's support of host locations varies
ON_GPU = {"async": "gpu", "async,pool=host": "host", "vmm": "gpu", "vmm,location=host": "host",
          "vmm,location=host:0": "host", "hostalloc": "host", "hostalloc,flags=mapped+wc+portable": "host",
          "hostalloc,flags=wc": "host"}


def _out(res):
    lines = [json.loads(l) for l in res.stdout.splitlines() if l.startswith("{")]
    return [l for l in lines if l["type"] == "record"], lines[-1]


def _skip_is_the_drivers(kind, status):
    """A skip is allowed only for a host location, and only with the driver's refusal in one line."""
    assert kind.startswith(MAY_SKIP), status
    assert "refused by the driver" in status["reason"] and "\n" not in status["reason"], status
    assert "CUDA_ERROR" in status["reason"] or "cudaError" in status["reason"], status


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_gpu_stream_on_each_new_kind_is_verified_and_located(kind):
    res = umbench("run", "gpu-stream", "--kind", kind, "--bytes", "256M", "--reps", "3")
    recs, status = _out(res)
    if status["status"] == "skipped":
        return _skip_is_the_drivers(kind, status)
    assert status["status"] == "ok", (res.stdout, res.stderr)
    assert {r["op"] for r in recs} == {"read", "write", "copy", "triad"}
    for r in recs:
        assert r["verified"] == "cpu-reference" and r["median"] > 0, r
        assert r["kind"] == kind.split(",")[0] and r["location"] == ON_GPU[kind], r
        assert r["reachable_by"] == ("gpu" if ON_GPU[kind] == "gpu" else "gpu+cpu"), r


@pytest.mark.parametrize("kind", NEW_KINDS)
@pytest.mark.parametrize("engine", ["ce", "sm"])
def test_copies_to_and_from_each_new_kind_are_verified(kind, engine):
    for src, dst in ((kind, "device"), ("device", kind)):
        res = umbench("run", "copy", "--kind", src, "--dst", dst, "--engine", engine, "--bytes", "4K,64M", "--reps", "3")
        recs, status = _out(res)
        if status["status"] == "skipped":
            return _skip_is_the_drivers(kind, status)
        assert status["status"] == "ok", (src, dst, res.stdout, res.stderr)
        assert [r["bytes"] for r in recs] == [4096, 64 << 20]
        assert all(r["verified"] == "cpu-reference" and r["median"] > 0 for r in recs)


@pytest.mark.parametrize("kind", ["async,pool=host", "vmm,location=host:0", "hostalloc", "hostalloc,flags=wc"])
def test_cpu_stream_reaches_the_host_located_new_kinds(kind):
    res = umbench("run", "cpu-stream", "--kind", kind, "--bytes", "64M", "--reps", "3", "--threads", "1")
    recs, status = _out(res)
    if status["status"] == "skipped":
        # vmm host memory the driver maps for the GPU but not for the CPU: the CPU's refusal, in one line.
        assert kind.startswith("vmm") and "refused by the driver" in status["reason"], status
        return
    assert status["status"] == "ok", res.stdout
    assert len(recs) == 3 and all(r["verified"] and r["location"] == "host" for r in recs)


@pytest.mark.parametrize("kind", ["async", "vmm"])
def test_the_cpu_cannot_reach_gpu_located_new_kinds_and_says_so(kind):
    res = umbench("run", "cpu-stream", "--kind", kind, "--bytes", "64M", "--threads", "1")
    _, status = _out(res)
    assert status["status"] == "skipped" and "not mapped into the CPU's address space" in status["reason"], status


@pytest.mark.parametrize("kind", ["async", "vmm", "hostalloc,flags=wc"])
def test_gpu_pointer_chase_on_new_kinds(kind):
    recs, status = _out(umbench("run", "latency", "--kind", kind, "--bytes", "4M", "--steps", "20000"))
    assert status["status"] == "ok", status
    chase = [r for r in recs if r["kind"] == kind.split(",")[0]]
    assert chase and all(r["verified"] and r["median"] > 0 for r in chase)


def test_gemm_with_each_matrix_from_another_interface_matches_the_reference():
    res = umbench("run", "gemm", "--precision", "fp64", "--n", "512", "--check", "1", "--place-a", "async",
                  "--place-b", "vmm", "--place-c", "hostalloc,flags=mapped", timeout=600)
    recs, status = _out(res)
    assert status["status"] == "ok", (status, res.stderr)
    rec = recs[0]
    assert (rec["place_a"], rec["place_b"], rec["place_c"]) == ("async", "vmm", "hostalloc,flags=mapped")
    assert rec["checked"] is True


def test_repeated_async_buffers_give_their_memory_back():
    """Each async buffer is freed to its pool and the pool trimmed: the cases of one batch process together
    allocate twice the GPU's free memory, so they all finish only if every case gave its memory back."""
    import subprocess
    free = native.native_info()["gpus"][0]["free_mem"]
    size = min(4 << 30, free // 5) // 4096 * 4096
    cases = -(-2 * free // (3 * size)) + 1  # triad: three arrays a case
    lines = "".join(f"gpu-stream\t--kind\tasync\t--bytes\t{size}\t--ops\ttriad\t--reps\t1\n" for _ in range(cases))
    res = subprocess.run([native.umbench_path(), "batch"], input=lines, capture_output=True, text=True, timeout=600)
    statuses = [json.loads(l) for l in res.stdout.splitlines() if l.startswith('{"type":"status"')]
    assert len(statuses) == cases and all(s["status"] == "ok" for s in statuses), res.stdout[-2000:]


@pytest.mark.parametrize("kind", ["async", "vmm", "hostalloc,flags=mapped"])
def test_place_serves_pytorch_from_each_new_kind(kind, store_path):
    pytest.importorskip("torch")
    prog = ("import torch\n"
            "x = torch.arange(1 << 22, device='cuda', dtype=torch.float64)\n"
            "y = (x * 2).sum().item()\n"
            "n = 1 << 22\n"
            "assert y == n * (n - 1), y\n"
            "print('ok', y)\n")
    res = run_cli("place", "--kind", kind, "--store", store_path, "--json", "--", sys.executable, "-c", prog)
    assert res.returncode == 0, res.stderr
    recs = json.loads(res.stdout.strip().splitlines()[-1])
    served = {r["kind"] for r in recs if r["op"] == "allocations" and r["counters"]["requests"] > 0}
    assert served == {kind.split(",")[0]}, recs


@pytest.mark.parametrize("kind", ["async", "vmm", "hostalloc"])
def test_nccl_takes_buffers_of_each_new_kind(kind):
    if len(native.native_info()["gpus"]) < 2:
        pytest.skip("NCCL needs 2 GPUs")
    recs, status = _out(umbench("run", "nccl", "--kind", kind, "--bytes", "1MiB", "--op", "allreduce", "--reps", "3",
                                timeout=600))
    if status["status"] == "skipped" and ("NCCL not found" in status["reason"] or "cannot load NCCL" in status["reason"]):
        pytest.skip(status["reason"])
    assert status["status"] == "ok", status
    assert recs and all(r["verified"] for r in recs)
