"""The migration family: bandwidth per iteration of GPU passes over memory another processor placed (the
studies' migration plots), first and steady passes against the bound, and oversubscription against its degree."""

from collections import OrderedDict

from umscope.report.common import bound_cells, html_table, kind_label, num, num_cell
from umscope.report.registry import family_section
from umscope.report.svg import line_chart, size_tick


def charts(recs) -> str:
    """Per-iteration curves (the studies' migration plots), then oversubscription against its degree."""
    out = []
    plain = [r for r in recs if "dos" not in (r.get("extra") or {})]
    over = [r for r in recs if "dos" in (r.get("extra") or {})]
    for op in sorted({r["op"] for r in plain}):
        for size in sorted({r["bytes"] for r in plain if r["op"] == op}):
            series = OrderedDict()
            for r in plain:
                x = r.get("extra") or {}
                if r["op"] != op or r["bytes"] != size or x.get("trial", 0) != 0:
                    continue
                label = kind_label(r) + (f" · CPU writes ({x['cpu_touch']}) between" if x.get("cpu_touch") not in
                                         (None, "none") else "")
                series[label] = [(i + 1, v) for i, v in enumerate(x.get("samples") or [])]
            if series:
                out.append(line_chart(list(series.items()), f"GPU {op} of {size_tick(size)}: bandwidth per iteration",
                                      "iteration", "GB/s", x_log=True, y_log=True, x_fmt=lambda v: f"{v:.0f}",
                                      height=400, css="chart samples"))
    rows = []
    for r in plain:
        x = r.get("extra") or {}
        touch = x.get("cpu_touch") if x.get("cpu_touch") not in (None, "none") else ""
        rows.append([r["op"], kind_label(r), touch, num_cell(size_tick(r["bytes"])), num_cell(x.get("trial", 0)),
                     num_cell(num(x.get("first"))), num_cell(num(x.get("steady"))), num_cell(f"{r['min']:.4g}"),
                     num_cell(f"{r['max']:.4g}"), num_cell(x.get("iterations")), x.get("residency", "")]
                    + bound_cells(r))
    out.append(html_table(["op", "kind [policy]", "CPU writes between", "size", "trial", "first GB/s", "steady GB/s",
                           "min", "max", "iterations", "residency", "bound", "of bound", "limit"], rows,
                          "first = the first iteration; steady = median of the second half of the iterations. The per-iteration "
                          "curves above draw every sample: <code>--format jsonl</code> exports them."))
    if over:
        out.append("<h3>Oversubscription</h3>")
        series = OrderedDict()
        for r in over:
            x = r.get("extra") or {}
            series.setdefault(f"{kind_label(r)} first pass", []).append((x["dos"], x.get("first")))
            series.setdefault(f"{kind_label(r)} steady", []).append((x["dos"], x.get("steady")))
        out.append(line_chart(list(series.items()), "GPU read bandwidth against degree of oversubscription",
                              "footprint / GPU memory left free by the ballast", "GB/s", x_log=False, y_log=True,
                              x_fmt=lambda v: f"{v:.2g}", marks=[(1.0, "GPU memory full")], height=380))
    return "".join(out)


@family_section("migration")
def section(bench, recs, page=None) -> str:
    return charts(recs)
