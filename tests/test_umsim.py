"""The unified-memory policy simulator on tiny hand-checked traces: every count below was worked out
by hand from the model's rules (docs/simulator.md), so a change in a rule changes a count here."""
import time

import pytest

from umscope.errors import UsageError
from umscope.model import simulate as sim

W, C, B = sim.WRITE, sim.CPU, sim.BARRIER
PB = 4096


def replay(tmp_path, allocs, events, **params):
    f = tmp_path / "t.umstrace"
    sim.write_trace(f, allocs, events, PB)
    base = {"trace": f, "capacity": params.pop("capacity")}
    base.update(params)
    return sim.run(base)


def test_uvm_streaming_evicts_least_recently_faulted_blocks(tmp_path):
    # 16 pages, blocks of 4 pages, room for 8 pages, one fault per batch, no prefetch, 4 KiB granule:
    # every page faults once; blocks 0 and 1 are evicted when blocks 2 and 3 arrive.
    s = replay(tmp_path, [(0, 16)], list(range(16)), capacity=8 * PB, unit=4 * PB, granule=PB, prefetch="off",
               batch=1, thrash_threshold=0)
    assert (s["faults"], s["batches"], s["migrations"]) == (16, 16, 16)
    assert (s["h2d_fault_pages"], s["h2d_prefetch_pages"]) == (16, 0)
    assert (s["evictions"], s["d2h_evict_pages"], s["peak_gpu_pages"]) == (2, 8, 8)
    assert s["hits"] == 0


def test_uvm_batch_dedups_and_granule_migrates_neighbours(tmp_path):
    # Pages 0,1,0,1 in one batch of 256: two distinct faults, two duplicates; the 16-page (64 KiB) granule
    # brings pages 0-15 at once; after the barrier pages 2..5 are hits.
    s = replay(tmp_path, [(0, 32)], [0, 1, 0, 1, B, 2, 3, 4, 5], capacity=64 * PB, unit=32 * PB, prefetch="off")
    assert (s["faults"], s["dup_faults"], s["batches"]) == (2, 2, 1)
    assert s["h2d_fault_pages"] == 16 and s["hits"] == 4


def test_uvm_density_prefetcher_takes_the_subtree_over_threshold(tmp_path):
    # Block of 8 pages, faults on 0,1,2 in one batch: node [0,4) holds 3/4 = 75% > 51% -> page 3 is
    # prefetched; the root [0,8) holds 3/8 = 37.5% -> nothing more.
    s = replay(tmp_path, [(0, 8)], [0, 1, 2], capacity=64 * PB, unit=8 * PB, granule=PB, prefetch="on")
    assert (s["h2d_fault_pages"], s["h2d_prefetch_pages"]) == (3, 1)
    # Threshold 80%: 75% is not enough; no prefetch.
    s = replay(tmp_path, [(0, 8)], [0, 1, 2], capacity=64 * PB, unit=8 * PB, granule=PB, prefetch="on",
               prefetch_threshold=80)
    assert (s["h2d_fault_pages"], s["h2d_prefetch_pages"]) == (3, 0)
    # Five faults: 5/8 = 62.5% > 51% at the root -> the whole block.
    s = replay(tmp_path, [(0, 8)], [0, 1, 2, 4, 5], capacity=64 * PB, unit=8 * PB, granule=PB, prefetch="on")
    assert (s["h2d_fault_pages"], s["h2d_prefetch_pages"]) == (5, 3)
    # Every faulted page's region is computed on the same tree (the driver's compute_prefetch_mask): faults on
    # 0,1,2 and 7 hold 4/8 = 50% at the root, so page 3 alone is prefetched ([0,4) at 75%). Adding page 3 to the
    # tree before page 7's region is computed would give 5/8 at the root and the whole block.
    s = replay(tmp_path, [(0, 8)], [0, 1, 2, 7], capacity=64 * PB, unit=8 * PB, granule=PB, prefetch="on")
    assert (s["batches"], s["h2d_fault_pages"], s["h2d_prefetch_pages"]) == (1, 4, 1)


def test_fault_window_services_each_fault_alone(tmp_path):
    # A 2 MiB block (512 pages) read in order, faults serviced one at a time (window 1), 64 KiB granules,
    # threshold 51%: faults at pages 0 and 16 bring a granule each; at 32 the [0,64) subtree holds 48/64 ->
    # all of it; at 64 [0,128) holds 80/128 -> all; at 128 [0,256) 144/256; at 256 [0,512) 272/512 -> the
    # block. Six faults per block, the driver's count for a kernel of few warps (docs/simulator.md).
    s = replay(tmp_path, [(0, 512)], list(range(512)), capacity=1024 * PB, fault_window=1)
    assert (s["faults"], s["batches"], s["h2d_fault_pages"] + s["h2d_prefetch_pages"]) == (6, 6, 512)
    assert s["h2d_fault_pages"] == 6 * 16
    # Without a window the batch of 256 distinct pages is serviced whole: half the block, no prefetch
    s = replay(tmp_path, [(0, 512)], list(range(512)), capacity=1024 * PB)
    assert (s["faults"], s["batches"]) == (512, 2)


def test_eviction_policies_differ_as_defined(tmp_path):
    # Blocks A=0, B=1, C=2 of one page each, room for two. A, B fault; A is reused (hit); C faults.
    # lru (recency of any access) evicts B, so the final B faults again; lrf (recency of faults) evicts A,
    # so the final B hits.
    ev = [0, B, 1, B, 0, B, 2, B, 1, B]
    kw = dict(capacity=2 * PB, unit=PB, granule=PB, prefetch="off", thrash_threshold=0)
    lru = replay(tmp_path, [(0, 3)], ev, eviction="lru", **kw)
    lrf = replay(tmp_path, [(0, 3)], ev, eviction="lrf", **kw)
    assert (lru["faults"], lru["hits"], lru["evictions"]) == (4, 1, 2)
    assert (lrf["faults"], lrf["hits"], lrf["evictions"]) == (3, 2, 1)
    # clock: A and B referenced; the hand clears A's and B's bits, wraps, and evicts A.
    clk = replay(tmp_path, [(0, 3)], ev, eviction="clock", **kw)
    assert (clk["faults"], clk["hits"], clk["evictions"]) == (3, 2, 1)


