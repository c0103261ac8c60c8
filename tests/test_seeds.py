"""bench/seeds.py's page writer on real records (tests/data/seeds-h100-records.jsonl: 4 x H100 records, trimmed, as
`umscope bench --json` prints them: the store's rows) and a few made here for cases the real runs did not have,
its commands against umscope's own argument checks (`--dry-run` with a 4-GPU H100 fingerprint), and its argument
checks. No GPU: nothing is measured here."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import bench_module

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def seeds():
    return bench_module("seeds")


@pytest.fixture(scope="module")
def pages(seeds):
    import seeds_pages
    return seeds_pages


def real(figure):
    """The real records of one figure in tests/data/seeds-h100-records.jsonl."""
    lines = [json.loads(x) for x in (ROOT / "tests" / "data" / "seeds-h100-records.jsonl").read_text().splitlines()]
    return [x["record"] for x in lines if x.get("figure") == figure]


def write_run(path, figures, records=(), skips=(), gpus=1):
    lines = [{"type": "header", "kind": "nvidia-h100-x1", "commit": "abc1234", "date": "2026-01-01 00:00 UTC",
              "argv": "python3 bench/seeds.py --figures single",
              "ctx": {"gpus": gpus, "cpus": 16, "gpu": {"name": "NVIDIA H100 80GB HBM3", "l2_bytes": 50 << 20}}}]
    for fig, tag, r in records:
        lines.append({"type": "record", "figure": fig, "tag": tag, "record": r})
    for fig, what, reason in skips:
        lines.append({"type": "skip", "figure": fig, "what": what, "reason": reason})
    for fig in figures:
        lines.append({"type": "command", "figure": fig, "tag": "t", "command": f"umscope bench {fig}", "wall_s": 1.0,
                      "exit": 0})
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def row(text, first):
    """The table row of a page whose first cell is `first`, as a list of cells."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("|") and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in\n{text}")


def test_fig5_published_value_citation_and_ratio_in_their_cells(seeds, tmp_path):
    # Real records: the suite's copy case holds 64 KiB, 1 MiB and 256 MiB; the page keeps each pair's largest.
    recs = [("fusco-fig5", "copy", r) for r in real("fusco-fig5")]
    run = write_run(tmp_path / "run.jsonl", ["fusco-fig5"], recs)
    assert seeds.write_pages(run, tmp_path / "pages") == ["fusco-fig5"]
    text = (tmp_path / "pages" / "fusco-fig5.md").read_text()
    assert "min–max, 256 MiB transfers" in text
    # pinned -> device: 54.84 (the 256 MiB record, not 9.66 at 64 KiB) against Fusco et al.'s 415.7 GB/s, ratio
    # 0.13, explained as PCIe against C2C.
    cells = row(text, "`pinned` → `device`")
    assert cells[1].startswith("54.84 GB/s (53.1–55.18)") and cells[2] == "415.7 GB/s"
    assert "Fusco et al. 2024, Fig. 5" in cells[3] and "Alps" in cells[3]
    assert cells[4] == f"{54.835388 / 415.7:.2f}" and "PCIe" in cells[5] and "NVLink-C2C" in cells[5]
    cells = row(text, "`device` → `device`")
    assert cells[2] == "1448 GB/s" and cells[4] == f"{1441.09469 / 1447.8:.2f}"
    # The study's DDR -> Pinned cell (published.yaml) lands beside the pageable path: system -> pinned.
    cells = row(text, "`system` → `pinned`")
    assert cells[2] == "14.9 GB/s" and cells[4] == "0.50" and "host-based path" in cells[5]
    # A published cell with no umscope record is not shown as a comparison.
    with pytest.raises(AssertionError):
        row(text, "`managed` → `managed`")
    assert "commit `abc1234`" in text and "`nvidia-h100-x1`" in text and "umscope bench fusco-fig5" in text
    svg = (tmp_path / "pages" / "fusco-fig5.svg").read_text()
    assert svg.startswith("<svg") and 'data-v="54.835388"' in svg and 'data-v="9.66059202"' not in svg


