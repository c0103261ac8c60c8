"""Conditions of a measurement: the flagging logic on fake NVML readings, and what is recorded without NVML."""
import os
from html import escape

from umscope import conditions, nvml


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


def test_in_a_batch_the_reading_after_one_case_is_the_reading_before_the_next(tmp_path, monkeypatch):
    """8 NVML calls a reading, two a case: between two cases of a batch on the same GPU one reading serves both
    (umbench starts the next case as it ends one). A case in its own process, the first case of a batch and a
    case on another GPU are read before they start."""
    from umscope import suite
    from umscope.store import Store
    from umscope.suite import Case
    reads = []

    def read(device=0, bus_id=None):
        reads.append(device)
        return _r(n=len(reads), device=device)
    monkeypatch.setattr(conditions, "read", read)
    cases = [Case("selftest", None, {"mode": "ok", "n": str(i)}) for i in range(3)]
    cases += [Case("selftest", None, {"mode": "ok", "device": "1"}), Case("firsttouch", "system", {"by": "cpu"})]
    from umscope import native
    umbench = native.umbench_path()
    monkeypatch.setattr(Case, "argv", lambda self, options: [umbench, "run", "selftest", "--mode", "ok"])
    s = Store(tmp_path / "s.sqlite")
    rid = s.create_run("bench", "test", suite.plan_to_json(cases), {}, {})
    opts = {"device": 0, "reps": None, "warmup": None}
    assert suite.run_cases(s, rid, cases, opts, progress=False) == "complete"
    got = {r["case_id"]: r["extra"]["conditions"] for r in s.records(rid)}
    c = [got[x.case_id] for x in cases]
    assert [x["before"]["n"] for x in c[1:3]] == [x["after"]["n"] for x in c[0:2]]
    assert c[3]["before"]["device"] == 1 and c[3]["before"]["n"] not in {x["after"]["n"] for x in c}
    assert c[4]["before"]["n"] != c[3]["after"]["n"]  # its own process: read before it
    assert len(reads) == 2 + 1 + 1 + 2 + 2  # the batch's 3 cases on GPU 0, the GPU-1 case, the lone case


def test_a_gpu_is_looked_up_once_and_its_constants_read_once(monkeypatch):
    """A reading is 8 NVML calls, about 1 ms each on 4 x H100 (docs/suite-time.md), around every case: the
    handle by PCI bus id and the maximum SM clock (a constant of the GPU) are read once per GPU."""
    calls = []

    class Fake:
        NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 0

        def nvmlDeviceGetHandleByPciBusId(self, bus):
            calls.append(("handle", bus))
            return bus

        def nvmlDeviceGetMaxClockInfo(self, h, which):
            calls.append(("max", h))
            return 1980

        def __getattr__(self, name):
            return lambda *a: calls.append((name, a[0])) or (0 if "Processes" not in name else [])
    monkeypatch.setattr(conditions, "_state", {})
    monkeypatch.setattr(nvml, "_init", lambda: (Fake(), ""))
    nvml._handle.cache_clear()
    try:
        got = [conditions.read(0, "0000:00:06.0") for _ in range(3)] + [conditions.read(1, "0000:00:07.0")]
    finally:
        nvml._handle.cache_clear()  # no fake handle left for the other tests
    assert all(r["available"] and r["sm_clock_max_mhz"] == 1980 for r in got)
    assert [c for c in calls if c[0] in ("handle", "max")] == [
        ("handle", "0000:00:06.0"), ("max", "0000:00:06.0"), ("handle", "0000:00:07.0"), ("max", "0000:00:07.0")]
    assert sum(c == ("nvmlDeviceGetTemperature", "0000:00:06.0") for c in calls) == 3  # the rest: every time
