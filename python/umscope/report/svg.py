"""Small SVG charts written by hand, so a report needs no plotting library and
no network. Every label is escaped."""

from html import escape

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf"]


def _fmt(v: float) -> str:
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def _label(text: str, x: float, y: float, max_chars=52) -> str:
    """Right-aligned group label; a long one is broken at commas onto several lines."""
    lines, cur = [], ""
    for piece in text.replace(",", ", ").split(" "):
        if cur and len(cur) + 1 + len(piece) > max_chars:
            lines.append(cur)
            cur = piece
        else:
            cur = f"{cur} {piece}" if cur else piece
    lines.append(cur)
    y0 = y - 6.5 * (len(lines) - 1)
    spans = "".join(f'<tspan x="{x}" y="{y0 + 13 * i:.1f}">{escape(t)}</tspan>' for i, t in enumerate(lines))
    return f'<text font-size="11" text-anchor="end">{spans}</text>'


def hbar_chart(groups, unit: str, title: str, width=860, log=False) -> str:
    """Horizontal grouped bars.

    groups: [(group label, [(series label, median, min, max), ...]), ...].
    Whiskers show min..max of the repetitions. log: bar length on a log scale (for values spanning
    several decades, such as phase times)."""
    import math
    series = []
    for _, bars in groups:
        for s, *_ in bars:
            if s not in series:
                series.append(s)
    color = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(series)}
    bar_h, gap, left, right = 12, 10, 330, 70
    # Legend items flow left to right and wrap onto further rows.
    legend, x, ly = [], left, 24
    for s in series:
        item_w = 24 + 7 * len(s)
        if x + item_w > width - 4 and x > left:
            x, ly = left, ly + 16
        legend.append(f'<rect x="{x}" y="{ly}" width="10" height="10" fill="{color[s]}"/>'
                      f'<text x="{x + 14}" y="{ly + 9}" font-size="11">{escape(s)}</text>')
        x += item_w
    top = ly + 20
    vmax = max((mx if mx is not None else med) for _, bars in groups for _, med, _, mx in bars) or 1.0
    plot_w = width - left - right
    positive = [v for _, bars in groups for _, med, mn, mx in bars for v in (med, mn, mx) if v and v > 0]
    vmin = min(positive) / 2 if positive else 1.0

    def scale(v):
        if not log:
            return plot_w * v / vmax
        if v is None or v <= 0:
            return 0.0
        return plot_w * math.log(v / vmin) / math.log(vmax / vmin) if vmax > vmin else plot_w
    height = top + sum(len(b) * bar_h + gap for _, b in groups) + (40 if log else 30)
    out = [f'<svg class="chart" data-unit="{escape(unit)}" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
           f'<text x="4" y="16" font-size="14" font-weight="bold">{escape(title)}</text>'] + legend
    y = top
    for label, bars in groups:
        gh = len(bars) * bar_h
        out.append(_label(label, left - 6, y + gh / 2 + 4))
        for s, med, mn, mx in bars:
            w = scale(med)
            out.append(f'<rect class="bar" data-v="{med!r}" x="{left}" y="{y}" width="{w:.1f}" height="{bar_h - 2}" '
                       f'fill="{color[s]}"><title>{escape(label)} {escape(s)}: {_fmt(med)} {escape(unit)}'
                       f'</title></rect>')
            if mn is not None and mx is not None and mx > mn:
                x0, x1 = left + scale(mn), left + scale(mx)
                yc = y + (bar_h - 2) / 2
                out.append(f'<line x1="{x0:.1f}" y1="{yc:.1f}" x2="{x1:.1f}" y2="{yc:.1f}" stroke="#000" '
                           f'stroke-width="1"/>')
            out.append(f'<text x="{left + w + 4:.1f}" y="{y + bar_h - 3}" font-size="10">{_fmt(med)}</text>')
            y += bar_h
        y += gap
    out.append(f'<line x1="{left}" y1="{top - 4}" x2="{left}" y2="{y}" stroke="#444"/>')
    if log:  # tick values, so a log-scale bar's length can be read
        for k in range(math.floor(math.log10(vmin)), math.ceil(math.log10(vmax)) + 1):
            v = 10.0 ** k
            if vmin <= v <= vmax * 1.0001:
                xt = left + scale(v)
                out.append(f'<line x1="{xt:.1f}" y1="{top - 4}" x2="{xt:.1f}" y2="{y}" stroke="#ddd"/>'
                           f'<text class="tick" x="{xt:.1f}" y="{y + 12}" font-size="10" text-anchor="middle">'
                           f'{v:g}</text>')
    out.append(f'<text x="{left + plot_w}" y="{y + 26 if log else y + 16}" font-size="11" text-anchor="end">'
               f'{escape(unit)}{" (log scale)" if log else ""}</text>')
    out.append("</svg>")
    return "".join(out)


