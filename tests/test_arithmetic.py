"""The arithmetic of a measurement, with exact expected values: bytes counted per operation and per kind,
median/min/max/spread, size parsing on both sides, unit labels, the profiler's overhead. These run without
a GPU; a bug in any of them changes a number umscope prints."""
import json
import os
import statistics
import subprocess
import sys
import types
from pathlib import Path

import pytest

from conftest import umbench
from umscope.profile import output as profiler
from umscope.errors import UsageError
from umscope.model import bounds
from umscope.report.svg import size_tick
from umscope.sizes import format_size, parse_size

TABLE = Path(__file__).resolve().parent / "sizes_table.txt"


def _table():
    rows = []
    for line in TABLE.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        text, want = line.split("\t")
        rows.append(("" if text == "<empty>" else text, want))
    return rows


def _records(res):
    lines = [json.loads(l) for l in res.stdout.splitlines() if l.startswith("{")]
    assert lines and lines[-1]["type"] == "status" and lines[-1]["status"] == "ok", res.stdout + res.stderr
    return [r for r in lines if r["type"] == "record"]


# --- sizes: one table, two parsers ----------------------------------------------------------------------------

def test_size_table_is_broad():
    rows = _table()
    assert len(rows) >= 60
    assert sum(w == "error" for _, w in rows) >= 25


@pytest.mark.parametrize("text,want", _table())
def test_python_parses_the_shared_size_table(text, want):
    if want == "error":
        with pytest.raises(UsageError):
            parse_size(text)
    else:
        assert parse_size(text) == int(want)


def test_umbench_parses_the_shared_size_table_like_python():
    rows = _table()
    res = umbench("parse-sizes", *[t for t, _ in rows])
    assert res.returncode == 0, res.stderr
    got = res.stdout.split("\n")[:-1]
    assert len(got) == len(rows)
    for (text, want), line in zip(rows, got):
        gtext, gval = line.rsplit("\t", 1)
        assert gtext == text and gval == want, (text, want, gval)


def test_umsim_parses_the_shared_size_table_like_python(tmp_path):
    # umsim echoes --block-bytes exactly (no rounding to pages): one replay of a one-page trace per row.
    from umscope.model import simulate as sim
    trace = tmp_path / "one.umstrace"
    sim.write_trace(trace, [(0, 1)], [0], 4096)
    for text, want in _table():
        res = subprocess.run([sim.umsim_path(), "--trace", str(trace), "--capacity", "1M", "--block-bytes", text],
                             capture_output=True, text=True, timeout=60)
        if want == "error":
            assert res.returncode == 2 and res.stderr.startswith("umsim: error: --block-bytes: "), (text, res.stderr)
        else:
            assert res.returncode == 0, (text, res.stderr)
            assert json.loads(res.stdout)["block_bytes"] == int(want), text


UMALLOC_TABLE = r"""
import ctypes, sys
L = ctypes.CDLL(sys.argv[1])
err, kind = ctypes.create_string_buffer(1024), ctypes.create_string_buffer(256)
for line in sys.stdin.read().split("\n")[:-1]:
    text = line.split("\t")[0]
    if L.umscope_place_configure(b"device", (">=" + text + ":managed").encode(), -1, err, 1024) != 0:
        print(text + "\terror")
        continue
    # The rule's size N is where routing turns: N bytes go to managed, N - 1 to device.
    n = 1
    while True:
        L.umscope_place_route(ctypes.c_size_t(n), kind, 256)
        if kind.value.decode().startswith("managed"):
            break
        n *= 2
    lo, hi = n // 2, n  # device at lo (or lo == 0), managed at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        L.umscope_place_route(ctypes.c_size_t(mid), kind, 256)
        lo, hi = (lo, mid) if kind.value.decode().startswith("managed") else (mid, hi)
    print(text + "\t" + str(hi))
"""


def test_libumalloc_parses_the_shared_size_table_like_python():
    # A placement rule's size, read back from where the library's routing turns (umscope_place_route).
    from umscope import place
    lib = place.library_path()
    if lib is None:
        pytest.skip("this build has no libumalloc (built without the CUDA toolkit)")
    rows = _table()
    res = subprocess.run([sys.executable, "-c", UMALLOC_TABLE, lib], input="".join(t + "\n" for t, _ in rows),
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, UMSCOPE_PLACE_KIND="device", UMSCOPE_PLACE_RULES=""))
    assert res.returncode == 0, res.stderr
    got = res.stdout.split("\n")[:-1]
    assert len(got) == len(rows)
    for (text, want), line in zip(rows, got):
        assert line == text + "\t" + want, (text, want, line)