def test_skipped_commands_say_why(seeds, tmp_path):
    why = "the GPU cannot access pageable host memory on this machine"
    recs = [("fusco-fig13", "pingpong", r) for r in real("fusco-fig13")]  # real: system skipped, device 465.3 ns
    run = write_run(tmp_path / "run.jsonl", ["fusco-fig13"], recs,
                    skips=[("fusco-fig18", "the figure", "needs 2 GPUs; this run has 1 (--devices or the probe)"),
                           ("fusco-fig13", "umscope bench pingpong --kind managed",
                            "not run: the figure's budget of 15 s was spent")])
    seeds.write_pages(run, tmp_path / "pages")
    text = (tmp_path / "pages" / "fusco-fig13.md").read_text()
    # The skipped case: its reason in the comparison's umscope cell, no ratio, and in "Not measured".
    cells = [c.strip() for c in next(line for line in text.splitlines() if line.startswith("| cpu-gpu, flag")).split("|")]
    assert why in cells[2] and cells[5] == "—" and cells[3] == "751.7 ns"
    miss = text.split("## Not measured", 1)[1]
    assert why in miss and "budget of 15 s was spent" in miss
    assert row(text, "gpu-gpu, flag `device` (ping-pong Hopper 0 <-> Hopper 0 (two SMs), flag in HBM)")[4] == \
        f"{465.310531 / 315.5:.2f}"
    assert "coherent" in row(text, "cpu-gpu")[2]  # pinned: the skip's reason in the table
    # A figure that never ran (too few GPUs) still has its page, saying why and with no measurement.
    other = (tmp_path / "pages" / "fusco-fig18.md").read_text()
    assert "needs 2 GPUs; this run has 1" in other and "- none ran" in other


def test_fig14_one_run_gives_every_count_of_pairs(seeds, tmp_path):
    # Real: one `-n 8` run's mbw records carry pairs 1, 2 and 4 (not n/2 each).
    recs = [("fusco-fig14", "mpi n=8", r) for r in real("fusco-fig14")]
    seeds.write_pages(write_run(tmp_path / "run.jsonl", ["fusco-fig14"], recs), tmp_path / "pages")
    text = (tmp_path / "pages" / "fusco-fig14.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| 8 |")]
    assert [r.split("|")[2].strip() for r in rows] == ["1", "2", "4"]
    assert "39.2 GB/s" in rows[2] and "11.01 GB/s" in rows[0]
    assert seeds.cmds_fig14({"cpus": 16})[0][1][4:6] == ["-n", "8"] and seeds.cmds_fig14({"cpus": 3})[0][1][5] == "2"


def test_commands_pass_umscopes_own_checks(seeds, monkeypatch):
    """Every figure's umscope command is planned by umscope (`--dry-run`: exit 0, at least one case) on a 4-GPU
    H100 fingerprint, and every profiled program is a umbench benchmark that declares the options given."""
    import contextlib
    import io
    from umscope import cli, probe, registry
    from report_fixtures import _h100_fp
    fp = _h100_fp()
    fp["gpus"] = [dict(fp["gpus"][0], device=i, pci_bus_id=f"0000:{0x19 + i:02x}:00.0") for i in range(4)]
    monkeypatch.setattr(probe, "probe", lambda *a, **k: fp)
    bad = []
    for name, f in seeds.FIGURES.items():
        for tag, cmd in f.cmds({"gpus": 4, "cpus": 16, "gpu": None}):
            if isinstance(cmd, tuple):
                prog, opts = cmd[2][0], [x[2:] for x in cmd[2][1:] if x.startswith("--")]
                known = registry.options_of(prog) if prog in registry.applications() else None
                if known is None or set(opts) - set(known) - {"mode"}:
                    bad.append(f"{name} [{tag}]: umbench run {' '.join(cmd[2])}")
                continue
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = cli.main(cmd + ["--dry-run"])
            if rc != 0 or not out.getvalue().strip():
                bad.append(f"{name} [{tag}]: rc {rc}: {err.getvalue().strip()[-200:]}")
    assert not bad, "\n".join(bad)


