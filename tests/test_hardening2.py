"""Issue 33 (Hardening II): nothing lost, nothing overwritten, and the newer commands as hard as the old ones.
One test (or a few) per numbered item of the issue, named test_itemNN_...; each failed before its fix. The
generated battery over every file input and the newer commands is tests/test_fuzz_inputs.py."""

import gzip
import hashlib
import io
import json
import os
import shutil
import sqlite3
import stat
import struct
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from conftest import run_cli
from umscope import cli, native, place, probe, suite
from umscope.report import html as report_html
from umscope.store import Store
from umscope.suite import Case

ROOT = Path(__file__).resolve().parents[1]
CALIB = ROOT / "docs" / "model-validation-raw-run2.jsonl"


def call(*argv):
    """cli.main in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli.main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def one_line(err):
    lines = err.strip().splitlines()
    return len(lines) == 1 and lines[0].startswith("umscope: error:") and "Traceback" not in err


def digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def make_store(path, runs=1, records=1, marker="", status="complete", host="node1"):
    """A store with `runs` runs of `records` records each (reason = marker + run number)."""
    st = Store(path)
    ids = []
    for i in range(runs):
        rid = st.create_run("bench selftest", f"umscope bench selftest #{i} {marker}", [], {}, {"host": {"hostname": host}})
        recs = [{"benchmark": "selftest", "op": "ok", "processor": "cpu", "metric": "x", "unit": "s", "n": 1,
                 "value": float(j), "median": float(j), "min": float(j), "max": float(j), "spread": 0.0,
                 "reason": f"{marker}RUN{i + 1}MARK" * 4} for j in range(records)]
        st.add_case_result(rid, Case("selftest", None, {"mode": "ok"}), "ok", "", 0.0, 0.0, recs)
        st.finish_run(rid, status)
        ids.append(rid)
    st.close()
    return ids


# ---------------------------------------------------------------- 1: non-UTF-8 arguments lose no run
def test_item01_non_utf8_arguments_and_label_are_stored_escaped(tmp_path):
    store = tmp_path / "s.db"
    env = dict(os.environ)
    res = subprocess.run([sys.executable, "-m", "umscope", "profile", "--store", str(store), "--label", b"lab\xff",
                          "--", "sh", "-c", "echo done", b"\xe9"], capture_output=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    assert b"Traceback" not in res.stderr
    res = subprocess.run([sys.executable, "-m", "umscope", "bench", "selftest", "--store", str(store), "--label",
                          b"\xff", "--no-progress"], capture_output=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    st = Store(store, readonly=True)
    runs = st.runs()
    assert len(runs) == 2
    assert "\\xe9" in runs[0]["command"] and runs[0]["label"] == "lab\\xff" and runs[1]["label"] == "\\xff"
    assert st.records(runs[0]["id"])  # the profile's records are there


# ---------------------------------------------------------------- 2: read-only commands make no store
def test_item02_model_simulate_advise_never_turn_a_file_into_a_store(tmp_path):
    empty = tmp_path / "e"
    empty.write_bytes(b"")
    other = tmp_path / "other.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    before = digest(other)
    for argv in (["model", "triad", "--calibration", "1", "--store", empty],
                 ["model", "triad", "--calibration", "1", "--store", other],
                 ["simulate", "triad", "--figures", "1", "--store", other],
                 ["advise", "triad", "--figures", "1", "--store", empty]):
        rc, _, err = call(*argv)
        assert rc == 2 and one_line(err), (argv, err)
    assert empty.stat().st_size == 0 and digest(other) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e", "other.db"]


def test_item02_figures_from_a_read_only_store(tmp_path):
    store = tmp_path / "s.db"
    make_store(store)
    store.chmod(0o444)
    rc, _, err = call("simulate", "triad", "--figures", "1", "--store", store, "--policy", "uvm", "--footprint", "64M")
    assert rc == 2 and "no migration" in err and "cannot use store" not in err  # read: it holds no figures
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]


# ---------------------------------------------------------------- 3, 4: merge loses nothing
def _damage_pages(path, marker, spare=()):
    """Overwrites every page that holds `marker` (the records of one run) and none of `spare` with garbage."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("PRAGMA journal_mode=DELETE")
    page = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    data = bytearray(Path(path).read_bytes())
    hit = 0
    for off in range(page, len(data), page):
        chunk = data[off:off + page]
        if marker.encode() in chunk and not any(x.encode() in chunk for x in spare):
            data[off:off + page] = bytes((i * 37 + 11) % 256 for i in range(page))
            hit += 1
    assert hit
    Path(path).write_bytes(bytes(data))


