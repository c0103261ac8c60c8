"""Checks of `umscope bench` and `umscope app run` options against what the registry declares (the families
plans.py plans, the operations and application options umbench lists): the command line's checks that need
the registry, apart from validate.py's plain value checks, which any module may import."""

from umscope import apps, plans, registry
from umscope.errors import UsageError
from umscope.validate import (SELFTEST_MODES, _one_of, _text, choices, integer, printable, real, size,
                              size_list)
from umscope import validate


def _bench_ops(family) -> tuple:
    """Operations a family's --ops may name, from umbench's own registry (registry.py)."""
    cat = registry.benchmarks()
    names = {"bandwidth": ("gpu-stream", "cpu-stream"), "migration": ("migration",),
             "scaling": ("gpu-stream",)}.get(family, (family,))
    ops = [o for n in names for o in (cat.get(n, {}).get("ops") or [])]
    if family == "migration":
        ops = ["read", "write", "copy"]
    return tuple(dict.fromkeys(ops))  # empty: a family umbench does not list (mpi, nccl) checks its own


def bench_options(family, kinds=None, sizes=None, threads=None, ops=None, mode=None, iterations=None, dos=None,
                  available=None, allow_oversubscription=False) -> dict:
    """`umscope bench` options, checked and in canonical form, for plans.bench_plan."""
    if family not in plans.families():
        raise UsageError(f"unknown benchmark {str(family)[:40]!r} (known: {', '.join(plans.families())})")
    out = {"allow_oversubscription": bool(allow_oversubscription)}
    for k in kinds or []:
        plans.validate_kind(_text(k, "--kind"))
    if sizes is not None:
        ns = size_list(sizes, "--size")
        if family in plans.PAGE_SIZED and min(ns) < plans.MIN_PAGE_BYTES:
            raise UsageError(f"--size: {family} takes whole pages, at least {plans.MIN_PAGE_BYTES} bytes, got "
                             f"{min(ns)} bytes")
        out["sizes"] = ",".join(plans.size_arg(n) for n in ns)
    if threads is not None:
        out["threads"] = validate.threads(threads)
    if ops is not None:
        known = _bench_ops(family)
        items = [t.strip() for t in _text(ops, "--ops").split(",")]
        if any(not t for t in items):
            raise UsageError(f"--ops takes operations separated by commas, got {str(ops)[:60]!r}")
        out["ops"] = ",".join(choices(ops, "--ops", known) if known else dict.fromkeys(items))
    if mode is not None:
        out["mode"] = ",".join(choices(mode, "--mode", SELFTEST_MODES))
    if iterations is not None:
        out["iterations"] = validate.iterations(iterations)
    if dos is not None:
        out["dos"] = validate.dos(dos, allow_oversubscription)
    if available is not None:
        out["available"] = plans.size_arg(size(available, "--available"))
    return out


def app_options(name, opts: dict, modes=("explicit",)) -> dict:
    """`umscope app run` options, checked by the type, limits and choices each application declares (the
    runner's registry: `umbench list --json`); sizes and lists in the form umbench takes. `modes`: the run's
    memory modes (llm checks its options with each, as its runner will: --weights goes with mixed)."""
    app = apps.APPS.get(name)
    declared = app.options if app else {}
    out = dict(opts)
    for k, v in opts.items():
        o = declared.get(k)
        if v is None or o is None:
            continue
        what, t = "--" + k, o["type"]
        if t == "int":
            out[k] = integer(v, what, int(o["min"]), int(o["max"]))
        elif t == "size":
            n = size(v, what)
            lo, hi = int(o.get("min") or 1), int(o.get("max") or 9 * 10**18)
            if not lo <= n <= hi:
                raise UsageError(f"{what} must be from {lo} to {hi} bytes, got {printable(v)[:40]}")
            out[k] = plans.size_arg(n)
        elif t == "threads":
            out[k] = validate.threads(v)
        elif t == "real":
            out[k] = f"{real(v, what, float(o['min']), float(o['max'])):g}"
        elif t == "choice" and o["choices"]:
            out[k] = _one_of(v, what, tuple(o["choices"]))
        elif t == "dims":
            parts = str(v).split(",")
            if len(parts) != 3:
                raise UsageError(f"{what} takes I,J,K, got {str(v)[:40]!r}")
            out[k] = ",".join(str(integer(x, what, int(o["min"]), int(o["max"]))) for x in parts)
        elif t == "kind":
            out[k] = plans.validate_kind(_text(v, what))
    if name == "llm":
        _llm_check(out, modes)
    return out


def _llm_check(opts, modes):
    """llm runs in Python: its own parser and checks (apps/llm.py validate: --prompt + --tokens within the
    model's positions, --weights with --mode mixed, ...) on the options given with each mode, before a run
    exists."""
    from umscope.apps import llm, llm_options
    argv = []
    for o in llm_options():
        v = opts.get(o["name"])
        if o["type"] == "flag":
            argv += ["--" + o["name"]] if v not in (None, False, 0, "0") else []
        elif v is not None and v is not False:
            argv += ["--" + o["name"], str(v)]
    parser = llm._parser()

    def error(message):
        raise UsageError(f"llm: {message}")
    parser.error = error
    for m in modes:
        why = llm.validate(parser.parse_args(argv + ["--mode", m]))
        if why:
            raise UsageError(f"llm: {why}")
