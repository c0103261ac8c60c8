"""Which umscope ran: its version and commit as written into the package when it was built
(umscope/_version.py, by cmake/Provenance.cmake), never read from the git repository around the current
directory (an unpacked tree without .git inside another repository would name that repository's commit).

Runs (the fingerprint), the report and the bench/ scripts' documents take their provenance from here.
$UMSCOPE_COMMIT, where set, names the commit instead (a caller that knows it better, e.g. a copy of the
tree built elsewhere). A source tree that was never built (PYTHONPATH=python) says so."""
import os

try:
    from umscope import _version
except ImportError:  # not built: the source tree itself
    _version = None

NOT_BUILT = "unknown (not built)"


def version() -> str:
    from umscope import __version__
    return getattr(_version, "version", None) or __version__


def commit() -> str:
    if os.environ.get("UMSCOPE_COMMIT"):
        return os.environ["UMSCOPE_COMMIT"]
    return getattr(_version, "commit", None) or NOT_BUILT


def info() -> dict:
    return {"version": version(), "commit": commit(), "built": getattr(_version, "built", None)}
