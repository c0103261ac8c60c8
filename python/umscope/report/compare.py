"""The HTML page of `umscope compare`: one table of matched cases with each run's figure and its
ratio (strays highlighted), the list of flagged figures, and published reference values in a
column and a table of their own, each with its citation."""

from pathlib import Path

from umscope.report.common import Row, cell, e, html_table, th

_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}
td.c,th.c{text-align:left}tr:nth-child(even){background:#f7f7f7}.bad{background:#f8d0d0}.good{background:#d6efd6}
.pub{background:#eef3fb;font-style:italic}.note{color:#555;font-size:12px}"""


def render(result) -> str:
    runs = result["runs"]
    base = result["baseline"]
    against = ("the median of the runs that measured the case" if base == "median" else
               f"baseline {base}" if base.startswith("file ") else f"baseline run {base}")
    h = [f"<!doctype html><html><head><meta charset='utf-8'><title>umscope compare</title><style>{_CSS}</style>"
         "</head><body><h1>umscope compare</h1>",
         f"<p>{len(runs)} run(s); ratios are to {e(against)}; a figure is flagged when it differs by more than "
         f"{result['threshold'] * 100:g}% and by more than its own spread. Published values are in their own "
         "column (blue, italic), are not measurements of these machines and are never part of the median.</p>",
         "<h2>Runs</h2>"]
    h.append(html_table([th(t, "c") for t in ("run", "host", "GPU", "job", "store", "command")], [
        [cell(str(v), "c") for v in (r["label"], r["host"], r["gpu"],
                                r["scheduler"].get("name", "") + (f" {r['scheduler'].get('job')}" if r["scheduler"] else ""),
                                r["store"], r["command"])] for r in runs]))
    flags = result["flags"]
    h.append(f"<h2>Flagged ({len(flags)})</h2>")
    h.append("<ul>" + "".join(f"<li class={'bad' if f['worse'] else 'good'}>{e(f['text'])}</li>" for f in flags)
             + "</ul>" if flags else "<p>No figure strays beyond the threshold and its own spread.</p>")
    rows = []
    for row in result["rows"]:
        vals = [cell(html=f"{v:.4g}" + (f" <span class=note>±{100 * s:.1f}%</span>" if s else ""))
                if v is not None else "-" for v, s in zip(row["values"], row["spreads"])]
        ratios = [cell(f"{r:.3f}", "bad" if i in row["flagged"] else None) if r is not None else "-"
                  for i, r in enumerate(row["ratios"])]
        pub = "<br>".join(f"{p['value']:g} {e(p['unit'])} ({e(p['machine'])}; {e(p['cite'])})"
                          for p in row["published"])
        rows.append([cell(str(row["case"]), "c"), str(row["unit"])] + vals + ratios + [cell(html=pub, cls="c pub")])
    h.append("<h2>Cases</h2>" + html_table(
        [th("case", "c"), "unit"] + [str(r["label"]) for r in runs] + [f"ratio {r['label']}" for r in runs]
        + [th("published", "c pub")], rows, empty="<p>No measured case in these runs.</p>"))
    if result["published"]:
        h.append("<h2>Published reference values</h2><p class=note>Transcribed from the studies; what each measured "
                 "is said beside it. Shown for orientation only.</p>" + html_table(
                     [th("machine", "c"), th("what was measured", "c"), "value", th("unit", "c"), th("source", "c"),
                      th("note", "c")],
                     [Row([cell(str(p["machine"]), "c"), cell(str(p["what"]), "c"), f"{p['value']:g}", cell(str(p["unit"]), "c"),
                           cell(f"{p['cite']}, {p['figure']}; {p.get('system') or ''}", "c"),
                           cell(p.get("note") or "", "c")], cls="pub") for p in result["published"]]))
    h.append("</body></html>")
    return "\n".join(h)


def write_compare_report(result, path=None) -> Path:
    out = Path(path) if path else Path("umscope-compare.html")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(result), encoding="utf-8")
    return out