def test_peer_l2_answer_from_one_call(pages):
    def chase(kind, pts):
        return [(b, {"median": v, "min": v, "max": v, "status": "ok"}) for b, v in pts]
    l2 = 50 << 20
    loc = chase("device", [(1 << 20, 140.0), (16 << 20, 150.0), (1 << 30, 350.0)])
    cached = {("gpu", "device"): loc, ("gpu", "peer:1"): chase("p", [(16 << 20, 160.0), (1 << 30, 1000.0)])}
    not_cached = {("gpu", "device"): loc, ("gpu", "peer:1"): chase("p", [(16 << 20, 950.0), (1 << 30, 1000.0)])}
    assert pages.peer_l2_answer(cached, l2)[1] == "yes"
    text, verdict = pages.peer_l2_answer(not_cached, l2)
    assert verdict == "no" and "950" in text and "1000" in text and "150" in text
    assert pages.peer_l2_answer({("gpu", "device"): loc}, l2)[1] is None


def test_fig15_matrix_reads_rows_as_a(pages):
    pub = pages.published_fig15()
    # Fusco et al. Fig. 15, FP16: A in HBM, B in DDR 59.2; A in DDR, B in HBM 57.6 (DDR compared with pinned).
    assert pub[("fp16", "device", "pinned")] == 59.2 and pub[("fp16", "pinned", "device")] == 57.6
    assert pub[("fp64", "peer:1", "peer:1")] == 1.3


def test_unknown_figure_exits_2_and_creates_nothing(tmp_path):
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "seeds.py"), "--figures", "fusco-fig5,fig99",
                          "--out", str(out)], capture_output=True, text=True)
    assert res.returncode == 2 and "unknown figure 'fig99'" in res.stderr and not out.exists()
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "seeds.py"), "--figures", "all", "--budget-scale", "0",
                          "--out", str(out)], capture_output=True, text=True)
    assert res.returncode == 2 and not out.exists()


def test_index_links_made_pages_only(seeds, tmp_path):
    (tmp_path / "README.md").write_text("# index\n\ntable\n")
    (tmp_path / "fusco-fig5.md").write_text("page\n")
    seeds.index(tmp_path)
    seeds.index(tmp_path)  # idempotent: one block
    text = (tmp_path / "README.md").read_text()
    assert text.count(seeds.INDEX_START) == 1 and "[fusco-fig5](fusco-fig5.md)" in text
    assert "| fusco-fig18 |" in text and "to be made: `bench/seeds.py --figures fusco-fig18`" in text


def test_index_says_how_many_commands_the_budget_cut(seeds, tmp_path):
    (tmp_path / "README.md").write_text("# index\n")
    (tmp_path / "fusco-fig16.md").write_text("- `umscope app run gemm` (12.6 s, exit timeout)\n- `b` (1.0 s, exit 0)\n"
                                             + "- a: not run: the figure's budget of 22 s was spent\n" * 2)
    (tmp_path / "fusco-fig5.md").write_text("page\n")
    seeds.index(tmp_path)
    text = (tmp_path / "README.md").read_text()
    assert "page made; 3 command(s) cut by the time budget: `bench/seeds.py --figures fusco-fig16`" in text
    assert "| [fusco-fig5](fusco-fig5.md) | Fusco et al. 2024, Fig. 5 | 1 | page made |" in text


def test_a_timeline_is_thinned_to_its_buckets_lowest_and_highest_samples(pages):
    ts = [i / 1000 for i in range(100_000)] + [100.0]
    vs = [(i % 97) * 0.1 * pages.GiB for i in range(100_000)] + [50.0 * pages.GiB]
    vs[54_321] = -3.0 * pages.GiB  # one dip
    (_, out), = pages._mem_series({"rss": {"t": ts, "samples": vs}})
    assert len(out) <= 2 * pages.TIMELINE_BUCKETS and out == sorted(out)
    assert (54.321, -3.0) in out and (100.0, 50.0) in out and out[0] == (0.0, 0.0)
    (_, short), = pages._mem_series({"rss": {"t": ts[:500], "samples": vs[:500]}})
    assert short == [(t, v / pages.GiB) for t, v in zip(ts[:500], vs[:500])]  # short series untouched


