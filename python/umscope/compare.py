"""umscope compare: the same cases across runs of one or several stores (nodes of a fleet, two
GPUs, before and after a change). Records are matched by the identity of their case; each figure
is shown per run with its ratio to a baseline run or to the median of all runs that measured it,
and runs that stray more than a threshold (and more than their own spread) are flagged.
The baseline is a run, the median of the runs, or a baseline file (--save-baseline writes one);
--fail-over FRACTION makes compare a node gate: exit 1 when a figure is worse than its baseline by
more than the fraction (lower bandwidth, higher latency or time) and more than its own spread.
Published reference values (python/umscope/reference/*.yaml) are kept apart: their own column
and table, labelled with the citation, never counted in the median."""

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from umscope import inputs
from umscope.errors import UsageError
from umscope.store import Store, default_store_path

# What makes two records the same case (besides the run): the record's own fields and the extra
# fields that distinguish copies, placements and pairs.
KEY_FIELDS = ["benchmark", "op", "processor", "kind", "policy", "bytes", "threads", "iteration", "metric", "unit"]
KEY_EXTRA = ["dst_kind", "dst_policy", "direction", "route", "pair", "stride", "mode", "precision", "load",
             "block", "blocks"]
REFERENCE_DIR = Path(__file__).parent / "reference"


@dataclass
class RunData:
    label: str
    store: str
    run: dict
    records: list = field(default_factory=list)


def case_key(rec) -> tuple:
    x = rec.get("extra") or {}
    return tuple((k, rec.get(k)) for k in KEY_FIELDS) + tuple((k, x.get(k)) for k in KEY_EXTRA if x.get(k) is not None)


def key_from_dict(d) -> tuple:
    """The case key of a dict of its fields (a baseline file's entry): the inverse of dict(case_key(rec))."""
    return tuple((k, d.get(k)) for k in KEY_FIELDS) + tuple((k, d[k]) for k in KEY_EXTRA if d.get(k) is not None)


def higher_is_better(unit) -> bool:
    """Times and latencies are worse when higher; every other figure (bandwidth, rates) when lower."""
    return unit not in ("ns", "us", "ms", "s")


def case_text(key) -> str:
    d = dict(key)
    parts = [d["benchmark"], d.get("op") or "", d.get("processor") or ""]
    kind = d.get("kind") or ""
    if d.get("policy"):
        kind += f" [{d['policy']}]"
    if d.get("dst_kind"):
        kind += f" -> {d['dst_kind']}" + (f" [{d['dst_policy']}]" if d.get("dst_policy") else "")
    parts.append(kind)
    for k in ("direction", "route", "pair", "mode", "precision"):
        if d.get(k) and not (k == "route" and d[k] == "forward") and not (k == "direction" and d[k] == "uni"):
            parts.append(str(d[k]))
    if d.get("bytes"):
        from umscope.sizes import format_size
        parts.append(format_size(d["bytes"]))
    if d.get("threads"):
        parts.append(f"{d['threads']} thr")
    if d.get("iteration") is not None:
        parts.append(f"it {d['iteration']}")
    return " ".join(p for p in parts if p)


def _read_store(path):
    """(runs, records by run) of a store, opened read-only (compare never writes)."""
    st = Store(path, readonly=True)
    try:
        runs = {r["id"]: st.run(r["id"]) for r in st.runs()}
        recs = {}
        for d in st.records():
            recs.setdefault(d["run_id"], []).append(d)
    finally:
        st.close()
    return runs, recs


