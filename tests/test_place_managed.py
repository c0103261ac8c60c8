"""`umscope place --managed POLICY`: a CUDA program's own cudaMallocManaged memory given the managed kind's
policies through libumtrace (native/profiler/managed_apply.cpp). On the CPU: the policy's checks, the
environment, what the run says from libumtrace's lines; on a GPU: umscope's own managed triad (a program
that links the CUDA runtime statically, as the third-party ones do) run under it."""
import json
import os
import sys

import pytest

from conftest import run_cli
from umscope import place
from umscope.errors import UsageError
from umscope.profile import tracer

needs_tracer = pytest.mark.skipif(tracer.tracer_path() is None, reason="this build has no libumtrace (no CUPTI)")


@pytest.mark.parametrize("args,text", [
    (["--managed", "prefetch=cpu"], "only prefetch=gpu"),
    (["--managed", "advise=sideways"], "'sideways' is not an advice"),
    (["--managed", "flags=x"], "it takes advise=... and prefetch=gpu"),
    (["--managed", "advise=none"], "asks for nothing"),
    (["--managed", "prefetch=gpu", "--rule", ">=1M:pinned"], "--rule places PyTorch's segments: give --kind"),
    ([], "or --managed POLICY"),
])
def test_bad_managed_policies_exit_2_with_one_line_and_run_nothing(args, text, store_path, tmp_path):
    marker = tmp_path / "ran"
    res = run_cli("place", *args, "--store", store_path, "--", sys.executable, "-c",
                  f"open({str(marker)!r}, 'w').write('x')")
    assert res.returncode == 2, res.stderr
    assert text in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not marker.exists() and not os.path.exists(store_path)


@needs_tracer
def test_an_injection_another_tool_holds_is_refused_before_the_program_runs(store_path, tmp_path):
    marker = tmp_path / "ran"
    res = run_cli("place", "--managed", "prefetch=gpu", "--store", store_path, "--", sys.executable, "-c",
                  f"open({str(marker)!r}, 'w').write('x')", env={"CUDA_INJECTION64_PATH": "/opt/other/libtool.so"})
    assert res.returncode == 2 and "already gives to /opt/other/libtool.so" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not marker.exists() and not os.path.exists(store_path)


def test_a_policy_is_checked_item_by_item():
    assert place.check_managed("advise=preferred:cpu+accessed_by:gpu,prefetch=gpu") == \
        "advise=preferred:cpu+accessed_by:gpu,prefetch=gpu"
    assert place.check_managed("advise=read_mostly") == "advise=read_mostly"
    with pytest.raises(UsageError, match="asks for nothing"):
        place.check_managed("prefetch=none,advise=none")


@needs_tracer
def test_the_environment_injects_libumtrace_without_records_or_joins_the_profiles():
    lib = tracer.tracer_path()
    env = {}
    assert place.managed_environment(env, "prefetch=gpu", "/tmp/t.jsonl") == "/tmp/t.jsonl"
    assert env == {"CUDA_INJECTION64_PATH": lib, "UMSCOPE_TRACE_FILE": "/tmp/t.jsonl",
                   "UMSCOPE_UMTRACE_RECORDS": "none", "UMSCOPE_UMTRACE_MANAGED": "prefetch=gpu"}
    # under `umscope profile --um-trace`: the profile's trace gets the lines, its records stay as it set them
    env = {"CUDA_INJECTION64_PATH": lib, "UMSCOPE_TRACE_FILE": "/tmp/profile.jsonl"}
    assert place.managed_environment(env, "advise=read_mostly", "/tmp/t.jsonl") == "/tmp/profile.jsonl"
    assert env == {"CUDA_INJECTION64_PATH": lib, "UMSCOPE_TRACE_FILE": "/tmp/profile.jsonl",
                   "UMSCOPE_UMTRACE_MANAGED": "advise=read_mostly"}
    with pytest.raises(UsageError, match="cannot run under profile --counters"):
        place.managed_environment({"CUDA_INJECTION64_PATH": lib, "UMSCOPE_TRACE_FILE": "/tmp/p.jsonl",
                                   "UMSCOPE_COUNTERS_FILE": "/tmp/c.jsonl"}, "prefetch=gpu", "/tmp/t.jsonl")
    with pytest.raises(UsageError, match="already gives to /opt/other.so"):
        place.managed_environment({"CUDA_INJECTION64_PATH": "/opt/other.so"}, "prefetch=gpu", "/tmp/t.jsonl")


