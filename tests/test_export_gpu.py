"""On a GPU: a real copy run's nvbandwidth export, read back by the reader written to nvbandwidth's
schema, carries exactly the H2D/D2H figures of umscope's records; every export format writes."""

import json

import pytest

from conftest import run_cli
from test_export import read_nvbandwidth
from umscope.store import Store


@pytest.mark.gpu
def test_nvbandwidth_export_of_a_gpu_run_equals_the_records(tmp_path):
    store = str(tmp_path / "gpu.sqlite")
    res = run_cli("bench", "copy", "--kind", "pinned", "--kind", "device", "--size", "64M,256M", "--reps", "5",
                  "--store", store, "--no-progress", "--report", str(tmp_path / "r.html"))
    assert res.returncode == 0, res.stderr[-2000:]
    out = run_cli("export", "--format", "nvbandwidth", "--store", store, "--run", "1")
    assert out.returncode == 0, out.stderr
    got = read_nvbandwidth(json.loads(out.stdout))
    recs = [r for r in Store(store).records(1) if r["status"] == "ok" and r["benchmark"] == "copy"]

    def rec(src, dst, op):
        (r,) = [r for r in recs if r["kind"] == src and r["extra"]["dst_kind"] == dst and r["op"] == op
                and r["extra"]["direction"] == "uni" and r["bytes"] == 256 << 20]
        return r["median"]

    for name, src, dst, op in [("host_to_device_memcpy_ce", "pinned", "device", "ce-copy"),
                               ("device_to_host_memcpy_ce", "device", "pinned", "ce-copy"),
                               ("host_to_device_memcpy_sm", "pinned", "device", "sm-copy"),
                               ("device_to_host_memcpy_sm", "device", "pinned", "sm-copy")]:
        assert got[name][0][0] == pytest.approx(rec(src, dst, op), rel=1e-5), name
    doc = json.loads(out.stdout)["nvbandwidth"]
    h2d = next(t for t in doc["testcases"] if t["name"] == "host_to_device_memcpy_ce")
    assert h2d["bufferSize"] == 256 and h2d["testSamples"] == 5
    for fmt in ("csv", "openmetrics", "caliper"):
        r = run_cli("export", "--format", fmt, "--store", store, "--run", "1")
        assert r.returncode == 0 and len(r.stdout) > 200, (fmt, r.stderr)
