"""bench/advise_validate.py on CPU: the advice table and its three published figures (the share of cases where the
advice is the fastest mode or within the fastest's run-to-run band, the time lost when it is not, the predicted
gain's error) from canned records shaped like the application records of a GPU session (trimmed from
docs/model-validation-raw-run2.jsonl's), every figure worked out by hand; the rounds' order; --write-validated
making `umscope advise` print the validated error; bad input refused before anything runs."""
import json
from pathlib import Path

import pytest
from conftest import bench_module

from umscope import cli
from umscope.model import calibrated
from umscope.model import simulate as sim

M16 = 16 << 20


@pytest.fixture(scope="module")
def av():
    return bench_module("advise_validate")


def app_rec(app, mode, whole, rnd, foot=M16, init=5.0):
    """An application record as `umscope app run --json` gives it (the store's row, `extra` flattened), trimmed;
    the per-iteration median a tenth of the run without initialisation."""
    return {"type": "record", "run_id": 4, "case_id": f"{app} footprint=16MiB mode={mode}", "benchmark": app,
            "op": "app", "processor": "gpu0", "kind": "device", "bytes": foot, "metric": "time_per_iteration",
            "unit": "ms", "n": 20, "median": whole / 10, "min": whole / 11, "max": whole / 8, "app": app, "mode": mode,
            "iterations": 20, "context_ms": 0.01, "alloc_ms": 0.3, "init_ms": init, "transfer_ms": 1.0,
            "compute_ms": 1.2, "back_ms": 2.0, "free_ms": 1.0, "total_ms": whole + init, "total_excl_init_ms": whole,
            "checked": True, "verified": "cpu-sample:4096", "_tag": "app", "_round": rnd, "_footprint": foot}


# Each case's modes' whole-run times (ms) over three rounds, and advise's answer.
RUNS = {
    # zero copy advised (measured as pinned): 20 ms against managed-prefetch's 10 (band 9-11): a miss, 10 ms lost
    "triad": ({"explicit": (7, 8, 9), "managed": (14, 15, 16), "managed-prefetch": (9, 10, 11),
               "managed-advice": (12, 13, 14), "pinned": (19, 20, 21), "registered": (18, 19, 20)},
              {"recommended": "zerocopy", "predicted_gain_vs_managed": 3.0,
               "explicit": {"wins": True, "modelled_ms": 0.3, "verdict": "keep cudaMemcpy"}}),
    # managed-prefetch advised: 10.5 against pinned's 10 (band 9.5-11): within the band, a hit
    "gemm": ({"explicit": (20, 21, 22), "managed": (14, 15, 16), "managed-prefetch": (10, 10.5, 12),
              "managed-advice": (13, 14, 15), "pinned": (9.5, 10, 11), "registered": (12, 12.5, 13)},
             {"recommended": "managed-prefetch", "predicted_gain_vs_managed": 1.5,
              "explicit": {"wins": False, "modelled_ms": 30.0, "verdict": "explicit copies modelled slower"}}),
    # plain managed advised and fastest; explicit said the same, and measured within managed's band
    "mvt": ({"explicit": (14.5, 15.5, 16.5), "managed": (14, 15, 16), "managed-prefetch": (16, 17, 18),
             "pinned": (30, 31, 32)},
            {"recommended": "managed", "predicted_gain_vs_managed": 1.0,
             "explicit": {"wins": False, "tie": True, "modelled_ms": 1.0, "verdict": "the same"}}),
}
META = {"_tag": "meta", "gpu": "NVIDIA H100 80GB HBM3", "kind": "h100", "commit": "abc1234",
        "when": "2026-11-27 10:00 UTC", "command": "python3 bench/advise_validate.py --raw-out raw.jsonl",
        "wall_s": 300.0}


def canned():
    recs = [dict(META, wall_s=None), {"_tag": "command", "what": "figures", "command": "umscope bench migration",
                                      "exit": 0, "wall_s": 4.2}]
    for rnd in range(3):
        for app, (modes, _) in RUNS.items():
            recs += [app_rec(app, m, t[rnd], rnd) for m, t in modes.items()]
    for app, (_, adv) in RUNS.items():
        recs.append({"_tag": "advise", "app": app, "footprint": M16, "iterations": 20,
                     "advice": dict(adv, model_version=sim.VERSION, figures_source="file figures.jsonl: "
                                    "first_pass_gbps, migrate_gbps, remote_gbps; the rest: packaged")})
    return recs + [META]


