"""Conditions of a measurement: the flagging logic on fake NVML readings, and what is recorded without NVML."""
import os
from html import escape

from umscope import conditions


def _r(reasons=(), pids=(), **kw):
    return dict({"available": True, "device": 0, "sm_clock_mhz": 1980, "mem_clock_mhz": 2619, "temperature_c": 40,
                 "power_w": 120.0, "throttle_reasons": list(reasons), "processes": list(pids)}, **kw)


def test_reason_bits():
    assert conditions.reasons_of(0) == []
    assert conditions.reasons_of(0x1) == ["gpu_idle"]
    assert conditions.reasons_of(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert conditions.reasons_of(0x8 | 0x1000) == ["hw_slowdown", "unknown_0x1000"]


def test_idle_and_clean_readings_are_not_flagged():
    assert conditions.flags(_r(), _r()) == []
    assert conditions.flags(_r(["gpu_idle"]), _r(["gpu_idle"])) == []


def test_throttled_before_or_after_is_flagged_with_the_reason():
    assert conditions.flags(_r(["sw_power_cap"]), _r()) == ["throttled before: sw_power_cap"]
    assert conditions.flags(_r(["gpu_idle"]), _r(["gpu_idle", "hw_thermal_slowdown"])) == [
        "throttled after: hw_thermal_slowdown"]
    assert conditions.flags(_r(["hw_slowdown"]), _r(["sw_thermal_slowdown"])) == [
        "throttled before: hw_slowdown", "throttled after: sw_thermal_slowdown"]


def test_other_processes_are_flagged_own_ones_are_not():
    assert conditions.flags(_r(pids=[os.getpid()]), _r()) == []
    assert conditions.flags(_r(pids=[111]), _r(pids=[222, 111]), own_pids=[333]) == [
        "shared: other processes on the GPU (pids 111 222)"]
    assert conditions.flags(_r(pids=[333]), _r(), own_pids=[333]) == []


def test_unavailable_readings_flag_nothing_and_keep_the_reason():
    off = {"available": False, "reason": "nvidia-ml-py (pynvml) is not installed"}
    assert conditions.flags(off, off) == []
    recs = conditions.attach([{"op": "read"}], off, off)
    assert recs[0]["conditions"] == {"before": off, "after": off, "flags": []}
    html = conditions.report_html([{"extra": recs[0]}], escape)
    assert "unavailable: nvidia-ml-py (pynvml) is not installed" in html


def test_flagged_cases_reach_the_report():
    recs = conditions.attach([{"op": "read", "case_id": "gpu-stream device"}], _r(["sw_power_cap"]), _r())
    rows = [{"case_id": r["case_id"], "extra": r} for r in recs]
    assert conditions.flagged_cases(rows) == {"gpu-stream device": ["throttled before: sw_power_cap"]}
    html = conditions.report_html(rows, escape)
    assert "gpu-stream device" in html and "throttled before: sw_power_cap" in html
    clean = conditions.attach([{"op": "read", "case_id": "x"}], _r(), _r())
    assert "No case was measured while the GPU was throttled" in conditions.report_html(
        [{"case_id": "x", "extra": clean[0]}], escape)


def test_read_without_a_gpu_says_why():
    r = conditions.read(0)
    if not r["available"]:
        assert r["reason"]
    else:
        for k in ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w", "throttle_reasons", "processes"):
            assert k in r or k in r.get("unavailable", {}), k


def test_every_case_of_a_run_records_its_conditions(store_path):
    from conftest import run_cli
    from umscope.store import Store
    res = run_cli("bench", "selftest", "--mode", "ok", "--store", store_path)
    assert res.returncode == 0, res.stderr
    (rec,) = Store(store_path).records()
    c = rec["extra"]["conditions"]
    assert set(c) == {"before", "after", "flags"}
    assert c["before"]["available"] in (True, False)
    if not c["before"]["available"]:
        assert c["before"]["reason"]
