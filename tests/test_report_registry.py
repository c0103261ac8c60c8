"""The report's sections: each module of umscope.report registers its own, a family is drawn by one section,
page sections keep their order around the families, and a new section is one registration."""
import re
from pathlib import Path

import pytest

import umscope.report
from umscope import cli
from umscope.report import registry, summary
from umscope.report.html import render
from umscope.store import Store
from umscope.suite import Case

FP = {"host": {"hostname": "h", "kernel": "6", "os": "Linux", "page_size": 4096, "thp": "madvise",
               "memory": {"MemTotal": 1 << 34}},
      "cpu": {"model": "c", "arch": "x86_64", "logical_cpus": 2, "sockets": 1, "caches": []},
      "numa": [], "cuda": {"runtime_version": 13000, "why_no_gpu": "no driver"}, "gpus": []}


def _rec(bench, op, med):
    return {"type": "record", "benchmark": bench, "op": op, "processor": "cpu", "kind": "system", "policy": "",
            "bytes": 1 << 20, "metric": "bandwidth", "unit": "GB/s", "n": 3, "median": med, "min": med,
            "max": med, "spread": 0.0}


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "s.sqlite")
    run = s.create_run("bench", "umscope bench", [], {}, FP)
    s.add_case_result(run, Case("demo-family", "system"), "ok", "", 0, 1, [_rec("demo-family", "read", 7.0)])
    s.add_case_result(run, Case("cpu-stream", "system"), "ok", "", 0, 1, [_rec("cpu-stream", "copy", 9.0)])
    s.add_case_result(run, Case("pingpong", "pinned", {"pair": "cpu-gpu"}), "skipped", "no GPU", 0, 1, [])
    s.finish_run(run, "complete")
    return s, run


@pytest.fixture
def scratch_registry(monkeypatch):
    """Sections registered by a test are forgotten after it."""
    registry.discover()
    monkeypatch.setattr(registry, "_SECTIONS", dict(registry._SECTIONS))
    return registry


def test_every_module_that_declares_a_section_is_registered():
    folder = Path(umscope.report.__file__).parent
    declaring = {f"umscope.report.{p.stem}" for p in folder.glob("*.py")
                 if re.search(r"^@(page|family)_section\(", p.read_text(), re.M)}
    assert len(declaring) >= 20
    registered = {s.module for s in registry.page_sections() + registry.family_sections()}
    assert registered == declaring


def test_each_family_has_one_section_and_page_orders_are_distinct():
    fams = [f for s in registry.family_sections() for f in s.families]
    assert len(fams) == len(set(fams))
    for f in ("copy", "gpu-stream", "latency", "pingpong", "migration", "applications", "profile", "nccl", "mpi"):
        assert registry.for_family(f) is not None, f
    assert registry.for_family("cpu-stream") is None  # drawn as its chart and table
    orders = [s.order for s in registry.page_sections()]
    assert orders == sorted(orders) and len(orders) == len(set(orders))
    names = [s.name for s in registry.page_sections()]
    assert names[:2] == ["status", "headline"] and names[-1] == "skipped"


def test_a_family_drawn_by_two_sections_is_refused(scratch_registry):
    with pytest.raises(ValueError, match="both draw"):
        scratch_registry.family_section("demo", "copy")(lambda bench, recs, page: "")


def test_a_new_section_is_one_registration(store, scratch_registry):
    s, run = store
    before = render(s.run(run), s.cases(run), s.records(run))
    assert 'id="demo-family"' in before and "DEMO-FAMILY-SECTION" not in before

    @scratch_registry.family_section("demo-family")
    def demo(bench, recs, page):
        return f"<p>DEMO-FAMILY-SECTION {bench} {len(recs)} {recs[0]['median']:g}</p>"

    @scratch_registry.page_section("demo-page", "Demo", order=105)
    def demo_page(page):
        return f"<h2 id=demo-page>Demo</h2><p>DEMO-PAGE {len(page.records)} records</p>"

    html = render(s.run(run), s.cases(run), s.records(run))
    assert "<p>DEMO-FAMILY-SECTION demo-family 1 7</p>" in html
    assert "<p>DEMO-PAGE 2 records</p>" in html
    # Page sections above FAMILIES_AT come after every family and in their order.
    pos = {k: html.index(k) for k in ('id="demo-family"', 'id="cpu-stream"', 'id="pingpong"', "id=demo-page",
                                      "id=conditions", "<h2 id=skipped>")}
    assert pos['id="demo-family"'] < pos['id="cpu-stream"'] < pos['id="pingpong"'] < pos["id=demo-page"] \
        < pos["id=conditions"] < pos["<h2 id=skipped>"]
    # The pingpong matrix is drawn although its only case was skipped (it shows why).
    assert "skipped: no GPU" in html.split('id="pingpong"')[1]
    # Without its section the family was drawn as its chart and records table; with it, by the section.
    assert before.count("<svg") == 2 and html.count("<svg") == 1


def test_terminal_summary_is_the_report_module():
    assert cli.print_summary is summary.print_summary
