"""Quantum Volume circuits as umbench writes them (`--export-circuit`), turned
into Qiskit circuits so anyone can replay them, and compared with Qiskit's own
simulation. Qiskit is needed only here (pip install qiskit qiskit-aer)."""

import json

import numpy as np


def load_circuit(path) -> dict:
    with open(path, encoding="utf-8") as f:
        c = json.load(f)
    if c.get("format") != "umscope-qv-1":
        raise ValueError(f"{path}: not a umscope Quantum Volume circuit")
    return c


def gate_matrix(g) -> np.ndarray:
    return np.array([complex(re, im) for re, im in g["u"]]).reshape(4, 4)


def to_qiskit(circuit: dict):
    """A QuantumCircuit with one UnitaryGate per two-qubit gate. Qiskit is little-endian like umscope:
    a gate on [q0, q1] acts on the local index b(q0) + 2 b(q1), which is Qiskit's order for qargs [q0, q1]."""
    from qiskit import QuantumCircuit
    from qiskit.circuit.library import UnitaryGate

    qc = QuantumCircuit(circuit["qubits"], name=f"qv{circuit['qubits']}_seed{circuit['seed']}")
    for layer in circuit["layers"]:
        for g in layer:
            qc.append(UnitaryGate(gate_matrix(g), check_input=False), list(g["qubits"]))
    return qc


def qasm3(circuit: dict) -> str:
    """OpenQASM 3 of the circuit, each unitary decomposed into u and cx gates."""
    from qiskit import qasm3 as q3
    from qiskit import transpile

    return q3.dumps(transpile(to_qiskit(circuit), basis_gates=["u", "cx"], optimization_level=0))


def load_state(path, qubits) -> np.ndarray:
    s = np.fromfile(path, dtype=np.complex128)
    if s.size != 1 << qubits:
        raise ValueError(f"{path}: {s.size} amplitudes, expected 2^{qubits}")
    return s


def fidelity(a: np.ndarray, b: np.ndarray) -> float:
    return float(abs(np.vdot(a, b)) ** 2)


def qiskit_statevector(circuit: dict, simulator="aer") -> np.ndarray:
    qc = to_qiskit(circuit)
    if simulator == "aer":
        from qiskit_aer import AerSimulator

        qc.save_statevector()
        res = AerSimulator(method="statevector", precision="double").run(qc).result()
        return np.asarray(res.get_statevector(), dtype=np.complex128)
    from qiskit.quantum_info import Statevector

    return np.asarray(Statevector(qc).data)
