"""The simulator at the sizes users ask about, and the suite's gemm, syr2k and himeno streams (CPU only).

umsim replays a stream as it generates (or reads) it, a chunk at a time: its memory holds the page state, never
the stream, so a footprint past this machine's memory is simulated (a GEMM's stream grows as footprint^1.5:
`advise sgemm --footprint 200G` made 2e10 events, 80 GB stored, and died of std::bad_alloc). A footprint whose
page state does not fit is refused in one line saying what fits. The memory limits below are set on umsim alone
(a wrapper running it under `ulimit -v`), so the tests take a few seconds (about 6 s on the 2-core build machine).
"""
import json
import re

import pytest

from umscope import cli
from umscope.model import simulate as sim

W, B = sim.WRITE, sim.BARRIER
PB = 4096
LIMIT_KIB = 128 << 10  # 128 MiB of address space for umsim


@pytest.fixture
def limited(tmp_path, monkeypatch):
    """umsim under a 128 MiB address-space limit (what `ulimit -v 131072` gives a user's shell)."""
    real = sim.umsim_path()
    w = tmp_path / "umsim-limited"
    w.write_text(f'#!/bin/sh\nulimit -v {LIMIT_KIB}\nexec "{real}" "$@"\n')
    w.chmod(0o755)
    monkeypatch.setenv("UMSCOPE_UMSIM", str(w))
    return w


