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


def hbar_chart(groups, unit: str, title: str, width=860) -> str:
    """Horizontal grouped bars.

    groups: [(group label, [(series label, median, min, max), ...]), ...].
    Whiskers show min..max of the repetitions."""
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
    height = top + sum(len(b) * bar_h + gap for _, b in groups) + 30
    out = [f'<svg class="chart" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
           f'<text x="4" y="16" font-size="14" font-weight="bold">{escape(title)}</text>'] + legend
    y = top
    for label, bars in groups:
        gh = len(bars) * bar_h
        out.append(_label(label, left - 6, y + gh / 2 + 4))
        for s, med, mn, mx in bars:
            w = plot_w * med / vmax
            out.append(f'<rect class="bar" x="{left}" y="{y}" width="{w:.1f}" height="{bar_h - 2}" '
                       f'fill="{color[s]}"><title>{escape(label)} {escape(s)}: {_fmt(med)} {escape(unit)}'
                       f'</title></rect>')
            if mn is not None and mx is not None and mx > mn:
                x0, x1 = left + plot_w * mn / vmax, left + plot_w * mx / vmax
                yc = y + (bar_h - 2) / 2
                out.append(f'<line x1="{x0:.1f}" y1="{yc:.1f}" x2="{x1:.1f}" y2="{yc:.1f}" stroke="#000" '
                           f'stroke-width="1"/>')
            out.append(f'<text x="{left + w + 4:.1f}" y="{y + bar_h - 3}" font-size="10">{_fmt(med)}</text>')
            y += bar_h
        y += gap
    out.append(f'<line x1="{left}" y1="{top - 4}" x2="{left}" y2="{y}" stroke="#444"/>')
    out.append(f'<text x="{left + plot_w}" y="{y + 16}" font-size="11" text-anchor="end">{escape(unit)}</text>')
    out.append("</svg>")
    return "".join(out)