def test_umbench_host_memory_limit_reads_the_shared_size_table():
    # UMSCOPE_HOST_MEM_LIMIT: a malformed size is a usage error naming the variable; a size is a limit (the
    # case then runs, or is refused when the limit is below its 8 KiB).
    from umscope import native
    for text, want in _table():
        if not text:
            continue  # an empty variable is no limit, as an unset one
        res = subprocess.run([native.umbench_path(), "run", "cpu-stream", "--kind", "system", "--bytes", "8K", "--reps",
                              "1", "--warmup", "0", "--threads", "1", "--ops", "read"], capture_output=True, text=True,
                             timeout=60, env=dict(os.environ, UMSCOPE_HOST_MEM_LIMIT=text))
        status = json.loads(res.stdout.splitlines()[-1])
        if want == "error":
            assert status["status"] == "usage" and "UMSCOPE_HOST_MEM_LIMIT" in status["reason"], (text, status)
        else:
            assert status["status"] == ("refused" if int(want) < 16384 else "ok"), (text, status)


def test_size_units_powers():
    assert parse_size("1K") == 1024 and parse_size("1KB") == 1000
    assert parse_size("1G") == 2**30 and parse_size("1GB") == 10**9
    assert parse_size("3T") == 3 * 2**40 and parse_size("3TB") == 3 * 10**12


# --- unit labels: binary sizes are GiB, rates are GB/s (10^9 bytes per second) ---------------------------------

def test_binary_size_labels():
    assert format_size(2**30) == "1 GiB" and format_size(10**9) == "953.7 MiB"
    assert format_size(4096) == "4 KiB" and format_size(1023) == "1023 B" and format_size(2**40) == "1 TiB"
    assert format_size(3 * 2**19) == "1.5 MiB"
    assert size_tick(2**30) == "1GiB" and size_tick(4096) == "4KiB" and size_tick(10**9) == "954MiB"
    assert size_tick(1536) == "1.5KiB" and size_tick(100) == "100B"


# --- statistics in umbench (median, min, max, spread), exact -------------------------------------------------

@pytest.mark.parametrize("samples,median,spread", [
    ([3, 1, 2, 10], 2.5, 9 / 2.5),          # even n: the mean of the two middle values
    ([5, 1, 4], 4.0, 1.0),                  # odd n: the middle value
    ([7], 7.0, 0.0),
    ([2, 2, 8, 4, 100, 6], 5.0, 98 / 5.0),
    ([1, 3], 2.0, 1.0),
])
def test_umbench_summary_statistics(samples, median, spread):
    res = umbench("run", "selftest", "--mode", "summary", "--samples", ",".join(str(s) for s in samples))
    (rec,) = _records(res)
    assert rec["n"] == len(samples)
    assert rec["median"] == median and rec["value"] == median
    assert rec["min"] == min(samples) and rec["max"] == max(samples)
    assert rec["spread"] == pytest.approx(spread, rel=1e-8)  # (max - min) / median, as stats.hpp says
    assert rec["samples"] == samples


# --- bytes counted per operation: CPU streams (copy x2), QV gates (x2), applications ---------------------------

@pytest.mark.parametrize("reps", [4, 5])
def test_cpu_stream_bytes_and_rates(reps):
    res = umbench("run", "cpu-stream", "--kind", "system", "--bytes", "4MiB", "--threads", "1", "--reps", str(reps),
                  "--warmup", "0", "--ops", "read,write,copy")
    recs = {r["op"]: r for r in _records(res)}
    arrays = {"read": 1, "write": 1, "copy": 2}
    for op, r in recs.items():
        assert r["bytes"] == 4 << 20 and r["unit"] == "GB/s" and r["metric"] == "bandwidth"
        assert r["traffic_bytes"] == arrays[op] * (4 << 20)
        assert len(r["samples"]) == len(r["seconds"]) == r["n"] == reps
        for gbps, secs in zip(r["samples"], r["seconds"]):
            assert gbps == pytest.approx(r["traffic_bytes"] / secs / 1e9, rel=1e-7)  # GB, not GiB
        assert r["median"] == pytest.approx(statistics.median(r["samples"]), rel=1e-7)
        assert r["min"] == min(r["samples"]) and r["max"] == max(r["samples"])
        assert r["spread"] == pytest.approx((r["max"] - r["min"]) / r["median"], rel=1e-6)
        assert r["verified"] == "cpu-reference"


