"""Each application's model facts (issue 36): how it touches memory (its access pattern, the classes of Schieffer
et al. section 3.1 and Cooper et al. Table 2), umsim's generator of its page stream and the iterations the
simulator replays (or the reason umsim has no generator), and its declared traffic: the fractions of its
footprint the GPU reads after the CPU's initialisation and writes back as results (the calibrated model's
fallback where a record does not declare its arrays; the applications report in_bytes, out_bytes, inout_bytes
and arrays themselves, native/apps/app.cu).

Each native application declares them where it is registered, with the reasons beside the values
(`AppRegistrar` in native/apps/NAME.cu, struct `AppFacts` in native/include/umscope/bench.hpp); umbench refuses
to start when one lacks them or names an unknown pattern, and `umbench list --json` emits them as the
application's "model" and the patterns as "app_patterns". This module reads them from the registry
(registry.py), read when first used, not at import. simulate.SIM_APPS, dos.ITERATIONS, calibrated.ACCESS and the
report's headline classes are read from here; tests/test_model_apps.py checks them.

Keyed by the model's name of the application: umbench's name, or a model-only variant of it declared below
(VARIANTS), placed after its application."""

import functools

from umscope import registry

# Model-only variants of a registered application: name -> (umbench's application, its facts, in the registry's
# form). sgemm is umbench's gemm in fp32 as Cooper et al. run it (`umscope app run sgemm`: apps.ALIASES); umbench
# has no sgemm, so its facts are declared here. umsim has a generator of its own for it (generators.cpp gen_sgemm:
# Cooper et al.'s SGEMM, 128 x 128 tiles, 264 in flight); one pass replayed, as every application of Cooper et
# al.'s sweep but jacobi2d (dos.COOPER_APPS). Declared traffic: reads A and B, writes C (three n x n matrices).
VARIANTS = {
    "sgemm": ("gemm", {"pattern": "dense compute", "generator": "sgemm", "iterations": 1, "read": 2 / 3,
                       "written": 1 / 3, "not_simulated": ""}),
}


def __getattr__(name):
    # PATTERNS comes from the runner's registry, read when first used (not at import).
    if name == "PATTERNS":
        return tuple(registry.load()["app_patterns"])  # in the order the report shows them
    raise AttributeError(name)


@functools.lru_cache(maxsize=None)
def facts() -> dict:
    """name -> {pattern, generator, iterations, read, written, not_simulated}: every application umbench
    registers, in its order, each model-only variant after its application."""
    out = {}
    for name, b in registry.applications().items():
        f = b["model"]  # fractions as floats: JSON writes 1.0 as 1
        out[name] = dict(f, read=float(f["read"]), written=float(f["written"]))
        out.update((v, f) for v, (base, f) in VARIANTS.items() if base == name)
    return out


def registered(app: str) -> str:
    """umbench's application of a model name (a variant's application, else the name itself)."""
    return VARIANTS[app][0] if app in VARIANTS else app


def pattern(app: str) -> str:
    return facts()[app]["pattern"]


def simulated() -> tuple:
    """The applications umsim has a generator for, in the table's order."""
    return tuple(a for a, f in facts().items() if f["generator"])


def not_simulated() -> dict:
    """{application: why umsim has no generator for it}."""
    return {a: f["not_simulated"] for a, f in facts().items() if not f["generator"]}


def iterations() -> dict:
    """{application: iterations umsim replays}, of the simulated applications."""
    return {a: f["iterations"] for a, f in facts().items() if f["generator"]}


def access() -> dict:
    """(read, written) fractions of the footprint, of every application."""
    return {a: (f["read"], f["written"]) for a, f in facts().items()}


def classes() -> dict:
    """{pattern: (applications)} in PATTERNS' order."""
    return {p: tuple(a for a, f in facts().items() if f["pattern"] == p) for p in __getattr__("PATTERNS")}
