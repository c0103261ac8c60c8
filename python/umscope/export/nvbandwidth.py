"""The JSON document that `nvbandwidth -j` prints, for the copies whose method matches one of
nvbandwidth's testcases: a pinned host buffer (cuMemHostAlloc there, cudaMallocHost here) and a
cudaMalloc device buffer, copied by the copy engines (cudaMemcpyAsync) or by SM kernels, one
direction alone or both at once. Every other umscope case is listed under "umscope" as waived,
with the reason; nvbandwidth testcases this run did not measure are listed with status "Waived".

Layout (nvbandwidth's json_output.cpp): {"nvbandwidth": {"version", "git_version", "Hostname",
"CUDA Runtime Version", "Driver Version", "GPU Device list", "testcases": [{"name", "status",
"bandwidth_description", "bandwidth_matrix": [[str per GPU]], "sum"}]}}. The figure is the median
of the record's repetitions (nvbandwidth's default, without --useMean); each testcase also says
its buffer size ("bufferSize", MiB, as nvbandwidth's -b) and repetitions ("testSamples", its -i)."""

import json

from umscope import __version__
from umscope.export import device_of, engine

# (source kind, destination kind, direction, route) -> testcase stem; "_ce"/"_sm" is the engine.
_TESTCASES = {
    ("pinned", "device", "uni", "forward"): ("host_to_device_memcpy", "CPU(row) -> GPU(column)"),
    ("device", "pinned", "uni", "forward"): ("device_to_host_memcpy", "CPU(row) <- GPU(column)"),
    ("pinned", "device", "bidir", "forward"): ("host_to_device_bidirectional_memcpy", "CPU(row) <-> GPU(column)"),
    ("pinned", "device", "bidir", "reverse"): ("device_to_host_bidirectional_memcpy", "CPU(row) <-> GPU(column)"),
    ("device", "pinned", "bidir", "forward"): ("device_to_host_bidirectional_memcpy", "CPU(row) <-> GPU(column)"),
    ("device", "pinned", "bidir", "reverse"): ("host_to_device_bidirectional_memcpy", "CPU(row) <-> GPU(column)"),
}
# The testcases this export can fill, in nvbandwidth's order.
TESTCASES = ["host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "host_to_device_bidirectional_memcpy_ce",
             "device_to_host_bidirectional_memcpy_ce", "host_to_device_memcpy_sm", "device_to_host_memcpy_sm",
             "host_to_device_bidirectional_memcpy_sm", "device_to_host_bidirectional_memcpy_sm",
             "device_local_copy"]
MiB = 1 << 20


def _beyond_nvbandwidth(policy) -> bool:
    """A policy other than what nvbandwidth does itself: its host buffers are written by the CPU first
    (umbench's default first_touch=cpu for host kinds, which every pinned record names)."""
    return any(p and p != "first_touch=cpu" for p in (policy or "").split(","))


def testcase_of(rec):
    """(nvbandwidth testcase, description) for a record whose method matches one, else (None, why)."""
    x = rec.get("extra") or {}
    if rec.get("benchmark") != "copy":
        return None, "not a copy benchmark"
    if rec.get("status") != "ok" or rec.get("median") is None or rec.get("unit") != "GB/s":
        return None, f"no bandwidth measured ({rec.get('status')})"
    if _beyond_nvbandwidth(rec.get("policy")) or _beyond_nvbandwidth(x.get("dst_policy")):
        return None, "a placement policy nvbandwidth does not apply"
    eng = engine(rec)
    src, dst = rec.get("kind"), x.get("dst_kind")
    if (src, dst) == ("device", "device") and eng == "ce" and x.get("direction") == "uni":
        return "device_local_copy", "memcpy local GPU(column) bandwidth (GB/s)"
    stem = _TESTCASES.get((src, dst, x.get("direction"), x.get("route")))
    if not stem or eng not in ("ce", "sm"):
        return None, f"no nvbandwidth testcase copies {src} -> {dst} ({x.get('direction')}, {x.get('route')})"
    return f"{stem[0]}_{eng}", f"memcpy {eng.upper()} {stem[1]} bandwidth (GB/s)"


def _fmt(v):
    return f"{v:.6g}"  # as nvbandwidth's std::stringstream (6 significant digits)


def build(run, records) -> dict:
    fp = run.get("fingerprint") or {}
    gpus = fp.get("gpus") or []
    host = (fp.get("host") or {}).get("hostname") or run.get("hostname")
    n_gpus = max([len(gpus)] + [(device_of(r) or 0) + 1 for r in records if device_of(r) is not None])
    chosen, waived = {}, []
    for r in records:
        name, why = testcase_of(r)
        if name is None:
            waived.append({"case": r.get("case_id"), "op": r.get("op"), "bytes": r.get("bytes"), "reason": why})
            continue
        dev = device_of(r) or 0
        # One figure per testcase and GPU: nvbandwidth's one buffer size, here the largest measured.
        key = (name, dev)
        if key not in chosen or (r.get("bytes") or 0) > (chosen[key][1].get("bytes") or 0):
            chosen[key] = (name, r, why)
    testcases = []
    sizes, samples = set(), set()
    for name in TESTCASES:
        cells = {dev: rec for (n, dev), (_, rec, _) in chosen.items() if n == name}
        if not cells:
            testcases.append({"name": name, "status": "Waived"})
            continue
        desc = next(d for (n, _), (_, _, d) in chosen.items() if n == name)
        row = [_fmt(cells[d]["median"]) if d in cells else "N/A" for d in range(n_gpus)]
        buf = sorted({c["bytes"] for c in cells.values()})
        reps = sorted({c["n"] for c in cells.values()})
        sizes.update(buf)
        samples.update(reps)
        testcases.append({
            "name": name, "status": "Passed", "bandwidth_description": desc, "bandwidth_matrix": [row],
            "sum": sum(float(v) for v in row if v != "N/A"),
            "bufferSize": buf[0] / MiB if len(buf) == 1 else [b / MiB for b in buf],
            "testSamples": reps[0] if len(reps) == 1 else reps,
            "useMean": False,
        })
    doc = {
        "version": f"umscope {__version__}",
        "git_version": "",
        "Hostname": host,
        "CUDA Runtime Version": (fp.get("cuda") or {}).get("runtime_version"),
        "Driver Version": (fp.get("cuda") or {}).get("driver"),
        "GPU Device list": [f"{i}: {g.get('name')} ({g.get('pci_bus_id')}): ({host})" for i, g in enumerate(gpus)],
        "testcases": testcases,
    }
    if len(sizes) == 1:
        doc["bufferSize"] = next(iter(sizes)) / MiB
    if len(samples) == 1:
        doc["testSamples"] = next(iter(samples))
        doc["useMean"] = False
    return {"nvbandwidth": doc,
            "umscope": {"run": run.get("id"), "command": run.get("command"),
                        "method": "cudaMemcpyAsync (ce) or a copy kernel (sm), timed with CUDA events; the "
                                  "figure is the median of testSamples repetitions after warm-up, each "
                                  "checked afterwards",
                        "waived": waived}}


def write(runs, records) -> str:
    (run_id, run), = runs.items()
    return json.dumps(build(run, [r for r in records if r["run_id"] == run_id]), indent=2) + "\n"
