"""What the native runner declares, read once per process (`umbench list --json`): for now the stream
operations with the arrays each reads and writes, which the bounds use."""

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


def stream_ops() -> dict:
    """Stream operation -> (arrays read, arrays written)."""
    return {o["name"]: (o["reads"], o["writes"]) for o in load()["stream_ops"]}