@pytest.fixture
def raw(tmp_path):
    p = tmp_path / "raw.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in canned()))
    return p


def test_cases_judged_by_hand(av):
    rows = {r["app"]: r for r in av.rows_of(canned())}
    t, g, m = rows["triad"], rows["gemm"], rows["mvt"]
    assert t["advised_as"] == "pinned" and t["runs"] == 3
    assert t["whole"] == {"fastest": "managed-prefetch", "band": (9, 11), "fastest_ms": 10, "advised_ms": 20,
                          "hit": False, "lost_ms": 10, "lost": 1.0}
    assert t["measured_gain"] == pytest.approx(0.75) and t["gain_error"] == pytest.approx(3.0)  # 3.0 / 0.75 - 1
    assert t["explicit"] == {"said": "wins", "measured_ratio": pytest.approx(2.5), "right": True}
    assert g["whole"]["fastest"] == "pinned" and g["whole"]["hit"] is True  # 10.5 within pinned's 9.5-11
    assert g["whole"]["lost_ms"] == pytest.approx(0.5) and g["whole"]["lost"] == pytest.approx(0.05)
    assert g["gain_error"] == pytest.approx(1.5 / (15 / 10.5) - 1)  # +5%
    assert g["explicit"]["said"] == "loses" and g["explicit"]["right"] is True
    assert g["iteration"]["fastest"] == "pinned" and g["iteration"]["hit"] is True
    assert m["whole"]["hit"] is True and m["whole"]["lost_ms"] == 0 and m["gain_error"] is None
    assert m["explicit"] == {"said": "same", "measured_ratio": pytest.approx(1 / 1.0333333), "right": True}
    s = av.summary(list(rows.values()))
    assert (s["cases"], s["hits"], s["misses"]) == (3, 2, 1) and s["share"] == pytest.approx(2 / 3)
    assert s["lost_median"] == pytest.approx(1.0) and s["lost_ms_median"] == pytest.approx(10)
    assert s["gain_cases"] == 2 and s["gain_error_median"] == pytest.approx((3.0 + 0.05) / 2)
    assert (s["explicit_right"], s["explicit_cases"], s["runs_min"]) == (3, 3, 3)


def test_explicit_verdict_wrong_and_advised_mode_not_measured(av):
    wrong = av.explicit_judged({"wins": True}, [20, 21, 22], [10, 11, 12])
    assert wrong == {"said": "wins", "measured_ratio": pytest.approx(11 / 21), "right": False}
    assert av.explicit_judged({"wins": False, "tie": True}, [20, 21], [10, 11])["right"] is False
    row = av.judge("bfs", M16, {"managed": [(10, 1)] * 3}, {"advice": {"recommended": "system"}})
    assert row["whole"] is None and "advised mode (system) was not measured" in row["status"]


def test_document_from_raw_gives_the_table_and_the_three_figures(av, raw, tmp_path, capsys):
    doc = tmp_path / "advise-validation-h100.md"
    assert av.main(["--from-raw", str(raw), "--out", str(doc)]) == 0
    text = doc.read_text()
    assert ("**(a) The advised mode is the fastest or within the fastest's run-to-run band in 2 of 3 application x "
            "footprint cases (66.7%) by the whole run** (target >= 85% on the H100: missed)") in text
    assert "**(b) Time lost when it is not: 1 case, median 100.0% (10.0 ms), at most 100.0%**" in text
    assert "**(c) The predicted gain over plain managed memory is off by a median 152.5%" in text
    assert "right in 3 of 3 cases" in text
    assert ("| triad | 16 MiB | 3 | zerocopy (as pinned) | managed-prefetch | 9.00-11.00 | 20.00 | no | "
            "+10.00 ms (+100%) | managed-prefetch | no | 3.00x | 0.75x | +300.0% | wins | 2.50x faster: right |") in text
    assert ("| gemm | 16 MiB | 3 | managed-prefetch | pinned | 9.50-11.00 | 10.50 | yes | +0.50 ms (+5%) | pinned | "
            "yes | 1.50x | 1.43x | +5.0% | loses | 2.00x slower: right |") in text
    assert "| mvt | 16 MiB | 3 | managed | managed | 14.00-16.00 | 15.00 | yes | +0.00 ms (+0%) |" in text
    assert "measured at umscope commit abc1234" in text and "300 s" in text and "--raw-out raw.jsonl" in text
    assert "first_pass_gbps, migrate_gbps, remote_gbps" in text and "`umscope bench migration` (exit 0" in text
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("hit 2 of 3 (66.7%) by whole run")


