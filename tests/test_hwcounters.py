"""Hardware counters (issue 18 items 2 and 4): libumcounters' JSON lines -> per-kernel bytes, totals, series;
the report's comparison with the unified-memory trace. CPU only (synthetic counter files); the GPU tests
that check counters against known bytes are in test_hwcounters_gpu.py."""

import json
import time

import pytest

from umscope.profile import hwcounters as hc
from umscope.report import link_traffic as lt

GiB = 1 << 30


def _write(path, lines):
    with open(path, "w") as f:
        for x in lines:
            f.write((x if isinstance(x, str) else json.dumps(x)) + "\n")
    return str(path)


def _counter_file(tmp_path, cut=False):
    start = {"k": "start", "t": 1_000_000_000, "w": 5_000_000_000_000, "kernel": True, "sample": True}
    lines = [start,
             {"k": "config", "profiler": "range", "dev": 0, "chip": "GH100",
              "metrics": ["dram__bytes_read.sum", "lts__t_sectors_srcunit_tex_aperture_sysmem_op_read.sum"], "passes": 1},
             {"k": "range", "dev": 0, "i": 0, "n": "read_kernel", "rn": "0",
              "m": {"dram__bytes_read.sum": 100.0, "lts__t_sectors_srcunit_tex_aperture_sysmem_op_read.sum": 10.0}},
             {"k": "range", "dev": 0, "i": 1, "n": "write_kernel", "rn": "1",
              "m": {"dram__bytes_read.sum": 7.0, "lts__t_sectors_srcunit_tex_aperture_sysmem_op_read.sum": 0.0}},
             {"k": "range", "dev": 0, "i": 2, "n": "read_kernel", "rn": "2",
              "m": {"dram__bytes_read.sum": 50.0, "lts__t_sectors_srcunit_tex_aperture_sysmem_op_read.sum": 1.0}}]
    # Ten 1 ms samples from t = 1.0 s (CUPTI clock): 0.1 GiB read over PCIe in samples 3..6 only.
    for i in range(10):
        busy = 3 <= i <= 6
        lines.append({"k": "sample", "dev": 0, "i": i, "s": 1_000_000_000 + i * 1_000_000,
                      "e": 1_000_000_000 + (i + 1) * 1_000_000,
                      "m": {"pcie__read_bytes.sum": 0.025 * GiB if busy else 0.0, "pcie__write_bytes.sum": 512.0,
                            "dram__bytes_write.sum": 0.025 * GiB if busy else 0.0}})
    lines.append('{"k":"sample","dev":0,"i":10,"s":')  # a line cut by a crash is skipped
    if not cut:
        lines.append({"k": "end"})
    return _write(tmp_path / "c.jsonl", lines)


def test_read_kernels_totals_and_series(tmp_path):
    p = hc.read(_counter_file(tmp_path))
    assert p["complete"] and not p["refused"] and len(p["ranges"]) == 3 and len(p["samples"]) == 10
    table = {r["kernel"]: r for r in hc.kernel_table(p)}
    assert table["read_kernel"]["launches"] == 2
    assert table["read_kernel"]["bytes"]["dram_read"] == 150.0
    assert table["read_kernel"]["bytes"]["sysmem_read"] == 11 * 32  # sectors are 32-byte L2 sectors
    assert table["write_kernel"]["bytes"] == {"dram_read": 7.0, "sysmem_read": 0.0}
    tot = hc.totals(p)
    assert tot["pcie_read"] == pytest.approx(0.1 * GiB) and tot["pcie_write"] == 10 * 512
    # An interval on the wall clock: start.w + (ts - start.t). Samples 3..6 lie in [5000.003, 5000.007] s.
    part = hc.totals(p, interval=(5000.003, 5000.0065))
    assert part["pcie_read"] == pytest.approx(0.1 * GiB)
    none = hc.totals(p, interval=(5000.0, 5000.003))
    assert none["pcie_read"] == 0
    ser = hc.series(p, 0, t0=5000.0)
    t, rate = zip(*ser["pcie_read"])
    assert t[0] == pytest.approx(0.0005) and rate[4] == pytest.approx(0.025 * GiB / 1e-3)
    assert max(rate) == pytest.approx(25 * GiB) and rate[0] == 0


