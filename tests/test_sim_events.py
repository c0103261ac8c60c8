"""sim_events: the UVM driver's fault events of a trace, summarised (hand-made traces, every figure worked out
by hand below)."""
import gzip
import sys
from pathlib import Path

import pytest

from umscope.model import calibration, validation
from umscope.model import events as sim_events

ROOT = Path(__file__).resolve().parent.parent
P = 4096
BASE = 0x7F0000000000


def fault(b, page, t, tg, gpc=0, cl=1, acc=1):
    return {"k": "uvm_fault", "g": 0, "b": b, "a": BASE + page * P + 128, "acc": acc, "ft": 0, "gpc": gpc,
            "cl": cl, "ct": 1, "t": t, "tg": tg}


# The GPU's clock runs 500 ns behind the CPU's: an entry written at CPU time w has tg = w - 500.
TRACE = [
    {"k": "uvm_events", "ok": True, "queue": 65536, "entry": 72, "mask": 0x1FF, "clock": "CLOCK_MONOTONIC_RAW"},
    # batch 1: uTLB (0, 1) writes page 0 twice (merged: one notification, t 1000) and page 1 (t 1001); uTLB
    # (0, 2) writes page 0 (another uTLB: not merged, notified on its own as a duplicate, t 1002)
    fault(1, 0, 1000, 300), fault(1, 0, 1000, 150), fault(1, 1, 1001, 400), fault(1, 0, 1002, 450, cl=2),
    {"k": "uvm_replay", "g": 0, "b": 1, "ct": 1, "t": 5000, "tg": 4600},
    # batch 2: page 1 again (written at CPU 4900, before batch 1's replay was done: stale), a write on page 2
    fault(2, 1, 8000, 4400, gpc=1, cl=0), fault(2, 2, 8001, 6500, gpc=1, cl=0, acc=2),
    {"k": "uvm_replay", "g": 0, "b": 2, "ct": 1, "t": 9000, "tg": 8700},
    {"k": "uvm_migration", "src": 0, "dst": 1, "a": BASE, "n": 65536, "cause": 2, "t0": 2000, "t1": 3000},
    {"k": "uvm_migration", "src": 0, "dst": 1, "a": BASE + 65536, "n": 131072, "cause": 3, "t0": 3000, "t1": 4000},
    {"k": "uvm_events_end", "n": [0] * 16, "dropped": [0] * 16},
]


def test_summary_counts_merged_entries_batches_utlbs_and_stale():
    s = sim_events.summary(TRACE)
    assert s["ok"] and s["instances"] == 6 and s["entries"] == 5 and s["batches"] == 2 and s["replays"] == 2
    assert s["instances_per_entry"] == {"1": 4, "2": 1}
    assert s["access_instances"] == {"read": 5, "write": 1} and s["access_entries"] == {"read": 4, "write": 1}
    # per batch: instances 4 and 2, entries 3 and 2, pages 2 and 2, uTLBs 2 and 1
    pb = s["per_batch"]
    assert (pb["instances"]["p0"], pb["instances"]["p100"]) == (2, 4)
    assert (pb["entries"]["p0"], pb["entries"]["p100"], pb["entries"]["mean"]) == (2, 3, 2.5)
    assert pb["utlbs"]["mean"] == 1.5 and pb["pages"]["p50"] == 2
    # per (batch, uTLB): (1,(0,1)) 3 instances on 2 pages, (1,(0,2)) 1 on 1, (2,(1,0)) 2 on 2
    assert s["per_utlb_batch"]["instances"] == {"1": 1, "2": 1, "3": 1}
    assert s["per_utlb_batch"]["pages"] == {"1": 1, "2": 2}
    assert s["utlbs"] == 3 and s["gpcs"] == 2 and s["distinct_pages"] == 3
    # page 1 was in batch 1: its entry in batch 2 is stale
    assert (s["stale_entries"], s["stale_instances"]) == (1, 1)
    assert s["first_batches"][0] == {"instances": 4, "entries": 3, "pages": 2, "page_range": [0, 1], "utlbs": 2}
    # GPU write span of batch 1: tg 150 .. 450 = 0.3 us; batch 2: 4400 .. 6500 = 2.1 us
    assert pb["gpu_write_span_us"]["p0"] == 0.3 and pb["gpu_write_span_us"]["p100"] == 2.1


