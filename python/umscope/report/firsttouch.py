"""The firsttouch family: allocation, first touch, second touch and free by kind, toucher and size."""

from collections import OrderedDict

from umscope.report.common import records_table
from umscope.report.registry import family_section
from umscope.report.svg import hbar_chart, size_tick


def chart(recs) -> str:
    groups = OrderedDict()
    for r in recs:
        x = r.get("extra") or {}
        label = (f"{r['kind']}{' [' + r['policy'] + ']' if r.get('policy') else ''} · by {x.get('by')}"
                 f"{' · CPU pre-touch' if x.get('pretouch') == 'cpu' else ''} · {size_tick(r['bytes'])}")
        groups.setdefault(label, []).append((r["op"], r["median"], r["min"], r["max"]))
    return hbar_chart(list(groups.items()), "ms", "allocation, first touch, second touch and free (ms, log scale; "
                                                  "bars median, whiskers min–max)", log=True)


@family_section("firsttouch")
def section(bench, recs, page=None) -> str:
    return chart(recs) + records_table(recs)
