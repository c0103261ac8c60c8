"""The report's last section: every case that was skipped, refused, failed or timed out, with its reason."""

from umscope.report.common import e
from umscope.report.registry import page_section

TITLE = "Skipped and failed cases"


@page_section("skipped", TITLE, order=1000)
def section(page) -> str:
    bad = [c for c in page.cases if c["status"] != "ok"]
    out = f"<h2>{TITLE}</h2>\n"
    if bad:
        return out + ("<table><tr><th>case</th><th>status</th><th>reason</th></tr>" + "".join(
            f"<tr><td>{e(c['case_id'])}</td><td class=\"{e(c['status'])}\">{e(c['status'])}</td>"
            f"<td>{e(c['reason'])}</td></tr>" for c in bad) + "</table>")
    return out + "<p>None: every case ran.</p>"
