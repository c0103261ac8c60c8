"""The traffic figures of schieffer2024 (Grace Hopper system memory) from hardware counters, as report
sections (HTML, for `umscope profile --counters`) and as Markdown tables (bench/traffic_figs.py's document):
- Fig. 10: per iteration of an iterative application (SRAD), its time and its traffic from local GPU memory
  (dram__bytes_read) and over the host link (PCIe; NVLink-C2C on Grace Hopper), one row per iteration.
- Fig. 12: throughput over time in the three tiers of the memory hierarchy: L1 <-> L2
  (lts__t_sectors_srcunit_tex x 32 B), GPU memory (DRAM read + write) and the host link (PCIe read + write).
Iterations are found in the kernel sequence: an iteration starts at each launch of the kernel that opens
the repeating pattern (the first kernel launched as often as the most frequent one)."""

from umscope.report.common import html_table, num_cell
from umscope.report.svg import line_chart

TIERS = (("L1 <-> L2", ("l1_l2",)), ("GPU memory", ("dram_read", "dram_write")),
         ("host link", ("pcie_read", "pcie_write")))


def opening_kernel(names):
    """The kernel each iteration starts with: of the kernels launched most often, the first launched."""
    if not names:
        return None
    counts = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    most = max(counts.values())
    return next(n for n in names if counts[n] == most) if most > 1 else None


def iterations(launches, opener=None):
    """[(name, {metric: bytes})] in launch order -> (setup bytes, [bytes per iteration]) where each
    iteration sums its launches' bytes from one `opener` launch to the next."""
    opener = opener or opening_kernel([n for n, _ in launches])
    setup, its = {}, []
    for name, b in launches:
        if opener is not None and name == opener:
            its.append({})
        target = its[-1] if its else setup
        for k, v in b.items():
            target[k] = target.get(k, 0.0) + v
    return setup, its


def fig10_rows(times_ms, link_launches, memory_launches):
    """Rows {iteration, ms, local_read, remote_read, remote_write} (bytes) from an unprofiled run's
    per-iteration times and two counter runs (link set, memory set) of the same program."""
    _, link = iterations(link_launches)
    _, mem = iterations(memory_launches)
    n = max(len(times_ms or []), len(link), len(mem))
    rows = []
    for i in range(n):
        g = lambda lst, k: lst[i].get(k) if i < len(lst) else None  # noqa: E731
        rows.append({"iteration": i + 1, "ms": times_ms[i] if times_ms and i < len(times_ms) else None,
                     "local_read": g(mem, "dram_read"), "local_write": g(mem, "dram_write"),
                     "remote_read": g(link, "pcie_read"), "remote_write": g(link, "pcie_write")})
    return rows


def tiers(series):
    """hwcounters.series() output -> {tier: [(t, bytes/s)]} summing each tier's metrics point by point."""
    out = {}
    for tier, names in TIERS:
        parts = [series[n] for n in names if n in series]
        if not parts:
            continue
        n = min(len(p) for p in parts)
        out[tier] = [(parts[0][j][0], sum(p[j][1] for p in parts)) for j in range(n)]
    return out


def tier_summary(tier_series, busy=0.05):
    """Per tier: mean and peak GB/s over the busy part of the run (points where L1 <-> L2, else the tier
    itself, is above `busy` of its peak), and the seconds that part lasted."""
    ref = tier_series.get("L1 <-> L2") or next(iter(tier_series.values()), [])
    if not ref:
        return {}
    top = max(v for _, v in ref) or 1.0
    keep = {t for t, v in ref if v > busy * top}
    out = {}
    for tier, pts in tier_series.items():
        sel = [v for t, v in pts if t in keep]
        if sel:
            out[tier] = {"mean_gbps": sum(sel) / len(sel) / 1e9, "peak_gbps": max(sel) / 1e9, "points": len(sel)}
    return out


def _g(v, scale=1e9, fmt="{:.3f}"):
    return "" if v is None else fmt.format(v / scale)


def fig10_markdown(label, rows) -> str:
    lines = [f"| {label}: iteration | time ms | local read GB | local write GB | remote read GB | remote write GB |",
             "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['iteration']} | {_g(r['ms'], 1, '{:.2f}')} | "
                     f"{_g(r['local_read'])} | {_g(r['local_write'])} | {_g(r['remote_read'])} | "
                     f"{_g(r['remote_write'])} |")
    return "\n".join(lines)


def fig10_html(label, rows) -> str:
    if not rows:
        return ""
    table = html_table(
        [f"{label}: iteration", "time ms", "local read GB", "local write GB", "remote read GB", "remote write GB"],
        [[r["iteration"], num_cell(_g(r["ms"], 1, "{:.2f}"))]
         + [num_cell(_g(r[k])) for k in ("local_read", "local_write", "remote_read", "remote_write")] for r in rows])
    chart = line_chart([(f"{label}: local read (GB)", [(r["iteration"], (r["local_read"] or 0) / 1e9) for r in rows]),
                        (f"{label}: remote read (GB)", [(r["iteration"], (r["remote_read"] or 0) / 1e9)
                                                        for r in rows])],
                       f"{label}: traffic per iteration (cf. schieffer2024 Fig. 10, bottom)", "iteration", "GB",
                       x_log=False, x_fmt=lambda v: f"{v:.0f}", height=260)
    return table + chart


def fig12_html(label, tier_series) -> str:
    if not tier_series:
        return ""
    return line_chart([(f"{k} (GB/s)", [(t, v / 1e9) for t, v in pts]) for k, pts in tier_series.items()],
                      f"{label}: throughput in three tiers (cf. schieffer2024 Fig. 12)", "seconds", "GB/s",
                      x_log=False, x_fmt=lambda v: f"{v:.3g}", height=300)


def fig12_markdown(label, summary) -> str:
    lines = [f"| {label}: tier | mean GB/s (busy part) | peak GB/s | samples |", "|---|---:|---:|---:|"]
    for tier, s in summary.items():
        lines.append(f"| {tier} | {s['mean_gbps']:.1f} | {s['peak_gbps']:.1f} | {s['points']} |")
    return "\n".join(lines)
