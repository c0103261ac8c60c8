"""bench/overhead_ab.py (issue 34) without a GPU: its confidence interval for the median ratio, the verdict it
draws from it, the CUPTI kinds it pauses, the sampler child it drives, and its refusals."""
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


def test_the_trace_toggle_pauses_the_kinds_profile_enabled_and_nothing_else():
    from umscope.profile import RECORDS_DEFAULT, RECORDS_KERNELS
    assert ab.trace_kinds(RECORDS_DEFAULT) == [1, 12, 25, 49]  # memcpy, marker, unified memory, memory2
    assert ab.trace_kinds(RECORDS_KERNELS) == [1, 10, 12, 25, 49]
    assert ab.trace_kinds("") == [1, 10, 12, 25, 49]  # libumtrace's default: every record
    assert ab.trace_kinds("none") == []

    calls = []

    class Cupti:
        def cuptiActivityEnable(self, k):
            calls.append(("on", k))
            return 0

        def cuptiActivityDisable(self, k):
            calls.append(("off", k))
            return 0

    t = ab.TraceToggle(Cupti(), [1, 25])
    assert t.run(True, lambda: "x") == "x" and calls == []
    assert t.run(False, lambda: calls.append("work")) is None
    assert calls == [("off", 1), ("off", 25), "work", ("on", 1), ("on", 25)]


def test_a_cupti_refusal_is_reported_not_ignored():
    class Cupti:
        def cuptiActivityDisable(self, k):
            return 1

    t = ab.TraceToggle(Cupti(), [25])
    try:
        t.run(False, lambda: None)
    except RuntimeError as e:
        assert "disable activity kind 25" in str(e)
    else:
        raise AssertionError("a refused disable was taken for a paused trace")


def test_loaded_library_reads_the_process_maps(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/libc.so.6\n"
                    "7f02-7f03 r-xp 00000000 08:01 2 /opt/nvidia/cupti/lib/libcupti.so.13\n"
                    "7f04-7f05 rw-p 00000000 00:00 0\n")
    assert ab.loaded_library("libcupti", maps) == "/opt/nvidia/cupti/lib/libcupti.so.13"
    assert ab.loaded_library("libumtrace", maps) is None
    assert ab.loaded_library("libcupti", tmp_path / "none") is None


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
    monkeypatch.delitem(sys.modules, "umscope_torch_route", raising=False)  # test_place_route's fake install
    assert ab.main([]) == 2  # not under umscope place: nothing imported umscope_torch_route
    assert "umscope place --kind device" in capsys.readouterr().err
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)
    assert ab.main(["--toggle", "trace"]) == 2
    assert "umscope profile --um-trace" in capsys.readouterr().err
