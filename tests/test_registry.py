"""The runner's registry (`umbench list --json`) as the one source of names: applications and their options, memory
modes, kinds with their behaviour, stream operations with their traffic; and what umscope builds from it."""
import json
import re

from conftest import run_cli, umbench
from umscope import apps, native, options, plans, registry
from umscope.errors import UsageError
from umscope.model import bounds

import pytest


def _registry():
    res = umbench("list", "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_list_json_declares_applications_options_modes_kinds_and_ops():
    reg = _registry()
    benches = {b["name"]: b for b in reg["benchmarks"]}
    assert benches["gpu-stream"]["category"] == "family" and benches["triad"]["category"] == "application"
    assert benches["qv"]["category"] == "application"
    opts = {o["name"]: o for o in benches["gemm"]["options"]}
    assert opts["precision"]["choices"] == ["fp64", "fp32", "tf32", "fp16"] and opts["precision"]["default"] == "fp32"
    assert {o["name"]: o for o in benches["qv"]["options"]}["precision"]["choices"] == ["complex128", "complex64"]
    assert opts["n"]["type"] == "int" and int(opts["n"]["min"]) == 1 and int(opts["n"]["max"]) == 1 << 40
    assert opts["mode"]["internal"] and not opts["footprint"]["internal"] and opts["footprint"]["type"] == "size"
    assert [m["name"] for m in reg["modes"]] == ["explicit", "managed", "managed-prefetch", "managed-advice",
                                                 "pinned", "registered", "system"]
    advice = next(m for m in reg["modes"] if m["name"] == "managed-advice")
    assert (advice["input_kind"], advice["output_kind"]) == ("managed,advise=read_mostly", "managed,advise=preferred:gpu")
    kinds = {k["name"]: k for k in reg["kinds"]}
    assert kinds["device"]["needs_cuda"] and kinds["device"]["reachable_by"] == "gpu"
    assert kinds["system"]["gpu_needs_hmm_or_ats"] and not kinds["system"]["needs_cuda"]
    assert kinds["peer"]["needs_peer"] and not kinds["pinned"]["needs_peer"]
    assert {o["name"]: (o["reads"], o["writes"]) for o in reg["stream_ops"]} == {
        "read": (1, 0), "write": (0, 1), "copy": (1, 1), "triad": (2, 1)}
    # One writer: `umbench list` without --json prints the same registry.
    plain = umbench("list")
    assert plain.returncode == 0 and json.loads(plain.stdout) == reg


def test_the_stream_table_is_what_records_count_and_what_the_bounds_read():
    res = umbench("run", "selftest", "--mode", "traffic")
    arrays = {json.loads(l)["op"]: json.loads(l)["arrays"] for l in res.stdout.splitlines() if '"record"' in l}
    ops = registry.stream_ops()
    assert arrays == {op: r + w for op, (r, w) in ops.items()}
    assert bounds._ops() == ops


def test_every_record_carries_the_kinds_location_and_reach():
    res = umbench("run", "cpu-stream", "--kind", "system", "--bytes", "1M", "--threads", "1", "--ops", "read")
    (rec,) = [json.loads(l) for l in res.stdout.splitlines() if '"record"' in l]
    assert rec["location"] == "host" and rec["reachable_by"] in ("cpu", "gpu+cpu")
    # The bounds take the record's location, not the kind's name.
    fake = dict(rec, benchmark="gpu-stream", location="gpu", kind="system")
    assert bounds.uses(fake, {})["gpu_memory"] == 1.0
    old = {k: v for k, v in fake.items() if k != "location"}  # a record stored before: derived from the kind
    assert "gpu_memory" not in bounds.uses(old, {})


def test_applications_and_their_options_come_from_the_registry():
    native = registry.applications()
    for name, b in native.items():
        app = apps.APPS[name]
        assert app.help == b["help"]
        assert set(app.takes) == {o["name"] for o in b["options"] if not o["internal"]}
    assert apps.MODES == registry.modes()
    assert apps.APPS["sgemm"].bench == "gemm" and "precision" not in apps.APPS["sgemm"].takes
    help_text = " ".join(run_cli("app", "--help").stdout.split())
    for name, (o, text) in apps.cli_options().items():
        assert f"--{name}" in help_text
    assert "gemm: fp64, fp32, tf32, fp16; qv: complex128, complex64" in help_text


def test_validation_follows_the_declared_types():
    assert options.app_options("qv", {"qubits": "12"})["qubits"] == 12
    with pytest.raises(UsageError, match="--qubits"):
        options.app_options("qv", {"qubits": "41"})
    with pytest.raises(UsageError, match="--precision"):
        options.app_options("qv", {"precision": "fp16"})
    assert options.app_options("gemm", {"precision": "fp16"})["precision"] == "fp16"
    with pytest.raises(UsageError, match="--precision"):
        options.app_options("sgemm", {"precision": "fp64"})
    assert options.app_options("himeno", {"dims": "10,20,30"})["dims"] == "10,20,30"
    assert options.app_options("srad", {"lambda": "0.25"})["lambda"] == "0.25"


def test_list_shows_applications_modes_and_kind_behaviour():
    res = run_cli("list")
    assert res.returncode == 0, res.stderr
    assert "applications" in res.stdout and "managed-advice" in res.stdout
    assert re.search(r"reachable by: gpu\b", res.stdout)


def test_a_missing_runner_is_one_clear_line(tmp_path):
    env = {"UMSCOPE_UMBENCH": str(tmp_path / "no-umbench")}
    assert run_cli("--help", env=env).returncode == 0
    res = run_cli("app", "list", env=env)
    assert res.returncode == 2 and "no-umbench" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_only_the_app_command_starts_umbench_for_its_options(tmp_path):
    """The app command's options come from `umbench list --json`: built when `app` is parsed or its help
    asked, so report, compare and the rest start no umbench process to build their command line."""
    log = tmp_path / "calls"
    fake = tmp_path / "umbench"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\nexec {native.umbench_path()} \"$@\"\n")
    fake.chmod(0o755)
    env = {"UMSCOPE_UMBENCH": str(fake)}
    for argv in (("report", "--help"), ("compare", "--help"), ("runs", "--store", str(tmp_path / "none.sqlite"))):
        res = run_cli(*argv, env=env)
        assert res.returncode == 0 or "no store" in res.stderr, res.stderr
        assert not log.exists(), f"umscope {' '.join(argv)} started umbench: {log.read_text()}"
    res = run_cli("app", "--help", env=env)  # the app command's help lists the applications' options
    assert res.returncode == 0 and "--footprint" in res.stdout, res.stderr
    assert log.read_text().splitlines() == ["list --json"]


