"""What every section of the run report shares: escaping, HTML tables (html_table and its cells), the labels
of a memory kind, number formats, the table of records with their bounds, and the default chart of a family.
Charts themselves are drawn by report/svg.py."""

import re
from collections import OrderedDict
from html import escape

from umscope.report.svg import hbar_chart
from umscope.sizes import format_size

SPREAD_FLAG = 0.05  # (max - min) / median above this is flagged


def e(x) -> str:
    """Escaped text of any value; None is empty."""
    return escape("" if x is None else str(x))


class Cell:
    """One table cell: text (escaped when drawn) or html (drawn as it is), its class, its spans, and whether
    it is a header cell. Made by cell(), num_cell() and th()."""
    __slots__ = ("text", "html", "cls", "colspan", "rowspan", "header")

    def __init__(self, text="", cls=None, html=None, colspan=None, rowspan=None, header=False):
        self.text, self.html, self.cls = text, html, cls
        self.colspan, self.rowspan, self.header = colspan, rowspan, header

    def render(self, header=False) -> str:
        tag = "th" if header or self.header else "td"
        attrs = _attrs(colspan=self.colspan, rowspan=self.rowspan, cls=self.cls)
        return f"<{tag}{attrs}>{e(self.text) if self.html is None else self.html}</{tag}>"


class Row(list):
    """A table row with attributes of its own (a class): Row(cells, cls='pub')."""

    def __init__(self, cells, cls=None):
        super().__init__(cells)
        self.cls = cls


_BARE = re.compile(r"^[A-Za-z0-9_.-]+$")


def _attrs(colspan=None, rowspan=None, cls=None) -> str:
    """' colspan=2 rowspan=2 class=num': spans first, values unquoted where HTML allows it, else quoted."""
    out = ""
    for name, v in (("colspan", colspan), ("rowspan", rowspan), ("class", cls)):
        if v is None or v == "":
            continue
        v = str(v)
        out += f" {name}={v}" if _BARE.match(v) else f' {name}="{e(v)}"'
    return out


def cell(text="", cls=None, *, html=None, colspan=None, rowspan=None) -> Cell:
    """A <td>: text is escaped; html (already escaped markup, e.g. with a <br> or <code>) is drawn as it is."""
    return Cell(text, cls, html, colspan, rowspan)


def num_cell(text, flag=False, *, html=None, colspan=None) -> Cell:
    """A right-aligned number cell (class num), flagged (class 'num flag', red) where flag is true."""
    return Cell(text, "num flag" if flag else "num", html, colspan)


def th(text="", cls=None, *, html=None, colspan=None, rowspan=None) -> Cell:
    """A <th>: a column heading, or a row's heading among its <td> cells."""
    return Cell(text, cls, html, colspan, rowspan, header=True)


def html_table(headers, rows, note=None, *, empty="") -> str:
    """An HTML table. headers: the heading cells (plain values are escaped, or th()/Cell for spans and
    classes), or a list of such lists for several heading rows, or None for no heading row. rows: lists of
    cells, a Row for a row with a class; a plain value is escaped into a <td>, a Cell is drawn as it says.
    note: HTML written by the caller (store values in it escaped), drawn after the table as <p class=note>.
    Without rows, the table and its note are left out and `empty` (HTML, '' by default) is returned."""
    rows = list(rows)
    if not rows:
        return empty
    if headers and isinstance(headers[0], (list, tuple)):
        head_rows = headers
    else:
        head_rows = [headers] if headers else []

    def draw(cells, header, cls=None):
        return f"<tr{_attrs(cls=cls)}>" + "".join(
            (c if isinstance(c, Cell) else Cell(c)).render(header) for c in cells) + "</tr>"

    out = ["<table>"] + [draw(h, True) for h in head_rows]
    out += [draw(r, False, getattr(r, "cls", None)) for r in rows]
    out.append("</table>")
    if note:
        out.append(f"<p class=note>{note}</p>")
    return "".join(out)


def extra(r) -> dict:
    """A record's family-specific fields."""
    return r.get("extra") or {}


def kind_label(r) -> str:
    """'kind [policy]', and for copies '-> dst [policy]' and the route of a two-way copy."""
    x = r.get("extra") or {}
    label = (r.get("kind") or "") + (f" [{r['policy']}]" if r.get("policy") else "")
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


