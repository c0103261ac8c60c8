"""The case runner: isolation, failures, timeouts, Ctrl-C and resume."""
import json
import os
import signal
import subprocess
import sys
import time

from conftest import run_cli
from umscope.store import Store


def _cases(store_path, run_id=None):
    s = Store(store_path)
    run = s.run(run_id)
    return run, {c["case_id"]: c for c in s.cases(run["id"])}, s.records(run["id"])


def test_crash_abort_fail_and_hang_are_recorded_and_the_suite_goes_on(store_path):
    res = run_cli("bench", "selftest", "--mode", "ok,crash,fail,hang,abort,skip,ok", "--timeout", "3",
                  "--store", store_path)
    assert res.returncode == 1  # some cases failed
    run, cases, records = _cases(store_path)
    assert run["status"] == "complete"
    assert cases["selftest mode=crash"]["status"] == "failed"
    assert "SIGSEGV" in cases["selftest mode=crash"]["reason"]
    assert "SIGABRT" in cases["selftest mode=abort"]["reason"]
    assert cases["selftest mode=fail"]["reason"] == "selftest asked to fail"
    assert cases["selftest mode=hang"]["status"] == "timeout"
    assert cases["selftest mode=skip"]["status"] == "skipped"
    assert cases["selftest mode=ok"]["status"] == "ok"
    assert any(r["status"] == "ok" and r["value"] == 1.0 for r in records)


def test_ctrl_c_keeps_completed_cases_and_resume_finishes(store_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "umscope", "bench", "selftest", "--mode", "ok,hang,skip",
                             "--timeout", "60", "--store", store_path, "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # Wait until the first case is stored and the hang is running.
    deadline = time.time() + 30
    while time.time() < deadline:
        time.sleep(0.2)
        if os.path.exists(store_path):
            try:
                if Store(store_path).done_cases(Store(store_path).run()["id"]):
                    break
            except Exception:
                pass
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "--resume" in err
    run, cases, _ = _cases(store_path)
    assert run["status"] == "interrupted"
    assert list(cases) == ["selftest mode=ok"]
    # Resume: the hang is given a short timeout now; the remaining cases run.
    res = run_cli("run", "--resume", str(run["id"]), "--timeout", "2", "--store", store_path)
    run, cases, _ = _cases(store_path, run["id"])
    assert run["status"] == "complete"
    assert cases["selftest mode=hang"]["status"] == "timeout"
    assert cases["selftest mode=skip"]["status"] == "skipped"
    assert res.returncode == 1


def test_json_output_is_the_records(store_path):
    res = run_cli("bench", "selftest", "--mode", "ok", "--json", "--store", store_path)
    assert res.returncode == 0
    recs = json.loads(res.stdout)
    assert recs[0]["benchmark"] == "selftest" and recs[0]["value"] == 1.0
