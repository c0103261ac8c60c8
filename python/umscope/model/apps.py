"""Each application's model facts, declared once (issue 36): how it touches memory (its access pattern, the
classes of Schieffer et al. section 3.1 and Cooper et al. Table 2), umsim's generator of its page stream and
the iterations the simulator replays, and its declared traffic: the fractions of its footprint the GPU reads
after the CPU's initialisation and writes back as results (the calibrated model's fallback where a record does
not declare its arrays; the applications report in_bytes, out_bytes, inout_bytes and arrays themselves,
native/apps/app.cu). simulate.SIM_APPS, dos.ITERATIONS, calibrated.ACCESS and the report's headline classes
are read from here; tests/test_model_apps.py checks it against the applications umbench registers
(`umbench list --json`).

Keyed by the model's name of the application: umbench's name, or a variant of it (`registered`: sgemm is
umbench's gemm in fp32, as Cooper et al. run it)."""

# The access patterns, in the order the report shows them.
PATTERNS = ("streaming", "stencil", "dynamic programming", "irregular", "dense compute")

# name: (access pattern, umsim generator or None (then NOT_SIMULATED gives the reason), iterations umsim replays
# (None where not simulated), (read, written) fractions)
# Iterations: single-pass for the streaming category (Cooper et al. Sec. 3.2: "these applications don't have
# data reuse"), several for the iterative ones; gemm, syr2k and himeno (in no study's sweep) replay their
# applications' default iterations (native/apps/*.cu).
FACTS = {
    "triad": ("streaming", "triad", 1, (2 / 3, 1 / 3)),
    "conv2d": ("stencil", "conv2d", 1, (1 / 2, 1 / 2)),
    "jacobi2d": ("stencil", "jacobi2d", 4, (1.0, 1.0)),
    "mvt": ("streaming", "mvt", 1, (1.0, 0.0)),
    "gesummv": ("streaming", "gesummv", 1, (1.0, 0.0)),
    "sgemm": ("dense compute", "sgemm", 1, (2 / 3, 1 / 3)),
    "gemm": ("dense compute", "gemm", 5, (2 / 3, 1 / 3)),
    "syr2k": ("dense compute", "syr2k", 3, (1.0, 1 / 3)),
    "bfs": ("irregular", "bfs", 8, (1.0, 0.2)),
    "hotspot": ("stencil", "hotspot", 10, (2 / 3, 2 / 3)),
    "srad": ("stencil", "srad", 10, (1.0, 1.0)),
    "pathfinder": ("dynamic programming", "pathfinder", 1, (1.0, 0.0)),
    "needle": ("dynamic programming", "needle", 1, (1.0, 0.5)),
    "himeno": ("stencil", "himeno", 20, (1.0, 0.15)),
    # native/apps/qv.cu: each two-qubit gate is one gate_kernel pass that reads and rewrites every amplitude in
    # place (its gate records count traffic_bytes = 2 x the state), as four strided streams 2^q0 and 2^q1
    # amplitudes apart, with no reuse inside a pass (16 complex multiply-adds per 4 amplitudes: memory-bound,
    # not dense compute); the GPU reads the whole state the CPU initialised and explicit mode copies all of it
    # back. Not simulated: NOT_SIMULATED says why.
    "qv": ("streaming", None, None, (1.0, 1.0)),
}
REGISTERED = {"sgemm": "gemm"}  # model name -> umbench's application

# Applications umsim has no generator for, each with the reason (a declared fact, as a generator is: the
# simulator's commands do not offer them and the oversubscription sweep does not replay them).
NOT_SIMULATED = {
    "qv": "no umsim generator: a pass's page order depends on the gate's qubit pair (four streams 2^q0 and 2^q1 "
          "amplitudes apart) and the circuit's gates, depth x floor(qubits/2) passes, on its options; "
          "umsim's generators take a footprint and an iteration count only",
}


def pattern(app: str) -> str:
    return FACTS[app][0]


def simulated() -> tuple:
    """The applications umsim has a generator for, in the table's order."""
    return tuple(a for a, f in FACTS.items() if f[1])


def iterations() -> dict:
    return {a: f[2] for a, f in FACTS.items() if f[2] is not None}


def access() -> dict:
    """(read, written) fractions of the footprint, of the applications that declare them."""
    return {a: f[3] for a, f in FACTS.items() if f[3] is not None}


def classes() -> dict:
    """{pattern: (applications)} in PATTERNS' order."""
    return {p: tuple(a for a, f in FACTS.items() if f[0] == p) for p in PATTERNS}