def test_document_from_gzipped_raw_with_a_header_note(av, raw, tmp_path, capsys):
    """The raw file kept in docs/ is gzip-compressed; --note puts a sentence (what else ran meanwhile) in the
    header, and the command that wrote the page is quoted as a shell would take it."""
    import gzip
    gz = tmp_path / "raw.jsonl.gz"
    gz.write_bytes(gzip.compress(raw.read_bytes()))
    doc = tmp_path / "d.md"
    assert av.main(["--from-raw", str(gz), "--note", "Two other jobs ran on the host meanwhile.", "--out",
                    str(doc)]) == 0
    text = doc.read_text()
    assert "in 2 of 3 application x footprint cases (66.7%)" in text
    assert "\nTwo other jobs ran on the host meanwhile.\n" in text
    assert "--note 'Two other jobs ran on the host meanwhile.'" in text
    capsys.readouterr()


def test_rounds_interleave_and_advise_gets_the_runs_iterations_and_figures(av, monkeypatch, tmp_path):
    calls = []

    def fake(args, store, timeout):
        calls.append(args)
        if args[0] == "app":
            return [{"app": args[2], "mode": m, "iterations": 7, "total_excl_init_ms": 1.0, "median": 0.1,
                     "metric": "time_per_iteration", "status": "ok", "extra": {}} for m in ("explicit", "managed")] + [
                {"benchmark": args[2], "status": "skipped", "reason": "no HMM", "extra": {"energy": {}}}], 0, 0.1
        if args[0] == "bench":
            return [{"benchmark": "migration", "op": "read", "kind": "managed", "policy": "first_touch=cpu",
                     "bytes": 256 << 20, "metric": "bandwidth", "median": 900.0, "status": "ok",
                     "extra": {"first": 9.0, "cpu_touch": "none"}},
                    {"benchmark": "migration", "kind": "pinned", "status": "skipped", "reason": "no GPU", "extra": {}}
                    ], 0, 0.1
        return {"recommended": "managed", "predicted_gain_vs_managed": 1.0}, 0, 0.1
    monkeypatch.setattr(av, "run_umscope", fake)
    a = av.parser().parse_args(["--runs", "2", "--store", str(tmp_path / "s.sqlite")])
    recs = []
    av.measure(a, ["triad", "mvt"], [M16, 64 << 20], recs.append, lambda m: None)
    apps = [(c[2], c[6]) for c in calls if c[0] == "app"]
    round1 = [("triad", "16MiB"), ("triad", "64MiB"), ("mvt", "16MiB"), ("mvt", "64MiB")]
    assert apps == round1 * 2  # every case once per round, rounds one after the other
    adv = [c for c in calls if c[0] == "advise"]
    assert len(adv) == 4 and adv[0][:6] == ["advise", "triad", "--footprint", "16MiB", "--iterations", "7"]
    assert adv[0][6] == "--figures" and adv[0][-1] == "--json"
    tags = [r["_tag"] for r in recs]
    assert tags.count("app") == 16 and tags.count("advise") == 4 and tags.count("figures") == 2  # one measured row of each
    assert {r["_round"] for r in recs if r["_tag"] == "app"} == {0, 1}


