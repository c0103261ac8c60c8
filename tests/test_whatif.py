"""The calibrated model's arithmetic, the trace conversion, the DOS-sweep helpers and the what-if commands
(CPU only)."""
import json

import pytest

from umscope import cli
from umscope.model import calibrated, dos
from umscope.model import simulate as sim
from umscope.model import trace as umtrace

GIB = 1 << 30

# A synthetic machine: round numbers so every predicted phase can be worked out by hand.
FIG = {"h2d_gbps": 10.0, "d2h_gbps": 10.0, "migrate_gbps": 8.0, "first_pass_gbps": 2.0, "first_pass2_gbps": 1.0,
       "remote_gbps": 5.0, "host_gbps": 20.0, "checksum_gbps": 10.0, "cpu_fault_us_4k": 1.0,
       "gpu_first_touch_ms_per_gib": 50.0, "cpu_first_touch_ms_per_gib": 100.0, "system_first_touch_ms_per_gib": 10.0,
       "pinned_alloc_ms_per_gib": 500.0, "pinned_free_ms_per_gib": 100.0, "populate_prefetch_gbps": 20.0,
       "migrate_d2h_gbps": 4.0, "managed_free_gpu_ms_per_gib": 10.0}
# triad as the application declares it: a (out), b and c (in), 1 GB each.
CAL = {"data_bytes": 3e9, "iterations": 4, "compute_ms": 40.0, "context_ms": 100.0, "alloc_ms": 1.0, "init_ms": 30.0,
       "back_ms": 110.0, "free_ms": 2.0, "traffic_bytes": 1e9, "in_bytes": 2e9, "out_bytes": 1e9, "inout_bytes": 0,
       "arrays": "a:out:1000000000,b:in:1000000000,c:in:1000000000"}


def test_model_managed_arithmetic_exact():
    # Managed: init = explicit's minus the pageable first touch of the 2 GB it initialises, plus the managed
    # first touch; compute = 4 x 10 ms + 2 GB at the two-array first-pass rate (1 GB/s) + GPU first touch of
    # the 1 GB output; back = CPU faults (1 us per 4 KiB) + checksum at 10 GB/s.
    p = calibrated.predict("triad", "managed", CAL, FIG)
    assert p["init_ms"] == pytest.approx(30.0 - 10.0 * 2e9 / GIB + 100.0 * 2e9 / GIB)
    assert p["compute_ms"] == pytest.approx(40.0 + 2000.0 + 50.0 * 1e9 / GIB)
    assert p["back_ms"] == pytest.approx(1e-3 * 1e9 / 4096 + 100.0)
    assert p["free_ms"] == pytest.approx(10.0 * 3e9 / GIB)  # the managed free figure, not explicit's
    assert p["transfer_ms"] == 0.0
    assert p["total_ms"] == pytest.approx(sum(p[k] for k in calibrated.PHASES))
    # One large input: the one-array first-pass rate (2 GB/s)
    one = dict(CAL, arrays="a:out:1000000000,b:in:2000000000,c:in:1000")
    assert calibrated.predict("triad", "managed", one, FIG)["compute_ms"] == pytest.approx(
        40.0 + 1000.0 + 50.0 * 1e9 / GIB)


