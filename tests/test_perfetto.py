"""`umscope export --format perfetto`: a profile run as a Chrome Trace Event trace whose totals match the run's
records, read back by an independent reader: Perfetto's own trace processor where its binary is available, and
always by the JSON reader and the Trace Event Format's rules. The profile here is SYNTHETIC (tests/report_fixtures.py)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from report_fixtures import GIB, profile_run
from umscope.export import export
from umscope.store import Store

PHASES = {"X", "C", "M", "i"}


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    d = tmp_path_factory.mktemp("perfetto")
    s = Store(d / "s.sqlite")
    run, made = profile_run(s, d, migrate=8 * GIB)
    path = d / "trace.json"
    res = subprocess.run([sys.executable, "-m", "umscope", "export", "--store", str(s.path), "--run", str(run),
                          "--format", "perfetto", "-o", str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return s, run, made, path


def totals(events) -> dict:
    mig = [e for e in events if e.get("cat") == "migration"]
    return {"htod": sum(e["args"]["bytes"] for e in mig if e["args"]["way"] == "htod"),
            "dtoh": sum(e["args"]["bytes"] for e in mig if e["args"]["way"] == "dtoh"),
            "kernels": sum(e["args"]["count"] for e in events if e.get("cat") == "kernel"),
            "gpu_fault": sum(e["args"]["faults"] for e in events if e.get("name") == "GPU page faults per interval")}


def test_trace_totals_match_the_records(profiled):
    s, run, made, path = profiled
    doc = json.loads(path.read_text())
    ev = doc["traceEvents"]
    assert all(e["ph"] in PHASES and "pid" in e for e in ev)
    assert all(isinstance(e["ts"], (int, float)) and e.get("dur", 0) >= 0 for e in ev if e["ph"] != "M")
    um = next(r for r in s.records(run) if r["op"] == "um_trace")["extra"]
    got = totals(ev)
    assert got == {"htod": um["totals"]["htod"], "dtoh": um["totals"]["dtoh"], "kernels": um["kernels"],
                   "gpu_fault": um["totals"]["gpu_fault"]}
    assert got == {k: made[k] for k in got}  # and what the generator made
    names = {e["args"]["name"] for e in ev if e["ph"] == "M"}
    assert {"program", "gpu0", "kernels", "copies", "unified memory"} <= names
    assert {e["name"] for e in ev if e["ph"] == "C"} >= {"rss (bytes)", "gpu0_mem_device (bytes)",
                                                         "gpu0_power (W)", "GPU page faults per interval",
                                                         "bytes migrated (cumulative)"}
    assert any(e.get("cat") == "nvtx" and e["name"] == "train" for e in ev)
    assert path.stat().st_size < 20e6


def test_a_run_that_is_not_a_profile_is_refused(tmp_path):
    from report_fixtures import failed_place_run
    from umscope.errors import UsageError
    s = Store(tmp_path / "s.sqlite")
    run = failed_place_run(s)
    with pytest.raises(UsageError, match="draws a profile run"):
        export(s, "perfetto", run)


def _trace_processor_shell():
    return os.environ.get("UMSCOPE_TRACE_PROCESSOR") or shutil.which("trace_processor_shell") or \
        shutil.which("trace_processor")


@pytest.mark.skipif(_trace_processor_shell() is None,
                    reason="Perfetto's trace_processor_shell is not installed (PyPI's perfetto package downloads it "
                           "at run time; set UMSCOPE_TRACE_PROCESSOR to a local copy)")
def test_perfettos_trace_processor_reads_the_same_totals(profiled):
    tp_mod = pytest.importorskip("perfetto.trace_processor", reason="PyPI package perfetto is not installed")
    s, run, made, path = profiled
    tp = tp_mod.TraceProcessor(trace=str(path), config=tp_mod.TraceProcessorConfig(bin_path=_trace_processor_shell()))
    try:
        q = lambda sql: next(iter(tp.query(sql)))  # noqa: E731
        mig = q("select sum(extract_arg(arg_set_id, 'args.bytes')) as b from slice where category = 'migration'").b
        kern = q("select sum(extract_arg(arg_set_id, 'args.count')) as n from slice where category = 'kernel'").n
        assert mig == made["htod"] + made["dtoh"] and kern == made["kernels"]
    finally:
        tp.close()
