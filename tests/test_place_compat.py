"""bench/place_compat.py's plan and table (issue 34), without a GPU: the runs' order, how several runs of a
program are combined, and what a run the budget stopped is called."""
import json

from conftest import bench_module

pc = bench_module("place_compat")


def _run(prog, variant, time, proc=0, equal=True, check="tokens identical", spread=0.05, status="ok"):
    return {"program": prog, "variant": variant, "process": proc, "status": status, "unit": "ms/token",
            "time": time, "spread": spread, "equal": equal if variant != "plain" else True,
            "check": check if variant != "plain" else "the reference", "max_memory_allocated_equal": True}


def test_plain_and_placed_processes_alternate_round_by_round_and_untargeted_variants_come_last():
    order = pc.plan(["gpt2", "ddp"], ["plain", "device", "profile", "managed"], 2)
    assert order[:6] == [("gpt2", "plain", 0), ("gpt2", "device", 0), ("gpt2", "profile", 0),
                         ("ddp", "plain", 0), ("ddp", "device", 0), ("ddp", "profile", 0)]
    # each later round starts one variant further along: no variant always runs right after the plain run
    assert order[6:12] == [(p, v, 1) for p in ("gpt2", "ddp") for v in ("device", "profile", "plain")]
    assert [v for p, v, i in pc.plan(["gpt2"], ["plain", "device", "profile"], 3)] == \
        ["plain", "device", "profile", "device", "profile", "plain", "profile", "plain", "device"]
    assert order[12:] == [("gpt2", "managed", 0), ("ddp", "managed", 0)]
    assert pc.plan(["gpt2"], ["plain", "device"], 1) == [("gpt2", "plain", 0), ("gpt2", "device", 0)]


def test_several_runs_compare_the_median_of_their_medians_and_show_their_range():
    rows = [_run("gpt2", "plain", 10.0, 0), _run("gpt2", "device", 13.0, 0),
            _run("gpt2", "plain", 12.0, 1), _run("gpt2", "device", 10.5, 1),
            _run("gpt2", "plain", 11.0, 2), _run("gpt2", "device", 11.1, 2)]
    table = {t["variant"]: t for t in pc.aggregate(rows)}
    dev = table["device"]
    assert dev["processes"] == 3 and dev["plain_processes"] == 3
    assert dev["time"] == 11.1 and dev["plain_time"] == 11.0
    assert abs(dev["ratio"] - 11.1 / 11.0) < 1e-12
    assert abs(dev["spread"] - (13.0 - 10.5) / 11.1) < 1e-12
    assert abs(dev["plain_spread"] - 2.0 / 11.0) < 1e-12
    # 1.009 <= 1.02, but the processes spread 18-23%: the ratio decides nothing either way
    assert dev["meets_target"] is None and abs(dev["noise"] - 2.5 / 11.1) < 1e-12
    # one slow process: 1.3 over a 5% spread is a miss beyond the scatter
    one = {t["variant"]: t for t in pc.aggregate(rows[:2])}["device"]
    assert one["meets_target"] is False and one["spread"] == 0.05


def test_a_ratio_decides_only_beyond_the_runs_own_spread(tmp_path):
    assert pc.verdict(1.000, 1.02, 0.001, 0.003) == {"noise": 0.003, "meets_target": True}  # cuda-graph, s15
    assert pc.verdict(1.019, 1.02, 0.02, 0.01)["meets_target"] is True
    assert pc.verdict(0.954, 1.02, 0.142, 0.137)["meets_target"] is None  # gpt2 generation, s16: not "met"
    assert pc.verdict(1.034, 1.02, 0.559, 0.162)["meets_target"] is None  # training, s16: not "MISSED"
    assert pc.verdict(50.6, 1.02, 0.001, 0.1)["meets_target"] is False    # pinned cuda-graph: missed for sure
    assert pc.verdict(1.0, 1.02, None, None) == {"noise": None, "meets_target": None}
    rows = [_run("gpt2", "plain", 10.0, spread=0.001), _run("gpt2", "device", 10.05, spread=0.002),
            _run("llama", "plain", 10.0, spread=0.2), _run("llama", "device", 10.3, spread=0.1)]
    pc.write(tmp_path, {"torch": "t", "transformers": "x", "gpu": "H200"}, rows, [], 1.0, 1)
    md = (tmp_path / "place_compat.md").read_text()
    assert "| gpt2 | device |" in md and "<= 1.02 met" in md
    assert "<= 1.02 not decided: spread 20.0% > the 2% margin" in md
    assert "time targets missed 0, not decided 1" in md


def test_a_changed_output_in_any_run_marks_the_row_and_a_budget_stop_is_not_a_crash(tmp_path):
    rows = [_run("llama", "plain", 10.0), _run("llama", "device", 10.1),
            _run("llama", "device", 10.0, 1, equal=False, check="tokens differ from position 3"),
            {"program": "compiled", "variant": "plain", "process": 0, "status":
             "not finished: the 235 s budget ended it after 25 s"}]
    table = pc.aggregate(rows)
    dev = [t for t in table if t.get("variant") == "device"][0]
    assert dev["equal"] is False and dev["status"] == "CHANGED" and "position 3" in dev["check"]
    meta = {"torch": "t", "transformers": "x", "gpu": "H100"}
    rows[2]["status"] = "CHANGED"
    crashes, changed = pc.write(tmp_path, meta, rows, [], 10.0, 1)
    assert (crashes, changed) == (0, 1)
    md = (tmp_path / "place_compat.md").read_text()
    assert "not finished: the 235 s budget" in md and "NO: tokens differ from position 3" in md
    assert json.loads((tmp_path / "place_compat.json").read_text())["table"][1]["processes"] == 2