def test_model_prefetch_pinned_and_explicit_exact():
    p = calibrated.predict("triad", "managed-prefetch", CAL, FIG)
    # inputs prefetched at 8 GB/s, the never-touched output populated by the prefetch at 20 GB/s
    assert p["transfer_ms"] == pytest.approx(2e9 / 8e9 * 1e3 + 1e9 / 20e9 * 1e3)
    assert p["compute_ms"] == pytest.approx(40.0)
    assert p["back_ms"] == pytest.approx(1e9 / 4e9 * 1e3 + 100.0)
    q = calibrated.predict("triad", "pinned", CAL, FIG)
    # The GPU reads 2/3 of the 1 GB per iteration over the link at 5 GB/s (133 ms > the 10 ms kernel) while
    # the writes go the other way at once.
    assert q["compute_ms"] == pytest.approx(4 * 1e9 * 2 / 3 / 5e9 * 1e3)
    assert q["alloc_ms"] == pytest.approx(500.0 * 3e9 / GIB)
    assert q["free_ms"] == pytest.approx(100.0 * 3e9 / GIB)
    # Both directions at once capped by the measured read-while-writing rate (4 GB/s for the whole 1 GB)
    assert calibrated.predict("triad", "pinned", CAL, dict(FIG, remote_copy_gbps=4.0))["compute_ms"] == \
        pytest.approx(4 * 250.0)
    # A tiled kernel's declared link bytes replace its traffic
    assert calibrated.predict("triad", "pinned", dict(CAL, link_bytes=3e9), FIG)["compute_ms"] == \
        pytest.approx(4 * 3e9 * 2 / 3 / 5e9 * 1e3)
    # Without the kind's figures: explicit's own allocation and free
    bare = {k: v for k, v in FIG.items() if not k.startswith("pinned")}
    assert calibrated.predict("triad", "pinned", CAL, bare)["alloc_ms"] == 1.0
    assert q["init_ms"] == pytest.approx(30.0 - 10.0 * 2e9 / GIB)  # pinned pages are resident: no first touch
    assert q["back_ms"] == pytest.approx(100.0)
    e = calibrated.predict("triad", "explicit", CAL, FIG)  # the calibration itself
    assert e["total_ms"] == pytest.approx(100 + 1 + 30 + 40 + 110 + 2)
    with pytest.raises(ValueError, match="HMM or ATS"):
        calibrated.predict("triad", "system", CAL, FIG)


def test_model_zero_copy_terms_exact():
    # The first iteration's excess over the others' median is paid once, not per iteration: samples 25, 5, 5, 5
    # -> 20 ms once + 4 x max(5 ms, 133 ms of link)
    cal = dict(CAL, samples=[25.0, 5.0, 5.0, 5.0])
    assert calibrated.kernel_times(cal) == (20.0, [5.0, 5.0, 5.0, 5.0])
    link = 1e9 * 2 / 3 / 5e9 * 1e3
    assert calibrated.predict("triad", "pinned", cal, FIG)["compute_ms"] == pytest.approx(20.0 + 4 * link)
    # ... and where the kernel is longer than the link, the kernel's time
    slow = dict(cal, samples=[225.0, 205.0, 205.0, 205.0])
    assert calibrated.predict("triad", "pinned", slow, FIG)["compute_ms"] == pytest.approx(20.0 + 4 * 205.0)
    # Declared link reads and writes replace the split of the traffic: 3 GB read at 5 GB/s per iteration
    dec = dict(CAL, link_read_bytes=3e9, link_write_bytes=0.5e9)
    q = calibrated.predict("triad", "pinned", dec, FIG)
    assert q["compute_ms"] == pytest.approx(4 * 600.0) and q["link"]["bound"] == "read"
    # Separate runs of bytes at the random-load rate: 4e9 runs at 2 G/s = 2 s per iteration beat 600 ms
    runs = dict(dec, link_runs=4e9)
    q = calibrated.predict("triad", "pinned", runs, dict(FIG, remote_gather_gops=2.0))
    assert q["compute_ms"] == pytest.approx(4 * 2000.0) and q["link"]["bound"] == "runs"
    # Random accesses counted over the run (bfs): 1e9 loads at 2 G/s and 1e9 stores at 4 G/s, added once
    rnd = dict(CAL, gather_accesses=1e9, scatter_accesses=1e9)
    q = calibrated.predict("triad", "pinned", rnd, dict(FIG, remote_gather_gops=2.0, remote_scatter_gops=4.0))
    assert q["compute_ms"] == pytest.approx(4 * link + 500.0 + 250.0)
    # ... and with the rate of both at once (1 G/s pairs), the 1e9 pairs overlap: 1 s instead of 750 ms
    pair = dict(FIG, remote_gather_gops=2.0, remote_scatter_gops=4.0, remote_gather_scatter_gops=1.0)
    assert calibrated.predict("triad", "pinned", rnd, pair)["compute_ms"] == pytest.approx(4 * link + 1000.0)
    more = dict(rnd, gather_accesses=3e9)  # 1e9 pairs, 2e9 loads alone at 2 G/s
    assert calibrated.predict("triad", "pinned", more, pair)["compute_ms"] == pytest.approx(4 * link + 2000.0)
    # Without the gather figure the random terms are absent, not guessed
    assert calibrated.predict("triad", "pinned", rnd, FIG)["compute_ms"] == pytest.approx(4 * link)


