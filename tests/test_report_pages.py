"""Whole pages built from stored H100/H200 records (docs/) and a SYNTHETIC 8 GiB profile (tests/report_fixtures.py):
their size, their first screen, and 0 contradictions between each chart and its section's tables."""
import re
from html.parser import HTMLParser

import pytest

from report_fixtures import build_all


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    return {name: path.read_text() for name, _, _, path in build_all(tmp_path_factory.mktemp("pages"))}


class _Section(HTMLParser):
    """Per <h2> section: the charts (unit, values drawn) and the table cells' text."""

    def __init__(self):
        super().__init__()
        self.sections = [{"charts": [], "cells": []}]
        self.cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "h2":
            self.sections.append({"charts": [], "cells": []})
        elif tag == "svg":
            cls = (a.get("class") or "").split()
            checked = "chart" in cls and not {"timeline", "samples"} & set(cls)
            self.sections[-1]["charts"].append({"unit": a.get("data-unit"), "values": [], "checked": checked})
        elif "data-v" in a and self.sections[-1]["charts"]:
            self.sections[-1]["charts"][-1]["values"].append(float(a["data-v"]))
        elif tag in ("td", "th"):
            self.cell = []

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.sections[-1]["cells"].append("".join(self.cell))
            self.cell = None


def _numbers(cells):
    out = []
    for c in cells:
        for m in re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", c.replace(",", "")):
            out.append(float(m))
    return out


def contradictions(html) -> list:
    """(chart unit, value) drawn by a chart that its section's tables do not hold, or a unit they do not name."""
    p = _Section()
    p.feed(html)
    bad = []
    for sec in p.sections:
        nums = _numbers(sec["cells"])
        text = " ".join(sec["cells"])
        for ch in sec["charts"]:
            if not ch["checked"]:
                continue
            if ch["unit"] and ch["unit"] not in text:
                bad.append((ch["unit"], "unit not in the table"))
            for v in ch["values"]:
                if not any(abs(n - v) <= 5e-4 * max(abs(v), 1e-12) + 5e-5 * (abs(v) < 1) for n in nums):
                    bad.append((ch["unit"], v))
    return bad


def test_every_chart_agrees_with_its_table(pages):
    checked = 0
    for name, html in pages.items():
        assert contradictions(html) == [], name
        checked += html.count('data-v="')
    assert checked > 500  # the check saw the charts' points


def test_a_contradiction_is_found():
    html = ('<h2 id=a>a</h2><svg class="chart" data-unit="GB/s"><circle class="pt" data-v="12.5"/></svg>'
            '<table><tr><th>median</th><th>unit</th></tr><tr><td>12.6</td><td>GB/s</td></tr></table>')
    assert contradictions(html) == [("GB/s", 12.5)]
    assert contradictions(html.replace("12.6", "12.5")) == []
    assert contradictions(html.replace("12.6", "12.5").replace("<td>GB/s", "<td>MB/s")) == [
        ("GB/s", "unit not in the table")]


def test_profile_page_of_8_gib_stays_under_2_mb_and_answers_first(pages):
    html = pages["profile-8gib"]
    assert len(html.encode()) < 2e6
    answer = html.index("<b>Answer:</b>")
    assert answer < html.index("<svg") and "It migrated <b>8.00 GiB</b> to the GPU" in html
    assert "umscope advise" in html[answer:answer + 3000]
    assert html.count("<circle") < 5000


def test_each_page_has_its_own_title_and_its_answer_before_the_first_chart(pages):
    # Each title names the kind, any verdict but complete, the host, the GPU and the run (one store: distinct ids).
    titles = {n: re.search("<title>(.*?)</title>", h).group(1) for n, h in pages.items()}
    assert titles["interrupted"] == "umscope run (interrupted) · h100-node · NVIDIA H100 80GB HBM3 · run 1"
    assert titles["place-failed"] == "umscope place (failed) · h100-node · NVIDIA H100 80GB HBM3 · run 1"
    assert titles["nccl-2gpu"].startswith("umscope bench nccl · ") and "H200" in titles["nccl-2gpu"]
    for name, html in pages.items():
        status = html.index("<div id=status")
        assert status < html.index("<nav class=toc>") and status < html.find("<svg") % len(html), name
    assert "INTERRUPTED</b> — interrupted by SIGTERM, during case" in pages["interrupted"]
    assert "FAILED</b> — the program exited with status 1" in pages["place-failed"]
    assert "torch.OutOfMemoryError" in pages["place-failed"].split("<nav")[0]