def test_the_tracer_without_kernel_records_is_the_profile_command_with_libumtrace_told_so():
    for v in ("profile-nokernels", "profile-um", "profile-none", "profile-nocopies", "profile-noallocations"):
        assert pc.umscope_argv(v, "s", "r") == pc.umscope_argv("profile", "s", "r")
        assert pc.VARIANTS[v][1] == pc.VARIANTS["profile"][1]  # held to the same target
    # The tracer's kernel records are asked for by profile's own option, not by the environment.
    with_kernels = pc.umscope_argv("profile-kernels", "s", "r")
    assert "--kernels" in with_kernels and [a for a in with_kernels if a != "--kernels"] == \
        pc.umscope_argv("profile", "s", "r")
    assert "profile-kernels" not in pc.VARIANT_ENV
    kinds = {v: set(e["UMSCOPE_UMTRACE_RECORDS"].split(",")) for v, e in pc.VARIANT_ENV.items()}
    assert kinds == {"profile-nokernels": {"um", "copies", "allocations", "nvtx"}, "profile-um": {"um"},
                     "profile-none": {"none"}, "profile-nocopies": {"um", "allocations", "nvtx"},
                     "profile-noallocations": {"um", "copies", "nvtx"}}


def test_the_gpus_counted_are_those_cuda_visible_devices_leaves(monkeypatch):
    class Res:
        returncode, stdout = 0, "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})\n" for i in range(4))
    monkeypatch.setattr(pc.subprocess, "run", lambda *a, **k: Res)
    assert len(pc.gpus({})) == 4
    assert pc.gpus({"CUDA_VISIBLE_DEVICES": "2"}) == ["NVIDIA H100 80GB HBM3"]  # no 2-GPU program then
    assert len(pc.gpus({"CUDA_VISIBLE_DEVICES": "2,3"})) == 2 and pc.gpus({"CUDA_VISIBLE_DEVICES": ""}) == []


def test_concurrent_rounds_rotate_the_gpus_and_give_each_process_its_own_cores():
    slots = pc.slots_for(["plain", "device", "profile"])
    assert slots == ["plain", "device", "profile", "plain-again"]
    cpus = list(range(64))
    r0 = pc.round_layout(slots, 0, 4, cpus)
    assert [(v, g) for v, g, _ in r0] == [("plain", 0), ("device", 1), ("profile", 2), ("plain-again", 3)]
    assert r0[1][2] == list(range(16, 32))
    r1 = pc.round_layout(slots, 1, 4, cpus)
    assert [g for _, g, _ in r1] == [1, 2, 3, 0]
    # over 4 rounds every variant has been on every GPU once
    assert all(sorted(pc.round_layout(slots, r, 4, cpus)[i][1] for r in range(4)) == [0, 1, 2, 3] for i in range(4))
    try:
        pc.round_layout(slots, 0, 2, cpus)
    except ValueError as e:
        assert "4 GPUs" in str(e)
    else:
        raise AssertionError("4 processes on 2 GPUs must be refused")


def test_concurrent_times_are_taken_over_the_window_every_process_was_timing():
    # plain timed from t=10 to 19, device from 14 to 23: the common window is [14, 19]
    plain = {"times_ms": [100.0] * 4 + [10.0] * 6, "ends_s": list(range(10, 20))}
    dev = {"times_ms": [11.0] * 6 + [500.0] * 4, "ends_s": list(range(14, 24))}
    wm = pc.window_median({"plain": plain, "device": dev})
    assert wm["plain"] == (10.0, 6, 10)  # its slow first steps fell before the device run was timing
    assert wm["device"] == (11.0, 6, 10)
    # fewer than 3 steps inside: the whole run's median, and the count says so
    late = {"times_ms": [7.0, 9.0, 8.0], "ends_s": [18.5, 30, 31]}
    wm = pc.window_median({"plain": plain, "late": late})
    assert wm["late"] == (8.0, 1, 3)


def test_concurrent_rows_decide_by_the_rounds_interval_and_report_the_control():
    rows = []
    for i, (d, c) in enumerate([(1.00, 0.99), (1.01, 1.01), (0.99, 1.00), (1.005, 0.995), (1.01, 1.02),
                                (1.00, 0.98)]):
        for v, x in (("device", d), ("plain-again", c)):
            rows.append({"program": "llama", "variant": v, "process": i, "unit": "ms/token", "ratio": x,
                         "window_time": 10 * x, "plain_window_time": 10.0, "in_window": 20, "steps": 24,
                         "equal": True, "status": "ok"})
    t = {r["variant"]: r for r in pc.concurrent_table(rows, {"device": 1.02, "plain-again": None})}
    assert t["device"]["ratio_ci95"] == (0.99, 1.01) and t["device"]["meets_target"] is True
    assert t["plain-again"]["contains_1"] is True and t["plain-again"]["meets_target"] is None
    rows[0]["ratio"] = 1.05  # one round over the target: 6 rounds' interval is their whole range
    t = {r["variant"]: r for r in pc.concurrent_table(rows, {"device": 1.02})}
    assert t["device"]["meets_target"] is None
    text, crashes, changed = pc.concurrent_text({"torch": "2", "transformers": "5", "gpus": 4, "gpu": "H200"},
                                                pc.concurrent_table(rows, {"device": 1.02}), rows, 100)
    assert "| llama | device | 6 |" in text and "not decided" in text and "crashes 0, changed outputs 0" in text
