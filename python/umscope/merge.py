"""umscope merge OUT STORE...: gathers the runs of many stores (one per node, say) into one.

Runs are renumbered in OUT; each keeps where it came from (options.merged_from). A run that OUT already holds
(same host, start time and command) is not copied twice, so merging again after more nodes finished adds only
the new runs; where the source holds a newer state of it (`run --resume` finished it since), OUT's copy is
replaced by that state under its OUT number. Sources are opened read-only and checked before anything is
written; a source damaged past its header gives every run still readable, and says which were not.

OUT is built in a temporary file beside it (a copy of OUT where it exists) and renamed over OUT only when every
source has been read: an interrupted or failed merge leaves OUT as it was."""

import json
import os
import sqlite3
import sys
from pathlib import Path

from umscope.errors import UsageError
from umscope.store import Store, _check_path, text

_RUN_COLS = ["started", "finished", "status", "kind", "label", "command", "plan", "options", "fingerprint",
             "hostname", "gpu", "driver", "cuda", "kernel", "cpu", "umscope_version"]
_CASE_COLS = ["case_id", "benchmark", "kind", "params", "status", "reason", "started", "elapsed"]
_REC_COLS = ["case_id", "benchmark", "op", "processor", "kind", "policy", "bytes", "threads", "iteration",
             "metric", "value", "unit", "n", "median", "min", "max", "spread", "status", "reason", "extra"]


def open_readonly(path) -> sqlite3.Connection:
    """A store's connection, read-only (a read-only WAL store too), its layout checked: one-line UsageError."""
    st = Store(path, readonly=True)
    return st.db


def _resolve(path) -> Path:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError) as e:  # a symlink loop
        raise UsageError(f"{path}: {getattr(e, 'strerror', None) or e}") from None


def _state(db, rid, run) -> tuple:
    """How far a run got: (finished, complete, cases with an outcome, records): larger is newer."""
    done = db.execute("SELECT count(*) FROM cases WHERE run_id=? AND status IS NOT NULL", (rid,)).fetchone()[0]
    recs = db.execute("SELECT count(*) FROM records WHERE run_id=?", (rid,)).fetchone()[0]
    return (run["finished"] or 0, run["status"] == "complete", done, recs)


def _read_run(src, run):
    """(cases, records) of one source run, or raises sqlite3.DatabaseError where its pages are damaged."""
    cases = [list(c) for c in src.execute(f"SELECT {', '.join(_CASE_COLS)} FROM cases WHERE run_id=?", (run["id"],))]
    # Through the run's index: a damaged page of another run's records is never read.
    q = f"SELECT {', '.join(_REC_COLS)} FROM records INDEXED BY records_run WHERE run_id=? ORDER BY id"
    try:
        recs = [list(r) for r in src.execute(q, (run["id"],))]
    except sqlite3.OperationalError as e:
        if "no such index" not in str(e):
            raise
        recs = [list(r) for r in src.execute(q.replace(" INDEXED BY records_run", ""), (run["id"],))]
    return cases, recs


def _source_runs(src):
    """Every readable run row of a source, and how many could not be read (a damaged page of the runs table)."""
    try:
        return [dict(r) for r in src.execute("SELECT * FROM runs ORDER BY id")], 0
    except sqlite3.DatabaseError:
        pass
    try:
        last = src.execute("SELECT max(id) FROM runs").fetchone()[0] or 0
    except sqlite3.DatabaseError:
        return [], 1
    runs, bad = [], 0
    for i in range(1, int(last) + 1):
        try:
            r = src.execute("SELECT * FROM runs WHERE id=?", (i,)).fetchone()
        except sqlite3.DatabaseError:
            bad += 1
            continue
        if r is not None:
            runs.append(dict(r))
    return runs, bad


def _copy_existing(out_path, tmp):
    """tmp as a copy of the store at out_path (checked to be one), or nothing where out_path does not exist."""
    if not out_path.exists():
        return
    src = Store(out_path, readonly=True)
    try:
        row = src.db.execute("PRAGMA quick_check").fetchone()
        if row is None or row[0] != "ok":
            raise UsageError(f"the output store {out_path} is damaged ({(row or ['?'])[0]}); nothing was merged: "
                             "merge into a new OUT")
        dst = sqlite3.connect(str(tmp))
        try:
            src.db.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()


