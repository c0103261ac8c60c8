"""The report's last section: every case that was skipped, refused, failed or timed out, with its reason, and
every planned case that did not run."""

from umscope.report.common import cell, html_table
from umscope.report.registry import page_section
from umscope.report.status import not_run, planned_ids

TITLE = "Skipped and failed cases"


@page_section("skipped", TITLE, order=1000)
def section(page) -> str:
    bad = [c for c in page.cases if c["status"] != "ok"]
    missing = not_run(page.run, page.cases)
    rows = [[c["case_id"], cell(c["status"] or "no outcome", c["status"]), c["reason"]] for c in bad]
    rows += [[cid, cell("not run", "failed"), "planned, no outcome stored"] for cid in missing]
    if planned_ids(page.run):
        empty = f"<p>None: every one of the {len(planned_ids(page.run))} planned cases ran.</p>"
    else:
        why = ("this run kind has one case, the program" if page.run.get("kind") in ("profile", "place")
               else "no plan was stored with this run, so cases that never started cannot be listed")
        empty = f"<p>None of the {len(page.cases)} stored case(s) was skipped or failed ({why}).</p>"
    return f"<h2 id=skipped>{TITLE}</h2>\n" + html_table(["case", "status", "reason"], rows, empty=empty)
