"""CPU benchmarks run here: each must verify its data and report sane statistics."""
import json
import os

from conftest import run_cli, umbench
from umscope import native


def _records(res):
    return [json.loads(l) for l in res.stdout.splitlines() if '"type":"record"' in l]


def test_cpu_stream_system_memory_verified():
    res = umbench("run", "cpu-stream", "--kind", "system", "--bytes", "32M", "--reps", "5", "--threads", "1,2")
    assert res.returncode == 0, res.stdout
    recs = _records(res)
    assert {(r["op"], r["threads"]) for r in recs} == {(o, t) for o in ("read", "write", "copy") for t in (1, 2)}
    for r in recs:
        assert r["verified"] is True
        assert r["unit"] == "GB/s" and r["n"] == 5 and len(r["samples"]) == 5
        assert 0 < r["min"] <= r["median"] <= r["max"]
        # Host memory bandwidth of any machine this runs on: well above 0.1 GB/s, below 10 TB/s.
        assert 0.1 < r["median"] < 10000
    copy = next(r for r in recs if r["op"] == "copy")
    assert copy["traffic_bytes"] == 2 * copy["bytes"]


def test_cpu_stream_with_thp_and_numa_binding():
    res = umbench("run", "cpu-stream", "--kind", "numa:0,page=thp", "--bytes", "8M", "--reps", "2",
                  "--threads", "1", "--ops", "read")
    if os.path.exists("/sys/devices/system/node/node0") and os.path.exists("/sys/kernel/mm/transparent_hugepage"):
        assert '"status":"ok"' in res.stdout, res.stdout
    else:
        assert '"status":"skipped"' in res.stdout
    for r in _records(res):
        assert r["kind"] == "numa:0" and r["policy"] == "first_touch=cpu,page=thp"
        assert r["residency"] in ("node0", "unknown")


def test_missing_numa_node_is_skipped_with_reason():
    res = umbench("run", "cpu-stream", "--kind", "numa:77", "--bytes", "1M")
    assert res.returncode == 0
    assert '"status":"skipped"' in res.stdout and "NUMA node 77 does not exist" in res.stdout


def test_device_memory_is_not_cpu_reachable():
    res = umbench("run", "cpu-stream", "--kind", "device", "--bytes", "1M")
    assert res.returncode == 0 and '"status":"skipped"' in res.stdout


def test_system_memory_gpu_access_depends_on_capability():
    res = umbench("run", "gpu-stream", "--kind", "system", "--bytes", "1M")
    assert '"status":"skipped"' in res.stdout or '"status":"ok"' in res.stdout
    info = native.native_info()
    if info["gpus"] and not info["gpus"][0]["pageable_memory_access"]:
        assert "HMM or ATS" in res.stdout


def test_host_memory_guard_refuses():
    res = umbench("run", "cpu-stream", "--kind", "system", "--bytes", "64T")
    assert res.returncode == 4
    assert '"status":"refused"' in res.stdout and "--allow-host-overcommit" in res.stdout


def test_bench_cli_end_to_end(store_path, tmp_path):
    report = tmp_path / "r.html"
    res = run_cli("bench", "cpu-stream", "--kind", "system", "--size", "16M", "--threads", "1", "--reps", "3",
                  "--store", store_path, "--report", str(report))
    assert res.returncode == 0, res.stderr
    assert "cpu-stream" in res.stdout and "GB/s" in res.stdout
    assert report.exists() and "cpu-stream" in report.read_text()
    exp = run_cli("export", "--format", "csv", "--store", store_path)
    assert exp.returncode == 0 and exp.stdout.count("\n") == 4  # header + read, write, copy