def test_series_merges_to_at_most_max_points_and_keeps_bytes(tmp_path):
    p = hc.read(_counter_file(tmp_path))
    ser = hc.series(p, 0, t0=5000.0, max_points=3)
    pts = ser["pcie_read"]
    assert len(pts) <= 3
    # rate x duration of each group adds back to the bytes: groups of 4, 4 and 2 samples of 1 ms
    widths = [4e-3, 4e-3, 2e-3]
    assert sum(r * w for (_, r), w in zip(pts, widths)) == pytest.approx(0.1 * GiB)


def test_records_name_their_source(tmp_path):
    p = hc.read(_counter_file(tmp_path))
    recs = hc.records(p, t0=5000.0)
    ops = {r["op"]: r for r in recs}
    assert ops["counter_totals"]["source"] == hc.PM and ops["kernel_traffic"]["source"] == hc.RANGE
    assert ops["kernel_traffic"]["launches"] == 3 and ops["kernel_traffic"]["passes"] == 1
    assert ops["counter_series"]["clock"] == "program"
    assert ops["counter_totals"]["by_metric"]["pcie_read"] == pytest.approx(0.1 * GiB)


def test_refused_and_cut_files_are_reported(tmp_path):
    path = _write(tmp_path / "r.jsonl", [{"k": "start", "t": 1, "w": 2},
                                         {"k": "error", "what": "range profiler enable", "dev": 0, "code": 35,
                                          "cupti": "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"}])
    p = hc.read(path)
    assert p["refused"] and not p["complete"]
    text = " ".join(hc.notes(p, ["kernel"]))
    assert "administrators" in text and "ended early" in text and "range profiler enable" in text
    assert "wrote no counter data" in hc.notes(hc.read(tmp_path / "missing.jsonl"), ["sample"])[0]


def test_parse_modes():
    assert hc.parse_modes("all") == ("sample",) and hc.parse_modes(None) == ("sample",)
    assert hc.parse_modes("kernel") == ("kernel",) and hc.parse_modes(" sample ") == ("sample",)
    for bad in ("kernels", ",", "sample,foo"):
        with pytest.raises(ValueError, match="--counters takes kernel or sample"):
            hc.parse_modes(bad)
    with pytest.raises(ValueError, match="HARDWARE_BUSY"):
        hc.parse_modes("kernel,sample")
    with pytest.raises(ValueError):
        hc.environment("x", ("kernel",), counter_set="dram")
    env = hc.environment("/tmp/x", ("kernel",), counter_set="memory", period_us=500)
    assert env["UMSCOPE_COUNTER_SET"] == "memory" and env["UMSCOPE_COUNTER_PERIOD_US"] == "500"


def _um(htod, dtoh=0, copies=None):
    r = {"op": "um_trace", "processor": "gpu0", "totals": {"htod": htod, "dtoh": dtoh}}
    if copies is not None:
        r["memcpy_by_direction"] = copies
    return r


def _totals(read, write, source=hc.PM):
    return {"op": "counter_totals", "processor": "gpu0", "source": source,
            "by_metric": {"pcie_read": read, "pcie_write": write}}


