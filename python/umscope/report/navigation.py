"""Ways around a report: its table of contents (from the sections' headings), the `umscope export` command
that writes each section's numbers, and the line naming a run of the store to compare this one with."""

import re
import time

from umscope.report.common import e
from umscope import export as export_formats

_H2 = re.compile(r'<h2 id="?([^">\s]+)"?>(.*?)</h2>', re.S)


def contents(html) -> str:
    """A table of contents linking every <h2 id=...> of the page's body."""
    items = [(i, re.sub(r"<[^>]+>", "", t)) for i, t in _H2.findall(html)]
    if len(items) < 2:
        return ""
    return ("<nav class=toc><b>Contents</b>" + "".join(f'<a href="#{i}">{t}</a>' for i, t in items) + "</nav>")


def export_line(run_id, family=None) -> str:
    """The command that writes a section's records (CSV; --format jsonl keeps every field)."""
    return (f"<p class=export>Numbers: <code>{e(export_formats.command(run_id, family))}</code> "
            "(<code>--format jsonl</code> keeps every field)</p>")


def reference_run(run, others):
    """The run of the store this one compares with: the newest earlier run of the same kind on the same GPU
    model, preferring another host (a reference node) over this one; None where the store holds none."""
    same = [o for o in others or [] if o["id"] != run["id"] and o.get("kind") == run.get("kind")
            and o.get("gpu") == run.get("gpu") and o.get("status") == "complete"]
    if not same:
        return None
    other_host = [o for o in same if o.get("hostname") != run.get("hostname")]
    return max(other_host or same, key=lambda o: o["id"])


def compare_line(run, others) -> str:
    if others is None:
        return ""
    ref = reference_run(run, others)
    if ref is None:
        return (f"<br>Compare with: the store holds no other complete <code>umscope {e(run.get('kind'))}</code> "
                f"on this GPU model.")
    when = time.strftime("%Y-%m-%d", time.localtime(ref["started"])) if ref.get("started") else "?"
    where = "another node" if ref.get("hostname") != run.get("hostname") else "this node, earlier"
    return (f"<br>Compare with: run {e(ref['id'])} ({where}: {e(ref.get('hostname'))}, {e(when)}) — "
            f"<code>umscope compare {e(ref['id'])} {e(run['id'])}</code>")
