"""The profile family (`umscope profile`): the memory-use timeline (the GH200 study's Figs. 4-5), utilisation
and power, unified memory moved (CUPTI) with what the driver's counts leave out, NVTX ranges, and the run."""

from umscope.report.common import cell, e, html_table, num, num_cell, th
from umscope.report.registry import family_section
from umscope.report.svg import line_chart, size_tick, timeline


def _secs(v) -> str:
    """A time axis's tick: the nice tick values in full (a 1.5 ms burst at 0.47 s has ticks 0.4725, 0.473, ...,
    which three digits printed as 0.473 twice)."""
    return f"{v:.6g}"


SAMPLES_DRAWN = 600  # points per sampled series on the page: min and max of each interval beyond that
CAUSE_COLOURS = {"prefetch": "#2ca02c", "coherence": "#1f77b4", "on-demand": "#1f77b4", "eviction": "#d62728",
                 "speculative": "#ff7f0e", "thrashing": "#8c564b"}


def decimate(ts, vs, n=SAMPLES_DRAWN) -> list:
    """(t, v) points of a sampled series, at most about 2n: where longer, the min and the max of each of n equal
    time intervals, in time order, so peaks survive and the page's size does not grow with the run's length."""
    pts = list(zip(ts, vs))
    if len(pts) <= 2 * n:
        return pts
    lo, hi = pts[0][0], pts[-1][0]
    width = (hi - lo) / n or 1.0
    buckets = {}
    for t, v in pts:
        buckets.setdefault(min(n - 1, int((t - lo) / width)), []).append((t, v))
    out = []
    for i in sorted(buckets):
        b = buckets[i]
        mn, mx = min(b, key=lambda p: p[1]), max(b, key=lambda p: p[1])
        out += sorted({mn, mx})
    return out


def _mib(v) -> str:
    return f"{v / 2**30:.2f} GiB" if v >= 2**30 else f"{v / 2**20:.1f} MiB"


def quoted_totals(ux) -> tuple:
    """(htod bytes, dtoh bytes, source, why) of the figures to quote where CUPTI's records and the driver disagree:
    the driver's event queue read with nothing dropped, else the driver's own counters (lossless totals read at
    exit), else CUPTI's records (which may hold only a share: see the table)."""
    tot = ux.get("totals") or {}
    if ux.get("migrations_source") == "the driver's events":
        return (tot.get("htod", 0), tot.get("dtoh", 0), "the driver's events",
                "every migration the driver made, nothing dropped (--uvm-events)")
    drv = (ux.get("driver_counters") or {}).get("all")
    if drv and (drv.get("htod") or drv.get("dtoh")):
        return (drv.get("htod", 0), drv.get("dtoh", 0), "the driver's counters",
                "the UVM driver's own totals, read at exit, count every byte; CUPTI's records can be dropped")
    return tot.get("htod", 0), tot.get("dtoh", 0), "CUPTI's records", "the only source this run read"


def answer(recs, run_id=None) -> str:
    """The page's first line: bytes migrated and how, faults, evictions, and the next step."""
    um = next((r for r in recs if r["op"] == "um_trace"), None)
    run = next((r for r in recs if r["op"] == "run"), None)
    rx = (run or {}).get("extra") or {}
    head = (f"<code>{e(rx.get('command'))}</code> ran {run['median']:.3g} s, exit status {e(rx.get('exit_status'))}"
            if run else "")
    if not um:
        return (f"<p class=answer><b>Answer:</b> {head}. No unified-memory trace was taken: "
                "<code>umscope profile --um-trace</code> (or <code>--uvm-events</code>) records migrations and faults."
                "</p>")
    ux = um.get("extra") or {}
    htod, dtoh, src, why = quoted_totals(ux)
    tot = ux.get("totals") or {}
    causes = (ux.get("by_cause") or {}).get("htod") or {}
    how = ", ".join(f"{k} {_mib(v)}" for k, v in sorted(causes.items(), key=lambda kv: -kv[1]))
    text = (f"<p class=answer><b>Answer:</b> {head}. It migrated <b>{_mib(htod)}</b> to the GPU"
            + (f" ({e(how)} in CUPTI's records)" if how else "")
            + f" and <b>{_mib(dtoh)}</b> back (evictions and CPU access), with <b>{tot.get('gpu_fault', 0)}</b> GPU page "
            f"faults and {tot.get('cpu_fault', 0)} CPU page faults; figures from {e(src)} ({e(why)}).")
    cupti = (tot.get("htod", 0), tot.get("dtoh", 0))
    if src != "CUPTI's records" and cupti != (htod, dtoh):
        text += (f" CUPTI's records say {_mib(cupti[0])} in and {_mib(cupti[1])} out: quote {e(src)}, which does not "
                 "drop events.")
    text += (" Next step: <code>umscope advise --trace FILE</code> on this program's trace (or "
             "<code>umscope advise APP --footprint SIZE</code>) for the memory mode and hints it predicts.</p>")
    return text


