"""The HTML report of one run: machine, per-benchmark charts and tables,
every skipped or failed case with its reason. Self-contained: one file, CSS
inline, plots as inline SVG, no scripts, no external URLs; every string
from the store is escaped."""

import time
from collections import OrderedDict
from html import escape
from pathlib import Path

from umscope import verify
from umscope.probe import cuda_version_text
import json

from umscope.report import headline, modelled, topology
from umscope.report.svg import hbar_chart, heatmap, line_chart, size_tick
from umscope.sizes import format_size

SPREAD_FLAG = 0.05  # (max - min) / median above this is flagged

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:28px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
.flag{color:#b00;font-weight:bold}.skipped{color:#666}.failed,.timeout,.refused{color:#b00}
.note{color:#555;font-size:13px}svg.chart{display:block;margin:10px 0}
"""


def e(x) -> str:
    return escape("" if x is None else str(x))


def kind_label(r) -> str:
    """'kind [policy]', and for copies '-> dst [policy]' and the route of a two-way copy."""
    x = r.get("extra") or {}
    label = r["kind"] + (f" [{r['policy']}]" if r.get("policy") else "")
    if x.get("dst_kind"):
        label += f" → {x['dst_kind']}" + (f" [{x['dst_policy']}]" if x.get("dst_policy") else "")
        if x.get("direction") == "bidir":
            label += f" (both ways: {x.get('route')})"
    return label


def _machine(fp) -> str:
    if not fp:
        return "<p>No machine fingerprint stored.</p>"
    rows = []
    host, cpu, cuda = fp.get("host", {}), fp.get("cpu", {}), fp.get("cuda", {})
    rows.append(("Host", f"{host.get('hostname')} — {host.get('os')}, kernel {host.get('kernel')}"))
    rows.append(("CPU", f"{cpu.get('model')} ({cpu.get('arch')}), {cpu.get('logical_cpus')} logical CPUs, "
                        f"{cpu.get('sockets')} socket(s)"))
    caches = ", ".join(f"L{c['level']} {c['type']} {format_size(c['bytes'])}" for c in cpu.get("caches", []))
    rows.append(("CPU caches", caches or "unknown"))
    rows.append(("Memory", f"page size {host.get('page_size')} B, THP {host.get('thp')}, "
                           f"MemTotal {format_size(host.get('memory', {}).get('MemTotal', 0) or 1)}"))
    numa = "; ".join(f"node {n['id']}: {format_size(n['mem_bytes'] or 1)}, {len(n['cpus'])} CPUs"
                     for n in fp.get("numa", []))
    rows.append(("NUMA", numa or "no NUMA information"))
    rows.append(("CUDA", f"runtime {cuda_version_text(cuda.get('runtime_version'))}, driver "
                         f"{cuda.get('driver') or cuda_version_text(cuda.get('driver_version'))}"))
    for g in fp.get("gpus", []):
        link = g.get("link") or {}
        pcie = (f"PCIe gen {link.get('pcie_gen_current')} x{link.get('pcie_width_current')} now, "
                f"gen {link.get('pcie_gen_max')} x{link.get('pcie_width_max')} max") if link else "link unknown"
        rows.append((f"GPU {g['device']}", f"{g['name']} (cc {g['compute_capability']}), {g['sms']} SMs, "
                     f"{format_size(g['total_mem'])}, L2 {format_size(g['l2_bytes'])}, {pcie}, bus {g['pci_bus_id']}"))
        attrs = ["managed_memory", "concurrent_managed_access", "pageable_memory_access",
                 "pageable_memory_access_uses_host_page_tables", "host_native_atomics",
                 "direct_managed_access_from_host", "can_use_host_pointer_for_registered_mem"]
        rows.append((f"GPU {g['device']} unified memory",
                     f"addressing: {g['addressing']}; " + ", ".join(f"{a}={int(bool(g.get(a)))}" for a in attrs)
                     + f", numa_id={g.get('numa_id')}"))
    if not fp.get("gpus"):
        rows.append(("GPU", f"none: {cuda.get('why_no_gpu')}"))
    return "<table>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in rows) + "</table>"


def _bound_cells(r) -> str:
    x = r.get("extra") or {}
    if not x.get("bound"):
        return f"<td colspan=3 class=note>{e(x.get('bound_note', ''))}</td>"
    src = x.get("bound_source") or "source not recorded (older store)"
    return (f"<td class=num>{x['bound']:.4g}</td><td class=num>{100 * x.get('efficiency', 0):.0f}%</td>"
            f"<td>{e(x.get('datapath'))} <span class=note>({e(src)})</span></td>")


def _records_table(recs) -> str:
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
            f"{' ⚠' if flag else ''}</td>{_bound_cells(r)}</tr>")
    return "<table>" + head + "".join(rows) + "</table>"


def _chart(bench, recs) -> str:
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


def _short_kind(kind, policy) -> str:
    """The kind and any policy other than the default first touch by the CPU."""
    policy = ",".join(p for p in (policy or "").split(",") if p and p != "first_touch=cpu")
    return kind + (f" [{policy}]" if policy else "")


def _copy_section(recs) -> str:
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
            src, dst = _short_kind(r["kind"], r.get("policy")), _short_kind(x.get("dst_kind", "?"), x.get("dst_policy"))
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
        label = f"{r['op']} {_short_kind(r['kind'], r.get('policy'))} → " \
                f"{_short_kind(x.get('dst_kind', '?'), x.get('dst_policy'))}"
        series.setdefault(label, []).append((r["bytes"], r["median"], r["min"], r["max"]))
    if series:
        out.append(line_chart(list(series.items()), "host-link copies: bandwidth against size (one way)",
                              "bytes per copy", "GB/s", x_fmt=size_tick, height=380))
    return "".join(out)


def _scaling_section(recs) -> str:
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


def _contention_section(recs) -> str:
    """One row per case: each side alone and under the other's load, and their sum."""
    by_case = OrderedDict()
    for r in recs:
        by_case.setdefault(r["case_id"], []).append(r)
    rows = []
    for case_id, rs in by_case.items():
        def pick(proc_cpu, loaded, op_sum=False):
            for r in rs:
                x = r.get("extra") or {}
                if op_sum != (r["op"] == "sum"):
                    continue
                if not op_sum and (r["processor"] == "cpu") != proc_cpu:
                    continue
                if op_sum or (x.get("load") != "none") == loaded:
                    return r
            return None
        g0, g1, c0, c1, s = pick(False, False), pick(False, True), pick(True, False), pick(True, True), \
            pick(False, False, True)
        if not (g0 and g1 and c0 and c1 and s):
            continue

        def cell(a, b):
            change = (b["median"] / a["median"] - 1) * 100 if a["median"] else 0
            return (f"<td class=num>{a['median']:.4g}</td><td class=num>{b['median']:.4g}</td>"
                    f"<td class=\"num{' flag' if change < -10 else ''}\">{change:+.0f}%</td>")
        alone_sum = (s.get("extra") or {}).get("alone_median") or 0
        rows.append(f"<tr><td>{e(g0['op'])} of {e(kind_label(g0))}</td><td>{e(c0['op'])} of {e(kind_label(c0))}, "
                    f"{e(c0['threads'])} thr</td>{cell(g0, g1)}{cell(c0, c1)}"
                    f"<td class=num>{alone_sum:.4g}</td><td class=num>{s['median']:.4g}</td></tr>")
    if not rows:
        return ""
    return ("<table><tr><th rowspan=2>GPU load</th><th rowspan=2>CPU load</th><th colspan=3>GPU GB/s</th>"
            "<th colspan=3>CPU GB/s</th><th colspan=2>sum GB/s</th></tr><tr><th>alone</th><th>with CPU</th>"
            "<th>change</th><th>alone</th><th>with GPU</th><th>change</th><th>alone</th><th>together</th></tr>"
            + "".join(rows) + "</table><p class=note>Medians. “with CPU” is the GPU measured while the CPU "
            "threads stream at the same time, and the reverse; the sum adds the two sides' medians measured "
            "together. A fall of more than 10% is flagged.</p>")


def _cache_marks(fp, processor) -> list:
    """Cache capacities to mark on a latency curve, from the machine's own description."""
    fp = fp or {}
    if processor.startswith("gpu"):
        gpus = fp.get("gpus") or []
        if not gpus:
            return []
        g = next((x for x in gpus if x.get("device") == fp.get("device", 0)), gpus[0])  # the GPU under test
        marks = []
        if g.get("shared_per_sm"):
            marks.append((g["shared_per_sm"], f"L1/shared per SM {size_tick(g['shared_per_sm'])}"))
        if g.get("l2_bytes"):
            marks.append((g["l2_bytes"], f"L2 {size_tick(g['l2_bytes'])}"))
        return marks
    out = []
    for c in (fp.get("cpu") or {}).get("caches", []):
        if c.get("type") in ("Data", "Unified") and c.get("bytes"):
            out.append((c["bytes"], f"L{c['level']} {size_tick(c['bytes'])}"))
    return out


def _latency_section(recs, fp) -> str:
    out = []
    timers = [r for r in recs if r["op"] == "timer"]
    chase = [r for r in recs if r["op"] == "chase"]
    for proc in sorted({r["processor"] for r in chase}):
        series = OrderedDict()
        for r in chase:
            if r["processor"] == proc:
                series.setdefault(kind_label(r), []).append((r["bytes"], r["median"], r["min"], r["max"]))
        who = "GPU (one thread)" if proc.startswith("gpu") else "CPU (one thread)"
        out.append(line_chart(list(series.items()), f"{who}: load-to-use latency against footprint, {proc}",
                              "footprint (random cycle, 128-byte slots)", "ns per load", y_log=True,
                              x_fmt=size_tick, marks=_cache_marks(fp, proc), height=380))
    if timers:
        t = timers[0]
        x = t.get("extra") or {}
        out.append(f"<p class=note>GPU clocks: the SM cycle counter ran at {t['median']:.0f} MHz against the global "
                   f"timer (min {t['min']:.0f}, max {t['max']:.0f}; the device reports a "
                   f"{e(x.get('clock_rate_attr_mhz'))} MHz clock); the global timer advanced in steps of "
                   f"{e(x.get('globaltimer_step_ns'))} ns. Cache marks come from the device properties (the "
                   f"L1 mark is the shared-memory capacity of an SM, the most its L1 can be) and from sysfs.</p>")
    rows = "".join(
        f"<tr><td>{e(r['processor'])}</td><td>{e(kind_label(r))}</td><td class=num>{e(size_tick(r['bytes']))}</td>"
        f"<td class=num>{r['median']:.4g}</td><td class=num>{r['min']:.4g}</td><td class=num>{r['max']:.4g}</td>"
        f"<td class=\"num{' flag' if (r.get('spread') or 0) > SPREAD_FLAG else ''}\">{100 * (r.get('spread') or 0):.1f}%</td>"
        f"<td class=num>{e(_num((r.get('extra') or {}).get('cycles')))}</td><td>{e((r.get('extra') or {}).get('residency', ''))}"
        f"</td></tr>" for r in chase)
    out.append("<table><tr><th>processor</th><th>kind [policy]</th><th>footprint</th><th>ns median</th><th>min</th>"
               "<th>max</th><th>spread</th><th>cycles</th><th>residency</th></tr>" + rows + "</table>")
    return "".join(out)


def _num(v) -> str:
    return "" if v is None else f"{v:.4g}"


def _pingpong_section(recs, cases) -> str:
    """A matrix: memory kind by pair of agents; a cell holds the median round trip or why it did not run."""
    pairs = ["cpu-gpu", "gpu-gpu", "cpu-cpu"]
    kinds, cell = [], {}
    for c in cases:
        if c["benchmark"] != "pingpong":
            continue
        p = json.loads(c["params"]) if isinstance(c.get("params"), str) else (c.get("params") or {})
        key = (c["kind"], p.get("pair"))
        kinds += [c["kind"]] if c["kind"] not in kinds else []
        if c["status"] != "ok":
            cell[key] = f"<td class=\"{e(c['status'])}\">{e(c['status'])}: {e(c['reason'])}</td>"
    for r in recs:
        x = r.get("extra") or {}
        flag = (r.get("spread") or 0) > SPREAD_FLAG
        cell[(r["kind"], x.get("pair"))] = (
            f"<td class=\"num{' flag' if flag else ''}\">{_ns(r['median'])}<br><span class=note>{_ns(r['min'])}–"
            f"{_ns(r['max'])}, n={e(r['n'])}{' ⚠' if flag else ''}</span></td>")
        kinds += [r["kind"]] if r["kind"] not in kinds else []
    rows = "".join(f"<tr><th>{e(k)}</th>" + "".join(cell.get((k, p), "<td class=note>not run</td>") for p in pairs)
                   + "</tr>" for k in kinds)
    return ("<table><tr><th>flag in</th>" + "".join(f"<th>{p}</th>" for p in pairs) + "</tr>" + rows +
            "</table><p class=note>Round trip of a flag advanced in turn by system-scope compare-and-swap (median "
            "over repetitions of 10<sup>4</sup> exchanges, min–max below). Before timing, both agents add to a "
            "shared counter at once; a pair that loses increments is skipped with that finding.</p>")


def _ns(v) -> str:
    """A time in ns, or µs / ms when that reads better."""
    if v >= 1e6:
        return f"{v / 1e6:.3g} ms"
    if v >= 1e4:
        return f"{v / 1e3:.3g} µs"
    return f"{v:.4g} ns"


def _bw_latency_chart(records) -> str:
    """The study's Fig. 2: every processor-memory pair that has both a read bandwidth and a latency
    beyond the caches, as one point."""
    lat, bw = {}, {}
    for r in records:
        key = (r["processor"], r["kind"], r.get("policy") or "")
        if r["benchmark"] == "latency" and r["op"] == "chase":
            if key not in lat or r["bytes"] > lat[key][0]:
                lat[key] = (r["bytes"], r["median"])
        elif r["benchmark"] in ("gpu-stream", "cpu-stream") and r["op"] == "read":
            if not (r.get("params") or {}).keys() & {"blocks", "block"}:
                bw[key] = max(bw.get(key, 0), r["median"])
    series = [(f"{p} → {k}" + (f" [{pol}]" if pol else ""), [(lat[(p, k, pol)][1], bw[(p, k, pol)])])
              for (p, k, pol) in lat if (p, k, pol) in bw]
    if not series:
        return ""
    return ("<h2 id=bandwidth-latency>Bandwidth against latency</h2>" +
            line_chart(series, "read bandwidth against latency (largest chased footprint)", "latency (ns per load)",
                       "read bandwidth (GB/s)", x_log=True, y_log=True, points_only=True, height=420))


def _migration_section(recs) -> str:
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
                                      height=400))
    rows = []
    for r in plain:
        x = r.get("extra") or {}
        touch = x.get("cpu_touch") if x.get("cpu_touch") not in (None, "none") else ""
        rows.append(f"<tr><td>{e(r['op'])}</td><td>{e(kind_label(r))}</td><td>{e(touch)}</td>"
                    f"<td class=num>{e(size_tick(r['bytes']))}</td><td class=num>{e(x.get('trial', 0))}</td>"
                    f"<td class=num>{_num(x.get('first'))}</td><td class=num>{_num(x.get('steady'))}</td>"
                    f"<td class=num>{r['min']:.4g}</td><td class=num>{r['max']:.4g}</td>"
                    f"<td class=num>{e(x.get('iterations'))}</td><td>{e(x.get('residency', ''))}</td>{_bound_cells(r)}</tr>")
    if rows:
        out.append("<table><tr><th>op</th><th>kind [policy]</th><th>CPU writes between</th><th>size</th><th>trial</th>"
                   "<th>first GB/s</th><th>steady GB/s</th><th>min</th><th>max</th><th>iterations</th><th>residency</th>"
                   "<th>bound</th><th>of bound</th><th>limit</th></tr>" + "".join(rows) + "</table><p class=note>"
                   "first = the first iteration; steady = median of the second half of the iterations.</p>")
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


