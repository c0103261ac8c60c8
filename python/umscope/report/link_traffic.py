"""Profile report section: link and memory traffic from hardware counters (`umscope profile --counters`),
next to the unified-memory totals CUPTI's tracer counted for the same run, with every disagreement above
5% flagged. Counter bytes are what crossed the link; the tracer's are the migrations the driver reported
plus the copies the program made: zero-copy accesses and unreported migrations are the difference."""


from umscope.report import traffic_figs
from umscope.report.common import e, cell, html_table, num_cell
from umscope.report.svg import line_chart

FLAG = 0.05  # relative disagreement flagged
FLOOR = 1 << 20  # below one MiB apart, counter granularity (512 B PCIe) and doorbells dominate: not flagged
# Which PCIe counter carries which direction, for GPU-initiated traffic (copy engines, migrations, SM loads
# and stores to host memory): the GPU reads host memory for host-to-device, writes it for device-to-host.
DIRECTION = {"htod": "pcie_read", "dtoh": "pcie_write"}
NAMES = {"htod": "host → device", "dtoh": "device → host"}


def _mib(v) -> str:
    return "" if v is None else f"{v / 2**20:,.1f}"


# PCIe counters count TLPs with their headers. Completions carry 12-byte headers (3 DW) and 128 bytes
# (SM loads of host memory) to 256 bytes (copy engines) of data on the H100; requests and posted writes
# carry 16-byte headers (4 DW, 64-bit addresses). So the data in `raw` link bytes lies in a range.
CPL_HEADER, REQ_HEADER, SMALL, LARGE = 12, 16, 128, 256
# The GPU also writes to host memory on its own while the driver migrates (fault buffer, semaphores): on the
# H100, two 1 GiB managed first-touch migrations with no device-to-host data sent 0.302 GiB for 2.110 GiB
# read: 0.061 to 0.176 GiB more than the read requests account for (one 16-byte request per 128 or per 256
# bytes read), 3-8% of the bytes read (docs/counters.md). Allowed for before device-to-host data is inferred.
HOUSEKEEPING = 0.08


def payload_range(direction, raw, raw_read=0.0):
    """(lowest, highest) data bytes that `raw` PCIe bytes can carry. Host to device: read completions of
    128 to 256 data bytes. Device to host: writes of 128 to 256 bytes, after taking out the read requests
    the GPU sent (at most one 16-byte request per 128 bytes read) and its own writes (HOUSEKEEPING)."""
    if direction == "htod":
        return raw * SMALL / (SMALL + CPL_HEADER), raw * LARGE / (LARGE + CPL_HEADER)
    requests = raw_read * REQ_HEADER / (SMALL + CPL_HEADER)
    own = HOUSEKEEPING * raw_read
    return max(0.0, raw - requests - own) * SMALL / (SMALL + REQ_HEADER), raw * LARGE / (LARGE + REQ_HEADER)


def disagreement(counted, lo, hi):
    """How far the traced bytes lie outside [lo, hi], relative to the nearer end (0 inside; None without
    counter bytes)."""
    if not hi:
        return None
    if counted < lo:
        return (counted - lo) / lo
    if counted > hi:
        return (counted - hi) / hi
    return 0.0


def flagged(counted, lo, hi) -> bool:
    d = disagreement(counted, lo, hi)
    return d is not None and abs(d) > FLAG and (counted < lo - FLOOR or counted > hi + FLOOR)


def comparison(recs) -> list:
    """Rows [(direction, counter bytes, source, migrations counted, copies counted, flagged)] for each GPU
    that has both counter totals and a unified-memory trace."""
    x = lambda r: r.get("extra") or r  # noqa: E731  (stored records keep their fields under extra)
    um = {r["processor"]: x(r) for r in recs if r["op"] == "um_trace"}
    rows = []
    for r in recs:
        if r["op"] != "counter_totals":
            continue
        rx = x(r)
        tr = um.get(r["processor"]) or (next(iter(um.values())) if len(um) == 1 else None)
        if tr is None:
            continue  # no trace to compare with: the totals are shown alone
        b = rx.get("by_metric") or {}
        for d in ("htod", "dtoh"):
            link = b.get(DIRECTION[d]) if rx.get("source") != "NVML PCIe counters" else b.get(
                "pcie_rx" if d == "htod" else "pcie_tx")
            if link is None:
                continue
            migrated = (tr.get("totals") or {}).get(d)
            # Copy records left out (profile without --copies): the traced side is unknown, not the migrations alone.
            no_copies = tr.get("memcpy_by_direction", {}) is None
            copies = (tr.get("memcpy_by_direction") or {}).get(d)
            counted = None if migrated is None or no_copies else migrated + (copies or 0)
            raw_read = b.get("pcie_read", b.get("pcie_rx", 0.0)) or 0.0
            lo, hi = payload_range(d, link, raw_read)
            rows.append({"gpu": r["processor"], "direction": d, "link": link, "source": rx.get("source", ""),
                         "payload": (lo, hi), "migrated": migrated, "copies": copies, "counted": counted,
                         "copies_recorded": not no_copies,
                         "disagreement": None if counted is None else disagreement(counted, lo, hi),
                         "flag": counted is not None and flagged(counted, lo, hi)})
    return rows


