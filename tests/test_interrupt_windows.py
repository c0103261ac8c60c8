"""A signal at any point of a run leaves the stored run interrupted whenever umscope exits with an interrupted
status: the windows outside the case loop (the run's creation to run_cases, the checks after the last case),
where CI once saw a SIGINT leave the run "running" with exit status 130 (tests/test_signals.py)."""
import signal

from umscope import suite, verify
from umscope.store import Store
from umscope.suite import Case, Interrupted, Outcome


def _fake_execute(case, options, meter=None):
    return Outcome("ok", "", [], 0.01)


def test_a_signal_during_the_checks_after_the_last_case_leaves_the_run_interrupted(store_path, monkeypatch, capsys):
    monkeypatch.setattr(suite, "execute", _fake_execute)

    def interrupted(store, run_id):
        raise Interrupted(signal.SIGTERM)
    monkeypatch.setattr(verify, "apply_checks", interrupted)
    s = Store(store_path)
    run_id = s.create_run("bench", "t", [], {}, {})
    cases = [Case("triad", None, {"mode": "managed"})]
    try:
        status = suite.run_cases(s, run_id, cases, {"isolate": True}, progress=False)
    except KeyboardInterrupt:
        status = "the signal escaped run_cases"
    assert status == "terminated"
    run = s.db.execute("SELECT status, options FROM runs WHERE id=?", (run_id,)).fetchone()
    assert run[0] == "interrupted" and '"signal": "SIGTERM"' in run[1]
    assert f"umscope run --resume {run_id}" in capsys.readouterr().err
    # the resume has no case left to run: it applies the checks and completes the run
    monkeypatch.setattr(verify, "apply_checks", lambda store, run_id: {})
    assert suite.run_cases(s, run_id, cases, {"isolate": True}, progress=False) == "complete"
    assert s.db.execute("SELECT status FROM runs WHERE id=?", (run_id,)).fetchone()[0] == "complete"


def test_a_signal_right_after_the_run_is_created_leaves_it_interrupted(store_path, monkeypatch, capsys):
    from umscope import cli

    def interrupted(fingerprint):
        raise Interrupted(signal.SIGINT)
    monkeypatch.setattr(cli, "bus_ids_of", interrupted)  # called between create_run and run_cases
    rc = cli.main(["bench", "cpu-stream", "--kind", "system", "--size", "1M", "--threads", "1", "--ops", "copy",
                   "--reps", "2", "--store", store_path, "--no-progress"])
    assert rc == 130
    s = Store(store_path)
    (status, opts), = s.db.execute("SELECT status, options FROM runs").fetchall()
    assert status == "interrupted" and '"signal": "SIGINT"' in opts
    assert "umscope run --resume 1" in capsys.readouterr().err


def test_a_signal_while_the_report_is_written_keeps_the_run_complete_and_says_so(store_path, monkeypatch, capsys):
    from umscope import cli

    def interrupted(store, run_id, path):
        raise Interrupted(signal.SIGTERM)
    monkeypatch.setattr(cli.report_html, "save_report", interrupted)
    rc = cli.main(["bench", "cpu-stream", "--kind", "system", "--size", "1M", "--threads", "1", "--ops", "copy",
                   "--reps", "2", "--store", store_path, "--no-progress"])
    assert rc == 143
    s = Store(store_path)
    assert [tuple(r) for r in s.db.execute("SELECT status FROM runs").fetchall()] == [("complete",)]
    assert all(c["status"] == "ok" for c in s.cases(1))
    err = capsys.readouterr().err
    assert "run 1 is complete (every case stored)" in err and "umscope report --store" in err and "--run 1" in err
