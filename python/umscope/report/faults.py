"""The faults family: time per page fault, serial (latency) and parallel (throughput), by processor and kind."""

from umscope.report.common import e, kind_label, num
from umscope.report.registry import family_section
from umscope.report.svg import size_tick


def table(recs) -> str:
    rows = "".join(
        f"<tr><td>{e(r['processor'])}</td><td>{e(kind_label(r))}</td><td>{e(r['op'])}</td>"
        f"<td class=num>{e(size_tick((r.get('extra') or {}).get('stride', 0)))}</td>"
        f"<td class=num>{e((r.get('extra') or {}).get('pages'))}</td><td class=num>{r['median']:.4g}</td>"
        f"<td class=num>{r['min']:.4g}</td><td class=num>{r['max']:.4g}</td>"
        f"<td class=num>{num((r.get('extra') or {}).get('pages_per_s'))}</td>"
        f"<td class=num>{num((r.get('extra') or {}).get('gbps_of_strides'))}</td></tr>" for r in recs)
    return ("<table><tr><th>processor</th><th>kind [policy]</th><th>mode</th><th>stride</th><th>pages</th>"
            "<th>µs per page</th><th>min</th><th>max</th><th>pages/s</th><th>GB/s of strides</th></tr>" + rows +
            "</table><p class=note>One byte touched per stride of memory the other processor placed: a page "
            "fault (and a migration, where the kind migrates) per stride. Serial: one thread, pages in order "
            "(fault latency); parallel: all pages at once (fault throughput).</p>")


@family_section("faults")
def section(bench, recs, page=None) -> str:
    return table(recs)
