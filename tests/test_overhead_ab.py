"""bench/overhead_ab.py (issue 34) without a GPU: its confidence interval for the median ratio, the verdict it
draws from it, the sampler child it drives, the route's pause it uses, and its refusals."""
import math
import sys

from conftest import bench_module

ab = bench_module("overhead_ab")


def test_the_interval_is_the_order_statistics_the_binomial_allows():
    xs = [1.0 + i / 100 for i in range(12)]  # 1.00 .. 1.11, given in reverse: the order must not matter
    med, ci = ab.median_ci(list(reversed(xs)))
    assert med == (1.05 + 1.06) / 2
    # n = 12: P(B < 3) = 79/4096 = 0.019 <= 0.025 < P(B < 4) = 299/4096: the 3rd and 10th values
    assert ci == (1.02, 1.09)
    assert sum(math.comb(12, k) for k in range(3)) / 4096 <= 0.025 < sum(math.comb(12, k) for k in range(4)) / 4096
    assert ab.median_ci([1.0] * 5)[1] is None  # 5 pairs: even x(1)..x(5) covers the median with 94% only
    assert ab.median_ci([1.0, 2, 3, 4, 5, 6])[1] == (1.0, 6)


def test_the_verdict_needs_the_whole_interval_on_one_side_of_the_target():
    assert ab.verdict((0.97, 1.02), 1.02) is True
    assert ab.verdict((1.021, 1.2), 1.02) is False
    assert ab.verdict((0.99, 1.03), 1.02) is None
    assert ab.verdict((0.99, 1.03), 1.03) is True
    assert ab.verdict(None, 1.02) is None


def test_the_sampler_child_samples_only_while_on_and_ends_with_its_parent(monkeypatch):
    """The child runs the profiler's own Sampler (no GPU here: NVML's queries answer None) and exits when the pipe
    closes, so it never outlives the benchmark."""
    t = ab.SamplerToggle(period=0.01)
    try:
        assert t.run(True, lambda: 7) == 7
        assert t.run(False, lambda: 8) == 8
    finally:
        t.close()
    assert t.proc.returncode == 0


def test_bad_arguments_and_a_process_without_the_part_are_refused_with_exit_2(capsys, monkeypatch):
    assert ab.main(["--work", "bert"]) == 2
    assert "unknown work bert" in capsys.readouterr().err
    assert ab.main(["--toggle", "nvml"]) == 2
    assert "unknown --toggle nvml" in capsys.readouterr().err
    assert ab.main(["--pairs", "5"]) == 2
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert ab.main(["--work", "train,ddp"]) == 2  # not a rank torchrun started: no process group to train in
    assert "--work ddp runs on the ranks torchrun starts: torchrun --standalone" in capsys.readouterr().err
    monkeypatch.delitem(sys.modules, "umscope_torch_route", raising=False)  # test_place_route's fake install
    assert ab.main([]) == 2  # not under umscope place: nothing imported umscope_torch_route
    assert "umscope place --kind device" in capsys.readouterr().err
    assert ab.main(["--toggle", "trace"]) == 2
    assert "unknown --toggle trace (route, sampler, tracer)" in capsys.readouterr().err
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)
    assert ab.main(["--toggle", "tracer"]) == 2  # not under profile --um-trace: no tracer to detach
    assert "umscope profile --um-trace -- python3 bench/overhead_ab.py --toggle tracer" in capsys.readouterr().err


def test_every_work_is_documented_and_accepted():
    doc = ab.__doc__.split("Work (")[1].split("\n\n")[0]
    listed = {ln.split()[0] for ln in doc.splitlines()[1:] if ln.startswith("  ") and not ln.startswith("    ")}
    assert listed == set(ab.WORKS) and {"graph", "ddp"} <= listed


