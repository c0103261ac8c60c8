"""bench/seeds.py's page writer on canned records (shaped as `umscope bench --json` prints them: the store's
rows), and its argument checks. No GPU: nothing is measured here."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def seeds():
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("seeds", ROOT / "bench" / "seeds.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rec(case_id, benchmark, median, unit="GB/s", status="ok", reason=None, op=None, nbytes=256 << 20, **extra):
    r = {"case_id": case_id, "benchmark": benchmark, "op": op, "kind": case_id.split(" ")[1], "bytes": nbytes,
         "unit": unit, "n": 5, "median": median, "min": median, "max": median, "spread": 0.0, "status": status,
         "reason": reason, "extra": dict(extra, verified="cpu-reference")}
    if status != "ok":
        r.update(median=None, min=None, max=None, unit=None, n=None, extra={})
    return r


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
    recs = [("fusco-fig5", "copy", rec("copy pinned bytes=256MiB direction=uni dst=device engine=ce", "copy", 55.1,
                                       op="ce-copy")),
            ("fusco-fig5", "copy", rec("copy device bytes=256MiB direction=uni dst=device engine=ce", "copy", 1500.0,
                                       op="ce-copy")),
            ("fusco-fig5", "copy", rec("copy system bytes=256MiB direction=uni dst=pinned engine=ce", "copy", 7.45,
                                       op="ce-copy"))]
    run = write_run(tmp_path / "run.jsonl", ["fusco-fig5"], recs)
    assert seeds.write_pages(run, tmp_path / "pages") == ["fusco-fig5"]
    text = (tmp_path / "pages" / "fusco-fig5.md").read_text()
    # pinned -> device: 55.1 against Fusco et al.'s 415.7 GB/s, ratio 0.13, explained as PCIe against C2C.
    cells = row(text, "`pinned` → `device`")
    assert cells[1].startswith("55.1 GB/s") and cells[2] == "415.7 GB/s"
    assert "Fusco et al. 2024, Fig. 5" in cells[3] and "Alps" in cells[3]
    assert cells[4] == f"{55.1 / 415.7:.2f}" and "PCIe" in cells[5] and "NVLink-C2C" in cells[5]
    cells = row(text, "`device` → `device`")
    assert cells[2] == "1448 GB/s" and cells[4] == f"{1500 / 1447.8:.2f}"
    # The study's DDR -> Pinned cell (published.yaml) lands beside the pageable path: system -> pinned.
    cells = row(text, "`system` → `pinned`")
    assert cells[2] == "14.9 GB/s" and cells[4] == f"{7.45 / 14.9:.2f}" and "host-based path" in cells[5]
    # A published cell with no umscope record is not shown as a comparison.
    with pytest.raises(AssertionError):
        row(text, "`managed` → `managed`")
    assert "commit `abc1234`" in text and "`nvidia-h100-x1`" in text and "umscope bench fusco-fig5" in text
    svg = (tmp_path / "pages" / "fusco-fig5.svg").read_text()
    assert svg.startswith("<svg") and 'data-v="55.1"' in svg


def test_skipped_commands_say_why(seeds, tmp_path):
    why = "no coherent CPU-GPU atomics without ATS"
    recs = [("fusco-fig13", "pingpong", rec("pingpong system exchanges=10000 pair=cpu-gpu reps=7", "pingpong", None,
                                            status="skipped", reason=why)),
            ("fusco-fig13", "pingpong", rec("pingpong device exchanges=10000 pair=gpu-gpu reps=7", "pingpong", 504.1,
                                            unit="ns", pair="gpu-gpu"))]
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
        f"{504.1 / 315.5:.2f}"
    # A figure that never ran (too few GPUs) still has its page, saying why and with no measurement.
    other = (tmp_path / "pages" / "fusco-fig18.md").read_text()
    assert "needs 2 GPUs; this run has 1" in other and "- none ran" in other


def test_peer_l2_answer_from_one_call(seeds):
    def chase(kind, pts):
        return [(b, {"median": v, "min": v, "max": v, "status": "ok"}) for b, v in pts]
    l2 = 50 << 20
    loc = chase("device", [(1 << 20, 140.0), (16 << 20, 150.0), (1 << 30, 350.0)])
    cached = {("gpu", "device"): loc, ("gpu", "peer:1"): chase("p", [(16 << 20, 160.0), (1 << 30, 1000.0)])}
    not_cached = {("gpu", "device"): loc, ("gpu", "peer:1"): chase("p", [(16 << 20, 950.0), (1 << 30, 1000.0)])}
    assert seeds.peer_l2_answer(cached, l2)[1] == "yes"
    text, verdict = seeds.peer_l2_answer(not_cached, l2)
    assert verdict == "no" and "950" in text and "1000" in text and "150" in text
    assert seeds.peer_l2_answer({("gpu", "device"): loc}, l2)[1] is None


def test_fig15_matrix_reads_rows_as_a(seeds):
    pub = seeds.published_fig15()
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
    assert "| fusco-fig18 |" in text and "bench/seeds.py --figures multi" in text
