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
    # Nothing loads from outside: no src at all, and links only to the page's own anchors (its contents).
    assert not re.search(r"<[^>]*\s(src|href)\s*=\s*(?![\"']?#)", html, re.I)
    assert "http://" not in html and "https://" not in html
    assert html.count("<svg") == 1 and 'class="bar"' in html
    assert "no HMM" in html  # the skipped case and its reason are shown
    assert "⚠" in html  # the 20% spread record is flagged


def test_write_report_default_path(report_store):
    s, run = report_store
    path = write_report(s, run)
    assert path.exists() and path.name == f"{s.path.name}-run-{run}.html"


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


def _bw(bench, op, kind, med, bytes_=1 << 30, processor="gpu0", **extra):
    r = _rec(op, kind, med)
    r.update(benchmark=bench, processor=processor, bytes=bytes_, **extra)
    return r


@pytest.fixture
def bandwidth_store(tmp_path):
    s = Store(tmp_path / "b.sqlite")
    run = s.create_run("bench bandwidth", "umscope bench bandwidth", [], {}, FP)
    for engine, op in (("ce", "ce-copy"), ("sm", "sm-copy")):
        for src in ("device", "pinned"):
            for dst in ("device", "pinned"):
                recs = [_bw("copy", op, src, 20.0 + n / 2**24, bytes_=n, dst_kind=dst, direction="uni")
                        for n in (1 << 20, 1 << 28)]
                s.add_case_result(run, Case("copy", src, {"dst": dst, "engine": engine}), "ok", "", 0, 1, recs)
    for blocks in (1, 8, 64, 132):
        s.add_case_result(run, Case("gpu-stream", "device", {"blocks": str(blocks), "block": "256"}), "ok", "", 0, 1,
                          [_bw("gpu-stream", "read", "device", 30.0 * blocks, grid=blocks, block=256)])
    s.add_case_result(run, Case("gpu-stream", "device"), "ok", "", 0, 1,
                      [_bw("gpu-stream", "read", "device", 3999.0, grid=1056, block=256)])
    load = "CPU read of system on 16 threads"
    s.add_case_result(run, Case("contention", "pinned", {"gpu-op": "read"}), "ok", "", 0, 1, [
        _bw("contention", "read", "pinned", 50.0, load="none"),
        _bw("contention", "read", "pinned", 40.0, load=load),
        _bw("contention", "read", "system", 100.0, processor="cpu", threads=16, load="none"),
        _bw("contention", "read", "system", 80.0, processor="cpu", threads=16, load="GPU read of pinned"),
        _bw("contention", "sum", "pinned", 120.0, processor="gpu0+cpu", alone_median=150.0)])
    s.finish_run(run, "complete")
    return s, run


def test_bandwidth_sections_heatmap_scaling_contention(bandwidth_store):
    s, run = bandwidth_store
    html = render(s.run(run), s.cases(run), s.records(run))
    # One heatmap per engine, 2x2 cells each, at the largest size only.
    assert html.count('class="chart heatmap"') == 2
    assert html.count('class="cell"') == 8
    assert "256 MiB" in html.split('class="chart heatmap"')[1].split("</svg>")[0]
    # Scaling: a curve over the four block counts, kept apart from the plain gpu-stream bars.
    assert "bandwidth against blocks" in html
    scaling_svg = next(x for x in html.split("<svg") if "bandwidth against blocks" in x)
    assert scaling_svg.count('class="pt"') == 4
    assert "3999" in html
    # Contention: both sides alone and under load, with the change, and the sums.
    table = html.split("GPU load")[1].split("</table>")[0]
    for v in ("50", "40", "-20%", "100", "80", "150", "120"):
        assert f">{v}<" in table, v
    assert "flag" in table  # a 20% fall is flagged


def test_line_chart_log_axis_and_marks():
    from umscope.report.svg import line_chart
    svg = line_chart([("a", [(1024, 1.0), (1 << 20, 2.0), (1 << 30, 100.0)])], "t", "x", "y",
                     marks=[(1 << 25, "L2")], x_fmt=str)
    assert svg.count('class="pt"') == 3 and 'class="mark"' in svg and ">L2<" in svg
    # On a log axis the points are evenly spaced for evenly spaced exponents (2^10, 2^20, 2^30).
    import re as _re
    xs = [float(x) for x in _re.findall(r'class="pt"[^>]*? cx="([0-9.]+)"', svg)]
    assert abs((xs[1] - xs[0]) - (xs[2] - xs[1])) < 1.0
    assert line_chart([], "t", "x", "y") == ""


