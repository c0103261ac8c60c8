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


@pytest.mark.parametrize("flags,env,want", [
    ((), {}, "um,nvtx"),  # the default: no API-correlated records (their cost per launch or call)
    (("--kernels",), {}, "um,kernels,nvtx"),
    (("--copies",), {}, "um,copies,nvtx"),
    (("--allocations", "--copies"), {}, "um,copies,allocations,nvtx"),
    (("--keep-trace", "KEEP"), {}, "um,kernels,copies,allocations,nvtx"),  # simulate/advise replay the kernels
    (("--uvm-events",), {}, "um,allocations,nvtx"),  # the driver's events are put on allocations
    (("--counters",), {}, "um,copies,nvtx"),  # the link's bytes are compared with migrations and copies
    ((), {"UMSCOPE_UMTRACE_RECORDS": "um"}, "um"),  # the user's own choice stands
])
def test_um_trace_records_kernels_copies_allocations_only_when_asked(flags, env, want, store_path, tmp_path, monkeypatch):
    from umscope.profile import tracer
    if tracer.tracer_path() is None:
        pytest.skip("this build has no libumtrace (CUPTI): --um-trace injects nothing")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    seen = tmp_path / "env.txt"
    flags = tuple(str(tmp_path / "kept.jsonl") if f == "KEEP" else f for f in flags)
    code = f"import os; open({str(seen)!r}, 'w').write(os.environ.get('UMSCOPE_UMTRACE_RECORDS', '-'))"
    res = run_cli("profile", "--store", store_path, "--um-trace", *flags, "--json", "--", sys.executable, "-c", code)
    assert res.returncode == 0, res.stderr[-2000:]
    assert seen.read_text() == want


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
    assert tr["kernels"] == 1 and not tr["complete"] and tr["notes"] == [] and tr["gpu_work"] == ""
    assert tr["timeline"]["htod"][-1] == (0.300001, 262144)
    # A kernel CUPTI gave no times and a fault outside the allocations: said, as UVMBench's srad at 13248 x 13248
    # showed them (its kernel read before its first array, exit status 0); without allocation records, no fault
    # is called outside.
    bad = lines[:2] + ['{"k":"um","c":4,"v":1,"s":1050000000,"e":1060000000,"a":0,"f":1}',
                       '{"k":"kernel","s":0,"e":0,"n":"k"}']
    path.write_text("\n".join(bad) + "\n")
    work = parse_trace(path)["gpu_work"]
    assert work.startswith("1 of 1 kernels have no start or end time") and "faulted 1 time(s) outside" in work
    assert "0x0, 4 KiB before the allocation at 0x1000" in work
    path.write_text("\n".join(bad[:1] + bad[2:3]) + "\n")
    assert parse_trace(path)["gpu_work"] == ""
    # A trace made with UMSCOPE_UMTRACE_RECORDS leaving out kernels says so (libumtrace's note).
    note = "kernels records off (UMSCOPE_UMTRACE_RECORDS=um,copies,allocations,nvtx)"
    path.write_text("\n".join(lines[:2] + ['{"k":"note","what":"%s"}' % note]) + "\n")
    off = parse_trace(path)
    assert off["kernels"] is None and off["kernel_s"] is None and off["notes"] == [note]  # unknown, not zero
    assert all(g["kernels"] is None for g in off["by_gpu"].values())
    from umscope.report.profile import charts
    stored = lambda t: [dict(r, extra=r) for r in trace_records(t)]  # noqa: E731 (the store keeps them in extra)
    html = charts(stored(off))
    assert "kernels not recorded" in html and "None kernels" not in html
    assert "1 kernels (" in charts(stored(tr)) and "kernels not recorded" not in charts(stored(tr))
    # Copies and allocations left out (profile's default since session 21) are unknown too, and the report says
    # which option records them; the migrations themselves are still counted.
    offs = [f"{k} records off (UMSCOPE_UMTRACE_RECORDS=um,nvtx)" for k in ("kernels", "copies", "allocations")]
    path.write_text("\n".join(lines[:1] + lines[2:5] + ['{"k":"note","what":"%s"}' % n for n in offs]) + "\n")
    off = parse_trace(path)
    assert off["memcpy_bytes"] is None and off["memcpy_by_direction"] is None and off["allocations_made"] is None
    assert all(g["memcpy_bytes"] is None for g in off["by_gpu"].values()) and off["totals"]["htod"] == 262144
    html = charts(stored(off))
    assert "copies not recorded (`--copies` records them)" in html and "allocations not recorded" in html
    assert "MiB copied" in charts(stored(tr)) and "not recorded (`--copies`" not in charts(stored(tr))
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