def load(stores, run_specs) -> list:
    """RunData for each selected run. A spec is ID (in the only store) or N:ID (the Nth --store,
    from 1) ; no spec selects every run of every store."""
    stores = list(stores) or [str(default_store_path())]
    loaded = [_read_store(s) for s in stores]
    multi = len(stores) > 1
    picked = []
    if run_specs:
        for spec in run_specs:
            si, _, rid = str(spec).rpartition(":")
            try:
                if not str(spec).isascii():
                    raise ValueError(spec)
                idx = int(si) - 1 if si else 0
                rid = int(rid)
            except ValueError:
                raise UsageError(f"run {spec!r}: give ID or STORE:ID (STORE = position of its --store, from 1)") from None
            if not si and multi:
                raise UsageError(f"run {spec!r}: with several --store, say which: STORE:ID")
            if not 0 <= idx < len(stores):
                raise UsageError(f"run {spec!r}: there are {len(stores)} store(s)")
            if rid not in loaded[idx][0]:
                raise UsageError(f"no run {rid} in {stores[idx]}")
            picked.append((idx, rid))
    else:
        picked = [(i, rid) for i, (runs, _) in enumerate(loaded) for rid in runs]
    if not picked:
        raise UsageError("no runs to compare in " + ", ".join(stores))
    out = []
    for idx, rid in picked:
        run = loaded[idx][0][rid]
        label = f"{run.get('hostname') or '?'} #{rid}" + (f" (store {idx + 1})" if multi else "")
        out.append(RunData(label, stores[idx], run, loaded[idx][1].get(rid, [])))
    return out


def load_reference(names=None) -> list:
    """Published values, each with its source's citation, from the packaged YAML files."""
    out = []
    for path in sorted(REFERENCE_DIR.glob("*.yaml")):
        doc = inputs.read_yaml(path, "published values")
        if names and doc.get("machine") not in names and path.stem not in names:
            continue
        for v in doc.get("values", []):
            src = doc["sources"][v["source"]]
            out.append(dict(v, machine=doc.get("machine"), cite=src["cite"], short=src.get("short", v["source"]),
                            system=src.get("system"), file=path.name))
    return out


def _ref_matches(ref, key) -> bool:
    d = dict(key)
    if ref.get("unit") != d.get("unit"):
        return False
    # The studies' bandwidths are of large buffers: no overlay on rows of small ones.
    if d.get("unit") == "GB/s" and (d.get("bytes") or 0) < ref.get("min_bytes", 64 << 20):
        return False
    return all(d.get(k) == v for k, v in ref["match"].items())


def _baseline_index(runs, baseline) -> int:
    """The run a --baseline spec names: its ID (one store), STORE:ID, or its label."""
    labels = [r.label for r in runs]
    si, _, rid = str(baseline).rpartition(":")
    store_of = {s: i for i, s in enumerate(dict.fromkeys(r.store for r in runs))}
    matches = [i for i, r in enumerate(runs)
               if baseline in (r.label, str(r.run["id"]), r.label.split(" (store")[0])
               or (si.isdigit() and rid == str(r.run["id"]) and store_of[r.store] == int(si) - 1)]
    if len(matches) != 1:
        raise UsageError(f"--baseline {baseline!r} names no single run of: {', '.join(labels)} "
                         "(give ID, STORE:ID, a label, 'median' or a baseline file)")
    return matches[0]


def load_baseline(path) -> dict:
    """A baseline file written by --save-baseline: {case key: entry with 'value'}, and where it came from."""
    # inputs.py's reader: a regular file or a pipe read once, its size capped, finite numbers only
    text = inputs.text_of(inputs.read_bytes(path, "cannot read baseline file", inputs.MAX_RECORDS_BYTES),
                          "baseline file", path)
    try:
        doc = inputs.parse_json(text)
        cases = {key_from_dict(c["key"]): c for c in doc["cases"]}
        if not all(isinstance(c["value"], (int, float)) and c["value"] > 0 for c in cases.values()):
            raise ValueError("a value is not a positive number")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise UsageError(f"{path} is not a umscope baseline file (write one with compare --save-baseline): {e}") from None
    return {"path": str(path), "cases": cases, "made_from": doc.get("made_from", [])}


def save_baseline(result, path):
    """The figures the runs were compared against (a run's, or the median of the runs), one per case,
    with the runs they came from: the stored baseline a node gate reads with --baseline FILE."""
    cases = [{"key": row["key"], "case": row["case"], "unit": row["unit"], "value": row["base"],
              "runs": sum(v is not None for v in row["values"]) if result["baseline"] == "median" else 1}
             for row in result["rows"] if row["base"]]
    doc = {"umscope_baseline": 1, "baseline": result["baseline"], "made_from": result["runs"], "cases": cases}
    Path(path).write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    return len(cases)