def test_thrashing_detection_maps_the_block_remotely(tmp_path):
    # Two one-page blocks, room for one: A B A B A B ... each fault evicts the other. Threshold 2: a block
    # re-faulted within the lapse after its eviction counts; at the second count it is mapped remotely.
    ev = []
    for _ in range(6):
        ev += [0, B, 1, B]
    kw = dict(capacity=PB, unit=PB, granule=PB, prefetch="off", thrash_lapse=1000)
    off = replay(tmp_path, [(0, 2)], ev, thrash_threshold=0, **kw)
    assert (off["faults"], off["evictions"], off["remote_gpu_pages"]) == (12, 11, 0)
    on = replay(tmp_path, [(0, 2)], ev, thrash_threshold=2, **kw)
    # A1 B1 A2 B2 migrate (each evicting the other); A's third fault finds it re-faulted twice within the
    # lapse of its evictions: A is mapped remotely and not migrated, so B stays resident. Then A3..A6 go
    # over the link (A3 a fault, A4..A6 plain remote accesses) and B3..B6 hit.
    assert on["thrash_units"] == 1
    assert (on["faults"], on["migrations"], on["evictions"]) == (5, 4, 3)
    assert (on["remote_gpu_pages"], on["hits"]) == (4, 4)


def test_svm_migrates_whole_ranges_and_evicts_lrf(tmp_path):
    # Two allocations of 8 pages, ranges of 4 pages, room for 8 pages. One fault per range.
    ev = [0, 1, 2, 3, 4, 8, 12, 0]
    s = replay(tmp_path, [(0, 8), (8, 8)], ev, policy="svm", capacity=8 * PB, unit=4 * PB)
    # 0 -> range0 (4 pages), 1-3 hits, 4 -> range1; 8 -> range2 evicts range0 (least recently faulted),
    # 12 -> range3 evicts range1, 0 -> range0 evicts range2.
    assert (s["faults"], s["migrations"], s["h2d_fault_pages"]) == (5, 5, 20)
    assert (s["hits"], s["evictions"], s["d2h_evict_pages"]) == (3, 3, 12)


def test_ats_counters_migrate_after_threshold_and_zero_copy_never(tmp_path):
    ev = [0, 0, 0, 0, 1]
    s = replay(tmp_path, [(0, 2)], ev, policy="ats", capacity=64 * PB, unit=2 * PB, counter_threshold=3)
    # Three remote accesses; the third reaches the threshold: the 2-page region migrates; then hits.
    assert (s["remote_gpu_pages"], s["counter_migrations"], s["h2d_counter_pages"], s["hits"]) == (3, 1, 2, 2)
    z = replay(tmp_path, [(0, 2)], ev, policy="zerocopy", capacity=64 * PB)
    assert (z["remote_gpu_pages"], z["hits"], z["h2d_bytes"]) == (5, 0, 0)


def test_gpu_first_touch_populates_and_cpu_fault_migrates_back(tmp_path):
    # init none: the GPU's first touch populates GPU memory (no transfer); the CPU then reads page 0.
    s = replay(tmp_path, [(0, 16)], [0, B, 0 | C, 0 | C | W], capacity=64 * PB, unit=16 * PB, init="none",
               prefetch="off")
    assert (s["populate_gpu_pages"], s["h2d_fault_pages"]) == (16, 0)
    assert (s["cpu_faults"], s["d2h_cpu_fault_pages"], s["cpu_events"]) == (1, 1, 2)


def test_generated_app_is_deterministic_and_in_memory_migrates_once(tmp_path):
    a = sim.run({"app": "jacobi2d", "footprint": "16M", "capacity": "64M", "iterations": 3})
    b = sim.run({"app": "jacobi2d", "footprint": "16M", "capacity": "64M", "iterations": 3})
    for k in ("faults", "hits", "h2d_fault_pages", "h2d_prefetch_pages", "evictions"):
        assert a[k] == b[k]
    # In memory: every page crosses once and nothing is evicted.
    assert a["evictions"] == 0
    assert a["h2d_fault_pages"] + a["h2d_prefetch_pages"] == a["footprint_pages"]