def test_write_validated_makes_advise_print_its_validated_error(av, raw, tmp_path, monkeypatch, capsys):
    v = tmp_path / "validated.json"
    v.write_text(json.dumps({"umsim": {"model_version": sim.VERSION}}))
    monkeypatch.setattr(calibrated, "VALIDATED", v)
    assert cli.main(["advise", "gemm", "--footprint", "16M"]) == 0
    assert "no validated error: advise has not been checked" in capsys.readouterr().out
    assert av.main(["--from-raw", str(raw), "--out", str(tmp_path / "d.md"), "--write-validated",
                    "--validated-out", str(v)]) == 0
    entry = json.loads(v.read_text())["advise"]
    assert entry["hits"] == 2 and entry["cases"] == 3 and entry["commit"] == "abc1234" and "umsim" in json.loads(
        v.read_text())
    assert entry["per_case"]["gemm/16 MiB"] == {"advised": "managed-prefetch", "fastest": "pinned", "hit": True,
                                                "lost": 0.05, "gain_error": 0.05}
    capsys.readouterr()
    assert cli.main(["advise", "gemm", "--footprint", "16M"]) == 0
    out = capsys.readouterr().out
    assert "no validated error" not in out
    lines = out.splitlines()
    rec = next(i for i, x in enumerate(lines) if x.startswith("recommended:"))
    exp = next(i for i, x in enumerate(lines) if x.startswith("explicit (cudaMemcpy): "))
    for line in (lines[rec + 1], lines[exp + 1]):
        assert line.strip().startswith("validated error of advise (3 application x footprint cases on NVIDIA H100")
        assert "in 2 of 3 (66.7%) by the whole run" in line and "this case: advised managed-prefetch, measured " \
            "fastest pinned, a hit" in line and "d.md" in line
    assert "the gain's error against measured runs is advise's validated error" in lines[rec]
    assert cli.main(["advise", "gemm", "--footprint", "32M", "--json"]) == 0  # not a validated footprint
    r = json.loads(capsys.readouterr().out)["advise_validated_error"]
    assert r["this_case"] is None and r["share"] == pytest.approx(0.6667) and "packaged" in r["note"]


@pytest.mark.parametrize("argv", [["--apps", "triad,nosuch"], ["--footprints", "16Q"], ["--runs", "0"],
                                  ["--from-raw", "/nonexistent/raw.jsonl"]])
def test_bad_input_exits_2_in_one_line_and_creates_nothing(av, tmp_path, capsys, argv):
    out, raw = tmp_path / "d.md", tmp_path / "r.jsonl"
    assert av.main(argv + ["--out", str(out), "--raw-out", str(raw)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("advise_validate: ") and "\n" not in err
    assert not out.exists() and not raw.exists()


def test_kind_naming_another_gpu_is_refused_and_a_relabel_is_noted(av, raw, tmp_path, capsys):
    """A machine lent as an H200 handed out an H100 (session 12): the page must not call H100 runs H200 ones.
    --kind naming another GPU model than the one that ran is refused (exit 2, nothing written); a label that
    names no GPU model relabels the page, with a note saying what it was measured under."""
    doc = tmp_path / "d.md"
    assert av.main(["--from-raw", str(raw), "--kind", "h200", "--out", str(doc)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "advise_validate: --kind h200 names another GPU than the one that ran this: NVIDIA H100 80GB HBM3 (h100)"
    assert not doc.exists()
    assert av.main(["--from-raw", str(raw), "--kind", "lab-node", "--out", str(doc)]) == 0
    text = doc.read_text()
    assert "(`lab-node`)" in text and "measured under the label 'h100', relabelled 'lab-node'" in text
    capsys.readouterr()
    monkeypatch = pytest.MonkeyPatch()
    from umscope import probe
    monkeypatch.setattr(probe, "probe", lambda: {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]})
    try:
        assert av.main(["--kind", "h200", "--out", str(tmp_path / "m.md"), "--raw-out", str(tmp_path / "r.jsonl")]) == 2
    finally:
        monkeypatch.undo()
    assert "names another GPU" in capsys.readouterr().err
    assert not (tmp_path / "m.md").exists() and not (tmp_path / "r.jsonl").exists()


def test_the_default_validated_file_is_the_source_trees(av, raw, tmp_path, monkeypatch):
    """Run from a checkout, --write-validated wrote the installed package's validated.json and left the committed one
    stale (session 12): the default is the source tree's file beside bench/, the package's only without one."""
    import _commit
    here = _commit.validated_path()
    assert here == Path(av.__file__).resolve().parent.parent / "python" / "umscope" / "model" / "validated.json"
    fake_bench = tmp_path / "bench"
    fake_bench.mkdir()
    monkeypatch.setattr(_commit, "__file__", str(fake_bench / "_commit.py"))
    assert _commit.validated_path() == calibrated.VALIDATED  # no source tree there: the package's
    (tmp_path / "python" / "umscope" / "model").mkdir(parents=True)
    (tmp_path / "python" / "umscope" / "model" / "validated.json").write_text("{}")
    assert _commit.validated_path() == tmp_path / "python" / "umscope" / "model" / "validated.json"
    out = tmp_path / "python" / "umscope" / "model" / "validated.json"
    assert av.main(["--from-raw", str(raw), "--out", str(tmp_path / "d.md"), "--write-validated"]) == 0
    assert json.loads(out.read_text())["advise"]["cases"] == 3