def test_chart_files_render_as_images_and_same_sized_allocations_keep_their_own_series(seeds, pages):
    """An SVG file needs its namespace to show as an image (the H100 pages showed XML source); triad's three
    arrays of one size each keep their series (the last replaced the others: no per-allocation chart)."""
    tracks = {"start": 0.0, "width": 0.5, "allocations": [
        {"address": 1, "bytes": 1 << 20, "htod": {"coherence": [[1, 1 << 20]]}, "faults": [[1, 4]]},
        {"address": 2, "bytes": 1 << 20, "htod": {"coherence": [[2, 1 << 20]]}, "faults": [[2, 8]]},
        {"address": 3, "bytes": 1 << 20, "htod": {}, "faults": []}]}
    um = {"totals": {"gpu_fault": 12, "htod": 2 << 20}, "events": {"htod": 2}, "faults_per_migration": 6.0,
          "tracks": tracks}
    d = {"profiles": {"triad": {"prof": {"um_trace": um}}}, "records": []}
    _, charts = pages.render_cooper(d)
    chart = charts["-triad"]
    assert "allocation 1 (1 MiB)" in chart and "allocation 2 (1 MiB)" in chart and "allocation 3" not in chart
    f = seeds.standalone_svg(chart)
    assert f.startswith('<svg xmlns="http://www.w3.org/2000/svg" ') and seeds.standalone_svg(f) == f


def test_a_figure_with_nothing_measured_still_has_its_page(seeds, tmp_path):
    """fusco-fig15-peer on 4 x H100 (713c481): every gemm with a peer operand skipped for one reason and the
    last commands cut by the budget; the renderer's chart had no bar and the whole --render stopped."""
    def gemm(a, b, prec):
        return {"case_id": f"gemm iterations=4 mode=explicit n=4096 place-a={a} place-b={b} place-c=device "
                           f"precision={prec}", "benchmark": "gemm", "status": "skipped",
                "reason": "cudaMalloc memory is not mapped into the CPU's address space", "median": None}
    cases = [(p, a, b) for p in ("fp16", "tf32") for a, b in (("peer:1", "device"), ("device", "peer:1"))]
    recs = [("fusco-fig15-peer", f"gemm {p} n=4096 A={a} B={b} C=device", gemm(a, b, p)) for p, a, b in cases]
    budget = "not run: the figure's budget of 35 s was spent"
    run = write_run(tmp_path / "run.jsonl", ["fusco-fig15-peer"], recs, gpus=4,
                    skips=[("fusco-fig15-peer", "umscope app run gemm --precision fp64 --place-a peer:1", budget),
                           ("fusco-fig15-peer", "umscope app run gemm --precision fp64 --place-b peer:1", budget)])
    assert seeds.write_pages(run, tmp_path / "pages") == ["fusco-fig15-peer"]
    text = (tmp_path / "pages" / "fusco-fig15-peer.md").read_text()
    body, miss = text.split("## umscope's measurement", 1)[1].split("## Not measured", 1)
    assert "Nothing was measured in this run" in body and "![" not in body and "| --- |" not in body
    assert not list((tmp_path / "pages").glob("*.svg"))
    # Each reason once, with the cases it stopped under it; the budget's commands counted for the index.
    lines = miss.strip().splitlines()
    assert lines.count("- skipped: cudaMalloc memory is not mapped into the CPU's address space (4):") == 1
    assert miss.count("mapped into the CPU's") == 1 and miss.count("  - `gemm iterations=4") == 4
    assert lines.count(f"- {budget} (2):") == 1 and miss.count("  - `umscope app run gemm --precision fp64") == 2
    assert "2 command(s) cut by the time budget: `python3 bench/seeds.py --figures fusco-fig15-peer`" in miss
    seeds.index(tmp_path / "pages")  # no README there: nothing to index
    (tmp_path / "pages" / "README.md").write_text("# index\n")
    seeds.index(tmp_path / "pages")
    assert "| [fusco-fig15-peer](fusco-fig15-peer.md) | Fusco et al. 2024, Fig. 15 (peer) | 2 | page made; nothing " \
           "measured (the page says why); 2 command(s) cut by the time budget" in \
        (tmp_path / "pages" / "README.md").read_text()


