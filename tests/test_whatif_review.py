"""The what-if commands as a user meets them from a fresh clone on CPU (issue 21's review): the documented
commands run, bad input is one line and exit 2 with nothing run, and every modelled figure says what it is,
its model version, its inputs and its validated error (or that it has none). CPU only, about 3 s."""
import gzip
import importlib
import json
from pathlib import Path

import pytest

from umscope import cli
from umscope.model import commands, driver
from umscope.model import calibrated, dos
from umscope.model import simulate as sim
from umscope.report import modelled

ROOT = Path(__file__).resolve().parent.parent
GIB = 1 << 30

# triad's explicit record as the application declares it (round numbers)
CAL = {"type": "record", "benchmark": "triad", "op": "app", "app": "triad", "mode": "explicit", "bytes": 3 * 10 ** 9,
       "data_bytes": 3e9, "iterations": 4, "compute_ms": 40.0, "context_ms": 100.0, "alloc_ms": 1.0,
       "init_ms": 30.0, "transfer_ms": 20.0, "back_ms": 110.0, "free_ms": 2.0, "total_ms": 303.0,
       "traffic_bytes": 1e9, "in_bytes": 2e9, "out_bytes": 1e9, "inout_bytes": 0,
       "arrays": "a:out:1000000000,b:in:1000000000,c:in:1000000000"}

# What bench/sim_validate.py writes for the simulator (its keys), and a calibrated entry with per-case errors.
UMSIM_V = {"model_version": sim.VERSION, "machine": "GPU X", "commit": "abc", "when": "now", "cases": 8,
           "htod_bytes_max_error_vs_truth": 0.0, "htod_bytes_max_error_vs_driver": 0.0,
           "gpu_fault_entries_max_error_vs_driver_main": 1.2742, "gpu_fault_entries_within_10pct_main": "1 of 8"}
CAL_V = {"model_version": calibrated.VERSION, "median": 0.08, "p90": 0.2, "cases": 2, "machine": "GPU X",
         "commit": "abc", "per_case": {"triad/managed": -0.05, "triad/pinned": 0.125}}


@pytest.fixture
def validated(tmp_path, monkeypatch):
    monkeypatch.setattr(calibrated, "VALIDATED", tmp_path / "validated.json")
    calibrated.write_validated("calibrated", CAL_V)
    calibrated.write_validated("umsim", UMSIM_V)


