"""`until: decided` in a spec: its settings checked (`validate_decided`, called by
`sections.validate_until`), a wall-time budget and an equivalence margin read as people
write them (10m, 5%)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from harness.settings import report_settings, resolve
from harness.spec.limits import MAX_SECONDS
from harness.spec.model import DECIDE_FIELDS, DecideRule

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h)?\s*$")
_UNIT_S = {None: 1, "s": 1, "m": 60, "min": 60, "h": 3600}


def validate_decided(raw: Mapping[str, Any], reps: int, bad: Any) -> DecideRule | None:
    """`until: decided` / `{decided: true, budget, equivalence, max_repetitions}`."""
    if report_settings("until", raw, DECIDE_FIELDS, bad):
        return None
    rule = resolve(raw, DECIDE_FIELDS)
    ok = True
    if rule["decided"] is not True:
        bad("until.decided", "must be true (leave `until` out for a fixed number of "
                             "repetitions)")
        ok = False
    budget = duration_s(rule["budget"])
    if rule["budget"] is not None and budget is None:
        bad("until.budget", f"expected a wall time such as 10m, 90s or 1h (a number: "
                            f"seconds) above 0, got {rule['budget']!r}")
        ok = False
    margin = share(rule["equivalence"])
    if margin is None:
        bad("until.equivalence", f"expected a margin between 0% and 100% such as 5% (or "
                                 f"0.05), got {rule['equivalence']!r}")
        ok = False
    most = rule["max_repetitions"]
    if most < max(reps, 2) + 1:
        bad("until.max_repetitions", f"must be more than repetitions ({reps}), the first "
                                     "round, and at least 3")
        ok = False
    if reps < 2:
        bad("repetitions", "until: decided needs a first round of at least 2 repetitions "
                           "(a spread to judge)")
        ok = False
    return DecideRule(budget, margin, most) if ok and margin is not None else None


def duration_s(raw: Any) -> float | None:
    """A wall time in seconds from 10m, 90s, 1.5h or a number of seconds; None if none."""
    if isinstance(raw, bool) or raw is None:
        return None
    if isinstance(raw, int | float):
        return float(raw) if math.isfinite(raw) and raw > 0 else None
    m = _DURATION.match(str(raw))
    if not m:
        return None
    value = float(m.group(1)) * _UNIT_S[m.group(2)]
    return value if 0 < value <= MAX_SECONDS else None


def share(raw: Any) -> float | None:
    """A margin as a share: 5% or 0.05 -> 0.05; None if it is no share in (0, 1)."""
    if isinstance(raw, str) and raw.strip().endswith("%"):
        try:
            value = float(raw.strip()[:-1]) / 100
        except ValueError:
            return None
    elif isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    else:
        return None
    return value if 0 < value < 1 else None
