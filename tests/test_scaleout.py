"""The scale-out families: nccl and mpi planning, launcher lines, the MPI family on the CPU with two local
ranks, and the report from recorded sample output (tests/data/scaleout-sample.jsonl: SYNTHETIC input in
umbench's format, not measurements)."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import bench_module, run_cli, umbench
from umscope import native, plans, scaleout
from umscope.errors import UsageError
from umscope.report.html import render
from umscope.store import Store
from umscope.suite import Case, execute

SAMPLE = Path(__file__).parent / "data" / "scaleout-sample.jsonl"
FP = {"host": {}, "cpu": {"caches": []}, "numa": [], "cuda": {}, "gpus": []}


def _mpi_runner():
    try:
        return native.umbench_mpi_path()
    except UsageError:
        return None


needs_mpi = pytest.mark.skipif(not shutil.which("mpirun") or _mpi_runner() is None,
                               reason="no mpirun or no umbench-mpi (built only where MPI is found; CI installs "
                                      "Open MPI)")


def test_launcher_lines(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.delenv("UMSCOPE_NCCL", raising=False)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    over = ["--oversubscribe"] if 2 > (os.cpu_count() or 1) else []
    assert scaleout.launcher_argv("mpirun", 2, forward=()) == ["mpirun", "-n", "2"] + over
    line = scaleout.launcher_argv("mpirun", 8, ppn=4)
    assert line[:5] == ["mpirun", "-n", "8", "--map-by", "ppr:4:node"]
    assert "--allow-run-as-root" not in line and "--oversubscribe" not in line
    assert line[-2:] == ["-x", "NCCL_NVLS_ENABLE"]
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert "--allow-run-as-root" in scaleout.launcher_argv("mpirun", 2)
    assert "--oversubscribe" in scaleout.launcher_argv("mpirun", (os.cpu_count() or 1) + 1)
    assert scaleout.launcher_argv("srun", 16, ppn=4) == ["srun", "-n", "16", "--ntasks-per-node", "4"]
    assert scaleout.launcher_argv("flux", 4) == ["flux", "run", "-n", "4"]
    for bad in (("mpirun", 0, None), ("mpirun", 2, 0), ("pbsdsh", 2, None)):
        with pytest.raises(UsageError):
            scaleout.launcher_argv(*bad)


def test_nccl_plan(monkeypatch):
    monkeypatch.setenv("UMSCOPE_NCCL", "/opt/nccl/lib")
    cases = scaleout.nccl_cases(FP)
    assert [c.kind for c in cases] == scaleout.NCCL_KINDS
    assert all(c.launch is None and "launch" not in c.params for c in cases)
    assert cases[0].params["op"] == "allreduce,allgather,reducescatter,broadcast,alltoall"
    full = scaleout.nccl_cases(FP, ["device"], "full", "allreduce")[0].params["bytes"].split(",")
    assert full[0] == "8" and full[-1] == str(4 << 30) and len(full) == 30
    assert all(int(b) == 2 * int(a) for a, b in zip(full, full[1:]))
    ranked = scaleout.nccl_cases(FP, ["device"], "1GiB", "allreduce", launcher="srun", ranks=8, ppn=4, check=False)[0]
    assert ranked.launch == ["srun", "-n", "8", "--ntasks-per-node", "4"]
    assert ranked.params["launch"] == "mpi" and ranked.params["launcher"] == "srun -n 8 --ntasks-per-node 4"
    with pytest.raises(UsageError):
        scaleout.nccl_cases(FP, ops="allreduce,sendrecv")


def test_default_suite_gets_one_short_nccl_case_only_with_two_gpus():
    assert scaleout.default_cases(FP) == []
    two = dict(FP, gpus=[{"device": 0}, {"device": 1}])
    (case,) = scaleout.default_cases(two)
    assert (case.benchmark, case.kind, case.params["bytes"]) == ("nccl", "device", "1MiB,256MiB")


def test_mpi_plan_and_launch_argv(monkeypatch):
    monkeypatch.setenv("UMSCOPE_UMBENCH_MPI", "/x/umbench-mpi")
    cases = scaleout.mpi_cases(FP, ["system", "pinned"], "8,1MiB", "bw,latency", launcher="flux", ranks=4,
                               check=False)
    assert [c.kind for c in cases] == ["system", "pinned"]
    argv = cases[0].argv({"reps": 3})
    assert argv[:6] == ["flux", "run", "-n", "4", "/x/umbench-mpi", "run"]
    assert argv[6] == "mpi" and "--launcher" in argv and argv[argv.index("--launcher") + 1] == "flux run -n 4"
    assert Case.from_json(json.loads(json.dumps(cases[0].to_json()))).launch == cases[0].launch
    crossed = scaleout.mpi_cases(FP, ["managed"], None, None, launcher="srun", ranks=2, check=False,
                                 peer_kinds=["device", "pinned"])
    assert [(c.kind, c.params.get("peer-kind")) for c in crossed] == [("managed", "device"), ("managed", "pinned")]


def test_cli_rejects_bad_scaleout_input(store_path):
    for args in (["bench", "mpi", "--launcher", "qsub"], ["bench", "nccl", "--ops", "gather"],
                 ["bench", "mpi", "--launcher", "srun", "-n", "0", "--dry-run"]):
        res = run_cli(*args, "--store", store_path)
        assert res.returncode == 2 and res.stderr.count("\n") == 1, (args, res.stderr)


def test_nccl_without_nccl_is_a_skip_with_the_reason():
    env = dict(os.environ, UMSCOPE_NCCL="/nonexistent/libnccl.so.2")
    res = subprocess.run([native.umbench_path(), "run", "nccl", "--bytes", "1MiB"], capture_output=True, text=True,
                         env=env, timeout=120)
    status = json.loads(res.stdout.strip().splitlines()[-1])
    assert res.returncode == 0 and status["status"] == "skipped"
    assert "UMSCOPE_NCCL=/nonexistent/libnccl.so.2" in status["reason"]


def test_plain_umbench_has_no_mpi_family():
    res = umbench("run", "mpi")
    assert res.returncode == 2 and "unknown benchmark" in res.stderr


def _sample_store(tmp_path, fp=FP):
    text = SAMPLE.read_text()
    assert text.startswith("# SYNTHETIC TEST INPUT")
    s = Store(tmp_path / "s.sqlite")
    run = s.create_run("bench", "umscope bench nccl", [], {}, fp)
    nccl_part, mpi_part = text.split('{"type": "status", "status": "ok"}\n')[:2]
    for bench, part in (("nccl", nccl_part), ("mpi", mpi_part)):
        recs, _ = native.parse_output(part)
        assert recs and all(r["benchmark"] == bench and r["synthetic"] for r in recs)
        s.add_case_result(run, Case(bench, "device"), "ok", "", 0, 1, recs)
    s.add_case_result(run, Case("mpi", "device", {"launcher": "mpirun -n 2"}), "skipped",
                      "kind device is reachable by the GPU only, and the MPI library is not CUDA-aware", 0, 1, [])
    s.finish_run(run, "complete")
    return s, run


def test_report_from_sample_output(tmp_path):
    s, run = _sample_store(tmp_path)
    html = render(s.run(run), s.cases(run), s.records(run))
    for title in ("NCCL allreduce: bus bandwidth", "NCCL allgather: bus bandwidth", "MPI window bandwidth",
                  "MPI bidirectional bandwidth", "MPI latency", "MPI throughput against processes"):
        assert title in html, title
    assert "device · 2 ranks" in html and "pinned → system" in html
    assert "No peer-link bound" in html
    assert "not CUDA-aware" in html  # the skipped device case keeps its reason
    nccl = [r for r in s.records(run) if r["benchmark"] == "nccl"]
    # busbw = algbw x the operation's factor for 2 ranks (1 for all-reduce, 1/2 for all-gather).
    for r in nccl:
        x = r["extra"]
        assert x["bus_factor"] == {"allreduce": 1.0, "allgather": 0.5}[r["op"]]
        assert r["median"] == pytest.approx(x["algbw"] * x["bus_factor"])


def test_report_draws_the_peer_link_bound(tmp_path, monkeypatch):
    from umscope.model import bounds
    from umscope.report import scaleout as section
    monkeypatch.setattr(bounds, "peer_link", lambda fp, a, b: (450.0 + a + b, "probe: 18 links"), raising=False)
    s, run = _sample_store(tmp_path)
    nccl = [dict(r) for r in s.records(run) if r["benchmark"] == "nccl"]
    html = section.nccl_section(nccl, dict(FP, gpus=[{"device": 0}, {"device": 1}, {"device": 2}]))
    assert "peer-link bound 451 GB/s (probe: 18 links)" in html  # the slowest pair of the three GPUs


@needs_mpi
def test_mpi_one_rank_is_a_skip():
    res = subprocess.run([native.umbench_mpi_path(), "run", "mpi"], capture_output=True, text=True, timeout=120)
    status = json.loads(res.stdout.strip().splitlines()[-1])
    assert status["status"] == "skipped" and "at least 2 ranks" in status["reason"]


@needs_mpi
def test_mpi_two_local_ranks_on_system_memory(store_path):
    """The multi-process path: mpirun starts 2 ranks of umbench-mpi; rank 0 alone prints the records."""
    res = run_cli("bench", "mpi", "--kind", "system", "--size", "8,4KiB", "--ops", "bw,bibw,latency,mbw",
                  "--reps", "2", "--warmup", "0", "--launcher", "mpirun", "-n", "2", "--store", store_path,
                  "--json", "--no-progress", timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    s = Store(store_path)
    (case,) = s.cases(s.run()["id"])
    assert case["status"] == "ok", case["reason"]
    recs = s.records(s.run()["id"])
    assert sorted((r["op"], r["bytes"]) for r in recs) == sorted(
        (op, b) for op in ("bw", "bibw", "latency", "mbw") for b in (8, 4096))  # once each: one writer
    for r in recs:
        x = r["extra"]
        assert x["verified"] and x["ranks"] == 2 and x["pointers"] == "host"
        assert x["launcher"].startswith("mpirun -n 2") and r["median"] > 0
        assert r["unit"] == ("us" if r["op"] == "latency" else "GB/s")
        # Each rank's CPUs are listed, and no two ranks share one (OSU's single buffer per side by default).
        cpus = dict(part.split(":") for part in x["rank_cpus"].split())
        assert sorted(cpus) == ["0", "1"] and not (_cpus(cpus["0"]) & _cpus(cpus["1"])), x["rank_cpus"]
        assert x["buffers"] == "single" and x["rank_placement"]
        # MPI_Init, as OSU and nccl-tests: Open MPI locks on every call above MPI_THREAD_SINGLE
        assert x["mpi_thread_level"] == "MPI_THREAD_SINGLE"


@pytest.mark.gpu
def test_nccl_two_gpus_device_buffers():
    info = native.native_info()
    if len(info.get("gpus", [])) < 2:
        pytest.skip("needs two GPUs")
    scaleout._prepare_env()
    recs, status = native.run_case("nccl", "--kind", "device", "--op", "allreduce,allgather,alltoall",
                                   "--bytes", "1MiB,64MiB", "--reps", "5", timeout=600)
    assert status["status"] == "ok", status
    assert len(recs) == 6
    for r in recs:
        n = r["ranks"]
        factor = {"allreduce": 2 * (n - 1) / n, "allgather": (n - 1) / n, "alltoall": (n - 1) / n}[r["op"]]
        assert r["verified"] and r["bus_factor"] == pytest.approx(factor)
        assert r["median"] == pytest.approx(r["algbw"] * factor, rel=0.05) and r["median"] > 1


def test_nccl_alloc_takes_device_buffers_only():
    res = subprocess.run([native.umbench_path(), "run", "nccl", "--kind", "pinned", "--alloc", "nccl"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "--alloc nccl is for --kind device only" in res.stderr
    res = subprocess.run([native.umbench_path(), "run", "nccl", "--alloc", "cuMem"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2 and "unknown alloc" in res.stderr


@pytest.mark.gpu
def test_nccl_over_ncclmemalloc_buffers():
    info = native.native_info()
    if len(info.get("gpus", [])) < 2:
        pytest.skip("needs two GPUs")
    scaleout._prepare_env()
    recs, status = native.run_case("nccl", "--kind", "device", "--alloc", "nccl", "--op", "allgather,broadcast",
                                   "--bytes", "1MiB", "--reps", "3", timeout=600)
    assert status["status"] in ("ok", "skipped"), status
    if status["status"] == "skipped":
        assert "ncclMemAlloc" in status["reason"] or "NCCL" in status["reason"]
        return
    assert len(recs) == 2 and all(r["verified"] and r["alloc"] == "ncclMemAlloc" and r["median"] > 0 for r in recs)


@pytest.mark.gpu
@needs_mpi
def test_mpi_device_memory_is_skipped_or_runs_by_cuda_awareness(store_path):
    res = run_cli("bench", "mpi", "--kind", "device", "--size", "1MiB", "--ops", "bw", "--reps", "2",
                  "--launcher", "mpirun", "-n", "2", "--store", store_path, "--no-progress", timeout=600)
    s = Store(store_path)
    (case,) = s.cases(s.run()["id"])
    assert case["status"] in ("ok", "skipped"), case["reason"]
    if case["status"] == "skipped":
        assert "CUDA-aware" in case["reason"]


@pytest.mark.gpu
@needs_mpi
def test_nccl_one_rank_per_gpu_under_mpirun(store_path):
    if len(native.native_info().get("gpus", [])) < 2:
        pytest.skip("needs two GPUs")
    res = run_cli("bench", "nccl", "--kind", "device", "--ops", "allreduce,alltoall", "--size", "64MiB",
                  "--launcher", "mpirun", "-n", "2", "--store", store_path, "--no-progress", timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    s = Store(store_path)
    recs = s.records(s.run()["id"])
    assert sorted(r["op"] for r in recs) == ["allreduce", "alltoall"]  # rank 0 alone printed them
    for r in recs:
        x = r["extra"]
        assert x["launch"] == "mpi" and x["ranks"] == 2 and x["verified"] and r["median"] > 1
        assert x["launcher"].startswith("mpirun -n 2")


def _launcher_env(launcher, rank, nodes=2, per_node=4):
    """The variables each launcher gives rank `rank` of nodes x per_node ranks (block placement)."""
    node, local = divmod(rank, per_node)
    size = nodes * per_node
    if launcher == "mpirun":
        return {"OMPI_COMM_WORLD_RANK": rank, "OMPI_COMM_WORLD_SIZE": size, "OMPI_COMM_WORLD_LOCAL_RANK": local,
                "OMPI_COMM_WORLD_LOCAL_SIZE": per_node}
    if launcher == "srun":
        return {"SLURM_PROCID": rank, "SLURM_NTASKS": size, "SLURM_LOCALID": local, "SLURM_NODEID": node,
                "SLURM_TASKS_PER_NODE": f"{per_node}(x{nodes})"}
    return {"FLUX_TASK_RANK": rank, "FLUX_JOB_SIZE": size, "FLUX_TASK_LOCAL_ID": local, "FLUX_JOB_NNODES": nodes}


def _rank_placement(env, *args):
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("OMPI_", "SLURM_", "FLUX_", "PMI_", "MPI_LOCAL"))}
    clean.update({k: str(v) for k, v in env.items()})
    res = subprocess.run([native.umbench_path(), "rank-placement", *args], capture_output=True, text=True,
                         env=clean, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _cpus(text):
    out = set()
    for part in text.split(","):
        a, _, b = part.partition("-")
        out |= set(range(int(a), int(b or a) + 1))
    return out


@pytest.mark.parametrize("launcher", ["mpirun", "srun", "flux"])
@pytest.mark.parametrize("one_core", [False, True])
def test_rank_placement_two_nodes_of_four_ranks(launcher, one_core):
    """2 nodes x 4 ranks, the launcher's environment faked on the CPU: each rank learns its node-local rank, takes
    GPU local_rank mod 4 and cores of its own, inside that GPU's local CPUs (two sockets of 32 CPUs, GPUs 0-1 on
    the first); ranks of one node never share a CPU; with --one-core (the mpi family) one CPU each."""
    layout = "0-31;0-31;32-63;32-63"
    extra = ["--one-core"] if one_core else []
    by_node = {0: [], 1: []}
    for rank in range(8):
        p = _rank_placement(_launcher_env(launcher, rank), "--cpus", "0-63", "--gpu-cpus", layout, *extra)
        assert (p["rank"], p["size"], p["local_rank"], p["local_size"]) == (rank, 8, rank % 4, 4), p
        assert p["gpu"] == rank % 4
        cpus = _cpus(p["cpus"])
        assert cpus <= (set(range(32)) if p["gpu"] < 2 else set(range(32, 64))), p
        assert len(cpus) == (1 if one_core else 16), p
        by_node[rank // 4].append(cpus)
    for sets in by_node.values():
        assert all(not (a & b) for i, a in enumerate(sets) for b in sets[i + 1:]), sets
    assert by_node[0] == by_node[1]  # the same layout on every node


def test_rank_placement_keeps_a_launchers_binding_and_says_when_it_knows_nothing():
    bound = _rank_placement(_launcher_env("mpirun", 1), "--cpus", "5", "--gpu-cpus", "0-63;0-63;0-63;0-63")
    assert bound["cpus"] == "5" and "the launcher bound this rank" in bound["how"]
    alone = _rank_placement({}, "--cpus", "0-7", "--gpu-cpus", "0-7")
    assert alone["local_rank"] == -1 and alone["cpus"] == "0-7" and "no launcher variables" in alone["how"]


# ------------------------------------------------------------ bench/scaleout.py, the anchors' comparison

def _bench_scaleout():
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_scaleout", Path(__file__).resolve().parent.parent / "bench"
                                                  / "scaleout.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_scaleout_binding_sets_the_mpirun_line_of_umscope_and_the_anchors(monkeypatch):
    so = _bench_scaleout()
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    core, none, sock = so.mpirun(4), so.mpirun(4, bind="none"), so.mpirun(4, bind="socket")
    assert core[:7] == ["mpirun", "-n", "4", "--bind-to", "core", "--map-by", "core"]  # the default: one core a rank
    assert none[3:5] == ["--bind-to", "none"] and "core" not in none
    assert sock[3:5] == ["--bind-to", "socket"]
    for line in (core, none, sock):
        assert line[line.index("-x") + 1] == "NCCL_NVLS_ENABLE"


def test_scaleout_by_binding_rows_put_each_binding_beside_its_own_anchor():
    so = _bench_scaleout()
    rec = lambda med, spread: {"op": "alltoall", "bytes": 64 << 20, "median": med, "spread": spread}  # noqa: E731
    by_bind = {"core": ([rec(250.1, 0.008)], {"alltoall": {64 << 20: 265.3}}),
               "none": ([rec(272.4, 0.006)], {})}  # nccl-tests missing under the second binding
    (row,) = so.bind_rows(by_bind, ["alltoall"], [64 << 20])
    assert row == ["alltoall", "64 MiB", "250.1 (0.8%)", "265.3", "0.943 **below**", "272.4 (0.6%)", "—", "—"]


def test_scaleout_refuses_a_bad_binding_before_running_anything(tmp_path):
    out = tmp_path / "so"
    res = subprocess.run([sys.executable, str(Path(__file__).resolve().parent.parent / "bench"
                                                                    / "scaleout.py"),
                          "--nccl-bind", "core,bogus", "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "--nccl-bind" in res.stderr and not out.exists()


def test_osu_repeated_gives_the_median_and_its_range_per_size():
    so = bench_module("scaleout")
    runs = iter([{8: 1.0, 1048576: 12.0}, {8: 3.0, 1048576: 10.0}, {8: 2.0}])
    med, spread = so.repeated(lambda: next(runs), 3)
    assert med == {8: 2.0, 1048576: 11.0}  # 1 MiB printed twice: the median of those two
    assert spread[8] == 1.0 and abs(spread[1048576] - 2.0 / 11.0) < 1e-12
    med1, spread1 = so.repeated(lambda: {8: 5.0}, 1)
    assert med1 == {8: 5.0} and spread1 == {8: None}  # one run: no spread is made up


def test_mpi_rows_put_osus_spread_before_the_ratio_only_when_osu_ran_several_times():
    so = bench_module("scaleout")
    recs = [{"op": "bw", "bytes": 1 << 20, "median": 12.0, "spread": 0.05},
            {"op": "bw", "bytes": 8, "median": 0.05, "spread": 0.1}]
    anchors = {"bw": {8: 50.0, 1 << 20: 12000.0}}  # OSU's MB/s
    plain = so.rows_mpi(recs, anchors, ["bw"])
    assert [r[1] for r in plain] == ["8 B", "1 MiB"] and all(len(r) == 6 for r in plain)
    spread = so.rows_mpi(recs, anchors, ["bw"], {"bw": {8: 0.2, 1 << 20: None}})
    assert [r[5] for r in spread] == ["20.0%", "—"] and [r[:5] + r[6:] for r in spread] == plain


def test_mpi_rows_say_whether_umscope_lies_within_osus_own_runs():
    so = bench_module("scaleout")
    recs = [{"op": "bw", "bytes": 8, "median": 0.05, "spread": 0.1},
            {"op": "bw", "bytes": 1 << 20, "median": 12.0, "spread": 0.05},
            {"op": "latency", "bytes": 8, "median": 0.5, "spread": 0.02}]
    anchors = {"bw": {8: 50.0, 1 << 20: 13000.0}, "latency": {8: 0.45}}
    runs = {"bw": [{8: 40.0, 1 << 20: 12500.0}, {8: 60.0, 1 << 20: 14000.0}, {8: 50.0, 1 << 20: 13000.0}],
            "latency": [{8: 0.40}, {8: 0.45}, {8: 0.50}]}
    rows = so.rows_mpi(recs, anchors, ["bw", "latency"], {"bw": {}, "latency": {}}, runs)
    # 0.05 GB/s within OSU's 40-60 MB/s; 12.0 GB/s below its 12.5-14.0; 0.5 us at the edge of 0.40-0.50 us
    assert [r[-1] for r in rows] == ["within", "worse than all", "within"]
    assert so.within_runs(0.3, [0.4, 0.5], lower_is_better=True) == "better than all"
    assert so.within_runs(0.6, [0.4, 0.5], lower_is_better=True) == "worse than all"
    assert so.within_runs(15.0, [12.5, 14.0]) == "better than all"
    assert [r[:-1] for r in rows] == so.rows_mpi(recs, anchors, ["bw", "latency"], {"bw": {}, "latency": {}})
    assert so.within_runs(1.0, [2.0]) == "—" and so.within_runs(1.0, [0.5, None, 2.0]) == "within"


def test_alternated_runs_take_turns_and_pool_to_the_median_of_runs_with_their_range():
    so = bench_module("scaleout")
    order, ours, theirs = [], iter([10.0, 12.0, 11.0]), iter([{8: 1.0}, {8: 3.0}, {8: 2.0}])

    def mine():
        order.append("umscope")
        v = next(ours)
        return [{"op": "bw", "bytes": 8, "median": v, "spread": 0.01},
                {"op": "latency", "bytes": 8, "median": 100 / v, "spread": 0.02}]

    def osu():
        order.append("osu")
        return next(theirs)
    a, b = so.alternated(3, mine, osu)
    assert order == ["umscope", "osu"] * 3 and len(a) == len(b) == 3
    pooled = {r["op"]: r for r in so.pooled(a)}
    assert pooled["bw"]["median"] == 11.0 and pooled["bw"]["runs"] == 3
    assert pooled["bw"]["run_medians"] == [10.0, 12.0, 11.0]
    assert abs(pooled["bw"]["spread"] - 2.0 / 11.0) < 1e-12  # the run-to-run range, not a run's own spread
    assert abs(pooled["latency"]["median"] - 100 / 11) < 1e-12
    assert so.pooled(a[:1])[0]["spread"] == 0.01  # one run: its own spread stays
    med, spread = so.median_range(b)
    assert med == {8: 2.0} and spread == {8: 1.0}


@pytest.mark.parametrize("argv", [["--alternate", "0"], ["--alternate", "3", "--osu-reps", "3"], ["--osu-reps", "0"]])
def test_scaleout_refuses_bad_repetition_counts_before_running_anything(tmp_path, argv):
    out = tmp_path / "so"
    res = subprocess.run([sys.executable, str(Path(__file__).resolve().parent.parent / "bench" / "scaleout.py"),
                          *argv, "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "--alternate" in res.stderr and not out.exists()


def test_nccl_rows_set_umscopes_ranks_beside_nccl_tests_mean_and_slowest_rank():
    so = _bench_scaleout()
    rec = lambda med: {"op": "alltoall", "bytes": 16 << 20, "median": med, "spread": 0.009}  # noqa: E731
    (row,) = so.nccl_rows([rec(198.2)], [rec(173.8)], {"alltoall": {16 << 20: 180.8}},
                          {"alltoall": {16 << 20: 188.5}}, {"alltoall": {16 << 20: 175.0}}, {},
                          ["alltoall"], [16 << 20])
    assert row[:5] == ["alltoall", "16 MiB", "198.2 (0.9%)", "180.8", "1.096"]
    assert row[5:8] == ["173.8 (0.9%)", "188.5", "0.922 **below**"]  # against nccl-tests' default, the ranks' mean
    assert row[8:10] == ["175", "0.993"]  # against -a 3, the slowest rank's time: umscope's definition
    assert row[10:] == ["—", "—"]  # PyTorch not run
    (none,) = so.nccl_rows([], [rec(173.8)], {}, {}, {}, {}, ["alltoall"], [16 << 20])
    assert none[8:10] == ["—", "—"]