def test_the_tracer_toggle_switches_only_where_the_state_changes_and_stops_on_a_refusal(monkeypatch):
    """Off: libumtrace detached before the work; two halves in the same state need no switch between them (pairs
    alternate their order, so a pair costs one switch); close leaves it attached. A detach or attach that did not
    happen stops the measurement rather than timing a half in the wrong state."""
    import types
    calls = []
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(
        cuda=types.SimpleNamespace(synchronize=lambda: calls.append("sync"))))

    class Lib:
        detach_rc, attach_rc = 1, 1

        def umtrace_detach(self):
            calls.append("detach")
            return self.detach_rc

        def umtrace_attach(self):
            calls.append("attach")
            return self.attach_rc

    lib = Lib()
    t = ab.TracerToggle(lib)
    assert t.run(True, lambda: 1) == 1 and calls == []
    assert t.run(False, lambda: calls.append("work") or 2) == 2
    assert calls == ["sync", "detach", "work"] and t.detaches == 1
    t.run(False, lambda: calls.append("work"))
    assert calls == ["sync", "detach", "work", "work"] and t.detaches == 1
    t.run(True, lambda: calls.append("work"))
    assert calls[4:] == ["sync", "attach", "work"] and t.detaches == 1
    t.close()
    assert calls[7:] == []  # attached already
    t.run(False, lambda: None)
    calls.clear()
    t.close()
    assert calls == ["sync", "attach"] and t.attached
    lib.detach_rc = -3
    calls.clear()
    import pytest
    with pytest.raises(RuntimeError, match="umtrace_detach returned -3 .*NVTX calls are handed to CUPTI"):
        t.run(False, lambda: calls.append("work"))
    assert "work" not in calls
    lib.detach_rc, lib.attach_rc = 1, -2
    t = ab.TracerToggle(lib)
    t.run(False, lambda: 3)
    with pytest.raises(RuntimeError, match="umtrace_attach returned -2"):
        t.run(True, lambda: 3)


def test_the_route_toggle_pauses_the_route_around_the_work_without_holding_its_lock():
    calls = []

    class Route:
        def pause(self):
            calls.append("pause")

        def resume(self):
            calls.append("resume")

    t = ab.RouteToggle(Route())
    assert t.run(True, lambda: 1) == 1 and calls == []
    assert t.run(False, lambda: calls.append("work") or 2) == 2
    assert calls == ["pause", "work", "resume"]


def test_a_long_measurement_hands_over_its_pairs_so_far_marked_partial(monkeypatch):
    clock = iter(range(1, 1000))
    host = lambda t: {"thread_cpu_s": t}  # noqa: E731
    monkeypatch.setattr(ab, "time_it", lambda fn: (lambda t: (t * 1e-3, fn(), host(t)))(next(clock)))

    class Toggle:
        on_name, off_name = "on", "off"

        def run(self, on, fn):
            return fn()

    seen = []
    rec = ab.measure(Toggle(), "w", lambda: [1, 2], 1, "ms/x", 25, 1.02, progress=seen.append, every=10)
    assert [(p["pairs"], p["partial"]) for p in seen] == [(10, True), (20, True)]
    assert seen[0]["times_on"] == rec["times_on"][:10] and seen[0]["ratio_ci95"] is not None
    assert rec["pairs"] == 25 and "partial" not in rec and rec["outputs_equal"] is True
    # alternating order: pair 0 runs on first, pair 1 off first
    assert rec["times_on"][:2] == [3.0, 6.0] and rec["times_off"][:2] == [4.0, 5.0]
    # each half's host figures ride with its arm, and the thread's CPU ratio is taken pair by pair
    assert [h["thread_cpu_s"] for h in rec["host_on"][:2]] == [3, 6] and rec["host_off"][1] == {"thread_cpu_s": 5}
    assert rec["cpu_ratio_median"] == ab.median_ci([x / y for x, y in zip(rec["times_on"], rec["times_off"])])[0]


def test_the_host_figures_of_a_half_come_from_the_thread_the_process_and_proc_stat():
    """host_spent over real work: this thread's CPU time grows with a busy loop (up to 0.15 s of it; the process's
    counts it too), the CPUs' busy count is a share of the machine, and an idle wait adds no thread CPU time."""
    a = ab.host_now()
    c0, t0 = ab.time.thread_time(), ab.time.perf_counter()
    while ab.time.thread_time() - c0 < 0.15 and ab.time.perf_counter() - t0 < 10:  # a busy host gives it less
        pass
    b = ab.host_now()
    busy = ab.host_spent(a, b)
    assert 0.15 <= busy["thread_cpu_s"] <= busy["proc_cpu_s"] + 1e-3 and busy["steal_s"] >= 0
    assert busy["busy_cpus"] is None or 0 <= busy["busy_cpus"] <= ab.os.cpu_count() + 1e-9
    ab.time.sleep(0.2)
    idle = ab.host_spent(b, ab.host_now())
    assert idle["thread_cpu_s"] < 0.05 and idle["nivcsw"] >= 0


