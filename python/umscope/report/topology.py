"""The node's topology: the link between every GPU pair (type, NVLink count or PCIe
common ancestor, P2P capabilities) with the bandwidth measured over it in the run,
each GPU's local CPUs and NUMA node, and what GPU-local placement changed. Used by
`umscope info` (text) and the HTML report (a section)."""

from collections import OrderedDict

from umscope.model import bounds
from umscope.report.common import cell, e, html_table, num_cell, th
from umscope.report.registry import page_section
from umscope.sizes import format_size

TITLE = "Topology"


def ranges(cpus) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    cpus = sorted(cpus or [])
    out, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(f"{cpus[i]}-{cpus[j]}" if j > i else f"{cpus[i]}")
        i = j + 1
    return ",".join(out)


def link_text(pair) -> str:
    """'NV18 (NVLink 4.0, direct)', 'PCIe (PCIe host bridge)' or 'unknown'."""
    if not pair:
        return "unknown"
    if pair.get("type") == "NVLink":
        gen = pair.get("nvlink_generation") or "?"
        return f"NV{pair.get('nvlinks')} (NVLink {gen}, {pair.get('via')})"
    if pair.get("type") == "PCIe":
        return f"PCIe ({pair.get('via')})"
    return "unknown (NVML unavailable)"


def p2p_text(pair) -> str:
    caps = dict(pair.get("p2p") or {})
    cuda = pair.get("cuda_p2p") or {}
    if not caps and cuda:
        caps = {"access": cuda.get("access"), "atomics": cuda.get("atomics")}
    yes = [k for k, v in caps.items() if v]
    no = [k for k, v in caps.items() if v is False]
    if not yes and not no:
        return "P2P unknown"
    return "P2P " + (", ".join(yes) or "none") + (f" (not: {', '.join(no)})" if no else "")


def _pairs(fp):
    return {(p["a"], p["b"]): p for p in (fp.get("topology") or {}).get("pairs", [])}


def text_lines(fp) -> list:
    """What `umscope info` prints about the topology."""
    topo = fp.get("topology") or {}
    lines = []
    for g in topo.get("gpus", []):
        cpus = ranges(g.get("cpus")) if g.get("cpus") else "unknown"
        node = g.get("numa_node") if g.get("numa_node") is not None else "unknown"
        lines.append(f"GPU {g['device']} local CPUs {cpus}, NUMA node {node}"
                     + (f" ({g['source']})" if g.get("source") else ""))
    for (a, b), p in sorted(_pairs(fp).items()):
        bound = bounds.peer_link(fp, a, b)
        anc = (p.get("common_ancestor") or {}).get("text")
        lines.append(f"GPU {a} -> GPU {b}: {link_text(p)}; {p2p_text(p)}"
                     + (f"; common ancestor {anc}" if anc else "")
                     + (f"; bound {bound[0]:g} GB/s per direction ({bound[1]})" if bound else ""))
    if topo.get("why_no_nvml"):
        lines.append(f"NVML unavailable: {topo['why_no_nvml']}")
    return lines


def _extra(r):
    return r.get("extra") or {}


def _field(r, key):
    """A record field from its own column or its extra fields (records from the store keep
    benchmark-specific fields under 'extra')."""
    return r.get(key) if r.get(key) is not None else _extra(r).get(key)


def measured(records) -> dict:
    """{(a, b, engine): best GB/s} of data moved from GPU a's memory to GPU b's, one way, over the run's
    copy records (the GPU under test issues the copy; the peer's memory is peer:N)."""
    best = {}
    for r in records:
        if r.get("benchmark") != "copy" or _field(r, "direction") != "uni" or r.get("unit") != "GB/s":
            continue
        dev, src, dst = _field(r, "device"), r.get("kind") or "", _field(r, "dst_kind") or ""
        if dev is None:
            continue
        if src == "device" and dst.startswith("peer:"):
            a, b = dev, int(dst[5:])
        elif src.startswith("peer:") and dst == "device":
            a, b = int(src[5:]), dev
        else:
            continue
        engine = "CE" if (r.get("op") or "").startswith("ce") else "SM"
        key = (a, b, engine)
        if r.get("median") is not None and r["median"] > best.get(key, 0):
            best[key] = r["median"]
    return best