def _g(v) -> str:
    """Three significant digits, without exponents for large values."""
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _um_findings(records) -> str:
    """The studies' qualitative unified-memory findings, each checked against this run's own numbers.
    Nothing here is a number from a paper: the verdict compares two of our measurements."""
    def find(bench, op, kind, pred=lambda r: True):
        return next((r for r in records if r["benchmark"] == bench and r["op"] == op and
                     _short_kind(r["kind"], r.get("policy")) == kind and pred(r)), None)
    items = []
    x = lambda r: r.get("extra") or {}  # noqa: E731
    od = next((r for r in records if r["benchmark"] == "migration" and r["kind"] == "managed" and
               (r.get("policy") or "") == "first_touch=cpu" and x(r).get("cpu_touch", "none") == "none"
               and "dos" not in x(r)), None)
    if od and x(od).get("first") and x(od).get("steady"):
        ratio = x(od)["steady"] / x(od)["first"]
        items.append((ratio > 5, f"On-demand migration (managed, first touched by the CPU, {size_tick(od['bytes'])}): "
                      f"the first GPU pass ran at {_g(x(od)['first'])} GB/s and later passes at "
                      f"{_g(x(od)['steady'])} GB/s ({ratio:.0f}×)", "the first iteration pays for migration and later "
                      "ones run from GPU memory (Hanawa et al.; Schieffer et al. §2.3)"))
    gpu_ft = find("firsttouch", "first-touch", "managed", lambda r: x(r).get("by") == "gpu")
    cpu_ft = find("firsttouch", "first-touch", "managed", lambda r: x(r).get("by") == "cpu")
    if gpu_ft and cpu_ft and od and x(od).get("first") and gpu_ft["bytes"] == cpu_ft["bytes"] == od["bytes"]:
        cpu_path = cpu_ft["median"] + od["bytes"] / (x(od)["first"] * 1e9) * 1e3
        items.append((gpu_ft["median"] < cpu_path, f"Managed memory initialised by the GPU took "
                      f"{_g(gpu_ft['median'])} ms; initialised by the CPU and then migrated by the GPU's first "
                      f"pass, {_g(cpu_path)} ms", "GPU-side initialisation of managed memory is much shorter "
                      "(Schieffer et al. §5.1.2)"))
    base = find("firsttouch", "free", "system [page=base]")
    thp = find("firsttouch", "free", "system [page=thp]")
    if base and thp and base["bytes"] == thp["bytes"]:
        items.append((thp["median"] < base["median"], f"Freeing {size_tick(base['bytes'])} of system memory took "
                      f"{_g(base['median'])} ms with base pages and {_g(thp['median'])} ms with transparent huge "
                      f"pages", "larger system pages make de-allocation much cheaper (Schieffer et al. §5.2, "
                      "64 KB against 4 KB pages on Grace; here x86 base pages against 2 MiB THP)"))
    pf = next((r for r in records if r["benchmark"] == "migration" and "prefetch_gbps" in x(r)), None)
    if pf:
        items.append((None, f"A prefetch to the GPU moved {size_tick(pf['bytes'])} at {_g(x(pf)['prefetch_gbps'])} "
                      f"GB/s; the first GPU pass after it ran at {_g(x(pf)['first'])} GB/s", ""))
    if not items:
        return ""
    li = []
    for ok, what, study in items:
        verdict = "" if ok is None else ("<b>agrees</b> with the finding that " if ok else
                                          "<b class=flag>differs</b> from the finding that ")
        li.append(f"<li>{e(what)}{'. ' + verdict + e(study) if study else ''}.</li>")
    return ("<h2 id=um-findings>Unified-memory findings, checked on this machine</h2><ul>" + "".join(li) +
            "</ul><p class=note>Each line compares two measurements of this run; the studies are cited for "
            "the qualitative finding only.</p>")


