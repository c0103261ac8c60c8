"""The application suite: each application is one native source with the
memory mode as a parameter; `umscope app run NAME --mode MODE` runs it as a
case in the store, like any benchmark."""

from umscope.errors import UsageError
from umscope.suite import Case

MODES = ["explicit", "managed", "managed-prefetch", "pinned", "registered", "system"]

# name -> (help, the umbench benchmark that runs it, the options it takes)
APPS = {
    "qv": ("Quantum Volume state-vector simulator: depth = width layers of Haar-random SU(4) gates on random "
           "qubit pairs", "qv", ("qubits", "depth", "seed", "init", "precision", "processor", "check")),
}


def app_cases(name, modes, options) -> list:
    if name not in APPS:
        raise UsageError(f"unknown application {name!r} (known: {', '.join(APPS)})")
    _, bench, takes = APPS[name]
    for m in modes:
        if m not in MODES:
            raise UsageError(f"unknown mode {m!r} (modes: {', '.join(MODES)})")
    params = {k: str(v) for k, v in options.items() if v is not None and k in takes}
    cases = []
    for m in modes:
        p = dict(params, mode=m)
        if options.get("processor") == "cpu":
            p.pop("mode")
        cases.append(Case(bench, None, p, timeout=options.get("timeout") or 1800))
        if options.get("processor") == "cpu":
            break
    return cases
