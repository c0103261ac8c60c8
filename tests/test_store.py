import csv
import io
import json
import multiprocessing

import pytest

from umscope.store import RECORD_FIELDS, Store
from umscope.suite import Case

FP = {"host": {"hostname": "h", "kernel": "k"}, "cpu": {"model": "cpu"}, "cuda": {}, "gpus": []}


def _rec(i, **kw):
    r = {"type": "record", "benchmark": "b", "op": "read", "processor": "cpu", "kind": "system",
         "policy": "", "bytes": 4096, "metric": "bandwidth", "unit": "GB/s", "n": 3, "median": float(i),
         "min": i - 0.5, "max": i + 0.5, "value": float(i), "spread": 0.1, "samples": [i - 0.5, i, i + 0.5]}
    r.update(kw)
    return r


def test_run_cases_and_records_roundtrip(tmp_path):
    s = Store(tmp_path / "s.sqlite")
    run = s.create_run("run", "umscope run", [], {}, FP)
    c = Case("b", "system", {"bytes": "4KiB"})
    s.add_case_result(run, c, "ok", "", 0.0, 1.0, [_rec(1), _rec(2, op="write")])
    s.add_case_result(run, Case("b", "device"), "skipped", "no GPU", 0.0, 0.1, [])
    recs = s.records(run)
    assert [r["op"] for r in recs] == ["read", "write", None]
    assert recs[0]["extra"]["samples"] == [0.5, 1, 1.5]
    assert recs[2]["status"] == "skipped" and recs[2]["reason"] == "no GPU"
    assert s.done_cases(run) == {c.case_id, "b device"}
    # Re-recording a case replaces its records instead of duplicating them.
    s.add_case_result(run, c, "ok", "", 0.0, 1.0, [_rec(3)])
    assert len(s.records(run)) == 2
    s.finish_run(run, "complete")
    assert s.run(run)["status"] == "complete"
    assert s.run()["id"] == run


def test_export_formats(tmp_path):
    s = Store(tmp_path / "s.sqlite")
    run = s.create_run("run", "cmd", [], {}, FP)
    s.add_case_result(run, Case("b", "system"), "ok", "", 0, 1, [_rec(7)])
    lines = s.export("jsonl", run).splitlines()
    obj = json.loads(lines[0])
    assert obj["median"] == 7.0 and obj["run"] == run and obj["case"] == "b system"
    rows = list(csv.DictReader(io.StringIO(s.export("csv", run))))
    assert list(rows[0].keys()) == RECORD_FIELDS
    assert float(rows[0]["median"]) == 7.0


def _writer(path, label, n):
    s = Store(path)
    run = s.create_run("run", label, [], {}, FP)
    for i in range(n):
        s.add_case_result(run, Case("b", "system", {"i": str(i)}), "ok", "", 0, 0, [_rec(i), _rec(i, op="copy")])
    s.finish_run(run, "complete")


def test_two_concurrent_writers_lose_nothing(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    Store(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, f"w{k}", 60)) for k in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    s = Store(path)
    runs = s.runs()
    assert len(runs) == 2 and all(r["status"] == "complete" for r in runs)
    for r in runs:
        assert len(s.records(r["id"])) == 120
        assert len(s.cases(r["id"])) == 60


class _SignalAfter:
    """The store's connection, raising KeyboardInterrupt (as a signal handler would) just after one
    statement has taken effect."""

    def __init__(self, db, statement):
        self._db, self._statement = db, statement

    @property
    def in_transaction(self):
        return self._db.in_transaction

    def execute(self, sql, *args):
        cur = self._db.execute(sql, *args)
        if sql == self._statement:
            self._statement = None
            raise KeyboardInterrupt
        return cur


def _create_run_interrupted_after(tmp_path, statement):
    """A store whose create_run is interrupted (KeyboardInterrupt, as a signal) right after `statement`; the
    interrupt must reach the caller, not an error of the rollback."""
    s = Store(tmp_path / "s.sqlite")
    real = s.db
    s.db = _SignalAfter(real, statement)
    with pytest.raises(KeyboardInterrupt):
        s.create_run("bench", "umscope bench x", [], {}, {})
    s.db = real
    return s, real


def test_a_signal_after_commit_keeps_the_write_and_propagates(tmp_path):
    s, real = _create_run_interrupted_after(tmp_path, "COMMIT")
    assert not real.in_transaction
    assert [r["command"] for r in s.runs()] == ["umscope bench x"]


def test_a_signal_after_begin_undoes_the_transaction(tmp_path):
    s, real = _create_run_interrupted_after(tmp_path, "BEGIN IMMEDIATE")
    assert not real.in_transaction  # no transaction left open to block the next writer
    assert s.runs() == []
    s.create_run("bench", "umscope bench y", [], {}, {})
    assert [r["command"] for r in s.runs()] == ["umscope bench y"]