def test_launch_concurrency_forms_batches_from_the_sms_first_faults(tmp_path):
    # 8 pages read once by 2 resident blocks on 2 SMs, each block covering one page per grid-stride step:
    # SM 0 reaches pages 0,2,4,6 and SM 1 pages 1,3,5,7; each stops at its first fault, so every batch
    # holds one fault of each SM (granule of one page, no prefetch): 4 batches of 2 faults.
    one = dict(capacity=64 * PB, unit=8 * PB, granule=PB, prefetch="off")
    s = replay(tmp_path, [(0, 8)], list(range(8)), resident_blocks=2, sms=2, block_bytes=PB, **one)
    assert (s["faults"], s["dup_faults"], s["batches"], s["h2d_fault_pages"], s["hits"]) == (8, 0, 4, 8, 0)
    assert (s["resident_blocks"], s["sms"], s["block_bytes"]) == (2, 2, PB)
    # Blocks covering half a page: both SMs fault on the same page in one batch (a duplicate entry)
    s = replay(tmp_path, [(0, 8)], [0, 1], resident_blocks=2, sms=2, block_bytes=PB // 2, **one)
    assert (s["faults"], s["dup_faults"], s["batches"]) == (2, 2, 2)
    # One SM holding both blocks: one fault per batch, the page replay at window 1
    s = replay(tmp_path, [(0, 8)], list(range(8)), resident_blocks=2, sms=1, block_bytes=PB, **one)
    w = replay(tmp_path, [(0, 8)], list(range(8)), fault_window=1, **one)
    assert (s["faults"], s["batches"]) == (w["faults"], w["batches"]) == (8, 8)
    # A second pass finds every page resident: hits, no faults; a CPU access between kernels ends the launch
    s = replay(tmp_path, [(0, 8)], list(range(8)) + [B] + list(range(8)) + [3 | C | W, B, 3],
               resident_blocks=2, sms=2, block_bytes=PB, **one)
    assert (s["faults"], s["hits"], s["cpu_faults"], s["batches"]) == (9, 8, 1, 5)


def test_resident_blocks_follow_the_device_limits():
    h100 = {"sms": 132, "max_threads_per_sm": 2048, "max_blocks_per_sm": 32, "regs_per_sm": 65536,
            "shared_per_sm": 233472}
    r = sim.resident([1 << 20, 1, 1], [1024, 1, 1], 32, 0, h100)  # threads: 2 blocks of 1024 per SM
    assert (r["blocks_per_sm"], r["blocks"], r["warps"], r["limited_by"]) == (2, 264, 2 * 132 * 32, "threads")
    assert sim.resident(4, 1024, 32, 0, h100)["blocks"] == 4  # the grid itself
    assert sim.resident(1 << 20, 256, 64, 0, h100)["blocks_per_sm"] == 4  # 64 regs x 256 threads: registers
    assert sim.resident(1 << 20, 256, 16, 100000, h100)["limited_by"] == "shared memory"  # 2 per SM
    with pytest.raises(ValueError):
        sim.resident(4, 1024, 0, 0, {})


def test_bad_options_are_refused():
    with pytest.raises(UsageError, match="block-bytes"):
        sim.run({"app": "triad", "footprint": "1M", "capacity": "1M", "resident_blocks": 4})
    with pytest.raises(UsageError, match="policy"):
        sim.run({"app": "triad", "footprint": "1M", "capacity": "1M", "policy": "magic"})
    with pytest.raises(UsageError, match="capacity"):
        sim.run({"app": "triad", "footprint": "1M"})


def test_driver_params_are_read_from_the_uvm_module():
    uvm = {"readable": True, "params": {"uvm_perf_fault_batch_count": "128", "uvm_perf_prefetch_enable": "0",
                                        "uvm_perf_thrashing_enable": "0", "uvm_perf_thrashing_threshold": "3"}}
    assert sim.driver_params(uvm) == {"batch": 128, "prefetch": "off", "thrash_threshold": 0}
    uvm["params"]["uvm_perf_fault_replay_update_put_ratio"] = "30"
    assert sim.driver_params(uvm)["update_put_ratio"] == 30
    assert sim.driver_params({"readable": False}) == {}


def test_speed_floor():
    # A generous floor (CI shares 2 cores with other jobs): bench/sim_speed.py reports the real rate.
    s = sim.run({"app": "jacobi2d", "footprint": "512M", "capacity": "1G", "iterations": 10})
    assert s["events"] > 4_000_000
    assert s["events_per_s"] > 2e6


def test_modelled_time_is_exact_arithmetic():
    stats = {"page_bytes": 4096, "hits": 1000, "remote_gpu_pages": 10, "h2d_fault_pages": 100,
             "h2d_prefetch_pages": 28, "h2d_counter_pages": 0, "d2h_evict_pages": 64, "d2h_cpu_fault_pages": 0,
             "batches": 2, "faults": 50, "migrations": 4}
    fig = {"hbm_gbps": 4.096, "remote_gbps": 0.4096, "migrate_gbps": 0.4096, "fault_batch_us": 10, "fault_us": 1,
           "migration_us": 5}
    t = sim.modelled_time(stats, fig)
    assert t["local"] == pytest.approx(1e-3)
    assert t["remote"] == pytest.approx(1e-4)
    assert t["migrate"] == pytest.approx(128e-5)
    assert t["evict"] == pytest.approx(64e-5)
    assert t["faults"] == pytest.approx(20e-6 + 50e-6 + 20e-6)
    assert t["total"] == pytest.approx(sum(v for k, v in t.items() if k != "total"))


def test_timed_launch_batches_in_time(tmp_path):
    # One SM (one block, one page per step), two faulted pages held before the uTLB stalls, no prefetch, 4 KiB
    # granules: each fault fetches 10 us after the first entry and services in 5 us + 1 us per page; the
    # replay releases the SM onto the next two pages. 32 pages: 16 batches of 2 entries, 17 us each.
    s = replay(tmp_path, [(0, 32)], list(range(32)) + [B], capacity=64 * PB, unit=16 * PB, granule=PB,
               prefetch="off", resident_blocks=1, sms=1, block_bytes=PB, timed=True, utlb_faults=2,
               resident_ns=100, fetch_us=10, batch_us=5, page_us=1)
    assert (s["entries"], s["batches"], s["stale_entries"], s["refaults"], s["flushed_entries"]) == (32, 16, 0, 0, 0)
    assert s["timed_ms"] == pytest.approx(0.272) and s["h2d_fault_pages"] == 32


def test_timed_launch_counts_stale_entries(tmp_path):
    # 4 pages, 8 KiB granules, fetch at once (0 us). t=0: entries for pages 0 and 1 (100 ns apart), the SM
    # stalls at page 2. Batch 1 fetches page 0 only (page 1's entry came after), brings pages 0-1 (7 us). Batch
    # 2 at 7 us fetches page 1's entry (stale: resident) and page 2's (written at the replay), brings 2-3
    # (14 us); page 3's entry, written at 7.1 us while pages 2-3 were still arriving, stays in the buffer and
    # batch 3 counts it stale (19 us). 4 entries, 2 stale, 3 batches.
    s = replay(tmp_path, [(0, 4)], [0, 1, 2, 3, B], capacity=64 * PB, unit=4 * PB, granule=2 * PB,
               prefetch="off", resident_blocks=1, sms=1, block_bytes=PB, timed=True, utlb_faults=2,
               resident_ns=100, fetch_us=0, batch_us=5, page_us=1)
    assert (s["entries"], s["stale_entries"], s["batches"], s["refaults"]) == (4, 2, 3, 0)
    assert s["timed_ms"] == pytest.approx(0.019) and s["h2d_fault_pages"] == 4


def test_timed_entry_log_instances_and_cross_utlb_merge(tmp_path):
    # Two SMs whose blocks share each page (block_bytes half a page): at t=0 both fault page 0, one entry each.
    # The driver merges SM 1's entry into SM 0's (the batch's previous entry, same page): 1 counted entry. With
    # --cross-utlb-merge off only a uTLB's own entries merge: 2. With --entry-instances 0,1 each miss writes two
    # instances (merged into one entry by the uTLB's own rule): still 1 and 2 entries, 4 instances in the log.
    base = dict(capacity=64 * PB, unit=16 * PB, granule=PB, prefetch="off", resident_blocks=2, sms=2,
                block_bytes=PB // 2, timed=True, utlb_faults=1, resident_ns=100, fetch_us=1, batch_us=1, page_us=0)
    log = tmp_path / "e.log"
    s = replay(tmp_path, [(0, 1)], [0, B], entry_log=log, **base)
    assert s["entries"] == 1
    rows = [r.split() for r in log.read_text().splitlines()]
    assert [r[0] for r in rows] == ["f", "f", "r"] and [r[4] for r in rows[:2]] == ["0", "1"]
    assert replay(tmp_path, [(0, 1)], [0, B], cross_utlb_merge="off", **base)["entries"] == 2
    s = replay(tmp_path, [(0, 1)], [0, B], cross_utlb_merge="off", entry_instances="0,1", entry_log=log, **base)
    assert s["entries"] == 2 and sum(1 for r in log.read_text().splitlines() if r.startswith("f ")) == 4


def test_timed_utlb_fault_weights_and_replay_fetch(tmp_path):
    # One SM, 8 pages, 4 KiB granules, no prefetch. --utlb-fault-weights 1 (always one page): 8 batches of one
    # entry, as --utlb-faults 1; weights 0,1 (always two): 4 batches of two, as --utlb-faults 2.
    base = dict(capacity=64 * PB, unit=16 * PB, granule=PB, prefetch="off", resident_blocks=1, sms=1,
                block_bytes=PB, timed=True, resident_ns=100, fetch_us=10, batch_us=5, page_us=1)
    one = replay(tmp_path, [(0, 8)], list(range(8)) + [B], utlb_fault_weights="1", **base)
    assert (one["entries"], one["batches"]) == (8, 8)
    two = replay(tmp_path, [(0, 8)], list(range(8)) + [B], utlb_fault_weights="0,1", **base)
    assert (two["entries"], two["batches"]) == (8, 4)
    # One page per batch: fetch 10 us after its first entry, 5 us + 1 us per page: 16 us x 8 = 128 us. With
    # --replay-fetch-us 2 the SM resumes 2 us after each replay (its retried access completes) and the driver
    # fetches again then, taking the entry the SM writes at that instant: 16, then 7 x (2 + 6) = 72 us.
    assert one["timed_ms"] == pytest.approx(0.128)
    rf = replay(tmp_path, [(0, 8)], list(range(8)) + [B], utlb_fault_weights="1", replay_fetch_us=2, **base)
    assert (rf["entries"], rf["batches"]) == (8, 8) and rf["timed_ms"] == pytest.approx(0.072)


def test_timed_new_options_refuse_bad_values(tmp_path):
    f = tmp_path / "t.umstrace"
    sim.write_trace(f, [(0, 4)], [0, 1, B], PB)
    base = {"trace": f, "capacity": 64 * PB, "resident_blocks": 1, "sms": 1, "block_bytes": PB, "timed": True}
    for bad in ({"entry_instances": "0,0"}, {"utlb_fault_weights": "1,x"}, {"utlb_fault_weights": ",".join("1" * 9)},
                {"cross_utlb_merge": "maybe"}):
        with pytest.raises(UsageError):
            sim.run(dict(base, **bad))
    with pytest.raises(UsageError, match="--entry-log needs --timed"):
        sim.run({"trace": f, "capacity": 64 * PB, "entry_log": tmp_path / "x"})


def test_timed_interleave_orders_simultaneous_entries_across_sms(tmp_path):
    # Four SMs, one page each, faulting at t=0; batch of 2 entries: SM order takes the entries of SMs 0 and 1
    # (pages 0 and 1) first; interleaved (bit-reversed: 0, 2, 1, 3) takes SMs 0 and 2 (pages 0 and 2).
    base = dict(capacity=64 * PB, unit=16 * PB, granule=PB, prefetch="off", resident_blocks=4, sms=4,
                block_bytes=PB, timed=True, utlb_faults=1, resident_ns=100, fetch_us=1, batch_us=1, page_us=0,
                batch=2)
    for inter, first in (("off", {0, 1}), ("on", {0, 2})):
        log = tmp_path / f"e{inter}.log"
        replay(tmp_path, [(0, 4)], [0, 1, 2, 3, B], interleave=inter, entry_log=log, **base)
        b1 = {int(r.split()[2]) for r in log.read_text().splitlines() if r.startswith("f 1 ")}
        assert b1 == first, inter


def test_timed_write_ns_writes_the_fault_buffer_one_entry_at_a_time(tmp_path):
    # Four SMs, one page each, faulting at t=0; the driver fetches 1 us after the first entry. Written at once,
    # the first batch holds all four. Written 400 ns apart (at 0, 400, 800, 1200 ns), it holds the three written
    # by the fetch; the fourth waits for the next batch (where SM 3's refault at the replay merges into it).
    base = dict(capacity=64 * PB, unit=16 * PB, granule=PB, prefetch="off", resident_blocks=4, sms=4,
                block_bytes=PB, timed=True, utlb_faults=1, resident_ns=100, fetch_us=1, batch_us=1, page_us=0)
    for wns, first in ((0, 4), (400, 3)):
        log = tmp_path / f"w{wns}.log"
        s = replay(tmp_path, [(0, 4)], [0, 1, 2, 3, B], write_ns=wns, entry_log=log, **base)
        rows = [r.split() for r in log.read_text().splitlines() if r.startswith("f ")]
        assert sum(1 for r in rows if r[1] == "1") == first, wns
        assert s["entries"] == 4 and s["h2d_fault_pages"] == 4
    written = sorted(float(r[5]) for r in rows if r[4] == "0")
    assert [b - a for a, b in zip(written, written[1:])] == [400.0] * 3


def test_timed_block_order_shuffled_takes_an_sms_blocks_in_any_order(tmp_path):
    # Two SMs, eight blocks of one page (blocks 0, 2, 4, 6 on SM 0), 64 pages: eight grid steps of 8 pages.
    # Each uTLB holds one faulted page. In block order SM 0 faults its lowest block's page first in every step
    # (0, 2, 4, 6, 8, ...); shuffled, the pages of each step are the same but not always in that order.
    base = dict(capacity=128 * PB, unit=16 * PB, granule=PB, prefetch="off", resident_blocks=8, sms=2,
                block_bytes=PB, timed=True, utlb_faults=1, resident_ns=100, fetch_us=1, batch_us=1, page_us=0)
    seqs = {}
    for order in ("ordered", "shuffled"):
        log = tmp_path / f"{order}.log"
        s = replay(tmp_path, [(0, 64)], list(range(64)) + [B], block_order=order, entry_log=log, **base)
        assert s["entries"] == 64 and s["h2d_fault_pages"] == 64
        seqs[order] = [int(r.split()[2]) for r in log.read_text().splitlines() if r.startswith("f ") and r.split()[3] == "0"]
    assert seqs["ordered"] == list(range(0, 64, 2))
    steps = lambda q: [sorted(q[i:i + 4]) for i in range(0, 32, 4)]  # noqa: E731
    assert steps(seqs["shuffled"]) == steps(seqs["ordered"]) and seqs["shuffled"] != seqs["ordered"]
    with pytest.raises(UsageError):
        replay(tmp_path, [(0, 64)], list(range(64)) + [B], block_order="random", **base)


def test_timed_block_order_groups_gives_the_sms_sharing_pages_one_order(tmp_path):
    # Four SMs, eight blocks of half a page (two dispatch rounds: SM s holds blocks s and s + 4), 32 pages: a grid
    # step of 16 KiB is 4 pages, round 0's blocks 0-3 on pages 4j (blocks 0, 1: SMs 0, 1) and 4j + 1 (SMs 2, 3),
    # round 1's on 4j + 2 (SMs 0, 1) and 4j + 3 (SMs 2, 3). Groups: SMs 0-1 (s x 2 KiB / 4 KiB = 0) and SMs 2-3 (1).
    # Each uTLB holds one faulted page, no cross-uTLB merge. Grouped, SMs 0 and 1 take the same round first in every
    # step, so each batch holds one page of each group, faulted by both of its SMs: 2 batches per step, 4 entries
    # each (64 in 16 batches, 32 pages). Shuffled, SMs 0 and 1 draw their orders alone: in a step where they differ
    # each faults its own page in one batch, and the partner's page then passes: fewer entries.
    base = dict(capacity=128 * PB, unit=16 * PB, granule=PB, prefetch="off", resident_blocks=8, sms=4,
                block_bytes=PB // 2, timed=True, utlb_faults=1, resident_ns=100, fetch_us=1, batch_us=1, page_us=0,
                cross_utlb_merge="off")
    got = {}
    for order in ("shuffled", "groups"):
        log = tmp_path / f"{order}.log"
        got[order] = replay(tmp_path, [(0, 32)], list(range(32)) + [B], block_order=order, entry_log=log, **base)
        assert got[order]["h2d_fault_pages"] == 32
    assert got["groups"]["entries"] == 64 and got["groups"]["batches"] == 16
    assert got["shuffled"]["entries"] < 64
    by = {}
    for r in (r.split() for r in (tmp_path / "groups.log").read_text().splitlines() if r.startswith("f ")):
        by.setdefault(int(r[1]), {}).setdefault(int(r[2]), []).append(int(r[3]))
    firsts = []
    for b in range(1, 17):
        pages = sorted(by[b])
        assert len(pages) == 2 and pages[0] // 4 == pages[1] // 4 == (b - 1) // 2  # one step, two batches
        assert {p % 2: sorted(by[b][p]) for p in pages} == {0: [0, 1], 1: [2, 3]}  # 4j or 4j+2: SMs 0, 1; else 2, 3
        if b % 2:  # the step's first batch: each group's first round (page 4j + 2r + group)
            firsts.append(tuple(p % 4 // 2 for p in sorted(pages, key=lambda p: p % 2)))
    # the rounds' order is drawn per group and step: not always round 0 first, and the groups not always alike
    assert any(f != (0, 0) for f in firsts) and any(f[0] != f[1] for f in firsts)
    with pytest.raises(UsageError):
        replay(tmp_path, [(0, 32)], list(range(32)) + [B], block_order="rounds", **base)


def test_untimed_replay_is_the_same_under_every_block_order(tmp_path):
    # umsim-7 differs from umsim-6 only in the timed replay's block order (block-groups), umsim-8 from umsim-7 only in
    # the timed replay's resume and instance order (--resume-us needs --timed: test below), so figures validated with
    # umsim-6's untimed replay (advise's) hold for both (simulate.UNTIMED): the untimed replay takes no block order
    base = dict(capacity=128 * PB, unit=16 * PB, granule=PB, prefetch="off", resident_blocks=8, sms=4,
                block_bytes=PB // 2)
    events = list(range(32)) + [B] + list(range(31, -1, -1))
    got = {o: replay(tmp_path, [(0, 32)], events, block_order=o, **base) for o in ("ordered", "shuffled", "groups")}
    for g in got.values():  # the simulator's own wall time, not the replay
        del g["events_per_s"], g["sim_seconds"]
    assert got["ordered"]["faults"] > 0 and got["ordered"] == got["shuffled"] == got["groups"]
    assert sim.VERSION == sim.UNTIMED[0] and {"umsim-6", "umsim-7"} <= set(sim.UNTIMED)


def test_timed_page_order_chunks_misses_a_chunks_pages_before_the_next_chunk(tmp_path):
    # One SM, one block, chunks of two pages, two chunks per unrolled step (one grid stride apart: pages 0-1
    # and 2-3, then 4-5 and 6-7); one faulted page per batch. By pages: the first page of each chunk, then the
    # second (0, 2, 1, 3, ...); by chunks: every page of the first chunk, then the second's (0, 1, 2, 3, ...).
    base = dict(capacity=64 * PB, unit=16 * PB, granule=PB, prefetch="off", resident_blocks=1, sms=1,
                block_bytes=2 * PB, unroll=2, timed=True, utlb_faults=1, resident_ns=100, fetch_us=1, batch_us=1,
                page_us=0)
    for order, want in (("pages", [0, 2, 1, 3, 4, 6, 5, 7]), ("chunks", list(range(8)))):
        log = tmp_path / f"{order}.log"
        s = replay(tmp_path, [(0, 8)], list(range(8)) + [B], page_order=order, entry_log=log, **base)
        assert [int(r.split()[2]) for r in log.read_text().splitlines() if r.startswith("f ")] == want, order
        assert s["entries"] == 8 and s["batches"] == 8
    with pytest.raises(UsageError):
        replay(tmp_path, [(0, 8)], list(range(8)) + [B], page_order="rows", **base)


def test_timed_release_blocks_lets_an_sm_go_on_once_its_va_block_is_mapped(tmp_path):
    # Two SMs, one page per block step (SM 0: pages 0, 2, 4, 6; SM 1: 1, 3, 5, 7), one page per VA block, each
    # uTLB holding one faulted page. The first batch holds pages 0 and 1; its service maps page 0's block 10 us
    # before page 1's and replays after both. Released at the replay, SM 0 faults page 2 after it; released as
    # its block is mapped (--release blocks), during the service, before the replay.
    base = dict(capacity=64 * PB, unit=PB, granule=PB, prefetch="off", resident_blocks=2, sms=2, block_bytes=PB,
                timed=True, utlb_faults=1, resident_ns=100, fetch_us=1, batch_us=1, page_us=10)
    for release, before in (("replay", False), ("blocks", True)):
        log = tmp_path / f"r{release}.log"
        s = replay(tmp_path, [(0, 8)], list(range(8)) + [B], release=release, entry_log=log, **base)
        rows = [r.split() for r in log.read_text().splitlines()]
        replay1 = next(float(r[2]) for r in rows if r[0] == "r" and r[1] == "1")
        page2 = next(float(r[5]) for r in rows if r[0] == "f" and r[2] == "2")
        assert {int(r[2]) for r in rows if r[0] == "f" and r[1] == "1"} == {0, 1}
        assert (page2 < replay1) == before, release
        assert s["h2d_fault_pages"] == 8
    with pytest.raises(UsageError):
        replay(tmp_path, [(0, 8)], list(range(8)) + [B], release="early", **base)


def test_timed_fault_burst_stalls_a_uTLB_until_the_replay_and_faults_in_a_burst_after_it(tmp_path):
    # One SM walking pages 0-7 at 1 us a page, holding up to 8 faulted pages, 4 KiB granules, no prefetch; the
    # driver fetches 10 us after the first entry and services in 5 us + 1 us per page. Without --fault-burst-us
    # the uTLB writes all 8 misses (0-7 us) before the fetch at 10 us: one batch. With a 2.5 us burst it writes
    # pages 0-2 (0, 1, 2 us), stalls at page 3 (3 us, after the burst) until the replay (10 + 5 + 3 = 18 us),
    # resumes there and writes pages 3-5 at 18, 19, 20 us, stalls at page 6 until the next replay (28 + 5 + 3 =
    # 36 us), then pages 6-7 (36, 37 us; replay at 46 + 5 + 2 = 53 us): 3 batches, every entry after the first
    # batch written within 2.5 us of the previous replay.
    base = dict(capacity=64 * PB, unit=16 * PB, granule=PB, prefetch="off", resident_blocks=1, sms=1,
                block_bytes=PB, timed=True, utlb_faults=8, resident_ns=1000, fetch_us=10, batch_us=5, page_us=1)

    def batches(log):
        rows = [r.split() for r in log.read_text().splitlines()]
        replays = [float(r[2]) for r in rows if r[0] == "r"]
        written = {}
        for r in rows:
            if r[0] == "f":
                written.setdefault(int(r[1]), []).append((int(r[2]), float(r[5])))
        return replays, written
    log = tmp_path / "off.log"
    s = replay(tmp_path, [(0, 8)], list(range(8)) + [B], entry_log=log, **base)
    assert (s["entries"], s["batches"]) == (8, 1) and s["timed_ms"] == pytest.approx(0.023)
    log = tmp_path / "burst.log"
    s = replay(tmp_path, [(0, 8)], list(range(8)) + [B], fault_burst_us=2.5, entry_log=log, **base)
    assert (s["entries"], s["batches"], s["refaults"], s["h2d_fault_pages"]) == (8, 3, 0, 8)
    replays, written = batches(log)
    assert replays == [18000, 36000, 53000] and s["timed_ms"] == pytest.approx(0.053)
    assert [[pg for pg, _ in written[b]] for b in (1, 2, 3)] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    for b in (2, 3):
        assert all(replays[b - 2] <= t <= replays[b - 2] + 2500 for _, t in written[b]), b
    # With --replay-fetch-us 2 a released uTLB resumes 2 us after the replay; under the burst it resumes at the
    # replay itself, so the fetch 2 us later takes the burst its warps write then (pages 3, 4, 5 at 18-20 us).
    log = tmp_path / "rf.log"
    replay(tmp_path, [(0, 8)], list(range(8)) + [B], fault_burst_us=2.5, replay_fetch_us=2, entry_log=log, **base)
    replays, written = batches(log)
    assert replays[0] == 18000 and written[2] == [(3, 18000), (4, 19000), (5, 20000)]
    with pytest.raises(UsageError):
        replay(tmp_path, [(0, 8)], list(range(8)) + [B], fault_burst_us=-1, **base)


def test_timed_instance_order_spread_writes_simultaneous_entries_round_by_round(tmp_path):
    # Two SMs, one page each (SM 0 page 0, SM 1 page 1), both missing at 0 ns, every entry two instances, the GPU
    # writing one instance per 10 ns, the driver fetching 15 ns after the first entry and servicing in 5 us + 1 us
    # per page. together: P0 P0 P1 P1 at 0, 10, 20, 30 ns; the fetch takes P0's two (one entry), P0 migrates
    # (replay at 15 + 5000 + 1000 = 6015 ns); SM 1's page is still missing there, so it faults again; batch 2 at
    # the replay takes P1's two instances and the re-fault (one merged entry), P1 migrates: 2 entries, 2 batches,
    # 1 re-fault, nothing stale. spread: P0 P1 P0 P1 at 0, 10, 20, 30 ns; the fetch takes P0 and P1 (2 entries,
    # both migrate: replay at 15 + 5000 + 2000 = 7015 ns); the later instances, written after the fetch, stay in
    # the buffer and make batch 2: both pages resident, 2 stale entries counted: 4 entries, 2 batches, no re-fault.
    base = dict(capacity=64 * PB, unit=16 * PB, granule=PB, prefetch="off", resident_blocks=2, sms=2,
                block_bytes=PB, timed=True, utlb_faults=1, resident_ns=1000, fetch_us=0.015, batch_us=5, page_us=1,
                write_ns=10, entry_instances="0,1")
    got = {}
    for order in ("together", "spread"):
        log = tmp_path / f"{order}.log"
        s = replay(tmp_path, [(0, 2)], [0, 1, B], instance_order=order, entry_log=log, **base)
        rows = [r.split() for r in log.read_text().splitlines()]
        got[order] = ((s["entries"], s["batches"], s["refaults"], s["stale_entries"], s["h2d_fault_pages"]),
                      [(int(r[1]), int(r[2]), float(r[5])) for r in rows if r[0] == "f"],
                      [float(r[2]) for r in rows if r[0] == "r"])
    assert got["together"][0] == (2, 2, 1, 0, 2)
    assert got["together"][1][:2] == [(1, 0, 0), (1, 0, 10)] and got["together"][2] == [6015, 12015]
    assert got["spread"][0] == (4, 2, 0, 2, 2)
    assert got["spread"][1] == [(1, 0, 0), (1, 1, 10), (2, 0, 20), (2, 1, 30)] and got["spread"][2][0] == 7015
    # the default is together
    assert replay(tmp_path, [(0, 2)], [0, 1, B], **base)["entries"] == 2
    with pytest.raises(UsageError):
        replay(tmp_path, [(0, 2)], [0, 1, B], instance_order="warps", **base)


def test_timed_instance_gap_trails_later_instances_by_the_uTLBs_faulting_at_once(tmp_path):
    # Two SMs, one page each (SM 0 page 0, SM 1 page 1), both missing at 0 ns, every entry two instances, the GPU
    # writing one instance per ns, the driver fetching 15 ns after the first entry and servicing in 5 us + 1 us per
    # page. --instance-gap-ns 20: SM 0's second instance trails its first by 20 ns x 1 uTLB faulting (itself): 0, 20;
    # SM 1's by 20 x 2 (SM 0 holds its page): 0, 40; written 0, 1, 20, 40. The fetch at 15 ns takes both first
    # instances (2 entries, both pages migrate: replay at 15 + 5000 + 2000 = 7015 ns); the trailing two stay for
    # batch 2 (fetched at once, the replay 5 us later: 12015 ns), both pages resident: 2 stale entries, 4 in all.
    # With a 2 ns gap (0, 2 and 0, 4) the fetch takes all four, each second instance merged into its uTLB's previous
    # entry: 2 entries, 1 batch. Off: together.
    base = dict(capacity=64 * PB, unit=16 * PB, granule=PB, prefetch="off", resident_blocks=2, sms=2,
                block_bytes=PB, timed=True, utlb_faults=1, resident_ns=1000, fetch_us=0.015, batch_us=5, page_us=1,
                write_ns=1, entry_instances="0,1")
    got = {}
    for gap in (20, 2):
        for by in ("holding", "buffer"):
            log = tmp_path / f"{gap}{by}.log"
            s = replay(tmp_path, [(0, 2)], [0, 1, B], instance_gap_ns=gap, instance_gap_by=by, entry_log=log, **base)
            rows = [r.split() for r in log.read_text().splitlines()]
            got[gap, by] = ((s["entries"], s["batches"], s["refaults"], s["stale_entries"]),
                            [(int(r[1]), int(r[2]), float(r[5])) for r in rows if r[0] == "f"],
                            [float(r[2]) for r in rows if r[0] == "r"])
    for by in ("holding", "buffer"):  # both count the two uTLBs here: SM 0 holds page 0, its entries are in the buffer
        assert got[20, by][0] == (4, 2, 0, 2)
        assert got[20, by][1] == [(1, 0, 0), (1, 1, 1), (2, 0, 20), (2, 1, 40)] and got[20, by][2] == [7015, 12015]
        assert got[2, by][0] == (2, 1, 0, 0) and [b for b, _, _ in got[2, by][1]] == [1, 1, 1, 1]
    assert replay(tmp_path, [(0, 2)], [0, 1, B], **base)["entries"] == replay(
        tmp_path, [(0, 2)], [0, 1, B], instance_gap_ns=0, **base)["entries"] == 2
    # One SM holding two pages (1 ns apart), a 20 ns gap, the fetch at 100 ns: page 0's instances at 0 and 20, page 1's
    # after them (40, 60), not between (1, 21): the uTLB's instances of a page stay consecutive among its own, each
    # second merged: 2 entries; interleaved they would be 4.
    one = dict(base, resident_blocks=1, sms=1, utlb_faults=2, resident_ns=1, fetch_us=0.1)
    log = tmp_path / "one.log"
    s = replay(tmp_path, [(0, 2)], [0, 1, B], instance_gap_ns=20, entry_log=log, **one)
    rows = [r.split() for r in log.read_text().splitlines() if r.startswith("f")]
    assert s["entries"] == 2 and [(int(r[2]), float(r[5])) for r in rows] == [(0, 0), (0, 20), (1, 40), (1, 60)]
    for bad in (dict(instance_gap_ns=-1), dict(instance_gap_ns=5, instance_gap_by="sms")):
        with pytest.raises(UsageError):
            replay(tmp_path, [(0, 2)], [0, 1, B], **bad, **base)


def test_timed_counts_batches_flushed_whole_by_the_update_put_ratio(tmp_path):
    # Sixteen SMs, one page each, every entry written twice (one duplicate in two: 50%) or three times (two in
    # three): at the driver's ratio 50 a batch of pairs keeps its PUT, one of triples is flushed whole; at 100
    # neither is; at 0 both are.
    base = dict(capacity=64 * PB, unit=16 * PB, granule=PB, prefetch="off", resident_blocks=16, sms=16,
                block_bytes=PB, timed=True, utlb_faults=1, resident_ns=100, fetch_us=1, batch_us=1, page_us=0)
    got = {}
    for inst in ("0,1", "0,0,1"):
        for ratio in (0, 50, 100):
            s = replay(tmp_path, [(0, 16)], list(range(16)) + [B], entry_instances=inst, update_put_ratio=ratio, **base)
            assert s["batches"] >= 1
            got[(inst, ratio)] = s["update_put_batches"] / s["batches"]
    assert got == {("0,1", 0): 1.0, ("0,1", 50): 0.0, ("0,1", 100): 0.0,
                   ("0,0,1", 0): 1.0, ("0,0,1", 50): 1.0, ("0,0,1", 100): 0.0}


def test_timed_resume_us_lets_released_utlbs_miss_in_the_replays_burst(tmp_path):
    # Four SMs, one page each per grid step (pages 0-3 then 4-7), 4-page granules, no prefetch, one faulted page per
    # uTLB, the GPU writing one entry per us, the driver fetching 10 us after the first entry and 2.5 us after a replay,
    # servicing in 5 us + 1 us per migrated page. Batch 1 takes pages 0-3 (written 0-3 us), migrates granule 0 and
    # replays at 10 + 5 + 4 = 19 us, releasing all four. Default (as --resume-us 2.5): they resume 2.5 us after the
    # replay and miss pages 4-7 at 21.5, written 21.5-24.5 us; the fetch at 21.5 takes page 4 alone (batch 2 migrates
    # granule 1), pages 5-7 are written during its service and counted stale in batch 3. --resume-us 0: they miss at
    # the replay, written 19-22 us; the fetch at 21.5 takes pages 4-6 and only page 7 is stale.
    base = dict(capacity=64 * PB, unit=16 * PB, granule=4 * PB, prefetch="off", resident_blocks=4, sms=4,
                block_bytes=PB, timed=True, utlb_faults=1, resident_ns=100, fetch_us=10, batch_us=5, page_us=1,
                write_ns=1000, replay_fetch_us=2.5)
    got = {}
    for r in (None, 2.5, 0):
        log = tmp_path / f"e{r}.log"
        s = replay(tmp_path, [(0, 8)], list(range(8)) + [B], entry_log=log, **({} if r is None else {"resume_us": r}),
                   **base)
        rows = [x.split() for x in log.read_text().splitlines() if x.startswith("f")]
        got[r] = ((s["entries"], s["batches"], s["stale_entries"]), [(int(x[1]), int(x[2]), float(x[5])) for x in rows])
    assert got[None] == got[2.5]
    assert got[None][0] == (8, 3, 3) and got[None][1][4:] == [(2, 4, 21500), (3, 5, 22500), (3, 6, 23500),
                                                              (3, 7, 24500)]
    assert got[0][0] == (8, 3, 1) and got[0][1][4:] == [(2, 4, 19000), (2, 5, 20000), (2, 6, 21000), (3, 7, 22000)]
    # A small grid of the migration kernel's shape (16 KiB blocks, 4 unrolled, two instances an entry, 20 ns a write):
    # the released uTLBs' misses are fetched with the replay's burst instead of being left stale behind the next
    # fetch, so the count falls (the direction the calibration programs' reads on 6-20 blocks take, 10047 -> 9479 on
    # 6, docs: /work/notes/f39e.md)
    f = tmp_path / "g.umstrace"
    sim.write_trace(f, [(0, 2048)], list(range(2048)) + [B], PB)
    grid = dict(trace=f, capacity=8192 * PB, resident_blocks=8, sms=8, block_bytes=4 * PB, timed=True, unroll=4,
                utlb_faults=2, resident_ns=50, fetch_us=50, batch_us=20, page_us=0.5, write_ns=20, replay_fetch_us=2.6,
                entry_instances="0,1")
    late, now = sim.run(grid), sim.run(dict(grid, resume_us=0))
    assert now["entries"] < late["entries"] and now["stale_entries"] < late["stale_entries"]
    for bad in (dict(resume_us=-1), dict(resume_us="x")):
        with pytest.raises(UsageError):
            sim.run(dict(grid, **bad))
    with pytest.raises(UsageError, match="--resume-us needs --timed"):
        sim.run({"trace": f, "capacity": 8192 * PB, "resume_us": 0})
