"""`umscope advise` weighs explicit copies (cudaMemcpy) beside the unified-memory candidates, says when they
would win and by how much, and prints advise's own validated error (where there is none, it says so) beside every
recommendation, in text and --json."""
import json

from umscope import cli
from umscope.model import calibrated, driver
from umscope.model import simulate as sim

NO_VALIDATION = ("no validated error: advise has not been checked against measured runs; "
                 "docs/advise-validation-h100.md")


def _counts(**kw):
    c = {"page_bytes": 4096, "h2d_fault_pages": 1000, "h2d_prefetch_pages": 24, "h2d_counter_pages": 0,
         "d2h_cpu_fault_pages": 256, "gpu_events": 10000, "footprint_pages": 1280, "capacity_pages": 4096}
    c.update(kw)
    return c


FIG = {"h2d_gbps": 10.0, "d2h_gbps": 5.0, "hbm_gbps": 1000.0}


def test_explicit_prices_copies_in_and_out_and_compute_at_hbm_rate():
    e = driver.explicit_copies(_counts(), FIG, True, "managed-prefetch", 1.0)
    cin, cout = 1024 * 4096, 256 * 4096
    want = cin / 10e9 + cout / 5e9 + 10000 * 4096 / 1000e9
    assert e["copy_in_bytes"] == cin and e["copy_out_bytes"] == cout
    assert abs(e["modelled_ms"] - want * 1e3) < 1e-3
    assert e["wins"] is True and abs(e["ratio"] - 1.0 / want) < 1e-6
    assert e["verdict"].startswith(f"keep cudaMemcpy: explicit copies modelled {1.0 / want:.2f}x faster")


def test_explicit_loses_says_by_how_much_and_when_it_would_win():
    fast = 0.0005  # the recommended mode's modelled seconds, below explicit's
    e = driver.explicit_copies(_counts(), FIG, True, "zerocopy", fast)
    t = e["modelled_ms"] / 1e3
    assert e["wins"] is False and abs(e["ratio"] - t / fast) < 1e-3
    assert f"{t / fast:.2f}x slower than zerocopy" in e["verdict"] and "explicit would win if its copies took under" \
        in e["verdict"]
    slowest = driver.explicit_copies(_counts(), FIG, True, "zerocopy", 1e-9)
    assert "explicit cannot win here" in slowest["verdict"]


def test_explicit_not_modelled_when_the_footprint_exceeds_gpu_memory():
    e = driver.explicit_copies(_counts(footprint_pages=9000), FIG, False, "managed", 1.0)
    assert e["modelled_ms"] is None and e["wins"] is None and "exceeds GPU memory" in e["verdict"]