def test_stream_traffic_arithmetic():
    recs = {r["op"]: r for r in _records(umbench("run", "selftest", "--mode", "traffic"))}
    assert {op: r["arrays"] for op, r in recs.items()} == {"read": 1, "write": 1, "copy": 2, "triad": 3}
    assert {op: r["value"] for op, r in recs.items()} == {"read": 1.0, "write": 1.0, "copy": 2.0, "triad": 3.0}


def test_first_touch_and_fault_rates():
    res = umbench("run", "firsttouch", "--kind", "system", "--by", "cpu", "--bytes", "8M", "--reps", "3")
    recs = {r["op"]: r for r in _records(res)}
    for op in ("first-touch", "second-touch"):
        r = recs[op]
        assert r["unit"] == "ms" and r["bytes"] == 8 << 20
        assert r["gbps"] == pytest.approx((8 << 20) / (r["median"] * 1e-3) / 1e9, rel=1e-7)
    res = umbench("run", "faults", "--processor", "cpu", "--kind", "system,first_touch=none", "--bytes", "8M",
                  "--stride", "4K,64K", "--reps", "3", "--threads", "1")
    for r in _records(res):
        assert r["pages"] == (8 << 20) // r["stride"]
        assert r["gbps_of_strides"] == pytest.approx(r["stride"] / (r["median"] * 1e-6) / 1e9, rel=1e-7)


def test_qv_gate_rate_counts_two_passes_over_the_state():
    res = umbench("run", "qv", "--processor", "cpu", "--qubits", "12", "--threads", "1")
    circuit, gate = _records(res)
    state = 2**12 * 16
    assert circuit["bytes"] == gate["bytes"] == state
    assert gate["traffic_bytes"] == 2 * state
    per_layer = 12 // 2
    assert circuit["n"] == 12 and len(gate["samples"]) == 12
    for gbps, ms in zip(gate["samples"], circuit["samples"]):
        assert gbps == pytest.approx(2 * state * per_layer / (ms * 1e-3) / 1e9, rel=1e-7)
    assert gate["gate_ms"] == pytest.approx(statistics.median(circuit["samples"]) / per_layer, rel=1e-7)
    # 12 qubits: compared with the CPU simulator (in double precision) by default; without it, the norm.
    assert circuit["verified"] == gate["verified"] == "cpu-reference" and circuit["fidelity"] > 1 - 1e-10
    res = umbench("run", "qv", "--processor", "cpu", "--qubits", "12", "--threads", "1", "--check", "0")
    circuit, gate = _records(res)
    assert circuit["verified"] == gate["verified"] == "invariant:norm+cpu-layer:4096" and "fidelity" not in circuit
    assert circuit["layer_error"] < 1e-12
    assert circuit["norm"] == pytest.approx(1, abs=1e-9)


def test_triad_application_traffic_flops_and_rate():
    res = umbench("run", "triad", "--processor", "cpu", "--n", "100000", "--iterations", "4", "--threads", "1",
                  "--check", "1")
    (r,) = _records(res)
    n = 100000
    assert r["traffic_bytes"] == 3 * n * 8 and r["flops"] == 2 * n
    assert r["iterations"] == 4 and len(r["samples"]) == 4
    med = statistics.median(r["samples"])
    assert r["median"] == pytest.approx(med, rel=1e-7)
    assert r["bandwidth_gbps"] == pytest.approx(3 * n * 8 / (med * 1e-3) / 1e9, rel=1e-6)
    assert r["gflops"] == pytest.approx(2 * n / (med * 1e-3) / 1e9, rel=1e-6)
    assert r["compute_ms"] == pytest.approx(sum(r["samples"]), rel=1e-6)
    assert r["verified"] == "cpu-reference" and r["checked"] is True and 0 <= r["max_error"] <= 1e-15


def test_application_without_the_full_reference_is_still_checked():
    # --check 0 leaves out only the full reference where it costs more than the application's own check:
    # triad's full check is one pass, so it runs at every size; hotspot's last steps are recomputed at samples.
    res = umbench("run", "triad", "--processor", "cpu", "--n", "1000", "--iterations", "1", "--check", "0")
    (r,) = _records(res)
    assert r["verified"] == "cpu-reference" and r["checked"] is True and 0 <= r["max_error"] <= 1e-15
    res = umbench("run", "hotspot", "--processor", "cpu", "--rows", "40", "--cols", "50", "--check", "0")
    (r,) = _records(res)
    method, size = r["verified"].split(":")
    # the edges, two diagonals and 4096 random draws of the 2000 cells (most of them), no repeats
    assert method == "cpu-sample" and 1500 < int(size) <= 40 * 50 and r["max_error"] <= 1e-5


# --- bytes per resource in the bounds model -------------------------------------------------------------------

