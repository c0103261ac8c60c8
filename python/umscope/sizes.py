"""Byte sizes as people write them.

A plain number is bytes ("4096", "1e9"); K, M, G, T and KiB, MiB, GiB, TiB are
powers of 1024; KB, MB, GB, TB are powers of 1000; units are case-insensitive
(4g = 4gib = 4GiB, 4gb = 4GB). Sizes must be whole, positive numbers of bytes,
at most MAX_SIZE. umbench accepts the same grammar.
"""

import math
import re

from umscope.errors import UsageError

_UNITS = {"": 1, "B": 1}
for _i, _p in enumerate("KMGT", start=1):
    _UNITS[_p] = _UNITS[_p + "iB"] = 1024**_i
    _UNITS[_p + "B"] = 1000**_i

MAX_SIZE = 1 << 50  # 1 PiB: more than any machine's memory, far below what a 64-bit count holds
_UNITS = {k.upper(): v for k, v in _UNITS.items()}

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text) -> int:
    if isinstance(text, int) and not isinstance(text, bool):
        value, unit = float(text), ""
    else:
        m = _SIZE.match(str(text))
        if not m:
            raise UsageError(f"malformed size {text!r} (examples: 4G, 4GiB, 512M, 1e9)")
        value, unit = float(m.group(1)), m.group(2).upper()
        if unit not in _UNITS:
            raise UsageError(f"unknown size unit in {str(text)[:40]!r} (K, M, G, T, KiB..TiB, KB..TB)")
    n = value * _UNITS[unit]
    if not math.isfinite(n) or n > MAX_SIZE:
        raise UsageError(f"size {str(text)[:40]!r} is more than {MAX_SIZE >> 50} PiB")
    if n < 1 or n != int(n):
        raise UsageError(f"size must be a positive whole number of bytes: {str(text)[:40]!r}")
    return int(n)


def format_size(n: int) -> str:
    """Binary units, exact where possible: 1073741824 -> '1 GiB', 1610612736 -> '1.5 GiB'."""
    for unit, div in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= div:
            return f"{n // div} {unit}" if n % div == 0 else f"{n / div:.1f} {unit}"
    return f"{n} B"


def parse_size_list(text: str) -> list:
    items = str(text).split(",")
    if any(not t.strip() for t in items):
        raise UsageError(f"sizes are separated by single commas, got {str(text)[:60]!r}")
    return [parse_size(t) for t in items]
