"""The pages of bench/seeds.py (issue 40): the published values each figure is compared with (their citation and
the study's machine), why umscope's figure differs from the study's, and one renderer per figure, which turns a
run's records (as `umscope ... --json` and `umscope profile --json` print them) into the page's Markdown and its
SVG charts (umscope.report.svg). Nothing is measured here: bench/seeds.py runs the commands and calls these."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GiB, MiB = 1 << 30, 1 << 20
GEMM_PRECISIONS = ["fp16", "tf32", "fp32", "fp64"]
SCHIEFFER_SIZES = {  # Schieffer et al. Table 2, as umscope's options
    "hotspot": ["--rows", "16384", "--cols", "16384"], "srad": ["--rows", "20000", "--cols", "20000"],
    "pathfinder": ["--rows", "100000", "--cols", "20000"], "needle": ["--n", "32768"],
    "bfs": ["--nodes", "16777216"], "qv": ["--qubits", "30"]}


# ------------------------------------------------------------------ published values


# The one study whose machine is not a GH200 (its citation and machine as its Sec. 2 states them).
COOPER = {"short": "Cooper et al. 2024",
          "cite": "B. Cooper, T. R. W. Scogland, et al., Shared Virtual Memory: Its Design and Performance "
                  "Implications for Diverse Applications (2024)",
          "system": "LLNL Tioga node: AMD EPYC 7A53, 4 x MI250X (one compute die used), ROCm 5.4.0"}


def sources():
    from umscope import inputs
    doc = inputs.read_yaml(ROOT / "python/umscope/reference/gh200.yaml", "published values")
    return dict(doc["sources"], cooper2024=COOPER)


def label(source, figure):
    s = sources()[source]
    return f"{s['short']}, {figure}; {s['system']}"


PAPER_KIND = {"Device": "device", "Device-p": "peer:1", "Managed": "managed", "Pinned": "pinned", "DDR": "system",
              "numa:0": "system"}


def published_fig5() -> dict:
    """{(src kind, dst kind): (GB/s, citation)}: the cells of Fusco et al. Fig. 5 a lent machine has kinds for, from
    reference/gh200.yaml and model/reference/published.yaml (fusco2024_fig5, fusco2024_fig5_more). The study's DDR
    (numa_alloc_onnode) is `system` here: both are system-allocated, which cudaMemcpy copies by its host path."""
    from umscope.compare import load_reference
    from umscope.model import dos
    out = {}
    for v in load_reference(["GH200"]):
        m = v["match"]
        if v["source"] == "fusco2024" and v["figure"] == "Fig. 5":
            out[(PAPER_KIND.get(m["kind"], m["kind"]), PAPER_KIND.get(m["dst_kind"], m["dst_kind"]))] = v["value"]
    pub = dos.published()
    for key in ("fusco2024_fig5", "fusco2024_fig5_more"):
        for c in pub.get(key, {}).get("cells", []):
            out.setdefault((PAPER_KIND.get(c["src"], c["src"]), PAPER_KIND.get(c["dst"], c["dst"])), c["value"])
    return {k: (v, label("fusco2024", "Fig. 5")) for k, v in out.items()}


def published_values(source, figure, benchmark) -> list:
    from umscope.compare import load_reference
    return [dict(v, label=label(source, figure)) for v in load_reference(["GH200"])
            if v["source"] == source and v["figure"] == figure and v["match"]["benchmark"] == benchmark]


FIG15_PLACE = {"HBM": "device", "DDR": "pinned", "HBM-p": "peer:1"}


def published_fig15() -> dict:
    """{(precision, A kind, B kind): TFLOP/s} of Fusco et al. Fig. 15 where C is in HBM; the study's DDR (Grace's
    memory over NVLink-C2C) is compared with `pinned` (host memory over PCIe): an analogue, different in kind."""
    from umscope.model import dos
    t = dos.published()["fusco2024_fig15"]
    out = {}
    for prec in GEMM_PRECISIONS:
        for i, a in enumerate(t["places"]):
            for j, b in enumerate(t["places"]):
                if a in FIG15_PLACE and b in FIG15_PLACE:
                    out[(prec, FIG15_PLACE[a], FIG15_PLACE[b])] = t[prec][i][j]
    return out


# Why umscope's figure differs from the study's, in kind: one sentence per datapath pair, with its source.
WHY = {
    "hbm": ("H100 HBM3 (this GPU's bound is in the record) against GH200's HBM3 at 4000 GB/s "
            "(Fusco et al. Sec. II.A): a difference of GPU model, by measurement"),
    "link": ("PCIe Gen5 x16 (63 GB/s per direction at most) against NVLink-C2C (450 GB/s per direction, Fusco et al. "
             "Sec. II.A): different in kind"),
    "host-copy": ("both are cudaMemcpy's host-based path (system-allocated memory on either side), run by the CPU: "
                  "a Xeon VM's memory copy against Grace's LPDDR5X; different in kind (another CPU)"),
    "peer": ("the peer H100 over NV18: 18 NVLink4 links through NVSwitch between each pair, 450 GB/s per direction "
             "(the probe's bound), against a peer GH200's Hopper over 6 of its 18 NVLink4 links, 150 GB/s per "
             "direction (Fusco et al. Sec. II.A: the links are split equally between the three peers): different "
             "in kind"),
    "peer-host": ("the peer GPU's own PCIe Gen5 x16 link to the host (63 GB/s per direction at most) against the "
                  "study's path from a peer GH200's memory to GH-0's Grace memory, bounded by the 150 GB/s per "
                  "direction between GH200s (NVLink or the Grace interconnect, Fusco et al. Fig. 3): different in "
                  "kind"),
    "managed": ("managed memory already placed on the GPU (both after warm-up): the copy is a device copy, so "
                "HBM against HBM as above"),
    "pingpong-cpu": "a Xeon VM's cores against Grace's Neoverse V2 (another CPU): different in kind",
    "pingpong-gpu": ("two SMs of one GPU with the flag in its memory on both; H100 against GH200's Hopper: by "
                     "measurement"),
    "pingpong-cpu-gpu": ("needs coherent CPU-GPU atomics on one flag, which PCIe without ATS does not give: the "
                         "case is skipped here (GH200 only)"),
}


def why_copy(src, dst):
    host = {"pinned", "system", "hostalloc"}
    if src == "system" and dst in host | {"system"} or dst == "system" and src in host:
        return WHY["host-copy"]
    if src == dst == "peer:1":  # both buffers on GPU 1: a copy within that GPU's memory
        return WHY["hbm"]
    if "peer:1" in (src, dst) and "system" in (src, dst):
        return WHY["peer-host"] + (" (pageable memory: cudaMemcpy stages it through a pinned buffer of the driver's, "
                                   "a CPU copy on top of the link; the study's DDR and Pinned cells to and from a "
                                   "peer are alike)")
    if "peer:1" in (src, dst) and ({src, dst} & host):
        return WHY["peer-host"]
    if "peer:1" in (src, dst):
        return WHY["peer"]
    if "system" in (src, dst):  # pageable memory against GPU memory
        return WHY["link"] + (" (pageable memory: cudaMemcpy stages it through a pinned buffer of the driver's, a "
                              "CPU copy on top of the link)")
    if (src in host) != (dst in host):
        return WHY["link"]
    if src in host and dst in host:
        return WHY["link"] + " (host to host through the GPU's copy engine: both ways over the link)"
    return WHY["managed"] if "managed" in (src, dst) else WHY["hbm"]


# ------------------------------------------------------------------ records and cells


def field(r, key):
    if r.get(key) is not None:
        return r[key]
    ex = r.get("extra")
    return ex.get(key) if isinstance(ex, dict) else None


def ok(r):
    return r is not None and r.get("status") in (None, "ok") and r.get("median") is not None


def num(x):
    if x is None:
        return "—"
    return f"{x:.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def cell(r, unit=True):
    """'55.1 GB/s (54.9–55.2)': a record's median with its min–max; a skip or failure with its reason."""
    if r is None:
        return "not measured"
    if not ok(r):
        return f"{r.get('status')}: {r.get('reason')}"
    spread = f" ({num(r['min'])}–{num(r['max'])})" if r.get("n", 1) and r.get("n", 1) > 1 else ""
    return f"{num(r['median'])}{' ' + r['unit'] if unit and r.get('unit') else ''}{spread}"