def test_comparison_flags_more_than_five_percent_outside_the_data_range():
    # 1 GiB of 128-byte completions counts 1 GiB x 140/128 read; of 256-byte ones 1 GiB x 268/256
    small, large = GiB * 140 / 128, GiB * 268 / 256
    lo, hi = lt.payload_range("htod", small)
    assert lo == pytest.approx(GiB) and hi > GiB
    assert lt.payload_range("htod", large)[1] == pytest.approx(GiB)
    rows = {r["direction"]: r for r in lt.comparison([_um(GiB, 0), _totals(small, 0)])}
    assert rows["htod"]["disagreement"] == 0 and not rows["htod"]["flag"]
    # traced 6% below the least data the counted packets can carry: flagged; 3% below: not
    rows = {r["direction"]: r for r in lt.comparison([_um(0.94 * GiB), _totals(small, 0)])}
    assert rows["htod"]["flag"] and rows["htod"]["disagreement"] == pytest.approx(-0.06)
    rows = {r["direction"]: r for r in lt.comparison([_um(0.97 * GiB), _totals(small, 0)])}
    assert not rows["htod"]["flag"]
    # more traced than the packets can carry: flagged
    rows = {r["direction"]: r for r in lt.comparison([_um(1.2 * GiB), _totals(large, 0)])}
    assert rows["htod"]["flag"] and rows["htod"]["disagreement"] == pytest.approx(0.2)
    # the 84% of the Needleman-Wunsch trace (issue 18) is flagged whatever the completion size
    rows = {r["direction"]: r for r in lt.comparison([_um(0.84 * 2 * GiB), _totals(2 * large, 0)])}
    assert rows["htod"]["flag"]
    # copies the program made count on the traced side
    rows = {r["direction"]: r for r in lt.comparison([_um(0.5 * GiB, 0, {"htod": 0.5 * GiB}), _totals(large, 0)])}
    assert not rows["htod"]["flag"] and rows["htod"]["counted"] == GiB
    # copy records left out (memcpy_by_direction None): the traced side is unknown, never flagged on migrations alone
    no_copies = dict(_um(0.5 * GiB), memcpy_by_direction=None)
    rows = {r["direction"]: r for r in lt.comparison([no_copies, _totals(large, 0)])}
    assert rows["htod"]["counted"] is None and not rows["htod"]["flag"] and not rows["htod"]["copies_recorded"]
    assert "copies not recorded (--copies)" in lt.section([no_copies, _totals(large, 0)])
    # device to host: the read requests come out of the written bytes first
    lo, hi = lt.payload_range("dtoh", GiB * 144 / 128 + small * 16 / 140 + lt.HOUSEKEEPING * small, small)
    assert lo == pytest.approx(GiB) and hi > GiB
    # a few hundred KiB apart on a small run is counter granularity, not a disagreement
    rows = {r["direction"]: r for r in lt.comparison([_um(1 << 20, 0), _totals((1 << 20) * 1.5, 0)])}
    assert not rows["htod"]["flag"]
    # NVML's counters: RX is what the GPU received (host to device)
    nv = {"op": "counter_totals", "processor": "gpu0", "source": hc.NVML, "by_metric": {"pcie_rx": GiB, "pcie_tx": 0}}
    rows = {r["direction"]: r for r in lt.comparison([_um(0.5 * GiB), nv])}
    assert rows["htod"]["link"] == GiB and rows["htod"]["flag"]


def test_section_shows_flag_source_and_kernels(tmp_path):
    p = hc.read(_counter_file(tmp_path))
    recs = hc.records(p, t0=5000.0) + [_um(0.05 * GiB, 0)]
    html = lt.section(recs)
    # the verdict cell carries both classes (flag: red), not a stray attribute named flag
    assert "more than 5% apart" in html and '<td class="num flag">' in html
    assert hc.PM in html and hc.RANGE in html and "read_kernel" in html and "<svg" in html
    assert lt.section([_um(1, 1)]) == ""
    # without a trace the totals are shown alone, and nothing is flagged
    alone = lt.section(hc.records(p, t0=5000.0))
    assert "flag" not in alone and "pcie_read" in alone


