"""Numbers an importer reads, checked where they are read.

A damaged file shows as impossible numbers: a negative or fractional count, a run time of
zero, a latency that is not finite, stated percentiles that decrease, a count with more
digits than anything measured (Python's own ``int()`` refuses more than 4300 digits with
a ValueError of its own). Each is an `ImportFormatError` naming the file and the line (or
the key, in JSON), so a parser neither drops an op nor falls back to a guess without
saying so, and never ends in a traceback.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

from harness.errors import ImportFormatError

#: More ops than this in one run is a damaged file, not a measurement: each op becomes a
#: record (one histogram or one aggregate line could otherwise ask for any number).
MAX_OPS = 10**8
#: Records one import may rebuild unless the user says more (`harness import --max-ops`):
#: a file of a few hundred bytes can declare any count, and each op becomes a record
#: (about 130 bytes of memory while it is written), so the default caps that at ~0.3 GB.
DEFAULT_MAX_OPS = 2_000_000
#: Bytes per rebuilt record while an import is written, for the message that refuses one.
RECORD_BYTES = 130


def too_many(where: str, ops: int, limit: int) -> ImportFormatError:
    """The refusal of an import that declares more ops than `--max-ops` allows."""
    return ImportFormatError(
        f"{where}: declares {ops:,} ops; one record each would take about "
        f"{ops * RECORD_BYTES / 1e9:.1f} GB of memory, more than this import allows "
        f"({limit:,} ops). If the file is right, import it with --max-ops {ops}")
#: A whole number with more significant digits than this is damage (int64 holds 18).
MAX_DIGITS = 18


def at(path: object, line: int | None = None) -> str:
    """Where a number was read: ``file:line``, or the file alone."""
    return f"{path}:{line}" if line else str(path)


def damaged(where: str, what: str) -> ImportFormatError:
    return ImportFormatError(f"{where}: {what}; is the file damaged?")


def shown(value: object) -> str:
    """A value for a message: long digit strings cut, their length said."""
    text = str(value) if not isinstance(value, str) else value.strip()
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} characters)"


def whole(text: str, where: str, what: str) -> int:
    """A whole number as written (ASCII digits, optionally signed), at most `MAX_DIGITS`
    significant digits; the sign is for the caller to judge."""
    digits = text.strip().removeprefix("-").removeprefix("+")
    if not (digits.isascii() and digits.isdigit()):
        raise damaged(where, f"{what} {shown(text)} is not a whole number")
    if len(digits.lstrip("0")) > MAX_DIGITS:
        raise damaged(where, f"{what} {shown(text)} has more digits than any measurement")
    return int(text)


def count(value: str | float, where: str, what: str, *, least: int = 1,
          most: int | None = MAX_OPS) -> int:
    """A number of ops (or of threads, clients, bytes): whole, at least `least`, at most
    `most`. `value` as written (text) or as a JSON or float reading gave it."""
    if isinstance(value, str):
        n = whole(value, where, what)
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise damaged(where, f"{what} {shown(value)!r} is not a number")
    elif isinstance(value, float) and not (math.isfinite(value) and value == int(value)):
        raise damaged(where, f"{what} {shown(value)} is not a whole number")
    else:
        n = int(value)
    if n < least:
        why = "negative" if n < 0 else f"below {least}"
        raise damaged(where, f"{what} {n} is {why}")
    if most is not None and n > most:
        raise damaged(where, f"{what} {n:,} is more than {most:,}")
    return n


def amount(value: str | float, where: str, what: str, *, positive: bool = False) -> float:
    """A time, latency or rate: finite and not negative (above zero if `positive`)."""
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise damaged(where, f"{what} {shown(value)} is not a number") from None
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise damaged(where, f"{what} {shown(value)!r} is not a number")
    else:
        try:
            number = float(value)
        except OverflowError:  # an int too large for a float
            number = math.inf
    if not math.isfinite(number):
        raise damaged(where, f"{what} {shown(value)} is not a finite number")
    if number < 0 or (positive and number == 0):
        raise damaged(where, f"{what} {shown(value)} is {'negative' if number else 'zero'}")
    return number


def _rank(key: str) -> float | None:
    """Where a stated figure sits in the distribution (min, p<q>, max); None: elsewhere."""
    if key == "min":
        return -1.0
    if key == "max":
        return 101.0
    if key.startswith("p"):
        try:
            return float(key[1:])
        except ValueError:
            return None
    return None


def check_stated(figures: Mapping[str, float], where: str, what: str,
                 places: Mapping[str, str] | None = None) -> None:
    """A tool's stated latency figures (``min``, ``p50``, ..., ``max``, ``mean``/``avg``):
    each finite and not negative; min <= each percentile <= max, percentiles not
    decreasing; a mean within min..max. `places`: a figure's own line, where it has one."""
    def place(key: str) -> str:
        return (places or {}).get(key, where)

    for key, value in figures.items():
        amount(value, place(key), f"{what} {key}")
    ranked = sorted((r, key) for key in figures if (r := _rank(key)) is not None)
    for (_, low), (_, high) in itertools.pairwise(ranked):
        if figures[low] > figures[high]:
            raise damaged(place(high), f"{what}: {low} {figures[low]:g} is above {high} "
                                       f"{figures[high]:g} (a distribution never decreases)")
    for mean in ("mean", "avg"):
        if mean in figures and "min" in figures and "max" in figures and not (
                figures["min"] <= figures[mean] <= figures["max"]):
            raise damaged(place(mean), f"{what}: {mean} {figures[mean]:g} is outside min "
                                       f"{figures['min']:g} .. max {figures['max']:g}")