def _firsttouch_section(recs) -> str:
    groups = OrderedDict()
    for r in recs:
        x = r.get("extra") or {}
        label = (f"{r['kind']}{' [' + r['policy'] + ']' if r.get('policy') else ''} · by {x.get('by')}"
                 f"{' · CPU pre-touch' if x.get('pretouch') == 'cpu' else ''} · {size_tick(r['bytes'])}")
        groups.setdefault(label, []).append((r["op"], r["median"], r["min"], r["max"]))
    return hbar_chart(list(groups.items()), "ms", "allocation, first touch, second touch and free (ms, log scale; "
                                                  "bars median, whiskers min–max)", log=True)


def _faults_section(recs) -> str:
    rows = "".join(
        f"<tr><td>{e(r['processor'])}</td><td>{e(kind_label(r))}</td><td>{e(r['op'])}</td>"
        f"<td class=num>{e(size_tick((r.get('extra') or {}).get('stride', 0)))}</td>"
        f"<td class=num>{e((r.get('extra') or {}).get('pages'))}</td><td class=num>{r['median']:.4g}</td>"
        f"<td class=num>{r['min']:.4g}</td><td class=num>{r['max']:.4g}</td>"
        f"<td class=num>{_num((r.get('extra') or {}).get('pages_per_s'))}</td>"
        f"<td class=num>{_num((r.get('extra') or {}).get('gbps_of_strides'))}</td></tr>" for r in recs)
    return ("<table><tr><th>processor</th><th>kind [policy]</th><th>mode</th><th>stride</th><th>pages</th>"
            "<th>µs per page</th><th>min</th><th>max</th><th>pages/s</th><th>GB/s of strides</th></tr>" + rows +
            "</table><p class=note>One byte touched per stride of memory the other processor placed: a page "
            "fault (and a migration, where the kind migrates) per stride. Serial: one thread, pages in order "
            "(fault latency); parallel: all pages at once (fault throughput).</p>")


