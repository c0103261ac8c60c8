"""The pingpong family: a matrix of memory kind by pair of agents; a cell holds the median round trip of a
flag or why that pair did not run (its cases are shown even when none left a record)."""

import json

from umscope.report.common import SPREAD_FLAG, e, ns
from umscope.report.registry import family_section


def matrix(recs, cases) -> str:
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
            f"<td class=\"num{' flag' if flag else ''}\">{ns(r['median'])}<br><span class=note>{ns(r['min'])}–"
            f"{ns(r['max'])}, n={e(r['n'])}{' ⚠' if flag else ''}</span></td>")
        kinds += [r["kind"]] if r["kind"] not in kinds else []
    rows = "".join(f"<tr><th>{e(k)}</th>" + "".join(cell.get((k, p), "<td class=note>not run</td>") for p in pairs)
                   + "</tr>" for k in kinds)
    return ("<table><tr><th>flag in</th>" + "".join(f"<th>{p}</th>" for p in pairs) + "</tr>" + rows +
            "</table><p class=note>Round trip of a flag advanced in turn by system-scope compare-and-swap (median "
            "over repetitions of 10<sup>4</sup> exchanges, min–max below). Before timing, both agents add to a "
            "shared counter at once; a pair that loses increments is skipped with that finding.</p>")


@family_section("pingpong", show_unmeasured=True)
def section(bench, recs, page) -> str:
    return matrix(recs, page.cases)
