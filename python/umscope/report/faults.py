"""The faults family: time per page fault, serial (latency) and parallel (throughput), by processor and kind."""

from umscope.report.common import html_table, kind_label, num, num_cell
from umscope.report.registry import family_section
from umscope.report.svg import size_tick


def table(recs) -> str:
    x = lambda r: r.get("extra") or {}  # noqa: E731
    return html_table(
        ["processor", "kind [policy]", "mode", "stride", "pages", "µs per page", "min", "max", "pages/s",
         "GB/s of strides"],
        [[r["processor"], kind_label(r), r["op"], num_cell(size_tick(x(r).get("stride", 0))), num_cell(x(r).get("pages")),
          num_cell(f"{r['median']:.4g}"), num_cell(f"{r['min']:.4g}"), num_cell(f"{r['max']:.4g}"),
          num_cell(num(x(r).get("pages_per_s"))), num_cell(num(x(r).get("gbps_of_strides")))] for r in recs],
        "One byte touched per stride of memory the other processor placed: a page fault (and a migration, where "
        "the kind migrates) per stride. Serial: one thread, pages in order (fault latency); parallel: all pages "
        "at once (fault throughput).")


@family_section("faults")
def section(bench, recs, page=None) -> str:
    return table(recs)
