"""The profile family (`umscope profile`): the memory-use timeline (the GH200 study's Figs. 4-5), utilisation
and power, unified memory moved (CUPTI) with what the driver's counts leave out, NVTX ranges, and the run."""

from umscope.report.common import cell, e, html_table, num, num_cell, th
from umscope.report.registry import family_section
from umscope.report.svg import line_chart, size_tick


def _secs(v) -> str:
    """A time axis's tick: the nice tick values in full (a 1.5 ms burst at 0.47 s has ticks 0.4725, 0.473, ...,
    which three digits printed as 0.473 twice)."""
    return f"{v:.6g}"


def charts(recs) -> str:
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
                              x_fmt=_secs, height=340, marks=marks if same_clock else ()))
    other = [(f"{r['op']} ({r['unit']})", list(zip(x(r)["t"], x(r)["samples"]))) for r in series
             if r["unit"] in ("%", "W")]
    if other:
        out.append(line_chart(other, "GPU utilisation (%) and power (W) over time", "seconds since the start",
                              "% or W", x_log=False, x_fmt=_secs, height=300,
                              marks=marks if same_clock else ()))
    axis = "seconds since the start" if same_clock else "seconds since the trace started"
    moved = [(r["op"].replace("_cumulative", "") + " " + r["processor"], [(t, v / 2**20) for t, v in zip(x(r)["t"], x(r)["samples"])])
             for r in series if r["unit"] == "B"]
    if moved:
        complete = ux.get("migrations_source") == "the driver's events"
        out.append(line_chart(moved, "unified memory moved over time (cumulative MiB, "
                              + ("the driver's events" if complete else "CUPTI") + ")", axis, "MiB",
                              x_log=False, x_fmt=_secs, height=300, marks=marks))
        out.append("<p class=note>" + ("Every migration the driver made: its own event queue, read by the tracer "
                                       "with nothing dropped (--uvm-events)." if complete else
                                       "Migrations the driver reports, not all data moved: see the table below.")
                   + "</p>")
    per_alloc = []
    for a in ux.get("allocation_timelines") or []:
        name = f"0x{a['address']:x} ({size_tick(a['bytes'])})"
        per_alloc.append((name + " in", [(t, v / 2**20) for t, v in zip(a["t"], a["in"])]))
        if any(a["out"]):
            per_alloc.append((name + " out", [(t, v / 2**20) for t, v in zip(a["t"], a["out"])]))
    if per_alloc:
        out.append(line_chart(per_alloc, "migration (in: to the GPU) and eviction (out) by allocation, cumulative "
                              "MiB", axis, "MiB", x_log=False, x_fmt=_secs, height=320,
                              marks=marks))
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
                 ("kernels, copies, allocations", f"{ux.get('kernels')} kernels ({num(ux.get('kernel_s'))} s), "
                  f"{(ux.get('memcpy_bytes') or 0) / 2**20:.1f} MiB copied, {ux.get('allocations_made')} allocations", "")]
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