def test_gpu_pairs_not_reached_and_reasons_alike_but_for_their_numbers(seeds, tmp_path):
    """fusco-fig13-gpus on 4 x H100: the budget stopped the command before GPU 2 ↔ GPU 3; each pinned case was
    skipped with its own counts: one group, each case keeping its numbers."""
    def pp(kind, a, b, median=None, kept=None):
        r = {"case_id": f"pingpong {kind} device={a} exchanges=10000 pair=gpu-gpu peer={b} reps=7",
             "benchmark": "pingpong", "status": "ok", "median": median, "min": median, "max": median, "n": 7,
             "unit": "ns"}
        if kept is not None:
            r.update(status="skipped", median=None, reason=f"no coherent atomics between gpu-gpu on pinned: {kept} of "
                                                            "200000 concurrent increments kept")
        return ("fusco-fig13-gpus", "pingpong", r)
    recs = [pp("device", 0, 1, 1773.2), pp("peer:1", 0, 1, 1826.1), pp("pinned", 0, 1, kept=103586),
            pp("managed", 0, 1, 15565.7), pp("device", 0, 2, 1683.2), pp("pinned", 0, 2, kept=103753)]
    run = write_run(tmp_path / "run.jsonl", [], recs, gpus=3)
    run.write_text(run.read_text() + json.dumps({"type": "command", "figure": "fusco-fig13-gpus", "tag": "pingpong",
                                                 "command": "umscope bench pingpong", "wall_s": 25.5,
                                                 "exit": "timeout"}) + "\n")
    seeds.write_pages(run, tmp_path / "pages")
    text = (tmp_path / "pages" / "fusco-fig13-gpus.md").read_text()
    assert "Not reached in this run (see Not measured): GPU 0 ↔ GPU 2, flag in `peer:2`, `managed`; GPU 1 ↔ " \
           "GPU 2, flag in `device`, `peer:2`, `pinned`, `managed`." in text
    miss = text.split("## Not measured", 1)[1]
    assert "- skipped: no coherent atomics between gpu-gpu on pinned (2):" in miss
    assert "peer=1 reps=7`: 103586 of 200000 concurrent" in miss and "peer=2 reps=7`: 103753 of 200000" in miss
    assert "`umscope bench pingpong`: stopped at the figure's time budget" in miss
    assert "1 command(s) cut by the time budget" in miss and "a capability" in text


def test_a_render_of_some_figures_keeps_the_other_pages_and_their_index_rows(seeds, tmp_path):
    """The multi-GPU pages are re-rendered a few figures at a time (4 x H100, b7b9039: fig13-gpus, fig15-peer and
    fig17-peer only): the pages of the figures the run did not hold, and their rows of the index, stay as they were."""
    out = tmp_path / "pages"
    out.mkdir()
    (out / "README.md").write_text("# index\n")
    (out / "fusco-fig18.md").write_text("an earlier run's page\n")
    (out / "fusco-fig18.svg").write_text("<svg></svg>")
    recs = [("fusco-fig14", "mpi", r) for r in real("fusco-fig14")]
    assert seeds.write_pages(write_run(tmp_path / "run.jsonl", ["fusco-fig14"], recs), out) == ["fusco-fig14"]
    assert (out / "fusco-fig18.md").read_text() == "an earlier run's page\n"
    assert (out / "fusco-fig18.svg").read_text() == "<svg></svg>"
    text = (out / "README.md").read_text()
    assert "| [fusco-fig18](fusco-fig18.md) | Fusco et al. 2024, Fig. 18 | 2 | page made |" in text
    assert "| [fusco-fig14](fusco-fig14.md) |" in text and "| fusco-fig5 | Fusco et al. 2024, Fig. 5 | 1 | to be made" in text


def scaling_record(op, median, grid, block, blocks=True, status="ok"):
    """A gpu-stream record of `umscope bench scaling --json` as the store keeps it (the fields of the 4 x H100 run's
    gpu-stream rows at b7b9039; `grid` and `block` are the launch gpu_stream.cu records)."""
    case = f"gpu-stream device block={block}{f' blocks={grid}' if blocks else ''} bytes=1GiB ops=read,write,copy"
    r = {"case_id": case, "benchmark": "gpu-stream", "op": op, "processor": "gpu0", "kind": "device", "policy": "",
         "bytes": 1 << 30, "threads": None, "iteration": None, "metric": "bandwidth", "value": median, "unit": "GB/s",
         "n": 10, "median": median, "min": median * 0.98, "max": median * 1.01, "spread": 0.03, "status": status,
         "reason": None, "extra": {"location": "gpu", "reachable_by": "gpu", "device": 0, "traffic_bytes":
                                   (2 if op == "copy" else 1) << 30, "grid": grid, "block": block,
                                   "verified": "cpu-reference", "residency": "gpu0"}}
    if status != "ok":
        r.update(median=None, min=None, max=None, value=None, reason="gpu-stream: out of memory")
    return ("fusco-fig8-10", "scaling", r)