def compare(runs, baseline="median", threshold=0.05, reference=(), fail_over=None) -> dict:
    """Rows of matched cases: per run the median, spread and ratio; flags for strays. baseline is
    'median', a run spec, or a load_baseline() dict. With fail_over, 'gate' lists the figures worse
    than their baseline by more than that fraction and more than their own spread."""
    base_file = baseline if isinstance(baseline, dict) else None
    base_idx = None if base_file or baseline == "median" else _baseline_index(runs, baseline)
    if base_file:
        against = f"baseline file {base_file['path']}"
    elif base_idx is not None:
        against = f"baseline {runs[base_idx].label}"
    cells = {}
    order = []
    for i, rd in enumerate(runs):
        for rec in rd.records:
            if rec.get("status") != "ok" or rec.get("median") is None:
                continue
            key = case_key(rec)
            if key not in cells:
                cells[key] = [None] * len(runs)
                order.append(key)
            if cells[key][i] is None:
                cells[key][i] = rec
    rows, flags, failures = [], [], []
    checked = 0
    for key in order:
        per = cells[key]
        vals = [r["median"] if r else None for r in per]
        present = [v for v in vals if v is not None]
        if base_file:
            base = (base_file["cases"].get(key) or {}).get("value")
        elif base_idx is None:
            base = statistics.median(present) if present else None
            against = f"the median of {len(present)} runs"
        else:
            base = vals[base_idx]
        ratios = [v / base if v is not None and base else None for v in vals]
        d = dict(key)
        higher_better = higher_is_better(d.get("unit"))
        row_flags = []
        for i, (r, rec) in enumerate(zip(ratios, per)):
            if r is None or i == base_idx or (base_idx is None and not base_file and len(present) < 2):
                continue
            checked += 1
            dev = r - 1
            spread = (rec.get("spread") or 0) if rec else 0
            worse = dev < 0 if higher_better else dev > 0
            msg = (f"{runs[i].label}: {case_text(key)} {abs(dev) * 100:.0f}% "
                   f"{'under' if dev < 0 else 'over'} {against}")
            if abs(dev) > threshold and abs(dev) > spread:
                row_flags.append(i)
                flags.append({"run": runs[i].label, "case": case_text(key), "ratio": round(r, 4),
                              "worse": worse, "text": msg})
            if fail_over is not None and worse and abs(dev) > fail_over and abs(dev) > spread:
                failures.append({"run": runs[i].label, "case": case_text(key), "unit": d.get("unit"),
                                 "value": vals[i], "baseline": base, "ratio": round(r, 4), "spread": spread,
                                 "text": f"{msg}: {vals[i]:.4g} against {base:.4g} {d.get('unit') or ''}".rstrip()})
        refs = [ref for ref in reference if _ref_matches(ref, key)]
        rows.append({"case": case_text(key), "key": d, "unit": d.get("unit"), "values": vals,
                     "spreads": [r.get("spread") if r else None for r in per], "base": base,
                     "ratios": [round(r, 4) if r is not None else None for r in ratios], "flagged": row_flags,
                     "published": [{"value": ref["value"], "unit": ref["unit"], "what": ref["what"],
                                    "cite": f"{ref['cite']}, {ref['figure']}", "machine": ref["machine"],
                                    "short": f"{ref['short']}, {ref['figure']}"}
                                   for ref in refs]})
    result = {"runs": [{"label": r.label, "store": r.store, "id": r.run["id"], "host": r.run.get("hostname"),
                        "gpu": r.run.get("gpu"), "command": r.run.get("command"),
                        "scheduler": ((r.run.get("fingerprint") or {}).get("scheduler") or {})} for r in runs],
              "baseline": (f"file {base_file['path']}" if base_file else
                           "median" if base_idx is None else runs[base_idx].label),
              "threshold": threshold, "rows": rows, "flags": flags, "published": list(reference)}
    if fail_over is not None:
        result["gate"] = {"fail_over": fail_over, "checked": checked, "failures": failures,
                          "passed": checked > 0 and not failures}
    return result


