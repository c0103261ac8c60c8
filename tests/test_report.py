"""The HTML report: self-contained, escaped, and rendered by a real browser."""
import re
import shutil
import subprocess

import pytest

from umscope.report.html import render, write_report
from umscope.store import Store
from umscope.suite import Case

EVIL = '<script>alert("x")</script>&<img src=x onerror=alert(1)>'
FP = {"host": {"hostname": EVIL, "kernel": "6", "os": "Linux", "page_size": 4096, "thp": "madvise",
               "memory": {"MemTotal": 1 << 34}},
      "cpu": {"model": EVIL, "arch": "x86_64", "logical_cpus": 2, "sockets": 1, "caches": []},
      "numa": [{"id": 0, "mem_bytes": 1 << 34, "cpus": [0, 1]}],
      "cuda": {"runtime_version": 13000, "why_no_gpu": "no driver"}, "gpus": []}


def _rec(op, kind, med, spread=0.01, policy=""):
    return {"type": "record", "benchmark": "gpu-stream", "op": op, "processor": "gpu0", "kind": kind,
            "policy": policy, "bytes": 1 << 30, "metric": "bandwidth", "unit": "GB/s", "n": 5, "median": med,
            "min": med * (1 - spread / 2), "max": med * (1 + spread / 2), "spread": spread}


@pytest.fixture
def report_store(tmp_path):
    s = Store(tmp_path / "s.sqlite")
    run = s.create_run("run", "umscope run --label " + EVIL, [], {}, FP, label=EVIL)
    recs = [_rec(op, k, v * f, policy=p) for k, p, v in (("device", "", 3000.0), ("pinned", "first_touch=cpu", 50.0))
            for op, f in (("read", 1.0), ("copy", 0.95))]
    recs.append(_rec("triad", EVIL, 10.0, spread=0.2))
    s.add_case_result(run, Case("gpu-stream", "device"), "ok", "", 0, 1, recs)
    s.add_case_result(run, Case("gpu-stream", "system"), "skipped", "no HMM " + EVIL, 0, 1, [])
    s.finish_run(run, "complete")
    return s, run


def test_every_string_is_escaped_and_nothing_external(report_store):
    s, run = report_store
    html = render(s.run(run), s.cases(run), s.records(run))
    assert "<script" not in html.lower()
    assert "<img" not in html.lower()
    assert "&lt;script&gt;" in html
    assert not re.search(r"<[^>]*\s(src|href)\s*=", html, re.I)
    assert "http://" not in html and "https://" not in html
    assert html.count("<svg") == 1 and 'class="bar"' in html
    assert "no HMM" in html  # the skipped case and its reason are shown
    assert "⚠" in html  # the 20% spread record is flagged


def test_write_report_default_path(report_store):
    s, run = report_store
    path = write_report(s, run)
    assert path.exists() and path.name == f"run-{run}.html"


@pytest.mark.browser
@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_report_renders_in_chromium_with_plots(report_store, tmp_path):
    from PIL import Image

    s, run = report_store
    path = write_report(s, run, tmp_path / "report.html")
    shot = tmp_path / "shot.png"
    res = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--enable-logging=stderr", "--v=0", "--window-size=1100,1400", f"--screenshot={shot}",
         path.as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.exists(), res.stderr[-2000:]
    console = [l for l in res.stderr.splitlines() if "CONSOLE" in l]
    assert not console, console
    img = Image.open(shot).convert("RGB")
    colors = img.getcolors(maxcolors=1 << 20)
    present = {c for _, c in colors}
    # The first two palette colours are the bars of the first two series.
    assert (0x1F, 0x77, 0xB4) in present and (0xFF, 0x7F, 0x0E) in present
    # Not a blank page: plenty of non-white pixels.
    nonwhite = sum(n for n, c in colors if c != (255, 255, 255))
    assert nonwhite > 0.02 * img.width * img.height
