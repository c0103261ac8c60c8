"""The HTML page of `umscope compare`: one table of matched cases with each run's figure and its
ratio (strays highlighted), the list of flagged figures, and published reference values in a
column and a table of their own, each with its citation."""

import html
from pathlib import Path

_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}
td.c,th.c{text-align:left}tr:nth-child(even){background:#f7f7f7}.bad{background:#f8d0d0}.good{background:#d6efd6}
.pub{background:#eef3fb;font-style:italic}.note{color:#555;font-size:12px}"""


def _e(x) -> str:
    return html.escape(str(x))


def render(result) -> str:
    runs = result["runs"]
    base = result["baseline"]
    against = "the median of the runs that measured the case" if base == "median" else f"baseline run {base}"
    h = [f"<!doctype html><html><head><meta charset='utf-8'><title>umscope compare</title><style>{_CSS}</style>"
         "</head><body><h1>umscope compare</h1>",
         f"<p>{len(runs)} run(s); ratios are to {_e(against)}; a figure is flagged when it differs by more than "
         f"{result['threshold'] * 100:g}% and by more than its own spread. Published values are in their own "
         "column (blue, italic), are not measurements of these machines and are never part of the median.</p>",
         "<h2>Runs</h2><table><tr><th class=c>run</th><th class=c>host</th><th class=c>GPU</th>"
         "<th class=c>job</th><th class=c>store</th><th class=c>command</th></tr>"]
    for r in runs:
        job = r["scheduler"].get("name", "") + (f" {r['scheduler'].get('job')}" if r["scheduler"] else "")
        h.append(f"<tr><td class=c>{_e(r['label'])}</td><td class=c>{_e(r['host'])}</td><td class=c>{_e(r['gpu'])}</td>"
                 f"<td class=c>{_e(job)}</td><td class=c>{_e(r['store'])}</td><td class=c>{_e(r['command'])}</td></tr>")
    h.append("</table>")
    flags = result["flags"]
    h.append(f"<h2>Flagged ({len(flags)})</h2>")
    h.append("<ul>" + "".join(f"<li class={'bad' if f['worse'] else 'good'}>{_e(f['text'])}</li>" for f in flags)
             + "</ul>" if flags else "<p>No figure strays beyond the threshold and its own spread.</p>")
    h.append("<h2>Cases</h2><table><tr><th class=c>case</th><th>unit</th>"
             + "".join(f"<th>{_e(r['label'])}</th>" for r in runs)
             + "".join(f"<th>ratio {_e(r['label'])}</th>" for r in runs) + "<th class='c pub'>published</th></tr>")
    for row in result["rows"]:
        vals = "".join(f"<td>{v:.4g}" + (f" <span class=note>±{100 * s:.1f}%</span>" if s else "") + "</td>"
                       if v is not None else "<td>-</td>" for v, s in zip(row["values"], row["spreads"]))
        ratios = "".join(
            f"<td class={'bad' if i in row['flagged'] else ''}>{r:.3f}</td>" if r is not None else "<td>-</td>"
            for i, r in enumerate(row["ratios"]))
        pub = "<br>".join(f"{p['value']:g} {_e(p['unit'])} ({_e(p['machine'])}; {_e(p['cite'])})"
                          for p in row["published"])
        h.append(f"<tr><td class=c>{_e(row['case'])}</td><td>{_e(row['unit'])}</td>{vals}{ratios}"
                 f"<td class='c pub'>{pub}</td></tr>")
    h.append("</table>")
    if result["published"]:
        h.append("<h2>Published reference values</h2><p class=note>Transcribed from the studies; what each measured "
                 "is said beside it. Shown for orientation only.</p><table><tr><th class=c>machine</th>"
                 "<th class=c>what was measured</th><th>value</th><th class=c>unit</th><th class=c>source</th>"
                 "<th class=c>note</th></tr>")
        for p in result["published"]:
            h.append(f"<tr class=pub><td class=c>{_e(p['machine'])}</td><td class=c>{_e(p['what'])}</td>"
                     f"<td>{p['value']:g}</td><td class=c>{_e(p['unit'])}</td>"
                     f"<td class=c>{_e(p['cite'])}, {_e(p['figure'])}; {_e(p.get('system') or '')}</td>"
                     f"<td class=c>{_e(p.get('note') or '')}</td></tr>")
        h.append("</table>")
    h.append("</body></html>")
    return "\n".join(h)


def write_compare_report(result, path=None) -> Path:
    out = Path(path) if path else Path("umscope-compare.html")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(result), encoding="utf-8")
    return out
