"""Numbers as text: the formatters every table (CLI, notebook, report) uses. Below the
sections' tables so that the data's summaries can format without importing them."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

Formatter = Callable[[object], str]

#: Significant digits a float keeps before it is formatted (`settled`).
SETTLED_DIGITS = 12


def settled(v: float) -> float:
    """`v` rounded to `SETTLED_DIGITS` significant digits, what every formatter here
    prints from: the same figure computed by two paths (a sum taken in another order:
    DuckDB's and numpy's, the C split's and numpy's, another CPU's SIMD width) differs in
    its last bits, and one of those can sit either side of a printed digit's rounding
    point; rounded first, both print the same text."""
    if not math.isfinite(v) or v == 0:
        return v
    return float(f"{v:.{SETTLED_DIGITS}g}")


def num(digits: int = 3) -> Formatter:
    """Format with `digits` significant digits; thousands separators for big numbers."""

    def fmt(v: object) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "–"
        if isinstance(v, (int, float)):
            if isinstance(v, float):
                v = settled(v)
            if abs(v) >= 10 ** digits:
                return f"{v:,.0f}"
            return f"{v:.{digits}g}"
        return str(v)

    return fmt


def human(v: object) -> str:
    """A number as the CLI's tables print it: thousands separators from 1,000 on (never
    ``6.281e+04``), four significant digits below, ``-`` for a missing one."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if isinstance(v, float):
        v = settled(v)
    if isinstance(v, int) or (float(v).is_integer() and abs(v) >= 1000):
        return f"{int(v):,}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if v != 0 and abs(v) < 1e-3:  # 0.00001485, not 1.485e-05
        return np.format_float_positional(v, precision=4, unique=False, fractional=False,
                                          trim="-")
    return f"{v:.4g}"


def ratio_text(v: object) -> str:
    """cand/base as ``1.00x``, ``12.3x``, ``1,204x``: enough digits to read a change."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    x = settled(float(v))  # type: ignore[arg-type]
    return f"{x:.2f}x" if x < 10 else f"{x:.1f}x" if x < 100 else f"{x:,.0f}x"


def pct(digits: int = 2) -> Formatter:
    def fmt(v: object) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "–"
        p = settled(float(v) * 100)
        # 100%, 12%, 0.8%, 0.012%: never scientific notation
        return f"{p:.0f}%" if p >= 10 or p == 0 else f"{p:.{digits}g}%"

    return fmt


#: An interval reaching further than this factor either side of its estimate bounds
#: nothing a reader can use ("p99 1.87 (0.0917-3,006,712) ms", "0.00-506x"): it is
#: printed as "too few runs to bound" with the runs it has and would need.
UNBOUNDED_FACTOR = 10.0


def unbounded(value: float, low: float, high: float) -> bool:
    """Whether the interval [low, high] of a positive `value` says nothing: it reaches
    beyond `UNBOUNDED_FACTOR` either side, or to zero. False where there is no interval
    (NaN bounds: said otherwise) or the value is not positive."""
    if any(isinstance(x, float) and math.isnan(x) for x in (value, low, high)):
        return False
    if not value > 0 or not math.isfinite(value):
        return False
    return (not low > 0 or not math.isfinite(high) or high / value > UNBOUNDED_FACTOR
            or value / low > UNBOUNDED_FACTOR)


def runs_to_bound(runs: int, value: float, low: float, high: float) -> int:
    """About how many runs would bring the interval within `UNBOUNDED_FACTOR` either
    side: its width on the log scale shrinks as 1/sqrt(runs) (conservative: the t
    quantile shrinks too)."""
    if runs < 1 or not low > 0 or not math.isfinite(high) or not value > 0:
        return max(runs * 4, 4)  # no width to scale from: a first guess, said as "about"
    half = max(math.log(high / value), math.log(value / low))
    return max(runs + 1, math.ceil(runs * (half / math.log(UNBOUNDED_FACTOR)) ** 2))


def bound_text(runs: int | None, value: float, low: float, high: float) -> str:
    """``too few runs to bound (3 runs; about 40 would)``."""
    if runs is None or runs < 1:
        return "too few runs to bound"
    return (f"too few runs to bound ({runs:,} run{'s' if runs != 1 else ''}; about "
            f"{runs_to_bound(runs, value, low, high):,} would)")