def test_iterations_start_at_the_repeating_kernel():
    from umscope.report import traffic_figs as tf
    seq = [("init", {"pcie_read": 5.0})] + [(k, {"pcie_read": float(i), "dram_read": 1.0})
                                            for i in range(3) for k in ("stats", "q0", "update")]
    assert tf.opening_kernel([n for n, _ in seq]) == "stats"
    setup, its = tf.iterations(seq)
    assert setup == {"pcie_read": 5.0} and len(its) == 3
    assert its[2] == {"pcie_read": 6.0, "dram_read": 3.0}
    assert tf.opening_kernel(["a", "b"]) is None  # nothing repeats: no iterations
    rows = tf.fig10_rows([10.0, 2.0, 2.0], seq, seq)
    assert [r["ms"] for r in rows] == [10.0, 2.0, 2.0] and rows[1]["remote_read"] == 3.0
    assert rows[0]["local_read"] == 3.0
    md = tf.fig10_markdown("managed", rows)
    assert md.count("\n") == 4 and "| 1 | 10.00 |" in md


def test_tiers_sum_their_metrics_and_summarise_the_busy_part():
    from umscope.report import traffic_figs as tf
    series = {"l1_l2": [(0, 0.0), (1, 100e9), (2, 100e9), (3, 1e9)],
              "dram_read": [(0, 0.0), (1, 10e9), (2, 20e9), (3, 0.0)], "dram_write": [(0, 0.0), (1, 5e9), (2, 5e9), (3, 0.0)],
              "pcie_read": [(0, 1e9), (1, 2e9), (2, 2e9), (3, 0.0)]}
    t = tf.tiers(series)
    assert t["GPU memory"] == [(0, 0.0), (1, 15e9), (2, 25e9), (3, 0.0)] and t["host link"][0] == (0, 1e9)
    s = tf.tier_summary(t)
    assert s["GPU memory"]["mean_gbps"] == pytest.approx(20.0) and s["L1 <-> L2"]["points"] == 2
    assert "<svg" in tf.fig12_html("qv", t) and tf.fig12_html("qv", {}) == ""


def test_session_injects_the_library_or_rides_in_the_tracer(tmp_path, monkeypatch):
    lib = tmp_path / "libumcounters.so"
    lib.write_text("")
    monkeypatch.setenv("UMSCOPE_UMCOUNTERS", str(lib))
    s = hc.Session(("sample",), "link")
    env = {}
    s.prepare(env)
    assert env["CUDA_INJECTION64_PATH"] == str(lib) and env["UMSCOPE_COUNTERS"] == "sample"
    assert env["UMSCOPE_COUNTERS_FILE"] == s.path
    env = {"CUDA_INJECTION64_PATH": "/x/libumtrace.so"}
    s.prepare(env, tracer_injected=True)
    assert env["CUDA_INJECTION64_PATH"] == "/x/libumtrace.so" and env["UMSCOPE_COUNTERS_FILE"] == s.path
    recs, notes = s.finish()
    assert recs == [] and any("wrote no counter data" in n for n in notes)
    monkeypatch.setenv("UMSCOPE_UMCOUNTERS", str(tmp_path / "absent.so"))
    s = hc.Session(("kernel",))
    s.prepare({})
    assert any("without libumcounters" in n for n in s.notes)
    s.finish()


def test_nvml_link_totals_are_counter_differences(monkeypatch):
    from umscope import nvml
    state = {"n": 0}

    def fake(bus):
        state["n"] += 1
        return {"tx": 1000 + 10 * state["n"], "rx": 5000 + 100 * state["n"]}
    monkeypatch.setattr(nvml, "pcie_bytes", fake)
    link = hc.NvmlLink(["0000:01:00.0"], period=0.001)
    link.start()
    time.sleep(0.02)
    link.stop.set()
    link.join()
    pts = link.points[0]
    assert len(pts) >= 2
    assert link.totals(0) == {"pcie_tx": 10 * (len(pts) - 1), "pcie_rx": 100 * (len(pts) - 1)}
    recs = hc.records(hc.read("/nonexistent"), link)
    assert recs[0]["source"] == hc.NVML and recs[0]["by_metric"]["pcie_rx"] == 100 * (len(pts) - 1)