def test_advise_text_and_json_weigh_explicit_and_say_there_is_no_advise_validation(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(calibrated, "VALIDATED", tmp_path / "validated.json")  # no "advise" entry
    assert cli.main(["advise", "gemm", "--footprint", "16M", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["explicit"]["against"] == r["recommended"] and isinstance(r["explicit"]["wins"], bool)
    assert r["evidence"]["explicit"]["modelled_ms"] == r["explicit"]["modelled_ms"]
    assert r["advise_validated_error"]["text"] == NO_VALIDATION
    assert cli.main(["advise", "gemm", "--footprint", "16M"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rec = next(i for i, x in enumerate(lines) if x.startswith("recommended:"))
    exp = next(i for i, x in enumerate(lines) if x.startswith("explicit (cudaMemcpy): "))
    assert lines[rec + 1].strip() == NO_VALIDATION and lines[exp + 1].strip() == NO_VALIDATION


def test_advise_reads_its_validation_when_one_is_written(tmp_path, monkeypatch):
    """The entry bench/advise_validate.py --write-validated writes (tests/test_advise_validate.py writes one from
    canned records): its figures, this case's own result, and the notes `model` gives too."""
    f = tmp_path / "validated.json"
    entry = {"model_version": sim.VERSION, "machine": "H100", "commit": "abc", "cases": 39, "runs": 3, "hits": 35,
             "share": 0.8974, "hits_iteration": 33, "cases_iteration": 39, "misses": 4, "lost_median": 0.2,
             "lost_max": 0.9, "gain_error_median": 0.4, "gain_error_p90": 0.9, "explicit_right": 30,
             "explicit_cases": 39, "doc": "docs/advise-validation-h100.md",
             "per_case": {"triad/16 MiB": {"advised": "zerocopy", "fastest": "managed-prefetch", "hit": False,
                                           "lost": 8.6}}}
    f.write_text(json.dumps({"advise": entry}))
    monkeypatch.setattr(calibrated, "VALIDATED", f)
    v = driver.advise_validated("triad", 16 << 20)
    assert "39 application x footprint cases on H100" in v["text"] and "in 35 of 39 (89.7%) by the whole run" in v["text"]
    assert "median 40.0% (90th percentile 90.0%)" in v["text"] and "right in 30 of 39" in v["text"]
    assert "this case: advised zerocopy, measured fastest managed-prefetch, 860.0% lost" in v["text"]
    assert "(docs/advise-validation-h100.md)" in v["text"] and not v.get("note")
    other = driver.advise_validated("triad", 32 << 20, machine="gh200", own_figures=False)
    assert "this case" not in other["text"] and "validated on H100 only, not on gh200" in other["text"]
    assert "packaged" in driver.advise_validated("gemm", 1 << 30, own_figures=False)["note"]
    assert "not on this trace's program" in driver.advise_validated()["note"]
    f.write_text(json.dumps({"advise": dict(entry, model_version="umsim-4")}))
    assert f"validated for umsim-4, not {sim.VERSION}" in driver.advise_validated("triad", 16 << 20)["text"]
    f.write_text(json.dumps({"advise": dict(entry, model_version="umsim-6")}))  # umsim-7's untimed replay is umsim-6's
    assert not driver.advise_validated("triad", 16 << 20).get("note")
    monkeypatch.setattr(calibrated, "VALIDATED", tmp_path / "none.json")
    assert driver.advise_validated()["text"] == NO_VALIDATION


def test_advise_says_how_many_iterations_it_replayed_and_whose_choice():
    """The advice depends on the iterations replayed (triad at 16M: zerocopy for 1, managed-prefetch for 20), and
    the model facts' count need not be what `app run` runs: advise names the count and where it came from."""
    import json
    import subprocess
    import sys
    run = lambda *a: subprocess.run([sys.executable, "-m", "umscope", "advise", "triad", "--footprint", "16M", *a],
                                    capture_output=True, text=True, timeout=120)
    text = run().stdout
    assert "replays 1 iteration(s) of triad's stream: the count its model facts give; pass --iterations" in text
    given = json.loads(run("--iterations", "20", "--json").stdout)
    assert given["iterations"] == 20 and given["iterations_source"] == "as --iterations asked"


def test_advise_says_no_time_lost_when_no_case_missed(tmp_path, monkeypatch):
    # session 12's validation hit 39 of 39: "when not, - slower (median of 0, at most -)" said nothing true
    f = tmp_path / "validated.json"
    entry = {"model_version": sim.VERSION, "machine": "H100", "commit": "abc", "cases": 39, "runs": 2, "hits": 39,
             "share": 1.0, "hits_iteration": 29, "cases_iteration": 39, "misses": 0, "lost_median": None,
             "lost_max": None, "gain_error_median": 0.86, "gain_error_p90": 2.27, "explicit_right": 39,
             "explicit_cases": 39, "doc": "docs/advise-validation-h100.md", "per_case": {}}
    f.write_text(json.dumps({"advise": entry}))
    monkeypatch.setattr(calibrated, "VALIDATED", f)
    text = driver.advise_validated("triad", 16 << 20)["text"]
    assert "no case missed, so no time lost; the predicted gain over managed off by a median 86.0%" in text
    assert "median of 0" not in text and "- slower" not in text
    f.write_text(json.dumps({"advise": dict(entry, hits=37, misses=2, lost_median=0.488, lost_max=0.9)}))
    assert "when not, 48.8% slower (median of 2, at most 90.0%)" in driver.advise_validated("triad", 16 << 20)["text"]
