"""`--visible-gpus case` (issue 38: a fresh process's CUDA start may cost more with more GPUs visible): a case
that uses GPU 0 alone runs with CUDA_VISIBLE_DEVICES narrowed to that GPU, every record of it says so, multi-GPU
cases keep the environment they had, `all` (the default) changes nothing, a bad value exits 2 before anything
exists. On the CPU: selftest cases through the real runner, the environment each process got read from Popen.
About 3 s."""
import json
import subprocess

import pytest

from conftest import run_cli
from test_suite_plan import _four_gpus
from umscope import plans, suite
from umscope.report import conditions as report_conditions
from umscope.store import Store
from umscope.suite import Case

CASE = {"device": 0, "reps": None, "warmup": None, "visible_gpus": "case"}
ALL = dict(CASE, visible_gpus="all")


def test_which_cases_are_narrowed_and_to_what():
    one = Case("gpu-stream", "device", {"bytes": "1GiB"})
    assert suite.visible_gpus_of(one, CASE, environ={}) == "0"
    assert suite.visible_gpus_of(Case("copy", "pinned", {"dst": "device", "device": "0"}), CASE, environ={}) == "0"
    # the user's own CUDA_VISIBLE_DEVICES: its first entry is the suite's GPU 0 (a number, a UUID, a MIG id)
    assert suite.visible_gpus_of(one, CASE, environ={"CUDA_VISIBLE_DEVICES": "2,3"}) == "2"
    assert suite.visible_gpus_of(one, CASE, environ={"CUDA_VISIBLE_DEVICES": "GPU-8a1b,GPU-77"}) == "GPU-8a1b"
    assert suite.visible_gpus_of(one, CASE, environ={"CUDA_VISIBLE_DEVICES": ""}) is None  # no GPU: left so
    # `all`, or no option at all (an older run's saved options): nothing narrowed
    assert suite.visible_gpus_of(one, ALL, environ={}) is None
    assert suite.visible_gpus_of(one, {"device": 0}, environ={}) is None
    untouched = [
        Case("gpu-stream", "device", {"device": "1"}),                      # another GPU (--devices)
        Case("copy", "device", {"dst": "peer:1"}),                          # a second GPU's memory
        Case("latency", "peer:1", {"processor": "gpu", "device": "0"}),
        Case("pingpong", "device", {"pair": "gpu-gpu"}),                    # two agents, GPU to GPU
        Case("pingpong", "pinned", {"pair": "gpu-gpu", "peer": "1", "device": "0"}),
        Case("app", None, {"name": "gemm", "place-a": "peer:2"}),
        Case("nccl", "device", {"gpus": "0"}),                              # collectives, MPI, launchers
        Case("mpi", "system", {"peer-kind": "system"}),
        Case("gpu-stream", "device", {}, launch=["mpirun", "-n", "2"]),
    ]
    for c in untouched:
        assert suite.visible_gpus_of(c, CASE, environ={}) is None, c.case_id
    assert suite.visible_gpus_of(one, dict(CASE, device=1), environ={}) is None  # --device 1: not GPU 0


def test_on_a_four_gpu_plan_no_case_across_gpus_is_narrowed():
    plan = plans.default_plan(_four_gpus())
    narrowed = [c for c in plan if suite.visible_gpus_of(c, CASE, environ={})]
    across = [c for c in plan if "peer" in c.params or "peer:" in " ".join([c.kind or ""] + list(
        map(str, c.params.values()))) or c.benchmark in ("nccl", "mpi") or c.params.get("pair") == "gpu-gpu"]
    assert narrowed and across
    assert not {c.case_id for c in narrowed} & {c.case_id for c in across}
    # the families that keep one process per case (issue 38's 0.83 s a case) are all narrowed
    assert all(c in narrowed for c in plan if c.benchmark in suite.ISOLATED)


@pytest.fixture
def popen_envs(monkeypatch):
    """The argv and environment of every process the suite starts (the real runner still runs)."""
    seen, real = [], subprocess.Popen

    def spy(argv, *a, **kw):
        seen.append((list(argv), dict(kw.get("env") or {})))
        return real(argv, *a, **kw)
    monkeypatch.setattr(suite.subprocess, "Popen", spy)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return seen


def test_each_process_gets_its_environment_and_a_batch_is_split_where_it_changes(popen_envs):
    cases = [Case("selftest", None, {"mode": "ok"}), Case("selftest", None, {"mode": "pid"}),
             Case("selftest", None, {"mode": "ok", "device": "1"}), Case("selftest", None, {"mode": "cpus"})]
    out = list(suite.execute_batch(cases, CASE))
    assert [o.status for _, o in out] == ["ok"] * 4
    assert out[1][1].pids == out[0][1].pids != out[2][1].pids != out[3][1].pids
    batches = [(argv, env) for argv, env in popen_envs if argv[-1] == "batch"]
    assert [env.get("CUDA_VISIBLE_DEVICES") for _, env in batches] == ["0", None, "0"]
    assert all(env["UMSCOPE_PARENT_PID"] for _, env in batches)
    popen_envs.clear()
    single = suite.execute(cases[0], CASE)
    assert single.status == "ok" and popen_envs[-1][1]["CUDA_VISIBLE_DEVICES"] == "0"
    suite.execute(cases[2], CASE)
    assert "CUDA_VISIBLE_DEVICES" not in popen_envs[-1][1]
    # `all`: one batch process, the environment as today
    popen_envs.clear()
    assert [o.status for _, o in suite.execute_batch(cases, ALL)] == ["ok"] * 4
    assert len(popen_envs) == 1 and "CUDA_VISIBLE_DEVICES" not in popen_envs[0][1]