def _interleave_section(recs) -> str:
    series = OrderedDict()
    for r in recs:
        x = r.get("extra") or {}
        series.setdefault(f"{kind_label(r)} · CPU writes {x.get('cpu_write')}", []).append(
            (x.get("gpu_writes"), r["median"], r["min"], r["max"]))
    return line_chart(list(series.items()), "time per GPU write after a CPU write, against GPU writes in a row",
                      "GPU writes after each CPU write (N)", "ms per GPU write", y_log=True,
                      x_fmt=lambda v: f"{v:.0f}", height=380) + _records_table(recs)


def _qv_section(recs) -> str:
    """Time per circuit and per layer by mode and width; initialisation against computation (the GH200
    study's Fig. 9); the state's footprint; the bandwidth each gate reached."""
    circuits = [r for r in recs if r["op"] == "circuit"]
    gates = {(r["case_id"], (r.get("extra") or {}).get("qubits")): r for r in recs if r["op"] == "gate"}
    phases = ["alloc_ms", "init_ms", "prefetch_ms", "transfer_ms", "compute_ms", "measure_ms", "back_ms", "free_ms"]
    groups = OrderedDict()
    rows = []
    for r in circuits:
        x = r.get("extra") or {}
        label = f"{x.get('mode')} · init {x.get('init')} · {x.get('qubits')} qubits · {x.get('precision')}"
        groups[label] = [(p[:-3], x[p], None, None) for p in phases if x.get(p)]
        g = gates.get((r["case_id"], x.get("qubits"))) or {}
        gx = g.get("extra") or {}
        rows.append(f"<tr><td>{e(x.get('mode'))}</td><td>{e(x.get('init'))}</td><td class=num>{e(x.get('qubits'))}</td>"
                    f"<td>{e(x.get('precision'))}</td><td class=num>{e(size_tick(r['bytes']))}</td>"
                    f"<td class=num>{_num(x.get('total_ms'))}</td><td class=num>{_num(x.get('init_ms'))}</td>"
                    f"<td class=num>{_num(x.get('compute_ms'))}</td><td class=num>{r['median']:.4g}</td>"
                    f"<td class=num>{_num(gx.get('gate_ms'))}</td><td class=num>{_num(g.get('median'))}</td>"
                    f"<td class=num>{(100 * gx['efficiency']) if gx.get('efficiency') else 0:.0f}%</td>"
                    f"<td class=num>{_num(x.get('fidelity'))}</td></tr>")
    out = []
    if groups:
        out.append(hbar_chart(list(groups.items()), "ms", "Quantum Volume: time by phase (ms, log scale)", log=True))
    out.append("<table><tr><th>mode</th><th>init</th><th>qubits</th><th>precision</th><th>state</th><th>total ms</th>"
               "<th>init ms</th><th>compute ms</th><th>ms per layer</th><th>ms per gate</th><th>gate GB/s</th>"
               "<th>of bound</th><th>fidelity</th></tr>" + "".join(rows) + "</table><p class=note>A gate reads and "
               "writes the whole state once, so gate GB/s = 2 × state / time per gate, against the memory's bound. "
               "Fidelity is against the CPU reference (double precision), where checked.</p>")
    return "".join(out)