def test_summary_timing_service_gaps_waiting_and_clock_bounds():
    s = sim_events.summary(TRACE)
    # service: batch 1 from 1000 to its replay at 5000 (4 us), batch 2 from 8000 to 9000 (1 us)
    assert (s["service_us"]["p0"], s["service_us"]["p100"]) == (1.0, 4.0)
    assert s["replay_to_next_batch_us"]["p50"] == 3.0          # 5000 -> 8000
    assert s["instances_written_before_previous_replay"] == 1   # tg 4400 < 4600
    # t - tg: 700, 850, 601, 552, 3600, 1501: upper bound of the offset 552; replays bound it below by
    # max(5000 - 4600, 9000 - 8700) = 400: 0.152 us of uncertainty
    assert s["clock_offset_uncertainty_us"] == 0.152
    w = s["write_to_notify_us"]
    assert w["p0"] == 0.0 and w["p100"] == pytest.approx(3.048) and w["n"] == 6
    assert s["migrated_bytes_by_cause"] == {"coherence": 65536, "prefetch": 131072} and s["migrations"] == 2


def test_summary_burst_write_spacing():
    # batch 2's instances written after batch 1's replay (tg 4600): ten, 20 ns apart (tg 5000 .. 5180), and one
    # written before it (not part of the burst); batch 1 has no previous replay; a burst under 8 counts not
    tr = [TRACE[0], fault(1, 0, 1000, 300), {"k": "uvm_replay", "g": 0, "b": 1, "ct": 1, "t": 5000, "tg": 4600},
          fault(2, 9, 7000, 4400)] + [fault(2, i, 7001 + i, 5000 + 20 * i, cl=i) for i in range(10)] + [
          {"k": "uvm_replay", "g": 0, "b": 2, "ct": 1, "t": 9000, "tg": 8700},
          fault(3, 20, 9500, 8800), fault(3, 21, 9501, 8900),
          {"k": "uvm_replay", "g": 0, "b": 3, "ct": 1, "t": 9900, "tg": 9600}, TRACE[-1]]
    w = sim_events.summary(tr)["burst_write_ns"]
    assert w["n"] == 1 and w["p50"] == 20.0


def test_summary_absent_or_refused_and_counter_check():
    assert sim_events.summary([{"k": "kernel"}]) is None
    off = sim_events.summary([{"k": "uvm_events", "ok": False, "why": "no /dev/nvidia-uvm"}])
    assert off["ok"] is False and off["why"] == "no /dev/nvidia-uvm" and off["entries"] == 0
    s = sim_events.summary(TRACE)
    assert sim_events.check_counter(s, 5)[0] is True
    ok, why = sim_events.check_counter(s, 7)
    assert ok is False and "-2" in why
    assert sim_events.check_counter(off, 5)[0] is None
    dropped = TRACE[:-1] + [{"k": "uvm_events_end", "n": [0] * 16, "dropped": [0, 3] + [0] * 14}]
    assert sim_events.summary(dropped)["dropped_total"] == 3
    assert sim_events.summary(TRACE)["fault_buffer_overflows"] == 0
    assert sim_events.summary(TRACE + [{"k": "uvm_fault_overflow"}])["fault_buffer_overflows"] == 1