def ratio(measured, published):
    return f"{measured / published:.2f}" if measured is not None and published else "—"


def case_params(r) -> dict:
    words = (r.get("case_id") or "").split(" ")
    return dict(w.split("=", 1) for w in words[2:] if "=" in w)


def case_kind(r):
    words = (r.get("case_id") or "").split(" ")
    return words[1] if len(words) > 1 else r.get("kind")


def size_text(n):
    from umscope.sizes import format_size
    return "—" if n is None else format_size(n)


def compare_table(rows) -> list:
    """rows: [(what, umscope record, published value, its unit, citation label, why)] -> markdown lines."""
    out = ["| case | umscope | published | citation (study's machine) | umscope / published | why they differ |",
           "| --- | ---: | ---: | --- | ---: | --- |"]
    for what, r, pub, unit, cite, why in rows:
        m = r["median"] if ok(r) else None
        out.append(f"| {what} | {cell(r)} | {num(pub)} {unit} | {cite} | {ratio(m, pub)} | {why} |")
    return out


# ------------------------------------------------------------------ rendering each figure
# render(data) -> (markdown lines, {svg name suffix: svg text}); data: {"records": {tag: [records]},
# "profiles": {tag: profile entry}, "ctx": header}


def _recs(d, tag=None):
    return [r for t, rs in d["records"].items() if tag is None or t == tag for r in rs]


def render_fig5(d, peer=False):
    from umscope.report import svg
    recs = [r for r in _recs(d) if r.get("benchmark") == "copy"]
    cells = {}
    for r in recs:  # one cell per pair: its largest transfer (a case may hold several sizes; a skip has none)
        key = (case_kind(r), case_params(r).get("dst"))
        if key not in cells or (r.get("bytes") or 0) >= (cells[key].get("bytes") or 0):
            cells[key] = r
    sizes = sorted({r["bytes"] for r in cells.values() if r.get("bytes")})
    kinds = list(dict.fromkeys([s for s, _ in cells] + [t for _, t in cells]))
    lines = ["Copy-engine `cudaMemcpy` throughput, source (row) to destination (column), GB/s: median of the "
             f"repetitions with min–max, {' and '.join(size_text(b) for b in sizes) or 'no'} transfers.", "",
             "| from \\ to | " + " | ".join(f"`{k}`" for k in kinds) + " |", "| --- |" + " ---: |" * len(kinds)]
    for s in kinds:
        lines.append(f"| `{s}` | " + " | ".join(cell(cells.get((s, t)), unit=False) if (s, t) in cells else "—"
                                                  for t in kinds) + " |")
    pub = published_fig5()
    rows = [(f"`{s}` → `{t}`", cells[(s, t)], v, "GB/s", c, above_bound(cells[(s, t)]) or why_copy(s, t))
            for (s, t), (v, c) in sorted(pub.items()) if (s, t) in cells]
    lines += ["", "### Beside the published values", "",
              "The study's Device-p is `peer:1`, its DDR (`numa_alloc_onnode`, system-allocated) is `system` (the "
              "pageable path of `cudaMemcpy` on both machines); its HBM, HBM-p and DDR-p rows (system memory on a "
              "GPU's or another Grace's NUMA node) need ATS and a GH200: not reproducible here. `async`, `vmm` and "
              "`hostalloc` have no published cell.", ""] + compare_table(rows)
    vals = {(s, t): r["median"] for (s, t), r in cells.items() if ok(r)}
    chart = svg.heatmap(kinds, kinds, vals, f"cudaMemcpy GB/s{' (peer cases)' if peer else ''}", "GB/s")
    return lines, {"": chart}


