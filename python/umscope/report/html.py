"""The HTML report of one run: machine, per-benchmark charts and tables,
every skipped or failed case with its reason. Self-contained: one file, CSS
inline, plots as inline SVG, no scripts, no external URLs; every string
from the store is escaped.

This module assembles the page; each section is a module of this package that registers itself in
report/registry.py (page sections by their order, family sections by the families they draw)."""

import json
import shlex
import sys
import time
from collections import OrderedDict
from pathlib import Path

from umscope import verify
from umscope.report import navigation, registry
from umscope.report.common import SPREAD_FLAG, chart_and_table, e
from umscope.report.common import chart as _chart  # noqa: F401 (tests draw the default chart)

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:28px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
.flag{color:#b00;font-weight:bold}.skipped{color:#666}.failed,.timeout,.refused{color:#b00}
.note{color:#555;font-size:13px}svg.chart{display:block;margin:10px 0;max-width:100%;height:auto}
.banner{border:1px solid #bbb;border-radius:4px;padding:8px 12px;margin:8px 0;font-size:14px}
.banner table{background:#fff}.verdict{font-size:16px}pre.stderr{background:#fff;font-size:11px;margin:4px 0;
max-height:160px;overflow:auto;white-space:pre-wrap}nav.toc{font-size:12px;columns:3;margin:6px 0}
nav.toc a{display:block}.export{font-size:11px;color:#555}.answer{font-size:15px}
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
        parts.append(navigation.export_line(page.run["id"], bench))
        parts.append(s.render(bench, recs, page) if s else chart_and_table(bench, recs, page))
    return parts


def machine_line(run, fp) -> tuple:
    """(host, GPU) of the run: its stored columns, else the fingerprint's; 'no GPU' with the probe's reason."""
    from umscope.devices import gpu_column
    fp = fp or {}
    host = run.get("hostname") or (fp.get("host") or {}).get("hostname") or "unknown host"
    gpu = run.get("gpu") or gpu_column(fp)
    if not gpu:
        gpus = fp.get("gpus") or []
        gpu = (f"{len(gpus)} × {gpus[0]['name']}" if gpus else
               "no GPU (" + str((fp.get("cuda") or {}).get("why_no_gpu") or "none found") + ")")
    elif len(fp.get("gpus") or []) > 1 and "," not in gpu:
        gpu = f"{gpu} (of {len(fp['gpus'])} GPUs)"
    return host, gpu


def render(run, cases, records, others=None) -> str:
    """The page. others: the store's other runs (rows of Store.runs()), for the 'compare with' line."""
    params = {c["case_id"]: json.loads(c["params"]) if isinstance(c.get("params"), str) else (c.get("params") or {})
              for c in cases}
    ok = [dict(r, params=params.get(r.get("case_id"), {})) for r in records
          if r["status"] == "ok" and r["median"] is not None]
    page = registry.Page(run, cases, ok, run.get("fingerprint"), tuple(records))
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run["started"])) if run.get("started") else "?"
    host, gpu = machine_line(run, run.get("fingerprint"))
    from umscope.report.status import verdict
    word = verdict(run, cases, records)[0]
    title = f"umscope {run['kind']}{'' if word == 'complete' else ' (' + word + ')'} · {host} · {gpu} · run {run['id']}"
    sections = registry.page_sections()
    body = [s.render(page) for s in sections if s.order < registry.FAMILIES_AT]
    body += _families(page)
    body += [s.render(page) for s in sections if s.order >= registry.FAMILIES_AT]
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{e(title)}"
             f"</title><style>{_CSS}</style></head><body>",
             f"<h1>umscope {e(run['kind'])}, run {e(run['id'])}, on <span class=host>{e(host)}</span> — "
             f"<span class=gpu>{e(gpu)}</span></h1>",
             f"<p class=note>Started {e(started)}, stored status <b>{e(run['status'])}</b>. Command: "
             f"<code>{e(run['command'])}</code>" + (f" · label {e(run['label'])}" if run.get("label") else "")
             + navigation.compare_line(run, others) + "</p>"]
    parts += body[:1]  # the status banner comes first, then the contents
    parts.append(navigation.contents("\n".join(body[1:])))
    parts.append(f"<p class=note>Every figure below was measured in this run; each section says how its data was "
                 f"verified and which <code>umscope export</code> command gives its numbers. Spread = (max − min) / "
                 f"median over the repetitions, flagged ⚠ above a threshold per family (at least {SPREAD_FLAG:.0%}; "
                 f"each table says its own).</p>")
    parts += body[1:]
    parts.append("</body></html>")
    return "\n".join(parts)


def default_report_path(store_path, run_id) -> Path:
    """reports/STORE-run-N.html beside the store, STORE its file name: stores that share a folder (one per node,
    one per experiment) keep their own reports instead of overwriting each other's run-N.html."""
    return Path(store_path).parent / "reports" / f"{Path(store_path).name}-run-{run_id}.html"


def write_report(store, run_id, path=None) -> Path:
    run = store.run(run_id)
    html = render(run, store.cases(run["id"]), store.records(run["id"]), store.runs())
    out = Path(path) if path else default_report_path(store.path, run["id"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out


def save_report(store, run_id, path):
    """Writes the report; if that fails the records stay in the store and the user is told how to get it."""
    try:
        out = write_report(store, run_id, path)
    except OSError as err:
        sys.stderr.write(f"umscope: cannot write the report ({err.strerror or err}); run {run_id}'s records are kept "
                         f"in {store.path}: `umscope report --store {shlex.quote(str(store.path))} --run {run_id} "
                         f"-o FILE` writes it\n")
        return None
    sys.stderr.write(f"report: {out}\n")
    return out


