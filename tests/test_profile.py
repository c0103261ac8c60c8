"""umscope profile on CPU programs: pass-through, process tree, bad input, overhead."""
import json
import sqlite3
import sys

import pytest

from conftest import run_cli
from umscope.errors import UsageError
from umscope.profile.sampler import parse_period, process_tree

ALLOC = ("import time\nbufs = []\nfor k in range({n}):\n    a = bytearray(50 << 20)\n"
         "    for i in range(0, len(a), 4096): a[i] = 1\n    bufs.append(a); time.sleep({pause})\nprint('child out')\n")


def _records(res):
    return {r["op"]: r for r in json.loads(res.stdout.strip().splitlines()[-1])}


def test_memory_of_a_program_is_sampled_and_its_output_passes_through(store_path):
    res = run_cli("profile", "--store", store_path, "--period", "50ms", "--json", "--", sys.executable, "-c",
                  ALLOC.format(n=4, pause=0.15))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("child out")
    recs = _records(res)
    rss = recs["rss"]
    assert rss["unit"] == "bytes" and rss["max"] >= 200 << 20 and rss["n"] >= 5
    assert rss["samples"][0] < rss["max"]  # it grew while we watched
    assert recs["run"]["exit_status"] == 0 and recs["run"]["samples_taken"] == rss["n"]
    db = sqlite3.connect(store_path)
    assert db.execute("SELECT kind, status FROM runs").fetchall() == [("profile", "complete")]


def test_grandchildren_are_counted(store_path):
    inner = f"{sys.executable} -c \"{ALLOC.format(n=3, pause=0.2)}\""
    res = run_cli("profile", "--store", store_path, "--period", "50ms", "--json", "--", "sh", "-c", inner)
    assert res.returncode == 0, res.stderr
    assert _records(res)["rss"]["max"] >= 150 << 20


def test_exit_status_and_signal_pass_through_and_samples_are_kept(store_path):
    res = run_cli("profile", "--store", store_path, "--json", "--", "sh", "-c", "exit 3")
    assert res.returncode == 3 and _records(res)["run"]["exit_status"] == 3
    res = run_cli("profile", "--store", store_path, "--json", "--", "sh", "-c", "sleep 0.3; kill -SEGV $$")
    assert res.returncode == 139
    run = _records(res)["run"]
    assert run["signal"] == "SIGSEGV" and run["samples_taken"] >= 1
    db = sqlite3.connect(store_path)
    reasons = [r[0] for r in db.execute("SELECT reason FROM cases ORDER BY rowid")]
    assert reasons == ["the program exited with status 3", "the program was killed by SIGSEGV"]


@pytest.mark.parametrize("args,needle", [(["--", "no-such-program-xyz"], "command not found: no-such-program-xyz"),
                                         (["--period", "0", "--", "true"], "longer than 0"),
                                         (["--period", "fast", "--", "true"], "duration"),
                                         ([], "needs a command")])
def test_bad_input(args, needle, store_path):
    res = run_cli("profile", "--store", store_path, *args)
    assert res.returncode == 2 and needle in res.stderr, res.stderr


def test_sampler_overhead_is_measured_and_under_one_percent(store_path):
    res = run_cli("profile", "--store", store_path, "--period", "100ms", "--json", "--", sys.executable, "-c",
                  "import time; time.sleep(2.0)")
    run = _records(res)["run"]
    assert run["samples_taken"] >= 15
    assert 0 < run["sampler_overhead"] < 0.01


def test_um_trace_unavailable_is_said_and_profiling_goes_on(store_path):
    res = run_cli("profile", "--store", store_path, "--um-trace", "--json", "--", "true")
    assert res.returncode == 0
    # Without CUPTI in the build it says so; with it, `true` uses no CUDA and wrote no trace: it says that.
    notes = " ".join(_records(res)["run"]["notes"])
    assert "--um-trace:" in notes and ("without CUPTI" in notes or "no trace" in notes) and "note:" in res.stderr


def test_parse_period_and_tree():
    assert parse_period("100ms") == pytest.approx(0.1) and parse_period("2s") == 2.0 and parse_period("0.5") == 0.5
    for bad in ("0", "-1s", "abc", "0.0001"):
        with pytest.raises(UsageError):
            parse_period(bad)
    import os
    assert os.getpid() in process_tree(os.getpid())


