"""The results store: SQLite, embedded, no server.

A run row keeps the machine fingerprint and the exact command; a case row per
planned case keeps its outcome (so an interrupted run can be resumed); one
flat record per measurement. WAL mode and immediate transactions let several
runs write to one store at once without losing anything."""

import csv
import io
import json
import os
import sqlite3
import stat
import sys
import time
from pathlib import Path

from umscope.devices import gpu_column
from umscope.errors import UsageError

RECORD_FIELDS = ["run", "case", "benchmark", "op", "processor", "kind", "policy", "bytes", "threads",
                 "iteration", "metric", "value", "unit", "n", "median", "min", "max", "spread",
                 "status", "reason"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  started REAL, finished REAL, status TEXT, kind TEXT, label TEXT, command TEXT,
  plan TEXT, options TEXT, fingerprint TEXT,
  hostname TEXT, gpu TEXT, driver TEXT, cuda TEXT, kernel TEXT, cpu TEXT, umscope_version TEXT);
CREATE TABLE IF NOT EXISTS cases (
  run_id INTEGER, case_id TEXT, benchmark TEXT, kind TEXT, params TEXT,
  status TEXT, reason TEXT, started REAL, elapsed REAL,
  PRIMARY KEY (run_id, case_id));
CREATE TABLE IF NOT EXISTS records (
  id INTEGER PRIMARY KEY AUTOINCREMENT, run_id INTEGER, case_id TEXT,
  benchmark TEXT, op TEXT, processor TEXT, kind TEXT, policy TEXT, bytes INTEGER,
  threads INTEGER, iteration INTEGER, metric TEXT, value REAL, unit TEXT, n INTEGER,
  median REAL, min REAL, max REAL, spread REAL, status TEXT, reason TEXT, extra TEXT);