def extent(recs) -> tuple:
    """(0, end) in seconds: one time axis for every chart of the page (the run's wall time, or the latest point)."""
    x = lambda r: r.get("extra") or {}  # noqa: E731
    ends = [max(x(r)["t"]) for r in recs if x(r).get("t")]
    run = next((r for r in recs if r["op"] == "run"), None)
    if run:
        ends.append(run["median"])
    um = next((r for r in recs if r["op"] == "um_trace"), None)
    tk = x(um).get("tracks") if um else None
    if tk:
        ends.append(tk["start"] + tk["width"] * tk["bins"])
    return 0.0, max(ends or [1.0])


def timeline_lanes(ux) -> list:
    """The lanes of the timeline: kernels and copies per GPU, NVTX ranges, then per allocation the bytes migrated
    per interval (in, stacked by cause; out) and the GPU page faults per interval."""
    tk = ux.get("tracks") or {}
    lanes = []
    for g, spans in sorted((tk.get("kernels") or {}).items()):
        n = sum(s[2] for s in spans)
        lanes.append((f"{g} kernels", "spans", [(a, b, f"{name} ({k} kernel{'s' if k > 1 else ''}, {b - a:.3g} s)")
                                               for a, b, k, name, _ in spans], f"{n} kernels"))
    for g, spans in sorted((tk.get("copies") or {}).items()):
        lanes.append((f"{g} copies", "spans", [(a, b, f"{way} {_mib(nb)} ({k} copies)") for a, b, k, way, nb in spans],
                      _mib(sum(s[4] for s in spans))))
    ranges = [(a, b, n) for n, a, b in ux.get("ranges") or [] if a is not None and b is not None]
    if ranges:
        lanes.append(("NVTX ranges", "spans", ranges, f"{len(ranges)} ranges"))
    t0, w = tk.get("start", 0.0), tk.get("width", 0.0)
    for al in tk.get("allocations") or []:
        name = f"0x{al['address']:x} ({size_tick(al['bytes'])})" if al.get("address") is not None else "other"
        stack, bars = {}, []
        for cause, bins in sorted((al.get("htod") or {}).items()):
            for i, v in bins:
                base = stack.get(i, 0)
                bars.append((t0 + i * w, t0 + (i + 1) * w, v, CAUSE_COLOURS.get(cause, "#1f77b4"), base))
                stack[i] = base + v
        if bars:
            lanes.append((f"{name} in", "bars", bars, f"peak {_mib(max(stack.values()))}/interval"))
        out = {}
        for bins in (al.get("dtoh") or {}).values():
            for i, v in bins:
                out[i] = out.get(i, 0) + v
        if out:
            lanes.append((f"{name} out", "bars", [(t0 + i * w, t0 + (i + 1) * w, v, "#d62728") for i, v in out.items()],
                          f"peak {_mib(max(out.values()))}/interval"))
        if al.get("faults"):
            lanes.append((f"{name} faults", "bars", [(t0 + i * w, t0 + (i + 1) * w, v, "#7f7f7f")
                                                     for i, v in al["faults"]],
                          f"peak {max(v for _, v in al['faults'])}/interval"))
    return lanes