def _lines(path, *events):
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + '{"k":"managed_apply","what":"cut')


def test_the_run_says_what_was_applied_refused_or_never_loaded(tmp_path):
    t = tmp_path / "umtrace.jsonl"
    _lines(t, {"k": "start"}, {"k": "managed_policy", "policy": "prefetch=gpu", "ok": True, "why": ""},
           {"k": "managed_apply", "what": "prefetch gpu", "ptr": 1, "bytes": 4096, "ok": True, "cu": "CUDA_SUCCESS"},
           {"k": "managed_apply", "what": "prefetch gpu", "ptr": 2, "bytes": 8192, "ok": True, "cu": "CUDA_SUCCESS"})
    _lines(tmp_path / "umtrace.jsonl.4242", {"k": "managed_policy", "policy": "prefetch=gpu", "ok": True, "why": ""},
           {"k": "managed_apply", "what": "prefetch gpu", "ptr": 3, "bytes": 1, "ok": False,
            "cu": "CUDA_ERROR_INVALID_VALUE"})
    s = place.managed_summary(str(t))
    assert s["actions"] == {"prefetch gpu": {"ranges": 2, "bytes": 12288, "refused": 1,
                                             "errors": {"CUDA_ERROR_INVALID_VALUE": 1}}}
    recs, notes = place.managed_records("prefetch=gpu", s)
    assert [(r["what"], r["value"], r["bytes"], r["refused"]) for r in recs] == [("prefetch gpu", 2, 12288, 1)]
    assert notes == ["--managed prefetch=gpu: prefetch gpu refused by the driver for 1 range(s): "
                     "CUDA_ERROR_INVALID_VALUE x1"]
    never = place.managed_records("prefetch=gpu", place.managed_summary(str(tmp_path / "none.jsonl")))
    assert never[0] == [] and "libumtrace never loaded" in never[1][0]
    _lines(t, {"k": "managed_policy", "policy": "prefetch=gpu", "ok": False, "why": "no CUDA 13 cuMemAdvise"})
    (tmp_path / "umtrace.jsonl.4242").unlink()
    refused = place.managed_records("prefetch=gpu", place.managed_summary(str(t)))
    assert refused == ([], ["--managed prefetch=gpu: not applied in umtrace.jsonl: no CUDA 13 cuMemAdvise"])
    _lines(t, {"k": "managed_policy", "policy": "prefetch=gpu", "ok": True, "why": ""})
    assert "allocated no managed memory" in place.managed_records("prefetch=gpu", place.managed_summary(str(t)))[1][0]


@needs_tracer
def test_a_program_without_cuda_runs_and_the_run_says_nothing_was_applied(store_path):
    res = run_cli("place", "--managed", "prefetch=gpu", "--store", store_path, "--json", "--",
                  sys.executable, "-c", "print('plain program')")
    assert res.returncode == 0, res.stderr
    assert "plain program" in res.stdout and "libumtrace never loaded" in res.stderr
    run = next(r for r in json.loads(res.stdout.strip().splitlines()[-1]) if r["op"] == "run")
    assert run["managed"] == "prefetch=gpu" and run["kind"] == "managed" and run["policy"] == "prefetch=gpu"


@pytest.mark.gpu
@needs_tracer
@pytest.mark.parametrize("policy,what", [("prefetch=gpu", "prefetch gpu"),
                                         ("advise=preferred:cpu+accessed_by:gpu", "advise preferred:cpu")])
def test_a_statically_linked_programs_managed_memory_gets_the_policy(policy, what, store_path):
    """umscope's triad in managed mode (cudaMallocManaged, cudart linked statically): every one of its three
    arrays gets the policy, the driver accepts it, and the triad's own check of its result still passes."""
    res = run_cli("place", "--managed", policy, "--store", store_path, "--json", "--",
                  sys.executable, "-m", "umscope", "app", "run", "triad", "--mode", "managed", "--footprint", "48M",
                  "--json", "--store", store_path + ".app")
    assert res.returncode == 0, res.stderr
    recs = json.loads(res.stdout.strip().splitlines()[-1])
    applied = {r["what"]: r for r in recs if r["op"] == "managed_apply"}
    assert applied[what]["value"] >= 3 and applied[what]["refused"] == 0
    assert applied[what]["bytes"] >= 48 * 2**20
    app, _ = json.JSONDecoder().raw_decode(res.stdout)  # the app's own --json output comes first
    assert app and all(r["benchmark"] == "triad" and r["status"] == "ok" for r in app)  # its result check passed