FP_GPU = dict(FP, gpus=[{"device": 0, "name": "H", "compute_capability": "9.0", "sms": 132, "total_mem": 1 << 36,
                         "l2_bytes": 50 << 20, "shared_per_sm": 228 << 10, "pci_bus_id": "0", "addressing": "none"}],
              cpu=dict(FP["cpu"], caches=[{"level": 1, "type": "Data", "bytes": 48 << 10},
                                          {"level": 3, "type": "Unified", "bytes": 32 << 20}]))


def test_latency_pingpong_and_bandwidth_latency_sections(tmp_path):
    s = Store(tmp_path / "l.sqlite")
    run = s.create_run("run", "umscope run", [], {}, FP_GPU)
    chase = [_bw("latency", "chase", "device", 30.0 * (1 + i), bytes_=1 << (10 + 2 * i), cycles=50.0 * (1 + i),
                 residency="") for i in range(6)]
    for r in chase:
        r.update(metric="latency", unit="ns")
    timer = _bw("latency", "timer", "none", 1755.0, bytes_=0, globaltimer_step_ns=32, clock_rate_attr_mhz=1755)
    timer.update(metric="sm_clock", unit="MHz")
    s.add_case_result(run, Case("latency", "device", {"processor": "gpu"}), "ok", "", 0, 1, chase + [timer])
    s.add_case_result(run, Case("gpu-stream", "device"), "ok", "", 0, 1, [_bw("gpu-stream", "read", "device", 3000.0)])
    pp = _bw("pingpong", "pingpong", "pinned", 1500.0, bytes_=4, processor="cpu-gpu0", pair="cpu-gpu")
    pp.update(metric="round_trip", unit="ns")
    s.add_case_result(run, Case("pingpong", "pinned", {"pair": "cpu-gpu"}), "ok", "", 0, 1, [pp])
    s.add_case_result(run, Case("pingpong", "system", {"pair": "cpu-gpu"}), "skipped", "needs HMM or ATS", 0, 1, [])
    s.finish_run(run, "complete")
    html = render(s.run(run), s.cases(run), s.records(run))
    lat_svg = next(x for x in html.split("<svg") if "load-to-use latency" in x)
    assert lat_svg.count('class="pt"') == 6
    assert "L2 50MiB" in lat_svg and "L1/shared per SM 228KiB" in lat_svg
    assert "1755 MHz" in html and "steps of 32 ns" in html
    matrix = html.split("flag in")[1].split("</table>")[0]
    assert "1500 ns" in matrix and "needs HMM or ATS" in matrix and "not run" in matrix
    # One point: device read 3000 GB/s at the largest footprint's 180 ns.
    fig2 = next(x for x in html.split("<svg") if "read bandwidth against latency" in x)
    assert fig2.count('class="pt"') == 1 and "gpu0 → device: 180, 3000" in fig2