def test_entry_table_relative_pages_and_times(tmp_path):
    f = tmp_path / "e.txt.gz"
    assert sim_events.entry_table(TRACE, f) == 6
    rows = gzip.open(f, "rt").read().splitlines()
    assert rows[0].split() == ["b", "page", "acc", "gpc", "cl", "ct", "dt_us", "dtg_us"]
    assert rows[1].split() == ["1", "0", "1", "0", "1", "1", "0.000", "0.150"]
    assert rows[6].split() == ["2", "2", "2", "1", "0", "1", "7.001", "6.350"]
    assert rows[8].split() == ["r", "1", "4.000", "4.450"]


def test_fresh_pages_counts_a_utlbs_pages_since_the_previous_replay(tmp_path):
    # Batch 2 (after replay 1 at GPU time 10 us): uTLB (0, 1) holds page 5, written at 3 us (waited in the
    # buffer), and page 21 written at 12 us: two pages in the batch, one since the replay. uTLB (1, 0) wrote
    # pages 6 and 7 after it: two. Batch 1 has no replay before it and batch 3 is the table's last (maybe cut):
    # neither is counted.
    rows = ["b page acc gpc cl ct dt_us dtg_us",
            "1 0 1 0 1 1 0.0 0.0", "1 1 1 1 0 1 0.0 0.5",
            "2 5 1 0 1 1 20.0 3.0", "2 21 1 0 1 1 20.0 12.0", "2 21 1 0 1 1 20.0 12.1",
            "2 6 1 1 0 1 20.0 11.0", "2 7 1 1 0 1 20.0 11.5",
            "3 40 1 0 1 1 40.0 30.0", "3 41 1 0 1 1 40.0 30.5",
            "# replays: b dt_us dtg_us", "r 1 10.0 10.0", "r 2 25.0 25.0", "r 3 45.0 45.0"]
    f = tmp_path / "e.txt.gz"
    with gzip.open(f, "wt") as fo:
        fo.write("\n".join(rows) + "\n")
    assert sim_events.fresh_pages(f) == {"pages": {"1": 1, "2": 1}, "multi": 2, "multi_with_older": 1}
    g = tmp_path / "one.txt.gz"  # a single batch: nothing to count
    with gzip.open(g, "wt") as fo:
        fo.write("\n".join(rows[:3] + ["# replays: b dt_us dtg_us", "r 1 10.0 10.0"]) + "\n")
    assert sim_events.fresh_pages(g) is None


def test_kept_trace_drops_event_lines_only():
    assert validation.EVENT_LINE.match(b'{"k":"uvm_fault","g":0}') and validation.EVENT_LINE.match(b'{"k": "uvm_replay"}')
    assert validation.EVENT_LINE.match(b'{"k":"uvm_migration","src":0}')
    for keep in (b'{"k":"uvm_events","ok":true}', b'{"k":"uvm_events_end","n":[]}', b'{"k":"uvm_counters"}',
                 b'{"k":"um","c":1}'):
        assert not validation.EVENT_LINE.match(keep)