def _one_line_exit_2(argv, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("umscope: error:") and err.count("\n") == 1, err
    return err


# ------------------------------------------------------------------ simulate
def test_simulate_at_the_default_gpu_capacity_runs_every_policy(capsys):
    # The H100's 79.2 GiB: the SVM range of 1/64 (1.2 GiB, 324403 pages) used to be past umsim's largest unit
    # (65535 pages): it ended every `umscope simulate APP` in "umsim: error: --unit must be 1 to 65535 pages",
    # then was capped at 256 MiB. umsim's units are now bounded only by its page numbers: the range is 1/64.
    assert cli.main(["simulate", "triad", "--footprint", "8M", "--json"]) == 0
    recs = {r["counts"]["policy"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(recs) == {"uvm", "svm", "ats", "zerocopy"}
    cap = recs["svm"]["counts"]["capacity_pages"]
    assert recs["svm"]["inputs"]["parameters"]["unit_pages"] == cap // 64 > 65535
    assert "note" not in recs["svm"]["inputs"]


def test_svm_range_is_a_64th_of_gpu_memory():
    assert driver.svm_unit(256 << 20) == 4 << 20
    assert driver.svm_unit((256 << 20) + 100) == 4 << 20  # whole pages
    assert driver.svm_unit(64 * GIB) == GIB  # 262144 pages: past the old limit of 65535
    assert driver.svm_unit(64 * GIB, page=65536) == GIB


@pytest.mark.parametrize("argv", [
    ["simulate", "triad", "--unit", "5T", "--policy", "uvm"], ["simulate", "triad", "--unit", "2K"],
    ["simulate", "triad", "--page", "1000"], ["advise", "triad", "--page", "6K"], ["advise", "triad", "--page", "4M"],
    ["simulate", "triad", "--page", "3G"], ["simulate", "triad", "--iterations", "0"],
    ["simulate", "triad", "--iterations", "-3"], ["simulate", "triad", "--dos", "0"],
    ["simulate", "triad", "--batch", "0", "--policy", "uvm"], ["simulate", "triad", "--prefetch-threshold", "200"],
    ["simulate", "triad", "--sweep", "all"], ["advise", "triad", "--iterations", "0"]])
def test_bad_simulator_options_are_refused_before_umsim_runs(argv, capsys, monkeypatch):
    def never(*a, **k):
        raise AssertionError("umsim ran")
    monkeypatch.setattr(sim, "run", never)
    err = _one_line_exit_2(argv, capsys)
    assert "umsim:" not in err


def _libumtrace(path: Path, opener=open):
    a = 1 << 40
    recs = [{"k": "mem", "op": 1, "a": a, "b": 64 * 4096}, {"k": "kernel", "s": 1, "e": 2}]
    recs += [{"k": "um", "c": 4, "v": 1, "s": 3 + i, "e": 4 + i, "a": a + i * 4096, "f": 1} for i in range(64)]
    with opener(path, "wt") as f:
        f.write("".join(json.dumps(r) + "\n" for r in recs))


def test_simulate_replays_a_gzip_trace_as_the_plain_one(tmp_path, capsys):
    _libumtrace(tmp_path / "t.jsonl")
    _libumtrace(tmp_path / "t.jsonl.gz", gzip.open)
    counts = []
    for name in ("t.jsonl", "t.jsonl.gz"):
        assert cli.main(["simulate", "--trace", str(tmp_path / name), "--capacity", "64M", "--policy", "uvm",
                         "--json"]) == 0
        counts.append(json.loads(capsys.readouterr().out)[0]["counts"]["faults"])
    assert counts[0] == counts[1] > 0
    (tmp_path / "bin").write_bytes(bytes(range(256)) * 4)
    _one_line_exit_2(["simulate", "--trace", str(tmp_path / "bin")], capsys)
    (tmp_path / "cut.gz").write_bytes((tmp_path / "t.jsonl.gz").read_bytes()[:40])
    _one_line_exit_2(["simulate", "--trace", str(tmp_path / "cut.gz")], capsys)


def test_simulator_validation_reads_as_counts_not_times(validated):
    text = calibrated.validated_text(calibrated.validated("umsim", version=sim.VERSION))
    assert "within +-10% in 1 of 8 (main)" in text and "worst |error| 127.4% against driver main" in text
    assert "worst |error| 0.0% against truth" in text
    assert "modelled times are not validated against measured times" in text
    assert "max_error" not in text and "within_10pct" not in text  # no raw keys


def test_sweep_curves_say_what_their_axes_are(capsys):
    rows = [{"figure": "cooper2024 Fig. 6", "policy": "svm", "app": "jacobi2d-reverse", "monotone": "decreasing",
             "published_monotone": None, "published_knee": None, "dos": [78, 100], "relative": [1.0, 0.5]},
            {"figure": "schieffer2024 Fig. 11", "policy": "ats/uvm", "app": "bfs", "monotone": "increasing",
             "published_monotone": "increasing", "published_knee": None, "ratios": [1.0, 2.0], "speedup": [2, 3]}]
    import types
    fake = types.SimpleNamespace(cooper=lambda progress: {"curves": {}, "figures_source": "X"},
                                 schieffer=lambda progress: {"curves": {}, "figures_source": "Y"},
                                 compare=lambda c, s: rows)
    real = commands.dos
    commands.dos = fake
    try:
        assert cli.main(["simulate", "--sweep", "all"]) == 0
    finally:
        commands.dos = real
    out = capsys.readouterr().out
    assert "curves below: DOS (%): throughput relative to DOS 78" in out
    assert "speedup of system memory (ATS) over managed memory (UVM)" in out
    assert "published None" not in out and "(published no published curve)" in out


def test_gh200_figures_name_the_borrowed_fault_cost():
    _, src = dos.machine_figures("gh200")
    assert "the fault cost per batch calibrated on h100-sxm-pcie5" in src


# ------------------------------------------------------------------ model
def _jsonl(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return str(path)


def test_model_takes_its_calibration_and_figures_from_json_lines(tmp_path, capsys, validated):
    recs = [dict(CAL, compute_ms=c, total_ms=263.0 + c) for c in (40.0, 80.0, 44.0)]
    recs += [dict(CAL, mode="managed", total_ms=999.0), dict(CAL, app="mvt", benchmark="mvt")]
    recs += [{"benchmark": "migration", "op": "read", "kind": "pinned", "policy": "", "bytes": GIB,
              "cpu_touch": "none", "first": 40.0, "steady": 41.0}]
    f = _jsonl(tmp_path / "raw.jsonl", recs)
    assert cli.main(["model", "triad", "--calibration", f, "--figures", f, "--json"]) == 0
    out = {r["mode"]: r for r in json.loads(capsys.readouterr().out)}
    assert out["explicit"]["phases_ms"]["compute_ms"] == 44.0  # the median of the three explicit runs
    assert "3 explicit runs of triad" in out["managed"]["inputs"]["calibration"]
    assert out["pinned"]["inputs"]["figures"].startswith(f"file {f}: remote_gbps; the rest: umscope measurement")


def test_model_explicit_row_is_the_measured_calibration(tmp_path, capsys, validated):
    f = _jsonl(tmp_path / "cal.json", [CAL])
    assert cli.main(["model", "triad", "--calibration", f, "--json"]) == 0
    by = {r["mode"]: r for r in json.loads(capsys.readouterr().out)}
    assert by["explicit"]["status"] == "calibration (measured)" and "model_version" not in by["explicit"]
    assert by["managed"]["status"] == "modelled"
    assert cli.main(["model", "triad", "--calibration", f]) == 0
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines() if ln.split()}
    assert "MEASURED: the calibration, not predicted" in lines["explicit"]
    assert lines["managed"].endswith("-5.0%") and lines["pinned"].endswith("+12.5%")
    assert lines["registered"].endswith("not validated")


def test_model_on_another_machine_is_not_shown_as_validated(tmp_path, capsys, validated):
    f = _jsonl(tmp_path / "cal.json", [CAL])
    assert cli.main(["model", "triad", "--calibration", f, "--machine", "gh200", "--json"]) == 0
    managed = next(r for r in json.loads(capsys.readouterr().out) if r["mode"] == "managed")
    v = managed["validated_error"]
    assert v["this_case"] is None and v["this_case_on_validated_machine"] == -0.05
    assert "not on gh200" in v["note"]
    assert cli.main(["model", "triad", "--calibration", f, "--machine", "gh200"]) == 0
    out = capsys.readouterr().out
    assert "-5.0%" not in out and "not on gh200" in out and "not of gh200" in out


def test_model_names_the_figures_it_lacked():
    fig, _ = dos.machine_figures("h100-sxm-pcie5")
    for mode in calibrated.MODES[1:-1]:
        assert calibrated.predict("triad", mode, CAL, fig)["figures_missing"] == [], mode
    lean = {k: v for k, v in fig.items() if not k.startswith("advise_")}
    p = calibrated.predict("triad", "managed-advice", CAL, lean)
    gone = ["advise_preferred_gpu_ms_per_gib", "advise_read_mostly_ms_per_gib"]
    assert p["figures_missing"] == gone
    assert calibrated.record("triad", "managed-advice", p, "s", "c")["inputs"]["figures_missing"] == gone


def test_model_bad_calibration_is_one_line(tmp_path, capsys):
    f = _jsonl(tmp_path / "cal.json", [CAL])
    assert "(it has triad)" in _one_line_exit_2(["model", "mvt", "--calibration", f], capsys)
    (tmp_path / "bad").write_text("not json\n{\n")
    _one_line_exit_2(["model", "triad", "--calibration", str(tmp_path / "bad")], capsys)
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00" * 10)
    _one_line_exit_2(["model", "triad", "--calibration", str(tmp_path / "bin")], capsys)
    _one_line_exit_2(["model", "triad", "--calibration", f, "--figures", f], capsys)  # no figure in it
    store = tmp_path / "none.sqlite"
    assert "no results store" in _one_line_exit_2(["model", "triad", "--calibration", "3", "--store", str(store)],
                                                   capsys)
    assert not store.exists()  # reading a calibration creates no store


def test_model_run_id_must_name_a_run(tmp_path, capsys):
    from umscope.store import Store
    Store(tmp_path / "s.sqlite")
    assert "no run 7" in _one_line_exit_2(["model", "triad", "--calibration", "7", "--store",
                                          str(tmp_path / "s.sqlite")], capsys)


# ------------------------------------------------------------------ advise
def test_advise_says_its_times_have_no_validated_error(validated, capsys):  # no "advise" entry
    assert cli.main(["advise", "mvt", "--footprint", "16M", "--capacity", "64M", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert "not validated against measured times" in r["times"]
    assert r["evidence"]["managed-prefetch"]["how"].startswith("not simulated")
    assert cli.main(["advise", "mvt", "--footprint", "16M", "--capacity", "64M"]) == 0
    out = capsys.readouterr().out
    assert "gain is an estimate without a validated error" in out and "(not simulated:" in out


# ------------------------------------------------------------------ the report's modelled section
def _gemm(mode, total, precision="fp32"):
    x = dict(CAL, app="gemm", benchmark="gemm", mode=mode, total_ms=total, precision=precision, variant="cublas",
             place_a="mode", place_b="mode", place_c="mode")
    return {"op": "app", "bytes": x["bytes"], "extra": x}


def test_report_models_gemm_and_shows_each_cases_validated_error(monkeypatch, validated):
    monkeypatch.setitem(CAL_V["per_case"], "gemm/managed", 0.031)
    calibrated.write_validated("calibrated", CAL_V)
    fp = {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}
    recs = [_gemm("explicit", 303.0), _gemm("managed", 500.0), _gemm("explicit", 303.0, "fp16"),
            _gemm("managed", 400.0, "fp16")]
    html = modelled.section(recs, fp)
    rows = [r for r in html.split("<tr>") if "managed" in r]
    assert len(rows) == 2  # gemm (cuBLAS, fp32): the validated configuration, and fp16 apart
    assert "<td>gemm</td>" in rows[0] and "+3.1%" in rows[0]
    assert "<td>gemm fp16</td>" in rows[1] and "not validated" in rows[1]
    assert "except the column <b>measured ms</b>" in html


def test_report_median_of_an_even_count_and_other_machines(monkeypatch, validated):
    totals = iter([110.0, 130.0])
    monkeypatch.setattr(calibrated, "predict", lambda *a, **k: {"total_ms": next(totals)})
    recs = [{"op": "app", "bytes": 1, "extra": dict(CAL, mode=m, total_ms=100.0)}
            for m in ("explicit", "managed", "pinned")]
    html = modelled.section(recs, {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]})
    assert "median 20.0%, largest 30.0%" in html  # errors 10% and 30%: the median is their mean
    assert "-5.0%" in html and "+12.5%" in html
    totals = iter([110.0, 130.0])
    html = modelled.section(recs, {"gpus": [{"name": "NVIDIA GH200 480GB"}]})
    assert "-5.0%" not in html and "validated on GPU X only, not on this machine" in html


# ------------------------------------------------------------------ the validation table's regeneration
def test_from_raw_prints_and_leaves_the_docs_and_validated_error_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    mv = importlib.import_module("model_validate")
    doc, val = tmp_path / "doc.md", tmp_path / "validated.json"
    doc.write_text("hand-written\n")
    monkeypatch.setattr(mv, "DEFAULT_OUT", doc)
    monkeypatch.setattr(calibrated, "VALIDATED", val)
    raw = str(ROOT / "docs" / "model-validation-raw-run2.jsonl")
    monkeypatch.setattr("sys.argv", ["model_validate.py", "--from-raw", raw])
    assert mv.main() == 0
    out = capsys.readouterr()
    assert "**|error| over 65 application x mode cases: median 8.9%, 90th percentile 23.7%**" in out.out
    assert "measured" not in out.out.split("# Calibrated model")[0]  # progress went to stderr
    assert doc.read_text() == "hand-written\n" and not val.exists()
    monkeypatch.setattr("sys.argv", ["model_validate.py", "--from-raw", raw, "--out", str(tmp_path / "t.md"),
                                     "--validated-out", str(val)])
    assert mv.main() == 0
    assert json.loads(val.read_text())["calibrated"]["median"] == 0.0894 and (tmp_path / "t.md").exists()


def test_packaged_figures_carry_their_own_validated_error(tmp_path, capsys, validated):
    # `umscope model` without --figures and the report predict with the packaged figures: the error shown is the
    # one measured with those figures (bench/model_validate.py --packaged-figures), not the session-figures one.
    f = _jsonl(tmp_path / "cal.json", [CAL])
    assert cli.main(["model", "triad", "--calibration", f, "--json"]) == 0
    v = next(r for r in json.loads(capsys.readouterr().out) if r["mode"] == "managed")["validated_error"]
    assert v["this_case"] == -0.05 and "not with the packaged ones used here" in v["note"]
    calibrated.write_validated("calibrated_packaged", dict(CAL_V, median=0.136, p90=0.27,
                                                           figures="the packaged figures",
                                                           per_case={"triad/managed": 0.2}))
    assert cli.main(["model", "triad", "--calibration", f]) == 0
    out = capsys.readouterr().out
    assert "with the packaged figures): median 13.6%, 90th percentile 27.0%" in out
    assert next(ln for ln in out.splitlines() if ln.startswith("managed ")).endswith("+20.0%")
    assert cli.main(["model", "triad", "--calibration", f, "--figures", _jsonl(tmp_path / "fig.jsonl", [
        {"benchmark": "migration", "op": "read", "kind": "pinned", "bytes": GIB, "first": 40.0, "steady": 41.0}])]) == 0
    out = capsys.readouterr().out
    assert "median 8.0%" in out and next(ln for ln in out.splitlines() if ln.startswith("managed ")).endswith("-5.0%")
    html = modelled.section([{"op": "app", "bytes": 1, "extra": dict(CAL, mode=m, total_ms=300.0)}
                             for m in ("explicit", "managed")], {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]})
    assert "median 13.6%" in html and "+20.0%" in html


def test_from_raw_with_packaged_figures_stores_their_error_apart(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    mv = importlib.import_module("model_validate")
    val = tmp_path / "validated.json"
    raw = str(ROOT / "docs" / "model-validation-raw-run2.jsonl")
    monkeypatch.setattr("sys.argv", ["model_validate.py", "--from-raw", raw, "--packaged-figures",
                                     "--validated-out", str(val)])
    assert mv.main() == 0
    out = capsys.readouterr().out
    assert "predicted with the packaged h100-sxm-pcie5 figures, not the session's" in out
    v = json.loads(val.read_text())
    assert set(v) == {"calibrated_packaged"} and v["calibrated_packaged"]["figures"].startswith("the packaged")
    assert v["calibrated_packaged"]["cases"] == 65


def test_simulate_and_advise_price_with_this_machines_measured_figures(tmp_path, capsys):
    # "on this machine": the figures a run measured (here a file of migration records), the fault cost per
    # batch calibrated again from them; without --figures, the packaged description's.
    mig = {"benchmark": "migration", "op": "read", "kind": "managed", "bytes": GIB, "cpu_touch": "none"}
    f = _jsonl(tmp_path / "fig.jsonl", [dict(mig, policy="first_touch=cpu", first=2.0, steady=3000.0),
                                         dict(mig, policy="first_touch=cpu,prefetch=gpu", prefetch_gbps=20.0)])
    argv = ["simulate", "triad", "--footprint", "16M", "--capacity", "64M", "--policy", "uvm", "--json"]
    assert cli.main(argv) == 0
    packaged = json.loads(capsys.readouterr().out)[0]
    assert cli.main(argv + ["--figures", f]) == 0
    mine = json.loads(capsys.readouterr().out)[0]
    assert mine["inputs"]["figures_source"].startswith(f"file {f}: first_pass_gbps, migrate_gbps; the rest:")
    assert mine["inputs"]["machine_figures"]["migrate_gbps"] == 20.0
    assert mine["counts"]["faults"] == packaged["counts"]["faults"]  # the same replay, priced differently
    assert mine["modelled_seconds"]["total"] > 2 * packaged["modelled_seconds"]["total"]
    assert cli.main(["advise", "mvt", "--footprint", "16M", "--figures", f, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["figures_source"].startswith(f"file {f}:")
    _one_line_exit_2(["advise", "mvt", "--machine", "gh200", "--figures", f], capsys)
    _one_line_exit_2(["simulate", "mvt", "--figures", str(tmp_path / "nope")], capsys)


def test_a_trace_whose_records_cupti_dropped_is_labelled_incomplete(tmp_path, capsys):
    # The kept H100 traces carry the driver's own byte count (uvm_counters): where CUPTI's records hold less,
    # the replay is a lower bound and says so.
    a = 1 << 40
    recs = [{"k": "mem", "op": 1, "a": a, "b": 64 * 4096}, {"k": "kernel", "s": 1, "e": 2}]
    recs += [{"k": "um", "c": 1, "v": 4096, "s": 3 + i, "e": 4 + i, "a": a + i * 4096, "f": 1} for i in range(16)]
    full = recs + [{"k": "uvm_counters", "dev": -1, "htod": 16 * 4096}]
    lossy = recs + [{"k": "uvm_counters", "dev": 0, "htod": 64 * 4096}, {"k": "uvm_counters", "dev": -1, "htod": 1},
                    {"k": "uvm_counters", "dev": -1, "htod": 64 * 4096}]
    argv = ["--capacity", "64M", "--policy", "uvm"]
    assert cli.main(["simulate", "--trace", _jsonl(tmp_path / "full.jsonl", full)] + argv) == 0
    assert "INCOMPLETE" not in capsys.readouterr().out
    f = _jsonl(tmp_path / "lossy.jsonl", lossy)
    assert cli.main(["simulate", "--trace", f] + argv) == 0
    assert "INCOMPLETE TRACE: the trace's CUPTI records hold 64 KiB of the 256 KiB the driver migrated to the GPU " \
           "(25%)" in capsys.readouterr().out
    assert cli.main(["simulate", "--trace", f, "--json"] + argv) == 0
    assert "lower bounds" in json.loads(capsys.readouterr().out)[0]["inputs"]["trace"]
    assert cli.main(["advise", "--trace", f, "--capacity", "64M", "--json"]) == 0
    assert "(25%)" in json.loads(capsys.readouterr().out)["trace"]