def test_pinned_and_registered_initialisation_writes_resident_pages():
    # explicit's init less its pageable first touch (2 GB at 10 ms/GiB), plus the kind's own first write of
    # the 2 GB it initialises (pages resident since allocation): 30 - 2e9/GIB*10 + 2e9/GIB*4
    fig = dict(FIG, pinned_first_touch_ms_per_gib=4.0)
    assert calibrated.predict("triad", "pinned", CAL, fig)["init_ms"] == pytest.approx(30.0 - 2e9 / GIB * 6.0)
    recs = [{"benchmark": "firsttouch", "op": "first-touch", "processor": "host", "by": "cpu", "kind": k,
             "bytes": GIB, "median": v} for k, v in (("pinned", 20.0), ("registered", 15.0))]
    fig, _ = calibrated.figures_from_records(recs)
    assert fig == {"pinned_first_touch_ms_per_gib": 20.0, "registered_first_touch_ms_per_gib": 15.0}


def test_gpu_stream_pattern_records_give_the_random_access_figures():
    recs = [{"benchmark": "gpu-stream", "op": "gather", "kind": "pinned", "bytes": 256 << 20, "median": 0.7},
            {"benchmark": "gpu-stream", "op": "gather", "kind": "pinned", "bytes": 16 << 20, "median": 9.0},
            {"benchmark": "gpu-stream", "op": "scatter", "kind": "pinned", "bytes": 256 << 20, "median": 1.5},
            {"benchmark": "gpu-stream", "op": "reread", "kind": "pinned", "bytes": 256 << 20, "window": 16 << 20,
             "median": 50.0},
            {"benchmark": "gpu-stream", "op": "gather", "kind": "device", "bytes": 256 << 20, "median": 30.0}]
    fig, src = calibrated.figures_from_records(recs)
    # the 16 MiB gather fits the L2 and the device one is not over the link: neither is the remote figure
    assert fig == {"remote_gather_gops": 0.7, "remote_scatter_gops": 1.5, "remote_reread_16m_gbps": 50.0}
    assert "gather" in src["remote_gather_gops"]
    # repeated trials of a microbenchmark: the figure is their median, and says so
    more = [dict(recs[0], median=v) for v in (0.5, 0.9)]
    fig, src = calibrated.figures_from_records(recs + more)
    assert fig["remote_gather_gops"] == 0.7 and "median of 3" in src["remote_gather_gops"]


def test_model_falls_back_to_the_access_table_and_calibrates_on_medians():
    old = {k: v for k, v in CAL.items() if k not in ("in_bytes", "out_bytes", "inout_bytes", "arrays")}
    p = calibrated.predict("triad", "managed", old, FIG)
    assert p["profile"]["cpu_init"] == pytest.approx(2e9) and "ACCESS" in p["profile"]["source"]
    with pytest.raises(KeyError):
        calibrated.predict("nosuchapp", "managed", old, FIG)
    c = calibrated.calibration([dict(CAL, init_ms=v) for v in (50.0, 10.0, 30.0)])
    assert c["init_ms"] == 30.0 and c["calibration_runs"] == 3


def test_trace_conversion_from_libumtrace_records():
    a = 1 << 40
    recs = [{"k": "mem", "op": 1, "a": a, "b": 3 * 4096},
            {"k": "um", "c": 4, "v": 2, "s": 10, "e": 11, "a": a + 4096, "f": 1},       # GPU fault on page 1
            {"k": "um", "c": 1, "v": 8192, "s": 12, "e": 13, "a": a, "f": 2},           # htod pages 0, 1
            {"k": "um", "c": 1, "v": 4096, "s": 14, "e": 15, "a": a + 8192, "f": 3},    # prefetch: not an access
            {"k": "kernel", "s": 5, "e": 20},
            {"k": "um", "c": 3, "v": 1, "s": 30, "e": 31, "a": a + 2 * 4096, "f": 0}]   # CPU fault on page 2
    tr = umtrace.from_umtrace(recs)
    assert tr["allocs"] == [(0, 3)]
    assert tr["events"] == [1, 0, 1, sim.BARRIER, 2 | sim.CPU]
    assert (tr["kernels"], tr["gpu_faults"], tr["htod_bytes"], tr["cpu_faults"]) == (1, 2, 8192, 1)