def test_bench_help_names_every_family_the_registry_declares():
    """`umscope bench --help` is built from the registry: a family declared only in native code is listed beside
    the planned ones, and every name it lists is one `umscope bench` runs."""
    declared = {b["name"] for b in _registry()["benchmarks"] if b["category"] == "family"}
    res = run_cli("bench", "--help")
    assert res.returncode == 0, res.stderr
    text = re.sub(r"-\s+", "-", " ".join(res.stdout.split()))  # argparse wraps lines, at hyphens too
    listed = re.search(r"benchmark family: ([a-z0-9, -]+?)(?: options:|$)", text).group(1).split(", ")
    assert declared - set(listed) == set(), f"missing from bench --help: {declared - set(listed)}"
    assert set(listed) == set(plans.families()) and len(listed) == len(set(listed))


def test_the_managed_kinds_advice_names_come_from_the_one_table_the_buffers_and_place_managed_apply():
    """kinds.cpp lists the names of umscope/advice.hpp, which buffer.cpp and libumtrace's managed_apply.cpp parse:
    'none' first, then every hint in the table's order."""
    from umscope import place
    assert place.managed_advice() == ["none", "preferred:gpu", "preferred:cpu", "accessed_by:gpu", "accessed_by:cpu",
                                      "read_mostly"]