def above_bound(r):
    """Why a copy measured above its record's bound (the datapath umscope assumed from the kinds) differs: by
    measurement, the bytes did not take that path. None when it did not."""
    eff, bound = field(r, "efficiency"), field(r, "bound")
    if not ok(r) or eff is None or not bound or eff <= 1.05:
        return None
    return (f"by measurement: {eff:.2f} times the bound of the path the kinds imply ({num(bound)} GB/s, "
            f"{field(r, 'bound_source')}), so the bytes did not cross it: the managed buffer was in the same GPU's "
            "memory as the other (managed pages move to the GPU that uses them) and the copy ran within one GPU's "
            "HBM, as in the study's cell (HBM speed); H100 HBM3 against GH200's HBM3") \
        if "managed" in (case_kind(r), field(r, "dst_kind")) else \
        (f"by measurement: {eff:.2f} times the bound of the path the kinds imply ({num(bound)} GB/s, "
         f"{field(r, 'bound_source')}): the bytes did not cross it")


def _chase(d, tag=None):
    """{(processor, kind): [(bytes, record)]} of the chase records (the timer records left out)."""
    out = {}
    for r in _recs(d, tag):
        if r.get("benchmark") == "latency" and r.get("op") != "timer" and r.get("bytes"):
            proc = "cpu" if str(r.get("processor", "")).startswith("cpu") else "gpu"
            out.setdefault((proc, case_kind(r)), []).append((r["bytes"], r))
    return {k: sorted(v, key=lambda x: x[0]) for k, v in out.items()}


def _chase_chart(series, d, title):
    from umscope.report import svg
    l2 = (d["ctx"].get("gpu") or {}).get("l2_bytes")
    return svg.line_chart([(f"{p} → {k}", [(b, r["median"], r["min"], r["max"]) for b, r in pts if ok(r)])
                           for (p, k), pts in series.items()], title, "footprint", "ns per access",
                          x_fmt=svg.size_tick, y_log=True, marks=[(l2, "GPU L2")] if l2 else ())


def _chase_table(series):
    sizes = sorted({b for pts in series.values() for b, _ in pts})
    lines = ["| footprint | " + " | ".join(f"{p} → `{k}`" for p, k in series) + " |",
             "| ---: |" + " ---: |" * len(series)]
    for b in sizes:
        lines.append(f"| {size_text(b)} | " + " | ".join(cell(dict(pts).get(b), unit=False) if b in dict(pts) else "—"
                                                         for pts in series.values()) + " |")
    return lines


def render_fig12(d):
    series = _chase(d)
    lines = ["Pointer chase by one thread (random cycle), ns per access, median of the repetitions with min–max; "
             "the dashed line is this GPU's L2 size (probe). The study's Fig. 12 is a plot (Grace and Hopper on "
             "each memory of the quad GH200): its values were not transcribed, so no ratio is given; the Grace "
             "rows and the C2C memories need a GH200, and the CPU row here is another CPU (a Xeon VM).", ""]
    return lines + _chase_table(series), {"": _chase_chart(series, d, "pointer chase against footprint")}


