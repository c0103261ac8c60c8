"""OpenMetrics / Prometheus text for node_exporter's textfile collector: gauges of bandwidth
(bytes per second), latency (seconds) and efficiency (fraction of the datapath bound), labelled
with the case's identity, plus one umscope_run_info per run. No timestamps (the collector
refuses them); the file ends with '# EOF'. Write it atomically where the collector reads:
`umscope export --format openmetrics -o DIR/umscope.prom.$$ && mv DIR/umscope.prom.$$ DIR/umscope.prom`."""

_LATENCY_SCALE = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_LABELS = ["run", "host", "gpu", "benchmark", "op", "processor", "kind", "policy", "dst_kind", "dst_policy",
           "direction", "route", "bytes", "threads", "iteration"]


def _escape(v) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(d) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in d.items() if v not in (None, "")) + "}"


def _num(v) -> str:
    return repr(float(v))


def write(runs, records) -> str:
    families = {
        "umscope_bandwidth_bytes_per_second": ("gauge", "bytes_per_second",
                                               "median bandwidth of a measured case", []),
        "umscope_latency_seconds": ("gauge", "seconds", "median latency of a measured case", []),
        "umscope_efficiency_ratio": ("gauge", "ratio", "median bandwidth over the datapath bound", []),
        "umscope_bound_bytes_per_second": ("gauge", "bytes_per_second",
                                           "datapath bound of a bandwidth case (its source: the machine description)",
                                           []),
        "umscope_run_info": ("gauge", None, "a umscope run and the machine it ran on (value 1)", []),
    }
    seen = set()
    for rid, run in sorted(runs.items()):
        fp = run.get("fingerprint") or {}
        sched = fp.get("scheduler") or {}
        families["umscope_run_info"][3].append((_labels({
            "run": rid, "host": run.get("hostname"), "gpu": run.get("gpu"), "driver": run.get("driver"),
            "cuda": run.get("cuda"), "umscope_version": run.get("umscope_version"), "status": run.get("status"),
            "kind": run.get("kind"), "label": run.get("label"), "scheduler": sched.get("name"),
            "job": sched.get("job")}), 1))
    for r in records:
        if r.get("status") != "ok" or r.get("median") is None:
            continue
        x = r.get("extra") or {}
        run = runs.get(r["run_id"]) or {}
        lab = {"run": r["run_id"], "host": run.get("hostname"), "gpu": run.get("gpu"), "benchmark": r["benchmark"],
               "op": r["op"], "processor": r["processor"], "kind": r["kind"], "policy": r["policy"],
               "dst_kind": x.get("dst_kind"), "dst_policy": x.get("dst_policy"), "direction": x.get("direction"),
               "route": x.get("route"), "bytes": r["bytes"], "threads": r["threads"], "iteration": r["iteration"],
               "metric": r["metric"]}
        text = _labels(lab)
        if (text, r["metric"]) in seen:  # one sample per label set and family
            continue
        seen.add((text, r["metric"]))
        if r["unit"] == "GB/s":
            families["umscope_bandwidth_bytes_per_second"][3].append((text, r["median"] * 1e9))
            if x.get("efficiency") is not None:
                families["umscope_efficiency_ratio"][3].append((text, x["efficiency"]))
            if x.get("bound") is not None:
                families["umscope_bound_bytes_per_second"][3].append((text, x["bound"] * 1e9))
        elif r["unit"] in _LATENCY_SCALE and r["metric"] in ("latency", "round_trip"):
            families["umscope_latency_seconds"][3].append((text, r["median"] * _LATENCY_SCALE[r["unit"]]))
    out = []
    for name, (typ, unit, help_, samples) in families.items():
        if not samples:
            continue
        out.append(f"# TYPE {name} {typ}")
        if unit:
            out.append(f"# UNIT {name} {unit}")
        out.append(f"# HELP {name} {help_}")
        out += [f"{name}{lab} {_num(v)}" for lab, v in samples]
    out.append("# EOF")
    return "\n".join(out) + "\n"
