"""The interleave family: the time of a GPU write after a CPU write against the GPU writes in a row."""

from collections import OrderedDict

from umscope.report.common import kind_label, records_table
from umscope.report.registry import family_section
from umscope.report.svg import line_chart


def charts(recs) -> str:
    series = OrderedDict()
    for r in recs:
        x = r.get("extra") or {}
        series.setdefault(f"{kind_label(r)} · CPU writes {x.get('cpu_write')}", []).append(
            (x.get("gpu_writes"), r["median"], r["min"], r["max"]))
    return line_chart(list(series.items()), "time per GPU write after a CPU write, against GPU writes in a row",
                      "GPU writes after each CPU write (N)", "ms per GPU write", y_log=True, unit=recs[0]["unit"],
                      x_fmt=lambda v: f"{v:.0f}", height=380) + records_table(recs, [
        ("GPU writes in a row (N)", lambda r: (r.get("extra") or {}).get("gpu_writes", "")),
        ("CPU writes", lambda r: (r.get("extra") or {}).get("cpu_write", ""))])


@family_section("interleave")
def section(bench, recs, page=None) -> str:
    return charts(recs)