APP_PHASES = ["context_ms", "alloc_ms", "init_ms", "transfer_ms", "compute_ms", "back_ms", "free_ms"]


def _app_label(x) -> str:
    label = x.get("app", "?")
    if label == "gemm":
        label = f"gemm {x.get('precision')}" + (" panels" if x.get("variant") == "panels" else "")
        places = [f"{m}={x.get('place_' + m)}" for m in "abc" if x.get("place_" + m) not in (None, "mode")]
        if places:
            label += " " + ",".join(places)
    if x.get("reverse"):
        label += " reversed"
    return label


def _apps_section(recs) -> str:
    """Which memory mode wins for which application (the study's Fig. 3): speedup of each mode over explicit,
    the phases, per-iteration times, and GEMM placement."""
    from umscope.apps import MODES
    x = lambda r: r.get("extra") or {}  # noqa: E731
    by = OrderedDict()
    for r in recs:
        by.setdefault(_app_label(x(r)), {})[x(r).get("mode")] = r
    modes = [m for m in MODES + ["cpu"] if any(m in d for d in by.values())]
    speed, comp = {}, {}
    for label, d in by.items():
        base = d.get("explicit")
        for m, r in d.items():
            comp[(label, m)] = r["median"]
            if base:
                speed[(label, m)] = x(base)["total_excl_init_ms"] / x(r)["total_excl_init_ms"]
    out = []
    if speed:
        out.append(heatmap(list(by), modes, speed, "speedup over explicit (whole run without the CPU's "
                           "initialisation; >1: faster)", "×", cell_w=104, corner="app ↓ mode →"))
    out.append(heatmap(list(by), modes, comp, "computation: median time per iteration (ms)", "ms", cell_w=104,
                       corner="app ↓ mode →"))
    rows = []
    for label, d in by.items():
        for m in modes:
            r = d.get(m)
            if not r:
                continue
            xr = x(r)
            rate = (f"{xr['bandwidth_gbps']:.4g} GB/s" if xr.get("bandwidth_gbps") else "") + (
                f" {xr['gflops']:.4g} GFLOP/s" if xr.get("gflops") else "")
            if xr.get("edges") and xr.get("compute_ms"):
                rate = f"{xr['edges'] / (xr['compute_ms'] * 1e-3) / 1e9:.3g} GTEPS"
            check = verify.method(r)
            rows.append(f"<tr><td>{e(label)}</td><td>{e(m)}</td><td class=num>{e(size_tick(r['bytes']))}</td>"
                        + "".join(f"<td class=num>{_num(xr.get(p))}</td>" for p in APP_PHASES)
                        + f"<td class=num>{_num(xr.get('total_ms'))}</td><td class=num>{_num(xr.get('total_excl_init_ms'))}"
                        f"</td><td class=num>{e(xr.get('iterations'))}</td><td class=num>{r['median']:.4g}"
                        f"{' ⚠' if (r.get('spread') or 0) > SPREAD_FLAG else ''}</td><td>{e(rate.strip())}</td>"
                        f"<td>{e(check)} <code>{e(xr.get('checksum', ''))}</code></td></tr>")
    out.append("<table><tr><th>application</th><th>mode</th><th>arrays</th>" + "".join(
        f"<th>{p[:-3]} ms</th>" for p in APP_PHASES) + "<th>total ms</th><th>total without init ms</th>"
        "<th>iterations</th><th>ms per iteration</th><th>rate</th><th>verified by</th></tr>" + "".join(rows) +
        "</table><p class=note>Phases: context = the first CUDA call; transfer = explicit copies, prefetch or "
        "advice; back = copies to the host and the CPU reading every result (the checksum). Speedups follow "
        "the studies' convention of leaving out the CPU's initialisation of the inputs. Rates use the least "
        "traffic (or the operation count) of one iteration over its median time. A run whose result differed "
        "from the CPU reference is a failed case (see the end of the report). After the cases ran, the suite "
        "compares every mode's checksum with the explicit mode's of the same application and parameters: a "
        "disagreeing case is failed; agreeing records are verified 'cross-mode-checksum'. Each application "
        "is also checked against its CPU reference once per run at a small footprint ('cpu-reference').</p>")
    charts = []
    for label, d in by.items():
        series = [(m, list(enumerate(x(r).get("samples") or r.get("samples") or [], 1))) for m, r in d.items()]
        series = [(m, pts) for m, pts in series if len(pts) > 1]
        if series:
            charts.append(line_chart(series, f"{label}: time per iteration (ms)", "iteration", "ms", x_log=False,
                                     y_log=True, x_fmt=lambda v: f"{v:g}", height=240))
    if charts:
        out.append("<details><summary>Per-iteration times of the iterative applications (first iterations "
                   "show migration and first-touch costs)</summary>" + "".join(charts) + "</details>")
    gemm = [r for r in recs if x(r).get("app") == "gemm"]
    if gemm:
        grow = "".join(
            f"<tr><td>{e(x(r).get('precision'))}</td><td>{e(x(r).get('mode'))}</td>"
            + "".join(f"<td>{e(x(r).get('place_' + m))}</td>" for m in "abc")
            + f"<td class=num>{e(x(r).get('m'))}×{e(x(r).get('n_cols'))}×{e(x(r).get('k'))}</td>"
            f"<td class=num>{r['median']:.4g}</td><td class=num>{(x(r).get('gflops') or 0) / 1e3:.4g}</td></tr>"
            for r in gemm)
        out.append("<h3>GEMM placement</h3><table><tr><th>precision</th><th>mode</th><th>A</th><th>B</th><th>C</th>"
                   "<th>m×n×k</th><th>ms per GEMM</th><th>TFLOP/s</th></tr>" + grow + "</table><p class=note>"
                   "\"mode\": the matrix follows the run's memory mode. Bytes crossing the link are measured by "
                   "<code>umscope profile --um-trace</code> for managed placements.</p>")
    return "".join(out)


