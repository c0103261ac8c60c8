"""The latency family: load-to-use latency against footprint per processor (pointer chase), with the
caches marked from the machine's own description, the GPU's clocks, and every record."""

from collections import OrderedDict

from umscope.report.common import e, spread_note, spread_threshold, html_table, kind_label, num, num_cell
from umscope.report.registry import family_section
from umscope.report.svg import line_chart, size_tick


def cache_marks(fp, processor) -> list:
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


def charts(recs, fp) -> str:
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
                              "footprint (random cycle, 128-byte slots)", "ns per load", y_log=True, unit="ns",
                              x_fmt=size_tick, marks=cache_marks(fp, proc), height=380))
    if timers:
        t = timers[0]
        x = t.get("extra") or {}
        out.append(f"<p class=note>GPU clocks: the SM cycle counter ran at {t['median']:.0f} MHz against the global "
                   f"timer (min {t['min']:.0f}, max {t['max']:.0f}; the device reports a "
                   f"{e(x.get('clock_rate_attr_mhz'))} MHz clock); the global timer advanced in steps of "
                   f"{e(x.get('globaltimer_step_ns'))} ns. Cache marks come from the device properties (the "
                   f"L1 mark is the shared-memory capacity of an SM, the most its L1 can be) and from sysfs.</p>")
    out.append(html_table(
        ["processor", "kind [policy]", "footprint", "ns median", "min", "max", "spread", "cycles", "residency"],
        [[r["processor"], kind_label(r), num_cell(size_tick(r["bytes"])), num_cell(f"{r['median']:.4g}"),
          num_cell(f"{r['min']:.4g}"), num_cell(f"{r['max']:.4g}"),
          num_cell(f"{100 * (r.get('spread') or 0):.1f}%", (r.get("spread") or 0) > spread_threshold(chase)[0]),
          num_cell(num((r.get("extra") or {}).get("cycles"))), (r.get("extra") or {}).get("residency", "")]
         for r in chase], e(spread_note(chase))))
    return "".join(out)


@family_section("latency")
def section(bench, recs, page) -> str:
    return charts(recs, page.fp)