def bound_cells(r) -> list:
    """Three cells: the bound, the fraction of it reached, and the limiting datapath with its source."""
    x = r.get("extra") or {}
    if not x.get("bound"):
        return [cell(x.get("bound_note", ""), "note", colspan=3)]
    src = x.get("bound_source") or "source not recorded (older store)"
    return [num_cell(f"{x['bound']:.4g}"), num_cell(f"{100 * x.get('efficiency', 0):.0f}%"),
            cell(html=f"{e(x.get('datapath'))} <span class=note>({e(src)})</span>")]


def spread_threshold(recs) -> tuple:
    """(threshold, the family's median spread): a record is flagged where its spread is above three times the
    median spread of its family's records, and never below SPREAD_FLAG, so the flag marks a record noisier than
    its family usually is rather than firing on most rows of a noisy family."""
    import statistics
    spreads = [r.get("spread") or 0 for r in recs]
    usual = statistics.median(spreads) if spreads else 0.0
    return max(SPREAD_FLAG, 3 * usual), usual


def spread_note(recs) -> str:
    limit, usual = spread_threshold(recs)
    return (f"Spread flagged ⚠ above {100 * limit:.1f}%: three times this family's median spread "
            f"({100 * usual:.1f}%), and at least {100 * SPREAD_FLAG:.0f}%.")


def records_table(recs, columns=()) -> str:
    """Every record: its statistics, spread (flagged above the family's threshold) and bound. columns: (heading,
    fn(record) -> cell text) added after the size, for what the family's chart draws besides."""
    rows = []
    limit, _ = spread_threshold(recs)
    for r in recs:
        spread = r.get("spread") or 0
        flag = spread > limit
        rows.append([r["op"], r["processor"], kind_label(r), num_cell(format_size(r["bytes"]) if r["bytes"] else "")]
                    + [num_cell(fn(r)) for _, fn in columns]
                    + [num_cell(r["threads"] or ""), num_cell(f"{r['median']:.4g}"), num_cell(f"{r['min']:.4g}"),
                       num_cell(f"{r['max']:.4g}"), r["unit"], num_cell(r["n"]),
                       num_cell(f"{spread * 100:.1f}%{' ⚠' if flag else ''}", flag)] + bound_cells(r))
    return html_table(["op", "processor", "kind [policy]", "size"] + [h for h, _ in columns]
                      + ["threads", "median", "min", "max", "unit", "n", "spread", "bound", "of bound", "limit"], rows,
                      e(spread_note(recs)))


def chart(bench, recs) -> str:
    """Bars of every record's median (whiskers min-max), grouped by kind, size and launch shape where they vary;
    one chart per unit, so an axis never mixes units."""
    by_unit = OrderedDict()
    for r in recs:
        by_unit.setdefault(r["unit"] or "(no unit)", []).append(r)
    return "".join(_unit_chart(bench, rs) for rs in by_unit.values())


def _unit_chart(bench, recs) -> str:
    groups = OrderedDict()
    vary_size = len({x["bytes"] for x in recs}) > 1
    vary_grid = len({((x.get("extra") or {}).get("grid"), (x.get("extra") or {}).get("block")) for x in recs}) > 1
    for r in recs:
        x = r.get("extra") or {}
        label = kind_label(r) + (f" · {format_size(r['bytes'])}" if vary_size and r.get('bytes') else "")
        if vary_grid and x.get("grid"):
            label += f" · {x['grid']}×{x['block']} thr"
        series = (r.get("op") or "") + (f" ×{r['threads']} thr" if r.get("threads") else "")
        groups.setdefault(label, []).append((series, r["median"], r["min"], r["max"]))
    unit = recs[0]["unit"] or ""  # a store's row may lack it: drawn without, not fatal
    values = [r["median"] for r in recs if r["median"] and r["median"] > 0]
    log = bool(values) and max(values) / min(values) > 1000  # several decades: a log axis, with its ticks
    return hbar_chart(list(groups.items()), unit, f"{bench}: {recs[0]['metric']} ({unit or 'count'}), bars median, "
                                                  f"whiskers min–max", log=log)


def chart_and_table(bench, recs, page=None) -> str:
    """The section of a family no module draws: its chart, then its records."""
    return chart(bench, recs) + records_table(recs)
