"""umscope compare: the same cases across runs of one or several stores (nodes of a fleet, two
GPUs, before and after a change). Records are matched by the identity of their case; each figure
is shown per run with its ratio to a baseline run or to the median of all runs that measured it,
and runs that stray more than a threshold (and more than their own spread) are flagged.
Published reference values (python/umscope/reference/*.yaml) are kept apart: their own column
and table, labelled with the citation, never counted in the median."""

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


def compare(runs, baseline="median", threshold=0.05, reference=()) -> dict:
    """Rows of matched cases: per run the median, spread and ratio; flags for strays."""
    if baseline != "median":
        labels = [r.label for r in runs]
        matches = [i for i, r in enumerate(runs) if baseline in (r.label, str(r.run["id"]),
                                                                 f"{r.label.split(' (store')[0]}")]
        if len(matches) != 1:
            raise UsageError(f"--baseline {baseline!r} names no single run of: {', '.join(labels)} (or 'median')")
        base_idx = matches[0]
    else:
        base_idx = None
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
    rows, flags = [], []
    for key in order:
        per = cells[key]
        vals = [r["median"] if r else None for r in per]
        present = [v for v in vals if v is not None]
        if base_idx is None:
            base = statistics.median(present) if present else None
        else:
            base = vals[base_idx]
        ratios = [v / base if v is not None and base else None for v in vals]
        d = dict(key)
        higher_better = d.get("unit") not in ("ns", "us", "ms", "s")
        row_flags = []
        for i, (r, rec) in enumerate(zip(ratios, per)):
            if r is None or i == base_idx or len(present) < 2:
                continue
            dev = r - 1
            spread = (rec.get("spread") or 0) if rec else 0
            if abs(dev) > threshold and abs(dev) > spread:
                worse = dev < 0 if higher_better else dev > 0
                against = (f"the median of {len(present)} runs" if base_idx is None
                           else f"baseline {runs[base_idx].label}")
                msg = (f"{runs[i].label}: {case_text(key)} {abs(dev) * 100:.0f}% "
                       f"{'under' if dev < 0 else 'over'} {against}")
                row_flags.append(i)
                flags.append({"run": runs[i].label, "case": case_text(key), "ratio": round(r, 4),
                              "worse": worse, "text": msg})
        refs = [ref for ref in reference if _ref_matches(ref, key)]
        rows.append({"case": case_text(key), "key": d, "unit": d.get("unit"), "values": vals,
                     "spreads": [r.get("spread") if r else None for r in per], "base": base,
                     "ratios": [round(r, 4) if r is not None else None for r in ratios], "flagged": row_flags,
                     "published": [{"value": ref["value"], "unit": ref["unit"], "what": ref["what"],
                                    "cite": f"{ref['cite']}, {ref['figure']}", "machine": ref["machine"],
                                    "short": f"{ref['short']}, {ref['figure']}"}
                                   for ref in refs]})
    return {"runs": [{"label": r.label, "store": r.store, "id": r.run["id"], "host": r.run.get("hostname"),
                      "gpu": r.run.get("gpu"), "command": r.run.get("command"),
                      "scheduler": ((r.run.get("fingerprint") or {}).get("scheduler") or {})} for r in runs],
            "baseline": "median" if base_idx is None else runs[base_idx].label, "threshold": threshold,
            "rows": rows, "flags": flags, "published": list(reference)}


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


def run_command(args) -> int:
    import json
    import sys
    from umscope import validate
    if args.threshold is not None:
        try:
            args.threshold = validate.real(args.threshold, "--threshold", 0.0, 10.0)
        except UsageError:
            raise UsageError("--threshold is a fraction, e.g. 0.05 for 5%") from None
    if args.output is not None:
        validate.output_path(args.output, "-o")
    runs = load(args.store or [], args.runs)
    refs = [] if args.reference == "none" else load_reference(None if args.reference == "all" else [args.reference])
    if args.reference not in ("none", "all") and not refs:
        raise UsageError(f"no published reference {args.reference!r} (see python/umscope/reference/)")
    result = compare(runs, args.baseline, args.threshold if args.threshold is not None else 0.05, refs)
    if args.json:
        print(json.dumps(result, indent=1, default=str))
    else:
        print_table(result, sys.stdout)
    from umscope.report.compare import write_compare_report
    path = write_compare_report(result, args.output)
    sys.stderr.write(f"compare report: {path}\n")
    return 0