FP = {"gpus": [{"name": "X", "addressing": "none", "numa_id": -1, "link": {}}]}
DESC = {"name": "t", "datapaths": {"gpu_memory": (1000.0, "datasheet: t"), "host_memory": (200.0, "datasheet: h"),
                                   "h2d": (50.0, "probe: x"), "d2h": (40.0, "probe: y")}}


@pytest.mark.parametrize("rec,uses", [
    ({"benchmark": "gpu-stream", "op": "read", "kind": "device"}, {"gpu_memory": 1}),
    ({"benchmark": "gpu-stream", "op": "write", "kind": "device"}, {"gpu_memory": 1}),
    ({"benchmark": "gpu-stream", "op": "copy", "kind": "device"}, {"gpu_memory": 2}),
    ({"benchmark": "gpu-stream", "op": "triad", "kind": "device"}, {"gpu_memory": 3}),
    ({"benchmark": "gpu-stream", "op": "read", "kind": "pinned"}, {"h2d": 1, "host_memory": 1}),
    ({"benchmark": "gpu-stream", "op": "write", "kind": "pinned"}, {"d2h": 1, "host_memory": 1}),
    ({"benchmark": "gpu-stream", "op": "copy", "kind": "pinned"}, {"h2d": 1, "d2h": 1, "host_memory": 2}),
    ({"benchmark": "gpu-stream", "op": "triad", "kind": "system"}, {"h2d": 2, "d2h": 1, "host_memory": 3}),
    ({"benchmark": "cpu-stream", "op": "copy", "kind": "system"}, {"host_memory": 2}),
    ({"benchmark": "cpu-stream", "op": "read", "kind": "device"}, {"d2h": 1, "gpu_memory": 1}),
    ({"benchmark": "cpu-stream", "op": "write", "kind": "device"}, {"h2d": 1, "gpu_memory": 1}),
    ({"benchmark": "copy", "op": "ce-copy", "kind": "pinned", "dst_kind": "device"},
     {"host_memory": 1, "gpu_memory": 1, "h2d": 1}),
    ({"benchmark": "copy", "op": "ce-copy", "kind": "device", "dst_kind": "pinned"},
     {"host_memory": 1, "gpu_memory": 1, "d2h": 1}),
    # host to host through the GPU: the link twice, once each way
    ({"benchmark": "copy", "op": "ce-copy", "kind": "pinned", "dst_kind": "system"},
     {"host_memory": 2, "h2d": 1, "d2h": 1}),
    ({"benchmark": "copy", "op": "ce-copy", "kind": "device", "dst_kind": "device"}, {"gpu_memory": 2}),
    ({"benchmark": "copy", "op": "ce-copy", "kind": "pinned", "dst_kind": "device", "route": "both"},
     {"host_memory": 2, "gpu_memory": 2, "h2d": 1, "d2h": 1}),
    ({"benchmark": "qv", "op": "gate", "kind": "device"}, {"gpu_memory": 2}),
    ({"benchmark": "qv", "op": "gate", "kind": "system", "processor": "cpu"}, {"host_memory": 2}),
    ({"benchmark": "contention", "op": "sum", "kind": "pinned"}, {"host_memory": 1}),
])
def test_bytes_per_resource(rec, uses):
    assert {k: v for k, v in bounds.uses(rec, FP).items() if v} == uses


@pytest.mark.parametrize("rec,bound,path", [
    ({"benchmark": "gpu-stream", "op": "copy", "kind": "device"}, 1000.0, "gpu_memory"),
    ({"benchmark": "gpu-stream", "op": "triad", "kind": "device"}, 1000.0, "gpu_memory"),
    ({"benchmark": "gpu-stream", "op": "read", "kind": "pinned"}, 50.0, "h2d"),
    ({"benchmark": "gpu-stream", "op": "write", "kind": "pinned"}, 40.0, "d2h"),
    ({"benchmark": "gpu-stream", "op": "copy", "kind": "pinned"}, 80.0, "d2h"),      # 2 / max(1/50, 1/40, 2/200)
    ({"benchmark": "gpu-stream", "op": "triad", "kind": "pinned"}, 75.0, "h2d"),     # 3 / max(2/50, 1/40, 3/200)
    ({"benchmark": "cpu-stream", "op": "copy", "kind": "system"}, 200.0, "host_memory"),
    ({"benchmark": "copy", "op": "ce-copy", "kind": "pinned", "dst_kind": "system"}, 40.0, "d2h"),
    ({"benchmark": "copy", "op": "ce-copy", "kind": "device", "dst_kind": "device"}, 500.0, "gpu_memory"),
    ({"benchmark": "copy", "op": "ce-copy", "kind": "pinned", "dst_kind": "device", "route": "both"}, 80.0, "d2h"),
    ({"benchmark": "qv", "op": "gate", "kind": "device"}, 1000.0, "gpu_memory"),
])
def test_bounds_exact(rec, bound, path):
    assert bounds.bound(dict(rec, unit="GB/s"), FP, DESC) == (bound, path)


