"""umsim's timed-replay inputs read from a trace (hand-made records, every figure worked out by hand), and the validation
against the kept H100 traces (data/sim-traces): bytes exact, and the timed replay's first
batch equal to the one the driver migrated (the measurement the uTLB's two faulted pages rest on)."""
import sys
from pathlib import Path

import pytest

from umscope.model import calibration, validation
from umscope.model import simulate as sim

ROOT = Path(__file__).resolve().parent.parent
KEPT = ROOT / "data" / "sim-traces"


def htod(s, e, v):
    return {"k": "um", "c": 1, "s": s, "e": e, "v": v, "a": 0}


def test_trace_timing_groups_services_and_copy_time():
    lines = [{"k": "kernel", "n": "read", "g": [4, 1, 1], "s": 0, "e": 1_000_000},
             {"k": "kernel", "n": "read", "g": [4, 1, 1], "s": 2_000_000, "e": 2_001_000},
             # three services: two records back to back, then gaps of 50 us and 40 us
             htod(100_000, 102_000, 8192), htod(102_000, 104_000, 4096), htod(154_000, 157_000, 4096),
             htod(197_000, 199_000, 4096)]
    t = sim.trace_timing(lines)
    assert t["groups"] == 3 and t["gap_us"] == 50.0            # gaps 40, 50: the upper median
    assert t["page_us"] == pytest.approx(9 / 5)                  # 9 us of copies for 5 pages
    assert t["later_launch_ns"] == 1000 and t["kernels_ms"] == pytest.approx(1.001)
    p, src = sim.timed_params(t, kernel_pages=256, sms=4, hbm_gbps=3000.0, fetch_us=20)
    # the later launch read 1 MiB in 1 us (over 5% of HBM: resident): 1000 ns x 4 SMs / 256 pages
    assert p["resident_ns"] == pytest.approx(15.625) and "later launch" in src
    assert (p["fetch_us"], p["batch_us"], p["utlb_faults"], p["timed"]) == (20, 30.0, 2, True)
    # a later launch that faulted (slower than 5% of HBM) is not a resident rate: HBM instead
    t["later_launch_ns"] = 10_000_000
    p, src = sim.timed_params(t, kernel_pages=256, sms=4, hbm_gbps=3000.0)
    assert p["resident_ns"] == pytest.approx(4096 * 4 / 3000.0, abs=1e-3) and "HBM" in src and p["fetch_us"] == 0


def test_fault_to_migration_needs_ten_fault_records():
    lines = []
    for i in range(11):
        lines += [{"k": "um", "c": 4, "s": i * 100_000, "v": 2}, htod(i * 100_000 + 5_000 + i, i * 100_000 + 9_000, 4096)]
    # the first fault record is the kernel's start (skipped); delays 5.001 .. 5.010 us: the upper median
    assert sim.fault_to_migration_us(lines) == pytest.approx(5.006)
    assert sim.fault_to_migration_us(lines[:10]) is None
    assert sim.trace_timing([{"k": "um", "c": 1, "s": 0, "e": 1, "v": 4096}]) is None  # no kernel


@pytest.mark.skipif(not (KEPT / "main" / "meta.json").exists(), reason="no kept traces")
def test_kept_traces_bytes_exact_and_first_batches_as_measured(tmp_path):
    import json
    for keep in (KEPT / "main", KEPT / "extra"):
        meta = json.loads((keep / "meta.json").read_text())
        counts = validation.counted_all(str(keep), meta)
        rows = validation.compare(meta, counts, validation.device_figures(list(counts.values())), str(tmp_path))
        for r in rows:
            assert r["sim_htod"] == r["driver"]["htod"] == r["truth_htod"]
            lp = r["launch"]
            # the migration reads up to 64 SMs: the modelled first batch moves what the driver's first did
            if "reads CPU-initialised" in r["label"] and lp["sms"] <= 64:
                assert r["timed"]["first_batch_pages"] == r["first_batch_pages"], r["label"]


@pytest.mark.skipif(not (KEPT / "main" / "meta.json").exists(), reason="no kept traces")
def test_kept_fault_events_give_the_driver_count():
    """Every kept run with the driver's fault events: the notified entries (distinct batch and notification
    time) equal the driver's gpu_faults counter of the same run, no event dropped."""
    import json
    n = 0
    for f in sorted(KEPT.glob("*/*.events.json")):
        ev = json.loads(f.read_text())
        drv = json.loads(f.with_name(f.name.replace(".events.json", ".counts.json")).read_text())["driver"]
        assert ev["ok"] and not ev.get("dropped_total") and ev["entries"] == drv["gpu_faults"], f
        n += 1
    assert n >= 31


