"""Which umscope ran: its version and commit as written into the package when it was built
(umscope/_version.py, by cmake/Provenance.cmake), never read from the git repository around the current
directory (an unpacked tree without .git inside another repository would name that repository's commit).

Runs (the fingerprint), the report and the bench/ scripts' documents take their provenance from here.
$UMSCOPE_COMMIT names the commit at build time (cmake/Provenance.cmake). At run time it names it only for a
package that does not know its own (a source tree never built, PYTHONPATH=python, or a build that wrote
"unknown"): a built package's commit is never relabelled by the environment (on the H100 an older umscope's
suite document took the newer tree's commit from a variable left set for the build). A source tree that was
never built and has no variable says so."""
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
    built = getattr(_version, "commit", None)
    if built and built != "unknown":
        return built
    return os.environ.get("UMSCOPE_COMMIT") or built or NOT_BUILT


def info() -> dict:
    return {"version": version(), "commit": commit(), "built": getattr(_version, "built", None)}