def test_annotate_carries_the_bound_source_and_efficiency():
    recs = bounds.annotate([{"benchmark": "gpu-stream", "op": "read", "kind": "pinned", "unit": "GB/s",
                             "median": 45.0},
                            {"benchmark": "gpu-stream", "op": "copy", "kind": "device", "unit": "GB/s",
                             "median": 800.0}], FP, DESC)
    assert recs[0]["bound"] == 50.0 and recs[0]["efficiency"] == 0.9 and recs[0]["bound_source"] == "probe: x"
    assert recs[1]["bound"] == 1000.0 and recs[1]["efficiency"] == 0.8 and recs[1]["bound_source"] == "datasheet: t"


# --- the profiler: summaries and the sampler's overhead ---------------------------------------------------------

def test_profiler_summary_median_even_and_odd():
    assert profiler._summary([4, 1, 3, 2]) == {"n": 4, "median": 2.5, "min": 1, "max": 4, "value": 4}
    assert profiler._summary([9, 1, 5]) == {"n": 3, "median": 5, "min": 1, "max": 9, "value": 9}


def test_profiler_overhead_is_sampler_cpu_over_wall():
    s = types.SimpleNamespace(series={"rss": [(0.0, 100 << 20), (0.1, 300 << 20), (0.2, 200 << 20), (0.3, 400 << 20)]}, cpu_s=0.25,
                              samples=4, period=0.1)
    recs = profiler._records(["prog"], s, 5.0, 0, "exited 0", {}, [])
    run = next(r for r in recs if r["op"] == "run")
    assert run["sampler_overhead"] == 0.05 and run["sampler_cpu_s"] == 0.25 and run["median"] == 5.0
    rss = next(r for r in recs if r["op"] == "rss")
    assert rss["median"] == 250 << 20 and rss["max"] == 400 << 20 and rss["unit"] == "bytes"
    import io
    out = io.StringIO()
    profiler.print_summary(recs, out)
    assert "sampler CPU 5.00% of the run" in out.getvalue()
    assert "rss              sampled peak 400.0 MiB" in out.getvalue()  # issue 14: a sampled peak says so


def test_bound_sources_by_origin(tmp_path):
    h100 = {"gpus": [{"name": "NVIDIA H100 80GB HBM3", "addressing": "none", "numa_id": -1, "link": {}}]}
    d = bounds.describe(h100)["datapaths"]
    assert d["gpu_memory"] == (3350, "datasheet: NVIDIA H100 Tensor Core GPU datasheet, H100 SXM, GPU memory "
                                     "bandwidth 3.35 TB/s (h100-sxm-pcie5.yaml)")
    assert d["h2d"][1].startswith("spec: PCI Express 5.0") and d["peer_in"][1].startswith("datasheet:")
    probed = dict(h100["gpus"][0], mem_clock_khz=2619000, mem_bus_bits=5120, link={"pcie_gen_max": 5,
                                                                                    "pcie_width_max": 16})
    d = bounds.describe({"gpus": [probed]})["datapaths"]
    assert d["gpu_memory"] == (3352.3, "probe: 2 x 2619 MHz x 5120 bit")
    assert d["h2d"] == (63.02, "probe: PCIe gen 5 x16")
    gh = bounds.describe({"gpus": [{"name": "NVIDIA GH200 480GB", "addressing": "ATS", "link": {}}]})["datapaths"]
    assert gh["host_memory"][1].startswith("paper: Fusco et al. 2024")
    f = tmp_path / "m.yaml"
    f.write_text("name: mine\ndatapaths:\n  host_memory: 123\n  h2d: 10\nsources:\n  h2d: 'measured: nvbandwidth'\n")
    d = bounds.describe(h100, str(f))["datapaths"]
    assert d["host_memory"] == (123.0, f"file: {f}") and d["h2d"] == (10.0, "measured: nvbandwidth")
    rec = bounds.annotate([{"benchmark": "cpu-stream", "op": "copy", "kind": "system", "unit": "GB/s",
                            "median": 61.5}], h100, bounds.describe(h100, str(f)))[0]
    assert rec["bound"] == 123.0 and rec["efficiency"] == 0.5 and rec["bound_source"] == f"file: {f}"