def test_a_stream_larger_than_memory_is_replayed_as_it_is_generated(limited, capsys):
    # sgemm at 6 GiB: 67.7 M page events, 258 MiB as a stored stream, twice umsim's whole address space here.
    s = sim.run({"app": "sgemm", "footprint": 6 << 30, "capacity": 8 << 30, "policy": "zerocopy"})
    assert s["events"] * 4 > 2 * LIMIT_KIB * 1024
    assert s["remote_gpu_pages"] == s["gpu_events"] == s["events"] - 1  # one barrier
    # The user's question (the brief's GH200 case, at a size CI can afford): an answer, every policy simulated.
    assert cli.main(["advise", "sgemm", "--footprint", "6G", "--capacity", "8G", "--machine", "gh200", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["status"] == "modelled" and {"managed", "zerocopy", "system"} <= set(r["evidence"])
    assert r["evidence"]["managed"]["evicted_bytes"] == 0 < r["evidence"]["managed"]["migrated_bytes"]


def test_a_page_state_past_memory_is_one_line_saying_what_fits(limited, capsys):
    assert cli.main(["advise", "triad", "--footprint", "200G", "--machine", "gh200"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1 and cap.err.startswith("umscope: error:")
    assert "200.0 GiB in pages of 4 KiB needs about" in cap.err
    most = float(re.search(r"at most ([0-9.]+) GiB at this --page", cap.err).group(1))
    assert 4 < most < 200
    # What it says fits does fit, and a coarser page fits the 200 GiB.
    assert cli.main(["simulate", "triad", "--footprint", f"{int(most * 0.9)}G", "--capacity", "96G",
                     "--policy", "zerocopy", "--json"]) == 0
    (rec,) = json.loads(capsys.readouterr().out)
    assert rec["counts"]["footprint_pages"] >= int(most * 0.9) * (1 << 30) // PB - 2
    assert "page_note" not in rec["inputs"]  # 4 KiB pages: nothing to say
    assert cli.main(["advise", "triad", "--footprint", "200G", "--machine", "gh200", "--page", "64K"]) == 0
    out = capsys.readouterr().out
    assert "replayed in pages of 64 KiB, not the driver's 4 KiB" in out and "recommended:" in out
    assert cli.main(["simulate", "triad", "--footprint", "200G", "--capacity", "96G", "--page", "64K",
                     "--policy", "zerocopy", "--json"]) == 0
    (rec,) = json.loads(capsys.readouterr().out)
    assert rec["counts"]["page_bytes"] == 65536 and "per 64 KiB page" in rec["inputs"]["page_note"]


def replay(tmp_path, allocs, events, **params):
    f = tmp_path / "t.umstrace"
    sim.write_trace(f, allocs, events, PB)
    return sim.run(dict(params, trace=f))


def test_a_trace_streams_across_chunks_and_bad_traces_are_one_line(tmp_path):
    # 200000 events (umsim reads 65536 at a time): 100 pages read 2000 times; each page faults once.
    ev = list(range(100)) * 2000
    s = replay(tmp_path, [(0, 100)], ev, capacity=1 << 20, granule=PB, prefetch="off", batch=1)
    assert (s["events"], s["faults"], s["hits"], s["batches"]) == (200000, 100, 199900, 100)
    with pytest.raises(sim.UsageError, match="event page outside every allocation"):
        replay(tmp_path, [(0, 100)], ev + [100], capacity=1 << 20)
    f = tmp_path / "cut.umstrace"
    sim.write_trace(f, [(0, 100)], ev, PB)
    f.write_bytes(f.read_bytes()[:-4])
    with pytest.raises(sim.UsageError, match="too short to hold them"):
        sim.run({"trace": f, "capacity": 1 << 20})


# ------------------------------------------------------------------ units past 65535 pages
def test_units_past_65535_pages(tmp_path):
    big = 70000  # pages per unit: past the old uint16 limit of 65535
    allocs = [(0, 2 * big)]
    # SVM: a fault migrates its whole range; two ranges of 70000 pages, two faults, the rest hits.
    s = replay(tmp_path, allocs, [0, 1, big, 2 * big - 1], capacity=4 * big * PB, policy="svm", unit=big * PB)
    assert (s["unit_pages"], s["faults"], s["migrations"], s["h2d_fault_pages"], s["hits"]) == (big, 2, 2, 2 * big, 2)
    # Room for one range only: the second fault evicts the first range whole.
    s = replay(tmp_path, allocs, [0, big], capacity=big * PB, policy="svm", unit=big * PB)
    assert (s["evictions"], s["d2h_evict_pages"]) == (1, big)
    # UVM: a VA block of 2^17 pages; without prefetch a fault at its last page brings its 16-page granule.
    s = replay(tmp_path, [(0, 1 << 17)], [(1 << 17) - 1], capacity=1 << 30, unit=(1 << 17) * PB, prefetch="off")
    assert (s["unit_pages"], s["faults"], s["h2d_fault_pages"]) == (1 << 17, 1, 16)
    # The density prefetcher over the block's tree of 2^17 leaves: a batch faulting every other 16-page granule
    # fills every subtree to exactly 50%: nothing is prefetched at the driver's threshold (over 51%), the whole
    # block (the root, the largest subtree over the threshold) at 49%.
    for pct, prefetched in ((51, 0), (49, 1 << 16)):
        s = replay(tmp_path, [(0, 1 << 17)], list(range(0, 1 << 17, 32)), capacity=1 << 30, unit=(1 << 17) * PB,
                   batch=1 << 20, prefetch_threshold=pct)
        assert (s["batches"], s["h2d_fault_pages"], s["h2d_prefetch_pages"]) == (1, 1 << 16, prefetched)
    # ATS: a counter region of 70000 pages migrates whole after --counter-threshold remote accesses.
    s = replay(tmp_path, allocs, [5, 6, 7], capacity=4 * big * PB, policy="ats", unit=big * PB, counter_threshold=2)
    assert (s["remote_gpu_pages"], s["counter_migrations"], s["h2d_counter_pages"], s["hits"]) == (2, 1, big, 1)
    with pytest.raises(sim.UsageError, match="page-number space"):
        replay(tmp_path, allocs, [0], capacity=PB, unit=(1 << 31) * PB)


# ------------------------------------------------------------------ the suite's gemm, syr2k, himeno
# 12 MiB: three 1024 x 1024 fp32 matrices, a row per 4 KiB page.
N = 1024
FOOT = 3 * N * N * 4


def test_gemm_stream_walks_cublas_tiles():
    # One 128 x 256 tile of C at a time (cuBLAS's, native/apps/gemm.cu): 8 x 4 = 32 tiles; a tile reads its 128
    # rows of A (a page each) and the 1024 rows of B over its 256 columns (one page each), then writes its 128
    # rows of C. A is read once per tile column, 4 times, as gemm.cu's link_read_bytes counts it; B's pages
    # once per tile (gemm.cu's bytes: once per tile row; a page holds the 4 tiles' columns).
    s = sim.run({"app": "gemm", "footprint": FOOT, "capacity": 4 * FOOT, "policy": "zerocopy", "concurrency": 1})
    assert s["events"] == 32 * (128 + 1024 + 128) + 1
    assert s["remote_gpu_pages"] == 4 * N + 32 * N + 32 * 128
    # sgemm's 128 x 128 tiles read B twice as often (64 tiles)
    q = sim.run({"app": "sgemm", "footprint": FOOT, "capacity": 4 * FOOT, "policy": "zerocopy", "concurrency": 1})
    assert q["events"] == 64 * (128 + 1024 + 128) + 1


def test_syr2k_stream_reads_its_four_panels_per_tile():
    # 64 x 64 tiles of C: 16 x 16 = 256; each reads the 64 rows of A and B of its tile row and of its tile
    # column (256 pages: 64 KiB of panel per row, what syr2k.cu's link_bytes counts, 4 x 64 x m floats a
    # tile), then reads and writes its 64 rows of C.
    s = sim.run({"app": "syr2k", "footprint": FOOT, "capacity": 4 * FOOT, "policy": "zerocopy", "concurrency": 1,
                 "iterations": 1})
    assert s["events"] == 256 * (4 * 64 + 2 * 64) + 1
    # The application's own concurrency (1056 tiles: all 256 at once): each panel page once per k-slab and
    # row range, C read and written once: 2 x 1024 x 2 + 2 x 1024.
    s = sim.run({"app": "syr2k", "footprint": FOOT, "capacity": 4 * FOOT, "policy": "zerocopy", "iterations": 1})
    assert s["events"] == 2 * 2 * N + 2 * N + 1


def test_himeno_stream_sweeps_the_interior_planes():
    # 112 x 31^3 bytes: himeno.cu's grid for that footprint is i = floor(cbrt(footprint / 56 / 2)) = 31,
    # I = J = 32, K = 63: 14 arrays of 64512 floats, 63 pages each; a plane is 2016 floats, so the interior
    # planes are pages 1 to 61. Per iteration and interior page: p at the planes before, at and after, the 12
    # coefficients, wrk2 written (16 GPU accesses), then the copy back (2); a barrier after each kernel.
    foot = 112 * 31 ** 3
    s = sim.run({"app": "himeno", "footprint": foot, "capacity": 4 * foot, "policy": "zerocopy", "iterations": 2})
    assert s["footprint_pages"] == 14 * 63
    assert (s["events"], s["barriers"], s["remote_gpu_pages"]) == (2 * (18 * 61 + 2), 4, 2 * 18 * 61)
    # One byte less: the grid of i = 30
    s = sim.run({"app": "himeno", "footprint": foot - 1, "capacity": 4 * foot, "policy": "zerocopy"})
    assert s["footprint_pages"] == 14 * ((31 * 31 * 61 + 1023) // 1024)


@pytest.mark.parametrize("app", ["gemm", "syr2k", "himeno"])
def test_new_streams_in_memory_migrate_once_and_oversubscribed_evict(app):
    a = sim.run({"app": app, "footprint": "16M", "capacity": "64M", "iterations": 2})
    b = sim.run({"app": app, "footprint": "16M", "capacity": "64M", "iterations": 2})
    assert {k: a[k] for k in ("faults", "hits", "h2d_fault_pages", "events")} == \
        {k: b[k] for k in ("faults", "hits", "h2d_fault_pages", "events")}
    assert a["evictions"] == 0 and a["h2d_fault_pages"] + a["h2d_prefetch_pages"] <= a["footprint_pages"]
    over = sim.run({"app": app, "footprint": "16M", "capacity": "8M", "iterations": 2})
    assert over["evictions"] > 0 and over["h2d_bytes"] > a["h2d_bytes"]


@pytest.mark.parametrize("app", ["gemm", "syr2k", "himeno"])
def test_cli_simulates_and_advises_the_suite_apps(app, capsys):
    assert cli.main(["simulate", app, "--footprint", "16M", "--dos", "200", "--policy", "uvm,svm"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("MODELLED (not measured)") and f"{app} footprint" in out
    # DOS of the arrays the application allocates: himeno's grid (i + 1, i + 1, 2 i + 1) holds a little more
    dos = float(re.search(r"\(DOS ([0-9.]+)\)", out).group(1))
    assert 200 <= dos < (210 if app == "himeno" else 200.1)
    assert cli.main(["advise", app, "--footprint", "16M", "--capacity", "64M", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["status"] == "modelled" and r["recommended"] in r["evidence"] and r["page_note"] == ""
    # the application's default iterations (native/apps/*.cu): every one of them replayed
    it = {"gemm": 5, "syr2k": 3, "himeno": 20}[app]
    assert cli.main(["simulate", app, "--footprint", "16M", "--capacity", "64M", "--policy", "uvm", "--json"]) == 0
    (rec,) = json.loads(capsys.readouterr().out)
    assert rec["params"]["iterations"] == str(it)
    assert rec["counts"]["barriers"] == it * (2 if app == "himeno" else 1)


@pytest.mark.parametrize("footprint, most", [(1 << 30, 2), (500 << 30, 1)])
def test_policies_run_side_by_side_only_while_their_page_states_are_small(footprint, most, monkeypatch):
    # 1 GiB: 262144 pages, side by side; 500 GiB: 1.3 G of page state each, one at a time (each umsim's check of
    # the memory it needs would not count the others started beside it).
    import os
    import threading
    import time

    from umscope.model import driver
    now = {"n": 0, "max": 0}
    lock = threading.Lock()

    def fake(p, progress=None):
        with lock:
            now["n"] += 1
            now["max"] = max(now["max"], now["n"])
        time.sleep(0.2)
        with lock:
            now["n"] -= 1
        raise RuntimeError("counted")

    monkeypatch.setattr(sim, "run", fake)
    with pytest.raises(RuntimeError, match="counted"):
        driver.simulate_all({"app": "triad", "footprint": footprint}, 64 << 30, ["uvm", "zerocopy", "ats"], {}, {},
                            {})
    assert now["max"] == min(most, os.cpu_count() or 1)
