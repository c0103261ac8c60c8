"""The Quantum Volume simulator: the CPU implementation against known answers and against Qiskit."""
import json

import numpy as np
import pytest

from conftest import run_cli, umbench


def _qv(tmp_path, *args):
    circ, state = tmp_path / "c.json", tmp_path / "s.bin"
    res = umbench("run", "qv", "--processor", "cpu", "--export-circuit", str(circ), "--dump-state", str(state), *args)
    assert res.returncode == 0, res.stdout + res.stderr
    recs = [json.loads(l) for l in res.stdout.splitlines() if '"type":"record"' in l]
    return recs, circ, state


def test_one_gate_maps_zero_to_the_first_column(tmp_path):
    import qv_circuit as qv
    recs, circ, state = _qv(tmp_path, "--qubits", "2", "--depth", "1")
    c = qv.load_circuit(circ)
    (layer,) = c["layers"]
    (gate,) = layer
    u = qv.gate_matrix(gate)
    assert np.allclose(u.conj().T @ u, np.eye(4), atol=1e-12)  # unitary
    s = qv.load_state(state, 2)
    # |00> -> U|00>: local index 0 is both qubits 0; the state is U's first column, whichever the pair order.
    q0, q1 = gate["qubits"]
    expect = np.zeros(4, complex)
    for local in range(4):
        b0, b1 = local & 1, local >> 1
        expect[(b0 << q0) | (b1 << q1)] = u[local, 0]
    assert np.allclose(s, expect, atol=1e-14)
    assert recs[0]["norm"] == pytest.approx(1.0, abs=1e-12)


def test_circuit_shape_and_seed(tmp_path):
    import qv_circuit as qv
    _, circ, s1 = _qv(tmp_path, "--qubits", "7", "--seed", "5")
    c = qv.load_circuit(circ)
    assert c["depth"] == 7 and len(c["layers"]) == 7
    for layer in c["layers"]:
        used = [q for g in layer for q in g["qubits"]]
        assert len(layer) == 3 and len(set(used)) == 6 and max(used) < 7  # disjoint pairs, one qubit idle
    first = qv.load_state(s1, 7)
    _, _, s2 = _qv(tmp_path, "--qubits", "7", "--seed", "5")
    assert np.array_equal(first, qv.load_state(s2, 7))
    _, _, s3 = _qv(tmp_path, "--qubits", "7", "--seed", "6")
    assert not np.allclose(first, qv.load_state(s3, 7))


@pytest.mark.parametrize("qubits", [2, 5, 8, 12])
def test_matches_qiskit_aer(tmp_path, qubits):
    pytest.importorskip("qiskit_aer", reason="Qiskit Aer is not installed (pip install '.[test]')")
    import qv_circuit as qv
    _, circ, state = _qv(tmp_path, "--qubits", str(qubits))
    c = qv.load_circuit(circ)
    ours = qv.load_state(state, qubits)
    aer = qv.qiskit_statevector(c, "aer")
    assert qv.fidelity(aer, ours) >= 1 - 1e-10
    if qubits <= 8:
        assert qv.fidelity(qv.qiskit_statevector(c, "quantum_info"), ours) >= 1 - 1e-10
    # A wrong qubit order would not match: swap each gate's pair and the fidelity collapses.
    swapped = dict(c, layers=[[dict(g, qubits=g["qubits"][::-1]) for g in layer] for layer in c["layers"]])
    assert qv.fidelity(qv.qiskit_statevector(swapped, "aer"), ours) < 0.9


def test_qasm3_export(tmp_path):
    pytest.importorskip("qiskit", reason="Qiskit is not installed (pip install '.[test]')")
    import qv_circuit as qv
    _, circ, _ = _qv(tmp_path, "--qubits", "4")
    text = qv.qasm3(qv.load_circuit(circ))
    assert text.startswith("OPENQASM 3") and "cx" in text


def test_complex64_checked_against_double_reference(tmp_path):
    recs, _, _ = _qv(tmp_path, "--qubits", "10", "--precision", "complex64")
    circuit = recs[0]
    assert circuit["precision"] == "complex64" and circuit["fidelity"] > 1 - 1e-4
    assert circuit["bytes"] == 8 << 10  # 2^10 amplitudes of 8 bytes


def test_phases_and_bad_input(tmp_path):
    recs, _, _ = _qv(tmp_path, "--qubits", "10")
    c = recs[0]
    assert len(c["samples"]) == 10 and c["gates"] == 50
    assert c["total_ms"] >= c["compute_ms"] > 0 and c["fidelity"] == pytest.approx(1.0, abs=1e-10)
    for args, needle in ((["--qubits", "1"], "--qubits"), (["--qubits", "30", "--check", "1"], "at most 26"),
                         (["--mode", "bogus"], "unknown mode")):
        res = umbench("run", "qv", "--processor", "cpu", *args)
        assert res.returncode == 2 and needle in res.stdout, res.stdout


def test_app_cli_list_and_run_on_cpu(store_path):
    res = run_cli("app", "list")
    assert res.returncode == 0 and "qv" in res.stdout and "managed-prefetch" in res.stdout
    res = run_cli("app", "run", "qv", "--qubits", "12", "--processor", "cpu", "--store", store_path, "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "circuit" in res.stdout and "gate" in res.stdout
    res = run_cli("app", "run", "nope", "--store", store_path)
    assert res.returncode == 2 and "unknown application" in res.stderr
