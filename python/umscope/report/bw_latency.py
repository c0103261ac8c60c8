"""The report's bandwidth-against-latency section (the study's Fig. 2): every processor-memory pair of the
run that has both a read bandwidth and a latency beyond the caches, as one point."""

from umscope.report.registry import page_section
from umscope.report.svg import line_chart

TITLE = "Bandwidth against latency"


def chart(records) -> str:
    """The study's Fig. 2: every processor-memory pair that has both a read bandwidth and a latency
    beyond the caches, as one point."""
    lat, bw = {}, {}
    for r in records:
        key = (r["processor"], r["kind"], r.get("policy") or "")
        if r["benchmark"] == "latency" and r["op"] == "chase":
            if key not in lat or r["bytes"] > lat[key][0]:
                lat[key] = (r["bytes"], r["median"])
        elif r["benchmark"] in ("gpu-stream", "cpu-stream") and r["op"] == "read":
            if not (r.get("params") or {}).keys() & {"blocks", "block"}:
                bw[key] = max(bw.get(key, 0), r["median"])
    series = [(f"{p} → {k}" + (f" [{pol}]" if pol else ""), [(lat[(p, k, pol)][1], bw[(p, k, pol)])])
              for (p, k, pol) in lat if (p, k, pol) in bw]
    if not series:
        return ""
    return (f"<h2 id=bandwidth-latency>{TITLE}</h2>" +
            line_chart(series, "read bandwidth against latency (largest chased footprint)", "latency (ns per load)",
                       "read bandwidth (GB/s)", x_log=True, y_log=True, points_only=True, height=420))


@page_section("bandwidth-latency", TITLE, order=130)
def section(page) -> str:
    return chart(page.records)
