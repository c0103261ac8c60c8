"""What the native runner declares, read once per process: benchmark families, applications and their options
(type, default, help, limits), memory modes, memory kinds with their behaviour, and the stream operations with
the arrays each reads and writes (`umbench list --json`). The command line, `umscope list`, `app list`, the
validation of options and the bounds are built from this, so a name is declared once, in native code."""

import functools
import json
import subprocess

from umscope import native
from umscope.errors import UsageError


@functools.lru_cache(maxsize=None)
def load() -> dict:
    """`umbench list --json`, parsed; a missing or failing umbench is one clear UsageError."""
    path = native.umbench_path()  # UsageError naming the fix when umbench is missing
    try:
        res = subprocess.run([path, "list", "--json"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise UsageError(f"the native runner {path} cannot be started: {exc}") from None
    if res.returncode != 0:
        raise UsageError(f"{path} list --json failed (exit {res.returncode}): {res.stderr.strip()[:200]}")
    try:
        return json.loads(res.stdout)
    except json.JSONDecodeError:
        raise UsageError(f"{path} list --json printed no registry (an umbench of another version?)") from None


def benchmarks() -> dict:
    return {b["name"]: b for b in load()["benchmarks"]}


def applications() -> dict:
    """Native applications by name, in declaration order."""
    return {n: b for n, b in benchmarks().items() if b.get("category") == "application"}


def options_of(name) -> dict:
    """Options of one benchmark or application, by name."""
    return {o["name"]: o for o in benchmarks()[name]["options"]}


def modes() -> list:
    return [m["name"] for m in load()["modes"]]


def kinds() -> dict:
    return {k["name"]: k for k in load()["kinds"]}


def stream_ops() -> dict:
    """Stream operation -> (arrays read, arrays written)."""
    return {o["name"]: (o["reads"], o["writes"]) for o in load()["stream_ops"]}