def section(recs) -> str:
    """The counters part of the profile section ('' where the run had no counters)."""
    x = lambda r: r.get("extra") or r  # noqa: E731
    mine = [r for r in recs if r["op"] in ("counter_totals", "counter_series", "kernel_traffic")]
    if not mine:
        return ""
    out = ["<h3>Link and memory traffic (hardware counters)</h3>"]
    rows = comparison(recs)
    if rows:
        def verdict(r):
            if r["disagreement"] is None:
                return num_cell("no trace" if r.get("copies_recorded", True) else "copies not recorded (--copies)")
            text = ("within" if r["disagreement"] == 0 else f"{100 * r['disagreement']:+.1f}%") + (
                " — more than 5% apart" if r["flag"] else "")
            return num_cell(text, r["flag"])
        out.append(html_table(
            ["GPU", "direction", "link bytes, counters (MiB, TLP headers included)", "data in them (MiB)",
             "migrations, CUPTI (MiB)", "copies, CUPTI (MiB)", "traced vs the data range", "counter source"],
            [[str(r["gpu"]), NAMES[r["direction"]], num_cell(_mib(r["link"])),
              num_cell(f"{_mib(r['payload'][0])} – {_mib(r['payload'][1])}"), num_cell(_mib(r["migrated"])),
              num_cell(_mib(r["copies"])), verdict(r), cell(str(r["source"]), "note")] for r in rows]))
        out.append("<p class=note>Counters see every byte that crossed the host link in the run; the tracer sees "
                   "the migrations the driver reported and the program's copies. A flagged difference is zero-copy "
                   "traffic (pinned, registered or host-resident managed memory read in place), migrations the "
                   "driver did not report, or both. PCIe counts packets with their headers: the data they carried "
                   "lies in the range shown (completions of 128 to 256 bytes with 12-byte headers; 16-byte request "
                   "and write headers; docs/counters.md). Flagged where the traced bytes lie more than "
                   f"{100 * FLAG:g}% (and 1 MiB) outside it.</p>")
    for r in recs:
        if r["op"] == "counter_totals" and not any(c["gpu"] == r["processor"] for c in rows):
            b = x(r).get("by_metric") or {}
            out.append(f"<p>{e(r['processor'])}, whole run ({e(x(r).get('source'))}): " + ", ".join(
                f"{e(k)} {_mib(v)} MiB" for k, v in sorted(b.items())) + "</p>")
    for r in recs:
        if r["op"] != "counter_series":
            continue
        ser = x(r).get("series") or {}
        lines = [(f"{k} (GB/s)", [(t, v / 1e9) for t, v in zip(s["t"], s["bytes_per_s"])]) for k, s in ser.items()]
        axis = "seconds since the start" if x(r).get("clock") == "program" else "seconds since the first sample"
        out.append(line_chart(lines, f"{r['processor']}: throughput over time ({x(r).get('source')})", axis, "GB/s",
                              x_log=False, x_fmt=lambda v: f"{v:.3g}", height=300))
        if "l1_l2" in ser:  # the three tiers of schieffer2024's Fig. 12
            pairs = {k: list(zip(s["t"], s["bytes_per_s"])) for k, s in ser.items()}
            out.append(traffic_figs.fig12_html(r["processor"], traffic_figs.tiers(pairs)))
    for r in recs:
        if r["op"] != "kernel_traffic":
            continue
        rx = x(r)
        table = rx.get("kernels") or []
        cols = sorted({k for row in table for k in row["bytes"]})
        out.append(html_table(
            [f"kernel ({r['processor']}, {rx.get('source')}; {rx.get('launches')} launches, {rx.get('passes')} "
             "pass(es))", "launches"] + [f"{c} MiB" for c in cols],
            [[row["kernel"][:80], num_cell(row["launches"])] + [num_cell(_mib(row["bytes"].get(c))) for c in cols]
             for row in table[:30]]))
        launches = [(b.get("kernel", "?"), {k: v for k, v in b.items() if k != "kernel"})
                    for b in rx.get("launch_bytes") or []]
        rows = traffic_figs.fig10_rows(None, launches, launches)
        if len(rows) >= 2:  # an iterative program: its traffic per iteration (schieffer2024's Fig. 10)
            out.append(traffic_figs.fig10_html(f"{r['processor']}, per iteration", rows))
        out.append("<p class=note>Per kernel: CUPTI's range profiler serialises kernels while it counts, so kernel "
                   "times in this run are not those of an unprofiled run; the bytes are the kernel's own.</p>")
    return "".join(out)
