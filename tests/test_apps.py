"""The application suite. CPU implementations against independent NumPy
references computed from the inputs the application dumps, and against known
answers; the CLI; on a GPU, every application in every mode against its CPU
reference, and all modes agreeing bit for bit."""
import json
from collections import deque
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli, umbench
from umscope import apps


def _run(tmp_path, app, *args, processor="cpu"):
    d = tmp_path / app
    d.mkdir(exist_ok=True)
    res = umbench("run", app, "--processor", processor, "--dump", str(d), *args)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = [json.loads(l) for l in res.stdout.splitlines()]
    assert lines[-1]["status"] == "ok", lines[-1]
    (rec,) = [r for r in lines if r["type"] == "record"]
    arrays = {}
    for f in Path(d).iterdir():
        name, dtype = f.name.rsplit(".", 1)
        arrays[name] = np.fromfile(f, dtype=dtype)
    return rec, arrays


def test_triad_is_b_plus_three_c(tmp_path):
    rec, a = _run(tmp_path, "triad", "--n", "1001", "--iterations", "2")
    assert rec["elements"] == 1000  # whole 16-byte pairs
    assert np.array_equal(a["a"], a["b"] + 3.0 * a["c"])
    assert rec["iterations"] == 2 and rec["traffic_bytes"] == 3 * 8 * 1000
    assert 0 <= a["b"].min() and a["b"].max() < 1 and not np.array_equal(a["b"], a["c"])


def test_conv2d_matches_numpy(tmp_path):
    rec, a = _run(tmp_path, "conv2d", "--rows", "37", "--cols", "53", "--iterations", "1")
    A = a["A"].reshape(37, 53).astype(np.float64)
    c = np.array([[0.2, 0.5, -0.8], [-0.3, 0.6, -0.9], [0.4, 0.7, 0.10]])  # c[di+1][dj+1]
    want = np.zeros_like(A)
    for di in (-1, 0, 1):
        for dj in (-1, 0, 1):
            want[1:-1, 1:-1] += c[di + 1, dj + 1] * A[1 + di:36 + di, 1 + dj:52 + dj]
    assert np.allclose(a["B"].reshape(37, 53), want, rtol=0, atol=1e-5)
    assert np.all(a["B"].reshape(37, 53)[0] == 0)


def test_jacobi2d_matches_numpy(tmp_path):
    rows, cols, steps = 29, 41, 4
    rec, a = _run(tmp_path, "jacobi2d", "--rows", str(rows), "--cols", str(cols), "--iterations", str(steps))
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    A = ((i * (j + 2) + 2) / cols).astype(np.float64)
    B = ((i * (j + 3) + 3) / cols).astype(np.float64)

    def sweep(s, d):
        d[1:-1, 1:-1] = 0.2 * (s[1:-1, 1:-1] + s[1:-1, :-2] + s[1:-1, 2:] + s[2:, 1:-1] + s[:-2, 1:-1])

    for _ in range(steps):
        sweep(A, B)
        sweep(B, A)
    assert np.allclose(a["A"].reshape(rows, cols), A, rtol=1e-5)
    assert np.allclose(a["B"].reshape(rows, cols), B, rtol=1e-5)
    # --reverse only changes the GPU kernels' order: tested on the GPU (test_gpu.py).


def test_hotspot_matches_numpy(tmp_path):
    rows, cols, launches, pyr = 23, 31, 3, 2
    rec, a = _run(tmp_path, "hotspot", "--rows", str(rows), "--cols", str(cols), "--iterations", str(launches),
                  "--pyramid", str(pyr))
    p = a["power"].reshape(rows, cols).astype(np.float64)
    t = a["temp0"].reshape(rows, cols).astype(np.float64)
    for _ in range(launches * pyr):
        pad = np.pad(t, 1, mode="edge")  # a missing neighbour is the cell itself
        n, s, w, e = pad[:-2, 1:-1], pad[2:, 1:-1], pad[1:-1, :-2], pad[1:-1, 2:]
        t = t + rec["step_div_cap"] * (p + (s + n - 2 * t) * rec["ry1"] + (e + w - 2 * t) * rec["rx1"]
                                       + (rec["ambient"] - t) * rec["rz1"])
    assert rec["steps"] == launches * pyr
    assert np.allclose(a["result"].reshape(rows, cols), t, rtol=1e-5)
    assert not np.allclose(t, a["temp0"].reshape(rows, cols))  # it did move