def merge(out_path, sources, progress=True) -> dict:
    """Copies every readable run of every source store into out_path; returns counts and, per source, what was
    merged, skipped and why (`inputs`)."""
    out_path = Path(out_path)
    if not str(out_path).strip():
        raise UsageError("merge needs an output store, got an empty path")
    out_resolved = _resolve(out_path)
    srcs, refused = [], []
    for s in sources:  # every source is checked before anything is written
        if not str(s).strip():
            raise UsageError("merge: a store path is empty")
        if _resolve(s) == out_resolved:
            raise UsageError(f"{s} is the output store; name it once, as OUT")
        if any(_resolve(s) == _resolve(p) for p, _ in srcs + refused):
            raise UsageError(f"{s} is named twice")
        if _check_path(Path(s)) is None:
            raise UsageError(f"no store at {s}")
        try:
            srcs.append((s, Store(s, readonly=True)))
        except (UsageError, sqlite3.DatabaseError) as e:  # a damaged or foreign file: the others are still merged
            refused.append((s, str(e)))
    tmp = out_path.parent / f".{out_path.name}.merge-{os.getpid()}.tmp"
    totals = {"stores": len(srcs), "runs": 0, "replaced": 0, "records": 0, "cases": 0, "skipped_runs": 0,
              "unreadable_runs": 0, "inputs": [], "refused": len(refused)}
    if not srcs:
        raise UsageError("no store could be read; nothing was merged: " + "; ".join(f"{why}" for _, why in refused))
    for s, why in refused:
        note = {"store": str(s), "text": f"{s}: skipped, nothing read: {why}"}
        totals["inputs"].append(note)
        if progress:
            sys.stderr.write(note["text"] + "\n")
    try:
        if out_path.exists() or out_path.is_symlink():
            Store(out_path, readonly=True).close()  # OUT, where it exists, must be a umscope store
        out_path.parent.mkdir(parents=True, exist_ok=True)
        _copy_existing(out_path, tmp)
        out = Store(tmp)
        try:
            for path, st in srcs:
                note = _merge_one(out, path, st, totals)
                totals["inputs"].append(note)
                if progress:
                    sys.stderr.write(note["text"] + "\n")
        finally:
            out.close()
            for st in (s for _, s in srcs):
                st.close()
        os.replace(tmp, out_path)
    except BaseException:
        for f in (tmp, Path(str(tmp) + "-wal"), Path(str(tmp) + "-shm"), Path(str(tmp) + "-journal")):
            try:
                f.unlink()
            except OSError:
                pass
        raise
    return totals


def _merge_one(out, path, st, totals) -> dict:
    """Merges one source into out; returns what it did: {'store', 'merged', 'replaced', 'already', 'older',
    'unreadable', 'records', 'text'}."""
    src = st.db
    have = {}
    for r in out.db.execute("SELECT * FROM runs"):
        have[(r["hostname"], r["started"], r["command"])] = dict(r)
    runs, bad_rows = _source_runs(src)
    n = {"merged": 0, "replaced": 0, "already": 0, "older": 0, "unreadable": bad_rows, "records": 0, "why": []}
    if bad_rows:
        n["why"].append(f"{bad_rows} run row(s) unreadable")
    where = str(_resolve(path))
    for run in runs:
        key = (run["hostname"], run["started"], run["command"])
        old = have.get(key)
        try:
            cases, recs = _read_run(src, run)
            state = _state(src, run["id"], run)
        except sqlite3.DatabaseError as e:
            n["unreadable"] += 1
            n["why"].append(f"run {run['id']} unreadable ({e})")
            continue
        if old is not None:
            if state <= _state(out.db, old["id"], old):
                n["already" if state == _state(out.db, old["id"], old) else "older"] += 1
                continue
        try:
            opts = json.loads(run["options"]) if run["options"] else {}
        except (TypeError, ValueError, RecursionError):
            opts = None
        if not isinstance(opts, dict):
            opts = {"damaged_options": str(run["options"])[:200]}
        opts["merged_from"] = {"store": where, "run": run["id"]}
        run["options"] = json.dumps(text(opts))
        row = [text(run[c]) for c in _RUN_COLS]

        def write(db, row=row, cases=cases, recs=recs, old=old):
            if old is not None:  # the newer state replaces the older under OUT's number
                new_id = old["id"]
                db.execute(f"UPDATE runs SET {', '.join(c + '=?' for c in _RUN_COLS)} WHERE id=?", row + [new_id])
                db.execute("DELETE FROM cases WHERE run_id=?", (new_id,))
                db.execute("DELETE FROM records WHERE run_id=?", (new_id,))
            else:
                new_id = db.execute(f"INSERT INTO runs ({', '.join(_RUN_COLS)}) VALUES "
                                    f"({','.join('?' * len(_RUN_COLS))})", row).lastrowid
            db.executemany(f"INSERT OR REPLACE INTO cases (run_id, {', '.join(_CASE_COLS)}) VALUES "
                           f"({','.join('?' * (len(_CASE_COLS) + 1))})", ([new_id] + text(c) for c in cases))
            db.executemany(f"INSERT INTO records (run_id, {', '.join(_REC_COLS)}) VALUES "
                           f"({','.join('?' * (len(_REC_COLS) + 1))})", ([new_id] + text(r) for r in recs))
            got = db.execute("SELECT count(*) FROM records WHERE run_id=?", (new_id,)).fetchone()[0]
            if got != len(recs):
                raise RuntimeError(f"run {run['id']} of {path}: {got} of {len(recs)} records copied")
            return new_id
        out._write(write)
        n["replaced" if old is not None else "merged"] += 1
        n["records"] += len(recs)
        totals["cases"] += len(cases)
    totals["runs"] += n["merged"]
    totals["replaced"] += n["replaced"]
    totals["records"] += n["records"]
    totals["skipped_runs"] += n["already"] + n["older"]
    totals["unreadable_runs"] += n["unreadable"]
    parts = [f"{n['merged']} run(s) merged"]
    if n["replaced"]:
        parts.append(f"{n['replaced']} replaced by their newer state")
    parts.append(f"{n['records']} record(s)")
    if n["already"]:
        parts.append(f"{n['already']} already there")
    if n["older"]:
        parts.append(f"{n['older']} skipped: OUT holds a newer state")
    if n["unreadable"]:
        parts.append(f"{n['unreadable']} skipped: damaged ({'; '.join(n['why'])[:300]})")
    n["store"] = str(path)
    n["text"] = f"{path}: " + ", ".join(parts)
    return n