def _profile_section(recs) -> str:
    """The memory-use timeline (the GH200 study's Figs. 4-5), utilisation and power, and the run."""
    run = next((r for r in recs if r["op"] == "run"), None)
    x = lambda r: r.get("extra") or {}  # noqa: E731
    series = [r for r in recs if x(r).get("t")]
    um = next((r for r in recs if r["op"] == "um_trace"), None)
    ux = x(um) if um else {}
    same_clock = ux.get("clock") == "program"
    # NVTX ranges the program emitted: a mark where each starts (and instant marks), on every timeline.
    marks = [(a, n) for n, a, _ in ux.get("ranges") or [] if a is not None] + [
        (t, n) for n, t in ux.get("instants") or [] if t is not None]
    out = []
    mem = [(f"{r['op']}" + (" (device minus baseline)" if r["op"].endswith("_mem_device") else ""),
            [(t, v / 2**20) for t, v in zip(x(r)["t"], x(r)["samples"])]) for r in series if r["unit"] == "bytes"]
    if mem:
        out.append(line_chart(mem, "memory use over time (MiB)", "seconds since the start", "MiB", x_log=False,
                              x_fmt=lambda v: f"{v:.3g}", height=340, marks=marks if same_clock else ()))
    other = [(f"{r['op']} ({r['unit']})", list(zip(x(r)["t"], x(r)["samples"]))) for r in series
             if r["unit"] in ("%", "W")]
    if other:
        out.append(line_chart(other, "GPU utilisation (%) and power (W) over time", "seconds since the start",
                              "% or W", x_log=False, x_fmt=lambda v: f"{v:.3g}", height=300,
                              marks=marks if same_clock else ()))
    axis = "seconds since the start" if same_clock else "seconds since the trace started"
    moved = [(r["op"].replace("_cumulative", ""), [(t, v / 2**20) for t, v in zip(x(r)["t"], x(r)["samples"])])
             for r in series if r["unit"] == "B"]
    if moved:
        out.append(line_chart(moved, "unified memory moved over time (cumulative MiB, CUPTI)", axis, "MiB",
                              x_log=False, x_fmt=lambda v: f"{v:.3g}", height=300, marks=marks))
        out.append("<p class=note>Migrations the driver reports, not all data moved: see the table below.</p>")
    per_alloc = []
    for a in ux.get("allocation_timelines") or []:
        name = f"0x{a['address']:x} ({size_tick(a['bytes'])})"
        per_alloc.append((name + " in", [(t, v / 2**20) for t, v in zip(a["t"], a["in"])]))
        if any(a["out"]):
            per_alloc.append((name + " out", [(t, v / 2**20) for t, v in zip(a["t"], a["out"])]))
    if per_alloc:
        out.append(line_chart(per_alloc, "migration (in: to the GPU) and eviction (out) by allocation, cumulative "
                              "MiB", axis, "MiB", x_log=False, x_fmt=lambda v: f"{v:.3g}", height=320,
                              marks=marks))
    if ux.get("ranges"):
        out.append("<table><tr><th>NVTX range</th><th>start s</th><th>end s</th><th>seconds</th></tr>" + "".join(
            f"<tr><td>{e(n)}</td><td class=num>{_num(a)}</td><td class=num>{_num(b)}</td>"
            f"<td class=num>{_num(b - a) if a is not None and b is not None else 'not closed'}</td></tr>"
            for n, a, b in ux["ranges"]) + "</table>")
    if um:
        tot, ev = ux.get("totals") or {}, ux.get("events") or {}
        cause = lambda d: ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in (ux.get("by_cause") or {}).get(d, {}).items())  # noqa: E731
        from umscope.report.um_caveats import CAVEATS
        items = [("host → device", f"{tot.get('htod', 0) / 2**20:.1f} MiB in {ev.get('htod', 0)} transfers ({cause('htod')})",
                  CAVEATS["htod"]),
                 ("device → host", f"{tot.get('dtoh', 0) / 2**20:.1f} MiB in {ev.get('dtoh', 0)} transfers ({cause('dtoh')})",
                  CAVEATS["dtoh"]),
                 ("GPU page faults", f"{tot.get('gpu_fault', 0)} (" + ", ".join(
                     f"{k} {v}" for k, v in (ux.get("faults_by_access") or {}).items()) + ")", CAVEATS["gpu_fault"]),
                 ("CPU page faults", str(tot.get("cpu_fault", 0)), CAVEATS["cpu_fault"]),
                 ("thrashing / throttling / remote maps",
                  f"{tot.get('thrashing', 0)} / {tot.get('throttling', 0)} / {tot.get('remote_map', 0)}", CAVEATS["other"]),
                 ("faults per migration", _num(ux.get("faults_per_migration")) or "no migrations", CAVEATS["derived"]),
                 ("eviction-to-migration ratio", _num(ux.get("eviction_to_migration")) or "no migrations",
                  CAVEATS["derived"]),
                 ("kernels, copies, allocations", f"{ux.get('kernels')} kernels ({_num(ux.get('kernel_s'))} s), "
                  f"{(ux.get('memcpy_bytes') or 0) / 2**20:.1f} MiB copied, {ux.get('allocations_made')} allocations", "")]
        for a in ux.get("allocations") or []:
            items.append((f"allocation 0x{a['address']:x} ({size_tick(a['bytes'])})",
                          f"{a['htod'] / 2**20:.1f} MiB in, {a['dtoh'] / 2**20:.1f} MiB out",
                          "migrations the driver reports for this allocation (see host → device)"))
        if not ux.get("trace_complete"):
            items.append(("trace", "ended early: the program died before CUPTI's last flush", ""))
        out.append("<table><tr><th>unified memory (CUPTI)</th><th>total</th><th>what the driver reports, and what "
                   "it does not</th></tr>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td><td class=note>{e(c)}</td></tr>"
                                                      for k, v, c in items) + "</table>")
    from umscope.report.link_traffic import section as counter_section  # hardware counters beside the trace
    out.append(counter_section(recs))
    rows = "".join(
        f"<tr><td>{e(r['op'])}</td><td>{e(r['processor'])}</td><td class=num>"
        f"{(r['max'] / 2**20 if r['unit'] == 'bytes' else r['max']):.4g}</td><td class=num>"
        f"{(r['median'] / 2**20 if r['unit'] == 'bytes' else r['median']):.4g}</td>"
        f"<td>{'MiB' if r['unit'] == 'bytes' else e(r['unit'])}</td><td class=num>{e(r['n'])}</td>"
        f"<td class=note>{e(x(r).get('source', ''))}</td></tr>" for r in recs if r["op"] not in ("run", "um_trace")
        and r["unit"] != "B")
    out.append("<table><tr><th>series</th><th>processor</th><th>peak (total for energy)</th><th>median</th><th>unit</th>"
               "<th>samples</th><th>source</th></tr>" + rows + "</table>")
    if run:
        rx = x(run)
        out.append(f"<p class=note>Command <code>{e(rx.get('command'))}</code>: exit status {e(rx.get('exit_status'))}"
                   f"{' (' + e(rx['signal']) + ')' if rx.get('signal') else ''}, {run['median']:.3g} s, "
                   f"{e(rx.get('samples_taken'))} samples every {1e3 * (rx.get('period_s') or 0):g} ms; the sampler "
                   f"used {100 * (rx.get('sampler_overhead') or 0):.2f}% of the run's wall time in CPU time."
                   + "".join(f"<br>Note: {e(n)}" for n in rx.get("notes") or []) + "</p>")
    return "".join(out)


