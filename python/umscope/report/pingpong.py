"""The pingpong family: a matrix of memory kind by pair of agents; a cell holds the median round trip of a
flag or why that pair did not run (its cases are shown even when none left a record)."""

import json

from umscope.report.common import cell, spread_note, spread_threshold, e, html_table, ns, num_cell, th
from umscope.report.registry import family_section


def matrix(recs, cases) -> str:
    """A matrix: memory kind by pair of agents; a cell holds the median round trip or why it did not run."""
    pairs = ["cpu-gpu", "gpu-gpu", "cpu-cpu"]
    kinds, cells = [], {}
    for c in cases:
        if c["benchmark"] != "pingpong":
            continue
        p = json.loads(c["params"]) if isinstance(c.get("params"), str) else (c.get("params") or {})
        key = (c["kind"], p.get("pair"))
        kinds += [c["kind"]] if c["kind"] not in kinds else []
        if c["status"] != "ok":
            cells[key] = cell(html=f"{e(c['status'])}: {e(c['reason'])}", cls=c["status"])
    limit = spread_threshold(recs)[0]
    for r in recs:
        x = r.get("extra") or {}
        flag = (r.get("spread") or 0) > limit
        cells[(r["kind"], x.get("pair"))] = num_cell("", flag, html=(
            f"{ns(r['median'])}<br><span class=note>{ns(r['min'])}–{ns(r['max'])}, n={e(r['n'])}"
            f"{' ⚠' if flag else ''}</span>"))
        kinds += [r["kind"]] if r["kind"] not in kinds else []
    return html_table(
        ["flag in"] + pairs, [[th(k)] + [cells.get((k, p), cell("not run", "note")) for p in pairs] for k in kinds],
        "Round trip of a flag advanced in turn by system-scope compare-and-swap (median over repetitions of "
        "10<sup>4</sup> exchanges, min–max below). Before timing, both agents add to a shared counter at once; a "
        "pair that loses increments is skipped with that finding. " + e(spread_note(recs)))


@family_section("pingpong", show_unmeasured=True)
def section(bench, recs, page) -> str:
    return matrix(recs, page.cases)