def test_run_traced_with_events_summarises_and_keeps_a_small_trace(tmp_path, monkeypatch):
    """run_traced with a stand-in umbench that writes TRACE (plus the driver's counters) where libumtrace would,
    and only when UMSCOPE_UMTRACE_UVM_EVENTS=1 is in its environment."""
    import json
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import sim_validate as sv
    finally:
        sys.path.pop(0)
    lines = [json.dumps({"k": "uvm_counters", "dev": 0, "htod": 3 * P, "dtoh": 0, "gpu_faults": 5, "cpu_faults": 0})]
    (tmp_path / "events.jsonl").write_text("\n".join(json.dumps(e) for e in TRACE) + "\n")
    (tmp_path / "base.jsonl").write_text("\n".join(lines) + "\n")
    fake = tmp_path / "umbench"
    fake.write_text("#!/bin/sh\ncat %s > \"$UMSCOPE_TRACE_FILE\"\n"
                    "[ \"$UMSCOPE_UMTRACE_UVM_EVENTS\" = 1 ] && cat %s >> \"$UMSCOPE_TRACE_FILE\"\n"
                    "echo '{\"type\":\"status\",\"status\":\"ok\"}'\n" % (tmp_path / "base.jsonl", tmp_path / "events.jsonl"))
    fake.chmod(0o755)
    lib = tmp_path / "libumtrace.so"
    lib.write_text("")
    monkeypatch.setenv("UMSCOPE_UMBENCH", str(fake))
    monkeypatch.setenv("UMSCOPE_UMTRACE", str(lib))
    monkeypatch.setenv("UMSCOPE_UMTRACE_UVM_EVENTS", "1")  # a run without events must not inherit it
    keep = tmp_path / "keep"
    sv.run_traced([], str(keep), "c0", "migration", uvm_events=True, entries=True)
    ev = json.loads((keep / "c0.events.json").read_text())
    assert ev["entries"] == 5 and ev["driver_gpu_faults"] == 5 and ev["counter_check"].startswith("distinct")
    assert (keep / "c0.entries.txt.gz").exists()
    kept = [json.loads(x) for x in gzip.open(keep / "c0.jsonl.gz", "rt").read().splitlines()]
    assert {e["k"] for e in kept} == {"uvm_counters", "uvm_events", "uvm_events_end"}
    assert json.loads((keep / "c0.counts.json").read_text())["driver"]["gpu_faults"] == 5
    sv.run_traced([], str(keep), "c1", "migration", uvm_events=False)
    assert not (keep / "c1.events.json").exists()
    assert {json.loads(x)["k"] for x in gzip.open(keep / "c1.jsonl.gz", "rt").read().splitlines()} == {"uvm_counters"}


def test_page_moved_back_to_the_cpu_is_not_stale():
    back = {"k": "uvm_migration", "src": 1, "dst": 0, "a": BASE + P, "n": P, "cause": 2, "t0": 6000, "t1": 7000}
    s = sim_events.summary(TRACE[:7] + [back] + TRACE[7:])
    assert s["stale_entries"] == 0 and s["migrated_bytes_by_cause"]["coherence"] == 65536 + P


def test_model_lines_of_umsim_entry_log(tmp_path):
    """umsim --entry-log lines -> the same summary: batch 1 fetched at 100 ns: uTLB 0 writes page 5 twice
    (merged), uTLB 1 page 5 (another uTLB: counted) and page 6 (stale); batch 2 at 900 ns."""
    log = tmp_path / "e.log"
    log.write_text("f 1 5 0 0 10 100 0\nf 1 5 0 1 20 100 0\nf 1 5 1 0 30 100 0\nf 1 6 1 0 40 100 1\nr 1 500\n"
                   "f 2 7 0 0 600 900 0\nr 2 1000\n")
    lines = sim_events.model_lines(log)
    f = [e for e in lines if e["k"] == "uvm_fault"]
    assert [e["t"] for e in f] == [101, 101, 102, 103, 901]
    s = sim_events.summary(lines)
    assert (s["instances"], s["entries"], s["batches"], s["replays"]) == (5, 4, 2, 2)
    assert s["stale_entries"] == 1 and s["per_utlb_batch"]["instances"] == {"1": 1, "2": 2}
    assert s["service_us"]["p0"] == 0.099 and s["service_us"]["p100"] == 0.399   # 901 -> 1000, 101 -> 500


