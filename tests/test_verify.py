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


def test_method_names_combine_known_checks():
    assert verify.bases("freivalds:2+cpu-sample:51000") == ["freivalds", "cpu-sample"]
    for m in ("cpu-reference", "cpu-sample:4096", "freivalds:3", "invariant:bfs-edges", "invariant",
              "invariant:norm+cpu-layer:4194304", "freivalds:2+cpu-sample:9873"):
        assert verify.is_method(m), m
    for m in ("none", "checksum", "cpu-samples:3", "freivalds:2+guess"):
        assert not verify.is_method(m), m
    assert verify.describe("freivalds:2+cpu-sample:9") == ("product checked by random vectors; results "
                                                           "recomputed on the CPU")


def test_cross_mode_agreement_is_an_extra_check_and_disagreement_fails(store_path):
    modes = ["explicit", "managed", "pinned", "system"]
    sums = {"explicit": "aa", "managed": "aa", "pinned": "bb", "system": "aa"}
    outcomes = [(Case("triad", None, {"footprint": "256M", "mode": m}), [_app_rec(m, sums[m], "cpu-sample:9")])
                for m in modes]
    # Another group (other footprint), checked against the CPU: stays cpu-reference, alone.
    outcomes.append((Case("triad", None, {"footprint": "16M", "mode": "explicit", "check": "1"}),
                     [_app_rec("explicit", "cc", "cpu-reference")]))
    # Records of an older umbench without a check: agreeing checksums do not make them verified.
    outcomes += [(Case("mvt", None, {"footprint": "256M", "mode": m}), [_app_rec(m, "dd", app="mvt")])
                 for m in ("explicit", "managed")]
    s, run_id = _store_with(store_path, outcomes)
    failed = verify.apply_checks(s, run_id)
    assert list(failed) == ["triad footprint=256M mode=pinned"]
    assert "checksum bb of mode pinned differs from the explicit mode's aa" in failed["triad footprint=256M mode=pinned"]
    cases = {c["case_id"]: c for c in s.cases(run_id)}
    assert cases["triad footprint=256M mode=pinned"]["status"] == "failed"
    assert cases["triad footprint=256M mode=managed"]["status"] == "ok"
    got = {r["case_id"]: (r["status"], verify.method(r), r["extra"].get("cross_mode_checksum"))
           for r in s.records(run_id)}
    assert got["triad footprint=256M mode=explicit"] == ("ok", "cpu-sample:9", "agrees")
    assert got["triad footprint=256M mode=managed"] == ("ok", "cpu-sample:9", "agrees")
    assert got["triad footprint=256M mode=pinned"][0] == "failed"
    assert got["triad check=1 footprint=16M mode=explicit"] == ("ok", "cpu-reference", None)
    assert got["mvt footprint=256M mode=managed"] == ("ok", "none", "agrees")
    # Repeating it (a resumed run) changes nothing.
    assert list(verify.apply_checks(s, run_id)) == []
    assert {r["case_id"]: (r["status"], verify.method(r), r["extra"].get("cross_mode_checksum"))
            for r in s.records(run_id)} == got


def test_cross_mode_skips_the_cpu_processor():
    recs = [dict(_app_rec("explicit", "aa", "cpu-reference"), id=1, case_id="e", status="ok"),
            dict(_app_rec("managed", "aa"), id=2, case_id="m", status="ok"),
            dict(_app_rec("cpu", "zz"), id=3, case_id="c", status="ok")]
    recs = [dict(r, extra={k: r[k] for k in ("mode", "checksum", "verified")}) for r in recs]
    cases = [{"case_id": "e", "status": "ok", "params": {"mode": "explicit"}},
             {"case_id": "m", "status": "ok", "params": {"mode": "managed"}},
             {"case_id": "c", "status": "ok", "params": {"processor": "cpu"}}]
    failed, agreeing = verify.cross_mode(cases, recs)
    assert failed == {} and agreeing == [2, 1]


def test_a_failed_reference_check_fails_every_case_of_the_same_kernel(store_path):
    s = Store(store_path)
    run_id = s.create_run("run", "t", [], {}, {})
    ok = [Case("needle", None, {"footprint": f, "mode": m}) for f in ("256M", "1G") for m in ("explicit", "managed")]
    ok.append(Case("needle", None, {"footprint": "16M", "processor": "cpu"}))  # the CPU's own code: not failed
    ok.append(Case("gemm", None, {"footprint": "256M", "mode": "explicit", "precision": "fp16"}))  # another kernel
    ok.append(Case("gemm", None, {"footprint": "256M", "mode": "managed"}))  # fp32 by default: the same kernel
    ok.append(Case("bfs", None, {"footprint": "256M", "mode": "explicit"}))
    for c in ok:
        s.add_case_result(run_id, c, "ok", "", 0.0, 0.1, [_app_rec(c.params.get("mode", "cpu"), "aa", "cpu-sample:9",
                                                                    app=c.benchmark)])
    s.add_case_result(run_id, Case("needle", None, {"footprint": "16M", "mode": "explicit", "check": "1"}), "failed",
                      "verification failed: score[17] = 3, the CPU reference has 4", 0.0, 0.1, [])
    s.add_case_result(run_id, Case("gemm", None, {"footprint": "16M", "mode": "explicit", "precision": "fp32",
                                                  "check": "1"}), "failed",
                      "verification failed: C differs from the CPU reference", 0.0, 0.1, [])
    # A failure that is not a check (a crash) says nothing of the kernel's results.
    s.add_case_result(run_id, Case("bfs", None, {"footprint": "16M", "mode": "explicit"}), "failed",
                      "killed by signal 9", 0.0, 0.1, [])
    failed = verify.apply_checks(s, run_id)
    assert sorted(failed) == sorted(["needle footprint=256M mode=explicit", "needle footprint=256M mode=managed",
                                     "needle footprint=1G mode=explicit", "needle footprint=1G mode=managed",
                                     "gemm footprint=256M mode=managed"])
    assert all("needle check=1 footprint=16M mode=explicit" in failed[c] and "score[17] = 3" in failed[c]
               for c in failed if c.startswith("needle"))
    st = {r["case_id"]: (r["status"], r["reason"]) for r in s.records(run_id)}
    assert st["needle footprint=1G mode=managed"][0] == "failed" and "same kernel" in st["needle footprint=1G mode=managed"][1]
    assert st["needle footprint=16M processor=cpu"][0] == "ok"
    assert st["gemm footprint=256M mode=explicit precision=fp16"][0] == "ok"
    assert st["bfs footprint=256M mode=explicit"][0] == "ok"
    assert verify.apply_checks(s, run_id) == {}


def test_suite_runs_the_cross_mode_check(store_path, monkeypatch):
    from umscope import suite
    sums = {"explicit": "aa", "managed": "ab"}

    def fake(case, options, meter=None):
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
            assert verify.is_method(r["verified"]), (args, r["op"], r.get("verified"))
