"""CSV with the columns that tell records apart: the flat core of every record plus the host,
GPU, copy engine, destination, direction, stride, bound and efficiency that live in its extra."""

import csv
import io

from umscope.export import engine

COLUMNS = ["run", "case", "host", "gpu", "benchmark", "op", "processor", "engine", "kind", "policy",
           "destination_kind", "destination_policy", "direction", "route", "bytes", "stride", "threads",
           "iteration", "metric", "unit", "n", "median", "min", "max", "spread", "bound", "datapath",
           "efficiency", "verified", "status", "reason"]


def write(runs, records) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in records:
        x = r.get("extra") or {}
        run = runs.get(r["run_id"]) or {}
        w.writerow({
            "run": r["run_id"], "case": r["case_id"], "host": run.get("hostname"), "gpu": run.get("gpu"),
            "benchmark": r["benchmark"], "op": r["op"], "processor": r["processor"], "engine": engine(r),
            "kind": r["kind"], "policy": r["policy"], "destination_kind": x.get("dst_kind"),
            "destination_policy": x.get("dst_policy"), "direction": x.get("direction"), "route": x.get("route"),
            "bytes": r["bytes"], "stride": x.get("stride"), "threads": r["threads"], "iteration": r["iteration"],
            "metric": r["metric"], "unit": r["unit"], "n": r["n"], "median": r["median"], "min": r["min"],
            "max": r["max"], "spread": r["spread"], "bound": x.get("bound"), "datapath": x.get("datapath"),
            "efficiency": x.get("efficiency"), "verified": x.get("verified"), "status": r["status"],
            "reason": r["reason"]})
    return buf.getvalue()