def test_choose_variant_meets_the_target_most_often_then_misses_it_least(tmp_path, monkeypatch):
    # Fake replays: with no mechanism every program is off by 30%; "pages" alone gives the smallest median
    # error but misses one program by 64%; "pages" with "instances" is within 10% on as many programs and
    # misses the last by 20%: the rule takes the latter, the old median rule the former.
    def fake(meta, counts, device, tmp, quiet=False):
        if device.get("a") and device.get("b"):
            errs = [0.05, -0.06, 0.07, 0.2]
        elif device.get("a"):
            errs = [0.01, 0.02, -0.03, 0.64]
        else:
            errs = [0.3] * 4
        return [{"label": str(i), "timed": {"entries": 1000 * (1 + e)}, "driver": {"gpu_faults": 1000}}
                for i, e in enumerate(errs)]
    monkeypatch.setattr(validation, "compare", fake)
    monkeypatch.setattr(calibration, "FEATURES", {"pages": ("a",), "instances": ("b",)})
    v = calibration.choose_variant({}, {}, {}, {"a": 1, "b": 1}, tmp_path)
    assert v["chosen"] == ["pages", "instances"] and v["figures"] == {"a": 1, "b": 1}
    assert v["by_median"]["chosen"] == ["pages"]
    t = {tuple(x["features"]): x for x in v["table"]}
    assert t[("pages",)]["within"] == 3 and t[("pages",)]["worst"] == pytest.approx(0.64)


def test_repeat_section_sets_each_program_beside_its_second_run():
    # Two programs: the driver counted 100 and 200 first, 110 and 150 the second time; the model 105 and 160.
    # Changes +10% and -25%; the model -4.5% / +5% and +6.7% / -20%: within +-10% of the first run once, of
    # the second twice, of at least one twice.
    ev = {"flush": {"update_put": 3, "cached_put": 1, "older_entries_after_update_put": 0}}
    rows = [{"label": "p0", "case_index": 0, "driver": {"gpu_faults": 100}, "events": None,
             "timed": {"entries": 105, "batches": 4, "update_put_batches": 2}},
            {"label": "p1", "case_index": 1, "driver": {"gpu_faults": 200}, "events": ev,
             "timed": {"entries": 160, "batches": 4, "update_put_batches": 4}}]
    repeat = {"fresh": ({"when": "now"}, {0: {"driver": {"gpu_faults": 110}, "events": ev},
                                          1: {"driver": {"gpu_faults": 150}, "events": None}})}
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import sim_validate as sv
    finally:
        sys.path.pop(0)
    out = sv.repeat_section([("fresh", {"set": "fresh"}, rows), ("calibration", {"set": "calib"}, rows)], repeat)
    table = [r for r in out if r.startswith("| fresh |")]
    assert table[0] == "| fresh | p0 | 100 / 110 (+10.0%) | n/a / 3 of 4 / 2 of 4 | 105 | +5.0% | -4.5% |"
    assert table[1] == "| fresh | p1 | 200 / 150 (-25.0%) | 3 of 4 / n/a / 4 of 4 | 160 | -20.0% | +6.7% |"
    assert len(table) == 2  # the calibration programs are not repeated
    assert ("more than 10% in 1 of 2 programs). umsim" in out[-1]
            and "of the first run in 1, of the second in 2, of at least one in 2 of 2." in out[-1])


def test_own_figures_replays_each_program_with_its_own_event_figures(monkeypatch):
    seen = []

    def fake(meta, counts, device, tmp, quiet=False):
        (n, c), = counts.items()
        seen.append((n, device["release"], device["entry_instances_read"], device["utlb_fault_weights_read"]))
        return [{"timed": {"entries": 110}, "driver": {"gpu_faults": 100}}]
    monkeypatch.setattr(validation, "compare", fake)
    ev = {"instances_per_entry": {"1": 3, "2": 5, ">8": 1}, "per_utlb_batch": {"pages": {"1": 7, "2": 2}}}
    counts = {0: {"events": ev}, 1: {"events": None}}  # case 1 has no events: left out
    out = calibration.own_figures([({"set": "main"}, counts)], {"entry_instances_read": "0,1"}, "/tmp")
    assert out == {"replay": [pytest.approx(0.1)], "blocks": [pytest.approx(0.1)]}
    assert seen == [(0, "replay", "3,5,0,0,0,0,0,1", "7,2,0,0,0,0,0,0"), (0, "blocks", "3,5,0,0,0,0,0,1", "7,2,0,0,0,0,0,0")]


def test_validated_record_leaves_the_calibration_programs_out():
    # bytes: the first table's rows (one exact, one 5% over the driver); timed entries: main 1 of 2 within 10%
    # (+5%, -20%), the calibration programs' +50% not counted as a validation.
    def row(sim_htod, drv_htod, entries, faults):
        return {"sim_htod": sim_htod, "truth_htod": 100, "cupti_htod": 50, "driver": {"htod": drv_htod, "gpu_faults": faults},
                "timed": {"entries": entries}}
    main = [row(100, 100, 105, 100), row(105, 100, 80, 100)]
    tables = [("main", {"set": "main"}, main), ("calibration", {"set": "calib"}, [row(100, 100, 150, 100)])]
    rec = calibration.validated_record(tables, {"gpu": "G", "commit": "c", "when": "w"}, "umsim-x")
    assert rec["htod_bytes_max_error_vs_truth"] == 0.05 and rec["htod_bytes_max_error_vs_driver"] == 0.05
    assert rec["htod_bytes_max_error_vs_cupti"] == 1.1 and rec["cases"] == 2 and rec["model_version"] == "umsim-x"
    assert rec["gpu_fault_entries_max_error_vs_driver_main"] == 0.2
    assert rec["gpu_fault_entries_within_10pct_main"] == "1 of 2"
    assert not any(k.endswith("_calibration") for k in rec)
