"""The application suite: each application is one native source with the
memory mode as a parameter; `umscope app run NAME --mode MODE` runs it as a
case in the store, like any benchmark."""

import functools

from umscope import registry
from umscope.errors import UsageError
from umscope.suite import Case


class App:
    def __init__(self, help, bench=None, takes=(), fixed=None, small=None, modes=None, suite=True, options=None):
        self.help = help
        self.modes = list(modes if modes is not None else registry.modes())  # the memory modes it takes
        self.suite = suite  # in the default suite
        self.bench = bench
        self.takes = tuple(takes)
        self.fixed = dict(fixed or {})  # parameters the app always passes (sgemm: precision fp32)
        self.small = dict(small or {})  # the default suite's short case
        self.options = dict(options or {})  # name -> declaration (type, default, help, choices, min, max)


# What only the suite decides, not the application: its short case in the default suite (every other
# application: a 256 MiB footprint) and whether it is in the default suite at all.
SMALL = {"syr2k": {"footprint": "64M", "iterations": "2"}, "qv": {}}
DEFAULT_SMALL = {"footprint": "256M"}

# Applications that are another one's native source with parameters fixed: name -> (source, fixed, options
# it does not offer, help).
ALIASES = {"sgemm": ("gemm", {"precision": "fp32"}, ("precision", "place-a", "place-b", "place-c"),
                     "single-precision GEMM with cuBLAS; --variant panels: row panels sized to GPU memory")}


# The options every `app run` has (umscope's run options, --mode): the llm runner parses them too, the CLI
# offers them once.
COMMON_OPTIONS = ("mode", "device", "reps", "warmup", "placement", "allow-oversubscription", "allow-host-overcommit")


# Limits of the runner's integer options, checked before a run exists (a 0 or negative count is refused).
LLM_INT_LIMITS = {"batch": ("1", "65536"), "prompt": ("1", "1048576"), "tokens": ("1", "1048576"),
                  "seed": ("0", "9223372036854775807")}


def llm_options() -> list:
    """llm runs in Python (PyTorch), not in umbench: its options are read from its runner's own parser
    (python -m umscope.apps.llm), in the native list's form, so that `umscope app run llm` offers exactly what
    the runner takes."""
    import argparse
    from umscope.apps import llm
    out = []
    for act in llm._parser()._actions:
        if isinstance(act, argparse._HelpAction) or not act.option_strings or act.help == argparse.SUPPRESS:
            continue
        name = next(s for s in act.option_strings if s.startswith("--"))[2:]
        if name in COMMON_OPTIONS:
            continue
        o = {"name": name, "type": "text", "default": "", "help": "llm: " + (act.help or name), "choices": [],
             "min": "", "max": "", "internal": False}
        if act.nargs == 0 or act.const is True:
            o["type"] = "flag"
        elif act.choices:
            o.update(type="choice", choices=list(act.choices))
        elif act.type is int:
            lo, hi = LLM_INT_LIMITS.get(name, ("-9223372036854775808", "9223372036854775807"))
            o.update(type="int", min=lo, max=hi)
        out.append(o)
    return out


LLM = dict(help="autoregressive decoding (100 tokens) with transformers models of real sizes built with RANDOM "
                "weights (--model gpt2..gpt2-xl, llama-1b/3b/8b, llama2-7b/13b, codellama-34b), placed by umscope's PyTorch allocator; "
                "mixed: --weights KIND --cache KIND",
           modes=["torch", "explicit", "managed", "managed-prefetch", "managed-advice", "pinned", "registered",
                  "system", "mixed"])


@functools.lru_cache(maxsize=None)
def _apps() -> dict:
    """Every application: the native ones as umbench declares them (`umbench list --json`), the aliases, llm."""
    out = {}
    for name, b in registry.applications().items():
        opts = {o["name"]: o for o in b["options"] if not o["internal"]}
        out[name] = App(b["help"], takes=opts, options=opts, small=SMALL.get(name, DEFAULT_SMALL))
        for alias, (source, fixed, dropped, help_) in ALIASES.items():
            if source == name:
                kept = {k: v for k, v in opts.items() if k not in dropped}
                fixed_opts = dict(kept, **{k: dict(opts[k], choices=[v]) for k, v in fixed.items() if k in opts})
                out[alias] = App(help_, bench=source, takes=kept, fixed=fixed, options=fixed_opts,
                                 small=SMALL.get(alias, DEFAULT_SMALL))
    llm_opts = {o["name"]: o for o in llm_options()}
    out["llm"] = App(LLM["help"], takes=llm_opts, modes=LLM["modes"], suite=False, options=llm_opts)
    return out