def test_srad_matches_numpy(tmp_path):
    rows, cols, iters, lam = 19, 27, 3, 0.5
    rec, a = _run(tmp_path, "srad", "--rows", str(rows), "--cols", str(cols), "--iterations", str(iters))
    J = a["J0"].reshape(rows, cols).astype(np.float64)
    assert np.all((J >= 1) & (J < np.e))
    for _ in range(iters):
        q0 = J.var() / J.mean() ** 2
        pad = np.pad(J, 1, mode="edge")
        dn, ds, dw, de = pad[:-2, 1:-1] - J, pad[2:, 1:-1] - J, pad[1:-1, :-2] - J, pad[1:-1, 2:] - J
        g2 = (dn ** 2 + ds ** 2 + dw ** 2 + de ** 2) / J ** 2
        L = (dn + ds + dw + de) / J
        q = (0.5 * g2 - L * L / 16) / (1 + 0.25 * L) ** 2
        c = np.clip(1 / (1 + (q - q0) / (q0 * (1 + q0))), 0, 1)
        cp = np.pad(c, 1, mode="edge")
        J = J + 0.25 * lam * (c * dn + cp[2:, 1:-1] * ds + c * dw + cp[1:-1, 2:] * de)
    assert np.allclose(a["J"].reshape(rows, cols), J, rtol=1e-4)


def test_himeno_matches_numpy(tmp_path):
    I, J, K, iters = 9, 7, 11, 3
    rec, a = _run(tmp_path, "himeno", "--dims", f"{I},{J},{K}", "--iterations", str(iters))
    i = np.arange(I).reshape(I, 1, 1)
    p = np.broadcast_to((i * i) / (I - 1) ** 2, (I, J, K)).astype(np.float64).copy()
    a0 = a1 = a2 = c0 = c1 = c2 = bnd = 1.0
    a3, omega = 1 / 6, 0.8
    for _ in range(iters):
        C = p[1:-1, 1:-1, 1:-1]
        s0 = (a0 * p[2:, 1:-1, 1:-1] + a1 * p[1:-1, 2:, 1:-1] + a2 * p[1:-1, 1:-1, 2:]
              + c0 * p[:-2, 1:-1, 1:-1] + c1 * p[1:-1, :-2, 1:-1] + c2 * p[1:-1, 1:-1, :-2])  # b = 0, wrk1 = 0
        ss = (s0 * a3 - C) * bnd
        gosa = float((ss * ss).sum())
        p[1:-1, 1:-1, 1:-1] = C + omega * ss
    assert np.allclose(a["p"].reshape(I, J, K), p, rtol=1e-5)
    assert rec["gosa"] == pytest.approx(gosa, rel=1e-4)
    assert rec["dims"] == f"{I}x{J}x{K}"


def test_pathfinder_matches_numpy(tmp_path):
    rows, cols = 57, 301
    rec, a = _run(tmp_path, "pathfinder", "--rows", str(rows), "--cols", str(cols), "--iterations", "4")
    w = a["wall"].reshape(rows, cols).astype(np.int64)
    assert w.min() == 0 and w.max() == 9
    cost = w[0].copy()
    for r in range(1, rows):
        left = np.concatenate([[cost[0]], cost[:-1]])
        right = np.concatenate([cost[1:], [cost[-1]]])
        cost = w[r] + np.minimum(np.minimum(left, cost), right)
    assert np.array_equal(a["result"], cost)
    assert rec["min_cost"] == cost.min() and rec["iterations"] == 4


