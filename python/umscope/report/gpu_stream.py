"""The gpu-stream family: bandwidth of each stream op by memory kind, then the scaling sweeps (bandwidth
against the blocks of the grid and against the threads of a block)."""

from collections import OrderedDict

from umscope.report.common import chart, kind_label, records_table
from umscope.report.registry import family_section
from umscope.report.svg import line_chart


def scaling(recs) -> str:
    """GPU bandwidth against the number of blocks, and against threads per block."""
    out = []
    by_blocks, by_threads = OrderedDict(), OrderedDict()
    for r in recs:
        x, p = r.get("extra") or {}, r.get("params") or {}
        key = f"{r['op']} {kind_label(r)}"
        if "blocks" in p:
            by_blocks.setdefault(f"{key} ({x.get('block')} thr/block)", []).append(
                (x.get("grid"), r["median"], r["min"], r["max"]))
        else:
            by_threads.setdefault(f"{key} ({x.get('grid')} blocks)", []).append(
                (x.get("block"), r["median"], r["min"], r["max"]))
    if by_blocks:
        out.append(line_chart(list(by_blocks.items()), "scaling: bandwidth against blocks", "blocks in the grid",
                              "GB/s", x_fmt=lambda v: f"{v:.0f}"))
    if by_threads:
        out.append(line_chart(list(by_threads.items()), "scaling: bandwidth against threads per block",
                              "threads per block (grid from the occupancy API)", "GB/s", x_fmt=lambda v: f"{v:.0f}"))
    return "".join(out)


@family_section("gpu-stream")
def section(bench, recs, page=None) -> str:
    scaled = [r for r in recs if {"blocks", "block"} & set(r.get("params") or {})]
    plain = [r for r in recs if r not in scaled]
    parts = []
    if plain:
        parts += [chart(bench, plain), records_table(plain)]
    if scaled:
        parts += ["<h3>Scaling</h3>", scaling(scaled), records_table(scaled, [
            ("blocks", lambda r: (r.get("extra") or {}).get("grid", "")),
            ("threads per block", lambda r: (r.get("extra") or {}).get("block", ""))])]
    return "".join(parts)
