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


@pytest.mark.parametrize("op", ["zerocopy-read", "h2d-copy", "managed-migrate"])
def test_sampled_link_bytes_match_the_known_bytes(tmp_path, op):
    """PM sampling over the whole run: host-to-device PCIe bytes = REPS x 1 GiB (copies and migrations are
    not kernels: this is the source that sees them)."""
    rec, parsed = _run(tmp_path, op, "sample")
    known = rec["known_link_bytes"] * REPS
    tot = hc.totals(parsed, 0)
    assert tot.get("pcie_read", 0) == pytest.approx(known, rel=TOL), tot
    # and the bytes lie in the operations' intervals (the CUPTI clock put on the wall clock)
    inside = sum(hc.totals(parsed, 0, (a / 1e9 - 0.005, b / 1e9 + 0.005)).get("pcie_read", 0)
                 for a, b in zip(rec["wall_start_ns"], rec["wall_end_ns"]))
    assert inside == pytest.approx(known, rel=TOL)


@pytest.mark.parametrize("op", ["zerocopy-read", "managed-migrate"])
def test_per_kernel_link_bytes_match_the_known_bytes(tmp_path, op):
    """The range profiler, one range per kernel: each measured read kernel moved 1 GiB host to device."""
    rec, parsed = _run(tmp_path, op, "kernel", "link")
    reads = [b for name, b in hc.per_launch(parsed, 0) if "read_kernel" in name]
    assert len(reads) == REPS + 1  # the warm-up launch reads nothing
    for b in reads[1:]:
        assert b["pcie_read"] == pytest.approx(rec["known_link_bytes"], rel=TOL), b
    assert reads[0]["pcie_read"] < 1 << 20


def test_zero_copy_reads_are_system_memory_sectors_at_l2(tmp_path):
    rec, parsed = _run(tmp_path, "zerocopy-read", "kernel", "memory")
    reads = [b for name, b in hc.per_launch(parsed, 0) if "read_kernel" in name][1:]
    assert len(reads) == REPS
    for b in reads:
        assert b["sysmem_read"] == pytest.approx(rec["known_link_bytes"], rel=TOL), b
        assert b["dram_read"] < 0.01 * rec["known_link_bytes"]