def test_nvml_link_totals_survive_the_32_bit_wrap():
    link = hc.NvmlLink(["x"])
    top = (1 << 32) - 1000
    link.points[0] = [(0.0, top, top), (0.1, 500, 3000), (0.2, 1500, 9000)]
    assert link.totals(0) == {"pcie_tx": 1000 + 500 + 1000, "pcie_rx": 1000 + 3000 + 6000}


def test_section_shows_iterations_and_tiers(tmp_path):
    seq = [{"k": "start", "t": 0, "w": 0}]
    for i in range(3):
        for name in ("stats", "update"):
            seq.append({"k": "range", "dev": 0, "i": len(seq), "n": name,
                        "m": {"pcie__read_bytes.sum": 1e9 if i == 0 else 0.0, "pcie__write_bytes.sum": 0.0}})
    for i in range(5):
        seq.append({"k": "sample", "dev": 0, "i": i, "s": i * 10**6, "e": (i + 1) * 10**6,
                    "m": {"lts__t_sectors_srcunit_tex.sum": 1e6, "dram__bytes_read.sum": 1e6,
                          "pcie__read_bytes.sum": 1e5}})
    seq.append({"k": "end"})
    html = lt.section(hc.records(hc.read(_write(tmp_path / "it.jsonl", seq)), t0=0.0))
    assert "per iteration" in html and "three tiers" in html
    assert html.count("<tr><td>") >= 3 + 2  # three iterations, two kernels


def test_profile_counters_bad_value_is_a_usage_error(store_path):
    from conftest import run_cli
    res = run_cli("profile", "--store", store_path, "--counters", "kernels", "--", "true")
    assert res.returncode == 2 and "--counters" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_profile_counters_without_cuda_say_so_and_go_on(store_path):
    from conftest import run_cli
    res = run_cli("profile", "--store", store_path, "--counters", "--json", "--", "true")
    assert res.returncode == 0, res.stderr
    recs = json.loads(res.stdout.strip().splitlines()[-1])
    notes = " ".join(next(r for r in recs if r["op"] == "run")["notes"])
    assert "--counters:" in notes


def test_linkbytes_plan_and_usage():
    from conftest import umbench
    from umscope import plans
    cases = plans.bench_plan("linkbytes", {})
    assert [c.params["op"] for c in cases] == ["zerocopy-read", "h2d-copy", "managed-migrate"]
    assert all(c.params["bytes"] == "1g" for c in cases)
    bad = umbench("run", "linkbytes", "--op", "bogus")
    assert bad.returncode == 2 and "unknown op" in bad.stdout + bad.stderr
    bad = umbench("run", "linkbytes", "--gap-ms", "-1")
    assert bad.returncode == 2 and "--gap-ms" in bad.stdout + bad.stderr


def test_stored_profile_report_has_the_counter_section(tmp_path):
    """Through the store and the HTML report, as `umscope profile --um-trace --counters` leaves them."""
    from umscope.report.html import render
    from umscope.store import Store
    from umscope.suite import Case
    p = hc.read(_counter_file(tmp_path))
    recs = hc.records(p, t0=5000.0) + [dict(_um(0.05 * GiB, 0), type="record", benchmark="profile", metric="um_events",
                                            unit="", n=1, median=1.0, min=1.0, max=1.0, value=1.0)]
    recs.append({"type": "record", "benchmark": "profile", "op": "run", "processor": "host", "metric": "wall_time",
                 "unit": "s", "n": 1, "median": 1.0, "min": 1.0, "max": 1.0, "value": 1.0, "command": "x",
                 "exit_status": 0, "samples_taken": 1, "period_s": 0.1, "sampler_overhead": 0.0, "notes": []})
    s = Store(str(tmp_path / "s.sqlite"))
    run = s.create_run("profile", "umscope profile --counters -- x", [], {}, {"host": {}})
    s.add_case_result(run, Case("profile", None, {"command": "x"}), "ok", "", 0, 1, recs)
    s.finish_run(run, "complete")
    html = render(s.run(run), s.cases(run), s.records(run))
    assert "Link and memory traffic" in html and "more than 5% apart" in html and hc.PM in html