def test_fig8_10_bandwidth_against_blocks_and_threads(seeds, tmp_path):
    recs = [scaling_record(op, v * k, b, 256) for op, k in (("read", 1.0), ("write", 1.1), ("copy", 0.9))
            for b, v in ((1, 21.5), (2, 43.0), (132, 2500.0), (1056, 3050.0))]
    recs += [scaling_record(op, 3000.0 + i, g, t, blocks=False) for op in ("read", "write", "copy")
             for i, (t, g) in enumerate(((256, 1056), (1024, 264)))]
    recs.append(scaling_record("copy", 1.0, 4, 256, status="error"))
    run = write_run(tmp_path / "run.jsonl", ["fusco-fig8-10"], recs)
    assert seeds.write_pages(run, tmp_path / "pages") == ["fusco-fig8-10"]
    text = (tmp_path / "pages" / "fusco-fig8-10.md").read_text()
    assert row(text, "blocks")[1:] == ["read `device`", "write `device`", "copy `device`"]
    cells = row(text, "1")
    assert cells[1].startswith("21.5 (") and cells[2].startswith("23.65 (") and cells[3].startswith("19.35 (")
    assert row(text, "1056")[1].startswith("3050 (") and "at 256 threads per block" in text
    # The threads sweep: each point with its own grid (read: resident blocks; write, copy: one element a thread).
    assert row(text, "1024")[1].endswith("[264]") and row(text, "256")[3].endswith("[1056]")
    # The study's numbers are Fig. 7's (full machine, idle): beside the best point of the sweep, with the ratio.
    cells = row(text, "read `device`, the best of the blocks sweep (1056 blocks) against Hopper read of local HBM, idle")
    assert cells[2] == "3796 GB/s" and cells[4] == f"{3050 / 3795.9:.2f}" and "Fusco et al. 2024, Fig. 7" in cells[3]
    assert row(text, "write `device`, the best of the blocks sweep (1056 blocks) against Hopper write of local HBM, "
                     "idle")[4] == f"{3355 / 3712.1:.2f}"
    assert "plots" in text and "not transcribed" in text and "1024 threads" in text and "GH200" in text
    assert "gpu-stream: out of memory" in text.split("## Not measured", 1)[1]  # the failed case, with its reason
    blocks, threads = (tmp_path / "pages" / "fusco-fig8-10.svg").read_text(), \
        (tmp_path / "pages" / "fusco-fig8-10-threads.svg").read_text()
    assert blocks.startswith('<svg xmlns="http://www.w3.org/2000/svg"') and "against blocks" in blocks
    assert 'data-v="21.5"' in blocks and 'data-v="3001.0"' not in blocks and 'data-v="3001.0"' in threads


def test_fig17_split_is_the_studys_allocator_split_weights_on_the_host_small_blocks_from_an_async_pool(seeds, tmp_path):
    cmds = seeds.cmds_fig17_split({})
    assert [t for t, _ in cmds] == ["llm llama2-7b mixed weights=pinned cache=async",
                                    "llm llama2-13b mixed weights=pinned cache=async"]
    for _, argv in cmds:
        assert argv[argv.index("--mode") + 1] == "mixed"
        assert argv[argv.index("--weights") + 1] == "pinned" and argv[argv.index("--cache") + 1] == "async"
    rec = {"benchmark": "llm", "op": "decode", "status": "ok", "unit": "ms", "median": 280.0, "min": 279.0,
           "max": 281.0, "extra": {"tokens_per_s": 3.57, "weight_bytes": 13.5e9}}
    run = write_run(tmp_path / "run.jsonl", ["fusco-fig17-split"],
                    [("fusco-fig17-split", "llm llama2-7b mixed weights=pinned cache=async", rec)])
    subprocess.run([sys.executable, str(ROOT / "bench" / "seeds.py"), "--render", str(run), "--pages",
                    str(tmp_path)], check=True, capture_output=True)
    text = (tmp_path / "fusco-fig17-split.md").read_text()
    assert row(text, "llama2-7b")[1] == "mixed weights=pinned cache=async"
    assert "--rule '<4M:async'" in text and "cudaMallocAsync" in text
