"""The applications (every record of op 'app', whatever its family): which memory mode wins for which
application (the study's Fig. 3), the phases of each run, per-iteration times, and GEMM placement."""

from collections import OrderedDict

from umscope import verify
from umscope.report.common import cell, spread_note, spread_threshold, e, html_table, num, num_cell
from umscope.report.registry import family_section
from umscope.report.svg import heatmap, line_chart, size_tick


APP_PHASES = ["context_ms", "alloc_ms", "init_ms", "transfer_ms", "compute_ms", "back_ms", "free_ms"]


def app_label(x) -> str:
    label = x.get("app", "?")
    if label == "gemm":
        label = f"gemm {x.get('precision')}" + (" panels" if x.get("variant") == "panels" else "")
        places = [f"{m}={x.get('place_' + m)}" for m in "abc" if x.get("place_" + m) not in (None, "mode")]
        if places:
            label += " " + ",".join(places)
    if x.get("reverse"):
        label += " reversed"
    return label


def charts(recs) -> str:
    """Which memory mode wins for which application (the study's Fig. 3): speedup of each mode over explicit,
    the phases, per-iteration times, and GEMM placement."""
    from umscope.apps import MODES
    x = lambda r: r.get("extra") or {}  # noqa: E731
    by = OrderedDict()
    for r in recs:
        by.setdefault(app_label(x(r)), {})[x(r).get("mode")] = r
    modes = [m for m in MODES + ["cpu"] if any(m in d for d in by.values())]
    speed, comp = {}, {}
    for label, d in by.items():
        base = d.get("explicit")
        for m, r in d.items():
            comp[(label, m)] = r["median"]
            if base:
                speed[(label, m)] = x(base)["total_excl_init_ms"] / x(r)["total_excl_init_ms"]
    out = []
    if speed:
        out.append(heatmap(list(by), modes, speed, "speedup over explicit (whole run without the CPU's "
                           "initialisation; >1: faster)", "×", cell_w=104, corner="app ↓ mode →"))
    out.append(heatmap(list(by), modes, comp, "computation: median time per iteration (ms)", "ms", cell_w=104,
                       corner="app ↓ mode →"))
    rows = []
    limit = spread_threshold(recs)[0]
    for label, d in by.items():
        for m in modes:
            r = d.get(m)
            if not r:
                continue
            xr = x(r)
            rate = (f"{xr['bandwidth_gbps']:.4g} GB/s" if xr.get("bandwidth_gbps") else "") + (
                f" {xr['gflops']:.4g} GFLOP/s" if xr.get("gflops") else "")
            if xr.get("edges") and xr.get("compute_ms"):
                rate = f"{xr['edges'] / (xr['compute_ms'] * 1e-3) / 1e9:.3g} GTEPS"
            check = verify.method(r) + (" ✓" if xr.get("cross_mode_checksum") == "agrees" else "")
            rows.append([label, m, num_cell(size_tick(r["bytes"]))] + [num_cell(num(xr.get(p))) for p in APP_PHASES]
                        + [num_cell(num(speed.get((label, m))))]
                        + [num_cell(num(xr.get("total_ms"))), num_cell(num(xr.get("total_excl_init_ms"))),
                           num_cell(xr.get("iterations")),
                           num_cell(f"{r['median']:.4g}{' ⚠' if (r.get('spread') or 0) > limit else ''}"),
                           rate.strip(), cell(html=f"{e(check)} <code>{e(xr.get('checksum', ''))}</code>")])
    out.append(html_table(
        ["application", "mode", "arrays"] + [f"{p[:-3]} ms" for p in APP_PHASES]
        + ["speedup over explicit ×", "total ms", "total without init ms", "iterations", "ms per iteration", "rate",
           "verified by"], rows,
        "Phases: context = the first CUDA call; transfer = explicit copies, prefetch or "
        "advice; back = copies to the host and the CPU reading every result (the checksum). Speedups follow "
        "the studies' convention of leaving out the CPU's initialisation of the inputs. Rates use the least "
        "traffic (or the operation count) of one iteration over its median time. Every record was checked at "
        "its own size against a CPU reference that ran in the same case (untimed): in full ('cpu-reference'), "
        "by results recomputed at sampled points ('cpu-sample:N': stencils the last iteration from the state "
        "before it), by random vectors ('freivalds:K') or by an invariant only the right result keeps. A run "
        "that failed its check is a failed case (see the end of the report), and so is every other case of "
        "the same kernel in the run. After the cases ran, the suite also compares every mode's checksum with "
        "the explicit mode's of the same application and parameters: a disagreeing case is failed; ✓ marks "
        "agreement. Each application is also checked in full against its CPU reference once per run at a "
        "small footprint ('cpu-reference'). "
        + e(spread_note(recs))))
    charts = []
    for label, d in by.items():
        series = [(m, list(enumerate(x(r).get("samples") or r.get("samples") or [], 1))) for m, r in d.items()]
        series = [(m, pts) for m, pts in series if len(pts) > 1]
        if series:
            charts.append(line_chart(series, f"{label}: time per iteration (ms)", "iteration", "ms", x_log=False,
                                     y_log=True, x_fmt=lambda v: f"{v:g}", height=240, css="chart samples"))
    if charts:
        out.append("<details><summary>Per-iteration times of the iterative applications (first iterations "
                   "show migration and first-touch costs; every sample: <code>--format jsonl</code>)</summary>" + "".join(charts) + "</details>")
    gemm = [r for r in recs if x(r).get("app") == "gemm"]
    if gemm:
        out.append("<h3>GEMM placement</h3>" + html_table(
            ["precision", "mode", "A", "B", "C", "m×n×k", "ms per GEMM", "TFLOP/s"],
            [[x(r).get("precision"), x(r).get("mode")] + [x(r).get("place_" + m) for m in "abc"]
             + [num_cell("", html="×".join(e(x(r).get(k)) for k in ("m", "n_cols", "k"))),
                num_cell(f"{r['median']:.4g}"), num_cell(f"{(x(r).get('gflops') or 0) / 1e3:.4g}")] for r in gemm],
            "\"mode\": the matrix follows the run's memory mode. Bytes crossing the link are measured by "
            "<code>umscope profile --um-trace</code> for managed placements."))
    return "".join(out)


@family_section("applications")
def section(bench, recs, page=None) -> str:
    return charts(recs)