CREATE INDEX IF NOT EXISTS records_run ON records(run_id);
"""

_NUMERIC = ("bytes", "threads", "iteration", "value", "n", "median", "min", "max", "spread")
_RECORD_COLUMNS = ["benchmark", "op", "processor", "kind", "policy", "bytes", "threads", "iteration",
                   "metric", "value", "unit", "n", "median", "min", "max", "spread", "status", "reason"]


def default_store_path() -> Path:
    env = os.environ.get("UMSCOPE_STORE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "umscope" / "results.sqlite"


# The store's layout, versioned: PRAGMA user_version. Stores written before the version was kept read as 0
# and are version 1 (the same tables); a store of a later version, or one whose tables lack a column this
# umscope reads, is refused in one line rather than misread.
SCHEMA_VERSION = 1
_COLUMNS = {
    "runs": {"id", "started", "finished", "status", "kind", "label", "command", "plan", "options", "fingerprint",
             "hostname", "gpu", "driver", "cuda", "kernel", "cpu", "umscope_version"},
    "cases": {"run_id", "case_id", "benchmark", "kind", "params", "status", "reason", "started", "elapsed"},
    "records": {"id", "run_id", "case_id", "extra"} | set(_RECORD_COLUMNS),
}


def _check_path(path: Path):
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except (OSError, RuntimeError) as e:  # a symlink loop, a path through a file, no permission
        raise UsageError(f"cannot use store {path}: {getattr(e, 'strerror', None) or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"store {path} is a directory, not a store file")
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"store {path} is not a regular file")
    if st.st_size == 0:
        raise UsageError(f"store {path} is an empty file, not a umscope store: remove it, or give --store a new path")
    return st


def text(value):
    """Text as it goes into the store: bytes that are not UTF-8 (in an argument, a label, a file name), which
    Python keeps as lone surrogates, become readable escapes ('\\xe9') instead of failing the write; lists and
    mappings are cleaned throughout (their JSON goes into reports and exports too)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            pass
        try:
            return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate no byte decoded to (from JSON's \\ud800)
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {text(k): text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [text(v) for v in value]
    return value


def _loads(value):
    """A JSON column's value; a damaged one (not JSON) is kept as its text, not fatal."""
    if not value:
        return None
    try:
        return json.loads(value)
    except (TypeError, ValueError, RecursionError):
        return {"damaged": str(value)[:200]}


def check_schema(db, path):
    """Refuses, in one line, a database that is not a umscope store of a layout this umscope reads. Returns
    True where it holds no table at all (an empty SQLite file: a store not yet created)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        return True
    if "runs" not in tables:
        raise UsageError(f"{path} is not a umscope store (an SQLite database without a runs table): nothing "
                         "was written to it")
    if version > SCHEMA_VERSION:
        raise UsageError(f"store {path} has layout version {version}, written by a newer umscope (this one reads "
                         f"up to {SCHEMA_VERSION}): upgrade umscope to read it")
    for table, want in _COLUMNS.items():
        have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
        if not have and table != "runs":
            raise UsageError(f"{path} is not a umscope store (no {table} table)")
        lost = sorted(want - have)
        if lost:
            raise UsageError(f"{path} is not a umscope store of a layout this umscope reads (its {table} table "
                             f"lacks {', '.join(lost)})")
    return False


_warned_netfs = set()


def journal_mode(path) -> str:
    """WAL, except on a network filesystem, where WAL is unsafe (said once on stderr): DELETE."""
    from umscope import netfs
    fs = netfs.network_fs(Path(path).parent)
    if not fs:
        return "WAL"
    if fs not in _warned_netfs:
        _warned_netfs.add(fs)
        sys.stderr.write(f"umscope: store {path} is on a network filesystem ({fs}): using SQLite's rollback "
                         "journal instead of WAL; for many nodes at once prefer a node-local --store per host "
                         "and `umscope merge`\n")
    return "DELETE"


class Store:
    """readonly=True (runs, export, report): the store must exist, is never created or changed, and may
    be a read-only file. Otherwise the store is created if missing, must be writable, and is checked
    for damage before anything runs, so no measurement is made that could not be stored."""

    def __init__(self, path=None, readonly=False):
        if path is not None and not str(path).strip():
            raise UsageError("--store needs a path, got an empty one")
        if path is not None and "\0" in str(path):
            raise UsageError("--store: a path cannot hold a NUL character")
        self.path = Path(path) if path else default_store_path()
        self.readonly = readonly
        try:
            existing = _check_path(self.path)
            if readonly:
                self.db = self._open_readonly()
            else:
                if existing is None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                self.db = sqlite3.connect(str(self.path), timeout=60, isolation_level=None)
                self.db.execute("PRAGMA busy_timeout = 60000")
                try:
                    fresh = check_schema(self.db, self.path)  # before anything is written to the file
                except UsageError:
                    self.db.close()
                    raise
                self.db.execute(f"PRAGMA journal_mode = {journal_mode(self.path)}")
                if fresh:
                    self.db.executescript(_SCHEMA)
                else:
                    self.db.execute("CREATE INDEX IF NOT EXISTS records_run ON records(run_id)")
                if self.db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                    self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                self._check_integrity()
        except sqlite3.DatabaseError as e:
            if "not a database" in str(e) or "malformed" in str(e) and existing is not None:
                raise UsageError(f"{self.path} is not a umscope store ({e}): nothing was written to it") from None
            raise UsageError(f"cannot use store {self.path}: {e}") from None
        except OSError as e:
            raise UsageError(f"cannot use store {self.path}: {e.strerror or e}") from None
        self.db.row_factory = sqlite3.Row

    @staticmethod
    def check_path(path):
        """What Store(path) refuses about the path itself (empty, a directory, a device, an empty file, a symlink
        loop), refused without opening or creating anything: for checks before a run."""
        if not str(path).strip():
            raise UsageError("--store needs a path, got an empty one")
        if "\0" in str(path):
            raise UsageError("--store: a path cannot hold a NUL character")
        _check_path(Path(path))

    def _open_readonly(self):
        if not self.path.exists():
            raise UsageError(f"no store at {self.path} (give --store PATH, or run a benchmark first)")
        uri = self.path.resolve().as_uri()
        db = last = None
        # immutable: nothing beside the store is created or changed, and a read-only store in WAL mode in a
        # read-only folder or mount (where no -shm file can be made) reads. Only where no writer is at work (no
        # -wal or -journal file beside it): then SQLite's own read-only mode, which shares the writer's -shm.
        busy = any(Path(str(self.path) + x).exists() for x in ("-wal", "-journal"))
        for flags in (("?mode=ro", "?mode=ro&immutable=1") if busy else ("?mode=ro&immutable=1",)):
            try:
                db = sqlite3.connect(uri + flags, uri=True, timeout=60, isolation_level=None)
                db.execute("PRAGMA busy_timeout = 60000")
                if check_schema(db, self.path):
                    raise UsageError(f"{self.path} is not a umscope store (an SQLite database without tables)")
                db.execute("SELECT count(*) FROM runs").fetchone()
                break
            except UsageError:
                db.close()
                raise
            except sqlite3.DatabaseError as e:
                if db is not None:
                    db.close()
                db = None
                if "not a database" in str(e):
                    raise UsageError(f"{self.path} is not a umscope store ({e})") from None
                last = e
        if db is None:
            raise last
        return db

    def _check_integrity(self):
        row = self.db.execute("PRAGMA quick_check").fetchone()
        if row is None or row[0] != "ok":
            raise UsageError(f"store {self.path} is damaged ({(row or ['?'])[0]}); nothing was run. Copy what "
                             f"it still holds with `umscope export --store {self.path}`, or use another --store")

    def close(self):
        self.db.close()

    def _write(self, fn):
        """Runs fn(db) in one immediate transaction, retrying while another writer holds the lock.

        A signal (SIGINT/SIGTERM/SIGHUP raise Interrupted) can arrive at any point, also just after BEGIN or
        COMMIT has taken effect: what is undone is decided by whether a transaction is open, so a committed
        write stays and the signal, not a failed ROLLBACK, is what propagates."""
        for attempt in range(200):
            try:
                self.db.execute("BEGIN IMMEDIATE")
                out = fn(self.db)
                self.db.execute("COMMIT")
                return out
            except BaseException as e:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                elif isinstance(e, sqlite3.OperationalError) and ("locked" in str(e) or "busy" in str(e)):
                    time.sleep(0.05 * (1 + attempt % 10))  # BEGIN found another writer: wait and try again
                    continue
                raise
        raise sqlite3.OperationalError(f"store {self.path} stayed locked")

    # --- runs -------------------------------------------------------------
    def create_run(self, kind, command, plan, options, fingerprint, label=None) -> int:
        kind, command, plan, options, fingerprint, label = text([kind, command, plan, options, fingerprint, label])
        row = (time.time(), "running", kind, label, command, json.dumps(plan), json.dumps(options),
               json.dumps(fingerprint), fingerprint.get("host", {}).get("hostname"),
               gpu_column(fingerprint), fingerprint.get("cuda", {}).get("driver"),
               str(fingerprint.get("cuda", {}).get("runtime_version")),
               fingerprint.get("host", {}).get("kernel"), fingerprint.get("cpu", {}).get("model"),
               fingerprint.get("umscope_version"))
        return self._write(lambda db: db.execute(
            "INSERT INTO runs (started, status, kind, label, command, plan, options, fingerprint, hostname,"
            " gpu, driver, cuda, kernel, cpu, umscope_version) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            row).lastrowid)

    def finish_run(self, run_id, status):
        self._write(lambda db: db.execute("UPDATE runs SET status=?, finished=? WHERE id=?",
                                          (status, time.time(), run_id)))

    def note_interruption(self, run_id, signal_name, case_id=None):
        """Keeps with the run what ended it (the signal's name) and the case that was running then, in its options
        under 'interrupted' (the report's status banner reads it; a resume ignores it)."""
        def write(db):
            row = db.execute("SELECT options FROM runs WHERE id=?", (run_id,)).fetchone()
            opts = json.loads(row[0]) if row and row[0] else {}
            opts = opts if isinstance(opts, dict) else {}
            opts["interrupted"] = {"signal": signal_name, "case": case_id, "at": time.time()}
            db.execute("UPDATE runs SET options=? WHERE id=?", (json.dumps(opts), run_id))
        self._write(write)

    def set_run_status(self, run_id, status):
        self._write(lambda db: db.execute("UPDATE runs SET status=? WHERE id=?", (status, run_id)))

    def run(self, run_id=None) -> dict:
        """A run by id, or the newest one."""
        if run_id is None:
            row = self.db.execute("SELECT * FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        else:
            row = self.db.execute("SELECT * FROM runs WHERE id=?", (int(run_id),)).fetchone()
        if row is None:
            raise UsageError(f"no run {run_id} in {self.path}" if run_id else f"no runs in {self.path} yet")
        d = dict(row)
        for k in ("plan", "options", "fingerprint"):
            d[k] = _loads(d[k])
        return d

    def runs(self) -> list:
        return [dict(r) for r in self.db.execute(
            "SELECT id, started, finished, status, kind, label, gpu, hostname, command FROM runs ORDER BY id")]

    def last_unfinished_run(self):
        row = self.db.execute("SELECT id FROM runs WHERE status IN ('interrupted','running') "
                              "ORDER BY id DESC LIMIT 1").fetchone()
        return row["id"] if row else None

    # --- cases and records ------------------------------------------------
    def done_cases(self, run_id) -> set:
        return {r["case_id"] for r in self.db.execute(
            "SELECT case_id FROM cases WHERE run_id=? AND status IS NOT NULL", (run_id,))}

    def add_case_result(self, run_id, case, status, reason, started, elapsed, records, case_extra=None):
        """One case's outcome and all its records, atomically. case_extra: fields of the record that stands
        for a case that left none (its energy)."""
        reason, records = text(reason), text(list(records))

        def write(db):
            db.execute("INSERT OR REPLACE INTO cases VALUES (?,?,?,?,?,?,?,?,?)",
                       (run_id, text(case.case_id), case.benchmark, text(case.kind), json.dumps(text(case.params)),
                        status, reason, started, elapsed))
            db.execute("DELETE FROM records WHERE run_id=? AND case_id=?", (run_id, text(case.case_id)))
            rows = list(records)
            if status != "ok" and not rows:
                rows = [dict(case_extra or {}, benchmark=case.benchmark, kind=case.kind, status=status,
                             reason=reason)]
            for rec in rows:
                rec = dict(rec)
                rec.setdefault("status", "ok")
                extra = {k: v for k, v in rec.items() if k not in _RECORD_COLUMNS and k != "type"}
                db.execute(
                    "INSERT INTO records (run_id, case_id, " + ", ".join(_RECORD_COLUMNS) + ", extra) VALUES ("
                    + ",".join("?" * (len(_RECORD_COLUMNS) + 3)) + ")",
                    [run_id, text(case.case_id)] + [rec.get(c) for c in _RECORD_COLUMNS] + [json.dumps(extra)])
        self._write(write)

    def update_record_extra(self, record_id, fields: dict):
        """Merges fields into one record's extra (the suite's cross-mode verdict)."""
        def write(db):
            row = db.execute("SELECT extra FROM records WHERE id=?", (record_id,)).fetchone()
            extra = json.loads(row[0]) if row and row[0] else {}
            extra.update(fields)
            db.execute("UPDATE records SET extra=? WHERE id=?", (json.dumps(extra), record_id))
        self._write(write)

    def fail_case(self, run_id, case_id, reason):
        """Marks a completed case and its records failed, with the reason (a check after the case ran)."""
        reason, case_id = text(reason), text(case_id)
        self._write(lambda db: (
            db.execute("UPDATE cases SET status='failed', reason=? WHERE run_id=? AND case_id=?",
                       (reason, run_id, case_id)),
            db.execute("UPDATE records SET status='failed', reason=? WHERE run_id=? AND case_id=?",
                       (reason, run_id, case_id))))

    def cases(self, run_id) -> list:
        return [dict(r) for r in self.db.execute(
            "SELECT * FROM cases WHERE run_id=? ORDER BY rowid", (run_id,))]

    def records(self, run_id=None) -> list:
        q, args = "SELECT * FROM records", ()
        if run_id is not None:
            q, args = q + " WHERE run_id=?", (run_id,)
        out = []
        for r in self.db.execute(q + " ORDER BY id", args):
            d = dict(r)
            try:
                d["extra"] = json.loads(d["extra"]) if d["extra"] else {}
            except (TypeError, ValueError, RecursionError):
                d["extra"] = None
            if not isinstance(d["extra"], dict):
                d["extra"] = {"damaged_extra": str(r["extra"])[:200]}
            for k in _NUMERIC:  # a foreign or damaged row's text in a number column reads as missing
                if isinstance(d.get(k), (str, bytes)):
                    d[k] = None
            out.append(d)
        return out

    def salvage_records(self, run_id=None):
        """(records, None), or where the store is damaged every record still readable, row by row,
        and a one-line note of what was lost."""
        try:
            return self.records(run_id), None
        except sqlite3.DatabaseError as e:
            err = e
        try:
            row = self.db.execute("SELECT seq FROM sqlite_sequence WHERE name='records'").fetchone()
            last = int(row[0]) if row else 0
        except sqlite3.DatabaseError:
            return [], f"store {self.path} is damaged ({err}); no record could be read"
        out, bad = [], 0
        for i in range(1, last + 1):
            try:
                r = self.db.execute("SELECT * FROM records WHERE id=?", (i,)).fetchone()
            except sqlite3.DatabaseError:
                bad += 1
                continue
            if r is None or (run_id is not None and r["run_id"] != run_id):
                continue
            d = dict(r)
            try:
                d["extra"] = json.loads(d["extra"]) if d["extra"] else {}
            except (TypeError, ValueError):
                d["extra"] = {}
            out.append(d)
        return out, (f"store {self.path} is damaged ({err}): {len(out)} record(s) read, {bad} unreadable")

    # --- export -----------------------------------------------------------
    def export(self, fmt, run_id=None, records=None) -> str:
        rows = []
        for r in (self.records(run_id) if records is None else records):
            flat = {"run": r["run_id"], "case": r["case_id"]}
            flat.update({k: r[k] for k in _RECORD_COLUMNS})
            rows.append((flat, r["extra"]))
        if fmt == "jsonl":
            return "".join(json.dumps(dict(flat, **{"extra": extra})) + "\n" for flat, extra in rows)
        if fmt == "csv":
            buf = io.StringIO()
            w = csv.DictWriter(buf, fieldnames=RECORD_FIELDS, lineterminator="\n")
            w.writeheader()
            for flat, _ in rows:
                w.writerow(flat)
            return buf.getvalue()
        raise UsageError(f"unknown export format {fmt!r} (jsonl, csv)")
