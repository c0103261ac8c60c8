"""GPU tests: run on a GPU node (make test-gpu); skipped with the reason elsewhere."""
import json
import os

import pytest

from conftest import run_cli, umbench
from umscope import native, probe
from umscope.model import bounds

pytestmark = pytest.mark.gpu

GPU_KINDS = ["device", "managed,first_touch=gpu", "managed,first_touch=cpu", "managed,first_touch=cpu,prefetch=gpu",
             "managed,first_touch=cpu,advise=preferred:cpu+accessed_by:gpu", "managed,advise=read_mostly",
             "pinned", "pinned,first_touch=gpu", "registered", "registered,first_touch=gpu", "system", "numa:0"]
CPU_KINDS = ["managed,first_touch=cpu", "managed,first_touch=gpu", "pinned", "registered", "system"]


def _out(res):
    lines = [json.loads(l) for l in res.stdout.splitlines() if l.startswith("{")]
    return [l for l in lines if l["type"] == "record"], lines[-1]


@pytest.mark.parametrize("kind", GPU_KINDS)
def test_every_kind_gpu_access_verified_or_skipped_by_capability(kind):
    res = umbench("run", "gpu-stream", "--kind", kind, "--bytes", "256M", "--reps", "3")
    recs, status = _out(res)
    gpu = native.native_info()["gpus"][0]
    if kind.startswith(("system", "numa")) and not gpu["pageable_memory_access"]:
        assert status["status"] == "skipped" and "HMM or ATS" in status["reason"]
        return
    assert status["status"] == "ok", res.stdout
    assert {r["op"] for r in recs} == {"read", "write", "copy", "triad"}
    fp = probe.probe()
    desc = bounds.describe(fp)
    for r in bounds.annotate(recs, fp, desc):
        assert r["verified"] == "cpu-reference"
        assert r["bound_source"].split(":")[0] in ("probe", "datasheet", "spec", "paper", "file"), r
        # Never above the bound of the datapath that limits it (2% for clock and rounding). Writes to
        # read-mostly pages are the exception below (each write collapses the duplicated copies).
        assert r["median"] <= 1.02 * r["bound"], r
        if "read_mostly" in kind and r["op"] != "read":
            continue
        if r["datapath"] == "gpu_memory":
            # GPU memory: between half its bound and the bound (copy and triad stop near 85%, docs/method.md).
            assert r["median"] >= 0.5 * r["bound"], r
        else:
            # Over the link (zero copy): at least a fifth of the link's peak (PCIe: 12.6 of 63 GB/s).
            assert r["median"] >= 0.2 * r["bound"], r


@pytest.mark.parametrize("kind", CPU_KINDS)
def test_every_host_reachable_kind_cpu_access_verified(kind):
    res = umbench("run", "cpu-stream", "--kind", kind, "--bytes", "64M", "--reps", "3", "--threads", "1")
    recs, status = _out(res)
    assert status["status"] == "ok", res.stdout
    assert all(r["verified"] for r in recs) and len(recs) == 3


def test_device_memory_is_fastest_from_the_gpu():
    d, _ = _out(umbench("run", "gpu-stream", "--kind", "device", "--bytes", "512M", "--ops", "copy"))
    p, _ = _out(umbench("run", "gpu-stream", "--kind", "pinned", "--bytes", "512M", "--ops", "copy"))
    assert d[0]["median"] > 5 * p[0]["median"]