def test_the_tracer_toggle_reads_its_detach_steps_from_the_trace(tmp_path):
    """The toggle's own cost (outside the halves) comes with the steps libumtrace timed, read from its trace."""
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join([
        '{"k":"start","t":1}',
        '{"k":"phase","what":"detach: buffers written","dev":-1,"w0":0,"w1":2000000000}',
        '{"k":"detach","t":2,"w":2,"unwritten":3}',
        '{"k":"phase","what":"detach","dev":-1,"w0":0,"w1":2100000000}',
        '{"k":"phase","what":"attach","dev":-1,"w0":0,"w1":10000000}',
        '{"k":"phase","what":"detach: buffers written","dev":-1,"w0":0,"w1":4000000}',
        '{"k":"detach","t":3,"w":3,"unwritten":0}',
        '{"k":"phase","what":"detach","dev":-1,"w0":0,"w1":"cut', ]) + "\n")
    got = ab.trace_detach_phases(str(trace))
    assert got == {"phases_s": {"detach: buffers written": 1.002, "detach": 2.1, "attach": 0.01}, "unwritten_max": 3}
    assert ab.trace_detach_phases(str(tmp_path / "none")) == {} and ab.trace_detach_phases(None) == {}


def test_main_saves_each_work_and_its_partial_pairs_with_the_toggles_own_cost(tmp_path, monkeypatch):
    """The whole of main with a stand-in toggle and work: the saved records (partial every 10 pairs, then the
    whole) carry the toggle's name and its own cost side by side (session 20: a clash of the two keys stopped a
    device run at its first partial save)."""
    import json
    import types
    fake_torch = types.SimpleNamespace(__version__="0", cuda=types.SimpleNamespace(
        get_device_name=lambda: "gpu", empty_cache=lambda: None, synchronize=lambda: None))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(ab, "time_it", lambda fn: (0.01, fn(), {"thread_cpu_s": 0.01}))

    class Toggle:
        on_name, off_name = "attached", "detached"

        def run(self, on, fn):
            return fn()

        def about(self):
            return {"detach_s": 0.5}

        def close(self):
            pass

    saved = []
    real_save = ab.save
    monkeypatch.setattr(ab, "save", lambda out, toggle, records: (saved.append(json.loads(json.dumps(records))),
                                                                   real_save(out, toggle, records)))
    monkeypatch.setattr(ab, "make_toggle", lambda which: (Toggle(), None))
    monkeypatch.setattr(ab, "WORKS", {"llama": lambda a: (lambda: [1], 1, "ms/token")})
    assert ab.main(["--toggle", "tracer", "--work", "llama", "--pairs", "12", "--out", str(tmp_path)]) == 0
    assert [(r[-1]["pairs"], r[-1].get("partial")) for r in saved] == [(10, True), (12, None)]
    last = json.loads((tmp_path / "overhead_ab-tracer.json").read_text())[-1]
    assert last["toggle"] == "tracer" and last["toggle_cost"] == {"detach_s": 0.5} and saved[0][-1]["toggle_cost"]


def test_a_rank_other_than_0_measures_on_its_own_gpu_and_neither_prints_nor_writes(tmp_path, monkeypatch, capsys):
    """Under torchrun every rank runs the same pairs (the ranks' steps wait on each other's gradients); rank 0 alone
    reports, and each rank takes its GPU (LOCAL_RANK) before CUDA starts."""
    import types
    devices = []
    fake_torch = types.SimpleNamespace(__version__="0", cuda=types.SimpleNamespace(
        get_device_name=lambda: "gpu", empty_cache=lambda: None, synchronize=lambda: None,
        set_device=devices.append))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(ab, "time_it", lambda fn: (0.01, fn(), {"thread_cpu_s": 0.01}))
    ran = []

    class Toggle:
        on_name, off_name = "routed", "paused"

        def run(self, on, fn):
            ran.append(on)
            return fn()

        def close(self):
            pass

    monkeypatch.setattr(ab, "make_toggle", lambda which: (Toggle(), None))
    monkeypatch.setattr(ab, "WORKS", {"ddp": lambda a: (lambda: None, 1, "ms/step")})
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("RANK", "1")
    assert ab.main(["--work", "ddp", "--pairs", "6", "--out", str(tmp_path)]) == 0
    assert devices == [1] and len(ran) == 2 + 12  # the warm-ups and 6 pairs, as rank 0 runs them
    assert capsys.readouterr().out == "" and list(tmp_path.iterdir()) == []
    monkeypatch.setenv("RANK", "0")
    assert ab.main(["--work", "ddp", "--pairs", "6", "--out", str(tmp_path)]) == 0
    assert "RESULT " in capsys.readouterr().out and (tmp_path / "overhead_ab-route.json").exists()
