"""The report's conditions section: the cases measured while the GPU was throttled or shared, from the NVML
readings taken around each case (umscope.conditions reads and judges them). It says what the run recorded:
`profile` and `place` runs record none (they sample the GPU over the program's run instead)."""

from umscope import conditions
from umscope.report.common import e
from umscope.report.registry import page_section

TITLE = "Conditions of the measurements"


def text(run, records) -> str:
    if run.get("kind") in ("profile", "place"):
        return ("<p class=note>This run kind records no conditions: NVML readings before and after each case are "
                "taken by <code>run</code>, <code>bench</code> and <code>app</code>"
                + (" (this profile's own samples of the GPU are in its section)." if run.get("kind") == "profile"
                   else ".") + "</p>")
    if not records:
        return "<p class=note>No case of this run left a measured record, so no conditions are shown.</p>"
    return conditions.report_html(records, e)


@page_section("conditions", TITLE, order=110)
def section(page) -> str:
    return f"<h2 id=conditions>{TITLE}</h2>" + text(page.run, page.records)
