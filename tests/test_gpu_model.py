"""GPU tests of the calibrated model's microbenchmarks: gpu-stream's access patterns over pinned memory
(make test-gpu; skipped with the reason elsewhere)."""
import json

import pytest

from conftest import umbench

pytestmark = pytest.mark.gpu


def _out(res):
    lines = [json.loads(l) for l in res.stdout.splitlines() if l.startswith("{")]
    return [l for l in lines if l["type"] == "record"], lines[-1]


def test_random_accesses_and_the_working_set_sweep_verified():
    args = ["--bytes", "64M", "--ops", "gather,scatter,gather-scatter,reread", "--accesses", str(1 << 20),
            "--window", "4M,64M", "--passes", "4", "--reps", "3"]
    pinned, st = _out(umbench("run", "gpu-stream", "--kind", "pinned", *args))
    assert st["status"] == "ok", st
    device, st = _out(umbench("run", "gpu-stream", "--kind", "device", *args))
    assert st["status"] == "ok", st
    for recs in (pinned, device):
        assert sorted(r["op"] for r in recs) == ["gather", "gather-scatter", "reread", "reread", "scatter"]
        assert all(r["verified"] == "cpu-reference" for r in recs)
        assert sorted(r["window"] for r in recs if r["op"] == "reread") == [4 << 20, 64 << 20]
    rate = {(k, r["op"]): r["median"] for k, recs in (("pinned", pinned), ("device", device)) for r in recs
            if r["op"] != "reread"}
    # Random 8-byte accesses: every one crosses the link from pinned memory, while device memory serves them
    # from HBM and the L2 (on the H100 0.5-0.7 G/s against tens of G/s)
    for op in ("gather", "scatter", "gather-scatter"):
        assert 0.01 < rate[("pinned", op)] < rate[("device", op)] / 3, (op, rate)
    # Every pass of the sweep reads its window: bytes counted are window x passes, the rate positive
    for r in pinned + device:
        if r["op"] == "reread":
            assert r["traffic_bytes"] == 4 * r["window"] and r["median"] > 0


def test_bfs_declares_its_random_accesses_on_the_gpu():
    res = umbench("run", "bfs", "--footprint", "32M", "--mode", "pinned", "--check", "1")
    recs, st = _out(res)
    assert st["status"] == "ok", st
    r = recs[0]
    assert r["gather_accesses"] > r["edges"] and r["scatter_accesses"] > r["reached"]


def test_access_width_streams_verified_and_counted():
    recs, st = _out(umbench("run", "gpu-stream", "--kind", "pinned", "--bytes", "32M", "--ops", "read-words,copy-words",
                            "--width", "4,16", "--reps", "3"))
    assert st["status"] == "ok", st
    got = sorted((r["op"], r["access_bytes"]) for r in recs)
    assert got == [("copy-words", 4), ("copy-words", 16), ("read-words", 4), ("read-words", 16)]
    for r in recs:
        assert r["verified"] == "cpu-reference" and r["median"] > 0
        assert r["traffic_bytes"] == (2 if r["op"] == "copy-words" else 1) * (32 << 20)
    # Over the link both widths move the same bytes: neither rate is a tenth of the other (H100: 51 GB/s both)
    rd = {r["access_bytes"]: r["median"] for r in recs if r["op"] == "read-words"}
    assert rd[4] > rd[16] / 10 and rd[16] > rd[4] / 10


def test_tracer_kernel_records_carry_the_launch_grid(tmp_path):
    import os
    import subprocess

    from umscope import native
    from umscope.profile import tracer
    lib = tracer.tracer_path()
    if lib is None:
        pytest.skip("built without CUPTI (no libumtrace)")
    tf = tmp_path / "t.jsonl"
    env = dict(os.environ, CUDA_INJECTION64_PATH=lib, UMSCOPE_TRACE_FILE=str(tf))
    res = subprocess.run([native.umbench_path(), "run", "migration", "--kind", "managed,first_touch=cpu", "--bytes",
                          "16M", "--iterations", "1", "--blocks", "7", "--block", "256"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert '"status":"ok"' in res.stdout.replace(" ", ""), res.stdout[-500:]
    ks = [json.loads(l) for l in tf.read_text().splitlines() if '"k":"kernel"' in l]
    assert any(k["g"] == [7, 1, 1] and k["bl"] == [256, 1, 1] and k["rg"] > 0 for k in ks), ks[:3]
