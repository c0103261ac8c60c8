"""Issue 14's defects, one test each (the fuzz and signal tests are in test_fuzz.py and test_signals.py)."""

import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from umscope import cli, probe, validate
from umscope.apps import APPS
from umscope.report import html as report_html
from umscope.store import Store
from umscope.suite import Case


def _one_line_error(res):
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("umscope: error:"), res.stderr
    return lines[0]


# 2. The host-memory guard counts a case's total host bytes.
def test_host_guard_counts_the_case_total_not_each_buffer():
    # Two 48 MiB arrays against a 64 MiB limit: each fits, both do not.
    res = subprocess.run(
        [_umbench(), "run", "cpu-stream", "--kind", "system", "--bytes", "48M", "--threads", "1", "--reps", "1",
         "--warmup", "0"], capture_output=True, text=True, timeout=60,
        env=dict(os.environ, UMSCOPE_HOST_MEM_LIMIT="64M"))
    assert res.returncode == 4, res.stdout + res.stderr
    status = json.loads(res.stdout.strip().splitlines()[-1])
    assert status["status"] == "refused" and "in all" in status["reason"], status
    ok = subprocess.run([_umbench(), "run", "cpu-stream", "--kind", "system", "--bytes", "16M", "--threads", "1",
                         "--reps", "1", "--warmup", "0"], capture_output=True, text=True, timeout=60,
                        env=dict(os.environ, UMSCOPE_HOST_MEM_LIMIT="64M"))
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_host_guard_counts_an_applications_arrays():
    res = subprocess.run([_umbench(), "run", "triad", "--processor", "cpu", "--footprint", "96M", "--threads", "1"],
                         capture_output=True, text=True, timeout=60, env=dict(os.environ, UMSCOPE_HOST_MEM_LIMIT="64M"))
    assert res.returncode == 4 and '"refused"' in res.stdout, res.stdout + res.stderr


def _umbench():
    from umscope import native
    return native.umbench_path()


# 5. A refusal exits 2.
def test_refusal_exits_2(store_path):
    res = run_cli("bench", "cpu-stream", "--kind", "system", "--size", "48M", "--threads", "1", "--reps", "1",
                  "--store", store_path, "--no-progress", env={"UMSCOPE_HOST_MEM_LIMIT": "64M"})
    assert res.returncode == 2, res.stderr
    assert "refused" in res.stdout + res.stderr


# 6. A run saved with a bad option can be resumed.
def test_resume_of_a_run_saved_with_a_bad_option(store_path):
    st = Store(store_path)
    plan = [Case("selftest", None, {"mode": "ok"}, timeout=float("nan")).to_json()]
    run_id = st.create_run("bench selftest", "umscope bench selftest --timeout nan", plan,
                           {"device": 0, "reps": "abc", "warmup": None}, probe.probe())
    st.close()
    line = _one_line_error(run_cli("run", "--resume", "--store", store_path))
    assert f"run {run_id}" in line and "--reps" in line
    line = _one_line_error(run_cli("run", "--resume", str(run_id), "--reps", "2", "--store", store_path))
    assert "timeout" in line
    res = run_cli("run", "--resume", str(run_id), "--reps", "2", "--timeout", "30", "--store", store_path,
                  "--no-progress")
    assert res.returncode == 0, res.stderr
    assert Store(store_path).run(run_id)["status"] == "complete"


# 7. --reps/--warmup win over the plan's values.
def test_user_reps_and_warmup_win_over_the_plan():
    from umscope import plans
    fp = {"gpus": [], "numa": [], "cpu": {"caches": []}}
    for case in (plans.latency_cases(fp, ["system"], "4KiB", ("cpu",))[0], plans.firsttouch_cases(fp)[0],
                 plans.pingpong_cases(fp)[0], plans.fault_cases(fp)[0], plans.migration_cases(fp)[0]):
        argv = case.argv({"reps": 9, "warmup": 4})
        assert argv.count("--reps") == 1 and argv[argv.index("--reps") + 1] == "9", argv
        assert argv.count("--warmup") == 1 and argv[argv.index("--warmup") + 1] == "4", argv
        plain = case.argv({})
        assert plain.count("--reps") == 1  # the plan's value where the user gave none