def test_trace_conversion_takes_the_gpu_side_from_complete_driver_events():
    """With the driver's events complete (`--uvm-events`), every fault entry and every on-demand migrated page is
    an access, where CUPTI's records (here: none for page 2) hold a share; a CPU fault still comes from CUPTI."""
    a = 1 << 40
    recs = [{"k": "mem", "op": 1, "a": a, "b": 4 * 4096},
            {"k": "um", "c": 4, "v": 1, "s": 1000, "e": 1001, "a": a + 4096, "f": 1},  # CUPTI saw one fault group
            {"k": "kernel", "s": 900, "e": 5000},
            {"k": "um", "c": 3, "v": 1, "s": 6000, "e": 6001, "a": a + 3 * 4096, "f": 0},
            {"k": "uvm_events", "ok": True}, {"k": "clocks", "raw": 100, "t": 1000},   # trace clock = raw + 900
            {"k": "uvm_fault", "g": 1, "b": 1, "a": a + 4096, "acc": 1, "t": 200, "tg": 0},
            {"k": "uvm_fault", "g": 1, "b": 1, "a": a + 2 * 4096, "acc": 1, "t": 210, "tg": 0},
            {"k": "uvm_migration", "src": 0, "dst": 1, "a": a, "n": 8192, "cause": 2, "t0": 300, "t1": 9000},
            {"k": "uvm_migration", "src": 0, "dst": 1, "a": a + 8192, "n": 4096, "cause": 3, "t0": 310, "t1": 9000},
            {"k": "uvm_counters", "dev": -1, "htod": 12288},
            {"k": "uvm_events_end", "n": [0] * 16, "dropped": [0] * 16}]
    tr = umtrace.from_umtrace(recs)
    assert tr["gpu_source"] == "the driver's events"
    assert tr["events"] == [1, 2, 0, 1, sim.BARRIER, 3 | sim.CPU]
    assert (tr["gpu_faults"], tr["htod_bytes"], tr["recorded_htod_bytes"], tr["cpu_faults"]) == (2, 8192, 12288, 1)
    from umscope.model.driver import trace_completeness
    assert trace_completeness(tr) == ""  # every byte the driver counted is in the stream's source
    lost = recs[:-1] + [{"k": "uvm_events_end", "n": [0] * 16, "dropped": [0, 0, 0, 4] + [0] * 12}]
    tr = umtrace.from_umtrace(lost)
    assert tr["gpu_source"] == "CUPTI records" and tr["gpu_faults"] == 1 and tr["events"][0] == 1


def test_sweep_helpers():
    pts = [{"dos": d, "relative": r} for d, r in ((78, 1.0), (100, 0.95), (109, 0.4), (156, 0.3))]
    assert dos.knee(pts) == 109
    assert dos.monotone([1.0, 0.95, 0.4, 0.3]) == "decreasing"
    assert dos.monotone([1.0, 2.0, 3.0]) == "increasing"
    assert dos.monotone([1.0, 0.5, 0.9]) == "not monotone"
    assert dos.monotone([1.0, 0.34, 0.05, 0.06, 0.05]) == "decreasing"  # a 0.01 step near zero is no rise
    assert dos.monotone([1.0, 0.1, 0.2]) == "not monotone"


def test_streaming_oversubscription_costs_evictions():
    fig, _ = dos.machine_figures("h100-sxm-pcie5")
    a = dos.sweep_point("triad", 78, "svm", fig, capacity=64 << 20)
    b = dos.sweep_point("triad", 156, "svm", fig, capacity=64 << 20)
    assert a["counts"]["evictions"] == 0 and b["counts"]["evictions"] > 0
    assert b["throughput"] < a["throughput"]


def test_machine_figures_label_what_is_borrowed():
    fig, src = dos.machine_figures("gh200")
    assert src.startswith("paper:")
    assert "not published, taken from h100-sxm-pcie5" in src and "first_pass_gbps" in src
    assert fig["remote_gbps"] == 400 and fig["fault_batch_us"] > 0