def _placement_rows(records):
    """Same measurement under several placements: {(benchmark, op, kind, dst, bytes): {placement: (median, cpus, node)}}."""
    groups = OrderedDict()
    for r in records:
        pl = _field(r, "placement")
        if pl is None or r.get("median") is None:
            continue
        key = (r.get("benchmark"), r.get("op"), r.get("processor"), r.get("kind"), _field(r, "dst_kind"),
               r.get("bytes"), _field(r, "route"))
        groups.setdefault(key, {})[pl] = (r["median"], r.get("unit"), _field(r, "cpu_set"), _field(r, "numa_node"))
    return OrderedDict((k, v) for k, v in groups.items() if len(v) > 1)


def section(fp, records) -> str:
    """The report's topology section: '' where there is nothing to show (one GPU, no placement sweep)."""
    fp = fp or {}
    topo = fp.get("topology") or {}
    gpus = topo.get("gpus") or []
    pairs = _pairs(fp)
    best = measured(records)
    placed = _placement_rows(records)
    if len(gpus) < 2 and not placed and not any(g.get("cpus") for g in gpus):
        return ""
    out = [f"<h2 id=topology>{TITLE}</h2>"]
    if len(gpus) >= 2:
        devs = [g["device"] for g in gpus]
        rows = []
        for a in devs:
            cells = []
            for b in devs:
                if a == b:
                    cells.append("—")
                    continue
                p = pairs.get((a, b))
                bound = bounds.peer_link(fp, a, b)
                got = [f"{eng} {best[(a, b, eng)]:.4g} GB/s" for eng in ("CE", "SM") if (a, b, eng) in best]
                eff = ""
                if bound and (a, b, "CE") in best:
                    eff = f" ({100 * best[(a, b, 'CE')] / bound[0]:.0f}% of {bound[0]:g})"
                cells.append(cell(html=f"{e(link_text(p))}<br><span class=note>{e(p2p_text(p or {}))}</span><br>"
                                       f"{e(', '.join(got) or 'not measured in this run')}{e(eff)}"))
            rows.append([th(f"GPU {a}")] + cells)
        out.append(html_table(["from \\ to"] + [f"GPU {d}" for d in devs], rows))
        srcs = sorted({bounds.peer_link(fp, a, b)[1] for (a, b) in pairs if bounds.peer_link(fp, a, b)})
        out.append("<p class=note>Link type and count from NVML (NVLink state and remote device per link, "
                   "or the PCIe common ancestor); measured: the best one-way copy of this run from the row GPU's "
                   "memory into the column GPU's, by copy engines (CE) and by SMs. Bound per direction: "
                   + e("; ".join(srcs) or "unknown") + ".</p>")
        choice = (fp.get("pair_choice") or {}).get("note")
        if choice:  # the default suite measured representative pairs (plans.representative_pairs)
            out.append(f"<p class=note>Across GPUs this run measured representative pairs: {e(choice)}.</p>")
    if gpus:
        out.append("<h3>GPU ↔ CPU locality</h3>" + html_table(
            ["GPU", "PCI bus", "NUMA node", "local CPUs", "NVLinks", "source"],
            [[str(g["device"]), str(g.get("pci_bus_id")),
              str(g.get("numa_node") if g.get("numa_node") is not None else "unknown"),
              ranges(g.get("cpus")) if g.get("cpus") else "unknown", num_cell(str(g.get("nvlinks", 0))),
              g.get("source") or ""] for g in gpus]))
    if placed:
        rows = []
        for (bench, op, proc, kind, dst, nbytes, route), by in placed.items():
            what = f"{bench} {op} {proc} {kind}" + (f" → {dst}" if dst else "") + (f" ({route})" if route else "")
            cells = []
            for pl in ("none", "local", "remote"):
                if pl in by:
                    med, unit, cpus, node = by[pl]
                    cells += [num_cell(f"{med:.4g} {unit}"), str(cpus),
                              str(node if node is not None and node >= 0 else "default")]
                else:
                    cells.append(cell("not run or skipped", "note", colspan=3))
            rows.append([f"{what} {format_size(nbytes) if nbytes else ''}"] + cells)
        out.append("<h3>Placement</h3>" + html_table(
            ["measurement"] + [h for p in ("none", "local", "remote") for h in (p, "CPUs", "node")], rows,
            "The same case with the process unpinned (none), pinned to the GPU's local CPUs with host memory "
            "bound to its NUMA node (local), and on another socket (remote; skipped, with the reason, on a "
            "one-socket host)."))
    return "\n".join(out)


@page_section("topology", TITLE, order=30)
def _page(page) -> str:
    return section(page.fp, page.records)
