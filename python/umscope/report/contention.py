"""The contention family: each side (GPU, CPU threads) alone and under the other's load, and their sum."""

from collections import OrderedDict

from umscope.report.common import html_table, kind_label, num_cell, records_table, th
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

        def pair(a, b):
            change = (b["median"] / a["median"] - 1) * 100 if a["median"] else 0
            return [num_cell(f"{a['median']:.4g}"), num_cell(f"{b['median']:.4g}"), num_cell(f"{change:+.0f}%", change < -10)]
        alone_sum = (s.get("extra") or {}).get("alone_median") or 0
        rows.append([f"{g0['op']} of {kind_label(g0)}", f"{c0['op']} of {kind_label(c0)}, {c0['threads']} thr"]
                    + pair(g0, g1) + pair(c0, c1) + [num_cell(f"{alone_sum:.4g}"), num_cell(f"{s['median']:.4g}")])
    return html_table(
        [[th("GPU load", rowspan=2), th("CPU load", rowspan=2), th("GPU GB/s", colspan=3), th("CPU GB/s", colspan=3),
          th("sum GB/s", colspan=2)],
         ["alone", "with CPU", "change", "alone", "with GPU", "change", "alone", "together"]], rows,
        "Medians. “with CPU” is the GPU measured while the CPU threads stream at the same time, and the reverse; "
        "the sum adds the two sides' medians measured together. A fall of more than 10% is flagged.")


@family_section("contention")
def section(bench, recs, page=None) -> str:
    return table(recs) + records_table(recs)