def test_unified_memory_sections(tmp_path):
    s = Store(tmp_path / "u.sqlite")
    run = s.create_run("run", "umscope run", [], {}, FP_GPU)
    mig = _bw("migration", "read", "managed", 900.0, policy="first_touch=cpu", first=8.0, steady=2000.0,
              trial=0, iterations=4, cpu_touch="none", samples=[8.0, 1900.0, 2000.0, 2010.0])
    s.add_case_result(run, Case("migration", "managed,first_touch=cpu", {"op": "read"}), "ok", "", 0, 1, [mig])
    over = [_bw("migration", "read", "managed", 100.0 * d, first=5.0, steady=1000.0 * d, dos=d, trial=0,
                samples=[5.0, 1000.0 * d]) for d in (0.5, 0.9)]
    s.add_case_result(run, Case("migration", "managed", {"dos": "x"}), "ok", "", 0, 1, over)
    ft = [dict(_bw("firsttouch", op, "system", v, processor="cpu", by="cpu", pretouch="none"), unit="ms",
               metric="time") for op, v in (("alloc", 0.1), ("first-touch", 70.0), ("second-touch", 9.0), ("free", 30.0))]
    s.add_case_result(run, Case("firsttouch", "system", {"by": "cpu"}), "ok", "", 0, 1, ft)
    fl = dict(_bw("faults", "touch-serial", "managed", 25.0, stride=65536, pages=512, pages_per_s=40000.0),
              unit="us", metric="time_per_page")
    s.add_case_result(run, Case("faults", "managed", {"mode": "serial"}), "ok", "", 0, 1, [fl])
    il = [dict(_bw("interleave", "interleave", "managed", 40.0 / n, gpu_writes=n, cpu_write="full"), unit="ms",
               metric="time_per_gpu_write") for n in (1, 4, 16)]
    s.add_case_result(run, Case("interleave", "managed", {}), "ok", "", 0, 1, il)
    s.finish_run(run, "complete")
    html = render(s.run(run), s.cases(run), s.records(run))
    curve = next(x for x in html.split("<svg") if "bandwidth per iteration" in x)
    assert curve.count('class="pt"') == 4  # one point per iteration
    assert ">8<" in html and ">2000<" in html  # first and steady in the table
    dos = next(x for x in html.split("<svg") if "degree of oversubscription" in x)
    assert dos.count('class="pt"') == 4 and "GPU memory full" in dos
    assert "second-touch" in html and "µs per page" in html and ">25<" in html
    inter = next(x for x in html.split("<svg") if "GPU writes in a row" in x)
    assert inter.count('class="pt"') == 3
    findings = html.split("<h2 id=um-findings>")[1].split("</ul>")[0]
    assert "first GPU pass ran at 8 GB/s and later passes at 2000 GB/s (250×)" in findings
    assert "<b>agrees</b>" in findings


def test_applications_section(tmp_path):
    s = Store(tmp_path / "a.sqlite")
    run = s.create_run("run", "umscope run", [], {}, FP_GPU)

    def app(name, mode, total, iters, **extra):
        r = _bw(name, "app", "managed", iters[len(iters) // 2], app=name, mode=mode, total_ms=total,
                total_excl_init_ms=total - 10, init_ms=10.0, compute_ms=sum(iters), iterations=len(iters),
                samples=iters, checksum="ab12", checked=True, **extra)
        r.update(metric="time_per_iteration", unit="ms")
        return r

    for mode, total, iters in (("explicit", 110.0, [5.0, 5.0, 5.0]), ("managed", 210.0, [100.0, 5.0, 5.0]),
                               ("pinned", 60.0, [40.0, 40.0, 40.0])):
        s.add_case_result(run, Case("jacobi2d", None, {"mode": mode}), "ok", "", 0, 1,
                          [app("jacobi2d", mode, total, iters, bandwidth_gbps=2000.0)])
    s.add_case_result(run, Case("gemm", None, {"mode": "explicit"}), "ok", "", 0, 1,
                      [app("gemm", "explicit", 50.0, [2.0, 2.0], precision="fp16", variant="cublas",
                           place_a="pinned", place_b="mode", place_c="mode", m=8, n_cols=8, k=8, gflops=5e5)])
    s.add_case_result(run, Case("jacobi2d", None, {"mode": "system"}), "skipped", "needs HMM or ATS", 0, 1, [])
    s.finish_run(run, "complete")
    html = render(s.run(run), s.cases(run), s.records(run))
    assert 'id="applications"' in html
    speed = next(x for x in html.split("<svg") if "speedup over explicit" in x)
    # explicit 100 ms without init; managed 200 -> 0.5x; pinned 50 -> 2x.
    assert "jacobi2d → managed: 0.50 ×" in speed and "jacobi2d → pinned: 2.00 ×" in speed
    it = next(x for x in html.split("<svg") if "jacobi2d: time per iteration" in x)
    assert it.count('class="pt"') == 9
    assert "gemm fp16 a=pinned" in html and "500" in html.split("GEMM placement")[1]
    assert "needs HMM or ATS" in html


def test_chart_of_records_some_without_a_size():
    # umscope place stores allocation records with and without a size; the report must still render.
    from umscope.report import html
    rec = {"op": "alloc", "kind": "device", "policy": "", "median": 1.0, "min": 1.0, "max": 1.0, "unit": "B",
           "metric": "bytes", "threads": None, "extra": {}}
    out = html._chart("place", [dict(rec, bytes=None), dict(rec, bytes=4096, kind="managed")])
    assert "device" in out and "managed · 4 KiB" in out
