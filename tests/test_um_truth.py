"""The um-truth cases (managed-memory programs whose data movement is known exactly) traced with libumtrace:
the bytes counted each way within 2% of the known bytes, or the shortfall listed (umscope.profile.truth
.NOT_REPORTED, docs/tracing.md) as the driver not reporting it. GPU tests; the CPU tests check the comparison."""
import pytest

from umscope import native
from umscope.profile import tracer, truth

CASES = ["read", "writeback", "prefetch", "read-mostly", "pingpong", "host-preferred", "gpu-first"]


def test_verdicts_compare_known_and_counted_within_two_percent():
    res = {"case": "read", "bytes": "1G", "known_htod": 1 << 30, "known_dtoh": 0,
           "counted": {"htod": int((1 << 30) * 0.985), "dtoh": 0}}
    (h, d) = truth.verdicts(res)
    assert h[:4] == ("htod", 1 << 30, int((1 << 30) * 0.985), True) and d[3] is True
    res["counted"]["htod"] = int((1 << 30) * 0.97)  # 3% short: outside
    res["counted"]["dtoh"] = 64 << 20  # 6% of the array moved back where nothing should
    assert [v[3] for v in truth.verdicts(res)] == [False, False]
    res["known_dtoh"] = -1  # no known count: not compared
    assert [v[0] for v in truth.verdicts(res)] == ["htod"]
    res["driver"] = {"htod": 1 << 30, "dtoh": 0}  # the UVM driver's counters, compared on their own
    assert [v[3] for v in truth.verdicts(res, "driver")] == [True]


def test_the_cases_are_named_once_for_the_option_the_records_and_the_help():
    """--case's choices, the benchmark's operations (`umbench list --json`) and its help name the same cases."""
    import json
    import subprocess
    umbench = native.umbench_path()
    reg = json.loads(subprocess.run([umbench, "list", "--json"], capture_output=True, text=True, timeout=60).stdout)
    b = next(x for x in reg["benchmarks"] if x["name"] == "um-truth")
    assert set(CASES) < set(b["ops"]) and "thrash" in b["ops"]
    res = subprocess.run([umbench, "run", "um-truth", "--case", "none-such"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2 and f"({', '.join(b['ops'])})" in res.stdout
    assert f"(--case {', '.join(b['ops'])})" in b["help"]


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES)
def test_um_truth_counted_bytes_match_the_known_bytes(case):
    lib = tracer.tracer_path()
    if not lib:
        pytest.skip("this build has no libumtrace (CUPTI)")
    res = truth.run_case(native.umbench_path(), lib, case, "1G", {}, 3 if case == "pingpong" else None, 120)
    assert res["rc"] == 0 and res["known_htod"] is not None, res["status"]
    assert res["complete"] and not res["diag"]["errors"], res["diag"]
    assert not res["dropped"], res["dropped"]
    # The UVM driver's counters: every byte, each way.
    assert res["driver"], res["diag"]["uvm"]
    for d, known, counted, ok, _ in truth.verdicts(res, "driver"):
        assert ok, (case, d, known, counted, res["diag"]["uvm"])
    # CUPTI's records: every byte, or the shortfall listed (with its reason) as the driver not reporting it.
    for d, known, counted, ok, listed in truth.verdicts(res):
        assert ok or listed, (case, d, known, counted, res["by_cause"], res["diag"]["end"])
    if case == "prefetch":  # an explicit prefetch is CUPTI's cause "user", and the GPU then never faults
        assert res["by_cause"]["htod"].get("user", 0) >= 0.98 * res["known_htod"], res["by_cause"]
        assert res["counted"]["gpu_fault"] == 0


@pytest.mark.gpu
def test_um_truth_thrash_reports_thrashing_or_is_listed():
    lib = tracer.tracer_path()
    if not lib:
        pytest.skip("this build has no libumtrace (CUPTI)")
    res = truth.run_case(native.umbench_path(), lib, "thrash", "64M", {}, 20, 120)
    assert res["rc"] == 0, res["status"]
    # The pages did move both ways while the two processors fought over them (the driver's own counters) ...
    assert res["driver"]["htod"] > 0 and res["driver"]["dtoh"] > 0, res["driver"]
    # ... and the driver reported the thrashing, or the kind is listed as not reliably reported.
    assert res["counted"]["thrashing"] > 0 or ("thrash", "thrashing") in truth.NOT_REPORTED, res["counted"]
