"""Caliper's json-split document (what `cali-query -q "format json-split"` writes and Hatchet's
CaliperReader / Thicket read): a path hierarchy umscope / benchmark / op / case, one data row per
measured record with bandwidth, latency, efficiency and bound as metric columns, and the run's
fingerprint (host, GPU, driver, scheduler job) as global metadata, so that the files of many
nodes' runs form a Thicket ensemble. One run per document: export each run to its own file."""

import json

from umscope.compare import case_key, case_text

_METRICS = ["bandwidth_GBps", "latency_ns", "efficiency", "bound_GBps", "spread", "bytes", "threads", "samples"]
_LATENCY_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def _globals(run) -> dict:
    fp = run.get("fingerprint") or {}
    sched = fp.get("scheduler") or {}
    g = {"umscope.run": run.get("id"), "umscope.version": run.get("umscope_version"),
         "umscope.command": run.get("command"), "umscope.kind": run.get("kind"), "label": run.get("label"),
         "hostname": run.get("hostname"), "gpu": run.get("gpu"), "driver": run.get("driver"),
         "cuda": run.get("cuda"), "kernel": run.get("kernel"), "cpu": run.get("cpu"),
         "launchdate": int(run["started"]) if run.get("started") else None,
         "addressing": fp.get("addressing")}
    if sched:
        g["scheduler"] = sched.get("name")
        g["scheduler.job"] = sched.get("job")
        for k, v in (sched.get("vars") or {}).items():
            g[f"scheduler.{k}"] = v
    return {k: v for k, v in g.items() if v is not None}


def build(run, records) -> dict:
    nodes, index = [{"label": "umscope", "column": "path"}], {}

    def node(parent, label):
        if (parent, label) not in index:
            index[(parent, label)] = len(nodes)
            nodes.append({"label": label, "column": "path", "parent": parent})
        return index[(parent, label)]

    rows, used = {}, set()
    for r in records:
        if r.get("status") != "ok" or r.get("median") is None:
            continue
        x = r.get("extra") or {}
        b = node(0, r["benchmark"])
        o = node(b, r.get("op") or r["benchmark"])
        leaf = case_text(case_key(r))[len(f"{r['benchmark']} {r.get('op') or ''}"):].strip() or "case"
        label, k = leaf, 2
        while (o, label) in used:  # one row per node
            label, k = f"{leaf} #{k}", k + 1
        used.add((o, label))
        unit = r.get("unit")
        rows[node(o, label)] = [
            r["median"] if unit == "GB/s" else None,
            r["median"] * _LATENCY_NS[unit] if unit in _LATENCY_NS and r.get("metric") in ("latency", "round_trip")
            else None,
            x.get("efficiency"), x.get("bound"), r.get("spread"), r.get("bytes"), r.get("threads"), r.get("n")]
    # One row per node, in node order, led by "Node order" (as Caliper writes with node ordering, which
    # Hatchet's reader expects by default); the path column points into the nodes; inner nodes have no figures.
    data = [[i, i] + rows.get(i, [None] * len(_METRICS)) for i in range(len(nodes))]
    doc = {"data": data, "columns": ["Node order", "path"] + _METRICS,
           "column_metadata": [{"is_value": True}, {"is_value": False}] + [{"is_value": True} for _ in _METRICS],
           "nodes": nodes}
    doc.update(_globals(run))
    return doc


def write(runs, records) -> str:
    from umscope.errors import UsageError
    if len(runs) != 1:
        raise UsageError("--format caliper describes one run (one profile of an ensemble): give --run ID")
    (run_id, run), = runs.items()
    return json.dumps(build(run, [r for r in records if r["run_id"] == run_id]), indent=1) + "\n"
