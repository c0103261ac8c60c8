"""The calibrated model's CPU-side figures and the validation's measurement plan (CPU only, well under a second)."""
import importlib
import sys
from pathlib import Path

import pytest

from umscope.model import calibrated

GIB = 1 << 30


def _touch(kind, ms, values="hash", threads=16, op="first-touch", nbytes=128 << 20):
    return {"benchmark": "firsttouch", "op": op, "kind": kind, "by": "cpu", "processor": "cpu", "bytes": nbytes,
            "median": ms, "threads": threads, "values": values}


def test_the_applications_touch_pattern_wins_over_a_constant_stream():
    recs = [_touch("managed", 30, "const"), _touch("managed", 10), _touch("managed", 14), _touch("managed", 40, "const"),
            _touch("system", 5, "const")]
    fig, src = calibrated.figures_from_records(recs)
    # the two values=hash records' median, per GiB of the 128 MiB touched; the constant ones ignored
    assert fig["cpu_first_touch_ms_per_gib"] == pytest.approx(12 * 8)
    assert "values=hash" in src["cpu_first_touch_ms_per_gib"]
    # where only the constant stream was measured (records before calibrated-5), it is the figure
    assert fig["system_first_touch_ms_per_gib"] == pytest.approx(5 * 8)


def test_a_thread_sweep_does_not_enter_the_all_threads_figure():
    recs = [_touch("pinned", 2), _touch("pinned", 4), _touch("pinned", 50, threads=1)]
    fig, _ = calibrated.figures_from_records(recs)
    assert fig["pinned_first_touch_ms_per_gib"] == pytest.approx(3 * 8)


def test_before_and_after_pool_into_one_median():
    before = [_touch("registered", 10, op="alloc") | {"values": None}]
    after = [_touch("registered", 20, op="alloc") | {"values": None}, _touch("registered", 60, op="alloc")]
    fig, src = calibrated.figures_from_records(before + after)
    assert fig["registered_alloc_ms_per_gib"] == pytest.approx(20 * 8)
    assert "median of 3" in src["registered_alloc_ms_per_gib"]


def test_managed_init_is_explicits_plus_the_measured_difference_of_first_writes():
    calib = {"iterations": 2, "compute_ms": 2.0, "context_ms": 0.0, "alloc_ms": 1.0, "init_ms": 20.0,
             "transfer_ms": 3.0, "back_ms": 4.0, "free_ms": 1.0, "data_bytes": GIB / 4, "in_bytes": GIB / 8,
             "out_bytes": GIB / 8, "inout_bytes": 0, "arrays": f"a:in:{GIB // 8},b:out:{GIB // 8}"}
    fig = {"system_first_touch_ms_per_gib": 40.0, "cpu_first_touch_ms_per_gib": 56.0, "first_pass_gbps": 10.0,
           "migrate_gbps": 40.0, "pinned_first_touch_ms_per_gib": 16.0, "remote_gbps": 50.0}
    assert calibrated.predict("x", "managed", calib, fig)["init_ms"] == pytest.approx(20 + (56 - 40) / 8)
    assert calibrated.predict("x", "pinned", calib, fig)["init_ms"] == pytest.approx(20 - (40 - 16) / 8)


@pytest.fixture
def mv(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "bench"))
    return importlib.import_module("model_validate")


def test_modes_run_in_rounds_and_the_spread_is_reported(mv, monkeypatch, tmp_path):
    order = []

    def fake_run(name, footprint, mode, dev, tag="app"):
        order.append(mode if tag == "app" else tag)
        t = 100.0 + 10 * order.count(mode)  # each mode's later runs slower: the spread
        return {"app": name, "mode": mode, "iterations": 2, "compute_ms": 2.0, "context_ms": 0.0, "alloc_ms": 1.0,
                "init_ms": t - 11, "transfer_ms": 3.0, "back_ms": 4.0, "free_ms": 1.0, "total_ms": t,
                "data_bytes": GIB / 4, "in_bytes": GIB / 8, "out_bytes": GIB / 8, "inout_bytes": 0}
    monkeypatch.setattr(mv, "run_app", fake_run)
    monkeypatch.setattr(mv, "figure_records", lambda *a, **k: [])
    monkeypatch.setattr(mv, "touch_records", lambda *a, **k: [])
    monkeypatch.setattr(mv, "with_packaged", lambda fig: (dict(fig, first_pass_gbps=10.0, migrate_gbps=40.0,
                                                                remote_gbps=50.0), {}))
    monkeypatch.setattr(mv.probe, "probe_gpu", lambda: {"gpus": [{"name": "fake"}]})
    out = tmp_path / "mv.md"
    monkeypatch.setattr(sys, "argv", ["model_validate.py", "--apps", "triad", "--calibration-runs", "3",
                                      "--mode-runs", "2", "--no-micro", "--out", str(out),
                                      "--validated-out", str(tmp_path / "v.json")])
    assert mv.main() == 0
    modes = list(mv.MODES)
    # round 1 and 2: every mode; round 3: explicit alone (the calibration's third); no warm-up (no library)
    assert order == modes + modes + ["explicit"]
    text = out.read_text()
    # managed measured 110 and 120 ms: median 115, spread (120 - 110) / 115
    assert "| triad | managed | 115.0 | 9% |" in text
    # gemm loads cuBLAS: one discarded explicit run before its rounds
    order.clear()
    monkeypatch.setattr(sys, "argv", ["model_validate.py", "--apps", "sgemm", "--calibration-runs", "1",
                                      "--mode-runs", "1", "--no-micro", "--out", str(out),
                                      "--validated-out", str(tmp_path / "v.json")])
    assert mv.main() == 0
    assert order == ["warmup"] + modes


def test_managed_free_is_read_from_migrated_pages_where_measured():
    gpu = dict(_touch("managed", 1.0, op="free"), by="gpu", processor="gpu0", values=None)
    migrated = dict(gpu, median=2.0, pretouch="cpu")
    first = dict(gpu, op="first-touch", median=30.0, pretouch="cpu")  # a migration, not a GPU first touch
    fig, src = calibrated.figures_from_records([gpu, migrated, first])
    assert fig["managed_free_gpu_ms_per_gib"] == pytest.approx(16)
    assert "migrated" in src["managed_free_gpu_ms_per_gib"]
    assert "gpu_first_touch_ms_per_gib" not in fig


def test_the_environment_paragraph_sums_the_huge_pages_by_mode(mv):
    envs = [{"_at": "start", "enabled": "always [madvise] never", "defrag": "[madvise]", "free_2m_blocks": 12,
             "meminfo": {"AnonHugePages": "0 kB"}},
            {"_at": "end", "free_2m_blocks": 7, "meminfo": {"AnonHugePages": "4096 kB"}}]
    runs = [{"mode": "managed", "_vmstat": {"thp_fault_alloc": 2, "thp_fault_fallback": 1}},
            {"mode": "managed", "_vmstat": {"thp_fault_alloc": 3, "thp_fault_fallback": 0}},
            {"mode": "pinned", "_vmstat": {}}]
    text = mv.env_text(envs, runs)
    assert "free 2 MiB blocks 12 (start), 7 (end)" in text and "AnonHugePages 0 kB (start), 4096 kB (end)" in text
    assert "managed 5 / 1 (2 runs)" in text and "pinned" not in text.split("summed over the runs")[1]
    assert mv.env_text([], runs) == ""