def test_entry_figures_from_calibration_events():
    """umsim-4's per-entry figures from the calibration programs' summaries: pages and instances pooled per
    family from the programs whose batches stay below the batch size; the replay's burst and the
    cross-uTLB merge decision."""
    def ev(pages, inst, full, batches=100, p95=3.0, across=0, entries=100, wns=21.0):
        return {"events": {"ok": True, "entries": entries, "batches": batches, "batches_at_limit": full,
                           "per_utlb_batch": {"pages": pages}, "instances_per_entry": inst,
                           "written_after_previous_replay_us": {"p95": p95}, "entries_across_utlbs": across,
                           "burst_write_ns": {"p50": wns}}}
    rd, wr = validation.read_on(20), validation.read_on(20, op="write")
    tr = validation.truth_on(66)
    calib = [(rd, ev({"1": 3, "2": 1}, {"2": 5, ">8": 1}, 0, p95=2.0)),
             (validation.read_on(160), ev({"1": 100}, {"1": 100}, 50, p95=4.0)),   # full batches: left out of read's
             (wr, ev({"1": 9, "3": 1}, {"4": 2}, 5, p95=5.0)),
             (tr, ev({"1": 7}, {"1": 6, "2": 1}, 0, across=3, entries=100, p95=1.0, wns=30.0))]
    f = calibration.entry_figures(calib)
    assert f["utlb_fault_weights_read"] == "3,1,0,0,0,0,0,0" and f["entry_instances_read"] == "0,5,0,0,0,0,0,1"
    assert f["utlb_fault_weights_write"] == "9,0,1,0,0,0,0,0" and f["entry_instances_write"] == "0,0,0,2,0,0,0,0"
    assert f["utlb_fault_weights_truth"] == "7,0,0,0,0,0,0,0"
    assert f["replay_fetch_us"] == 4.0                     # p95s 1, 2, 4, 5: the upper median
    assert f["cross_utlb_merge"] == "off" and f["cross_utlb_share"] == 0.03
    assert f["write_ns"] == 21.0 and f["block_order"] == "shuffled"   # spacings 21, 21, 21, 30: upper median
    assert f["page_order"] == "chunks"
    assert f["entry_figures_from"]["read"] == [rd["label"]]
    assert validation.family(tr) == "truth" and validation.family(wr) == "write" and validation.family(rd) == "read"


def test_instance_gaps_per_utlb_from_an_entry_table(tmp_path):
    # Batch 1: uTLB (0, 1) page 0 at tg 0, 32, 96 (gaps 32, 64), uTLB (0, 2) page 1 at 0 and page 2 once; batch 2: uTLB
    # (0, 1) page 0 again at 160 (gap 64: the page's instances in two batches), uTLB (0, 2) page 1 at 128 (gap 128, in
    # two batches), uTLB (0, 3) page 3 once; batch 3 (the table's last, which it may cut) left out. Gaps 32, 64, 64, 128:
    # median 64; uTLBs per batch 2 and 3: median 2.5; 25.6 ns per uTLB; 2 of the 2 pages with several instances split.
    tr = [fault(1, 0, 1000, 0), fault(1, 0, 1000, 32), fault(1, 0, 1000, 96), fault(1, 1, 1001, 0, cl=2),
          fault(1, 2, 1002, 5, cl=2),
          {"k": "uvm_replay", "g": 0, "b": 1, "ct": 1, "t": 1500, "tg": 120},
          fault(2, 0, 2000, 160), fault(2, 1, 2001, 128, cl=2), fault(2, 3, 2002, 130, cl=3),
          fault(3, 9, 3000, 900), fault(3, 9, 3000, 5000)]
    g = sim_events.instance_gaps(tr)
    assert g == {"gap_ns_p50": 64, "utlbs_per_batch_p50": 2.5, "ns_per_utlb": 25.6, "split_share": 1.0}
    assert sim_events.instance_gaps([]) is None and sim_events.instance_gaps(tr[4:5]) is None  # no page twice
    # entry_figures: per family, the median over the family's programs with an entry table (written and read back)
    t = tmp_path / "k0.entries.txt.gz"
    sim_events.entry_table(tr, t)
    back = sim_events.instance_gaps(sim_events.table_lines(t))
    assert back["ns_per_utlb"] == 25.6
    f = calibration.entry_figures([(validation.read_on(20), {"entry_table": str(t)}),
                                   (validation.read_on(6), {"entry_table": None}),
                                   (validation.truth_on(66), {"entry_table": str(tmp_path / "missing.gz")})])
    assert f["instance_gap_ns_read"] == 25.6 and "instance_gap_ns_write" not in f and "instance_gap_ns_truth" not in f


