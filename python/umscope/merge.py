"""umscope merge OUT STORE...: gathers the runs of many stores (one per node, say) into one.

Runs are renumbered in OUT; each keeps where it came from (options.merged_from). A run that
OUT already holds (same host, start time and command) is not copied twice, so merging again
after more nodes finished adds only the new runs. Sources are opened read-only."""

import json
import sqlite3
import sys
from pathlib import Path

from umscope.errors import UsageError
from umscope.store import Store

_RUN_COLS = ["started", "finished", "status", "kind", "label", "command", "plan", "options", "fingerprint",
             "hostname", "gpu", "driver", "cuda", "kernel", "cpu", "umscope_version"]
_CASE_COLS = ["case_id", "benchmark", "kind", "params", "status", "reason", "started", "elapsed"]
_REC_COLS = ["case_id", "benchmark", "op", "processor", "kind", "policy", "bytes", "threads", "iteration",
             "metric", "value", "unit", "n", "median", "min", "max", "spread", "status", "reason", "extra"]


def open_readonly(path) -> sqlite3.Connection:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"no store at {path}")
    try:
        db = sqlite3.connect(f"file:{p.resolve()}?mode=ro", uri=True, timeout=60)
        db.row_factory = sqlite3.Row
        db.execute("SELECT count(*) FROM runs").fetchone()
        db.execute("SELECT count(*) FROM records").fetchone()
    except sqlite3.Error as e:
        raise UsageError(f"{path} is not a umscope store: {e}") from None
    return db


def merge(out_path, sources, progress=True) -> dict:
    """Copies every run of every source store into out_path; returns counts."""
    out_resolved = Path(out_path).resolve()
    srcs = []
    for s in sources:
        if Path(s).resolve() == out_resolved:
            raise UsageError(f"{s} is the output store; name it once, as OUT")
        srcs.append((s, open_readonly(s)))  # every source is checked before anything is written
    out = Store(out_path)
    have = {(r["hostname"], r["started"], r["command"]) for r in out.db.execute(
        "SELECT hostname, started, command FROM runs")}
    totals = {"stores": len(srcs), "runs": 0, "records": 0, "cases": 0, "skipped_runs": 0}
    for path, src in srcs:
        runs = [dict(r) for r in src.execute("SELECT * FROM runs ORDER BY id")]
        n_runs = n_recs = 0

        def write(db, runs=runs, src=src, path=path):
            nonlocal n_runs, n_recs
            for run in runs:
                key = (run["hostname"], run["started"], run["command"])
                if key in have:
                    totals["skipped_runs"] += 1
                    continue
                have.add(key)
                opts = json.loads(run["options"]) if run["options"] else {}
                opts["merged_from"] = {"store": str(Path(path).resolve()), "run": run["id"]}
                run["options"] = json.dumps(opts)
                new_id = db.execute(f"INSERT INTO runs ({', '.join(_RUN_COLS)}) VALUES "
                                    f"({','.join('?' * len(_RUN_COLS))})", [run[c] for c in _RUN_COLS]).lastrowid
                cases = src.execute(f"SELECT {', '.join(_CASE_COLS)} FROM cases WHERE run_id=?", (run["id"],))
                db.executemany(f"INSERT INTO cases (run_id, {', '.join(_CASE_COLS)}) VALUES "
                               f"({','.join('?' * (len(_CASE_COLS) + 1))})",
                               ([new_id] + list(c) for c in cases))
                recs = src.execute(f"SELECT {', '.join(_REC_COLS)} FROM records WHERE run_id=? ORDER BY id",
                                   (run["id"],)).fetchall()
                db.executemany(f"INSERT INTO records (run_id, {', '.join(_REC_COLS)}) VALUES "
                               f"({','.join('?' * (len(_REC_COLS) + 1))})", ([new_id] + list(r) for r in recs))
                got = db.execute("SELECT count(*) FROM records WHERE run_id=?", (new_id,)).fetchone()[0]
                if got != len(recs):
                    raise RuntimeError(f"run {run['id']} of {path}: {got} of {len(recs)} records copied")
                totals["cases"] += db.execute("SELECT count(*) FROM cases WHERE run_id=?", (new_id,)).fetchone()[0]
                n_runs += 1
                n_recs += got
        out._write(write)
        src.close()
        totals["runs"] += n_runs
        totals["records"] += n_recs
        if progress:
            sys.stderr.write(f"{path}: {n_runs} run(s), {n_recs} record(s)\n")
    out.close()
    return totals
