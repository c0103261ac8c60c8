"""The HTML report of one run: machine, per-benchmark charts and tables,
every skipped or failed case with its reason. Self-contained: one file, CSS
inline, plots as inline SVG, no scripts, no external URLs; every string
from the store is escaped.

This module assembles the page; each section is a module of this package that registers itself in
report/registry.py (page sections by their order, family sections by the families they draw)."""

import json
import time
from collections import OrderedDict
from pathlib import Path

from umscope import verify
from umscope.report import registry
from umscope.report.common import SPREAD_FLAG, chart_and_table, e
from umscope.report.common import chart as _chart  # noqa: F401 (tests draw the default chart)

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:28px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
.flag{color:#b00;font-weight:bold}.skipped{color:#666}.failed,.timeout,.refused{color:#b00}
.note{color:#555;font-size:13px}svg.chart{display:block;margin:10px 0}
"""


def _family(r) -> str:
    """The family a record is drawn under: every application record under 'applications'."""
    return "applications" if r["op"] == "app" else r["benchmark"]


def _families(page) -> list:
    """HTML parts of the per-family sections, in the order the run measured the families."""
    by_bench = OrderedDict()
    for r in page.records:
        by_bench.setdefault(_family(r), []).append(r)
    for s in registry.family_sections():
        for fam in s.families:
            if s.show_unmeasured and any(c["benchmark"] == fam for c in page.cases):
                by_bench.setdefault(fam, [])
    parts = []
    for bench, recs in by_bench.items():
        s = registry.for_family(bench)
        parts.append(f"<h2 id=\"{e(bench)}\">{e(bench)}</h2>")
        parts.append(f"<p class=note>{e(verify.describe_methods(recs) or 'No records.')}</p>")
        parts.append(s.render(bench, recs, page) if s else chart_and_table(bench, recs, page))
    return parts


def render(run, cases, records) -> str:
    params = {c["case_id"]: json.loads(c["params"]) if isinstance(c.get("params"), str) else (c.get("params") or {})
              for c in cases}
    ok = [dict(r, params=params.get(r.get("case_id"), {})) for r in records
          if r["status"] == "ok" and r["median"] is not None]
    page = registry.Page(run, cases, ok, run.get("fingerprint"))
    counts = OrderedDict()
    for c in cases:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run["started"])) if run.get("started") else "?"
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>umscope report — run {e(run['id'])}"
             f"</title><style>{_CSS}</style></head><body>",
             f"<h1>umscope report — run {e(run['id'])} ({e(run['kind'])})</h1>",
             f"<p class=note>Started {e(started)}, status <b>{e(run['status'])}</b>. Command: <code>{e(run['command'])}"
             f"</code><br>Cases: " + ", ".join(f"{e(v)} {e(k)}" for k, v in counts.items()) +
             ". Every figure below was measured in this run; each section says how its data was verified. "
             f"Spread = (max − min) / median over the repetitions; above {SPREAD_FLAG:.0%} it is flagged ⚠.</p>"]
    sections = registry.page_sections()
    parts += [s.render(page) for s in sections if s.order < registry.FAMILIES_AT]
    parts += _families(page)
    parts += [s.render(page) for s in sections if s.order >= registry.FAMILIES_AT]
    parts.append("</body></html>")
    return "\n".join(parts)


def default_report_path(store_path, run_id) -> Path:
    """reports/STORE-run-N.html beside the store, STORE its file name: stores that share a folder (one per node,
    one per experiment) keep their own reports instead of overwriting each other's run-N.html."""
    return Path(store_path).parent / "reports" / f"{Path(store_path).name}-run-{run_id}.html"


def write_report(store, run_id, path=None) -> Path:
    run = store.run(run_id)
    html = render(run, store.cases(run["id"]), store.records(run["id"]))
    out = Path(path) if path else default_report_path(store.path, run["id"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out