def test_summary_flush_mode_by_the_update_put_ratio_and_its_check():
    # batch 1: page 0 three times (one uTLB, merged) and page 1: 4 instances, 2 duplicates (50%: not over the
    # ratio 50, its PUT kept); batch 2: page 2 three times, one instance written (tg 2000) long before batch 1's
    # replay (tg 10000): left by batch 1's flush; 2 duplicates of 3 (67%: flushed whole); batch 3: page 3 written
    # after batch 2's replay. At ratio 70 no batch is flushed whole.
    tr = [TRACE[0],
          fault(1, 0, 1000, 100), fault(1, 0, 1000, 120), fault(1, 0, 1000, 140), fault(1, 1, 1001, 160),
          {"k": "uvm_replay", "g": 0, "b": 1, "ct": 1, "t": 10500, "tg": 10000},
          fault(2, 2, 11000, 2000), fault(2, 2, 11000, 10300), fault(2, 2, 11000, 10320),
          {"k": "uvm_replay", "g": 0, "b": 2, "ct": 1, "t": 20500, "tg": 20000},
          fault(3, 3, 21000, 20400),
          {"k": "uvm_replay", "g": 0, "b": 3, "ct": 1, "t": 22500, "tg": 22000}]
    f = sim_events.summary(tr)["flush"]
    assert (f["update_put"], f["cached_put"]) == (1, 2)
    assert (f["older_entries_after_cached_put"], f["older_entries_after_update_put"]) == (1, 0)
    assert f["duplicate_pct"]["p50"] == 50.0 and f["update_put_ratio"] == 50
    f = sim_events.summary(tr, update_put_ratio=70)["flush"]
    assert (f["update_put"], f["cached_put"]) == (0, 3)


def test_replay_timeline_places_each_entry_against_the_previous_replay(tmp_path):
    # Driver table: batch 2 (after replay 1 at GPU 10 us) holds page 1 again, written at 4 us (during batch 1's
    # service, on a page batch 1 held), page 5 written at 8 us (during that service, a new page), page 6 written
    # twice by one uTLB (one entry, t 20.002; its first instance at 10.5 us: within the 2.8 us burst) and page 7 at
    # 15 us (later). Batch 1 has no replay before it and batch 3 is the table's last: neither counts.
    rows = ["b page acc gpc cl ct dt_us dtg_us",
            "1 0 1 0 1 1 0.000 0.5", "1 1 1 0 2 1 0.001 0.6",
            "2 1 1 1 0 1 20.000 4.0", "2 5 1 0 1 1 20.001 8.0",
            "2 6 1 0 2 1 20.002 11.0", "2 6 1 0 2 1 20.002 10.5", "2 7 1 0 2 1 20.003 15.0",
            "3 8 1 0 1 1 40.000 26.0",
            "# replays: b dt_us dtg_us", "r 1 10.0 10.0", "r 2 25.0 25.0", "r 3 45.0 45.0"]
    f = tmp_path / "e.txt.gz"
    with gzip.open(f, "wt") as fo:
        fo.write("\n".join(rows) + "\n")
    lines = sim_events.table_lines(f)
    assert lines[0] == {"k": "uvm_fault", "g": 0, "b": 1, "a": 0, "acc": 1, "gpc": 0, "cl": 1, "ct": 1, "t": 0,
                        "tg": 500}
    assert lines[-1] == {"k": "uvm_replay", "g": 0, "b": 3, "ct": 1, "t": 45000, "tg": 45000}
    tl = sim_events.replay_timeline(lines, 2.8)
    assert {k: tl[k] for k in ("entries", "before_previous_page", "before_new", "burst", "later")} == \
        {"entries": 4, "before_previous_page": 1, "before_new": 1, "burst": 1, "later": 1}
    assert tl["shares"]["burst"] == 0.25 and tl["burst_us"] == 2.8
    # The model's entry log through model_lines: batch 2 (after replay 1 at 17 us) holds page 1 written at 16 us
    # (stale: batch 1 held it), page 2 written at 17.5 us and again at 17.6 us by the same uTLB (merged: one
    # entry), page 3 written at 21 us; batch 3 is the last.
    log = tmp_path / "m.log"
    log.write_text("f 1 0 0 0 0 10000 0\nf 1 1 1 0 0 10000 0\nr 1 17000\n"
                   "f 2 1 2 0 16000 22000 1\nf 2 2 0 0 17500 22000 0\nf 2 2 0 1 17600 22000 0\n"
                   "f 2 3 1 0 21000 22000 0\nr 2 30000\nf 3 9 0 0 31000 33000 0\nr 3 40000\n")
    tm = sim_events.replay_timeline(sim_events.model_lines(log), 2.8)
    assert {k: tm[k] for k in ("entries", "before_previous_page", "before_new", "burst", "later")} == \
        {"entries": 3, "before_previous_page": 1, "before_new": 0, "burst": 1, "later": 1}
    assert sim_events.replay_timeline(sim_events.model_lines(log)[:4], 2.8) is None  # one batch: nothing to place


