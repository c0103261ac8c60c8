"""The report's last section: every case that was skipped, refused, failed or timed out, with its reason."""

from umscope.report.common import cell, html_table
from umscope.report.registry import page_section

TITLE = "Skipped and failed cases"


@page_section("skipped", TITLE, order=1000)
def section(page) -> str:
    bad = [c for c in page.cases if c["status"] != "ok"]
    out = f"<h2>{TITLE}</h2>\n"
    return out + html_table(["case", "status", "reason"],
                            [[c["case_id"], cell(c["status"], c["status"]), c["reason"]] for c in bad],
                            empty="<p>None: every case ran.</p>")
