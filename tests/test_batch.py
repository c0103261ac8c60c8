"""The batch runner (umbench batch, suite.execute_batch): many cases in one process with the isolation of one
process per case kept. A crash or a hang inside a batch loses only its case; the cases after it run in a
fresh process; the records are those of one process per case. About 10 s on 2 cores (two 2-s timeouts)."""
import subprocess

import pytest

from umscope import suite
from umscope.suite import Case

OPTIONS = {"device": 0, "reps": None, "warmup": None}


def _run(cases):
    started = []
    out = list(suite.execute_batch(cases, OPTIONS, on_start=started.append))
    return out, started


def test_crash_and_hang_inside_a_batch_fail_only_their_case():
    modes = ["ok", "ok", "crash", "ok", "hang", "ok", "fail", "abort", "ok", "ok"]
    cases = [Case("selftest", None, {"mode": m}, timeout=2) for m in modes]
    out, started = _run(cases)
    assert [c for c, _ in out] == cases  # every case, once, in order
    status = [o.status for _, o in out]
    assert status == ["ok", "ok", "failed", "ok", "timeout", "ok", "failed", "failed", "ok", "ok"]
    assert "SIGSEGV" in out[2][1].reason and "SIGABRT" in out[7][1].reason
    assert out[6][1].reason == "selftest asked to fail"
    assert "2 s timeout" in out[4][1].reason and 1.9 < out[4][1].elapsed < 10
    for (c, o) in out:
        if o.status == "ok":
            assert len(o.records) == 1 and o.records[0]["value"] == 1.0  # its own record, no marker
    assert started == cases


def test_cases_share_a_process_until_one_fails():
    """The pid each case ran in (selftest --mode pid): one process for a run of good cases, a new one after a
    crash, a failure or a hang."""
    modes = ["pid", "pid", "crash", "pid", "pid", "hang", "pid", "fail", "pid"]
    cases = [Case("selftest", None, {"mode": m}, timeout=2) for m in modes]
    out, _ = _run(cases)
    pids = [o.records[0]["value"] if o.status == "ok" else None for _, o in out]
    assert pids[0] == pids[1]
    assert pids[3] == pids[4] and pids[3] != pids[0]
    assert pids[6] not in (pids[0], pids[3])
    assert pids[8] not in (pids[0], pids[3], pids[6])


def test_batch_records_equal_one_process_per_case():
    """The same cases through `umbench run` and through a batch: the same records, field for field (the
    measured values aside), and the same status lines."""
    cases = [Case("cpu-stream", "system", {"bytes": "2MiB", "threads": "1", "reps": "2", "warmup": "1"}),
             Case("selftest", None, {"mode": "traffic"}),
             Case("selftest", None, {"mode": "skip"}),
             Case("cpu-stream", "pinned", {"bytes": "1MiB", "threads": "1", "reps": "2"})]
    out, _ = _run(cases)
    measured = {"median", "min", "max", "mean", "spread", "seconds", "samples", "stdev", "value", "p05", "p95",
                "residency"}
    for case, outcome in out:
        single = suite.execute(case, OPTIONS)
        assert (single.status, single.reason) == (outcome.status, outcome.reason), case.case_id
        assert len(single.records) == len(outcome.records), case.case_id
        for a, b in zip(single.records, outcome.records):
            assert set(a) == set(b), case.case_id
            assert {k: v for k, v in a.items() if k not in measured} == \
                   {k: v for k, v in b.items() if k not in measured}, case.case_id
        if case.params.get("mode") == "traffic":
            assert [r["value"] for r in single.records] == [r["value"] for r in outcome.records]


def test_affinity_set_by_one_case_does_not_leak_into_the_next():
    """A case pins the process (placement); the next case of the batch starts with the batch's affinity."""
    cases = [Case("selftest", None, {"mode": "cpus"}), Case("selftest", None, {"mode": "pin"}),
             Case("selftest", None, {"mode": "cpus"})]
    out, _ = _run(cases)
    assert [o.status for _, o in out] == ["ok", "ok", "ok"]
    first, pinned, after = (o.records[0]["value"] for _, o in out)
    if first < 2:
        pytest.skip("this process may use one CPU: pinning cannot narrow it")
    assert pinned == 1
    assert after == first