def size_tick(v: float) -> str:
    """Compact binary size for an axis: 4096 -> '4KiB', 3<<30 -> '3GiB'."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if v >= 1 << shift:
            q = v / (1 << shift)
            return f"{q:.0f}{unit}" if q == int(q) else f"{q:.3g}{unit}"
    return f"{v:.0f}B"


def _nice_ticks(lo: float, hi: float, log: bool) -> list:
    """Tick values for an axis: powers of two (log) or about five round steps (linear)."""
    import math
    if log:
        lo, hi = max(lo, 1e-12), max(hi, lo * 2)
        a, b = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
        step = max(1, (b - a) // 10 + ((b - a) % 10 > 0))
        return [2.0 ** k for k in range(a, b + 1, step)]
    span = hi - lo or abs(hi) or 1.0
    raw = span / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 2)]


def segments(ps, x_log=True) -> list:
    """The runs of consecutive points a line may join: neighbours in the sweep. A step more than twice the
    series' usual (median) step means sizes between were not measured, so the line breaks there; a series of
    two points is joined only where they are at most 4x (log axis) apart, else drawn as points."""
    import math
    if len(ps) < 2:
        return [ps]
    tx = (lambda v: math.log2(max(v, 1e-300))) if x_log else (lambda v: v)
    steps = [tx(b[0]) - tx(a[0]) for a, b in zip(ps, ps[1:])]
    usual = sorted(steps)[len(steps) // 2]
    limit = 2 * usual if len(ps) > 2 else (2.0 if x_log else float("inf"))
    out, cur = [], [ps[0]]
    for p, step in zip(ps[1:], steps):
        if step > limit + 1e-9:
            out.append(cur)
            cur = []
        cur.append(p)
    out.append(cur)
    return out


def line_chart(series, title: str, x_label: str, y_label: str, x_log=True, y_log=False, x_fmt=None,
               marks=(), points_only=False, width=860, height=340, unit=None, x_range=None, css="chart") -> str:
    """Lines (or points) through (x, y) per series, optional min..max whiskers. Lines join only neighbours in
    the sweep (segments()); a lone point is a point.

    series: [(label, [(x, y) or (x, y, ymin, ymax), ...]), ...]
    marks: [(x, label)] drawn as dashed vertical lines (cache sizes, say).
    unit: the y values' unit (default y_label), kept on the chart for the tables' check.
    x_range: (lo, hi) the x axis spans whatever the points (one time axis for several charts)."""
    import math
    pts = [p for _, ps in series for p in ps if p[1] is not None]
    if not pts:
        return ""
    x_fmt = x_fmt or _fmt
    left, right, top, bottom = 70, 40, 28, 44
    legend_rows = []
    x, row = left, []
    for i, (label, _) in enumerate(series):
        item_w = 24 + 7 * len(label)
        if x + item_w > width - 4 and row:
            legend_rows.append(row)
            row, x = [], left
        row.append((x, i, label))
        x += item_w
    if row:
        legend_rows.append(row)
    top += 16 * len(legend_rows)
    height += 16 * len(legend_rows)
    xs = [p[0] for p in pts] + [m[0] for m in marks if m[0] > 0] + list(x_range or ())
    ys = [p[1] for p in pts] + [p[3] for p in pts if len(p) > 3 and p[3] is not None]
    x0, x1 = min(xs), max(xs)
    y0, y1 = (min(ys), max(ys)) if y_log else (0.0, max(ys) or 1.0)
    xt, yt = _nice_ticks(x0, x1, x_log), _nice_ticks(y0, y1, y_log)
    x0, x1 = (min(xt[0], x0), max(xt[-1], x1))
    y0, y1 = (min(yt[0], y0), yt[-1] if yt[-1] >= y1 else y1)
    pw, ph = width - left - right, height - top - bottom
    tx = (lambda v: math.log2(max(v, 1e-300))) if x_log else (lambda v: v)
    ty = (lambda v: math.log2(max(v, 1e-300))) if y_log else (lambda v: v)

    def X(v):
        return left + pw * (tx(v) - tx(x0)) / ((tx(x1) - tx(x0)) or 1)

    def Y(v):
        return top + ph - ph * (ty(v) - ty(y0)) / ((ty(y1) - ty(y0)) or 1)

    out = [f'<svg class="{css}" data-unit="{escape(unit or y_label)}" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{escape(title)}">', f'<text x="4" y="16" font-size="14" font-weight="bold">{escape(title)}</text>']
    for r, items in enumerate(legend_rows):
        for lx, i, label in items:
            ly = 24 + 16 * r
            out.append(f'<rect x="{lx}" y="{ly}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
                       f'<text x="{lx + 14}" y="{ly + 9}" font-size="11">{escape(label)}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    for v in xt:
        if x0 <= v <= x1:
            out.append(f'<line x1="{X(v):.1f}" y1="{top}" x2="{X(v):.1f}" y2="{top + ph}" stroke="#eee"/>'
                       f'<text x="{X(v):.1f}" y="{top + ph + 14}" font-size="10" text-anchor="middle">'
                       f'{escape(x_fmt(v))}</text>')
    for v in yt:
        if y0 <= v <= y1:
            out.append(f'<line x1="{left}" y1="{Y(v):.1f}" x2="{left + pw}" y2="{Y(v):.1f}" stroke="#eee"/>'
                       f'<text x="{left - 4}" y="{Y(v) + 3:.1f}" font-size="10" text-anchor="end">{_fmt(v)}</text>')
    for mx, label in marks:
        if x0 <= mx <= x1:
            out.append(f'<line class="mark" x1="{X(mx):.1f}" y1="{top}" x2="{X(mx):.1f}" y2="{top + ph}" '
                       f'stroke="#888" stroke-dasharray="4,3"/><text x="{X(mx) + 3:.1f}" y="{top + 12}" '
                       f'font-size="10" fill="#555">{escape(label)}</text>')
    for i, (label, ps) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        ps = sorted((p for p in ps if p[1] is not None), key=lambda p: p[0])
        for seg in ([] if points_only else segments(ps, x_log)):
            if len(seg) > 1:
                d = " ".join(f"{X(p[0]):.1f},{Y(p[1]):.1f}" for p in seg)
                out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{d}"/>')
        for p in ps:
            if len(p) > 3 and p[2] is not None and p[3] is not None and p[3] > p[2]:
                out.append(f'<line x1="{X(p[0]):.1f}" y1="{Y(p[2]):.1f}" x2="{X(p[0]):.1f}" y2="{Y(p[3]):.1f}" '
                           f'stroke="{color}"/>')
            out.append(f'<circle class="pt" data-v="{p[1]!r}" cx="{X(p[0]):.1f}" cy="{Y(p[1]):.1f}" '
                       f'r="{4 if points_only else 2.5}" '
                       f'fill="{color}"><title>{escape(label)}: {escape(x_fmt(p[0]))}, {_fmt(p[1])}</title></circle>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 6}" font-size="11" text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text x="12" y="{top + ph / 2}" font-size="11" text-anchor="middle" '
               f'transform="rotate(-90 12 {top + ph / 2})">{escape(y_label)}</text>')
    out.append("</svg>")
    return "".join(out)


def heatmap(rows, cols, values, title: str, unit: str, cell_w=110, cell_h=26, corner="from ↓ to →") -> str:
    """A matrix of cells coloured by value (white to blue, on a log scale so a 1000x range stays
    readable), the value printed in each.

    values: {(row, col): number}; a missing pair is drawn grey with a dash."""
    import math
    left, top = 150, 44
    width = max(left + cell_w * len(cols) + 10, 8 * len(title) + 20)
    height = top + cell_h * len(rows) + 10
    positive = [v for v in values.values() if v and v > 0]
    lo, hi = (min(positive), max(positive)) if positive else (1.0, 1.0)

    def shade(v):
        if hi <= lo:
            return 1.0
        return 0.15 + 0.85 * (math.log(max(v, lo)) - math.log(lo)) / (math.log(hi) - math.log(lo))
    out = [f'<svg class="chart heatmap" data-unit="{escape(unit)}" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" '
           f'role="img" aria-label="{escape(title)}">',
           f'<text x="4" y="16" font-size="14" font-weight="bold">{escape(title)}</text>',
           f'<text x="{left - 6}" y="{top - 8}" font-size="10" text-anchor="end" fill="#555">{escape(corner)}</text>']
    for j, c in enumerate(cols):
        out.append(f'<text x="{left + cell_w * j + cell_w / 2}" y="{top - 8}" font-size="11" '
                   f'text-anchor="middle">{escape(c)}</text>')
    for i, r in enumerate(rows):
        y = top + cell_h * i
        out.append(f'<text x="{left - 6}" y="{y + cell_h / 2 + 4}" font-size="11" text-anchor="end">{escape(r)}</text>')
        for j, c in enumerate(cols):
            x = left + cell_w * j
            v = values.get((r, c))
            if v is None:
                out.append(f'<rect x="{x}" y="{y}" width="{cell_w - 2}" height="{cell_h - 2}" fill="#eee"/>'
                           f'<text x="{x + cell_w / 2}" y="{y + cell_h / 2 + 4}" font-size="11" '
                           f'text-anchor="middle" fill="#888">–</text>')
                continue
            t = max(0.0, min(1.0, shade(v)))
            rgb = tuple(int(255 - t * (255 - c0)) for c0 in (31, 119, 180))
            ink = "#fff" if t > 0.55 else "#000"
            out.append(f'<rect class="cell" data-v="{v!r}" x="{x}" y="{y}" width="{cell_w - 2}" height="{cell_h - 2}" '
                       f'fill="rgb{rgb}"><title>{escape(r)} → {escape(c)}: {_fmt(v)} {escape(unit)}</title></rect>'
                       f'<text x="{x + cell_w / 2}" y="{y + cell_h / 2 + 4}" font-size="11" text-anchor="middle" '
                       f'fill="{ink}">{_fmt(v)}</text>')
    out.append("</svg>")
    return "".join(out)


def timeline(lanes, t_lo, t_hi, title, width=860, left=170, lane_h=30) -> str:
    """Lanes over one time axis [t_lo, t_hi] (seconds). lanes: [(label, kind, items, note)] where kind is 'spans'
    (items: (start, end, text)) or 'bars' (items: (start, end, value, colour[, base]): stacked on base; height is relative
    to the lane's largest stack, which the note states). Drawn size depends on the items given, never on the trace's length."""
    right, top = 20, 28
    pw = width - left - right
    height = top + lane_h * len(lanes) + 30
    span = (t_hi - t_lo) or 1.0

    def X(t):
        return left + pw * (max(t_lo, min(t_hi, t)) - t_lo) / span

    out = [f'<svg class="chart timeline" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'role="img" aria-label="{escape(title)}">',
           f'<text x="4" y="16" font-size="14" font-weight="bold">{escape(title)}</text>']
    for v in _nice_ticks(t_lo, t_hi, False):
        if t_lo <= v <= t_hi:
            out.append(f'<line x1="{X(v):.1f}" y1="{top}" x2="{X(v):.1f}" y2="{height - 26}" stroke="#eee"/>'
                       f'<text class="tick" x="{X(v):.1f}" y="{height - 12}" font-size="10" text-anchor="middle">'
                       f'{v:.6g}</text>')
    for i, (label, kind, items, note) in enumerate(lanes):
        y = top + lane_h * i
        out.append(f'<text x="{left - 6}" y="{y + lane_h / 2}" font-size="11" text-anchor="end">{escape(label)}'
                   f'</text><text x="{left - 6}" y="{y + lane_h / 2 + 11}" font-size="9" fill="#666" '
                   f'text-anchor="end">{escape(note)}</text>'
                   f'<line x1="{left}" y1="{y + lane_h - 2}" x2="{left + pw}" y2="{y + lane_h - 2}" stroke="#ccc"/>')
        if kind == "spans":
            for a, b, text in items:
                w = max(0.8, X(b) - X(a))
                out.append(f'<rect x="{X(a):.1f}" y="{y + 4}" width="{w:.1f}" height="{lane_h - 9}" fill="#9467bd" '
                           f'fill-opacity="0.7"><title>{escape(text)}</title></rect>')
        else:
            top_v = max((it[2] + (it[4] if len(it) > 4 else 0) for it in items), default=0) or 1
            for it in items:
                a, b, v, colour = it[:4]
                base = (lane_h - 6) * (it[4] if len(it) > 4 else 0) / top_v
                h = (lane_h - 6) * v / top_v
                out.append(f'<rect x="{X(a):.1f}" y="{y + lane_h - 2 - base - h:.1f}" '
                           f'width="{max(0.8, X(b) - X(a)):.1f}" height="{h:.1f}" fill="{colour}"/>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 1}" font-size="11" text-anchor="middle">seconds since the '
               f'program started</text></svg>')
    return "".join(out)
