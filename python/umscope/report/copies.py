"""The copy family: heatmaps of the copy matrix (one per engine, one way, at the largest size), bandwidth
against size for the copies that cross the host link, and every record."""

from collections import OrderedDict

from umscope.report.common import records_table, short_kind
from umscope.report.registry import family_section
from umscope.report.svg import heatmap, line_chart, size_tick
from umscope.sizes import format_size


def charts(recs) -> str:
    """Heatmaps of the copy matrix (one per engine, one way, at the largest size), then bandwidth
    against size for every pair."""
    out = []
    uni = [r for r in recs if (r.get("extra") or {}).get("direction", "uni") == "uni"]
    for op in sorted({r["op"] for r in uni}):
        mine = [r for r in uni if r["op"] == op]
        top = max(r["bytes"] for r in mine)
        cells, rows, cols = {}, [], []
        for r in mine:
            if r["bytes"] != top:
                continue
            x = r.get("extra") or {}
            src, dst = short_kind(r["kind"], r.get("policy")), short_kind(x.get("dst_kind", "?"), x.get("dst_policy"))
            rows += [src] if src not in rows else []
            cols += [dst] if dst not in cols else []
            cells[(src, dst)] = r["median"]
        engine = "copy engines (cudaMemcpyAsync)" if op == "ce-copy" else "SMs (copy kernel)"
        out.append(heatmap(rows, cols, cells, f"{op}: copy by {engine}, {format_size(top)}, median GB/s", "GB/s"))
    # Bandwidth against size for the copies that cross the host link (one end on the GPU, the other
    # not); the rest are in the heatmaps and the table.
    series = OrderedDict()
    for r in uni:
        x = r.get("extra") or {}
        if len({y["bytes"] for y in uni}) < 2 or (r["kind"] == "device") == (x.get("dst_kind") == "device"):
            continue
        label = f"{r['op']} {short_kind(r['kind'], r.get('policy'))} → " \
                f"{short_kind(x.get('dst_kind', '?'), x.get('dst_policy'))}"
        series.setdefault(label, []).append((r["bytes"], r["median"], r["min"], r["max"]))
    if series:
        out.append(line_chart(list(series.items()), "host-link copies: bandwidth against size (one way)",
                              "bytes per copy", "GB/s", x_fmt=size_tick, height=380))
    return "".join(out)


@family_section("copy")
def section(bench, recs, page=None) -> str:
    return charts(recs) + records_table(recs)
