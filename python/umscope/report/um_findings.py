"""The report's unified-memory findings: the studies' qualitative findings, each checked against this run's
own numbers (migration, first touch, free, prefetch). Nothing here is a number from a paper: a verdict
compares two of the run's measurements; the studies are cited for the finding only."""

from umscope.report.common import e, g, short_kind
from umscope.report.registry import page_section
from umscope.report.svg import size_tick

TITLE = "Unified-memory findings, checked on this machine"


def findings(records) -> str:
    """The studies' qualitative unified-memory findings, each checked against this run's own numbers.
    Nothing here is a number from a paper: the verdict compares two of our measurements."""
    def find(bench, op, kind, pred=lambda r: True):
        return next((r for r in records if r["benchmark"] == bench and r["op"] == op and
                     short_kind(r["kind"], r.get("policy")) == kind and pred(r)), None)
    items = []
    x = lambda r: r.get("extra") or {}  # noqa: E731
    od = next((r for r in records if r["benchmark"] == "migration" and r["kind"] == "managed" and
               (r.get("policy") or "") == "first_touch=cpu" and x(r).get("cpu_touch", "none") == "none"
               and "dos" not in x(r)), None)
    if od and x(od).get("first") and x(od).get("steady"):
        ratio = x(od)["steady"] / x(od)["first"]
        items.append((ratio > 5, f"On-demand migration (managed, first touched by the CPU, {size_tick(od['bytes'])}): "
                      f"the first GPU pass ran at {g(x(od)['first'])} GB/s and later passes at "
                      f"{g(x(od)['steady'])} GB/s ({ratio:.0f}×)", "the first iteration pays for migration and later "
                      "ones run from GPU memory (Hanawa et al.; Schieffer et al. §2.3)"))
    gpu_ft = find("firsttouch", "first-touch", "managed", lambda r: x(r).get("by") == "gpu")
    cpu_ft = find("firsttouch", "first-touch", "managed", lambda r: x(r).get("by") == "cpu")
    if gpu_ft and cpu_ft and od and x(od).get("first") and gpu_ft["bytes"] == cpu_ft["bytes"] == od["bytes"]:
        cpu_path = cpu_ft["median"] + od["bytes"] / (x(od)["first"] * 1e9) * 1e3
        items.append((gpu_ft["median"] < cpu_path, f"Managed memory initialised by the GPU took "
                      f"{g(gpu_ft['median'])} ms; initialised by the CPU and then migrated by the GPU's first "
                      f"pass, {g(cpu_path)} ms", "GPU-side initialisation of managed memory is much shorter "
                      "(Schieffer et al. §5.1.2)"))
    base = find("firsttouch", "free", "system [page=base]")
    thp = find("firsttouch", "free", "system [page=thp]")
    if base and thp and base["bytes"] == thp["bytes"]:
        items.append((thp["median"] < base["median"], f"Freeing {size_tick(base['bytes'])} of system memory took "
                      f"{g(base['median'])} ms with base pages and {g(thp['median'])} ms with transparent huge "
                      f"pages", "larger system pages make de-allocation much cheaper (Schieffer et al. §5.2, "
                      "64 KB against 4 KB pages on Grace; here x86 base pages against 2 MiB THP)"))
    pf = next((r for r in records if r["benchmark"] == "migration" and "prefetch_gbps" in x(r)), None)
    if pf:
        items.append((None, f"A prefetch to the GPU moved {size_tick(pf['bytes'])} at {g(x(pf)['prefetch_gbps'])} "
                      f"GB/s; the first GPU pass after it ran at {g(x(pf)['first'])} GB/s", ""))
    if not items:
        return ""
    li = []
    for ok, what, study in items:
        verdict = "" if ok is None else ("<b>agrees</b> with the finding that " if ok else
                                          "<b class=flag>differs</b> from the finding that ")
        li.append(f"<li>{e(what)}{'. ' + verdict + e(study) if study else ''}.</li>")
    return (f"<h2 id=um-findings>{TITLE}</h2><ul>" + "".join(li) +
            "</ul><p class=note>Each line compares two measurements of this run; the studies are cited for "
            "the qualitative finding only.</p>")


@page_section("um-findings", TITLE, order=120)
def section(page) -> str:
    return findings(page.records)
