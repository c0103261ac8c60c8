"""The application suite: each application is one native source with the
memory mode as a parameter; `umscope app run NAME --mode MODE` runs it as a
case in the store, like any benchmark."""

from umscope.errors import UsageError
from umscope.suite import Case

MODES = ["explicit", "managed", "managed-prefetch", "managed-advice", "pinned", "registered", "system"]

_COMMON = ("processor", "threads", "check", "footprint", "seed", "iterations")


class App:
    def __init__(self, help, bench=None, takes=(), fixed=None, small=None, modes=None, suite=True):
        self.help = help
        self.modes = list(modes or MODES)  # the memory modes it takes
        self.suite = suite  # in the default suite
        self.bench = bench
        self.takes = tuple(takes)
        self.fixed = dict(fixed or {})  # parameters the app always passes (sgemm: precision fp32)
        self.small = dict(small or {})  # the default suite's short case


APPS = {
    "bfs": App("breadth-first search, level-synchronous with frontier masks (Rodinia), random graph from a seed",
               takes=_COMMON[:-1] + ("nodes", "degree"), small={"footprint": "256M"}),
    "needle": App("Needleman-Wunsch alignment, BLOSUM62, tiled anti-diagonal wavefront (Rodinia)",
                  takes=_COMMON[:-1] + ("n", "penalty"), small={"footprint": "256M"}),
    "pathfinder": App("dynamic programming down a grid of weights, 1-D pyramid tiling (Rodinia)",
                      takes=_COMMON + ("rows", "cols", "pyramid"), small={"footprint": "256M"}),
    "hotspot": App("2-D thermal stencil with pyramid tiling (Rodinia); one iteration = --pyramid steps",
                   takes=_COMMON + ("rows", "cols", "pyramid"), small={"footprint": "256M"}),
    "srad": App("speckle-reducing anisotropic diffusion, iterative (Rodinia srad v2)",
                takes=_COMMON + ("rows", "cols", "lambda"), small={"footprint": "256M"}),
    "triad": App("STREAM triad a = b + s*c over doubles, repeated (Cooper et al.)",
                 takes=_COMMON + ("n",), small={"footprint": "256M"}),
    "conv2d": App("3x3 2-D convolution (PolyBench 2DCONV)", takes=_COMMON + ("rows", "cols"),
                  small={"footprint": "256M"}),
    "jacobi2d": App("Jacobi 2-D 5-point stencil (PolyBench); --reverse: every other sweep bottom-up",
                    takes=_COMMON + ("rows", "cols", "reverse"), small={"footprint": "256M"}),
    "mvt": App("x1 += A y1, x2 += A^T y2 (PolyBench MVT)", takes=_COMMON + ("n",), small={"footprint": "256M"}),
    "gesummv": App("y = alpha A x + beta B x (PolyBench GESUMMV)", takes=_COMMON + ("n",),
                   small={"footprint": "256M"}),
    "syr2k": App("C = alpha (A B^T + B A^T) + beta C, tiled kernel (PolyBench SYR2K)",
                 takes=_COMMON + ("n", "m"), small={"footprint": "64M", "iterations": "2"}),
    "sgemm": App("single-precision GEMM with cuBLAS; --variant panels: row panels sized to GPU memory",
                 bench="gemm", takes=_COMMON + ("n", "m", "k", "variant", "panel-memory"), fixed={"precision": "fp32"},
                 small={"footprint": "256M"}),
    "gemm": App("cuBLAS GEMM in fp64/fp32/tf32/fp16 with each matrix placed in any kind (--place-a/b/c)",
                takes=_COMMON + ("n", "m", "k", "precision", "variant", "panel-memory", "place-a", "place-b",
                                 "place-c"), small={"footprint": "256M"}),
    "himeno": App("3-D Poisson Jacobi, 19-point stencil (Himeno); --size S/M/L/XL or --footprint",
                  takes=_COMMON + ("size", "dims"), small={"footprint": "256M"}),
    "qv": App("Quantum Volume state-vector simulator: depth = width layers of Haar-random SU(4) gates on random "
              "qubit pairs", takes=("qubits", "depth", "seed", "init", "precision", "processor", "check", "threads")),
    "llm": App("autoregressive decoding (100 tokens) with transformers models of real sizes built with RANDOM "
               "weights (--model gpt2..gpt2-xl, llama-1b/3b/8b, llama2-7b/13b, codellama-34b), placed by umscope's PyTorch allocator; "
               "mixed: --weights KIND --cache KIND",
               takes=("model", "batch", "prompt", "tokens", "precision", "seed", "weights", "cache"),
               modes=["torch", "explicit", "managed", "managed-prefetch", "managed-advice", "pinned", "registered",
                      "system", "mixed"], suite=False),
}


def modes_of(name) -> list:
    return APPS[name].modes if name in APPS else MODES


def bench_of(name) -> str:
    return APPS[name].bench or name


def app_cases(name, modes, options) -> list:
    if name not in APPS:
        raise UsageError(f"unknown application {name!r} (known: {', '.join(APPS)})")
    app = APPS[name]
    for m in modes:
        if m not in app.modes:
            raise UsageError(f"unknown mode {m!r} (modes: {', '.join(app.modes)})")
    given = {k: v for k, v in options.items() if v is not None and v is not False and k != "timeout"}
    unknown = sorted(set(given) - set(app.takes))
    if unknown:
        raise UsageError(f"{name} does not take --{', --'.join(unknown)} (it takes: --{', --'.join(app.takes)})")
    params = dict(app.fixed)
    params.update({k: ("1" if v is True else str(v)) for k, v in given.items()})
    cases = []
    for m in modes:
        p = dict(params, mode=m)
        if params.get("processor") == "cpu":
            p.pop("mode")
        cases.append(Case(bench_of(name), None, p, timeout=options.get("timeout") or 1800))
        if params.get("processor") == "cpu":
            break
    return cases


# The footprint at which the default suite checks each application against its CPU reference, and the QV
# width its CPU simulator affords.
CHECK_FOOTPRINT = "16M"
CHECK_QUBITS = "20"


def default_cases() -> list:
    """The default suite's applications: every one in every mode at a small footprint (QV: 24 qubits, both
    initialisations), so that the report shows which mode wins for which access pattern. Each application is
    also run once in explicit mode at CHECK_FOOTPRINT with --check 1 (its result compared with the CPU
    reference), and QV at CHECK_QUBITS against the CPU simulator; the other modes are verified by their
    checksums against explicit's (verify.cross_mode)."""
    cases = []
    for name, app in APPS.items():
        if not app.suite:
            continue
        if name == "qv":
            cases += [Case("qv", None, {"qubits": "24", "mode": m, "init": i}, timeout=600)
                      for m in MODES for i in ("gpu", "cpu")]
            cases.append(Case("qv", None, {"qubits": CHECK_QUBITS, "mode": "explicit", "init": "gpu", "check": "1"},
                              timeout=600))
            continue
        for m in MODES:
            cases.append(Case(bench_of(name), None, dict(app.fixed, **app.small, mode=m), timeout=600))
        cases.append(Case(bench_of(name), None, dict(app.fixed, footprint=CHECK_FOOTPRINT, mode="explicit",
                                                     check="1"), timeout=600))
    return cases
