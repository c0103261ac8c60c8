"""How records are verified: method names, old stores, the cross-mode checksum check, the default suite's
CPU-reference cases, and the report's per-section statement."""
import json

from conftest import run_cli
from umscope import apps, verify
from umscope.store import Store
from umscope.suite import Case, Outcome


def _app_rec(mode, checksum, verified="none", app="triad", **kw):
    return dict({"type": "record", "benchmark": app, "op": "app", "processor": "gpu0", "kind": "device",
                 "metric": "time_per_iteration", "unit": "ms", "n": 1, "median": 1.0, "min": 1.0, "max": 1.0,
                 "app": app, "mode": mode, "checksum": checksum, "verified": verified}, **kw)


def _store_with(store_path, outcomes):
    s = Store(store_path)
    run_id = s.create_run("bench", "test", [], {}, {})
    for case, recs in outcomes:
        s.add_case_result(run_id, case, "ok", "", 0.0, 0.1, recs)
    return s, run_id


def test_method_names_and_old_stores():
    assert verify.method({"verified": "cpu-reference"}) == "cpu-reference"
    assert verify.method({"extra": {"verified": "invariant"}}) == "invariant"
    assert verify.method({"extra": {"verified": True}}) == verify.OLD  # a store written before methods
    assert verify.method({"extra": {"verified": False}}) == "none"
    assert verify.method({"extra": {}}) == "none"


def test_cross_mode_agreement_upgrades_and_disagreement_fails(store_path):
    modes = ["explicit", "managed", "pinned", "system"]
    sums = {"explicit": "aa", "managed": "aa", "pinned": "bb", "system": "aa"}
    outcomes = [(Case("triad", None, {"footprint": "256M", "mode": m}), [_app_rec(m, sums[m])]) for m in modes]
    # Another group (other footprint), checked against the CPU: stays cpu-reference, alone.
    outcomes.append((Case("triad", None, {"footprint": "16M", "mode": "explicit", "check": "1"}),
                     [_app_rec("explicit", "cc", "cpu-reference")]))
    # A group without explicit: nothing to compare with, stays none.
    outcomes.append((Case("mvt", None, {"footprint": "256M", "mode": "managed"}), [_app_rec("managed", "dd", app="mvt")]))
    s, run_id = _store_with(store_path, outcomes)
    failed = verify.apply_cross_mode(s, run_id)
    assert list(failed) == ["triad footprint=256M mode=pinned"]
    assert "checksum bb of mode pinned differs from the explicit mode's aa" in failed["triad footprint=256M mode=pinned"]
    cases = {c["case_id"]: c for c in s.cases(run_id)}
    assert cases["triad footprint=256M mode=pinned"]["status"] == "failed"
    assert cases["triad footprint=256M mode=managed"]["status"] == "ok"
    got = {(r["case_id"]): (r["status"], verify.method(r)) for r in s.records(run_id)}
    assert got["triad footprint=256M mode=explicit"] == ("ok", "cross-mode-checksum")
    assert got["triad footprint=256M mode=managed"] == ("ok", "cross-mode-checksum")
    assert got["triad footprint=256M mode=system"] == ("ok", "cross-mode-checksum")
    assert got["triad footprint=256M mode=pinned"][0] == "failed"
    assert got["triad check=1 footprint=16M mode=explicit"] == ("ok", "cpu-reference")
    assert got["mvt footprint=256M mode=managed"] == ("ok", "none")
    # Repeating it (a resumed run) changes nothing.
    assert list(verify.apply_cross_mode(s, run_id)) == []
    assert {r["case_id"]: (r["status"], verify.method(r)) for r in s.records(run_id)} == got


def test_cross_mode_keeps_cpu_reference_and_skips_the_cpu_processor():
    recs = [dict(_app_rec("explicit", "aa", "cpu-reference"), id=1, case_id="e", status="ok"),
            dict(_app_rec("managed", "aa"), id=2, case_id="m", status="ok"),
            dict(_app_rec("cpu", "zz"), id=3, case_id="c", status="ok")]
    recs = [dict(r, extra={k: r[k] for k in ("mode", "checksum", "verified")}) for r in recs]
    cases = [{"case_id": "e", "status": "ok", "params": {"mode": "explicit"}},
             {"case_id": "m", "status": "ok", "params": {"mode": "managed"}},
             {"case_id": "c", "status": "ok", "params": {"processor": "cpu"}}]
    failed, upgraded = verify.cross_mode(cases, recs)
    assert failed == {} and upgraded == [2]


