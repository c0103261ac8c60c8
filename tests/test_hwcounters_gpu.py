"""Counter-based link bytes against bytes known exactly (issue 18, "Numbers it must reach"): within 3% for
a 1 GiB zero-copy read of pinned memory by a kernel, a 1 GiB copy-engine host-to-device copy and a 1 GiB
managed first-touch migration (umbench's linkbytes family under libumcounters). GPU only."""

import json
import os
import subprocess

import pytest

from umscope import native
from umscope.profile import hwcounters as hc

pytestmark = pytest.mark.gpu
GiB = 1 << 30
REPS = 2
TOL = 0.03


def _run(tmp_path, op, mode, counter_set="link"):
    lib = hc.library_path()
    if lib is None:
        pytest.fail("libumcounters is not built (CUPTI or the driver stub was not found at build time)")
    out = tmp_path / f"{op}-{mode}-{counter_set}.jsonl"
    env = dict(os.environ, CUDA_INJECTION64_PATH=lib, **hc.environment(out, (mode,), counter_set, 1000))
    res = subprocess.run([native.umbench_path(), "run", "linkbytes", "--op", op, "--bytes", "1g", "--reps", str(REPS),
                          "--warmup", "0", "--gap-ms", "100"], capture_output=True, text=True, env=env, timeout=240)
    assert res.returncode == 0, res.stderr
    rec = next(json.loads(line) for line in res.stdout.splitlines() if '"known_link_bytes"' in line)
    parsed = hc.read(out)
    assert not parsed["errors"], parsed["errors"]
    assert parsed["complete"], "the counter file has no end record"
    return rec, parsed


def _in_ops(parsed, rec, name):
    return sum(hc.totals(parsed, 0, (a / 1e9 - 0.005, b / 1e9 + 0.005)).get(name, 0)
               for a, b in zip(rec["wall_start_ns"], rec["wall_end_ns"]))


def _kernels(parsed):
    """The measured read kernels' bytes (the first launch, the warm-up, reads nothing)."""
    reads = [b for name, b in hc.per_launch(parsed, 0) if "read_kernel" in name]
    assert len(reads) == REPS + 1, [name for name, _ in hc.per_launch(parsed, 0)]
    return reads[1:]


def test_zero_copy_read_payload_per_kernel(tmp_path):
    """A kernel reading 1 GiB of pinned memory in place: L2 sectors from its L1s to system memory = 1 GiB
    (range profiler), and PCIe read bytes a little above it (TLP headers)."""
    rec, mem = _run(tmp_path, "zerocopy-read", "kernel", "memory")
    known = rec["known_link_bytes"]
    for b in _kernels(mem):
        assert b["sysmem_read"] == pytest.approx(known, rel=TOL), b
        assert b["dram_read"] < 0.01 * known
    _, link = _run(tmp_path, "zerocopy-read", "kernel", "link")
    for b in _kernels(link):
        assert known <= b["pcie_read"] <= 1.2 * known, b


def test_copy_engine_copy_payload_from_pm_sampling(tmp_path):
    """A 1 GiB cudaMemcpy host to device is no kernel: PM sampling sees it, as 1 GiB written into GPU
    memory during the copies and PCIe read bytes a little above it."""
    rec, parsed = _run(tmp_path, "h2d-copy", "sample")
    known = rec["known_link_bytes"] * REPS
    assert _in_ops(parsed, rec, "dram_write") == pytest.approx(known, rel=TOL)
    assert known <= _in_ops(parsed, rec, "pcie_read") <= 1.2 * known


def test_managed_first_touch_migration_payload(tmp_path):
    """CPU-written managed memory read once by a kernel: the driver migrates 1 GiB, written into GPU memory
    during that kernel (range profiler) and seen by PM sampling in the same interval."""
    rec, mem = _run(tmp_path, "managed-migrate", "kernel", "memory")
    known = rec["known_link_bytes"]
    for b in _kernels(mem):
        assert b["dram_write"] == pytest.approx(known, rel=TOL), b
    rec, parsed = _run(tmp_path, "managed-migrate", "sample")
    assert _in_ops(parsed, rec, "dram_write") == pytest.approx(known * REPS, rel=TOL)
    assert _in_ops(parsed, rec, "pcie_read") >= known * REPS
