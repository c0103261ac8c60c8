"""The Python API, for notebooks and scripts (see docs/python-api.md):

    import umscope
    fp = umscope.probe()                          # the capability probe (umscope info --json)
    res = umscope.run_plan("cpu-stream", store="r.sqlite", kinds=["system"], sizes="64M", threads="1")
    st = umscope.open_store("r.sqlite")           # read-only; never creates a file
    st.runs, st.records(res["run"]), st.dataframe()   # the last needs pandas (umscope[pandas])
"""

import json

from umscope import plans, suite
from umscope import probe as _probe_module
from umscope.errors import UsageError
from umscope.merge import open_readonly
from umscope.model import bounds
from umscope.store import Store, default_store_path


class ResultStore:
    """A store opened read-only: runs, records and a pandas DataFrame of them."""

    def __init__(self, path=None):
        self.path = str(path or default_store_path())
        self._db = open_readonly(self.path)

    def close(self):
        self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<umscope store {self.path}: {len(self.runs)} run(s)>"

    @property
    def runs(self) -> list:
        rows = [dict(r) for r in self._db.execute("SELECT * FROM runs ORDER BY id")]
        for r in rows:
            for k in ("plan", "options", "fingerprint"):
                r[k] = json.loads(r[k]) if r.get(k) else None
        return rows

    def run(self, run_id=None) -> dict:
        runs = self.runs
        if not runs:
            raise UsageError(f"no runs in {self.path}")
        if run_id is None:
            return runs[-1]
        for r in runs:
            if r["id"] == int(run_id):
                return r
        raise UsageError(f"no run {run_id} in {self.path}")

    def records(self, run=None) -> list:
        q, args = "SELECT * FROM records", ()
        if run is not None:
            q, args = q + " WHERE run_id=?", (int(run),)
        out = []
        for row in self._db.execute(q + " ORDER BY id", args):
            d = dict(row)
            d["extra"] = json.loads(d["extra"]) if d["extra"] else {}
            out.append(d)
        return out

    def dataframe(self, run=None, expand_extra=True):
        """One row per record; the extra fields (dst_kind, direction, bound, efficiency...) as columns,
        host and GPU from the run. Needs pandas: pip install 'umscope[pandas]'."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("ResultStore.dataframe() needs pandas: pip install 'umscope[pandas]'") from None
        hosts = {r["id"]: (r["hostname"], r["gpu"]) for r in self.runs}
        rows = []
        for rec in self.records(run):
            extra = rec.pop("extra")
            rec["host"], rec["gpu"] = hosts.get(rec["run_id"], (None, None))
            if expand_extra:
                for k, v in extra.items():
                    if k != "samples" and k not in rec:
                        rec[k] = v
                rec["samples"] = extra.get("samples")
            else:
                rec["extra"] = extra
            rows.append(rec)
        return pd.DataFrame(rows)


def open_store(path=None) -> ResultStore:
    """The store at path (default: $UMSCOPE_STORE or ~/.local/share/umscope/results.sqlite), read-only."""
    return ResultStore(path)


def run_plan(plan, store=None, label=None, progress=False, reps=None, warmup=None, timeout=None, device=0,
             quick=False, **options) -> dict:
    """Runs a plan and stores it as one run, as `umscope bench`/`umscope run` do.

    plan: a benchmark family name ("cpu-stream", "copy", ... as `umscope list`), "default" for
    the suite of `umscope run`, or a list of suite.Case. options go to the family's plan (kinds,
    sizes, threads, ops, ...). Returns {"run": id, "status", "store": path, "records": [...]}."""
    fp = _probe_module.probe()
    if isinstance(plan, str):
        if plan == "default":
            cases = plans.default_plan(fp, quick=quick)
        else:
            if plan not in plans.families():
                raise UsageError(f"unknown benchmark family {plan!r} ({', '.join(plans.families())})")
            cases = plans.bench_plan(plan, fp, **options)
        kind = "run" if plan == "default" else f"bench {plan}"
    else:
        cases, kind = list(plan), "api"
    if timeout:
        for c in cases:
            c.timeout = timeout
    opts = {"device": device, "reps": reps, "warmup": warmup, "allow_oversubscription": False,
            "allow_host_overcommit": False, "machine": None}
    desc = bounds.describe(fp, None)
    st = Store(store)
    try:
        command = "python: umscope.run_plan(" + repr(plan if isinstance(plan, str) else f"{len(cases)} cases") + ")"
        run_id = st.create_run(kind, command, suite.plan_to_json(cases), opts, fp, label)
        status = suite.run_cases(st, run_id, cases, opts, progress=progress,
                                 annotate=lambda recs: bounds.annotate(recs, fp, desc),
                                 bus_ids=suite.bus_ids_of(fp))
        return {"run": run_id, "status": status, "store": str(st.path), "records": st.records(run_id)}
    finally:
        st.close()


def probe() -> dict:
    return _probe_module.probe()


__all__ = ["open_store", "run_plan", "probe", "ResultStore"]