def test_guard_refuses_oversubscribing_managed_request():
    gpu = native.native_info()["gpus"][0]
    too_big = gpu["total_mem"] + (4 << 30)  # never allocated: the guard refuses first
    res = umbench("run", "gpu-stream", "--kind", "managed", "--bytes", str(too_big), "--ops", "read")
    _, status = _out(res)
    assert res.returncode == 4 and status["status"] == "refused"
    assert "--allow-oversubscription" in status["reason"]
    # The arrays together count too: three half-memory arrays are refused.
    res = umbench("run", "gpu-stream", "--kind", "managed", "--bytes", str(gpu["free_mem"] // 2), "--ops", "triad")
    assert _out(res)[1]["status"] == "refused"


def test_gpu_fault_is_recorded_as_failed_and_next_case_runs(store_path):
    res = run_cli("bench", "selftest", "--mode", "gpu-fault,ok", "--store", store_path)
    from umscope.store import Store

    s = Store(store_path)
    cases = {c["case_id"]: c for c in s.cases(s.run()["id"])}
    assert cases["selftest mode=gpu-fault"]["status"] == "failed"
    assert "IllegalAddress" in cases["selftest mode=gpu-fault"]["reason"]
    assert cases["selftest mode=ok"]["status"] == "ok"
    assert res.returncode == 1


def test_probe_reports_gpu_and_link():
    fp = json.loads(run_cli("info", "--json").stdout)
    g = fp["gpus"][0]
    assert g["sms"] > 0 and g["total_mem"] > 0 and g["addressing"] in ("ATS", "HMM", "none")
    assert fp["cuda"]["driver"]


@pytest.mark.parametrize("src,dst,engine", [("pinned", "device", "ce"), ("device", "pinned", "ce"),
                                            ("system", "device", "ce"), ("device", "device", "ce"),
                                            ("registered", "device", "sm"), ("device", "device", "sm")])
def test_copy_matrix_pairs_verified(src, dst, engine):
    recs, status = _out(umbench("run", "copy", "--kind", src, "--dst", dst, "--engine", engine,
                                "--bytes", "4K,64M", "--reps", "3"))
    assert status["status"] == "ok", status
    assert [r["bytes"] for r in recs] == [4096, 64 << 20]
    assert all(r["verified"] and r["median"] > 0 for r in recs)
    # Larger copies amortise the launch: the 64 MiB copy is faster than the 4 KiB one.
    assert recs[1]["median"] > recs[0]["median"]


def test_sm_copy_of_pageable_memory_follows_capability():
    _, status = _out(umbench("run", "copy", "--kind", "system", "--dst", "device", "--engine", "sm", "--bytes", "1M"))
    if native.native_info()["gpus"][0]["pageable_memory_access"]:
        assert status["status"] == "ok"
    else:
        assert status["status"] == "skipped" and "HMM or ATS" in status["reason"]


def test_bidirectional_copy_reports_each_way_and_the_sum():
    recs, status = _out(umbench("run", "copy", "--kind", "pinned", "--dst", "device", "--direction", "bidir",
                                "--bytes", "256M", "--reps", "5"))
    assert status["status"] == "ok"
    routes = {r["route"]: r for r in recs}
    assert set(routes) == {"forward", "reverse", "both"}
    # The sum over both links beats either direction alone (PCIe is full duplex).
    assert routes["both"]["median"] > 1.2 * max(routes["forward"]["median"], routes["reverse"]["median"])


def test_a_slow_copy_repeats_for_its_time_budget_unless_reps_are_given():
    """Without --reps a size whose first timed repetition is slow repeats as many times as fill 0.3 s, at least 8
    (copy.cu); a fast one keeps the default 20; --reps given is kept."""
    import math
    recs, status = _out(umbench("run", "copy", "--kind", "pinned", "--dst", "system", "--bytes", "1M,256M"))
    assert status["status"] == "ok"
    for r in recs:
        first = r["bytes"] / (r["samples"][0] * 1e9)  # seconds of the first timed repetition
        assert r["n"] == len(r["samples"]) == min(20, max(8, math.ceil(0.3 / first))), (r["bytes"], first)
    assert recs[0]["n"] == 20  # 1 MiB: far under 15 ms a repetition
    recs, _ = _out(umbench("run", "copy", "--kind", "pinned", "--dst", "system", "--bytes", "256M", "--reps", "20"))
    assert recs[0]["n"] == 20


@pytest.mark.parametrize("gpu_op", ["read", "write"])
def test_contention_measures_both_sides_alone_and_together(gpu_op):
    res = umbench("run", "contention", "--kind", "pinned", "--bytes", "256M", "--gpu-op", gpu_op, "--reps", "5")
    recs, status = _out(res)
    assert status["status"] == "ok", res.stdout + res.stderr
    gpu = [r for r in recs if r["processor"] == "gpu0"]
    cpu = [r for r in recs if r["processor"] == "cpu"]
    (total,) = [r for r in recs if r["op"] == "sum"]
    assert [r["load"] == "none" for r in gpu] == [True, False] and [r["load"] == "none" for r in cpu] == [True, False]
    assert all(r["verified"] and r["median"] > 1 for r in recs)
    # The GPU side crosses PCIe: under its link's peak (64 GB/s for gen5 x16) whatever the load.
    assert all(r["median"] < 64 for r in gpu)
    assert total["median"] == pytest.approx(gpu[1]["median"] + cpu[1]["median"])
    assert total["alone_median"] == pytest.approx(gpu[0]["median"] + cpu[0]["median"])


def test_contention_system_memory_skips_without_hmm():
    res = umbench("run", "contention", "--kind", "system", "--bytes", "64M", "--reps", "2")
    _, status = _out(res)
    if not native.native_info()["gpus"][0]["pageable_memory_access"]:
        assert status["status"] == "skipped" and "HMM or ATS" in status["reason"]
    else:
        assert status["status"] == "ok"


def test_gpu_chase_device_memory_l2_and_beyond_with_calibrated_timer():
    res = umbench("run", "latency", "--kind", "device", "--bytes", "4K,16M,1G", "--reps", "3")
    recs, status = _out(res)
    assert status["status"] == "ok", res.stdout + res.stderr
    timer = next(r for r in recs if r["op"] == "timer")
    # The cycle counter measured against the global timer agrees with the clock the device reports
    # within the boost range (it may run below the maximum under power management).
    assert 0.3 * timer["clock_rate_attr_mhz"] < timer["median"] < 1.1 * timer["clock_rate_attr_mhz"]
    l1, l2, mem = [r for r in recs if r["op"] == "chase"]
    assert all(r["verified"] for r in (l1, l2, mem))
    # L1 hit < L2 hit < HBM miss, each a real step; cycles and ns agree through the clock.
    assert l1["median"] < l2["median"] < mem["median"]
    assert mem["median"] > 1.5 * l2["median"] and l2["median"] > 2 * l1["median"]
    assert mem["cycles"] / mem["median"] * 1e3 == pytest.approx(timer["median"], rel=0.25)


def test_host_device_latency_is_slower_than_device_memory():
    dev = _out(umbench("run", "latency", "--kind", "device", "--bytes", "256M", "--reps", "3"))[0][-1]
    for kind in ("pinned", "registered", "managed,first_touch=cpu,advise=preferred:cpu+accessed_by:gpu"):
        recs, status = _out(umbench("run", "latency", "--kind", kind, "--bytes", "256M", "--reps", "3"))
        assert status["status"] == "ok", (kind, status)
        # Over PCIe: about a microsecond, and always well above HBM.
        assert recs[-1]["median"] > 1.5 * dev["median"], (kind, recs[-1]["median"], dev["median"])


def test_cpu_chases_gpu_resident_managed_memory_and_skips_device_memory():
    recs, status = _out(umbench("run", "latency", "--processor", "cpu", "--kind", "managed,first_touch=gpu",
                                "--bytes", "16M", "--reps", "3"))
    assert status["status"] == "ok" and recs[0]["verified"]
    _, status = _out(umbench("run", "latency", "--processor", "cpu", "--kind", "device", "--bytes", "1M"))
    if not native.native_info()["gpus"][0]["pageable_memory_access"]:
        assert status["status"] == "skipped"


@pytest.mark.parametrize("pair,kind", [("cpu-gpu", "pinned"), ("cpu-gpu", "registered"), ("cpu-gpu", "managed"),
                                       ("gpu-gpu", "device"), ("gpu-gpu", "pinned"), ("gpu-gpu", "managed"),
                                       ("cpu-cpu", "pinned"), ("cpu-cpu", "managed")])
def test_pingpong_runs_or_skips_with_the_coherence_finding(pair, kind):
    res = umbench("run", "pingpong", "--pair", pair, "--kind", kind, "--reps", "3", "--exchanges", "2000", timeout=200)
    recs, status = _out(res)
    if status["status"] == "skipped":
        # GPU-GPU and CPU-CPU atomics are coherent on any kind both reach; CPU-GPU ones over PCIe
        # without host-native atomics may not be, and the reason says whether turn-taking still works.
        assert pair == "cpu-gpu" and "coherent atomics" in status["reason"], status
        assert "turn-taking" in status["reason"]
        return
    assert status["status"] == "ok", res.stdout + res.stderr
    (r,) = recs
    assert r["n"] == 3 and r["verified"] == "invariant:flag-count" and r["median"] > 0
    # The window follows from the machine's own latency: a turn is a flag update one agent makes and the
    # other sees, so a round trip costs at least a few ns and at most a few of the slowest loads the
    # waiting agent makes (its chase latency over the same path, measured here).
    gpu = native.native_info()["gpus"][0]
    if pair == "cpu-gpu" and kind == "managed" and not gpu["host_native_atomics"]:
        # Without hardware coherence each turn moves the flag's page (docs/method.md, ping-pong): a round
        # trip is a GPU fault on a CPU-placed page and a CPU fault on a GPU-placed one, so its window is
        # those two serial fault costs, measured here (time per page, us), not a load latency.
        # The driver also sees the page bounce and throttles it: a thrashing page's faulting thread sleeps
        # uvm_perf_thrashing_nap ms (nvidia_uvm's parameter, read by the probe) per turn and side at most.
        per_turn_us = sum(_one("faults", "--kind", f"managed,first_touch={placed}", "--processor", proc, "--mode",
                               "serial", "--bytes", "64M", "--stride", "64K", "--pages", "256", "--reps", "2")[0]
                          ["median"] for placed, proc in (("cpu", "gpu"), ("gpu", "cpu")))
        uvm = probe.uvm_params()
        nap_ms = float((uvm.get("params") or {}).get("uvm_perf_thrashing_nap") or 0) \
            if (uvm.get("params") or {}).get("uvm_perf_thrashing_enable", "1") != "0" else 0.0
        low, high = 0.2 * per_turn_us * 1e3, 20 * per_turn_us * 1e3 + 2 * nap_ms * 1e6
        assert low <= r["median"] <= high, (r["median"], per_turn_us, nap_ms)
        return
    chaser = "cpu" if pair == "cpu-cpu" else "gpu"
    ref_kind = {"cpu-gpu": "pinned", "gpu-gpu": "device", "cpu-cpu": "system"}[pair]
    lat, st = _out(umbench("run", "latency", "--processor", chaser, "--kind", ref_kind, "--bytes", "256M",
                           "--reps", "3"))
    assert st["status"] == "ok", st
    slowest_load = lat[-1]["median"]
    assert 10 <= r["median"] <= 20 * slowest_load, (r["median"], slowest_load)
    if pair == "gpu-gpu":
        assert r["sms"].split(",")[0] != r["sms"].split(",")[1]


def _one(*args, timeout=300):
    recs, status = _out(umbench("run", *args, timeout=timeout))
    assert status["status"] == "ok", status
    return recs


def test_migration_first_pass_faults_then_device_speed():
    cpu_first = _one("migration", "--kind", "managed,first_touch=cpu", "--bytes", "512M", "--iterations", "10")[0]
    device = _one("migration", "--kind", "device", "--bytes", "512M", "--iterations", "10")[0]
    prefetched = _one("migration", "--kind", "managed,first_touch=cpu,prefetch=gpu", "--bytes", "512M",
                      "--iterations", "10")[0]
    assert len(cpu_first["samples"]) == 10 and cpu_first["verified"]
    # The first pass migrates on faults; once resident, passes run near device memory.
    assert cpu_first["first"] < 0.2 * cpu_first["steady"]
    assert cpu_first["steady"] > 0.7 * device["steady"]
    assert prefetched["first"] > 0.5 * device["steady"]


def test_migration_cpu_touch_between_iterations_keeps_it_slow():
    full = _one("migration", "--kind", "managed,first_touch=cpu", "--bytes", "256M", "--iterations", "6",
                "--cpu-touch", "full")[0]
    still = _one("migration", "--kind", "managed,first_touch=cpu", "--bytes", "256M", "--iterations", "6")[0]
    assert len(full["cpu_touch_ms"]) == 5
    assert full["steady"] < 0.3 * still["steady"]


def test_oversub_ballast_and_refusal_above_one():
    (r,) = _one("migration", "--kind", "managed,first_touch=cpu", "--dos", "0.5", "--available", "4G",
                "--iterations", "3")
    assert r["dos"] == 0.5 and r["ballast"] > 0 and r["bytes"] == 2 << 30
    res = umbench("run", "migration", "--kind", "managed", "--dos", "1.5", "--available", "4G")
    assert res.returncode == 4 and "refusing degree of oversubscription" in res.stdout


def test_firsttouch_gpu_initialises_managed_faster_than_cpu_then_migrate():
    # The claim (GH200 study): initialising managed memory on the GPU beats initialising it on the CPU and
    # then paying for the migration when the GPU first writes it. Both sides measured here, at 1 GiB.
    by_gpu = {r["op"]: r for r in _one("firsttouch", "--kind", "managed", "--by", "gpu", "--bytes", "1G", "--reps", "2")}
    by_cpu = {r["op"]: r for r in _one("firsttouch", "--kind", "managed", "--by", "cpu", "--bytes", "1G", "--reps", "2")}
    (mig,) = _one("migration", "--kind", "managed,first_touch=cpu", "--op", "write", "--bytes", "1G",
                  "--iterations", "2")
    migrate_ms = mig["bytes"] / (mig["first"] * 1e9) * 1e3
    cpu_path = by_cpu["first-touch"]["median"] + migrate_ms
    assert by_gpu["first-touch"]["median"] < cpu_path, (by_gpu["first-touch"]["median"], cpu_path)
    # The first touch alone is not compared: on the H100 machine the GPU's first touch of fresh managed pages
    # measured 51-89 ms/GiB and the CPU's 71-83 ms/GiB across this session's runs (reference-h100.md "um",
    # model-validation.md's figures, and a GPU test run where the GPU took 75.6 ms against the CPU's 71.1 ms),
    # so which is faster is not a property of this machine; the study's claim (GPU touch against CPU touch
    # plus the migration) is.
    assert by_gpu["second-touch"]["median"] < by_gpu["first-touch"]["median"]


def test_gpu_faults_on_cpu_placed_managed_memory():
    recs = _one("faults", "--kind", "managed,first_touch=cpu", "--processor", "gpu", "--bytes", "256M",
                "--stride", "4K,2M", "--reps", "2")
    assert [r["stride"] for r in recs] == [4096, 2 << 20]
    assert all(r["verified"] and r["median"] > 0 for r in recs)
    serial = _one("faults", "--kind", "managed,first_touch=cpu", "--processor", "gpu", "--mode", "serial",
                  "--bytes", "256M", "--stride", "64K", "--pages", "512", "--reps", "2")[0]
    # A fault served one at a time costs microseconds; all at once they overlap.
    assert serial["median"] > 1.0 and serial["pages"] == 512


def test_interleave_first_gpu_write_after_cpu_pays_for_migration():
    recs = _one("interleave", "--kind", "managed,first_touch=cpu", "--bytes", "256M", "--n", "1,8")
    n8 = recs[1]
    assert n8["first_gpu_write_ms"] > 3 * n8["later_gpu_write_ms"]
    assert recs[0]["median"] > n8["median"]
    pinned = _one("interleave", "--kind", "pinned", "--bytes", "256M", "--n", "8")[0]
    assert pinned["first_gpu_write_ms"] < 2 * pinned["later_gpu_write_ms"]


@pytest.mark.parametrize("mode", ["explicit", "managed", "managed-prefetch", "managed-advice", "pinned", "registered",
                                  "system"])
def test_qv_every_mode_matches_the_cpu_reference(mode):
    res = umbench("run", "qv", "--qubits", "16", "--mode", mode, "--check", "1", timeout=300)
    recs, status = _out(res)
    gpu = native.native_info()["gpus"][0]
    if mode == "system" and not gpu["pageable_memory_access"]:
        assert status["status"] == "skipped" and "HMM or ATS" in status["reason"]
        return
    assert status["status"] == "ok", res.stdout + res.stderr
    circuit, gate = recs
    assert circuit["fidelity"] > 1 - 1e-10 and circuit["mode"] == mode
    assert len(circuit["samples"]) == 16 and gate["median"] > 0


def test_qv_explicit_cpu_init_times_the_transfer_and_complex64():
    (c, _), status = _out(umbench("run", "qv", "--qubits", "20", "--mode", "explicit", "--init", "cpu"))
    assert status["status"] == "ok" and c["transfer_ms"] > 0 and c["back_ms"] > 0 and c["fidelity"] > 1 - 1e-10
    (c32, _), status = _out(umbench("run", "qv", "--qubits", "20", "--precision", "complex64"))
    assert status["status"] == "ok" and c32["fidelity"] > 1 - 1e-4 and c32["bytes"] == 8 << 20


def test_qv_gpu_state_matches_qiskit(tmp_path):
    pytest.importorskip("qiskit_aer", reason="Qiskit Aer is not installed on this machine")
    import qv_circuit as qv
    circ, state = tmp_path / "c.json", tmp_path / "s.bin"
    _, status = _out(umbench("run", "qv", "--qubits", "12", "--mode", "managed", "--export-circuit", str(circ),
                             "--dump-state", str(state)))
    assert status["status"] == "ok"
    c = qv.load_circuit(circ)
    assert qv.fidelity(qv.qiskit_statevector(c), qv.load_state(state, 12)) >= 1 - 1e-10


# The target: 1% of the run at 100 ms. On the H100 machine (where each NVML ioctl is slow, in a
# gVisor sandbox) the sampler measured 0.86% without --power and 0.92% with it, on 2-second runs.
@pytest.mark.parametrize("power,limit", [(False, 0.01), (True, 0.01)])
def test_profile_sees_the_gpu_memory_of_a_managed_run(store_path, power, limit):
    res = run_cli("profile", "--store", store_path, "--period", "100ms", *(["--power"] if power else []), "--json",
                  "--", native.umbench_path(), "run", "qv", "--qubits", "28", "--mode", "managed")
    assert res.returncode == 0, res.stderr
    recs = {r["op"]: r for r in json.loads(res.stdout.strip().splitlines()[-1])}
    mem = recs["gpu0_mem_device"]
    assert mem["max"] >= 4 << 30  # the 4 GiB state was on the GPU while we watched
    assert recs["gpu0_util"]["max"] > 0
    assert ("gpu0_power" in recs) == power and ("energy" in recs) == power
    assert recs["run"]["sampler_overhead"] < limit, recs["run"]["sampler_overhead"]


def test_um_trace_writer_thread_writes_every_record(tmp_path):
    """Delivered buffers are written by libumtrace's writer thread, not in CUPTI's callback; every launch of a
    3000-iteration run is in the trace and the exit waited for the writer (docs/counters.md, "What profiling costs")."""
    import os
    import subprocess
    from umscope.profile import tracer
    lib = tracer.tracer_path()
    if not lib:
        pytest.skip("this build has no libumtrace (CUPTI)")
    env = dict(os.environ)
    trace = tmp_path / "trace.jsonl"
    tracer.inject(env, trace, lib)
    p = subprocess.run([native.umbench_path(), "run", "srad", "--mode", "managed", "--footprint", "256M",
                        "--iterations", "3000"], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-400:]
    recs = [json.loads(line) for line in trace.read_text().splitlines() if line.startswith("{")]
    phases = {r["what"]: r for r in recs if r.get("k") == "phase"}
    names = [r["n"] for r in recs if r.get("k") == "kernel"]
    for k in ("stats_kernel", "q0_kernel", "coeff_kernel", "update_kernel"):  # SRAD's four launches per iteration
        assert sum(k in n for n in names) == 3000, (k, sum(k in n for n in names))
    assert "exit: writer drained" in phases and any(r.get("k") == "end" for r in recs)
    assert phases["run: buffers written (summed)"]["n"] >= 2


DETACH_PROGRAM = """
import ctypes, faulthandler, sys
faulthandler.enable()
import cupy as cp, numpy as np
lib = ctypes.CDLL(sys.argv[1])
n = 8 << 20  # 32 MiB of floats per array
def migrate():  # managed memory the CPU writes and the GPU then reads: host-to-device migrations
    m = cp.cuda.malloc_managed(n * 4)
    np.ctypeslib.as_array((ctypes.c_float * n).from_address(m.ptr))[:] = 1.0
    total = float(cp.ndarray((n,), cp.float32, m).sum())
    cp.cuda.runtime.deviceSynchronize()
    return m, total
a = migrate()
detached = lib.umtrace_detach()
b = migrate()
attached = lib.umtrace_attach()
c = migrate()
print("RESULT", detached, attached, a[0].ptr, b[0].ptr, c[0].ptr, a[1] + b[1] + c[1])
"""


@pytest.mark.parametrize("nvtx", [False, True])
def test_um_trace_detach_and_attach_leave_out_only_the_detached_period(nvtx, tmp_path, store_path):
    """umtrace_detach takes CUPTI out of the process, umtrace_attach puts it back with every record, unified
    memory's included (bench/overhead_ab.py --toggle tracer measures the tracer's cost this way): the migrations
    of an array the GPU read while detached are not in the trace, those before and after are. Where the program's
    NVTX calls went to CUPTI (profile's default; CuPy's CUB reduction opens NVTX ranges), a detach would leave
    CUPTI's NVTX handlers behind (SIGSEGV at the next range on the H200): it is refused (-3) and the trace goes on."""
    import importlib.util
    import sys
    from umscope.profile import tracer
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("CuPy is not installed")
    lib = tracer.tracer_path()
    if not lib:
        pytest.skip("this build has no libumtrace (CUPTI)")
    keep = tmp_path / "kept.jsonl"
    env = None if nvtx else {"NVTX_INJECTION64_PATH": "/nonexistent-nvtx"}  # NVTX kept from CUPTI
    res = run_cli("profile", "--um-trace", "--keep-trace", str(keep), "--store", store_path, "--json", "--",
                  sys.executable, "-c", DETACH_PROGRAM, lib, env=env, timeout=300)
    tail = keep.read_text().splitlines()[-15:] if keep.exists() else []
    assert res.returncode == 0, (res.stderr[-2000:], tail)
    line = next(l for l in res.stdout.splitlines() if l.startswith("RESULT"))
    detached, attached, a, b, c, total = line.split()[1:]
    ev = [json.loads(l) for l in keep.read_text().splitlines() if l.startswith("{")]
    htod = lambda base: sum(e["v"] for e in ev if e["k"] == "um" and e["c"] == 1  # noqa: E731
                            and int(base) <= e["a"] < int(base) + (32 << 20))
    if nvtx:
        assert (detached, attached, float(total)) == ("-3", "0", 3 * (8 << 20))
        assert any(e["k"] == "nvtx" for e in ev) and not any(e["k"] == "detach" for e in ev)
        assert htod(a) > 0 and htod(b) > 0 and htod(c) > 0  # never detached: every array's migrations
        return
    assert (detached, attached, float(total)) == ("1", "1", 3 * (8 << 20))
    assert [e["k"] for e in ev if e["k"] in ("detach", "attach")] == ["detach", "attach"]
    assert not [e for e in ev if e["k"] == "error"], [e for e in ev if e["k"] == "error"]
    assert htod(a) > 0 and htod(c) > 0 and htod(b) == 0, (htod(a), htod(b), htod(c))
    allocs = {e["a"] for e in ev if e["k"] == "mem" and e.get("op") == 1}
    assert int(a) in allocs and int(c) in allocs and int(b) not in allocs
    notes = json.loads(res.stdout.strip().splitlines()[-1])
    run = next(r for r in notes if r["op"] == "run")
    assert any("detached the tracer 1 time(s)" in n for n in run["notes"]), run["notes"]


@pytest.mark.parametrize("mode,expect", [("managed", "faults"), ("managed-prefetch", "prefetch"), ("explicit", "none")])
def test_um_trace_of_an_unmodified_program(mode, expect, store_path):
    res = run_cli("profile", "--um-trace", "--kernels", "--copies", "--store", store_path, "--json", "--",
                  native.umbench_path(),
                  "run", "qv",
                  "--qubits", "26", "--mode", mode, "--init", "cpu")
    assert res.returncode == 0, res.stderr
    recs = {r["op"]: r for r in json.loads(res.stdout.strip().splitlines()[-1])}
    assert "um_trace" in recs, recs["run"]["notes"]
    um = recs["um_trace"]
    assert um["trace_complete"] and not um["cupti_errors"], um
    assert um["kernels"] > 0
    state = 16 << 26
    if expect == "none":  # explicit copies: no unified-memory traffic at all
        assert um["totals"]["htod"] == 0 and um["totals"]["gpu_fault"] == 0
        assert um["memcpy_bytes"] >= 2 * state
    elif expect == "faults":  # CPU-initialised managed memory moves on the GPU's faults (and the driver's
        # speculative prefetch around them), none of it by a user prefetch. What the docs promise
        # (docs/method.md, "What the unified-memory totals count"): the UVM driver's own counters lose nothing,
        # the whole state moved to the GPU; CUPTI's records are a lower bound of it whose share varies from run to
        # run (35-94% of this state on the H100, 35% on the H200), and the record says that share.
        drv = um["driver_counters"]["all"]["htod"]
        assert drv >= 0.98 * state, um["driver_counters"]
        assert 0 < um["totals"]["htod"] <= drv, (um["totals"], drv)
        assert um["record_shortfall"]["htod"] == pytest.approx(um["totals"]["htod"] / drv)
        assert um["totals"]["gpu_fault"] > 0
        assert um["faults_per_migration"] > 0 and "user" not in um["by_cause"]["htod"]
    else:  # cudaMemPrefetchAsync is a user-caused migration, before any kernel faults
        assert um["by_cause"]["htod"].get("user", 0) >= state and um["totals"]["gpu_fault"] == 0
        assert um["driver_counters"]["all"]["htod"] >= state, um["driver_counters"]


@pytest.mark.parametrize("op,access", [("read", "read"), ("write", "write")])
def test_uvm_events_give_every_fault_entry_the_driver_counts(op, access, store_path):
    """--uvm-events: the driver's own event queue (native/profiler/uvm_events.cpp). Its fault entries are the ones
    the driver's lossless gpu_faults counter counts, one for one; its migrations the bytes its counters count."""
    size = 256 << 20
    res = run_cli("profile", "--uvm-events", "--store", store_path, "--json", "--", native.umbench_path(), "run",
                  "migration", "--kind", "managed,first_touch=cpu", "--op", op, "--bytes", "256M", "--iterations", "2")
    assert res.returncode == 0, res.stderr
    um = {r["op"]: r for r in json.loads(res.stdout.strip().splitlines()[-1])}["um_trace"]
    ev, drv = um["driver_events"], um["driver_counters"]["all"]
    assert ev["on"] and ev["complete"], ev
    assert ev["gpu_fault_entries"] == drv["gpu_faults"] > 0, (ev, drv)
    assert ev["gpu_fault_instances"] >= ev["gpu_fault_entries"] and ev["replays"] >= ev["batches"] > 0
    assert set(ev["faults_by_access"]) == {access}, ev["faults_by_access"]
    # Every page of the buffer faulted or was moved with a faulted neighbour: all of it crossed, once.
    htod = sum(ev["migrated"]["htod"].values())
    assert htod == drv["htod"] and size <= htod <= size + (2 << 20), (ev["migrated"], drv)
    assert "user" not in ev["migrated"]["htod"] and ev["fault_pages"] <= size // 4096
    # Complete events carry the timelines and the per-allocation figures: every byte, on the trace's clock.
    assert um["migrations_source"] == "the driver's events"
    assert sum(a["htod"] for a in um["allocations"]) == htod
    assert "driver events" in res.stderr and "lost nothing" in res.stderr


def _events_env(trace):
    from umscope.profile.tracer import tracer_path
    return dict(os.environ, CUDA_INJECTION64_PATH=tracer_path(), UMSCOPE_TRACE_FILE=str(trace),
                UMSCOPE_UMTRACE_UVM_EVENTS="1")


def test_uvm_events_end_cleanly_on_sigterm(tmp_path):
    """The event queue's thread does not take the program's SIGTERM (whose handler ends the trace and waits for that
    thread), and the tracer's exit never keeps the dying program alive."""
    import signal
    import subprocess
    import time
    trace = tmp_path / "t.jsonl"
    p = subprocess.Popen([native.umbench_path(), "run", "migration", "--kind", "managed,first_touch=cpu", "--bytes",
                          "256M", "--iterations", "100000"], env=_events_env(trace), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and (not trace.exists() or '"uvm_fault"' not in trace.read_text()):
        time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    t0 = time.time()
    assert p.wait(timeout=60) == -signal.SIGTERM
    assert time.time() - t0 < 10  # the tracer's exit never keeps a dying program alive (a 3 s watchdog)
    from umscope.profile.tracer import parse_trace
    ended = '"k":"uvm_events_end"' in trace.read_text()
    assert parse_trace(trace)["complete"] == ('"k":"end"' in trace.read_text())
    print("SIGTERM: the trace", "ended" if ended else "was cut by the watchdog")


def test_peer_gpu_memory_copied_and_read_or_skipped_with_one_gpu():
    gpus = native.native_info()["gpus"]
    recs, status = _out(umbench("run", "copy", "--kind", "device", "--dst", "peer:0", "--bytes", "1M"))
    assert status["status"] == "skipped" and "another GPU" in status["reason"]
    if len(gpus) < 2:
        recs, status = _out(umbench("run", "copy", "--kind", "device", "--dst", "peer:1", "--bytes", "1M"))
        assert status["status"] == "skipped" and "no GPU 1" in status["reason"]
        pytest.skip("one GPU: peer copies need two")
    for engine in ("ce", "sm"):
        for direction in ("uni", "bidir"):
            recs = _one("copy", "--kind", "device", "--dst", "peer:1", "--bytes", "64M,1G", "--engine", engine,
                        "--direction", direction)
            assert all(r["verified"] and r["median"] > 0 for r in recs)
            if engine == "ce" and direction == "bidir":  # each GPU pulls its own direction: they overlap
                big = {r["route"]: r["median"] for r in recs if r["bytes"] == 1 << 30}
                assert big["both"] > 1.5 * max(big["forward"], big["reverse"]), big
    read = _one("gpu-stream", "--kind", "peer:1", "--bytes", "1G", "--ops", "read,write")
    assert [r["op"] for r in read] == ["read", "write"] and all(r["verified"] for r in read)


PROG = r"""
// A small CUDA program of the kind a user brings: scale a vector in managed
// memory (touched first by the CPU) or with explicit copies, with NVTX ranges.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nvtx3/nvToolsExt.h>
__global__ void scale(float* x, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) x[i] *= 2;
}
int main(int argc, char** argv) {
  const size_t n = size_t(64) << 20;  // 256 MiB of floats
  const bool managed = strcmp(argv[1], "explicit") != 0, prefetch = strcmp(argv[1], "prefetch") == 0;
  float *x = nullptr, *h = (float*)malloc(n * 4);
  nvtxRangePushA("init");  // before the first CUDA call: libumtrace starts at NVTX's injection and keeps it
  cudaFree(0);
  if (managed) cudaMallocManaged(&x, n * 4); else cudaMalloc(&x, n * 4);
  float* w = managed ? x : h;
  for (size_t i = 0; i < n; ++i) w[i] = 1.0f;
  nvtxRangePop();
  nvtxRangePushA("compute");
  if (!managed) cudaMemcpy(x, h, n * 4, cudaMemcpyHostToDevice);
  if (prefetch) { cudaMemLocation l{}; l.type = cudaMemLocationTypeDevice; l.id = 0; cudaMemPrefetchAsync(x, n * 4, l, 0, 0); }
  for (int k = 0; k < 3; ++k) scale<<<1024, 256>>>(x, n);
  if (!managed) cudaMemcpy(h, x, n * 4, cudaMemcpyDeviceToHost);
  cudaDeviceSynchronize();
  nvtxRangePop();
  nvtxRangePushA("check");
  for (size_t i = 0; i < n; ++i) if (w[i] != 8.0f) { printf("wrong at %zu\n", i); return 1; }
  nvtxRangePop();
  printf("ok\n");
  return 0;
}
"""


@pytest.fixture(scope="module")
def user_program(tmp_path_factory):
    import shutil
    import subprocess
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not shutil.os.path.exists(nvcc):
        pytest.skip("no nvcc to compile the test program")
    d = tmp_path_factory.mktemp("prog")
    (d / "prog.cu").write_text(PROG)
    res = subprocess.run([nvcc, "-O2", "-o", str(d / "prog"), str(d / "prog.cu"), "-ldl"], capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return str(d / "prog")


@pytest.mark.parametrize("mode", ["managed", "prefetch", "explicit"])
def test_um_trace_and_nvtx_of_a_program_compiled_here(user_program, mode, store_path, tmp_path):
    report = tmp_path / "r.html"
    res = run_cli("profile", "--um-trace", "--copies", "--allocations", "--store", store_path, "--report",
                  str(report), "--json", "--", user_program, mode)
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr
    recs = {r["op"]: r for r in json.loads(res.stdout.strip().splitlines()[-1])}
    um = recs["um_trace"]
    assert um["trace_complete"] and not um["cupti_errors"], um
    assert [r[0] for r in um["ranges"]] == ["init", "compute", "check"], um["ranges"]
    assert um["clock"] == "program" and all(a <= b for _, a, b in um["ranges"])
    size = 256 << 20
    # The UVM driver's counters: the vector moves to the GPU once and back once (the CPU's check), exactly.
    drv = um["driver_counters"]["all"]
    want = 0 if mode == "explicit" else size
    assert abs(drv["htod"] - want) <= 0.02 * size and abs(drv["dtoh"] - want) <= 0.02 * size, drv
    if mode == "explicit":
        assert um["totals"]["htod"] == 0 and um["memcpy_bytes"] == 2 * size
    elif mode == "prefetch":
        assert um["by_cause"]["htod"].get("user", 0) >= size and um["totals"]["gpu_fault"] == 0
    else:
        # Migrations the GPU's accesses caused (not a user prefetch), and the GPU faults that caused them.
        # CUPTI's records of fault-driven migrations are a lower bound (the driver's tools queue drops events
        # when many faults come at once: docs/tracing.md), so the trace states their share of the driver's count.
        assert 0 < um["totals"]["htod"] <= size + (2 << 20) and "user" not in um["by_cause"]["htod"]
        assert um["record_shortfall"]["htod"] == pytest.approx(um["totals"]["htod"] / drv["htod"])
        # The GPU faulted (the driver's counter); CUPTI's fault records are dropped with the migrations under
        # many faults at once (all of them in one H100 run), so they are only checked for consistency.
        assert drv["gpu_faults"] > 0 and sum(um["faults_by_access"].values()) == um["totals"]["gpu_fault"]
        # The CPU's check reads the vector back: device-to-host migrations (on CPU faults, which this
        # CUPTI did not count on the H100 machine: not asserted).
        assert um["totals"]["dtoh"] > 0
        (tl,) = [a for a in um["allocation_timelines"] if a["bytes"] == size]
        assert tl["in"][-1] == um["totals"]["htod"] and len(tl["t"]) > 1
        start, end = um["ranges"][1][1], um["ranges"][1][2]  # migrations to the GPU happen in "compute"
        assert start <= tl["t"][0] <= end + 0.05
    html = report.read_text()
    assert "NVTX range" in html and "compute" in html


def test_um_trace_of_a_third_party_program(store_path):
    torch_ok = __import__("importlib").util.find_spec("torch")
    if not torch_ok:
        pytest.skip("PyTorch is not installed")
    import sys
    code = "import torch; x = torch.ones(1 << 26, device='cuda'); print(float((x * 2).sum()))"
    res = run_cli("profile", "--um-trace", "--store", store_path, "--json", "--", sys.executable, "-c", code,
                  timeout=300)
    assert res.returncode == 0, res.stderr
    recs = {r["op"]: r for r in json.loads(res.stdout.strip().splitlines()[-1])}
    um = recs["um_trace"]
    assert um["totals"]["htod"] == 0  # PyTorch allocates with cudaMalloc: no UM traffic
    # The default leaves CUPTI's kernel, copy and allocation records out (their cost per launch or call): the
    # counts are unknown, and said so.
    assert um["kernels"] is None and any("kernels not recorded" in n for n in recs["run"]["notes"])
    assert um["memcpy_bytes"] is None and um["allocations_made"] is None
    assert recs["run"]["exit_status"] == 0


@pytest.mark.parametrize("kind,want", [
    ("device", "gpu0"),
    ("pinned", "host (pinned)"),
    ("managed,first_touch=cpu,prefetch=gpu", "managed: last prefetch gpu0, preferred none"),
    ("managed,first_touch=cpu,advise=preferred:cpu+accessed_by:gpu", "managed: last prefetch none, preferred cpu"),
    ("managed,first_touch=cpu,advise=preferred:gpu", "managed: last prefetch none, preferred gpu0"),
])
def test_residency_is_what_the_driver_answers(kind, want):
    recs, status = _out(umbench("run", "gpu-stream", "--kind", kind, "--bytes", "16M", "--ops", "read", "--reps", "2"))
    assert status["status"] == "ok", status
    assert recs[0]["residency"] == want


def test_jacobi2d_reverse_on_the_gpu_matches_the_cpu_reference():
    # --reverse changes the order the GPU's sweeps walk the rows (every other sweep bottom-up); the result
    # must not change, and the CPU reference must agree with both.
    args = ("jacobi2d", "--rows", "700", "--cols", "900", "--iterations", "4", "--check", "1")
    fwd, st = _out(umbench("run", *args))
    rev, st2 = _out(umbench("run", *args, "--reverse"))
    assert st["status"] == st2["status"] == "ok", (st, st2)
    assert fwd[0]["reverse"] is False and rev[0]["reverse"] is True
    assert rev[0]["verified"] == fwd[0]["verified"] == "cpu-reference"
    assert rev[0]["checksum"] == fwd[0]["checksum"]


def test_gemm_first_iteration_does_not_carry_cublas_start_up():
    """cuBLAS's first call in a process (85-165 ms on H100/H200) is made before the timed phases, so the mode run
    first is not charged for it: explicit gemm's first iteration (inputs already on the GPU) is an iteration like
    the others, not 800 times one."""
    res = umbench("run", "gemm", "--mode", "explicit", "--footprint", "16M")
    recs, status = _out(res)
    if status["status"] == "skipped":
        pytest.skip(status.get("reason", "gemm skipped"))
    assert status["status"] == "ok", res.stdout[-2000:]
    (rec,) = [r for r in recs if r.get("samples")][:1]
    first, rest = rec["samples"][0], rec["samples"][1:]
    assert first <= 5 * max(rest) + 1.0, rec["samples"]  # ms
