"""What the applications declare for the calibrated model's zero-copy terms (CPU runs, a second in all)."""
import json

import pytest

from conftest import umbench


def _rec(*args):
    res = umbench("run", *args, "--processor", "cpu", "--check", "0")
    recs = [json.loads(l) for l in res.stdout.splitlines() if l.startswith("{")]
    return next(r for r in recs if r["type"] == "record")


def test_bfs_counts_its_random_accesses_from_its_traversal():
    r = _rec("bfs", "--footprint", "4M")
    n, m, reached = r["nodes"], r["edges"], r["reached"]
    # every reached node: cost, two offsets and at least one sector of its list; each of its edges: visited[u]
    assert r["gather_accesses"] >= 3 * reached + m * reached / n * 0.9
    # a mask byte per reached node, and two stores (cost, next) per edge into the next level: at least one
    # such edge per node reached after the source
    assert 3 * reached - 2 <= r["scatter_accesses"] <= reached + 2 * m
    assert r["traffic_bytes"] == 2 * n  # mask and next scanned every level


def test_stencils_and_tiles_declare_what_crosses_the_link():
    h = _rec("himeno", "--footprint", "4M")
    # p over nine lines, 12 coefficient arrays, wrk2 in the copy back: 88 B a point read, 8 written
    assert h["link_read_bytes"] == 11 * h["link_write_bytes"]
    s = _rec("srad", "--footprint", "4M")
    assert s["link_read_bytes"] == 3 * s["link_write_bytes"] == 3 * 4 * s["rows"] * s["cols"]
    t = _rec("hotspot", "--footprint", "4M")
    # pyramid 2: 32 x 32 tiles for 28 x 28 cores
    assert t["link_read_bytes"] == pytest.approx(2 * t["link_write_bytes"] * (32 / 28) ** 2)
    y = _rec("syr2k", "--footprint", "2M")
    n, m = y["dim"], y["inner"]
    blocks = ((n + 63) // 64) ** 2
    assert y["link_runs"] == blocks * 4 * 64 * ((m + 15) // 16) + 2 * n * ((n + 63) // 64)


def test_gemm_declares_cublas_tiles_and_its_link_requests():
    g = _rec("gemm", "--footprint", "2M")
    m, n, k = g["m"], g["n_cols"], g["k"]
    # cuBLAS's 256 x 128 tiles (measured): A read once per 256 columns of C, B once per 128 rows; C written once
    reads = (m * k * -(-n // 256) + k * n * -(-m // 128)) * 4
    assert g["link_read_bytes"] == reads and g["link_write_bytes"] == m * n * 4
    # one link request per 40.7 bytes read (the counters' request count)
    assert g["link_runs"] == pytest.approx(reads / 40.7)


def test_jacobi2d_declares_halo_rows_and_misaligned_sectors():
    j = _rec("jacobi2d", "--footprint", "4M")
    sweep = 4 * j["rows"] * j["cols"]  # one array of floats: two sweeps a step, each reads one and writes the other
    # bands of 32 rows read 34; a block's 256 columns, one float past a sector boundary plus one column beyond
    # each edge, read 34 sectors for 32; a warp's write at a 4-byte offset touches 5 sectors (4 in one row of 8)
    assert j["link_read_bytes"] == pytest.approx(2 * sweep * 34 / 32 * 272 / 256)
    assert j["link_write_bytes"] == pytest.approx(2 * sweep * 39 / 32)
    assert j["traffic_bytes"] == 4 * sweep  # the ideal (each sweep reads one array and writes one) stays the HBM traffic


def test_firsttouch_writes_the_applications_values_when_asked():
    res = umbench("run", "firsttouch", "--kind", "system", "--by", "cpu", "--values", "hash", "--bytes", "4M",
                  "--reps", "1", "--threads", "2")
    recs = [json.loads(l) for l in res.stdout.splitlines() if l.startswith("{")]
    first = next(r for r in recs if r.get("op") == "first-touch")
    assert first["values"] == "hash" and first["threads"] == 2 and first["verified"] == "cpu-reference"
    assert "values" not in next(r for r in recs if r.get("op") == "alloc")
    bad = umbench("run", "firsttouch", "--kind", "managed", "--by", "gpu", "--values", "hash", "--bytes", "4M")
    assert bad.returncode == 2 and "--values hash" in bad.stderr
