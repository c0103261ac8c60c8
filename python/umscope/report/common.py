"""What every section of the run report shares: escaping, the labels of a memory kind, number formats,
the table of records with their bounds, and the default chart of a family. Charts themselves are drawn
by report/svg.py."""

from collections import OrderedDict
from html import escape

from umscope.report.svg import hbar_chart
from umscope.sizes import format_size

SPREAD_FLAG = 0.05  # (max - min) / median above this is flagged


def e(x) -> str:
    """Escaped text of any value; None is empty."""
    return escape("" if x is None else str(x))


def extra(r) -> dict:
    """A record's family-specific fields."""
    return r.get("extra") or {}


def kind_label(r) -> str:
    """'kind [policy]', and for copies '-> dst [policy]' and the route of a two-way copy."""
    x = r.get("extra") or {}
    label = r["kind"] + (f" [{r['policy']}]" if r.get("policy") else "")
    if x.get("dst_kind"):
        label += f" → {x['dst_kind']}" + (f" [{x['dst_policy']}]" if x.get("dst_policy") else "")
        if x.get("direction") == "bidir":
            label += f" (both ways: {x.get('route')})"
    return label


def short_kind(kind, policy) -> str:
    """The kind and any policy other than the default first touch by the CPU."""
    policy = ",".join(p for p in (policy or "").split(",") if p and p != "first_touch=cpu")
    return kind + (f" [{policy}]" if policy else "")


def num(v) -> str:
    """Four significant digits; None is empty."""
    return "" if v is None else f"{v:.4g}"


def ns(v) -> str:
    """A time in ns, or µs / ms when that reads better."""
    if v >= 1e6:
        return f"{v / 1e6:.3g} ms"
    if v >= 1e4:
        return f"{v / 1e3:.3g} µs"
    return f"{v:.4g} ns"


def g(v) -> str:
    """Three significant digits, without exponents for large values."""
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def bound_cells(r) -> str:
    """Three cells: the bound, the fraction of it reached, and the limiting datapath with its source."""
    x = r.get("extra") or {}
    if not x.get("bound"):
        return f"<td colspan=3 class=note>{e(x.get('bound_note', ''))}</td>"
    src = x.get("bound_source") or "source not recorded (older store)"
    return (f"<td class=num>{x['bound']:.4g}</td><td class=num>{100 * x.get('efficiency', 0):.0f}%</td>"
            f"<td>{e(x.get('datapath'))} <span class=note>({e(src)})</span></td>")


def records_table(recs) -> str:
    """Every record: its statistics, spread (flagged above SPREAD_FLAG) and bound."""
    head = ("<tr><th>op</th><th>processor</th><th>kind [policy]</th><th>size</th><th>threads</th>"
            "<th>median</th><th>min</th><th>max</th><th>unit</th><th>n</th><th>spread</th><th>bound</th>"
            "<th>of bound</th><th>limit</th></tr>")
    rows = []
    for r in recs:
        spread = r.get("spread") or 0
        flag = spread > SPREAD_FLAG
        rows.append(
            f"<tr><td>{e(r['op'])}</td><td>{e(r['processor'])}</td><td>{e(kind_label(r))}</td>"
            f"<td class=num>{e(format_size(r['bytes']) if r['bytes'] else '')}</td>"
            f"<td class=num>{e(r['threads'] or '')}</td><td class=num>{r['median']:.4g}</td>"
            f"<td class=num>{r['min']:.4g}</td><td class=num>{r['max']:.4g}</td><td>{e(r['unit'])}</td>"
            f"<td class=num>{e(r['n'])}</td><td class=\"num{' flag' if flag else ''}\">{spread * 100:.1f}%"
            f"{' ⚠' if flag else ''}</td>{bound_cells(r)}</tr>")
    return "<table>" + head + "".join(rows) + "</table>"


def chart(bench, recs) -> str:
    """Bars of every record's median (whiskers min-max), grouped by kind, size and launch shape where they vary."""
    groups = OrderedDict()
    vary_size = len({x["bytes"] for x in recs}) > 1
    vary_grid = len({((x.get("extra") or {}).get("grid"), (x.get("extra") or {}).get("block")) for x in recs}) > 1
    for r in recs:
        x = r.get("extra") or {}
        label = kind_label(r) + (f" · {format_size(r['bytes'])}" if vary_size and r.get('bytes') else "")
        if vary_grid and x.get("grid"):
            label += f" · {x['grid']}×{x['block']} thr"
        series = r["op"] + (f" ×{r['threads']} thr" if r.get("threads") else "")
        groups.setdefault(label, []).append((series, r["median"], r["min"], r["max"]))
    unit = recs[0]["unit"]
    return hbar_chart(list(groups.items()), unit, f"{bench}: {recs[0]['metric']} ({unit}), bars median, "
                                                  f"whiskers min–max")


def chart_and_table(bench, recs, page=None) -> str:
    """The section of a family no module draws: its chart, then its records."""
    return chart(bench, recs) + records_table(recs)
