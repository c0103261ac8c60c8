"""Report sections of the scale-out families: NCCL bus bandwidth per operation
and memory kind against the peer-link bound, MPI bandwidth and latency per
pair of kinds, and MPI throughput against the processes per node."""

from collections import OrderedDict

from umscope import verify
from umscope.report.common import (cell, e, extra, html_table, num_cell, records_table, short_kind, spread_note,
                                   spread_threshold)
from umscope.report.registry import family_section
from umscope.report.svg import line_chart, size_tick


def link_bound(fp):
    """(GB/s per direction, source) of the slowest GPU pair's peer link, where the probe knows it."""
    try:
        from umscope.model import bounds
    except ImportError:
        return None
    peer_link = getattr(bounds, "peer_link", None)
    gpus = [g.get("device", i) for i, g in enumerate((fp or {}).get("gpus") or [])]
    if not peer_link or len(gpus) < 2:
        return None
    found = [b for a in gpus for c in gpus if a < c for b in [peer_link(fp, a, c)] if b]
    return min(found) if found else None


def _point(r):
    return (r["bytes"], r["median"], r["min"], r["max"])


def nccl_section(recs, fp=None) -> str:
    bound = link_bound(fp)
    out = []
    by_op = OrderedDict()
    for r in recs:
        by_op.setdefault(r["op"], []).append(r)
    for op, rs in by_op.items():
        series = OrderedDict()
        for r in rs:
            x = extra(r)
            label = short_kind(r["kind"], r.get("policy")) + f" · {x.get('ranks')} ranks"
            if x.get("launch") == "mpi":
                label += f" on {x.get('hosts')} host(s)"
            series.setdefault(label, []).append(_point(r))
        if bound:
            xs = [r["bytes"] for r in rs]
            series[f"peer-link bound {bound[0]:g} GB/s ({bound[1]})"] = [(min(xs), bound[0]), (max(xs), bound[0])]
        out.append(line_chart(list(series.items()), f"NCCL {op}: bus bandwidth (median, whiskers min–max)",
                              "size (nccl-tests' size per rank)", "busbw GB/s", x_fmt=size_tick))
    first = extra(recs[0]) if recs else {}
    out.append("<p class=note>algbw = size / time; busbw = algbw × 2(n−1)/n for all-reduce, × (n−1)/n for "
               "all-gather, reduce-scatter and all-to-all, × 1 for broadcast (nccl-tests' definitions, so figures "
               "compare with all_reduce_perf). Time: CUDA events around a batch of calls, the slowest rank's; "
               "every received element was checked against the exact result. "
               f"NCCL {e(first.get('nccl_version'))} from <code>{e(first.get('nccl_library'))}</code>, "
               f"NCCL_NVLS_ENABLE={e(first.get('nccl_nvls_enable'))}."
               + ("" if bound else " No peer-link bound: the probe found no GPU pair link.") + "</p>")
    limit = spread_threshold(recs)[0]
    bound_cells = (lambda r: [num_cell(f"{bound[0]:.4g}"), num_cell(f"{100 * r['median'] / bound[0]:.0f}%"),
                              cell(bound[1], "note")]) if bound else (lambda r: [])
    out.append(html_table(
        ["op", "kind", "ranks", "launch", "size", "time µs", "algbw GB/s", "busbw GB/s", "min", "max", "spread",
         "verified"] + (["peer-link bound GB/s", "busbw of bound", "bound source"] if bound else []),
        [[r["op"], short_kind(r["kind"], r.get("policy")), extra(r).get("ranks"), extra(r).get("launch"),
          num_cell(size_tick(r["bytes"])), num_cell(f"{extra(r).get('time_us', 0):.4g}"),
          num_cell(f"{extra(r).get('algbw', 0):.4g}"), num_cell(f"{r['median']:.4g}"), num_cell(f"{r['min']:.4g}"),
          num_cell(f"{r['max']:.4g}"),
          num_cell(f"{100 * (r.get('spread') or 0):.1f}%", (r.get("spread") or 0) > limit), verify.method(r)]
         + bound_cells(r) for r in recs], e(spread_note(recs)) + (
            " The bound is the slowest GPU pair's peer link, per direction (the chart's dashed line); the bounds "
            "model has no datapath model of the collectives themselves." if bound else "")))
    return "".join(out)


def _pair(r) -> str:
    x = extra(r)
    return f"{short_kind(r['kind'], r.get('policy'))} → {short_kind(x.get('peer_kind', r['kind']), x.get('peer_policy'))}"


def mpi_section(recs) -> str:
    out = []
    for op, title, ylab in (("bw", "window bandwidth (osu_bw)", "GB/s"),
                            ("bibw", "bidirectional bandwidth (osu_bibw)", "GB/s"),
                            ("latency", "latency, half a round trip (osu_latency)", "µs")):
        rs = [r for r in recs if r["op"] == op]
        if not rs:
            continue
        series = OrderedDict()
        for r in rs:
            series.setdefault(_pair(r), []).append(_point(r))
        out.append(line_chart(list(series.items()), f"MPI {title} per kind pair", "message size", ylab,
                              x_fmt=size_tick, y_log=op == "latency", unit=rs[0]["unit"]))
    mbw = [r for r in recs if r["op"] == "mbw"]
    if mbw:
        series = OrderedDict()
        for r in mbw:
            series.setdefault(f"{_pair(r)} · {size_tick(r['bytes'])}", []).append(
                (extra(r).get("active_processes"), r["median"], r["min"], r["max"]))
        out.append(line_chart(list(series.items()), "MPI throughput against processes (k sending pairs at once)",
                              "active processes (2 per pair)", "aggregate GB/s", x_fmt=lambda v: f"{v:g}"))
    first = extra(recs[0]) if recs else {}
    out.append(f"<p class=note>Launched as <code>{e(first.get('launcher'))}</code> ({e(first.get('ranks'))} ranks on "
               f"{e(first.get('hosts'))} host(s), {e(first.get('processes_per_node'))} per node); "
               f"{e(first.get('mpi_library'))}. CUDA-aware: {'yes' if first.get('cuda_aware') else 'no'} "
               f"({e(first.get('cuda_aware_why'))}); where it is not, GPU-only memory is skipped and managed memory "
               "is passed through its host mapping. Window of 64 messages as osu_bw; every received byte was "
               "checked against the sender's pattern.</p>")
    return "".join(out)


def section(bench, recs, fp=None) -> str:
    return nccl_section(recs, fp) if bench == "nccl" else mpi_section(recs)


@family_section("nccl", "mpi")
def _family(bench, recs, page) -> str:
    # NCCL's own table holds every record (with the chart's bound); MPI's records are its records table.
    return section(bench, recs, page.fp) + ("" if bench == "nccl" else records_table(recs))