def test_a_trace_the_program_detached_says_its_records_are_partial(tmp_path):
    """bench/overhead_ab.py --toggle tracer takes CUPTI out of the process (umtrace_detach) and puts it back:
    a trace with detaches says its records cover the attached periods only."""
    from umscope.profile.tracer import parse_trace
    lines = ['{"k":"start","t":1000000000}', '{"k":"detach","t":1100000000,"w":1,"unwritten":0}',
             '{"k":"attach","t":1200000000,"w":2,"ok":true}', '{"k":"detach","t":1300000000,"w":3,"unwritten":0}',
             '{"k":"end"}']
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert [n for n in parse_trace(path)["notes"] if "detached" in n] == [
        "the program detached the tracer 2 time(s) (umtrace_detach): its records cover the attached periods only"]
    path.write_text("\n".join(lines[:1] + lines[-1:]) + "\n")
    assert parse_trace(path)["notes"] == []


def test_empty_trace_means_no_cuda(tmp_path):
    from umscope.profile.tracer import parse_trace
    from umscope.profile.output import trace_records
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    assert parse_trace(path) == {} and trace_records({}) == []


def test_every_gpu_traced_and_labelled_by_umscopes_numbering(tmp_path):
    """Records carry CUDA ordinals; the tracer's device table (ordinal -> PCI bus id) puts them on umscope's GPU
    numbering (the order of `gpus`, NVML's bus ids), whatever order CUDA enumerates in."""
    from umscope.profile.tracer import parse_trace
    from umscope.profile.output import trace_records
    lines = [
        '{"k":"start","t":1000000000}',
        # CUDA ordinal 0 is the GPU umscope calls gpu1 (CUDA_DEVICE_ORDER=FASTEST_FIRST, or CUDA_VISIBLE_DEVICES).
        '{"k":"device","id":0,"bus":"0000:9A:00.0"}',
        '{"k":"device","id":1,"bus":"0000:1B:00.0"}',
        '{"k":"um","c":1,"v":4096,"s":1100000000,"e":1100000100,"a":0,"src":0,"dst":0,"f":2}',
        '{"k":"um","c":1,"v":8192,"s":1200000000,"e":1200000100,"a":0,"src":0,"dst":1,"f":2}',
        '{"k":"um","c":2,"v":4096,"s":1300000000,"e":1300000100,"a":0,"src":1,"dst":0,"f":2}',
        '{"k":"um","c":4,"v":3,"s":1050000000,"e":1060000000,"a":0,"src":1,"dst":0,"f":1}',
        '{"k":"um","c":5,"v":4096,"s":1070000000,"e":1070000000,"a":0,"src":3,"dst":0,"f":0}',
        # A remote map names the mapping GPU in srcId (dstId 0xffffffff: the host), as the H100's driver wrote it.
        '{"k":"um","c":7,"v":2097152,"s":1080000000,"e":1080000000,"a":0,"src":1,"dst":4294967295,"f":3}',
        '{"k":"kernel","d":1,"s":1000000000,"e":1500000000,"n":"k"}',
        '{"k":"memcpy","d":0,"b":100,"ck":1,"s":1000000000,"e":1000000001}',
        '{"k":"end","um_records":[0,2,1,0,1,2,0,1,0,0,0,0,0,0,0,0]}',
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    tr = parse_trace(path, ["00000000:1b:00.0", "00000000:9a:00.0"])
    assert tr["devices"] == {"gpu1": "0000:9A:00.0", "gpu0": "0000:1B:00.0"}
    g0, g1 = tr["by_gpu"]["gpu0"], tr["by_gpu"]["gpu1"]
    assert (g0["htod"], g0["dtoh"], g0["gpu_fault"], g0["kernels"]) == (8192, 4096, 3, 1)
    assert (g1["htod"], g1["dtoh"], g1["memcpy_bytes"], g1["kernels"]) == (4096, 0, 100, 0)
    assert g0["thrashing"] == g1["thrashing"] == 4096  # srcId 3: a mask naming both GPUs
    assert g0["remote_map"] == 2097152 and "cuda4294967295" not in tr["by_gpu"]
    assert tr["records_lost"] == 1  # the tracer wrote 7 UM records; 6 reached the file
    recs = trace_records(tr)
    series = {(r["op"], r["processor"]) for r in recs if r["unit"] == "B"}
    assert series == {("um_htod_cumulative", "gpu0"), ("um_dtoh_cumulative", "gpu0"), ("um_htod_cumulative", "gpu1")}
    assert recs[-1]["processor"] == "gpu0+gpu1"
    # Without a device table (an older trace) the CUDA ordinal is kept, labelled as such: never a guessed gpu0.
    path.write_text("\n".join(lines[:1] + lines[3:5]) + "\n")
    assert sorted(parse_trace(path, ["00000000:1b:00.0"])["by_gpu"]) == ["cuda0", "cuda1"]


def test_kinds_the_tracer_could_not_enable_are_listed(tmp_path):
    from umscope.profile.tracer import parse_trace
    lines = ['{"k":"start","t":1}',
             '{"k":"config","c":1,"dev":0,"scope":"single","ok":true,"cupti":"CUPTI_SUCCESS"}',
             '{"k":"config","c":7,"dev":0,"scope":"single","ok":false,"cupti":"CUPTI_ERROR_NOT_SUPPORTED"}',
             '{"k":"end","um_records":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}']
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    tr = parse_trace(path)
    assert tr["kinds_configured"] == ["htod"] and tr["kinds_refused"] == ["remote_map"]
    assert tr["records_lost"] == 0 and tr["complete"]


def test_report_rows_per_gpu_and_for_what_the_trace_lacks():
    from umscope.report.um_caveats import trace_rows
    ux = {"by_gpu": {"gpu0": {"htod": 2 << 20, "kernels": 2}, "gpu1": {"dtoh": 1 << 20}},
          "devices": {"gpu0": "0000:1B:00.0"}, "kinds_refused": ["remote_map"], "dropped": 3, "records_lost": 0}
    rows = {k: v for k, v, _ in trace_rows(ux)}
    assert rows["gpu0 (0000:1B:00.0)"].startswith("2.0 MiB in, 0.0 MiB out") and "gpu1" in rows
    assert rows["event kinds not enabled"] == "remote_map"
    assert rows["records missing"] == "3 dropped by CUPTI, 0 written but not read"
    assert trace_rows({"by_gpu": {"gpu0": {}}}) == []  # one GPU, nothing refused or lost: no extra rows
    rows = {k: v for k, v, _ in trace_rows({"driver_counters": {"all": {"htod": 4 << 20, "dtoh": 0}},
                                             "record_shortfall": {"htod": 0.25, "dtoh": None}})}
    assert rows["UVM driver's counters"].startswith("4.0 MiB in, 0.0 MiB out") and rows["records' share"] == "in 25.0%"


def test_report_rows_for_the_drivers_events_say_whether_they_are_complete():
    from umscope.report.um_caveats import trace_rows
    ev = {"on": True, "complete": True, "dropped": {}, "gpu_fault_entries": 3, "gpu_fault_instances": 4, "batches": 2,
          "entries_per_batch_median": 1.5, "batch_service_us_median": 2.0,
          "migrated": {"htod": {"prefetch": 2 << 20, "coherence": 1 << 20}}}
    (name, value, note), = trace_rows({"driver_events": ev})
    assert name == "UVM driver's events" and "nothing dropped" in note
    assert value == ("3 GPU fault entries (4 written by the GPU) in 2 batches (median 1.5 entries, 2 us each); "
                     "in: coherence 1.0 MiB, prefetch 2.0 MiB")
    (_, _, note), = trace_rows({"driver_events": dict(ev, complete=False, dropped={"gpu_fault": 7})})
    assert "INCOMPLETE (7 gpu_fault events dropped)" in note and "lower bounds" in note
    (_, value, note), = trace_rows({"driver_events": {"on": False, "why": "open /dev/nvidia-uvm-tools: denied"}})
    assert value == "not read" and note.endswith("open /dev/nvidia-uvm-tools: denied")


def test_the_drivers_own_counters_beside_cuptis_records(tmp_path):
    """The UVM driver's counters (lossless totals read at exit) are kept beside the records' totals, and the share
    of the driver's bytes the records carry is stated, so a total short of events is never shown as complete."""
    from umscope.profile.tracer import parse_trace
    from umscope.profile.output import trace_records
    lines = ['{"k":"start","t":1000000000}',
             '{"k":"device","id":0,"bus":"0000:1B:00.0"}',
             '{"k":"um","c":1,"v":262144,"s":1100000000,"e":1100000100,"a":0,"src":0,"dst":0,"f":2}',
             '{"k":"um","c":2,"v":1048576,"s":1200000000,"e":1200000100,"a":0,"src":0,"dst":0,"f":2}',
             '{"k":"uvm_counters","dev":-1,"htod":1048576,"dtoh":1048576,"cpu_faults":9,"prefetch_htod":0,'
             '"prefetch_dtoh":0,"gpu_faults":4}',
             '{"k":"uvm_counters","dev":0,"htod":1048576,"dtoh":1048576,"cpu_faults":0,"prefetch_htod":0,'
             '"prefetch_dtoh":0,"gpu_faults":4}',
             '{"k":"end"}']
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    tr = parse_trace(path, ["00000000:1b:00.0"])
    assert tr["driver_counters"]["all"]["htod"] == 1048576 and tr["driver_counters"]["gpu0"]["gpu_faults"] == 4
    um = trace_records(tr)[-1]
    assert um["record_shortfall"] == {"htod": 0.25, "dtoh": 1.0}  # the records carry a quarter of the bytes in
    assert um["driver_counters"]["all"]["cpu_faults"] == 9


def test_every_process_of_the_program_is_read_and_labelled_by_its_own_devices(tmp_path):
    """A program whose processes each start CUDA (MPI ranks, spawned workers): the first writes the trace file,
    every later one FILE.PID beside it. All are read; each process's ordinals go through its own device table
    (here each rank sees one GPU as CUDA device 0); the driver's counters are summed; the trace is complete only
    when every process ended."""
    from umscope.profile.tracer import parse_trace, trace_files
    main = tmp_path / "t.jsonl"
    main.write_text("\n".join([
        '{"k":"start","pid":10,"t":1000000000}', '{"k":"device","id":0,"bus":"0000:1B:00.0"}',
        '{"k":"um","c":1,"v":4096,"s":1100000000,"e":1100000100,"a":0,"src":0,"dst":0,"f":2}',
        '{"k":"marker","fl":2,"t":1100000000,"id":1,"n":"rank0"}', '{"k":"marker","fl":4,"t":1200000000,"id":1}',
        '{"k":"uvm_counters","dev":-1,"htod":4096,"dtoh":0,"cpu_faults":1,"gpu_faults":2}', '{"k":"end"}']) + "\n")
    other = tmp_path / "t.jsonl.11"
    other.write_text("\n".join([
        '{"k":"start","pid":11,"t":1000000500}', '{"k":"device","id":0,"bus":"0000:9A:00.0"}',
        '{"k":"um","c":1,"v":8192,"s":1100000000,"e":1100000100,"a":0,"src":0,"dst":0,"f":2}',
        '{"k":"marker","fl":2,"t":1150000000,"id":1,"n":"rank1"}',
        '{"k":"uvm_counters","dev":-1,"htod":8192,"dtoh":0,"cpu_faults":0,"gpu_faults":3}']) + "\n")
    (tmp_path / "t.jsonl.html").write_text("not a trace")
    assert trace_files(main) == [str(main), str(other)]
    tr = parse_trace(main, ["00000000:1b:00.0", "00000000:9a:00.0"])
    assert tr["processes"] == 2 and not tr["complete"]  # the second process never reached its end
    assert tr["by_gpu"]["gpu0"]["htod"] == 4096 and tr["by_gpu"]["gpu1"]["htod"] == 8192
    assert tr["driver_counters"]["all"] == {"htod": 12288, "dtoh": 0, "cpu_faults": 1, "gpu_faults": 5,
                                            "prefetch_htod": 0, "prefetch_dtoh": 0}
    assert [r[0] for r in tr["ranges"]] == ["rank0", "rank1"] and tr["ranges"][1][2] is None  # ids per process


def test_time_ticks_of_a_short_burst_stay_distinct():
    import re
    from umscope.report.profile import _secs
    from umscope.report.svg import line_chart
    svg = line_chart([("in", [(0.4727, 0.0), (0.4743, 512.0)])], "t", "s", "MiB", x_log=False, x_fmt=_secs)
    ticks = re.findall(r'text-anchor="middle">([^<]+)</text>', svg)
    assert len(ticks) >= 3 and len(set(ticks)) == len(ticks), ticks
