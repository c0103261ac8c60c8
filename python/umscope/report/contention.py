"""The contention family: each side (GPU, CPU threads) alone and under the other's load, and their sum."""

from collections import OrderedDict

from umscope.report.common import e, kind_label, records_table
from umscope.report.registry import family_section


def table(recs) -> str:
    """One row per case: each side alone and under the other's load, and their sum."""
    by_case = OrderedDict()
    for r in recs:
        by_case.setdefault(r["case_id"], []).append(r)
    rows = []
    for case_id, rs in by_case.items():
        def pick(proc_cpu, loaded, op_sum=False):
            for r in rs:
                x = r.get("extra") or {}
                if op_sum != (r["op"] == "sum"):
                    continue
                if not op_sum and (r["processor"] == "cpu") != proc_cpu:
                    continue
                if op_sum or (x.get("load") != "none") == loaded:
                    return r
            return None
        g0, g1, c0, c1, s = pick(False, False), pick(False, True), pick(True, False), pick(True, True), \
            pick(False, False, True)
        if not (g0 and g1 and c0 and c1 and s):
            continue

        def cell(a, b):
            change = (b["median"] / a["median"] - 1) * 100 if a["median"] else 0
            return (f"<td class=num>{a['median']:.4g}</td><td class=num>{b['median']:.4g}</td>"
                    f"<td class=\"num{' flag' if change < -10 else ''}\">{change:+.0f}%</td>")
        alone_sum = (s.get("extra") or {}).get("alone_median") or 0
        rows.append(f"<tr><td>{e(g0['op'])} of {e(kind_label(g0))}</td><td>{e(c0['op'])} of {e(kind_label(c0))}, "
                    f"{e(c0['threads'])} thr</td>{cell(g0, g1)}{cell(c0, c1)}"
                    f"<td class=num>{alone_sum:.4g}</td><td class=num>{s['median']:.4g}</td></tr>")
    if not rows:
        return ""
    return ("<table><tr><th rowspan=2>GPU load</th><th rowspan=2>CPU load</th><th colspan=3>GPU GB/s</th>"
            "<th colspan=3>CPU GB/s</th><th colspan=2>sum GB/s</th></tr><tr><th>alone</th><th>with CPU</th>"
            "<th>change</th><th>alone</th><th>with GPU</th><th>change</th><th>alone</th><th>together</th></tr>"
            + "".join(rows) + "</table><p class=note>Medians. “with CPU” is the GPU measured while the CPU "
            "threads stream at the same time, and the reverse; the sum adds the two sides' medians measured "
            "together. A fall of more than 10% is flagged.</p>")


@family_section("contention")
def section(bench, recs, page=None) -> str:
    return table(recs) + records_table(recs)
