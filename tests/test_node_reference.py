"""bench/node_reference.py, the one-call scale-out reference of a node with N GPUs, on the CPU: its N-GPU
planning (pairs, rank counts, the filters against umscope's own case ids) and its document, rendered
from stand-in records and a stand-in run of main() with umscope's commands replaced."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from umscope import plans

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from test_reference_docs import provenance_problems  # noqa: E402


@pytest.fixture(scope="module")
def nr():
    spec = importlib.util.spec_from_file_location("node_reference", ROOT / "bench" / "node_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def pages(nr):  # the document's renderers (bench/node_reference_pages.py, on the path once nr is loaded)
    import node_reference_pages
    return node_reference_pages


def fingerprint(n):
    return {"device": 0, "gpus": [{"device": d, "name": "Test GPU"} for d in range(n)],
            "cuda": {"driver": "580.1"}, "host": {"hostname": "node"}, "cpu": {"logical_cpus": 64},
            "numa": [{"id": 0, "cpus": list(range(64)), "mem_bytes": 1 << 40}],
            "topology": {"gpus": [{"device": d, "cpus": list(range(64)), "numa_node": 0, "nvlinks": 18,
                                   "pci_bus_id": f"0000:{d:02x}:00.0"} for d in range(n)],
                         "pairs": [{"a": a, "b": b, "type": "NVLink", "nvlinks": 18, "nvlink_generation": "4.0",
                                    "via": "direct", "p2p": {"read": True, "atomics": True}}
                                   for a in range(n) for b in range(n) if a != b]}}


# ------------------------------------------------------------ planning


def test_pairs_all_and_star(nr):
    p = nr.pair_plan(4, "all")
    assert p["pingpong"] == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert len(p["latency"]) == 12 and (3, 2) in p["latency"] and (2, 2) not in p["latency"]
    s = nr.pair_plan(8, "star")
    assert s["pingpong"] == [(0, b) for b in range(1, 8)] + [(2, 3)]  # the disjoint pair is said and measured
    assert nr.pair_plan(3, "star")["latency"] == [(0, 1), (0, 2)]  # no disjoint pair with three GPUs
    with pytest.raises(ValueError):
        nr.pair_plan(1, "all")
    with pytest.raises(ValueError):
        nr.pair_plan(4, "ring")


def test_ranks_one_per_gpu_never_more_than_cpus(nr):
    assert nr.rank_plan(4, 64) == {"nccl": 4, "mpi": 4, "mpi_pairs": 2, "idle": 0}
    assert nr.rank_plan(3, 64)["idle"] == 1 and nr.rank_plan(3, 64)["mpi_pairs"] == 1
    with pytest.raises(ValueError, match="oversubscribe"):
        nr.rank_plan(8, 4)


def test_plan_launches_n_ranks_under_mpirun_through_the_families(nr):
    steps = dict(nr.plan(4, 64))
    assert list(steps) == ["info", "copy", "pingpong", "latency", "nccl", "nccl-mpi", "mpi", "torch"]
    (single,), (ranked,), (lat, bw, mbw) = steps["nccl"], steps["nccl-mpi"], steps["mpi"]
    assert "--launcher" not in single  # one process driving every GPU
    assert ranked[:2] == ["bench", "nccl"] and ranked[ranked.index("--launcher"):] == ["--launcher", "mpirun", "-n", "4"]
    for mpi in (lat, bw, mbw):
        assert mpi[mpi.index("-n") + 1] == "4" and mpi[mpi.index("--launcher") + 1] == "mpirun"
        assert mpi[mpi.index("--reps") + 1] == str(nr.MPI_REPS)
    assert lat[lat.index("--ops") + 1] == "latency" and bw[bw.index("--ops") + 1] == "bw,bibw"
    assert mbw[mbw.index("--ops") + 1] == "mbw" and mbw[mbw.index("--size") + 1] == nr.MPI_MBW_SIZES
    # With one pair (two GPUs) mbw would be bw again: left out.
    two = dict(nr.plan(2, 64))["mpi"]
    assert [c[c.index("--ops") + 1] for c in two] == ["latency", "bw,bibw"] and two[1][two[1].index("-n") + 1] == "2"
    for cmd in (single, ranked):
        kinds = [cmd[i + 1] for i, x in enumerate(cmd) if x == "--kind"]
        assert "device" in kinds and any(k.startswith("managed") for k in kinds)
        assert set(cmd[cmd.index("--ops") + 1].split(",")) >= {"allreduce", "allgather"}
    flat = [x for cmds in steps.values() for c in cmds for x in c]
    assert not any("oversub" in x for x in flat)
    assert "torch" not in dict(nr.plan(4, 64, torch=False))
    quick = dict(nr.plan(4, 64, quick=True, reps=3))
    assert quick["copy"][0][quick["copy"][0].index("--reps") + 1] == "3"
    assert quick["nccl"][0][quick["nccl"][0].index("--size") + 1] == "1G"


def _selected(cases_fn, filters):
    """The (device, peer) of the cases the planned --filter lists select, over all their commands."""
    out = []
    for fs in filters:
        for c in plans.apply_filter(cases_fn(), fs):
            peer = c.params.get("peer") or c.kind.split(":")[1]
            out.append((int(c.params.get("device", 0)), int(peer)))
    return out


@pytest.mark.parametrize("n,mode", [(2, "all"), (4, "all"), (4, "star"), (8, "star")])
def test_filters_select_exactly_the_planned_pairs(nr, n, mode):
    fp = fingerprint(n)
    pp = nr.pair_plan(n, mode)
    steps = dict(nr.plan(n, 64, pairs=mode))
    filt = lambda cmds: [[c[i + 1] for i, x in enumerate(c) if x == "--filter"] for c in cmds]  # noqa: E731
    pp_cases = _selected(lambda: plans.pingpong_cases(fp), filt(steps["pingpong"]))
    assert sorted(set(pp_cases)) == sorted(pp["pingpong"])
    assert len(pp_cases) == 4 * len(pp["pingpong"])  # flag on each GPU, pinned and managed
    lat = _selected(lambda: plans.latency_cases(fp, sizes="1GiB"), filt(steps["latency"]))
    assert sorted(lat) == sorted(pp["latency"])
    copies = plans.apply_filter(plans.copy_cases(fp, sizes="1GiB"), filt(steps["copy"])[0])
    assert len(copies) == 6 * n * (n - 1)  # CE and SM: write, read, both ways, per ordered pair
    assert all("peer:" in c.case_id for c in copies)


def test_estimate_grows_with_n(nr):
    two = nr.estimate(nr.plan(2, 64), 2, nr.pair_plan(2, "all"))
    four = nr.estimate(nr.plan(4, 64), 4, nr.pair_plan(4, "all"))
    star = nr.estimate(nr.plan(8, 64, pairs="star"), 8, nr.pair_plan(8, "star"))
    assert 0 < two < four < star


# ------------------------------------------------------------ records and rendering


def copy_rec(a, src, dst, engine, direction, route, median, status="ok", reason=None):
    cid = f"copy {src} bytes=1GiB" + (f" device={a}" if a else "") + f" direction={direction} dst={dst} engine={engine}"
    if status != "ok":
        return {"benchmark": "copy", "case_id": cid, "kind": src, "status": status, "reason": reason, "extra": {}}
    return {"benchmark": "copy", "case_id": cid, "op": f"{engine}-copy", "kind": src, "bytes": 1 << 30,
            "unit": "GB/s", "median": median, "min": median - 1, "max": median + 1, "status": "ok",
            "extra": {"device": a, "dst_kind": dst, "direction": direction, "route": route,
                      "bound": 450.0, "bound_source": "probe: 18 NVLink4 links x 25 GB/s"}}


def copies(n):
    recs = []
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            for eng in ("ce", "sm"):
                base = 100 * a + 10 * b + (0 if eng == "ce" else 5)
                recs.append(copy_rec(a, "device", f"peer:{b}", eng, "uni", "forward", base + 1))
                recs.append(copy_rec(a, f"peer:{b}", "device", eng, "uni", "forward", base + 2))
                recs.append(copy_rec(a, f"peer:{b}", "device", eng, "bidir", "forward", 1))
                recs.append(copy_rec(a, f"peer:{b}", "device", eng, "bidir", "reverse", 2))
                recs.append(copy_rec(a, f"peer:{b}", "device", eng, "bidir", "both", base + 3))
    return recs


def test_copy_cells_place_each_record_in_its_pair(nr, pages):
    cells = pages.copy_cells(copies(3))
    assert cells[("CE", "write", 2, 1)]["median"] == 211  # GPU 2 pushes into GPU 1
    assert cells[("CE", "read", 1, 2)]["median"] == 122  # GPU 1 pulls from GPU 2
    assert cells[("SM", "both", 0, 2)]["median"] == 28  # the 'both' record, not a direction's
    assert len(cells) == 2 * 3 * 6
    skipped = [copy_rec(1, "device", "peer:0", "sm", "uni", None, None, "skipped", "no P2P between 1 and 0")]
    assert pages.copy_cells(skipped)[("SM", "write", 1, 0)]["reason"] == "no P2P between 1 and 0"


def results_for(nr, n, records):
    return {name: {"cmds": cmds, "records": [r for r in records if r["benchmark"] == name.split("-")[0]],
                   "rc": "0", "wall": 3.0, "when": "2026-11-23 04:30:00 UTC"}
            for name, cmds in nr.plan(n, 64, torch=False)}


META = {"kind": "nvidia-h200-x4", "commit": "abc1234", "env": {"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1"},
        "date": "2026-11-23 04:30 UTC", "argv": "python3 bench/node_reference.py --kind nvidia-h200-x4",
        "records": "reference.jsonl", "torch": False, "notes": []}


def nccl_rec(op, kind, median, launch="single"):
    return {"benchmark": "nccl", "case_id": f"nccl {kind} op=x", "op": op, "kind": kind.split(",")[0],
            "policy": ",".join(kind.split(",")[1:]), "bytes": 1 << 30, "unit": "GB/s", "median": median,
            "min": median - 2, "max": median + 2, "status": "ok",
            "extra": {"algbw": median / 1.5, "ranks": 3, "gpus": "0,1,2", "verified": "cpu-reference",
                      "nccl_version": "2.28.9", "nccl_library": "/lib/libnccl.so.2", "launch": launch,
                      "nccl_nvls_enable": "0"}}


def test_document_has_the_matrix_tables_and_provenance(nr):
    n = 3
    recs = copies(n) + [
        nccl_rec("allreduce", "device", 301.5), nccl_rec("allgather", "managed,first_touch=gpu", 222.25),
        {"benchmark": "pingpong", "case_id": "pingpong device device=0 exchanges=10000 pair=gpu-gpu peer=2 reps=7",
         "processor": "gpu0-gpu2", "kind": "device", "policy": "", "unit": "ns", "median": 1777.0, "min": 1770.0,
         "max": 1790.0, "n": 7, "status": "ok", "extra": {"exchanges": 10000, "atomics_check": "all kept"}},
        {"benchmark": "pingpong", "case_id": "pingpong pinned device=0 pair=gpu-gpu peer=1", "kind": "pinned",
         "status": "skipped", "reason": "no coherent atomics: 100578 of 200000 kept", "extra": {}},
        {"benchmark": "latency", "case_id": "latency peer:1 bytes=1GiB device=2 processor=gpu", "op": "chase",
         "processor": "gpu2", "kind": "peer:1", "policy": "", "bytes": 1 << 30, "unit": "ns", "median": 1013.0,
         "min": 1010.0, "max": 1020.0, "status": "ok", "extra": {"residency": "gpu1"}},
        {"benchmark": "latency", "case_id": "latency peer:1 device=2", "op": "timer", "processor": "gpu2",
         "kind": "none", "unit": "MHz", "median": 1980.0, "status": "ok", "extra": {}},
        {"benchmark": "mpi", "case_id": "mpi device", "kind": "device", "status": "skipped",
         "reason": "the MPI library is not CUDA-aware", "extra": {}},
        {"benchmark": "mpi", "case_id": "mpi pinned bytes=8B launcher=x op=latency", "op": "latency", "kind": "pinned", "policy": "first_touch=cpu",
         "bytes": 8, "unit": "us", "median": 0.473, "min": 0.47, "max": 0.5, "status": "ok",
         "extra": {"pointers": "host", "verified": "cpu-reference", "mpi_library": "Open MPI 4.1.6",
                   "cuda_aware": False, "cuda_aware_why": "MPIX_Query_cuda_support() = 0", "launcher": "mpirun -n 3"}}]
    doc = nr.render(META, fingerprint(n), results_for(nr, n, recs), n, nr.pair_plan(n, "all"), nr.rank_plan(n, 64))
    assert provenance_problems(doc) == []
    assert "`NCCL_NVLS_ENABLE=0`" in doc and "`NVSHMEM_DISABLE_NVLS=1`" in doc and "driver 580.1" in doc
    # The CE write matrix: row GPU 2, column GPU 1 holds 211 (and the diagonal no figure).
    lines = doc.splitlines()
    at = lines.index("**copy engines, row GPU's memory → column GPU's (pushed)**")
    assert lines[at + 2] == "| issued by | GPU 0 | GPU 1 | GPU 2 |"
    assert lines[at + 6] == "| GPU 2 | 201 GB/s (200–202) | 211 GB/s (210–212) | — |"
    assert "| GPU 2 → GPU 1 | 450 GB/s (probe: 18 NVLink4 links x 25 GB/s, median 47% of it)" in doc
    # busbw / the slowest pair's link bound from the probe (18 NVLink4 links here: 450 GB/s).
    assert ("| allreduce | device | 1 GiB | 301.5 GB/s (299.5–303.5) | 67% | 201 GB/s | 3 (GPUs 0,1,2) | "
            "cpu-reference |") in doc
    assert "Link bound: 450 GB/s per direction (probe: 18 NVLink4 links" in doc
    assert "| allgather | managed,first_touch=gpu | 1 GiB | 222.2 GB/s" in doc
    assert "| gpu2 | peer:1 (gpu1) | 1 GiB | 1013 ns (1010–1020) |" in doc and "1980" not in doc  # chases only
    assert "1777 ns (1770–1790)" in doc and "no coherent atomics: 100578 of 200000 kept" in doc
    assert "skipped: the MPI library is not CUDA-aware" in doc and "0.473 us (0.47–0.5)" in doc
    assert "CUDA-aware: False (MPIX_Query_cuda_support() = 0)" in doc
    assert "What ran: pinned (host pointers). Skipped: device (skipped: the MPI library is not CUDA-aware)." in doc
    assert "rank 0 and rank 1" in doc and "the last rank is idle (odd N)" in doc
    cmd = "`umscope bench nccl --kind device --kind managed,first_touch=gpu --ops " + nr.NCCL_OPS
    assert cmd in doc and "--launcher mpirun -n 3 --json --store STORE`" in doc
    assert "| GPU 0 → GPU 1 | NV18 (NVLink 4.0, direct) | P2P read, atomics |" in doc


def test_a_step_not_run_is_said_not_left_out(nr):
    res = results_for(nr, 2, copies(2))
    del res["mpi"]
    res["latency"]["error"] = "killed at the budget (10 s) while running `umscope bench latency`"
    doc = nr.render(META, fingerprint(2), res, 2, nr.pair_plan(2, "all"), nr.rank_plan(2, 64))
    mpi = doc.split("## MPI point-to-point")[1]
    assert mpi.split("\n\n")[1].startswith("Not measured: the run ended before this step")
    assert "Stopped: killed at the budget" in doc
    assert provenance_problems(doc) == []


def test_the_torch_step_is_shown_as_the_scaleout_command_it_runs(nr):
    """The step's provenance names the bench/scaleout.py line run_torch starts, not the plan's own words; a
    step recorded before --anchors was part of it ran with the default folder."""
    (cmd,) = dict(nr.plan(4, 64, reps=7, anchors="/opt/anchors"))["torch"]
    assert nr.show(cmd) == ("python3 bench/scaleout.py --quick --skip host --reps 7 --anchors /opt/anchors "
                            "--out DIR")
    assert nr.scaleout_argv(cmd, "/tmp/x")[-2:] == ["--out", "/tmp/x"]
    old = ["torch", "--size", "1G", "--reps", "10", "--world", "4"]  # as commit b7b9039 recorded it
    assert nr.show(old) == "python3 bench/scaleout.py --quick --skip host --reps 10 --anchors .anchors --out DIR"


def test_run_time_is_the_whole_run_or_said_to_be_the_steps_sum(nr, pages):
    res = {"info": {"wall": 2.0}, "copy": {"wall": 10.4}, "torch": {"not_run": "budget"}}
    assert pages.run_time({"wall": 288.2, "expected": 299}, res) == (
        "Run time: 288 s in one call, from the probe to the last step (expected 299 s; the 2 steps that ran "
        "took 12 s of it).")
    assert pages.run_time({}, res).startswith("Run time: the 2 steps that ran took 12 s in all")


def test_mbw_rows_say_pair_or_pairs(nr, pages):
    rec = lambda k: {"benchmark": "mpi", "op": "mbw", "kind": "system", "bytes": 1 << 20, "median": 12.0,  # noqa: E731
                     "min": 11.0, "max": 13.0, "unit": "GB/s", "pairs": k}
    rows = [x for x in pages.render_mpi([rec(1), rec(2)]) if "mbw" in x]
    assert "| mbw (1 pair) |" in rows[0] and "| mbw (2 pairs) |" in rows[1]


def test_torch_ratio_against_the_one_process_record(nr, pages):
    res = {"ops": {"allreduce": [300.0, 290.0, 310.0, 1 << 30]}, "torch": "2.11", "nccl": "2.28.9", "world": 2}
    lines = pages.render_torch(res, [nccl_rec("allreduce", "device", 330.0)])
    assert lines[-1] == "| allreduce | 1 GiB | 300 GB/s (290–310) | 330 GB/s (328–332) | 1.100 |"
    assert pages.render_torch({"error": "exit status 1"})[0] == "Not measured: exit status 1"


# ------------------------------------------------------------ main, with umscope's commands stood in


def test_main_runs_every_step_once_and_writes_records(nr, tmp_path, monkeypatch):
    n = 2
    monkeypatch.setattr("umscope.probe.probe", lambda: fingerprint(n))
    monkeypatch.setattr(nr, "_commit", lambda root: "abc1234")
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    ran = []

    def fake(args, store, timeout):
        ran.append(args)
        if args[0] == "info":
            return fingerprint(n), 0, 0.1
        if args[1] == "copy":
            return copies(n), 0, 0.1
        return [], 0, 0.1

    monkeypatch.setattr(nr, "run_umscope", fake)
    out = tmp_path / "ref.md"
    assert nr.main(["--kind", "nvidia-h200-x2", "--out", str(out), "--no-torch"]) == 0
    assert [a[:2] for a in ran] == [["info", "--json"], ["bench", "copy"], ["bench", "pingpong"],
                                    ["bench", "latency"], ["bench", "nccl"], ["bench", "nccl"], ["bench", "mpi"],
                                    ["bench", "mpi"]]
    doc = out.read_text()
    assert provenance_problems(doc) == [] and "`abc1234`" in doc and "`NCCL_NVLS_ENABLE=0`" in doc
    lines = [json.loads(x) for x in (tmp_path / "ref.jsonl").read_text().splitlines()]
    assert [x["node_reference"] for x in lines[:3]] == ["run", "fingerprint", "step"]
    assert len([x for x in lines if x.get("node_reference_step") == "copy"]) == len(copies(n))
    # --render writes the same document from the records file, measuring nothing.
    monkeypatch.setattr(nr, "run_umscope", lambda *a: pytest.fail("--render must measure nothing"))
    again = tmp_path / "again.md"
    assert nr.main(["--render", str(tmp_path / "ref.jsonl"), "--out", str(again)]) == 0
    note = "This document was written again from its records file, measuring nothing"
    assert again.read_text().replace(again.read_text().split("\n\n")[3] + "\n\n", "", 1) == doc
    assert again.read_text().split("\n\n")[3].startswith(note)
    # The run's own time, from the end line of the records file, in both.
    assert lines[-1]["node_reference"] == "end" and lines[-1]["wall"] >= 0
    assert doc.split("\n\n")[2].startswith(f"Run time: {lines[-1]['wall']:.0f} s in one call")
    # --note adds its lines under the provenance, and only with --render.
    assert nr.main(["--render", str(tmp_path / "ref.jsonl"), "--out", str(again), "--note", "Held to 6 min."]) == 0
    assert again.read_text().split("\n\n")[4] == "Held to 6 min."
    assert nr.main(["--out", str(again), "--kind", "nvidia-h200-x2", "--note", "x"]) == 2
    assert nr.main(["--render", str(out), "--out", str(again)]) == 2  # not a records file


def test_main_refuses_multicast_and_bad_input(nr, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("umscope.probe.probe", lambda: pytest.fail("nothing may run"))
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    assert nr.main(["--kind", "k", "--out", str(tmp_path / "x.md")]) == 2
    assert "NCCL_NVLS_ENABLE=1" in capsys.readouterr().err
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    assert nr.main(["--kind", "k", "--out", str(tmp_path / "x.md"), "--reps", "0"]) == 2
    assert not (tmp_path / "x.md").exists()


def test_main_refuses_a_node_with_one_gpu(nr, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("umscope.probe.probe", lambda: fingerprint(1))
    assert nr.main(["--kind", "k", "--out", str(tmp_path / "x.md")]) == 2
    assert "two GPUs or more" in capsys.readouterr().err


def test_the_budget_leaves_later_steps_not_measured(nr, tmp_path, monkeypatch):
    monkeypatch.setattr("umscope.probe.probe", lambda: fingerprint(2))
    monkeypatch.setattr(nr, "_commit", lambda root: "abc1234")
    clock = iter(range(0, 10000, 4))
    monkeypatch.setattr(nr.time, "time", lambda: next(clock))
    monkeypatch.setattr(nr, "run_umscope", lambda args, store, timeout: ([], 0, 4.0))
    out = tmp_path / "ref.md"
    assert nr.main(["--kind", "nvidia-h200-x2", "--out", str(out), "--no-torch", "--budget", "20"]) == 0
    doc = out.read_text()
    assert "Not measured: the run's budget (20 s) was spent before this step." in doc.split("## MPI point-to-point")[1]
    again = tmp_path / "again.md"
    assert nr.main(["--render", str(tmp_path / "ref.jsonl"), "--out", str(again)]) == 0
    assert again.read_text().split("## Topology")[1] == doc.split("## Topology")[1]
    assert "Provenance:" in doc.split("## Topology")[1].split("##")[0]


def test_keep_carries_only_sections_the_script_does_not_make(nr, tmp_path, monkeypatch):
    old = ("# Old\n\n## Topology — `umscope info`\nProvenance: old.\n\n## Placement on one socket\nOne NUMA node.\n\n"
           "## Hand-made copies — `umscope bench copy`\nProvenance: umscope commit `fe440e2`, machine kind "
           "`nvidia-h200-x2`, 2026-11-22.\n| a | 1 GB/s |\n")
    assert [s.split("\n")[0] for s in nr.kept_sections(old)] == ["## Placement on one socket",
                                                                  "## Hand-made copies — `umscope bench copy`"]
    assert [s.split("\n")[0] for s in nr.kept_sections(old, ["Placement"])] == ["## Placement on one socket"]
    keep = tmp_path / "old.md"
    keep.write_text(old)
    monkeypatch.setattr("umscope.probe.probe", lambda: fingerprint(2))
    monkeypatch.setattr(nr, "_commit", lambda root: "abc1234")
    monkeypatch.setattr(nr, "run_umscope", lambda args, store, timeout: ([], 0, 0.1))
    out = tmp_path / "ref.md"
    assert nr.main(["--kind", "nvidia-h200-x2", "--out", str(out), "--no-torch", "--keep", str(keep),
                    "--keep-title", "Placement"]) == 0
    doc = out.read_text()
    assert doc.count("## Topology") == 1 and "Provenance: old." not in doc
    assert "## Placement on one socket\nOne NUMA node." in doc and "Hand-made copies" not in doc
    assert nr.main(["--kind", "k", "--out", str(out), "--keep-title", "X"]) == 2
    # --render with --keep: the same measured sections, the kept ones chosen again.
    again = tmp_path / "again.md"
    assert nr.main(["--render", str(tmp_path / "ref.jsonl"), "--out", str(again), "--keep", str(keep)]) == 0
    assert "Hand-made copies" in again.read_text()
    assert again.read_text().split("## Topology")[1].startswith(doc.split("## Topology")[1].split("## Placement")[0])


def test_a_command_stopped_at_its_time_keeps_what_its_cases_stored(nr, tmp_path, monkeypatch):
    """umscope is stood in by a program that runs a real (CPU) umscope bench into the store without
    printing, then hangs: run_umscope stops it at the timeout and takes the records from the store."""
    fake = tmp_path / "fakepy"
    fake.write_text(f"#!{sys.executable}\nimport subprocess, sys, time\n"
                    f"subprocess.run([{sys.executable!r}] + sys.argv[1:], stdout=subprocess.DEVNULL)\n"
                    "time.sleep(120)\n")
    fake.chmod(0o755)
    monkeypatch.setattr(nr, "PY", str(fake))
    store = str(tmp_path / "store.sqlite")
    recs, rc, wall = nr.run_umscope(["bench", "selftest", "--mode", "ok", "--no-progress"], store, 8)
    assert rc == "timeout" and wall < 60
    assert [r["case_id"] for r in recs] == ["selftest mode=ok"] and recs[0]["status"] == "ok"
    # A second command's salvage takes only its own run's records.
    recs, rc, _ = nr.run_umscope(["bench", "selftest", "--mode", "skip", "--no-progress"], store, 8)
    assert rc == "timeout" and [r["case_id"] for r in recs] == ["selftest mode=skip"]