def test_cli_simulate_prints_modelled_table(capsys):
    assert cli.main(["simulate", "jacobi2d", "--footprint", "32M", "--dos", "150", "--policy", "uvm,svm"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("MODELLED (not measured)")
    assert "uvm" in out and "svm" in out and "DOS 150" in out


def test_cli_simulate_json_records_are_labelled(capsys):
    assert cli.main(["simulate", "triad", "--footprint", "16M", "--capacity", "64M", "--policy", "zerocopy",
                     "--json"]) == 0
    (rec,) = json.loads(capsys.readouterr().out)
    assert rec["status"] == "modelled" and rec["model_version"] == sim.VERSION
    assert rec["counts"]["remote_gpu_pages"] == rec["counts"]["gpu_events"]
    assert rec["inputs"]["figures_source"]


@pytest.mark.parametrize("argv", [["simulate"], ["simulate", "nosuch"], ["simulate", "triad", "--policy", "x"],
                                  ["simulate", "triad", "--trace", "f"], ["model", "nosuch"],
                                  ["model", "triad"], ["advise"], ["simulate", "triad", "--dos", "0"]])
def test_cli_bad_input_exits_2(argv, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("umscope: error:") and err.count("\n") == 1


def test_cli_model_from_calibration_file(tmp_path, capsys):
    f = tmp_path / "cal.json"
    f.write_text(json.dumps(dict(CAL, app="triad", mode="explicit")))
    assert cli.main(["model", "triad", "--calibration", str(f), "--json"]) == 0
    recs = json.loads(capsys.readouterr().out)
    by = {r["mode"]: r for r in recs}
    assert by["system"]["status"] == "not modelled"  # no ATS/HMM on the H100 host
    assert by["managed"]["status"] == "modelled" and by["managed"]["model_version"] == calibrated.VERSION
    assert by["managed"]["total_ms"] > by["explicit"]["total_ms"] > 0


def test_cli_advise_in_memory_and_oversubscribed(capsys):
    assert cli.main(["advise", "mvt", "--footprint", "64M", "--capacity", "256M", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["status"] == "modelled" and "managed-prefetch" in r["evidence"]
    assert any("ReadMostly" in h for h in r["hints"])  # MVT only reads its matrix
    assert cli.main(["advise", "jacobi2d", "--footprint", "128M", "--capacity", "64M", "--machine", "gh200",
                     "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert "managed-prefetch" not in r["evidence"]  # does not fit: no prefetch-everything option
    assert "system" in r["evidence"] and any("DOS 200" in h for h in r["hints"])


def test_figures_from_records_reads_the_microbenchmarks():
    mig = {"benchmark": "migration", "bytes": GIB, "cpu_touch": "none"}
    recs = [
        dict(mig, op="read", kind="managed", policy="first_touch=cpu",
             extra={"first": 6.5, "steady": 3000.0, "place_ms": 100.0}),
        dict(mig, op="copy", kind="managed", policy="first_touch=cpu", first=5.0, steady=3000.0, place_ms=100.0),
        dict(mig, op="read", kind="managed", policy="advise=read_mostly,first_touch=cpu", first=6.0, place_ms=220.0),
        dict(mig, op="read", kind="managed", policy="advise=preferred:gpu,first_touch=cpu", first=5.5, place_ms=300.0,
             advise_ms=30.0),  # advise_ms, timed alone, wins over the place_ms difference
        dict(mig, op="read", kind="managed", policy="first_touch=cpu,prefetch=gpu", first=3000.0, steady=3100.0,
             prefetch_gbps=44.0),
        dict(mig, op="write", kind="managed", policy="first_touch=none,prefetch=gpu", prefetch_gbps=90.0),
        dict(mig, op="read", kind="managed", policy="first_touch=gpu,prefetch=cpu", prefetch_gbps=30.0),
        dict(mig, op="read", kind="pinned", policy="", first=50.0, steady=51.0),
        dict(mig, op="write", kind="pinned", policy="", first=50.0, steady=52.0),
        dict(mig, op="read", kind="managed", policy="first_touch=cpu", first=1.0, steady=1.0, dos=0.5),  # ignored
        {"benchmark": "firsttouch", "op": "first-touch", "processor": "gpu0", "by": "gpu", "kind": "managed",
         "bytes": 2 * GIB, "median": 130.0},
        {"benchmark": "firsttouch", "op": "free", "processor": "host", "by": "gpu", "kind": "managed",
         "bytes": 2 * GIB, "median": 20.0},
        {"benchmark": "firsttouch", "op": "alloc", "processor": "host", "by": "cpu", "kind": "pinned",
         "bytes": 2 * GIB, "median": 1000.0},
        {"benchmark": "faults", "op": "touch-parallel", "processor": "cpu", "kind": "managed", "bytes": GIB,
         "stride": 4096, "median": 0.3},
        {"benchmark": "faults", "op": "touch-parallel", "processor": "cpu", "kind": "managed", "bytes": GIB,
         "stride": 65536, "median": 4.0},
        {"benchmark": "cpu-stream", "op": "read", "kind": "system", "threads": 1, "median": 10.0},
        {"benchmark": "cpu-stream", "op": "read", "kind": "system", "threads": 16, "median": 80.0},
        {"benchmark": "cpu-stream", "op": "checksum", "kind": "system", "threads": 16, "median": 30.0},
        {"benchmark": "copy", "op": "ce-copy", "kind": "system", "dst_kind": "device", "direction": "uni",
         "median": 20.0},
        {"benchmark": "copy", "op": "ce-copy", "kind": "device", "dst_kind": "system", "direction": "uni",
         "median": 15.0},
    ]
    fig, src = calibrated.figures_from_records(recs)
    assert fig == {"first_pass_gbps": 6.5, "first_pass2_gbps": 5.0, "read_mostly_first_pass_gbps": 6.0,
                   "advise_read_mostly_ms_per_gib": 120.0, "advise_preferred_gpu_ms_per_gib": 30.0,
                   "preferred_gpu_first_pass_gbps": 5.5, "migrate_gbps": 44.0, "populate_prefetch_gbps": 90.0,
                   "migrate_d2h_gbps": 30.0, "remote_gbps": 51.0, "remote_write_gbps": 52.0,
                   "gpu_first_touch_ms_per_gib": 65.0, "managed_free_gpu_ms_per_gib": 10.0,
                   "pinned_alloc_ms_per_gib": 500.0, "cpu_fault_us_4k": 0.3, "host_gbps": 80.0, "checksum_gbps": 30.0,
                   "h2d_gbps": 20.0, "d2h_gbps": 15.0}
    assert src["first_pass_gbps"].startswith("migration read managed first_touch=cpu")
    assert "minus" in src["advise_read_mostly_ms_per_gib"]
    assert set(fig) <= set(calibrated.CALIBRATES) | {"h2d_gbps", "d2h_gbps", "host_gbps", "first_pass_gbps"}


def test_validated_error_travels_with_modelled_figures(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(calibrated, "VALIDATED", tmp_path / "validated.json")
    assert calibrated.validated("calibrated")["status"] == "not validated yet"
    calibrated.write_validated("calibrated", {"model_version": calibrated.VERSION, "median": 0.08, "p90": 0.2,
                                              "cases": 2, "machine": "GPU X", "commit": "abc",
                                              "per_case": {"triad/managed": -0.05}})
    calibrated.write_validated("umsim", {"model_version": "old-sim", "htod_bytes_max_error_vs_truth": 0.0})
    v = calibrated.validated("calibrated", "triad", "managed")
    assert v["median"] == 0.08 and v["this_case"] == -0.05 and "note" not in v
    text = calibrated.validated_text(v)
    assert "median 8.0%" in text and "90th percentile 20.0%" in text and "this case -5.0%" in text
    assert "not " in calibrated.validated("umsim", version=sim.VERSION)["note"]  # another simulator version
    f = tmp_path / "cal.json"
    f.write_text(json.dumps(dict(CAL, app="triad", mode="explicit")))
    assert cli.main(["model", "triad", "--calibration", str(f), "--json"]) == 0
    recs = json.loads(capsys.readouterr().out)
    managed = next(r for r in recs if r["mode"] == "managed")
    assert managed["validated_error"]["this_case"] == -0.05 and managed["inputs"]["access_profile"]["in"] == 2e9
    assert cli.main(["model", "triad", "--calibration", str(f)]) == 0
    out = capsys.readouterr().out
    assert "validated error" in out and "median 8.0%" in out
