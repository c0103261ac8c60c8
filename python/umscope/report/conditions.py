"""The report's conditions section: the cases measured while the GPU was throttled or shared, from the NVML
readings taken around each case (umscope.conditions reads and judges them)."""

from umscope import conditions
from umscope.report.common import e
from umscope.report.registry import page_section

TITLE = "Conditions of the measurements"


@page_section("conditions", TITLE, order=110)
def section(page) -> str:
    return f"<h2 id=conditions>{TITLE}</h2>" + conditions.report_html(page.records, e)
