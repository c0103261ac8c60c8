"""Byte sizes as people write them.

A plain number is bytes ("4096", "1e9"); K, M, G, T and KiB, MiB, GiB, TiB are
powers of 1024; KB, MB, GB, TB are powers of 1000; units in any case. Sizes must be whole,
positive numbers of bytes, at most 9e18. The native side has one parser of the same grammar
(native/core/sizes.cpp), read by umbench, umsim, libumalloc and UMSCOPE_HOST_MEM_LIMIT;
tests/sizes_table.txt holds Python and each of them to it.
"""

import re

from umscope.errors import UsageError

# Keys upper case: a unit is read in any case (4g, 4gb and 4gib are 4G, 4GB and 4GiB).
_UNITS = {"": 1, "B": 1}
for _i, _p in enumerate("KMGT", start=1):
    _UNITS[_p] = _UNITS[_p + "IB"] = 1024**_i
    _UNITS[_p + "B"] = 1000**_i

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text) -> int:
    if isinstance(text, int) and not isinstance(text, bool):
        value, unit = float(text), ""
    else:
        m = _SIZE.match(str(text))
        if not m:
            raise UsageError(f"malformed size {text!r} (examples: 4G, 4GiB, 512M, 1e9)")
        value, unit = float(m.group(1)), m.group(2)
        unit = unit.upper()
        if unit not in _UNITS:
            raise UsageError(f"unknown size unit in {text!r} (K, M, G, T, KiB..TiB, KB..TB)")
    n = value * _UNITS[unit]
    if not 1 <= n <= 9.0e18 or n != int(n):
        raise UsageError(f"size must be a positive whole number of bytes: {text!r}")
    return int(n)


def format_size(n: int) -> str:
    """Binary units, exact where possible: 1073741824 -> '1 GiB', 1610612736 -> '1.5 GiB'."""
    for unit, div in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= div:
            return f"{n // div} {unit}" if n % div == 0 else f"{n / div:.1f} {unit}"
    return f"{n} B"


def parse_size_list(text: str) -> list:
    sizes = [parse_size(t) for t in str(text).split(",") if t.strip()]
    if not sizes:
        raise UsageError(f"no sizes in {text!r}")
    return sizes


def size_arg(n: int) -> str:
    """A size as umbench takes it, readable in case ids: 268435456 -> '256MiB'."""
    text = format_size(n).replace(" ", "")
    return text if "." not in text else str(n)