# 8. Damaged and read-only stores.
def _corrupt_records_page(path, marker):
    data = bytearray(Path(path).read_bytes())
    at = data.find(marker.encode())
    assert at > 0
    page = 4096 * (at // 4096)
    data[page:page + 4096] = b"\xa5" * 4096
    Path(path).write_bytes(bytes(data))


def _store_with_records(path, n=400):
    st = Store(path)
    run_id = st.create_run("bench selftest", "umscope bench selftest", [], {}, {"gpus": []})
    for i in range(n):
        st.add_case_result(run_id, Case("selftest", None, {"mode": f"m{i}"}), "ok", "", 0.0, 0.0,
                           [{"benchmark": "selftest", "op": "ok", "median": 1.0, "reason": f"MARKER{i:05d}" * 4}])
    st.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    st.close()
    return run_id


def test_writing_to_a_damaged_store_is_one_line_and_runs_nothing(tmp_path):
    path = str(tmp_path / "s.sqlite")
    _store_with_records(path)
    _corrupt_records_page(path, "MARKER00200")
    line = _one_line_error(run_cli("bench", "selftest", "--store", path))
    assert "damaged" in line or "malformed" in line


def test_export_of_a_damaged_store_keeps_every_readable_record(tmp_path):
    path = str(tmp_path / "s.sqlite")
    _store_with_records(path)
    _corrupt_records_page(path, "MARKER00200")
    res = run_cli("export", "--store", path)
    line = _one_line_error(res)
    assert "damaged" in line
    lines = res.stdout.splitlines()
    assert 300 < len(lines) < 400, len(lines)  # only the damaged page's records are lost
    assert all(json.loads(x)["benchmark"] == "selftest" for x in lines)


@pytest.mark.parametrize("cmd", [["runs"], ["export"], ["report"]])
def test_read_only_commands_never_create_a_store(cmd, tmp_path):
    missing = tmp_path / "typo" / "store.sqlite"
    line = _one_line_error(run_cli(*cmd, "--store", str(missing)))
    assert "no store" in line
    assert not (tmp_path / "typo").exists()


def _on_read_only_fs(d, *args):
    """Runs the CLI in a private mount namespace where `d` is bound read-only: the store file cannot be
    written by anyone, root included (root ignores file modes, so a chmod would prove nothing)."""
    inner = f"mount --bind -o ro {shlex.quote(str(d))} {shlex.quote(str(d))} && exec " + \
        " ".join(shlex.quote(a) for a in [sys.executable, "-m", "umscope", *args])
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", inner], capture_output=True,
                          text=True, timeout=120, cwd="/")


def _can_bind_read_only():
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    res = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                          "mount --bind -o ro /tmp /tmp && ! touch /tmp/.umscope-ro-probe 2>/dev/null"],
                         capture_output=True)
    return res.returncode == 0


@pytest.mark.skipif(not _can_bind_read_only(), reason="needs root and unshare to bind the store's folder read-only")
def test_read_only_store_file(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    path = str(d / "s.sqlite")
    _store_with_records(path, n=3)
    runs = _on_read_only_fs(d, "runs", "--store", path)
    assert runs.returncode == 0 and "bench selftest" in runs.stdout, runs.stderr
    exp = _on_read_only_fs(d, "export", "--store", path)
    assert exp.returncode == 0 and len(exp.stdout.splitlines()) == 3, exp.stderr
    line = _one_line_error(_on_read_only_fs(d, "bench", "selftest", "--store", path))
    assert "store" in line




# 9. The smaller ones.
def test_app_help_shows_every_option_app_list_advertises():
    res = run_cli("app", "--help")
    for app in APPS.values():
        for opt in app.takes:
            assert f"--{opt}" in res.stdout, opt


def test_timeout_help_matches_the_plans():
    from umscope import plans
    text = run_cli("bench", "--help").stdout
    assert "default 180" not in text
    fp = {"gpus": [], "numa": [], "cpu": {"caches": []}}
    timeouts = {c.timeout for f in plans.FAMILIES if f != "bandwidth" for c in plans.bench_plan(f, fp)}
    assert f"{min(timeouts):g}-{max(timeouts):g} s" in " ".join(text.split()), (timeouts, text)
    from umscope.apps import app_cases
    app_timeout = app_cases("triad", ["explicit"], {})[0].timeout
    assert f"{app_timeout:g} s for app run" in " ".join(run_cli("app", "--help").stdout.split())


def test_labels_cannot_send_escape_sequences(store_path):
    res = run_cli("bench", "selftest", "--label", "\x1b]0;pwned\x07\x1b[2J", "--store", store_path, "--no-progress")
    assert res.returncode == 0, res.stderr
    out = run_cli("runs", "--store", store_path).stdout
    assert "\x1b" not in out and "\x07" not in out and "\\x1b" in out


def test_summary_op_column_fits_long_names(capsys):
    recs = [{"status": "ok", "median": 1.0, "benchmark": "faults", "op": op, "processor": "cpu", "kind": "system",
             "policy": "", "bytes": 4096, "threads": 1, "spread": 0.0, "unit": "us", "extra": {}}
            for op in ("read", "touch_parallel_long")]
    cli.print_summary(recs, [])
    lines = capsys.readouterr().out.splitlines()
    assert len({line.index("cpu ") for line in lines[1:]}) == 1, lines  # the processor column lines up


def test_duplicate_selftest_modes_are_one_case(store_path):
    res = run_cli("bench", "selftest", "--mode", "ok,ok,skip,ok", "--dry-run", "--store", store_path)
    assert res.returncode == 0
    assert res.stdout.split("\n").count("selftest mode=ok") == 1


def test_profile_reports_the_true_peak_of_a_short_program(store_path):
    prog = "b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096])"
    res = run_cli("profile", "--store", store_path, "--json", "--", sys.executable, "-c", prog)
    assert res.returncode == 0, res.stderr
    recs = {r["op"]: r for r in json.loads(res.stdout.strip().splitlines()[-1])}
    assert recs["rss_peak"]["max"] >= 200 << 20
    assert "sampled peak" in res.stderr and "high-water" in res.stderr


def test_resume_empty_is_an_error(store_path):
    assert "--resume" in _one_line_error(run_cli("run", "--resume", "", "--store", store_path))


# 3. A report that still cannot be written at the end: the records are kept and the way to the report is said.
def test_a_report_that_fails_at_the_end_keeps_the_records(store_path, monkeypatch, capsys):
    def full(store, run_id, path=None):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(report_html, "write_report", full)
    rc = cli.main(["bench", "selftest", "--store", store_path, "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 0 and "Traceback" not in err
    assert "umscope report --store" in err and "No space left" in err
    assert len(Store(store_path).records(1)) == 1