def test_resume_delays_from_a_replay_to_a_released_utlbs_next_miss(tmp_path):
    # Batch 1: uTLBs (0, 1) page 0 and (0, 2) page 1, replayed at tg 1000. After it (0, 2) writes page 1 again at 1010
    # (a page the batch held: a re-fault, not a resume), then page 5 at 1100; (0, 1) page 4 at 1064: the first new-page
    # entry of a batch-1 uTLB comes 64 ns after the replay. Batch 2 (pages 4, 5 and the re-fault) replayed at tg 3000;
    # (0, 1) page 8 at 3032 (32 ns), (0, 3) page 9 at 3001 (not a batch-2 uTLB). Batches 3 and 4 are the table's last
    # two (it may cut them): left out. Delays 0.064 and 0.032 us: median 0.048.
    tr = [fault(1, 0, 100, 0), fault(1, 1, 101, 5, cl=2),
          {"k": "uvm_replay", "g": 0, "b": 1, "ct": 1, "t": 1500, "tg": 1000},
          fault(2, 1, 2000, 1010, cl=2), fault(2, 4, 2001, 1064), fault(2, 5, 2002, 1100, cl=2),
          {"k": "uvm_replay", "g": 0, "b": 2, "ct": 1, "t": 3500, "tg": 3000},
          fault(3, 9, 4000, 3001, cl=3), fault(3, 8, 4001, 3032),
          {"k": "uvm_replay", "g": 0, "b": 3, "ct": 1, "t": 5500, "tg": 5000},
          fault(4, 12, 6000, 5001)]
    assert sim_events.resume_delays(tr) == {"us_p50": 0.048, "n": 2}
    assert sim_events.resume_delays([]) is None and sim_events.resume_delays(tr[:2]) is None  # no replay
    # a wait longer than cap_us is the launch's end, not a resume: with 0.05 us batch 1's 0.064 is left out
    assert sim_events.resume_delays(tr, cap_us=0.05) == {"us_p50": 0.032, "n": 1}
    # entry_figures: the median over the calibration programs with an entry table (written and read back)
    t = tmp_path / "k0.entries.txt.gz"
    sim_events.entry_table(tr, t)
    assert sim_events.resume_delays(sim_events.table_lines(t)) == {"us_p50": 0.048, "n": 2}
    f = calibration.entry_figures([(validation.read_on(20), {"entry_table": str(t)}),
                                   (validation.read_on(6), {"entry_table": None})])
    assert f["resume_us"] == 0.048
    assert "resume_us" not in calibration.entry_figures([(validation.read_on(6), {"entry_table": None})])