def test_the_users_own_list_gives_its_first_gpu(popen_envs, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert suite.execute(Case("selftest", None, {"mode": "ok"}), CASE).status == "ok"
    assert popen_envs[-1][1]["CUDA_VISIBLE_DEVICES"] == "3"
    suite.execute(Case("selftest", None, {"mode": "ok", "device": "1"}), CASE)
    assert popen_envs[-1][1]["CUDA_VISIBLE_DEVICES"] == "3,1"  # the user's own, untouched


def test_every_record_of_a_narrowed_case_says_so_and_the_report_too(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    s = Store(tmp_path / "s.sqlite")
    cases = [Case("selftest", None, {"mode": "traffic"}), Case("selftest", None, {"mode": "ok", "device": "1"}),
             Case("selftest", None, {"mode": "fail"}), Case("selftest", None, {"mode": "pid"})]
    rid = s.create_run("bench", "test", suite.plan_to_json(cases), CASE, {})
    assert suite.run_cases(s, rid, cases, CASE, progress=False) == "complete"
    by_case = {}
    for r in s.records(rid):
        by_case.setdefault(r["case_id"], []).append(r["extra"].get("visible_gpus"))
    traffic, other_gpu, failed, alone = (by_case[c.case_id] for c in cases)
    assert len(traffic) > 1 and set(traffic) == {"0"}
    assert other_gpu == [None]
    assert failed == ["0"]  # the stand-in record of a case that left none says it too
    assert alone == ["0"]
    measured = [r for r in s.records(rid) if r["status"] == "ok"]  # what the report's page holds
    note = report_conditions.text(s.run(rid), measured)
    assert "--visible-gpus case" in note and "2 with CUDA_VISIBLE_DEVICES=0" in note
    # `all`: no record carries the field and the report says nothing of it
    rid = s.create_run("bench", "test", suite.plan_to_json(cases), ALL, {})
    suite.run_cases(s, rid, cases, ALL, progress=False)
    assert not any("visible_gpus" in r["extra"] for r in s.records(rid))
    assert "visible-gpus" not in report_conditions.text(s.run(rid), s.records(rid))


def test_a_bad_value_exits_2_and_creates_nothing(tmp_path):
    store = tmp_path / "s.sqlite"
    for bad in ("some", "", "CASE"):
        res = run_cli("bench", "selftest", "--mode", "ok", "--visible-gpus", bad, "--store", str(store))
        assert res.returncode == 2, res.stderr
        assert res.stderr.count("\n") == 1 and "--visible-gpus" in res.stderr
        assert not store.exists()


def test_the_option_reaches_the_run_and_a_resume_keeps_it(tmp_path):
    store = tmp_path / "s.sqlite"
    res = run_cli("bench", "selftest", "--mode", "ok", "--visible-gpus", "case", "--store", str(store),
                  "--no-progress", "--json", env={"CUDA_VISIBLE_DEVICES": "0"})
    assert res.returncode == 0, res.stderr
    assert {r["extra"]["visible_gpus"] for r in json.loads(res.stdout)} == {"0"}
    s = Store(store)
    run = s.run()
    assert run["options"]["visible_gpus"] == "case"
    # an interrupted run resumed without the option keeps its saved value
    plan = [Case("selftest", None, {"mode": "ok"}).to_json()]
    rid = s.create_run("bench selftest", "umscope bench selftest", plan, dict(CASE), run["fingerprint"])
    s.close()
    res = run_cli("run", "--resume", str(rid), "--store", str(store), "--no-progress", "--json",
                  env={"CUDA_VISIBLE_DEVICES": "0"})
    assert res.returncode == 0, res.stderr
    assert {r["extra"]["visible_gpus"] for r in json.loads(res.stdout)} == {"0"}


def test_a_run_of_batchable_cases_is_grouped_by_environment_in_order(monkeypatch):
    # 4 x H100 (b7b9039): the copy family alternates GPU-0 and peer cases; one process per change cost 24.5 s.
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cases = [Case("selftest", None, {"mode": "ok", "n": str(i)}, ) if i % 2 == 0 else
             Case("selftest", None, {"mode": "ok", "n": str(i), "device": "1"}) for i in range(6)]
    segs = list(suite._segments(cases, CASE))
    assert [[c.params["n"] for c in s] for s in segs] == [["0", "2", "4"], ["1", "3", "5"]]
    assert [suite.visible_gpus_of(s[0], CASE, environ={}) for s in segs] == ["0", None]
    assert list(suite._segments(cases, ALL)) == [cases]  # `all`: one batch, the plan's order
    # a case that keeps its own process still divides the runs around it, in place
    alone = Case("firsttouch", "device", {"by": "gpu"})
    segs = list(suite._segments(cases[:2] + [alone] + cases[2:4], CASE))
    assert [[c.params.get("n", "ft") for c in s] for s in segs] == [["0"], ["1"], ["ft"], ["2"], ["3"]]


@pytest.mark.parametrize("gpus,given,expected", [(4, None, "case"), (1, None, "all"), (4, "all", "all"),
                                                 (1, "case", "case")])
def test_the_default_narrows_where_several_gpus_are_visible(tmp_path, monkeypatch, capsys, gpus, given, expected):
    # session 12 (4 x H100, b447ae0): three alternated pairs of the firsttouch family, all then case, moved no
    # figure beyond the pairs' own run-to-run range and took 15.9-16.3 s against 27.6-27.8 s: the default on a
    # node with several GPUs is case; a one-GPU node has nothing to narrow; an explicit value always wins.
    from umscope import cli, probe
    real = probe.probe()
    one = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "sms": 132, "total_mem": 80 << 30,
           "free_mem": 80 << 30, "l2_bytes": 50 << 20, "addressing": "none"}
    fake = dict(real, gpus=[dict(one, device=d, pci_bus_id=f"0000:{0x19 + d:02x}:00.0") for d in range(gpus)])
    monkeypatch.setattr(probe, "probe", lambda *a, **k: fake)
    monkeypatch.setattr(cli.probe, "probe", lambda *a, **k: fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    store = tmp_path / "s.sqlite"
    argv = ["bench", "selftest", "--mode", "ok", "--store", str(store), "--no-progress", "--json"]
    assert cli.main(argv + (["--visible-gpus", given] if given else [])) == 0
    recs = json.loads(capsys.readouterr().out)
    assert Store(store).run()["options"]["visible_gpus"] == expected
    assert {r["extra"].get("visible_gpus") for r in recs} == ({"0"} if expected == "case" else {None})


def test_the_cases_that_keep_their_own_process_inside_a_stretch_no_longer_split_it(monkeypatch):
    # 4 x H100 (b447ae0): the managed ping-pongs (own process each) split the ping-pong family into three GPU-0
    # and two 4-GPU batch processes (0.27-0.28 s and 1.01-1.08 s to their first case); under `case` they run
    # after their stretch's groups, and a family whose every case keeps its own process still ends the stretch.
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    ok = [Case("selftest", None, {"mode": "ok", "n": str(i)}) for i in range(3)]
    peer = [Case("selftest", None, {"mode": "ok", "n": f"p{i}", "device": "1"}) for i in range(2)]
    mig = Case("pingpong", "managed", {"pair": "cpu-gpu"})
    mig_across = Case("pingpong", "managed", {"pair": "gpu-gpu", "peer": "1", "device": "0"})
    ft = Case("firsttouch", "device", {"by": "gpu"})
    plan = [ok[0], peer[0], mig, ok[1], peer[1], mig_across, ok[2], ft, ok[0]]
    segs = [[c.params.get("n", c.benchmark) for c in s] for s in suite._segments(plan, CASE)]
    assert segs == [["0", "1", "2"], ["p0", "p1"], ["pingpong"], ["pingpong"], ["firsttouch"], ["0"]]
    assert [s[0].kind for s in list(suite._segments(plan, CASE))[2:4]] == ["managed", "managed"]
    # `all` keeps the plan's order: every case that keeps its own process splits the run where it stands
    assert [len(s) for s in suite._segments(plan, ALL)] == [2, 1, 2, 1, 1, 1, 1]
    # --isolate: every case alone, in the plan's order
    assert list(suite._segments(plan, dict(CASE, isolate=True))) == [[c] for c in plan]
    # the default plan of a 4-GPU node: two batch processes before the families that keep their own process
    fp = _four_gpus()
    monkeypatch.setattr(plans, "numa_kinds", lambda fp: [])
    default = plans.default_plan(fp)
    segs = list(suite._segments(default, CASE))
    first_alone = next(i for i, s in enumerate(segs) if s[0].benchmark in suite.ISOLATED)
    assert [len(s) > 1 for s in segs[:2]] == [True, True]
    # every case across GPUs, NCCL's too, in the one batch process that sees every GPU (b447ae0: NCCL came after
    # the applications in its own, whose start took 1.09 s)
    across = [c for c in default if c.batchable(CASE) and suite.visible_gpus_of(c, CASE) is None]
    assert segs[1] == across and "nccl" in {c.benchmark for c in across}
    assert sum(len(s) > 1 or s[0].batchable(CASE) for s in segs) == 3  # GPU 0's, every GPU's, the applications'
    assert all(not s[0].batchable(CASE) for s in segs[2:first_alone])
    assert sorted(c.case_id for s in segs for c in s) == sorted(c.case_id for c in default)
