import json

import pytest

from conftest import run_cli


def _one_line_error(res):
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("umscope: error:"), res.stderr
    assert "Traceback" not in res.stderr
    return lines[0]


def test_info_without_gpu_says_so_and_exits_0():
    res = run_cli("info")
    assert res.returncode == 0, res.stderr
    assert "CPU" in res.stdout and "store" in res.stdout
    assert "GPU" in res.stdout


def test_info_json_has_the_probe_fields():
    res = run_cli("info", "--json")
    assert res.returncode == 0
    fp = json.loads(res.stdout)
    for key in ("host", "cpu", "numa", "cuda", "gpus", "addressing", "uvm", "store"):
        assert key in fp
    assert fp["host"]["page_size"] >= 4096
    assert fp["host"]["thp"] in ("always", "madvise", "never", None)
    assert fp["cpu"]["logical_cpus"] >= 1
    if not fp["gpus"]:
        assert fp["cuda"]["why_no_gpu"]
        assert fp["addressing"] == "none"


@pytest.mark.parametrize("args,needle", [
    (["bench", "gpu-stream", "--kind", "bogus"], "unknown memory kind"),
    (["bench", "gpu-stream", "--kind", "managed,prefetch=sideways"], "not understood"),
    (["bench", "gpu-stream", "--kind", "numa"], "a number"),
    (["bench", "nosuchbench"], "unknown benchmark"),
    (["bench", "cpu-stream", "--size", "-1"], "size"),
    (["bench", "cpu-stream", "--size", "abc"], "size"),
    (["bench", "cpu-stream", "--size", "0"], "size"),
    (["bench", "cpu-stream", "--reps", "0"], "--reps"),
    (["run", "--filter", "no-such-case"], "matches no case"),
    (["report", "--run", "999"], "no run 999"),
    (["export", "--format", "xml"], "invalid choice"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle, store_path):
    extra = ["--store", store_path] if args[0] in ("bench", "run", "report") else []
    if args[0] == "report":  # an existing, empty store: a missing one is its own error (test_hardening)
        from umscope.store import Store
        Store(store_path).close()
    line = _one_line_error(run_cli(*args, *extra))
    assert needle in line


def test_unwritable_store_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    line = _one_line_error(run_cli("bench", "selftest", "--store", str(blocker / "s.sqlite")))
    assert "cannot use store" in line


def test_list_names_benchmarks_and_kinds():
    res = run_cli("list")
    assert res.returncode == 0
    for name in ("gpu-stream", "cpu-stream", "device", "managed", "pinned", "registered", "system", "numa:N"):
        assert name in res.stdout


def test_dry_run_lists_default_plan_without_running(store_path):
    res = run_cli("run", "--dry-run", "--store", store_path)
    assert res.returncode == 0
    ids = res.stdout.splitlines()
    assert any(i.startswith("gpu-stream device") for i in ids)
    assert any(i.startswith("cpu-stream system") for i in ids)
    assert any("managed,first_touch=cpu,prefetch=gpu" in i for i in ids)
    assert any(i.startswith("contention pinned") for i in ids)


def test_bench_contention_plan_and_skip_without_gpu(store_path):
    res = run_cli("bench", "contention", "--dry-run", "--store", store_path)
    assert res.returncode == 0, res.stderr
    ids = res.stdout.splitlines()
    for kind in ("pinned", "registered", "system"):
        assert any(i.startswith(f"contention {kind} ") and "gpu-op=read" in i for i in ids), kind
    assert any("gpu-op=write" in i for i in ids)


def test_cpu_arrays_exceed_the_largest_cache():
    from umscope.plans import cpu_stream_size

    fp = {"cpu": {"caches": [{"bytes": 300 << 20}, {"bytes": 2 << 20}]}}
    assert cpu_stream_size(fp) == 1200 << 20
    assert cpu_stream_size({"cpu": {"caches": []}}) == 256 << 20