def test_library_found_beside_the_tracer(tmp_path, monkeypatch):
    monkeypatch.delenv("UMSCOPE_UMCOUNTERS", raising=False)
    (tmp_path / "libumtrace.so").write_text("")
    monkeypatch.setenv("UMSCOPE_UMTRACE", str(tmp_path / "libumtrace.so"))
    installed = hc.library_path()
    assert installed is None or not installed.startswith(str(tmp_path))
    (tmp_path / "libumcounters.so").write_text("")
    assert hc.library_path() == str(tmp_path / "libumcounters.so")


def test_overhead_bench_phases_place_each_phase_in_the_programs_life(tmp_path, monkeypatch):
    """bench/um_trace_overhead.py --phases: the program runs with the variables `umscope profile` gives it, and
    the phase records the libraries write (wall-clock ns) come back as seconds after the program's start and
    milliseconds long; summed phases (w0 = 0) have no start. A stand-in program writes the records here."""
    import importlib.util
    import pathlib
    import sys
    root = pathlib.Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("um_trace_overhead", root / "bench" / "um_trace_overhead.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for name in ("libumtrace.so", "libumcounters.so"):
        (tmp_path / name).write_text("")
    monkeypatch.setenv("UMSCOPE_UMTRACE", str(tmp_path / "libumtrace.so"))
    monkeypatch.setenv("UMSCOPE_UMCOUNTERS", str(tmp_path / "libumcounters.so"))
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import json, os, time\n"
        "now = time.time_ns()\n"
        "for var, what in (('UMSCOPE_TRACE_FILE', 'injection'), ('UMSCOPE_COUNTERS_FILE', 'PM sampling start')):\n"
        "    if os.environ.get(var):\n"
        "        with open(os.environ[var], 'w') as f:\n"
        "            f.write(json.dumps({'k': 'phase', 'what': what, 'dev': 0, 'w0': now, 'w1': now + 5_000_000}) + '\\n')\n"
        "            f.write(json.dumps({'k': 'phase', 'what': 'run: decode (summed)', 'dev': 0, 'w0': 0, 'w1': 7_000_000, 'n': 3}) + '\\n')\n"
        "            f.write(json.dumps({'k': 'end', 'w': time.time_ns()}) + '\\n')\n"
        "print(json.dumps({'type': 'record', 'total_ms': 12.5, 'compute_ms': 10.0}))\n"
        "print(os.environ.get('CUDA_INJECTION64_PATH', ''))\n")
    rows = bench.phases([sys.executable, str(prog)], 1, bench.VARIANTS, ["UMSCOPE_COUNTER_EARLY=0 X=1"])
    by = {(r["variant"], tuple(sorted(r["env"].items()))): r for r in rows}
    assert by[("plain", ())]["app_ms"] == 12.5 and "trace" not in by[("plain", ())]
    assert by[("counters", ())]["compute_ms"] == 10.0 and "trace" not in by[("counters", ())]
    both = by[("trace+counters", ())]
    for f, what in (("trace", "injection"), ("counters", "PM sampling start")):
        timed = next(p for p in both[f] if p["what"] == what)
        assert timed["ms"] == 5.0 and 0 <= timed["at_s"] < both["wall_s"]
        summed = next(p for p in both[f] if p["what"].startswith("run:"))
        assert summed["at_s"] is None and summed["ms"] == 7.0 and summed["n"] == 3
        assert 0 <= both[f + "_end_to_exit_s"] < both["wall_s"]
    assert by[("trace+counters", (("UMSCOPE_COUNTER_EARLY", "0"), ("X", "1")))]["rc"] == 0