def test_item03_merge_keeps_good_inputs_after_a_damaged_one(tmp_path):
    good1, bad, good2, out = (tmp_path / n for n in ("g1.db", "bad.db", "g2.db", "out.db"))
    make_store(good1, runs=1, marker="A")
    make_store(bad, runs=3, records=400, marker="B")
    make_store(good2, runs=2, marker="C")
    _damage_pages(bad, "BRUN2MARK", spare=("BRUN1MARK", "BRUN3MARK"))
    rc, out_text, err = call("merge", out, good1, bad, good2)
    assert rc == 1, err  # something was skipped, and said so
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert any(str(bad) in l and "damaged" in l for l in lines), err
    assert any(str(good2) in l and "2 run(s) merged" in l for l in lines), err
    st = Store(out, readonly=True)
    commands = [r["command"] for r in st.runs()]
    assert sum("A" in c for c in commands) == 1 and sum("C" in c for c in commands) == 2
    assert sum(c.endswith(" B") for c in commands) == 2  # the damaged store's readable runs are kept
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.db")]  # no temporary file left


def test_item03_a_failed_merge_leaves_out_as_it_was(tmp_path, monkeypatch):
    from umscope import merge
    src, out = tmp_path / "a.db", tmp_path / "out.db"
    make_store(src, runs=2)
    make_store(out, runs=1, marker="OLD")
    before = digest(out)

    def boom(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(merge, "_read_run", boom)
    with pytest.raises(KeyboardInterrupt):
        merge.merge(out, [src], progress=False)
    assert digest(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.db", "out.db"]


def test_item04_remerge_after_resume_replaces_the_stale_run(tmp_path):
    node, out = tmp_path / "node.db", tmp_path / "out.db"
    st = Store(node)
    rid = st.create_run("bench selftest", "umscope bench selftest", [], {}, {"host": {"hostname": "n1"}})
    st.add_case_result(rid, Case("selftest", None, {"mode": "ok"}), "ok", "", 0.0, 0.0,
                       [{"benchmark": "selftest", "metric": "x", "value": 1.0}])
    st.set_run_status(rid, "interrupted")
    rc, _, err = call("merge", out, node)
    assert rc == 0, err
    # `run --resume` finishes the run in the node's store
    st.add_case_result(rid, Case("selftest", None, {"mode": "skip"}), "ok", "", 0.0, 0.0,
                       [{"benchmark": "selftest", "metric": "y", "value": 2.0}])
    st.finish_run(rid, "complete")
    st.close()
    rc, text, err = call("merge", out, node)
    assert rc == 0 and "replaced by their newer state" in text, (text, err)
    o = Store(out, readonly=True)
    runs = o.runs()
    assert len(runs) == 1 and runs[0]["status"] == "complete"
    assert len(o.cases(runs[0]["id"])) == 2 and len(o.records(runs[0]["id"])) == 2


# ---------------------------------------------------------------- 5: report paths
def test_item05_default_report_paths_are_unique_per_store(tmp_path):
    from umscope.report.html import write_report
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    make_store(a)
    make_store(b)
    pa = write_report(Store(a, readonly=True), 1)
    pb = write_report(Store(b, readonly=True), 1)
    assert pa != pb and pa.exists() and pb.exists() and pa.parent == pb.parent == tmp_path / "reports"


# ---------------------------------------------------------------- 6: place --report DIR
@pytest.fixture
def no_allocator(monkeypatch):
    """place without libumalloc: what is under test is the command's path handling, all on the CPU."""
    monkeypatch.setattr(place, "check_config", lambda kind, rules: None)
    monkeypatch.setattr(place, "environment", lambda kind, rules="", allow=False, stats_pattern=None, base=None:
                        dict(os.environ))


def test_item06_place_report_directory_is_refused_before_the_program(tmp_path, no_allocator):
    marker = tmp_path / "ran"
    rc, _, err = call("place", "--kind", "device", "--report", tmp_path, "--store", tmp_path / "s.db", "--",
                      "touch", marker)
    assert rc == 2 and one_line(err) and "directory" in err
    assert not marker.exists() and not (tmp_path / "s.db").exists()


def test_item06_place_report_that_fails_late_keeps_the_run(tmp_path, no_allocator, monkeypatch):
    def fail(store, run_id, path=None):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(report_html, "write_report", fail)
    monkeypatch.setattr(place, "run_program", lambda cmd, env: (0, "", "", 0.01))  # this test's stdout has no .buffer
    rc, _, err = call("place", "--kind", "device", "--store", tmp_path / "s.db", "--", "true")
    assert rc == 0 and "Traceback" not in err and "cannot write the report" in err
    assert len(Store(tmp_path / "s.db", readonly=True).runs()) == 1


# ---------------------------------------------------------------- 7, 8: wrong-shaped and hostile files
CALIBRATION_FILES = {
    "extra.jsonl": '{"app":"triad","mode":"explicit","extra":5}',
    "numbers.jsonl": '{"app":"triad","mode":"explicit","iterations":"x","compute_ms":1,"context_ms":1,"alloc_ms":1,'
                     '"init_ms":1,"back_ms":1,"free_ms":1}',
    "zero.jsonl": '{"app":"triad","mode":"explicit","iterations":0,"compute_ms":1,"context_ms":1,"alloc_ms":1,'
                  '"init_ms":1,"back_ms":1,"free_ms":1}',
    "list.jsonl": '{"app":"triad","mode":"explicit","iterations":2,"compute_ms":[1],"context_ms":1,"alloc_ms":1,'
                  '"init_ms":1,"back_ms":1,"free_ms":1}',
    "strings.json": '[1, "a", null]',
    "app_number.jsonl": '{"app":5,"mode":"explicit"}',
    "samples.jsonl": '{"app":"triad","mode":"explicit","iterations":2,"compute_ms":1,"context_ms":1,"alloc_ms":1,'
                     '"init_ms":1,"back_ms":1,"free_ms":1,"samples":"abc"}',
}
FIGURE_FILES = {
    "zero_rate.jsonl": '{"benchmark":"migration","op":"read","kind":"managed","policy":"first_touch=cpu",'
                       '"bytes":1073741824,"first":0}',
    "string_rate.jsonl": '{"benchmark":"migration","op":"read","kind":"managed","policy":"first_touch=cpu",'
                         '"bytes":1073741824,"first":"fast"}',
    "dict_policy.jsonl": '{"benchmark":"migration","op":"read","kind":"managed","policy":{"a":1}}',
}


@pytest.mark.parametrize("name", sorted(CALIBRATION_FILES))
def test_item07_wrong_shaped_calibration_is_one_line(tmp_path, name):
    f = tmp_path / name
    f.write_text(CALIBRATION_FILES[name])
    rc, _, err = call("model", "triad", "--calibration", f)
    assert rc == 2 and one_line(err), err


def test_item07_unicode_digit_in_arrays_is_no_crash(tmp_path):
    f = tmp_path / "arrays.jsonl"  # int('²') raised ValueError: an entry that does not parse is no declared array
    f.write_text('{"app":"triad","mode":"explicit","iterations":2,"compute_ms":1,"context_ms":1,"alloc_ms":1,'
                 '"init_ms":1,"back_ms":1,"free_ms":1,"in_bytes":1,"out_bytes":1,"arrays":"a:in:²"}')
    rc, _, err = call("model", "triad", "--calibration", f)
    assert rc == 0 and "Traceback" not in err, err


@pytest.mark.parametrize("name", sorted(FIGURE_FILES))
def test_item07_wrong_shaped_figures_are_one_line(tmp_path, name):
    f = tmp_path / name
    f.write_text(FIGURE_FILES[name])
    for argv in (["model", "triad", "--calibration", CALIB, "--figures", f],
                 ["simulate", "triad", "--figures", f, "--policy", "uvm", "--footprint", "64M"]):
        rc, _, err = call(*argv)
        assert rc == 2 and one_line(err), (argv, err)


def test_item07_wrong_shaped_trace_is_one_line(tmp_path):
    for i, line in enumerate(['{"k":"kernel","s":1}', '{"k":"um","c":1,"s":"x","a":1,"v":4096}',
                              '{"k":"mem","op":1,"a":0,"b":-5}', '{"k":"uvm_fault","t":1,"a":1,"g":0,"b":0,"_p":[1]}']):
        f = tmp_path / f"t{i}.jsonl"
        f.write_text('{"k":"mem","op":1,"a":0,"b":1048576}\n' + line + "\n")
        rc, _, err = call("simulate", "--trace", f, "--policy", "uvm")
        assert rc == 2 and one_line(err), (line, err)


def test_item08_deep_binary_and_bad_yaml(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(bytes(range(256)) * 10)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("datapaths: [\n  : : :\n")
    deep_yaml = tmp_path / "deep.yaml"
    deep_yaml.write_text("datapaths: " + "[" * 5000 + "]" * 5000 + "\n")
    for argv in (["model", "triad", "--calibration", deep], ["model", "triad", "--calibration", CALIB, "--figures", deep],
                 ["model", "triad", "--calibration", binary], ["simulate", "--trace", binary],
                 ["bench", "selftest", "--machine", bad_yaml, "--dry-run"],
                 ["bench", "selftest", "--machine", deep_yaml, "--dry-run"]):
        rc, _, err = call(*argv)
        assert rc == 2 and one_line(err), (argv, err)
        assert "yaml." not in err and "Mark" not in err and "RecursionError" not in err


# ---------------------------------------------------------------- 9: foreign and future stores
def _variant(src, dst, sql):
    shutil.copy(src, dst)
    db = sqlite3.connect(dst)
    db.executescript(sql)
    db.commit()
    db.close()


def test_item09_future_foreign_and_damaged_rows(tmp_path):
    good = tmp_path / "good.db"
    make_store(good, runs=2)
    future, dropped, renamed = tmp_path / "future.db", tmp_path / "dropped.db", tmp_path / "renamed.db"
    _variant(good, future, "PRAGMA user_version = 99;")
    _variant(good, dropped, "ALTER TABLE records DROP COLUMN metric;")
    _variant(good, renamed, "ALTER TABLE runs RENAME COLUMN hostname TO host;")
    for bad in (future, dropped, renamed):
        before = digest(bad)
        for argv in (["export", "--store", bad], ["report", "--store", bad, "-o", tmp_path / "r.html"],
                     ["compare", "--store", bad, "-o", tmp_path / "c.html"], ["merge", tmp_path / "m.db", bad],
                     ["model", "triad", "--calibration", "1", "--store", bad],
                     ["simulate", "triad", "--figures", "1", "--store", bad], ["runs", "--store", bad],
                     ["bench", "selftest", "--store", bad]):
            rc, _, err = call(*argv)
            assert rc == 2 and one_line(err), (bad.name, argv, err)
        assert digest(bad) == before
    assert not (tmp_path / "m.db").exists()
    # a run row whose options are not JSON, a NULL hostname: read, not fatal
    odd = tmp_path / "odd.db"
    _variant(good, odd, "UPDATE runs SET options='{not json', hostname=NULL, fingerprint='[';")
    for argv in (["export", "--store", odd], ["report", "--store", odd, "-o", tmp_path / "r.html"],
                 ["compare", "--store", odd, "-o", tmp_path / "c.html"], ["merge", tmp_path / "m2.db", odd],
                 ["runs", "--store", odd]):
        rc, _, err = call(*argv)
        assert rc == 0 and "Traceback" not in err, (argv, err)


def test_item09_symlink_loop(tmp_path):
    loop = tmp_path / "loop.db"
    os.symlink(loop, loop)
    for argv in (["merge", tmp_path / "out.db", loop], ["merge", loop, tmp_path / "x.db"], ["export", "--store", loop],
                 ["bench", "selftest", "--store", loop], ["model", "triad", "--calibration", loop]):
        rc, _, err = call(*argv)
        assert rc == 2 and one_line(err), (argv, err)


# ---------------------------------------------------------------- 10: out-of-range numbers and paths
@pytest.mark.parametrize("argv", [
    ["model", "triad", "--calibration", "9223372036854775808"],
    ["simulate", "triad", "--dos", "nan"], ["simulate", "triad", "--dos", "1e-300"],
    ["simulate", "triad", "--dos", "inf"], ["advise", "triad", "--capacity", "1"],
    ["simulate", "triad", "--iterations", "99999999999999999999"],
    ["advise", "triad", "--iterations", "99999999999999999999"],
    ["simulate", "triad", "--capacity", "1e400"], ["simulate", "triad", "--footprint", "9e18"],
    ["compare", "-o", "/tmp"], ["compare", "-o", "/dev/full"], ["compare", "--threshold", "nan"],
    ["bench", "selftest", "--devices", "²", "--dry-run"], ["bench", "selftest", "--devices", "١", "--dry-run"],
], ids=lambda a: " ".join(a)[:50])
def test_item10_out_of_range_is_one_line(argv, tmp_path):
    store = tmp_path / "s.db"
    make_store(store)
    if argv[0] == "compare":
        argv = argv + ["--store", str(store)]
    rc, _, err = call(*argv)
    assert rc == 2 and one_line(err), err


# ---------------------------------------------------------------- 11: FIFOs, /dev/zero, absurd sizes
def test_item11_fifo_and_devices_do_not_hang(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for argv in (["simulate", "--trace", fifo], ["model", "triad", "--calibration", fifo],
                 ["advise", "triad", "--figures", fifo], ["simulate", "--trace", "/dev/zero"],
                 ["model", "triad", "--calibration", "/dev/zero"], ["bench", "selftest", "--machine", fifo, "--dry-run"]):
        res = run_cli(*map(str, argv), timeout=60)
        assert res.returncode == 2 and one_line(res.stderr), (argv, res.stderr)


def test_item11_absurd_migration_size_is_refused(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text('{"k":"mem","op":1,"a":0,"b":1048576}\n{"k":"um","c":1,"s":1,"a":0,"v":1000000000000000}\n'
                 '{"k":"kernel","s":0,"e":2}\n')
    res = run_cli("simulate", "--trace", str(f), "--policy", "uvm", timeout=60)
    assert res.returncode == 2 and one_line(res.stderr), res.stderr


# ---------------------------------------------------------------- 12: umsim validates its input
def _umstrace(path, page, allocs, events, declared_allocs=None, declared_events=None):
    with open(path, "wb") as f:
        f.write(b"UMSTRACE" + struct.pack("<II", page, len(allocs) if declared_allocs is None else declared_allocs))
        for a, n in allocs:
            f.write(struct.pack("<II", a, n))
        f.write(struct.pack("<Q", len(events) if declared_events is None else declared_events))
        for e in events:
            f.write(struct.pack("<I", e))


@pytest.mark.parametrize("case", ["page0", "page3", "allocs", "events", "overlap"])
def test_item12_umsim_refuses_hostile_traces_in_one_line(tmp_path, case):
    f = tmp_path / "t.umstrace"
    if case == "page0":
        _umstrace(f, 0, [(0, 16)], [1, 2, 3])
    elif case == "page3":
        _umstrace(f, 3, [(0, 16)], [1, 2, 3])
    elif case == "allocs":
        _umstrace(f, 4096, [(0, 16)], [1], declared_allocs=2**32 - 1)
    elif case == "events":
        _umstrace(f, 4096, [(0, 16)], [1], declared_events=2**63)
    else:
        _umstrace(f, 4096, [(0, 16), (8, 16)], [1])
    res = subprocess.run([native.find_binary("umsim", "UMSCOPE_UMSIM", "umsim"), "--trace", str(f), "--capacity", "1G"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stderr.startswith("umsim: error:"), (res.returncode, res.stderr)
    res = run_cli("simulate", "--trace", str(f), "--policy", "uvm", timeout=60)
    assert res.returncode == 2 and one_line(res.stderr) and "umsim" in res.stderr, res.stderr


# ---------------------------------------------------------------- 13: integers never cut to 32 bits
@pytest.mark.parametrize("argv", [
    ["simulate", "triad", "--thrash-threshold", "4294967296"], ["simulate", "triad", "--batch", "4294967296"],
    ["simulate", "triad", "--counter-threshold", "18446744073709551616"],
    ["simulate", "triad", "--prefetch-threshold", "101"], ["simulate", "triad", "--iterations", "4294967297"],
], ids=lambda a: " ".join(a)[:50])
def test_item13_out_of_range_integers_are_refused(argv):
    rc, _, err = call(*argv)
    assert rc == 2 and one_line(err), err


@pytest.mark.parametrize("opt,value", [("--thrash-threshold", "4294967296"), ("--iterations", "4294967297"),
                                       ("--batch", "99999999999999999999")])
def test_item13_umsim_itself_refuses_them(opt, value):
    res = subprocess.run([native.find_binary("umsim", "UMSCOPE_UMSIM", "umsim"), "--app", "triad", "--footprint", "1M",
                          "--capacity", "1G", opt, value], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stderr.startswith("umsim: error:"), res.stderr


# ---------------------------------------------------------------- 14: a trace through a pipe
def _good_trace(path, pages=64):
    lines = [{"k": "mem", "op": 1, "a": 1 << 30, "b": pages * 4096}]
    lines += [{"k": "um", "c": 1, "s": 10 + i, "e": 11 + i, "a": (1 << 30) + i * 4096, "v": 4096, "f": 1}
              for i in range(pages)]
    lines.append({"k": "kernel", "s": 5, "e": 10 + pages})
    Path(path).write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_item14_trace_through_a_pipe_is_read_once(tmp_path):
    f = tmp_path / "t.jsonl"
    _good_trace(f)
    res = subprocess.run(["bash", "-c", f'"{sys.executable}" -m umscope simulate --trace <(cat "{f}") --policy uvm '
                          "--json"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)[0]["counts"]["gpu_events"] == 64


# ---------------------------------------------------------------- 15: read-only WAL stores
def test_item15_read_only_wal_store_reads_and_gains_no_file(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    store = d / "s.db"
    make_store(store, runs=2)
    db = sqlite3.connect(store)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()
    (d / "s.db-shm").mkdir()  # SQLite's own read-only mode cannot make its -shm here (as in a read-only folder)
    store.chmod(0o444)
    d.chmod(0o555)
    try:
        for argv in (["compare", "--store", store, "-o", tmp_path / "c.html"], ["merge", tmp_path / "m.db", store],
                     ["export", "--store", store], ["runs", "--store", store]):
            rc, _, err = call(*argv)
            assert rc == 0 and "not a umscope store" not in err, (argv, err)
        assert sorted(p.name for p in d.iterdir()) == ["s.db", "s.db-shm"]
    finally:
        d.chmod(0o755)


# ---------------------------------------------------------------- 16: misread input refused
@pytest.mark.parametrize("argv", [
    ["bench", "cpu-stream", "--kind", "system,first_touch=cpu,first_touch=gpu", "--dry-run"],
    ["bench", "cpu-stream", "--kind", "system,", "--dry-run"],
    ["bench", "cpu-stream", "--kind", "managed,,first_touch=cpu", "--dry-run"],
    ["bench", "nccl", "--launcher", "mpirun", "-n", "99999999999999999999", "--dry-run"],
    ["bench", "nccl", "--launcher", "mpirun", "-n", "١", "--dry-run"],
    ["bench", "selftest", "--devices", "1024", "--dry-run"],
    ["bench", "selftest", "--devices", "١", "--dry-run"],
    ["compare", "-o", ""],
], ids=lambda a: " ".join(a)[:60])
def test_item16_misread_options_are_refused(argv, tmp_path):
    store = tmp_path / "s.db"
    if argv[0] == "compare":
        make_store(store)
        argv = argv + ["--store", str(store)]
    rc, _, err = call(*argv)
    assert rc == 2 and one_line(err), err


def test_item16_place_rule_out_of_range():
    if place.library_path() is None:
        pytest.skip("this build has no libumalloc (no CUDA toolkit at build time)")
    rc, _, err = call("place", "--kind", "device", "--rule", ">=1e400:device", "--", "true")
    assert rc == 2 and one_line(err), err


# ---------------------------------------------------------------- 17: nothing created
@pytest.mark.parametrize("argv", [
    ["bench", "selftest", "--dry-run"], ["run", "--dry-run", "--filter", "selftest-nothing"],
    ["bench", "selftest", "--filter", "no-such-case"], ["bench", "selftest", "--devices", "1024"],
    ["bench", "cpu-stream", "--size", "4m", "--dry-run"], ["app", "run", "triad", "--dry-run"],
    ["bench", "selftest", "--timeout", "nan"], ["bench", "selftest", "--machine", "no-such-machine"],
], ids=lambda a: " ".join(a)[:60])
def test_item17_dry_run_and_usage_errors_create_no_file(argv, tmp_path):
    store = tmp_path / "new" / "s.db"
    rc, _, err = call(*argv, "--store", store)
    assert rc in (0, 2), err
    assert not store.exists() and not store.parent.exists()


# ---------------------------------------------------------------- 18: checked before a run exists
@pytest.mark.parametrize("argv,env", [
    (["bench", "cpu-stream", "--size", "0.5K"], {}),
    (["bench", "gpu-stream", "--size", "1000"], {}),
    (["app", "run", "needle", "--processor", "cpu", "--footprint", "1"], {}),
    (["app", "run", "llm", "--model", "bogus"], {}),
    (["app", "run", "llm", "--prompt", "0"], {}), (["app", "run", "llm", "--tokens", "-1"], {}),
    (["app", "run", "llm", "--batch", "0"], {}), (["app", "run", "llm", "--model", "gpt2-tiny", "--prompt", "1000"], {}),
    (["app", "run", "bfs", "--nodes", "1"], {}), (["app", "run", "bfs", "--nodes", "4294967296"], {}),
    (["bench", "selftest"], {"UMSCOPE_HOST_MEM_LIMIT": "abc"}),
    (["bench", "selftest"], {"UMSCOPE_HOST_MEM_LIMIT": "8X"}),
], ids=lambda a: " ".join(a if isinstance(a, list) else [f"{k}={v}" for k, v in a.items()])[:60])
def test_item18_checked_before_a_run_exists(argv, env, tmp_path, monkeypatch):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    store = tmp_path / "s.db"
    rc, _, err = call(*argv, "--store", store, "--no-progress")
    assert rc == 2 and one_line(err), err
    assert not store.exists()