def test_trace_parsing_and_analyses(tmp_path):
    from umscope.profile.tracer import parse_trace
    from umscope.profile.output import trace_records
    lines = [
        '{"k":"start","t":1000000000}',
        '{"k":"mem","op":1,"mk":3,"a":4096,"b":1048576,"t":1000000001}',
        # Two on-demand migrations into the allocation (cause 2: coherence), one prefetch, one eviction.
        '{"k":"um","c":1,"v":65536,"s":1100000000,"e":1100001000,"a":4096,"src":0,"dst":1,"f":2}',
        '{"k":"um","c":1,"v":65536,"s":1200000000,"e":1200001000,"a":8192,"src":0,"dst":1,"f":2}',
        '{"k":"um","c":1,"v":131072,"s":1300000000,"e":1300001000,"a":16384,"src":0,"dst":1,"f":3}',
        '{"k":"um","c":2,"v":65536,"s":1400000000,"e":1400001000,"a":4096,"src":1,"dst":0,"f":4}',
        '{"k":"um","c":4,"v":6,"s":1050000000,"e":1060000000,"a":4096,"src":0,"dst":0,"f":2}',
        '{"k":"kernel","s":1000000100,"e":1500000100,"n":"k"}',
        '{"k":"um","c":1,"v":1,"s"',  # cut by a crash
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    tr = parse_trace(path)
    assert tr["totals"]["htod"] == 262144 and tr["totals"]["dtoh"] == 65536 and tr["totals"]["gpu_fault"] == 6
    assert tr["by_cause"]["htod"] == {"coherence": 131072, "prefetch": 131072}
    assert tr["faults_by_access"] == {"write": 6}
    assert tr["faults_per_migration"] == 2.0  # 6 faults over 3 host-to-device transfers
    assert tr["eviction_to_migration"] == 0.25
    (a,) = tr["allocations"]
    assert {k: a[k] for k in ("address", "bytes", "htod", "dtoh")} == {"address": 4096, "bytes": 1048576,
                                                                       "htod": 262144, "dtoh": 65536}
    # The allocation's own timeline: cumulative in and out at each of its four events.
    assert a["t"] == [0.100001, 0.200001, 0.300001, 0.400001]
    assert a["in"] == [65536, 131072, 262144, 262144] and a["out"] == [0, 0, 0, 65536]
    assert tr["kernels"] == 1 and not tr["complete"]
    assert tr["timeline"]["htod"][-1] == (0.300001, 262144)
    recs = trace_records(tr)
    assert [r["op"] for r in recs] == ["um_htod_cumulative", "um_dtoh_cumulative", "um_trace"]
    assert recs[-1]["allocation_timelines"][0]["in"][-1] == 262144


def test_nvtx_ranges_and_the_program_clock(tmp_path):
    from umscope.profile.tracer import parse_trace, shift_trace
    from umscope.profile.output import trace_records
    lines = [
        '{"k":"start","t":1000000000,"w":1700000000500000000}',
        '{"k":"marker","fl":2,"t":1100000000,"id":7,"n":"init"}',
        '{"k":"marker","fl":4,"t":1300000000,"id":7,"n":null}',
        '{"k":"marker","fl":2,"t":1300000000,"id":8,"n":"compute"}',
        '{"k":"marker","fl":1,"t":1400000000,"id":9,"n":"checkpoint"}',
        '{"k":"um","c":1,"v":4096,"s":1350000000,"e":1350000000,"a":0,"src":0,"dst":1,"f":1}',
        '{"k":"end"}',
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    tr = parse_trace(path)
    assert tr["ranges"] == [("init", 0.1, 0.3), ("compute", 0.3, None)]  # compute never closed
    assert tr["instants"] == [("checkpoint", 0.4)]
    # The program started 0.25 s before the tracer: every time moves by +0.25.
    shift_trace(tr, tr["wall_start"] / 1e9 - 1700000000.25)
    assert tr["ranges"][0] == ("init", 0.35, 0.55) and tr["timeline"]["htod"] == [(0.6, 4096)]
    um = trace_records(tr)[-1]
    assert um["clock"] == "program" and um["ranges"][1][0] == "compute"


def test_empty_trace_means_no_cuda(tmp_path):
    from umscope.profile.tracer import parse_trace
    from umscope.profile.output import trace_records
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    assert parse_trace(path) == {} and trace_records({}) == []
