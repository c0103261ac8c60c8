#!/usr/bin/env python3
"""Quantum Volume figures the QV issue asks for, measured in one run on the
GPU node: at 28-30 qubits, time per two-qubit gate against the floor of
reading and writing the whole state once at the GPU-memory bound, in every
mode; Qiskit Aer GPU and cuStateVec are measured on the same circuit where
they can be imported (the GPU machine has no network to install them).

    python3 bench/qv.py [--qubits 28,30] [--device 0]"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

from umscope import native, probe
from umscope.model import bounds


def umbench(*args):
    return native.run_case("qv", *args)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qubits", default="28,30")
    ap.add_argument("--device", default="0")
    ap.add_argument("--modes", default="explicit,managed,managed-prefetch,pinned")
    a = ap.parse_args()
    fp = probe.probe_gpu()
    desc = bounds.describe(fp)
    bw = desc["datapaths"]["gpu_memory"][0]
    print(f"{fp['gpus'][0]['name']}; GPU-memory bound {bw:.0f} GB/s ({desc['datapaths']['gpu_memory'][1]})")
    print(f"{'qubits':>6} {'mode':<17} {'state':>8} {'total s':>8} {'init ms':>9} {'compute s':>9} {'ms/gate':>8} "
          f"{'floor ms':>8} {'of floor':>8} {'gate GB/s':>9}")
    for n in [int(x) for x in a.qubits.split(",")]:
        state = 16 << n
        floor_ms = 2 * state / (bw * 1e9) * 1e3
        for mode in a.modes.split(","):
            if mode in ("pinned", "registered") and n > 24:
                continue  # link-bound: 15 s per circuit at 24 qubits already (see the default suite)
            with tempfile.TemporaryDirectory() as d:
                t0 = time.time()
                recs, status = umbench("--qubits", str(n), "--mode", mode, "--device", a.device,
                                       "--export-circuit", f"{d}/c.json")
                if status["status"] != "ok":
                    print(f"{n:>6} {mode:<17} {status['status']}: {status.get('reason')}")
                    continue
                c, g = recs
                print(f"{n:>6} {mode:<17} {state / 2**30:>6.1f}Gi {c['total_ms'] / 1e3:>8.2f} {c['init_ms']:>9.1f} "
                      f"{c['compute_ms'] / 1e3:>9.2f} {g['gate_ms']:>8.2f} {floor_ms:>8.2f} "
                      f"{100 * floor_ms / g['gate_ms']:>7.0f}% {g['median']:>9.0f}  (wall {time.time() - t0:.0f} s)")
    compare_aer(a, fp)


def compare_aer(a, fp):
    """Qiskit Aer on the GPU, same circuit (our exported one), if its GPU build is importable."""
    try:
        from qiskit_aer import AerSimulator
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        import qv_circuit as qv  # the circuit reader the tests use (tests/qv_circuit.py)
    except ImportError as exc:
        print(f"Qiskit Aer: not importable here ({exc}); no comparison run")
        return
    if "GPU" not in AerSimulator().available_devices():
        print("Qiskit Aer: installed without GPU support (qiskit-aer-gpu); no comparison run")
        return
    n = int(a.qubits.split(",")[0])
    with tempfile.TemporaryDirectory() as d:
        recs, status = umbench("--qubits", str(n), "--mode", "explicit", "--device", a.device,
                               "--export-circuit", f"{d}/c.json")
        if status["status"] != "ok":
            print(f"umscope qv {n}: {status}")
            return
        qc = qv.to_qiskit(qv.load_circuit(f"{d}/c.json"))
    qc.save_statevector()
    sim = AerSimulator(method="statevector", device="GPU", precision="double")
    t0 = time.time()
    res = sim.run(qc, fusion_enable=False).result()
    aer_s = time.time() - t0
    ours = recs[0]["total_ms"] / 1e3
    print(f"Qiskit Aer GPU, {n} qubits, same circuit: {aer_s:.2f} s wall (its own time "
          f"{res.time_taken:.2f} s); umscope explicit {ours:.2f} s: ratio Aer/umscope {aer_s / ours:.2f}")


if __name__ == "__main__":
    main()