def test_suite_runs_the_cross_mode_check(store_path, monkeypatch):
    from umscope import suite
    sums = {"explicit": "aa", "managed": "ab"}

    def fake(case, options):
        return Outcome("ok", "", [_app_rec(case.params["mode"], sums[case.params["mode"]])], 0.01)
    monkeypatch.setattr(suite, "execute", fake)
    s = Store(store_path)
    cases = [Case("triad", None, {"mode": m}) for m in sums]
    run_id = s.create_run("bench", "t", [], {}, {})
    # isolate: one process per case, so that the faked `execute` runs each (a batch would start umbench)
    assert suite.run_cases(s, run_id, cases, {"isolate": True}, progress=False) == "complete"
    st = {c["case_id"]: c["status"] for c in s.cases(run_id)}
    assert st == {"triad mode=explicit": "ok", "triad mode=managed": "failed"}


def test_default_suite_checks_every_application_against_the_cpu_once():
    cases = apps.default_cases()
    in_suite = [name for name, app in apps.APPS.items() if app.suite]
    assert len(in_suite) >= 14
    for name in in_suite:
        app = apps.APPS[name]
        bench = apps.bench_of(name)
        checked = [c for c in cases if c.benchmark == bench and c.params.get("check") == "1"
                   and all(c.params.get(k) == v for k, v in app.fixed.items())
                   and (name != "gemm" or "precision" not in c.params)]
        assert len(checked) == 1, name
        c = checked[0]
        if name == "qv":
            assert int(c.params["qubits"]) <= 20
        else:
            assert c.params["footprint"] == apps.CHECK_FOOTPRINT and c.params["mode"] == "explicit"
            assert c.params.get("processor") != "cpu"
    assert apps.CHECK_FOOTPRINT == "16M"


def test_report_says_per_section_how_data_was_verified(store_path):
    res = run_cli("bench", "cpu-stream", "--size", "4M", "--threads", "1", "--kind", "system", "--reps", "2",
                  "--store", store_path)
    assert res.returncode == 0, res.stderr
    html = open(res.stderr.strip().splitlines()[-1].split("report: ")[1]).read()
    assert "data was verified after each benchmark" not in html
    assert "Verified: 3 records cpu-reference (compared with the CPU&#x27;s values)." in html
    recs = Store(store_path).records()
    assert {verify.method(r) for r in recs} == {"cpu-reference"}
    assert json.loads(json.dumps(recs[0]["extra"]))["verified"] == "cpu-reference"


def test_every_benchmark_record_names_a_method():
    from conftest import umbench
    runs = [("cpu-stream", "--kind", "system", "--bytes", "4M", "--threads", "1", "--reps", "2"),
            ("latency", "--processor", "cpu", "--kind", "system", "--bytes", "64K", "--reps", "2"),
            ("pingpong", "--pair", "cpu-cpu", "--kind", "system", "--exchanges", "200", "--reps", "2"),
            ("firsttouch", "--kind", "system", "--by", "cpu", "--bytes", "4M", "--reps", "2"),
            ("faults", "--processor", "cpu", "--kind", "system,first_touch=none", "--bytes", "4M", "--reps", "2"),
            ("qv", "--processor", "cpu", "--qubits", "8"),
            ("triad", "--processor", "cpu", "--n", "1000", "--check", "1")]
    for args in runs:
        res = umbench("run", *args)
        lines = [json.loads(l) for l in res.stdout.splitlines() if l.startswith("{")]
        assert lines[-1]["status"] == "ok", (args, lines[-1])
        recs = [r for r in lines if r["type"] == "record"]
        assert recs, args
        for r in recs:
            assert r["verified"] in verify.METHODS and r["verified"] != "none", (args, r["op"], r.get("verified"))