def _bench_section(bench, recs, fp=None, cases=()) -> str:
    if bench == "profile":
        return _profile_section(recs)
    if bench == "qv":
        return _qv_section(recs)
    if bench == "llm":
        from umscope.report.llm import section
        return section(recs, fp) + _records_table(recs)
    if bench == "applications":
        return _apps_section(recs)
    if bench == "migration":
        return _migration_section(recs)
    if bench == "firsttouch":
        return _firsttouch_section(recs) + _records_table(recs)
    if bench == "faults":
        return _faults_section(recs)
    if bench == "interleave":
        return _interleave_section(recs)
    if bench == "latency":
        return _latency_section(recs, fp)
    if bench == "pingpong":
        return _pingpong_section(recs, cases)
    if bench in ("nccl", "mpi"):
        from umscope.report import scaleout
        return scaleout.section(bench, recs, fp) + _records_table(recs)
    if bench == "gpu-stream":
        scaling = [r for r in recs if {"blocks", "block"} & set(r.get("params") or {})]
        plain = [r for r in recs if r not in scaling]
        parts = []
        if plain:
            parts += [_chart(bench, plain), _records_table(plain)]
        if scaling:
            parts += ["<h3>Scaling</h3>", _scaling_section(scaling), _records_table(scaling)]
        return "".join(parts)
    if bench == "copy":
        return _copy_section(recs) + _records_table(recs)
    if bench == "contention":
        return _contention_section(recs) + _records_table(recs)
    return _chart(bench, recs) + _records_table(recs)