def test_mvt_and_gesummv_match_numpy(tmp_path):
    n, iters = 173, 3
    rec, a = _run(tmp_path, "mvt", "--n", str(n), "--iterations", str(iters))
    A = a["A"].reshape(n, n).astype(np.float64)
    x1, x2 = a["x1_0"].astype(np.float64), a["x2_0"].astype(np.float64)
    for _ in range(iters):
        x1 = x1 + A @ a["y1"]
        x2 = x2 + A.T @ a["y2"]
    assert np.allclose(a["x1"], x1, rtol=1e-5, atol=1e-4) and np.allclose(a["x2"], x2, rtol=1e-5, atol=1e-4)
    rec, g = _run(tmp_path, "gesummv", "--n", str(n), "--iterations", "1")
    y = 1.5 * g["A"].reshape(n, n).astype(np.float64) @ g["x"] + 1.2 * g["B"].reshape(n, n).astype(np.float64) @ g["x"]
    assert np.allclose(g["y"], y, rtol=1e-5, atol=1e-4)


def test_syr2k_matches_numpy(tmp_path):
    n, m, iters = 45, 29, 2
    rec, a = _run(tmp_path, "syr2k", "--n", str(n), "--m", str(m), "--iterations", str(iters))
    A, B = a["A"].reshape(n, m).astype(np.float64), a["B"].reshape(n, m).astype(np.float64)
    C = a["C0"].reshape(n, n).astype(np.float64)
    for _ in range(iters):
        C = 1.5 * (A @ B.T + B @ A.T) + 1.2 * C
    assert np.allclose(a["C"].reshape(n, n), C, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("precision,dtype,panel", [("fp64", np.float64, "16K"), ("fp32", np.float32, "10K")])
def test_gemm_matches_numpy_and_panels_change_nothing(tmp_path, precision, dtype, panel):
    m, n, k = 37, 29, 51
    args = ["--m", str(m), "--n", str(n), "--k", str(k), "--precision", precision, "--iterations", "1"]
    rec, a = _run(tmp_path, "gemm", *args)
    want = a["A"].reshape(m, k).astype(np.float64) @ a["B"].reshape(k, n).astype(np.float64)
    assert a["C"].dtype == dtype
    assert np.allclose(a["C"].reshape(m, n), want, rtol=1e-6, atol=1e-6)
    assert rec["flops"] == 2 * m * n * k and rec["precision"] == precision
    rec2, _ = _run(tmp_path, "gemm", *args, "--variant", "panels", "--panel-memory", panel)
    assert 1 <= rec2["panel_rows"] < m and rec2["checksum"] == rec["checksum"]


def test_needle_matches_a_python_dp_with_blosum62(tmp_path):
    n, gap = 48, 10
    rec, a = _run(tmp_path, "needle", "--n", "50", "--penalty", str(gap))  # rounded down to 48
    assert rec["length"] == n
    w = n + 1
    ref = a["reference"].reshape(w, w)
    sa, sb = a["seq_a"], a["seq_b"]
    # The reference is a function of the residue pair, and BLOSUM62 is symmetric with known diagonal entries.
    table = {}
    for i in range(n):
        for j in range(n):
            table.setdefault((sa[i], sb[j]), set()).add(int(ref[i + 1, j + 1]))
    assert all(len(v) == 1 for v in table.values())
    for (x, y), v in table.items():
        if (y, x) in table:
            assert table[(y, x)] == v
    known = {0: 4, 4: 9, 8: 8, 14: 7, 17: 11, 18: 7}  # A, C, H, P, W, Y with themselves
    for r, v in known.items():
        if (r, r) in table:
            assert table[(r, r)] == {v}
    S = np.zeros((w, w), np.int64)
    S[0, :] = -gap * np.arange(w)
    S[:, 0] = -gap * np.arange(w)
    for i in range(1, w):
        for j in range(1, w):
            S[i, j] = max(S[i - 1, j - 1] + ref[i, j], S[i, j - 1] - gap, S[i - 1, j] - gap)
    assert np.array_equal(a["score"].reshape(w, w), S)
    assert rec["alignment_score"] == S[n, n]


def test_bfs_matches_a_python_bfs(tmp_path):
    nodes = 3000
    rec, a = _run(tmp_path, "bfs", "--nodes", str(nodes), "--degree", "3")
    off, edges = a["offsets"], a["edges"]
    assert off[0] == 0 and len(edges) == off[-1] == rec["edges"]
    assert np.all(np.diff(off) >= 1) and np.all(np.diff(off) <= 5)
    dist = np.full(nodes, -1)
    dist[0] = 0
    q = deque([0])
    while q:
        v = q.popleft()
        for u in edges[off[v]:off[v + 1]]:
            if dist[u] < 0:
                dist[u] = dist[v] + 1
                q.append(u)
    assert np.array_equal(a["cost"], dist)
    assert rec["reached"] == int((dist >= 0).sum()) and rec["depth"] == dist.max()
    assert rec["levels"] == dist.max() + 1


def test_same_seed_same_data_other_seed_other_data(tmp_path):
    r1, _ = _run(tmp_path, "gesummv", "--n", "64", "--iterations", "1")
    r2, _ = _run(tmp_path, "gesummv", "--n", "64", "--iterations", "1", "--threads", "1")
    r3, _ = _run(tmp_path, "gesummv", "--n", "64", "--iterations", "1", "--seed", "2")
    assert r1["checksum"] == r2["checksum"] != r3["checksum"]


def test_phases_and_convention_fields(tmp_path):
    rec, _ = _run(tmp_path, "conv2d", "--rows", "64", "--cols", "64", "--iterations", "3")
    for k in ("alloc_ms", "init_ms", "transfer_ms", "compute_ms", "back_ms", "free_ms", "total_ms"):
        assert rec[k] >= 0, k
    assert rec["compute_ms"] == pytest.approx(sum(rec["samples"]), rel=1e-6)
    assert rec["total_excl_init_ms"] == pytest.approx(rec["total_ms"] - rec["init_ms"], rel=1e-9)
    # conv2d checks every element against the CPU reference at every size, on either processor.
    assert rec["mode"] == "cpu" and rec["verified"] == "cpu-reference" and rec["verify_ms"] >= 0


def test_bad_input_is_a_usage_error():
    for args in (["triad", "--n", "1"], ["jacobi2d", "--rows", "2"], ["hotspot", "--pyramid", "16"],
                 ["gemm", "--precision", "fp8"], ["himeno", "--size", "XXL"], ["bfs", "--degree", "0"]):
        res = umbench("run", *args, "--processor", "cpu")
        assert res.returncode == 2, (args, res.stdout, res.stderr)


def test_cli_app_list_and_run(store_path):
    res = run_cli("app", "list")
    assert res.returncode == 0
    for name in apps.APPS:
        assert name in res.stdout
    assert "managed-advice" in res.stdout
    res = run_cli("app", "run", "pathfinder", "--processor", "cpu", "--rows", "40", "--cols", "500", "--json",
                  "--store", store_path)
    assert res.returncode == 0, res.stderr
    res = run_cli("app", "run", "needle", "--rows", "5", "--store", store_path)
    assert res.returncode == 2 and "does not take --rows" in res.stderr
    res = run_cli("app", "run", "sgemm", "--mode", "all", "--n", "64", "--dry-run", "--store", store_path)
    assert res.returncode == 0 and res.stdout.count("precision=fp32") == len(apps.MODES)


def test_default_suite_has_every_app_in_every_mode():
    cases = apps.default_cases()
    for name, app in apps.APPS.items():
        bench = apps.bench_of(name)
        modes = {c.params.get("mode") for c in cases if c.benchmark == bench}
        assert modes == (set(apps.MODES) if app.suite else set()), name  # llm: not in the default suite


# --- on the GPU ---------------------------------------------------------------------------------------------

SMALL = {"bfs": ["--nodes", "200000"], "needle": ["--n", "1024"], "pathfinder": ["--rows", "300", "--cols", "20000"],
         "hotspot": ["--rows", "500", "--cols", "700"], "srad": ["--rows", "400", "--cols", "300"],
         "triad": ["--n", "1000000"], "conv2d": ["--rows", "900", "--cols", "1100"],
         "jacobi2d": ["--rows", "700", "--cols", "900", "--reverse"], "mvt": ["--n", "1500"],
         "gesummv": ["--n", "1500"], "syr2k": ["--n", "300", "--m", "200"], "gemm": ["--n", "512"],
         "himeno": ["--size", "S"]}


@pytest.mark.gpu
@pytest.mark.parametrize("app", sorted(SMALL))
def test_every_mode_matches_the_cpu_reference_and_the_modes_agree(app):
    sums = {}
    for mode in apps.MODES:
        res = umbench("run", app, "--mode", mode, "--check", "1", *SMALL[app], timeout=600)
        lines = [json.loads(l) for l in res.stdout.splitlines()]
        status = lines[-1]
        if mode == "system" and status["status"] == "skipped":
            assert "HMM" in status["reason"] or "ATS" in status["reason"]
            continue
        assert status["status"] == "ok", (mode, status, res.stderr)
        (rec,) = [r for r in lines if r["type"] == "record"]
        assert rec["checked"] is True and rec["mode"] == mode
        sums[mode] = rec["checksum"]
    assert len(set(sums.values())) == 1, sums  # the same kernels on the same data: the same bits


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp64", "tf32", "fp16"])
def test_gemm_precisions_and_placement(precision):
    res = umbench("run", "gemm", "--precision", precision, "--n", "512", "--check", "1", "--place-a", "pinned",
                  "--place-b", "managed", timeout=600)
    status = json.loads(res.stdout.splitlines()[-1])
    assert status["status"] == "ok", (status, res.stderr)
    rec = json.loads(res.stdout.splitlines()[0])
    assert rec["place_a"] == "pinned" and rec["place_b"] == "managed" and rec["place_c"] == "mode"


# The check each application runs where the full CPU reference does not (--check 0, as above 64 MiB), at a
# size small enough for the CPU: (arguments, the `verified` it must name).
SAMPLED = {
    "triad": (["--n", "100000"], "cpu-reference"),
    "pathfinder": (["--rows", "60", "--cols", "3000"], "cpu-reference"),
    "conv2d": (["--rows", "300", "--cols", "200"], "cpu-reference"),
    "mvt": (["--n", "300"], "cpu-reference"),
    "gesummv": (["--n", "300"], "cpu-reference"),
    "needle": (["--n", "320"], "invariant:nw-recurrence"),
    "bfs": (["--nodes", "20000"], "invariant:bfs-edges"),
    "hotspot": (["--rows", "300", "--cols", "200"], "cpu-sample:"),
    "srad": (["--rows", "300", "--cols", "200"], "cpu-sample:"),
    "jacobi2d": (["--rows", "300", "--cols", "200"], "cpu-sample:"),
    "himeno": (["--dims", "20,18,40"], "cpu-sample:"),
    "syr2k": (["--n", "150", "--m", "70"], "freivalds:2+cpu-sample:"),
    "gemm": (["--n", "150"], "freivalds:2+cpu-sample:"),
}


@pytest.mark.parametrize("app", sorted(SAMPLED))
def test_every_app_checks_its_result_without_the_full_reference(app):
    args, want = SAMPLED[app]
    args = args + ([] if app in ("bfs", "needle") else ["--iterations", "3"])
    res = umbench("run", app, "--processor", "cpu", "--check", "0", *args, timeout=300)
    lines = [json.loads(l) for l in res.stdout.splitlines()]
    assert lines[-1]["status"] == "ok", (lines[-1], res.stderr)
    (rec,) = [r for r in lines if r["type"] == "record"]
    assert rec["verified"].startswith(want) and rec["verify_ms"] >= 0 and rec["checked"] is True
    if want.endswith(":"):  # a sample: every cell of the edges and of two diagonals is in it
        size = int(rec["verified"].rsplit(":", 1)[1])
        rows, cols = (18 * 20, 40) if app == "himeno" else (int(args[1]), int(args[3]) if args[2] == "--cols" else 150)
        assert size >= min(rows * cols, 2 * max(rows, cols))
    # --check 1: the full reference, and the same result
    full = umbench("run", app, "--processor", "cpu", "--check", "1", *args, timeout=300)
    flines = [json.loads(l) for l in full.stdout.splitlines()]
    (frec,) = [r for r in flines if r["type"] == "record"]
    assert frec["verified"] == "cpu-reference" and frec["checksum"] == rec["checksum"]


# The full CPU reference (--check 1) on the CPU path: each application's reference has its own per-point
# formula, not the functions the kernels and the CPU path share, so a wrong formula in those fails here too
# (tests/mutants/run.py's cc-*-cell, -coeff, -avg5, -point, -rule, -best mutants).
FULL = dict(SAMPLED, qv=(["--qubits", "10"], "cpu-reference"))


@pytest.mark.parametrize("app", sorted(FULL))
def test_every_app_checks_its_result_with_the_full_reference(app):
    args = FULL[app][0] + ([] if app in ("bfs", "needle", "qv") else ["--iterations", "3"])
    res = umbench("run", app, "--processor", "cpu", "--check", "1", *args, timeout=300)
    lines = [json.loads(l) for l in res.stdout.splitlines()]
    assert lines[-1]["status"] == "ok", (lines[-1], res.stderr)
    recs = [r for r in lines if r["type"] == "record"]
    assert recs and all(r["verified"] == "cpu-reference" for r in recs)


def test_hotspot_stays_physical_on_a_large_grid(tmp_path):
    # Rodinia's time step is unstable beyond about 1390 cells a side on its 16 mm chip (the finest ripple grows
    # each step: 1e27 K at 4730 a side); umscope bounds the step (hotspot.cu's model()). 3000 x 3000 cells, 8
    # steps: each new temperature is a weighted average of old ones and the ambient plus the power's heat, so
    # every cell stays between the coolest start (less what the ambient draws) and the hottest (plus the heat).
    rows = cols = 3000
    rec, a = _run(tmp_path, "hotspot", "--rows", str(rows), "--cols", str(cols), "--iterations", "4",
                  "--check", "0")
    t0, t = a["temp0"].astype(np.float64), a["result"].astype(np.float64)
    steps, k = rec["steps"], rec["step_div_cap"]
    assert steps == 8 and np.isfinite(t).all() and 323 <= t0.min() and t0.max() <= 343
    heat = steps * k * float(a["power"].max())
    drawn = steps * k * rec["rz1"] * (t0.min() - rec["ambient"])
    assert t0.min() - drawn - 1e-3 <= t.min() and t.max() <= t0.max() + heat + 1e-3, (t.min(), t.max())
    assert 300 < t.min() and t.max() < 400
    # the step keeps half of a cell's own temperature (Rodinia's is about 9 times larger at this size)
    assert k * (2 * rec["rx1"] + 2 * rec["ry1"] + rec["rz1"]) == pytest.approx(0.5, rel=1e-5)
    assert not np.allclose(t, t0)  # it did move


def test_qv_beyond_the_cpu_simulator_checks_the_norm_and_an_exact_layer():
    res = umbench("run", "qv", "--processor", "cpu", "--qubits", "13", "--check", "0", "--precision", "complex64")
    lines = [json.loads(l) for l in res.stdout.splitlines()]
    assert lines[-1]["status"] == "ok", lines[-1]
    circuit = [r for r in lines if r.get("op") == "circuit"][0]
    assert circuit["verified"] == "invariant:norm+cpu-layer:8192" and circuit["layer_error"] < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("app", sorted(SAMPLED))
def test_every_mode_passes_the_sampled_check_with_the_full_references_result(app):
    args, want = SAMPLED[app]
    args = args + ([] if app in ("bfs", "needle") else ["--iterations", "3"])
    for mode in ("explicit", "managed", "pinned"):
        out = {}
        for check in ("0", "1"):
            res = umbench("run", app, "--mode", mode, "--check", check, *args, timeout=600)
            lines = [json.loads(l) for l in res.stdout.splitlines()]
            assert lines[-1]["status"] == "ok", (mode, check, lines[-1], res.stderr)
            (out[check],) = [r for r in lines if r["type"] == "record"]
        assert out["0"]["verified"].startswith(want) and out["1"]["verified"] == "cpu-reference", mode
        assert out["0"]["checksum"] == out["1"]["checksum"], mode