def print_table(result, out):
    runs = result["runs"]
    heads = [r["label"][:18] for r in runs]
    out.write(f"{'case':<60} {'unit':<5} " + " ".join(f"{h:>18}" for h in heads)
              + f"  {'ratio to ' + ('median' if result['baseline'] == 'median' else 'baseline'):>16}\n")
    for row in result["rows"]:
        vals = " ".join(f"{v:>18.4g}" if v is not None else f"{'-':>18}" for v in row["values"])
        ratios = ",".join(f"{r:.2f}" + ("!" if i in row["flagged"] else "") if r is not None else "-"
                          for i, r in enumerate(row["ratios"]))
        out.write(f"{row['case'][:60]:<60} {row['unit']:<5} {vals}  {ratios:>16}\n")
        for p in row["published"]:
            out.write(f"{'':<6}published ({p['machine']}): {p['value']:g} {p['unit']}, {p['what']} [{p['short']}]\n")
    if result["flags"]:
        out.write(f"\n{len(result['flags'])} figure(s) beyond {result['threshold'] * 100:g}% and their own spread:\n")
        for f in result["flags"]:
            out.write(f"  {f['text']}\n")
    else:
        out.write(f"\nno figure strays beyond {result['threshold'] * 100:g}% and its own spread\n")


def print_gate(gate, baseline, out):
    pct = f"{gate['fail_over'] * 100:g}%"
    if gate["failures"]:
        out.write(f"gate: FAIL: {len(gate['failures'])} of {gate['checked']} figure(s) worse than {baseline} "
                  f"by more than {pct} and their own spread:\n")
        for f in gate["failures"]:
            out.write(f"  {f['text']}\n")
    elif not gate["checked"]:
        out.write(f"gate: FAIL: no figure of the runs has a figure in {baseline} to be checked against\n")
    else:
        out.write(f"gate: pass: {gate['checked']} figure(s) within {pct} of {baseline} (or within their spread)\n")


def _is_file_spec(spec) -> bool:
    return spec.endswith(".json") or "/" in spec


def run_command(args) -> int:
    import sys
    from umscope import validate
    for opt in ("threshold", "fail_over"):
        if getattr(args, opt) is not None:
            name = "--" + opt.replace("_", "-")
            try:
                setattr(args, opt, validate.real(getattr(args, opt), name, 0.0, 10.0))
            except UsageError:
                raise UsageError(f"{name} is a fraction, e.g. 0.05 for 5%") from None
    if args.output is not None:
        validate.output_path(args.output, "-o")
    baseline = load_baseline(args.baseline) if _is_file_spec(args.baseline) else args.baseline
    runs = load(args.store or [], args.runs)
    if args.fail_over is not None and baseline == "median" and len(runs) < 2:
        raise UsageError("--fail-over against the median needs two runs or more: give --baseline FILE "
                         "(from --save-baseline) or a reference run")
    refs = [] if args.reference == "none" else load_reference(None if args.reference == "all" else [args.reference])
    if args.reference not in ("none", "all") and not refs:
        raise UsageError(f"no published reference {args.reference!r} (see python/umscope/reference/)")
    threshold = args.threshold if args.threshold is not None else args.fail_over or 0.05
    result = compare(runs, baseline, threshold, refs, fail_over=args.fail_over)
    if args.json:
        print(json.dumps(result, indent=1, default=str))
    else:
        print_table(result, sys.stdout)
    if args.save_baseline:
        n = save_baseline(result, args.save_baseline)
        sys.stderr.write(f"baseline: {n} figure(s) ({result['baseline']}) written to {args.save_baseline}\n")
    # A gate (e.g. in a Slurm prolog) writes the page only where asked to.
    if args.fail_over is None or args.output:
        from umscope.report.compare import write_compare_report
        path = write_compare_report(result, args.output)
        sys.stderr.write(f"compare report: {path}\n")
    if args.fail_over is None:
        return 0
    gate = result["gate"]
    against = ("the median of the runs" if baseline == "median" else
               f"baseline file {args.baseline}" if isinstance(baseline, dict) else f"baseline {result['baseline']}")
    print_gate(gate, against, sys.stderr if args.json else sys.stdout)
    return 0 if gate["passed"] else 1
