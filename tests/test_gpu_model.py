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