def charts(recs) -> str:
    """The answer, then one time axis for every chart: the timeline (kernels, copies, NVTX ranges, and per
    allocation migrations by cause and faults per interval), memory use, utilisation and power; then the tables."""
    run = next((r for r in recs if r["op"] == "run"), None)
    x = lambda r: r.get("extra") or {}  # noqa: E731
    series = [r for r in recs if x(r).get("t")]
    um = next((r for r in recs if r["op"] == "um_trace"), None)
    ux = x(um) if um else {}
    same_clock = ux.get("clock") == "program"
    t_lo, t_hi = extent(recs)
    # NVTX ranges the program emitted: a mark where each starts (and instant marks), on every timeline.
    marks = [(a, n) for n, a, _ in ux.get("ranges") or [] if a is not None] + [
        (t, n) for n, t in ux.get("instants") or [] if t is not None]
    out = [answer(recs)]
    lanes = timeline_lanes(ux)
    if lanes:
        tk = ux.get("tracks") or {}
        out.append(timeline(lanes, t_lo, t_hi, "timeline: kernels, copies, NVTX ranges; per allocation the bytes "
                            f"migrated per {1e3 * tk.get('width', 0):.3g} ms interval (in: green prefetch, blue on "
                            "demand; out: red) and GPU page faults per interval"))
        if not same_clock:
            out.append("<p class=note>The trace's clock could not be put on the program's: its lanes start at the "
                       "trace's own start.</p>")
    mem = [(f"{r['op']}" + (" (device minus baseline)" if r["op"].endswith("_mem_device") else ""),
            [(t, v / 2**20) for t, v in decimate(x(r)["t"], x(r)["samples"])]) for r in series if r["unit"] == "bytes"]
    if mem:
        out.append(line_chart(mem, "memory use over time (MiB)", "seconds since the start", "MiB", x_log=False,
                              x_fmt=_secs, height=300, marks=marks if same_clock else (), x_range=(t_lo, t_hi),
                              css="chart timeline"))
    other = [(f"{r['op']} ({r['unit']})", decimate(x(r)["t"], x(r)["samples"])) for r in series
             if r["unit"] in ("%", "W")]
    if other:
        out.append(line_chart(other, "GPU utilisation (%) and power (W) over time", "seconds since the start",
                              "% or W", x_log=False, x_fmt=_secs, height=260, marks=marks if same_clock else (),
                              x_range=(t_lo, t_hi), css="chart timeline"))
    if ux.get("ranges"):
        out.append(html_table(["NVTX range", "start s", "end s", "seconds"], [
            [n, num_cell(num(a)), num_cell(num(b)), num_cell(num(b - a) if a is not None and b is not None else "not closed")]
            for n, a, b in ux["ranges"]]))
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
                 ("faults per migration", num(ux.get("faults_per_migration")) or "no migrations", CAVEATS["derived"]),
                 ("eviction-to-migration ratio", num(ux.get("eviction_to_migration")) or "no migrations",
                  CAVEATS["derived"]),
                 ("kernels, copies, allocations", ("kernels not recorded (`--kernels` records them)"
                                                   if ux.get("kernels") is None else
                                                   f"{ux.get('kernels')} kernels ({num(ux.get('kernel_s'))} s)") + ", " +
                  ("copies not recorded (`--copies` records them)" if ux.get("memcpy_bytes") is None else
                   f"{(ux.get('memcpy_bytes') or 0) / 2**20:.1f} MiB copied") + ", " +
                  ("allocations not recorded (`--allocations` records them and the migrations of each)"
                   if ux.get("allocations_made") is None else f"{ux.get('allocations_made')} allocations"), "")]
        from umscope.report.um_caveats import trace_rows
        items += trace_rows(ux)
        for a in ux.get("allocations") or []:
            items.append((f"allocation 0x{a['address']:x} ({size_tick(a['bytes'])})",
                          f"{a['htod'] / 2**20:.1f} MiB in, {a['dtoh'] / 2**20:.1f} MiB out",
                          "every migration of this allocation (the driver's events, nothing dropped)"
                          if ux.get("migrations_source") == "the driver's events" else
                          "migrations the driver reports for this allocation (see host → device)"))
        if not ux.get("trace_complete"):
            items.append(("trace", "ended early: the program died before CUPTI's last flush", ""))
        out.append(html_table(["unified memory (CUPTI)", "total", "what the driver reports, and what it does not"],
                              [[th(k), v, cell(c, "note")] for k, v, c in items]))
    from umscope.report.link_traffic import section as counter_section  # hardware counters beside the trace
    out.append(counter_section(recs))
    scale = lambda r, v: v / 2**20 if r["unit"] == "bytes" else v  # noqa: E731
    out.append(html_table(
        ["series", "processor", "peak (total for energy)", "median", "unit", "samples", "source"],
        [[r["op"], r["processor"], num_cell(f"{scale(r, r['max']):.4g}"), num_cell(f"{scale(r, r['median']):.4g}"),
          "MiB" if r["unit"] == "bytes" else r["unit"], num_cell(r["n"]), cell(x(r).get("source", ""), "note")]
         for r in recs if r["op"] not in ("run", "um_trace") and r["unit"] != "B"]))
    if run:
        rx = x(run)
        out.append(f"<p class=note>Command <code>{e(rx.get('command'))}</code>: exit status {e(rx.get('exit_status'))}"
                   f"{' (' + e(rx['signal']) + ')' if rx.get('signal') else ''}, {run['median']:.3g} s, "
                   f"{e(rx.get('samples_taken'))} samples every {1e3 * (rx.get('period_s') or 0):g} ms; the sampler "
                   f"used {100 * (rx.get('sampler_overhead') or 0):.2f}% of the run's wall time in CPU time."
                   + "".join(f"<br>Note: {e(n)}" for n in rx.get("notes") or []) + "</p>")
    return "".join(out)


@family_section("profile")
def section(bench, recs, page=None) -> str:
    return charts(recs)
