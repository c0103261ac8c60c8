"""The report's energy section: what each case used, from the counters the suite read around it (umscope.energy),
and GFLOP/s per watt of the applications that have a FLOP rate, labelled with the GPU's power limit. Sources
that could not be read are listed once with their reason. Drawn only where the run's records carry energy."""

from collections import OrderedDict

from umscope import energy
from umscope.report.common import e, extra, html_table, num, num_cell
from umscope.report.registry import page_section

TITLE = "Energy"


def _cases(records) -> "OrderedDict":
    """{case_id: energy} in the run's order (every record of a case carries its case's energy)."""
    out = OrderedDict()
    for r in records:
        en = extra(r).get("energy")
        if en and r.get("case_id") not in out:
            out[r.get("case_id")] = en
    return out


def _host(en):
    """(joules, watts) summed over the host's readable sources (RAPL packages, hwmon), or (None, None)."""
    j = energy.host_joules(en)
    if j is None:
        return None, None
    return j, (j / en["wall_s"] if en.get("wall_s") else None)


def text(records) -> str:
    cases = _cases(records)
    if not cases:
        return ""
    rows, without = [], 0
    for cid, en in cases.items():
        hj, hw = _host(en)
        if en.get("gpu_joules") is None and hj is None:
            without += 1  # no counter gave this case a figure (too short, or none readable): counted, not listed
            continue
        rows.append([cid, num_cell(f"{en.get('wall_s', 0):.2f}"), ",".join(str(g) for g in en.get("gpus") or []),
                     num_cell(num(en.get("gpu_joules"))), num_cell(num(en.get("gpu_watts"))),
                     num_cell(num(hj)), num_cell(num(hw)), en.get("note") or en.get("window", "")])
    method = ("Each case's energy is the difference of the machine's own counters read by umscope around the case: "
              "NVML's total energy of each GPU the case used, RAPL package energy and hwmon where readable. Watts are "
              "joules over the case's wall time, setup and checks included. A case under 0.5 s gets no figure (the "
              "counters' resolution). docs/energy.md says the method.")
    if rows:
        out = [html_table(["case", "wall s", "GPUs", "GPU J", "GPU W", "host J", "host W", "window / note"], rows,
                          method)]
        if without:
            out.append(f"<p class=note>{without} other case(s) have no figure: under 0.5 s, or no counter was "
                       "readable for them.</p>")
    else:
        out = [f"<p>No case has an energy figure: none of the {len(cases)} case(s) ran long enough for the counters "
               "or had a counter umscope could read (below). " + e(method) + "</p>"]
    absent = OrderedDict()
    for en in cases.values():
        for key, s in en.get("sources", {}).items():
            if s.get("joules") is None and s.get("reason") and "resolution" not in s["reason"]:
                absent.setdefault(key, (s.get("name", key), s["reason"]))
    if absent:
        out.append("<p class=note>Not read: " + "; ".join(f"{e(n)}: {e(why)}" for n, why in absent.values()) + ".</p>")
    rated = [r for r in records if extra(r).get("gflops_per_watt") and r.get("status", "ok") == "ok"]
    if rated:
        prows = []
        for r in rated:
            x = extra(r)
            pw = x["gflops_per_watt"]
            label = x.get("app", r.get("benchmark")) + (f" {x['precision']}" if x.get("precision") else "")
            limit = pw.get("power_limit_w")
            limit_text = num(limit) + ("" if pw.get("default_power_limit_w") in (None, limit)
                                       else f" (default {num(pw['default_power_limit_w'])})")
            prows.append([label, x.get("mode", ""), pw.get("gpu", ""), num_cell(num(pw.get("gflops"))),
                          num_cell(num(pw.get("watts"))), num_cell(num(pw.get("value"))), num_cell(limit_text),
                          num_cell(num(pw.get("compute_share"))), pw.get("reason", "")])
        out.append("<h3>GFLOP/s per watt</h3>" + html_table(
            ["application", "mode", "GPU", "GFLOP/s", "GPU W", "GFLOP/s per W", "power limit W", "compute share",
             "why none"], prows,
            "The application's own FLOP rate (its median iteration) over its GPU's average power in the case, at "
            "the power limit the GPU ran at (NVML's power management limit, read, never set). The power is the "
            "whole case's average, setup and checks included: 'compute share' is the part of the case that was "
            "compute. Power-cap and governor sweeps (Hanawa et al.) change the machine: not run here."))
    return "".join(out)


@page_section("energy", TITLE, order=115)
def section(page) -> str:
    body = text(page.all_records or page.records)  # failed cases used energy too
    return f"<h2 id=energy>{TITLE}</h2>" + body if body else ""