def test_umbench_batch_markers():
    """The protocol: a start and an end marker around each case's own output, the end with its exit code; a
    failed case ends the batch (exit 3) so nothing runs after it in that process."""
    text = "selftest\t--mode\tok\nselftest\t--mode\tskip\nselftest\t--mode\tfail\nselftest\t--mode\tok\n"
    res = subprocess.run([suite.native.umbench_path(), "batch"], input=text, capture_output=True, text=True,
                         timeout=30)
    lines = res.stdout.splitlines()
    assert res.returncode == 3
    assert lines[0] == '{"type":"case","event":"start","index":0}'
    assert lines[3] == '{"type":"case","event":"end","index":0,"exit":0}'
    assert lines[-1] == '{"type":"case","event":"end","index":2,"exit":3}'
    assert not any('"index":3' in ln for ln in lines)


@pytest.mark.gpu
def test_gpu_fault_inside_a_batch_fails_only_its_case_and_the_gpu_figures_match():
    """On a GPU: an illegal-address kernel (a sticky CUDA error that breaks the context) inside a batch fails
    its case only; the GPU cases after it run in a fresh process and measure what one process per case
    measures (device-memory stream, within the larger spread of the two plus 5%)."""
    gs = Case("gpu-stream", "device", {"bytes": "256MiB", "ops": "read,triad", "reps": "10"})
    cases = [gs, Case("selftest", None, {"mode": "gpu-fault"}, timeout=60), gs, Case("selftest", None, {"mode": "pid"})]
    out, _ = _run(cases)
    assert [o.status for _, o in out] == ["ok", "failed", "ok", "ok"], [(o.status, o.reason) for _, o in out]
    single = suite.execute(gs, OPTIONS)
    assert single.status == "ok"
    for batched in (out[0][1], out[2][1]):
        for a, b in zip(single.records, batched.records):
            assert (a["op"], a["unit"]) == (b["op"], b["unit"]) and set(a) == set(b)
            tol = max(a["spread"], b["spread"]) + 0.05
            assert abs(b["median"] - a["median"]) <= tol * a["median"], (a["op"], a["median"], b["median"])


def test_the_batch_process_is_not_another_user_of_the_gpu(store_path, monkeypatch):
    """NVML lists the batch's own process (it holds its CUDA context between cases): the conditions must not
    flag a batched case as measured on a shared GPU because of it."""
    import os

    from umscope import conditions
    from umscope.store import Store

    def live_umbench():
        pids = []
        for p in os.listdir("/proc"):
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    mine = b"umbench" in f.read().split(b"\0")[0]
                with open(f"/proc/{p}/stat") as f:  # only this test's own runners, not another user's umbench
                    mine = mine and int(f.read().rsplit(")", 1)[1].split()[1]) == os.getpid()
                if mine:
                    pids.append(int(p))
            except (OSError, ValueError):
                continue
        return pids

    monkeypatch.setattr(conditions, "read", lambda device=0, bus_id=None: {"available": True, "processes": live_umbench()})
    cases = [Case("selftest", None, {"mode": "pid"}), Case("selftest", None, {"mode": "sleep", "ms": "300"})]
    s = Store(store_path)
    run_id = s.create_run("bench", "t", [], {}, {})
    assert suite.run_cases(s, run_id, cases, {"device": 0}, progress=False) == "complete"
    recs = s.records(run_id)
    assert len(recs) == 2
    for r in recs:
        cond = r["extra"]["conditions"]
        assert cond["before"]["processes"] or cond["after"]["processes"]  # NVML (faked) saw the batch process
        assert cond["flags"] == [], cond


def test_a_skipped_allocation_leaves_no_host_bytes_counted_for_the_next_case():
    """A buffer whose kind maps host pages and then skips (numa:N on a node that does not exist) throws from
    its constructor, where no destructor runs: its bytes must not stay in the batch's host total. Under a
    48 MiB host limit, two such skips (16 MiB each, counted before the skip) and then a case of two 16 MiB
    arrays: the last fits only if the skips gave their bytes back."""
    import os
    text = ("cpu-stream\t--kind\tnuma:4242\t--bytes\t16MiB\t--reps\t1\t--threads\t1\n" * 2 +
            "cpu-stream\t--kind\tsystem\t--bytes\t16MiB\t--reps\t1\t--warmup\t0\t--threads\t1\n")
    res = subprocess.run([suite.native.umbench_path(), "batch"], input=text, capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, UMSCOPE_HOST_MEM_LIMIT="48M"))
    statuses = [ln for ln in res.stdout.splitlines() if '"type":"status"' in ln]
    assert len(statuses) == 3, res.stdout + res.stderr
    assert all('"status":"skipped"' in s and "NUMA node 4242" in s for s in statuses[:2]), statuses
    assert '"status":"ok"' in statuses[2], statuses[2]