def render(run, cases, records) -> str:
    params = {c["case_id"]: json.loads(c["params"]) if isinstance(c.get("params"), str) else (c.get("params") or {})
              for c in cases}
    ok = [dict(r, params=params.get(r.get("case_id"), {})) for r in records
          if r["status"] == "ok" and r["median"] is not None]
    by_bench = OrderedDict()
    for r in ok:
        by_bench.setdefault("applications" if r["op"] == "app" else r["benchmark"], []).append(r)
    counts = OrderedDict()
    for c in cases:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run["started"])) if run.get("started") else "?"
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>umscope report — run {e(run['id'])}"
             f"</title><style>{_CSS}</style></head><body>",
             f"<h1>umscope report — run {e(run['id'])} ({e(run['kind'])})</h1>",
             f"<p class=note>Started {e(started)}, status <b>{e(run['status'])}</b>. Command: <code>{e(run['command'])}"
             f"</code><br>Cases: " + ", ".join(f"{e(v)} {e(k)}" for k, v in counts.items()) +
             ". Every figure below was measured in this run; each section says how its data was verified. "
             f"Spread = (max − min) / median over the repetitions; above {SPREAD_FLAG:.0%} it is flagged ⚠.</p>",
             headline.section(ok), "<h2>Machine</h2>", _machine(run.get("fingerprint")),
             topology.section(run.get("fingerprint"), ok)]
    if any(c["benchmark"] == "pingpong" for c in cases):
        by_bench.setdefault("pingpong", [])  # its matrix shows skipped pairs too
    for bench, recs in by_bench.items():
        parts.append(f"<h2 id=\"{e(bench)}\">{e(bench)}</h2>")
        parts.append(f"<p class=note>{e(verify.describe_methods(recs) or 'No records.')}</p>")
        parts.append(_bench_section(bench, recs, run.get("fingerprint"), cases))
    from umscope import conditions
    parts.append("<h2 id=conditions>Conditions of the measurements</h2>" + conditions.report_html(ok, e))
    parts.append(_um_findings(ok))
    parts.append(_bw_latency_chart(ok))
    parts.append(modelled.section(ok, run.get("fingerprint")))  # report/modelled.py: apart, labelled
    bad = [c for c in cases if c["status"] != "ok"]
    parts.append("<h2>Skipped and failed cases</h2>")
    if bad:
        parts.append("<table><tr><th>case</th><th>status</th><th>reason</th></tr>" + "".join(
            f"<tr><td>{e(c['case_id'])}</td><td class=\"{e(c['status'])}\">{e(c['status'])}</td>"
            f"<td>{e(c['reason'])}</td></tr>" for c in bad) + "</table>")
    else:
        parts.append("<p>None: every case ran.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(store, run_id, path=None) -> Path:
    run = store.run(run_id)
    html = render(run, store.cases(run["id"]), store.records(run["id"]))
    out = Path(path) if path else store.path.parent / "reports" / f"run-{run['id']}.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out