def __getattr__(name):
    # APPS and MODES come from the runner's registry, read when first used (not at import).
    if name == "APPS":
        return _apps()
    if name == "MODES":
        return registry.modes()
    raise AttributeError(name)


def cli_options() -> dict:
    """Every option some application offers, merged for `umscope app`'s parser: name -> (declaration, help).
    Where applications describe an option differently (--precision), the help joins their texts."""
    merged = {}
    for app in _apps().values():
        for name, o in app.options.items():
            if name not in app.takes:
                continue
            entry = merged.setdefault(name, (o, []))
            if o["help"] not in entry[1]:
                entry[1].append(o["help"])
    return {k: (o, "; ".join(h)) for k, (o, h) in merged.items()}


def add_cli_options(s):
    """Adds the applications' options to `umscope app`'s parser, generated from the registry. Without a
    usable umbench it adds none: `app` then fails with the registry's one-line reason."""
    try:
        opts = cli_options()
        modes = registry.modes()
    except UsageError:
        return
    s.add_argument("--mode", action="append", help="memory mode (repeatable, or 'all'; default explicit): "
                   + ", ".join(modes))
    for name, (o, help_) in opts.items():
        if o["type"] == "flag":
            s.add_argument("--" + name, action="store_true", help=help_)
        else:
            s.add_argument("--" + name, dest=name.replace("-", "_"), help=help_)


def modes_of(name) -> list:
    apps = _apps()
    return apps[name].modes if name in apps else registry.modes()


def bench_of(name) -> str:
    apps = _apps()
    return (apps[name].bench if name in apps else None) or name


def app_cases(name, modes, options) -> list:
    if name not in _apps():
        raise UsageError(f"unknown application {name!r} (known: {', '.join(_apps())})")
    app = _apps()[name]
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
# The default suite's Quantum Volume width: 22 qubits (a 64 MiB state, as syr2k's 64 MiB). At 24 qubits each
# circuit on pinned or registered memory took 15 s on the H100 host (24 layers of 0.63 s over PCIe), four
# such cases a third of the suite's time; `umscope app run qv --qubits 24` measures it.
SUITE_QUBITS = "22"
CHECK_QUBITS = "20"


def _footprint(params) -> int:
    from umscope.sizes import parse_size
    try:
        return parse_size(params.get("footprint", "256M"))
    except Exception:  # noqa: BLE001 - a footprint the native side will judge
        return 1 << 62


def default_cases() -> list:
    """The default suite's applications: every one in every mode at a small footprint (QV: 22 qubits, both
    initialisations), so that the report shows which mode wins for which access pattern. Each application is
    also run once in explicit mode at CHECK_FOOTPRINT with --check 1 (its result compared in full with the CPU
    reference), and QV at CHECK_QUBITS against the CPU simulator. Every case checks its own result at its own
    size besides (the application's sampled check, invariant or full reference: its `verified`); a failed
    check fails every case of that kernel in the run (verify.kernel_failures), and every mode's checksum is
    compared with explicit's as an extra check (verify.cross_mode)."""
    cases = []
    for name, app in _apps().items():
        if not app.suite:
            continue
        if name == "qv":
            cases += [Case("qv", None, {"qubits": SUITE_QUBITS, "mode": m, "init": i}, timeout=600)
                      for m in registry.modes() for i in ("gpu", "cpu")]
            cases.append(Case("qv", None, {"qubits": CHECK_QUBITS, "mode": "explicit", "init": "gpu", "check": "1"},
                              timeout=600))
            continue
        for m in registry.modes():
            params = dict(app.fixed, **app.small, mode=m)
            if m != "explicit" and _footprint(params) <= 64 << 20:
                # At 64 MiB and below the harness runs the full CPU reference by default (syr2k's took 4 s per
                # mode on the H100 host); explicit keeps it, the other modes run the sampled check of larger
                # sizes (syr2k: Freivalds and sampled elements), as at 256 MiB.
                params["check"] = "0"
            cases.append(Case(bench_of(name), None, params, timeout=600))
        cases.append(Case(bench_of(name), None, dict(app.fixed, footprint=CHECK_FOOTPRINT, mode="explicit",
                                                     check="1"), timeout=600))
    return cases