def peer_l2_answer(series, l2):
    """The peer-L2 question from one call's local and peer chase: (text, verdict) or (why not, None)."""
    loc, peer = dict(series.get(("gpu", "device"), [])), dict(series.get(("gpu", "peer:1"), []))
    both = sorted(b for b in set(loc) & set(peer) if ok(loc[b]) and ok(peer[b]))
    if not l2 or not both:
        return "not answered: the local and peer chase did not both run (see Not measured).", None
    inside = [b for b in both if b <= l2 // 2]
    beyond = [b for b in both if b >= 4 * l2]
    if not inside or not beyond:
        return "not answered: no footprint both well inside L2 (at most half of it) and well beyond it (4x).", None
    bi, bo = inside[-1], beyond[-1]
    p_in, p_out, l_in = peer[bi]["median"], peer[bo]["median"], loc[bi]["median"]
    if p_in <= 0.5 * p_out:
        verdict = "yes"
        text = "peer lines are held in this GPU's L2: the chase of peer memory that fits in L2 is at most half " \
               "the chase beyond L2"
    elif p_in >= 0.8 * p_out:
        verdict = "no"
        text = "peer lines are not held in this GPU's L2: the chase of peer memory that fits in L2 costs at least " \
               "0.8 of the chase beyond it"
    else:
        verdict = "partly"
        text = "the chase of peer memory that fits in L2 is between half and 0.8 of the chase beyond it: some " \
               "peer lines are held"
    owner = ""
    if verdict == "no" and bo in loc and ok(loc[bo]) and p_out > p_in:
        owner = (f" The peer chase still steps up by {num(p_out - p_in)} ns from {size_text(bi)} to {size_text(bo)}, "
                 f"as the local chase does from its L2 to its HBM ({num(loc[bo]['median'] - l_in)} ns): the peer "
                 "lines that fit are held in the owning GPU's L2, reached across NVLink, not in the requester's.")
    return (f"**{verdict}** — {text}. Same call, same footprints: peer {size_text(bi)} {num(p_in)} ns against peer "
            f"{size_text(bo)} {num(p_out)} ns, and local {size_text(bi)} {num(l_in)} ns (L2 {size_text(l2)}; the "
            f"thresholds 0.5 and 0.8 are this page's rule, stated before the run).{owner} Fusco et al. (Sec. III.E, "
            "on their Fig. 12) write that Hopper's L2 caches data on HBM, local and peer, and that L2-resident peer "
            "HBM is faster than local DDR; their Fig. 12 is a plot whose values were not transcribed, so no ratio. "
            "Their peer is another GH200's Hopper over 6 NVLink4 links; here another H100 SXM over NV18 through "
            "NVSwitch: different in kind, and a GH200's L2 policy for peer lines need not be an H100's.", verdict)


def render_fig12_peer(d):
    series = _chase(d)
    l2 = (d["ctx"].get("gpu") or {}).get("l2_bytes")
    text, _ = peer_l2_answer(series, l2)
    lines = ["GPU 0 chasing its own memory (`device`) and GPU 1's (`peer:1`, peer access enabled) over the same "
             "footprints, in one call; ns per access.", "", "### Does Hopper's L2 cache peer HBM?", "", text, ""]
    return lines + _chase_table(series), {"": _chase_chart(series, d, "local and peer pointer chase")}


def render_fig13(d, gpus=False):
    from umscope.report import svg
    recs = [r for r in _recs(d) if r.get("benchmark") == "pingpong"]
    lines = ["Round trip of a flag passed by system-scope compare-and-swap, ns, median with min–max.", "",
             "| pair | flag in | umscope |", "| --- | --- | ---: |"]
    vals = {}
    for r in recs:
        p = case_params(r)
        who = p.get("pair", "?") + (f" GPU {p.get('device', 0)} ↔ GPU {p['peer']}" if "peer" in p else "")
        lines.append(f"| {who} | `{case_kind(r)}` | {cell(r)} |")
        if ok(r) and "peer" in p and case_kind(r) == "device":
            a, b = f"GPU {p.get('device', 0)}", f"GPU {p['peer']}"
            vals[(a, b)] = vals[(b, a)] = r["median"]
    charts = {}
    if gpus and vals:
        names = sorted({a for a, _ in vals})
        charts[""] = svg.heatmap(names, names, vals, "ping-pong round trip, flag in the first GPU's memory", "ns",
                                 corner="GPU ↔ GPU")
    elif recs:
        charts[""] = svg.hbar_chart([(f"{case_params(r).get('pair')} {case_kind(r)}", [("round trip", r["median"], r["min"],
                                                                             r["max"])]) for r in recs if ok(r)],
                                    "ns", "ping-pong round trip")
    if not gpus:
        rows = []
        for v in published_values("fusco2024", "Fig. 13", "pingpong"):
            m = v["match"]
            r = next((x for x in recs if case_params(x).get("pair") == m["pair"] and case_kind(x) == m["kind"]
                      and "peer" not in case_params(x)), None)
            key = {"cpu-cpu": "pingpong-cpu", "gpu-gpu": "pingpong-gpu", "cpu-gpu": "pingpong-cpu-gpu"}[m["pair"]]
            rows.append((f"{m['pair']}, flag `{m['kind']}` ({v['what']})", r, v["value"], v["unit"], v["label"],
                         WHY[key]))
        lines += ["", "### Beside the published values", ""] + compare_table(rows)
    else:
        missing = _pairs_not_reached(recs, d["ctx"].get("gpus") or 0)
        if missing:
            lines += ["", "Not reached in this run (see Not measured): " + "; ".join(missing) + "."]
        lines += ["", "The study's cross-GPU cells (Hopper 0 ↔ Hopper 1 with the flag on GH-0) are printed in a "
                  "layout the shared transcription does not keep legibly: not compared, no ratio. Its Hoppers are "
                  "joined by 6 NVLink4 links per pair (Fusco et al. Sec. II.A), these H100s by NV18 through "
                  "NVSwitch: different in kind. `managed` has no cell in the study (its flags are in GH-0's DDR or "
                  "HBM)."]
        if any(case_kind(r) == "pinned" and not ok(r) for r in recs):
            lines[-1] += (" The flag in `pinned` host memory is skipped, a capability: two GPUs' system-scope atomics "
                          "on host memory go over PCIe, which carries no coherent atomics between them without ATS "
                          "(the check counts the concurrent increments kept), while the study's Grace memory is "
                          "coherent over NVLink-C2C.")
    return lines, charts


def _pairs_not_reached(recs, gpus) -> list:
    """The cases across GPUs that umscope plans for this many GPUs (plans.pingpong_cases) with no record."""
    from umscope import plans
    seen = {(case_kind(r), case_params(r).get("device", "0"), case_params(r).get("peer")) for r in recs}
    pairs = [(a, b) for a in range(gpus) for b in range(a + 1, gpus)]
    out = {}
    for c in plans.pingpong_cases({}, pairs=["gpu-gpu"], across=pairs):
        if "peer" in c.params and (c.kind, c.params["device"], c.params["peer"]) not in seen:
            out.setdefault(f"GPU {c.params['device']} ↔ GPU {c.params['peer']}", []).append(f"`{c.kind}`")
    return [f"{pair}, flag in {', '.join(ks)}" for pair, ks in out.items()]


def render_fig14(d):
    from umscope.report import svg
    lines = ["MPI point-to-point bandwidth (`mbw`: k pairs of ranks sending at once, k = 1 to half the ranks, "
             "in one run; host memory, `system`, as the study's DDR), GB/s for the k pairs together, median with "
             "min–max.", "", "| ranks | pairs at once | message | umscope |", "| ---: | ---: | ---: | ---: |"]
    series = {}
    recs = sorted((r for r in _recs(d) if r.get("benchmark") == "mpi"),
                  key=lambda r: (field(r, "pairs") or 0, r.get("bytes") or 0))
    for r in recs:
        k = field(r, "pairs")
        lines.append(f"| {field(r, 'ranks') or '—'} | {k if k is not None else '—'} | {size_text(r.get('bytes'))} | "
                     f"{cell(r)} |")
        if ok(r) and k is not None:
            series.setdefault(f"{k} pair(s)", []).append((r["bytes"], r["median"], r["min"], r["max"]))
    series = list(series.items())
    lines += ["", "The study's Fig. 14 is between two nodes of Alps over the Slingshot network (Cray MPICH, one NIC "
              "per process); this is within one node through shared memory (Open MPI 4.1.6, not CUDA-aware): "
              "different in kind, and the figure is a plot whose values were not transcribed: no ratio."]
    chart = svg.line_chart(series, "MPI bandwidth, 1 to 4 pairs of processes", "message", "GB/s", x_fmt=svg.size_tick)
    return lines, {"": chart}


def _gemm_recs(d):
    """{tag: record} of the gemm runs (the app's one record per command)."""
    out = {}
    for tag, rs in d["records"].items():
        if rs:
            out[tag] = rs[0]
    return out


def _tflops(r):
    g = field(r, "gflops")
    return g / 1e3 if ok(r) and g else None


def _gemm_key(tag):
    w = dict(x.split("=", 1) for x in tag.split(" ") if "=" in x)
    return tag.split(" ")[1], int(w["n"]), w["A"], w["B"], w["C"]


def render_fig15(d, peer=False):
    from umscope.report import svg
    recs = _gemm_recs(d)
    pub = published_fig15()
    lines = ["cuBLAS GEMM, n = 4096, TFLOP/s from the record's median time (later iterations; the first pays for "
             "moving what is not on the GPU), with A, B and C each in a kind.", "",
             "| precision | A | B | C | time (ms) | TFLOP/s |", "| --- | --- | --- | --- | ---: | ---: |"]
    rows, groups = [], {}
    for tag, r in recs.items():
        prec, n, a, b, c = _gemm_key(tag)
        tf = _tflops(r)
        lines.append(f"| {prec} | `{a}` | `{b}` | `{c}` | {cell(r, unit=False)} | {num(tf)} |")
        if tf is not None:
            groups.setdefault(f"A {a}, B {b}, C {c}", []).append((prec, tf, None, None))
        if c == "device" and (prec, a, b) in pub:
            kinds = {a, b}
            why = (WHY["hbm"] if kinds == {"device"} else WHY["peer"] if "peer:1" in kinds
                   else WHY["link"] + " (the study's DDR is Grace's memory; here pinned host memory)")
            rr = dict(r, median=tf, min=None, max=None, unit="TFLOP/s", n=1) if tf is not None else r
            rows.append((f"{prec}, A `{a}`, B `{b}`", rr, pub[(prec, a, b)], "TFLOP/s", label("fusco2024", "Fig. 15"),
                         why + "; the study's matrices are 4 GB, these n = 4096"))
    lines += ["", "### Beside the published values", "",
              "Rows of the study's matrix are where A lives, columns where B lives (as its axis labels are printed), "
              "C in HBM. Its HBM is `device`, HBM-p `peer:1`, DDR (Grace's memory over NVLink-C2C) is compared with "
              "`pinned` (host memory over PCIe); `managed` has no published cell.", ""] + compare_table(rows)
    return lines, {"": svg.hbar_chart(list(groups.items()), "TFLOP/s", "GEMM by placement and precision",
                                      log=True)} if groups else {}


def render_fig16(d):
    from umscope.report import svg
    recs = _gemm_recs(d)
    series = {}
    lines = ["cuBLAS GEMM against the matrix order n, TFLOP/s (record's median time).", "",
             "| precision | A | n | time (ms) | TFLOP/s |", "| --- | --- | ---: | ---: | ---: |"]
    for tag, r in recs.items():
        prec, n, a, b, c = _gemm_key(tag)
        tf = _tflops(r)
        lines.append(f"| {prec} | `{a}` | {n} | {cell(r, unit=False)} | {num(tf)} |")
        if tf is not None:
            series.setdefault(f"{prec}, A {a}", []).append((n, tf))
    lines += ["", "The study's Fig. 16 is a plot (GH200, HBM and C2C memories): not transcribed, no ratio. Its "
              "right panel moves A to DDR over NVLink-C2C; here A moves to pinned host memory over PCIe and to "
              "managed memory (migrated on first touch): different in kind."]
    return lines, {"": svg.line_chart(list(series.items()), "GEMM against size", "n", "TFLOP/s", y_log=True)}


def render_fig17(d, peer=False, split=False):
    from umscope.report import svg
    lines = ["Decoding 100 tokens with models of Llama 2's configurations built with random weights (nothing is "
             "downloaded; the GPU machine has no network), fp16, batch 1; the time per token is the record's.", "",
             "| model | mode (weights) | ms per token | tokens/s | weights read per token (GB/s) |",
             "| --- | --- | ---: | ---: | ---: |"]
    groups = {}
    for tag, rs in d["records"].items():
        r = next((x for x in rs if x.get("op") == "decode"), rs[0] if rs else None)
        if r is None:
            continue
        _, model, mode = tag.split(" ", 2)
        if ok(r) and r.get("unit") == "s":  # seconds per token, shown as ms
            r = dict(r, median=r["median"] * 1e3, min=r["min"] * 1e3, max=r["max"] * 1e3, unit="ms")
        wb = field(r, "weight_bytes")  # every weight is read once per decoded token at batch 1
        rate = wb / (r["median"] * 1e-3) / 1e9 if ok(r) and wb and r.get("unit") == "ms" else None
        lines.append(f"| {model} | {mode} | {cell(r, unit=False)} | {num(field(r, 'tokens_per_s'))} | {num(rate)} |")
        if ok(r):
            groups.setdefault(model, []).append((mode, r["median"], r["min"], r["max"]))
    lines += ["", "The study's Fig. 17 is a plot of the time for 100 tokens (Llama2-7b and -13b from Hugging Face, "
              "PyTorch 2.2, its own allocator: `cudaMallocAsync` below 1 MB, `numa_alloc_onnode` above): not "
              "transcribed, no ratio. The weights read per token are the record's weight bytes over its time per "
              "token (at batch 1 each weight is read once per token). "
              + ("Its peer placement is a peer GH200's memory over 6 NVLink4 links (150 GB/s per direction, Fusco "
                 "et al. Sec. II.A); here GPU 1's HBM read by GPU 0 over NV18 through NVSwitch (450 GB/s per "
                 "direction), the KV cache on GPU 0: different in kind. " if peer else
                 "Its host placement is Grace's DDR over NVLink-C2C; here pinned host memory over PCIe (different "
                 "in kind). ")
              + ("Its allocator split: the weights (each of their blocks is above 1 MB) in pinned host memory, "
                 "the KV cache and activations from a `cudaMallocAsync` pool on the GPU (`--mode mixed --weights "
                 "pinned --cache async`); the study's rule sends every block above 1 MB to host memory, so its KV "
                 "cache blocks above 1 MB were there too. For a user's own program the same split is `umscope "
                 "place --kind pinned --rule '<4M:async'` (place routes PyTorch's segments; its blocks up to 1 MB "
                 "come from 2 MiB segments, larger ones from segments of 20 MiB or more). The rows with every "
                 "block in one kind: fusco-fig17.md." if split else
                 "Its allocator split (`cudaMallocAsync` for the small blocks): fusco-fig17-split.md; here the app's "
                 "allocator places every block in the mode's kind.")]
    return lines, {"": svg.hbar_chart(list(groups.items()), "ms per token", "LLM decode time per token",
                                      log=True)} if groups else {}


def render_fig18(d):
    from umscope.report import svg
    recs = [r for r in _recs(d) if r.get("benchmark") == "nccl"]
    series, lines = {}, ["NCCL in one process over every GPU, bus bandwidth (as nccl-tests), GB/s, median with "
                         "min–max, and the algorithm bandwidth (the buffer's size over the time, the study's "
                         "measure) of the same repetitions; buffers in each GPU's memory (`device`), in pinned "
                         "host memory, or on the next GPU (`peer:1`: rank i's buffers on GPU i+1).", "",
                         "| kind | op | size | busbw | algbw (GB/s) |", "| --- | --- | ---: | ---: | ---: |"]
    for r in recs:
        lines.append(f"| `{case_kind(r)}` | {r.get('op')} | {size_text(r.get('bytes'))} | {cell(r)} | "
                     f"{num(field(r, 'algbw')) if ok(r) else '—'} |")
        if ok(r):
            series.setdefault(f"{r['op']} {case_kind(r)}", []).append((r["bytes"], r["median"], r["min"], r["max"]))
    lines += ["", "The study's Fig. 18 is a plot (four processes on four GH200s, buffers in HBM, DDR and peer "
              "memories): not transcribed, no ratio. Here one process drives the four GPUs. Its host buffers are "
              "Grace's DDR reached over NVLink-C2C (450 GB/s per direction); here pinned memory over each GPU's "
              "PCIe link (63 GB/s per direction at most): different in kind. Its peer buffers are on another GH200, "
              "over 6 NVLink4 links (150 GB/s per direction, Fusco et al. Sec. II.A); here on the next H100 over "
              "NV18 through NVSwitch (450 GB/s per direction), links that NCCL's own traffic also uses: different "
              "in kind. The study finds same-GH200 memory well ahead of peer memory, and HBM and DDR alike "
              "(Sec. IV.C)."]
    big = {}
    for r in recs:
        if ok(r) and r.get("op") == "allreduce" and (r.get("bytes") or 0) >= big.get(case_kind(r), (0, None))[0]:
            big[case_kind(r)] = (r["bytes"], r)
    if "device" in big and big["device"][1]["median"]:
        dev = big["device"][1]["median"]
        lines[-1] += " Here, all-reduce at its largest size: " + ", ".join(
            f"`{k}` {r['median'] / dev:.2f} of `device`" for k, (b, r) in big.items() if k != "device") + \
            " (busbw ratios; the pinned buffers cross PCIe)."
    return lines, {"": svg.line_chart(list(series.items()), "NCCL busbw against size", "size", "GB/s",
                                      x_fmt=svg.size_tick)}


def render_schieffer3(d):
    from umscope.report import svg
    lines = ["Each application at the study's problem size (Table 2) in explicit and managed mode: its time without "
             "the CPU's initialisation of the inputs (the study's convention; the record's `total_excl_init_ms`, "
             "or `total_ms - init_ms`), ms, and the speedup of managed over explicit (explicit / managed).", "",
             "| application | size | explicit (ms) | managed (ms) | speedup |", "| --- | --- | ---: | ---: | ---: |"]
    groups = []
    for tag, rs in d["records"].items():
        app = tag.split(" ")[0]
        by = {}
        for r in rs:
            by.setdefault(field(r, "mode") or case_params(r).get("mode"), r)
        e, m = by.get("explicit"), by.get("managed")
        te, tm = _excl_init(e), _excl_init(m)
        sp = te / tm if te and tm else None
        lines.append(f"| {app} | {' '.join(SCHIEFFER_SIZES.get(app, []))} | {_or_reason(e, te)} | "
                     f"{_or_reason(m, tm)} | {num(sp)} |")
        if sp is not None:
            groups.append((app, [("managed / explicit speedup", sp, None, None)]))
    lines += ["", "The study's Fig. 3 is a plot (GH200): not transcribed, no ratio. Its system-memory version needs "
              "ATS/HMM (`umscope info`: addressing none here): not reproducible. Sizes larger than the GPU's free "
              "memory are refused by umscope (never oversubscribed on a shared GPU) and listed below."]
    return lines, {"": svg.hbar_chart(groups, "x", "managed against explicit")} if groups else {}


def _excl_init(r):
    if not ok(r):
        return None
    t = field(r, "total_excl_init_ms")
    if t is None and field(r, "total_ms") is not None:
        t = field(r, "total_ms") - (field(r, "init_ms") or 0)
    return t


def _or_reason(r, v):
    return num(v) if v is not None else cell(r)


TIMELINE_BUCKETS = 300  # a page's timeline: the min and max sample of each of 300 intervals (report.profile.decimate)


def _mem_series(prof):
    """[(label, [(t, GiB)])] from a profile's sampled memory and cumulative migration records, each thinned as the
    profile report thins its timelines (a 2 s hotspot profile's raw samples made a 3.4 MB SVG)."""
    from umscope.report.profile import decimate
    out = []
    for op, r in sorted(prof.items()):
        if r.get("t") and (op.endswith("_mem_device") or op == "rss" or op.startswith("um_")):
            out.append((op, [(t, v / GiB) for t, v in decimate(r["t"], r["samples"], TIMELINE_BUCKETS)]))
    return out


def render_schieffer45(d):
    from umscope.report import svg
    lines, charts = ["`umscope profile --um-trace` around each program (managed mode): host memory (rss), the "
                     "GPU's used memory and the bytes migrated each way, over time (GiB).", ""], {}
    for tag, p in d["profiles"].items():
        app, prof = p.get("app"), p.get("prof") or {}
        if not prof:
            lines.append(f"- {tag}: {p.get('status', {}).get('status')}: {p.get('status', {}).get('reason')}")
            continue
        um = prof.get("um_trace", {}).get("totals", {})
        lines.append(f"- {tag} ({' '.join(p['program'])}): run {cell(prof.get('run'))}, migrated host→device "
                     f"{num(um.get('htod', 0) / GiB)} GiB, device→host {num(um.get('dtoh', 0) / GiB)} GiB, GPU "
                     f"faults {um.get('gpu_fault', '—')}; the program's record: {cell(app) if app else 'none'}")
        charts["-" + tag] = svg.line_chart(_mem_series(prof), f"memory timeline: {tag}", "seconds", "GiB",
                                           x_log=False)
    lines += ["", "The study's Figs. 4 and 5 are plots (GH200): not transcribed, no ratio; their system-memory "
              "halves need ATS/HMM."]
    return lines, charts


def render_schieffer7(d):
    from umscope.report import svg
    lines = ["Base pages (`page=base`, MADV_NOHUGEPAGE) against transparent huge pages (`page=thp`, MADV_HUGEPAGE) "
             "— the x86 analogue of the study's 4 KB against 64 KB pages —, GB/s or seconds, median with min–max.",
             "", "| family | kind | op | size | umscope |", "| --- | --- | --- | ---: | ---: |"]
    groups = {}
    for tag, rs in d["records"].items():
        for r in rs:
            lines.append(f"| {tag} | `{case_kind(r)}` | {r.get('op')} | {size_text(r.get('bytes'))} | {cell(r)} |")
            if ok(r) and r.get("unit") == "GB/s":
                groups.setdefault(f"{tag} {r.get('op')}", []).append((case_kind(r), r["median"], r["min"], r["max"]))
    lines += ["", "The study's Fig. 7 is a plot of application compute time on GH200 (aarch64 64 KB base pages, "
              "system memory reached by the GPU through ATS): not transcribed, no ratio; the GPU reaching `malloc` "
              "memory needs ATS/HMM, so the GPU side here is registered host memory over PCIe."]
    return lines, {"": svg.hbar_chart(list(groups.items()), "GB/s", "base pages against THP")} if groups else {}


def render_schieffer10(d):
    from umscope.report import svg
    from umscope.report import traffic_figs as tf
    lines, series = ["SRAD 8192 × 8192, 12 iterations: time per iteration (an unprofiled `app run`) and the bytes "
                     "each iteration's kernels read from GPU memory (local) and over PCIe (remote), from "
                     "`umscope profile --counters kernel` (two runs: the link set and the memory set).", ""], []
    for mode in ("managed", "explicit"):
        plain = next(iter(d["records"].get(f"{mode} time", [])), None)
        times = (field(plain, "samples") if ok(plain) else None) or []
        launches = {}
        for cset in ("link", "memory"):
            prof = (d["profiles"].get(f"{mode} {cset}") or {}).get("prof") or {}
            kt = prof.get("kernel_traffic") or {}
            launches[cset] = [(x["kernel"], {k: v for k, v in x.items() if k != "kernel"})
                              for x in kt.get("launch_bytes", [])]
        rows = tf.fig10_rows(times, launches["link"], launches["memory"])
        if not rows:
            lines += [f"{mode}: not measured (see Not measured).", ""]
            continue
        lines += [tf.fig10_markdown(mode, rows), ""]
        series.append((f"{mode} time", [(r["iteration"], r["ms"]) for r in rows if r["ms"] is not None]))
    lines += ["The study's Fig. 10 is a plot (20k × 20k on GH200, counters over NVLink-C2C): not transcribed, no "
              "ratio; its system-memory version needs ATS/HMM."]
    chart = svg.line_chart(series, "SRAD time per iteration", "iteration", "ms", x_log=False) if series else ""
    return lines, {"": chart} if chart else {}


def render_cooper(d):
    from umscope.report import svg
    lines = ["Each application in managed mode, 1 GiB footprint (in memory: no oversubscription on a shared GPU), "
             "under `umscope profile --uvm-events`. Fault density as the study defines it (faults per migration, "
             "Sec. 3.3) from the trace's totals; over time and per allocation (Fig. 9) as GPU faults per MiB "
             "migrated in each of the trace's intervals (the trace keeps bytes, not migration counts, per "
             "interval).", "", "| application | GPU faults | migrations in | MiB in | faults per migration | "
             "driver's queue complete |", "| --- | ---: | ---: | ---: | ---: | --- |"]
    bars, charts = [], {}
    for tag, p in d["profiles"].items():
        um = (p.get("prof") or {}).get("um_trace")
        if not um:
            st = p.get("status") or {}
            lines.append(f"| {tag} | {st.get('status')}: {st.get('reason')} | | | | |")
            continue
        t, ev = um["totals"], um["events"]
        fpm = um.get("faults_per_migration")
        lines.append(f"| {tag} | {t.get('gpu_fault')} | {ev.get('htod')} | {num(t.get('htod', 0) / MiB)} | "
                     f"{num(fpm)} | {(um.get('driver_events') or {}).get('complete')} |")
        if fpm is not None:
            bars.append((tag, [("faults per migration", fpm, None, None)]))
        tk = um.get("tracks") or {}
        if tag in ("triad", "sgemm", "gesummv") and tk.get("allocations"):
            w = tk["width"]
            over_time = {}
            for k, a in enumerate(tk["allocations"]):
                moved = {}
                for bins in a["htod"].values():
                    for i, v in bins:
                        moved[i] = moved.get(i, 0) + v
                pts = [(tk["start"] + (i + 0.5) * w, f / (moved[i] / MiB)) for i, f in a["faults"]
                       if moved.get(i)]
                # Numbered: allocations of one size (triad's three arrays) kept one name, and the last, often one
                # without faults, replaced the others (the H100 page had no per-allocation chart at all).
                name = f"allocation {k + 1} ({size_text(a['bytes'])})" if a["address"] is not None else "other"
                if pts:
                    over_time[name] = pts
            charts["-" + tag] = svg.line_chart(list(over_time.items()), f"{tag}: GPU faults per MiB migrated",
                                               "seconds", "faults per MiB", x_log=False, points_only=True)
    lines += ["", "The study's Figs. 8 and 9 are plots at DOS 109 on an AMD MI250X with SVM: not transcribed, no "
              "ratio; oversubscription and the AMD driver's ranges are not reproducible here."]
    if bars:
        charts[""] = svg.hbar_chart(bars, "faults per migration", "fault density per application")
    return lines, charts


SCALING_OPS = ("read", "write", "copy")


def render_fig8_10(d):
    """Fusco et al. Figs. 8 (read, write) and 10 (copy) against blocks and threads per block, from `umscope bench
    scaling`'s gpu-stream records: a case with `blocks` in its id is the blocks sweep (its threads per block fixed),
    one without is the threads-per-block sweep at the kernel's own full grid (the record's `grid`)."""
    from umscope.report import svg
    by_blocks, by_threads = {}, {}
    for r in _recs(d):
        if r.get("benchmark") != "gpu-stream" or not ok(r) or field(r, "grid") is None:
            continue
        sweep = by_blocks if "blocks" in case_params(r) else by_threads
        x = field(r, "grid") if sweep is by_blocks else field(r, "block")
        sweep.setdefault((case_kind(r), r.get("op")), {})[x] = r
    ops = [o for o in SCALING_OPS if any(op == o for _, op in list(by_blocks) + list(by_threads))]
    kinds = list(dict.fromkeys(k for k, _ in list(by_blocks) + list(by_threads)))
    cols = [(k, o) for k in kinds for o in ops]
    tpb = sorted({field(r, "block") for pts in by_blocks.values() for r in pts.values()})
    lines = ["GPU read, write and copy of 1 GiB arrays (`umscope bench scaling`: the gpu-stream kernels, 16-byte "
             "accesses, four in flight per thread, grid-stride), GB/s counting the bytes each op moves (copy: read "
             "and written), median with min–max. Against the blocks in the grid, at "
             f"{', '.join(str(t) for t in tpb) or '—'} threads per block:", "",
             "| blocks | " + " | ".join(f"{o} `{k}`" for k, o in cols) + " |", "| ---: |" + " ---: |" * len(cols)]
    for b in sorted({b for pts in by_blocks.values() for b in pts}):
        lines.append(f"| {b} | " + " | ".join(cell(by_blocks.get(c, {}).get(b), unit=False)
                                            if b in by_blocks.get(c, {}) else "—" for c in cols) + " |")
    lines += ["", "Against the threads per block, at the kernel's full grid (read: the blocks resident at once, "
              "from the occupancy API; write and copy: one 16-byte element per thread), the grid in brackets:", "",
              "| threads per block | " + " | ".join(f"{o} `{k}`" for k, o in cols) + " |",
              "| ---: |" + " ---: |" * len(cols)]
    for t in sorted({t for pts in by_threads.values() for t in pts}):
        lines.append(f"| {t} | " + " | ".join(
            f"{cell(by_threads[c][t], unit=False)} [{field(by_threads[c][t], 'grid')}]"
            if t in by_threads.get(c, {}) else "—" for c in cols) + " |")
    # The study's only numbers for these kernels: Fig. 7's Hopper on local HBM, idle (the full machine).
    rows = []
    for v in published_values("fusco2024", "Fig. 7", "gpu-stream"):
        m = v["match"]
        pts = by_blocks.get((m["kind"], m["op"]), {})
        best = max(pts.values(), key=lambda r: r["median"]) if pts else None
        if m["kind"] == "device":
            rows.append((f"{m['op']} `device`, the best of the blocks sweep ({field(best, 'grid') if best else '—'} "
                         f"blocks) against {v['what']}", best, v["value"], v["unit"], v["label"], WHY["hbm"]))
    lines += ["", "### Beside the published values", "",
              "The study's Figs. 8 and 10 are plots (Grace and Hopper on each memory of a GH200, blocks of 1024 "
              "threads): not transcribed, so no ratio per point. Its only numbers for these kernels are Fig. 7's, "
              "Hopper on local HBM when idle, set beside the best point of the blocks sweep here:", ""]
    lines += compare_table(rows) if rows else ["No `device` read or write in this run: nothing to set beside them."]
    lines += ["", "Differences in kind: here an H100 SXM (HBM3, 132 SMs) on an x86 host over PCIe, there the "
              "Hopper of a GH200 (HBM3 at 4000 GB/s, Fusco et al. Sec. II.A): HBM against HBM, a difference of GPU "
              "model. The study's blocks have 1024 threads each; this sweep's blocks have 256 (the scaling "
              "family's), and 1024 threads per block is in the second table. The study's memories also include "
              "Grace's LPDDR5X, reached by the Hopper over NVLink-C2C, and Grace's own threads: GH200 only, not "
              "reproducible here (the GPU reaching host memory here is PCIe, `umscope bench scaling --kind "
              "pinned`, not part of this figure's time budget). The study's Fig. 10 copies between its memories "
              "(DDR and HBM of one GH200); here the copy is within the GPU's own memory."]
    charts = {}
    if by_blocks:
        charts[""] = svg.line_chart([(f"{o} {k}", [(b, r["median"], r["min"], r["max"]) for b, r in sorted(pts.items())])
                                     for (k, o), pts in by_blocks.items()], "GPU bandwidth against blocks "
                                    f"({', '.join(str(t) for t in tpb)} threads per block)", "blocks in the grid",
                                    "GB/s", x_fmt=lambda v: f"{v:.0f}", y_log=True)  # 1 block to the full machine: 100x
    if by_threads:
        charts["-threads"] = svg.line_chart(
            [(f"{o} {k}", [(t, r["median"], r["min"], r["max"]) for t, r in sorted(pts.items())])
             for (k, o), pts in by_threads.items()], "GPU bandwidth against threads per block (full grid)",
            "threads per block", "GB/s", x_fmt=lambda v: f"{v:.0f}")
    return lines, charts
