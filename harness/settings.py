"""Typed settings shared by services and workloads, and their validation."""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    """One accepted setting: its type(s), default and a line of help; a number may have
    bounds (`low` <= value <= `high`; with `low_open`, low < value), and `why` says
    what `high` protects, for the message."""

    types: tuple[type, ...]
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    why: str = ""


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _shown(x: float) -> str:
    """A bound as people write it: 2,592,000 or 0.001."""
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"


def check_bounds(value: Any, setting: Setting) -> str | None:
    """What is wrong with a number against the setting's bounds (None: nothing, or not a
    bounded number), without a prefix."""
    if not _number(value) or (setting.low is None and setting.high is None):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, not {value}"
    low, high = setting.low, setting.high
    if low is not None and (value <= low if setting.low_open else value < low):
        if setting.low_open:
            return "must be positive" if low == 0 else f"must be more than {_shown(low)}"
        return "must be 0 or more" if low == 0 else f"must be at least {_shown(low)}"
    if high is not None and value > high:
        return f"must be at most {_shown(high)}" + (f" ({setting.why})" if setting.why else "")
    return None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def type_names(types: tuple[type, ...]) -> str:
    return " or ".join("null" if t is type(None) else t.__name__ for t in types)


def check_value(where: str, value: Any, setting: Setting) -> list[str]:
    """Problems with one value, each prefixed by `where`."""
    # bool is an int subclass; a YAML `true` must not pass as a number, and vice versa.
    ok = any(
        (isinstance(value, t) and not (isinstance(value, bool) and t in (int, float)))
        or (t is float and isinstance(value, int) and not isinstance(value, bool))
        for t in setting.types
    )
    if not ok:
        return [f"{where}: expected {type_names(setting.types)}, got {type(value).__name__} "
                f"{value!r}"]
    if setting.choices is not None and value not in setting.choices:
        return [f"{where}: {value!r} is not one of {list(setting.choices)}"]
    out_of_bounds = check_bounds(value, setting)
    return [f"{where}: {out_of_bounds}"] if out_of_bounds else []


def check_settings(where: str, given: Any, schema: Mapping[str, Setting]) -> list[str]:
    """Problems with a mapping of settings against `schema`."""
    if given is None:
        return []
    if not isinstance(given, Mapping):
        return [f"{where}: expected a mapping, got {type(given).__name__}"]
    problems = []
    for key, value in given.items():
        if key not in schema:
            problems.append(f"{where}.{key}: unknown setting{did_you_mean(str(key), schema)}; "
                            f"known: {', '.join(sorted(schema)) or 'none'}")
            continue
        problems += check_value(f"{where}.{key}", value, schema[key])
    return problems


def report_settings(where: str, given: Any, schema: Mapping[str, Setting],
                    bad: Callable[[str, str], Any]) -> bool:
    """`check_settings`, each problem handed to `bad(field, message)` (a spec loader's
    collector); True if there was any."""
    problems = check_settings(where, given, schema)
    for p in problems:
        field, _, message = p.partition(": ")
        bad(field, message)
    return bool(problems)


def resolve(given: Mapping[str, Any] | None, schema: Mapping[str, Setting]) -> dict[str, Any]:
    given = given or {}
    return {k: given.get(k, s.default) for k, s in schema.items()}
