"""Numbers no run could have: what makes a run read back "damaged" (`DAMAGED`).

A manifest is read from anywhere (a shared tree, a bit flip, a forger): a count that
is not finite, negative, fractional or absurd, a load-generator setting that no run
had, times that run backwards. Each reader names such a run on stderr and skips it
(`harness.results.manifest` raises ResultsError ending with `DAMAGED`), so one planted
file never stops an analysis nor fails a CI gate as a regression.
"""

from __future__ import annotations

import math
from dataclasses import fields
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.results.manifest import Manifest

#: A count above this is a damaged manifest, not a measurement (a billion ops a second
#: for eleven days); also the bound of repetitions and of the load generator's settings.
MAX_COUNT = 10**15
#: What a reader says of a run whose numbers cannot be a measurement's.
DAMAGED = "a damaged run"


def count_problem(value: object) -> str | None:
    """Why `value` cannot be a count (of ops, records, repetitions), or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "not a number"
    if not math.isfinite(value):
        return f"{value}, not a finite number"
    if value < 0:
        return f"{value:g}, negative"
    if value != int(value):
        return f"{value:g}, not a whole number"
    if value > MAX_COUNT:
        return f"{value:g}, more than any run holds"
    return None


def damage_problem(manifest: Manifest) -> str | None:
    """What, read back, no run of the kit could have written: a repetition, a load
    generator setting (a size, a time or a rate) that is not finite, negative or absurd,
    or times that run backwards. (Counts are held to `count_problem` wherever they are
    read; a producer's NaN in a setting is written as null, "unknown".)"""
    if problem := count_problem(manifest.repetition):
        return f"repetition is {problem}"
    loadgen = manifest.typed_loadgen
    for f in fields(loadgen):
        value = getattr(loadgen, f.name)
        if isinstance(value, int | float) and not isinstance(value, bool) and (
                not math.isfinite(value) or value < 0 or value > MAX_COUNT):
            return f"loadgen.{f.name} is {value:g}, not a setting any run had"
    return _time_problem(manifest.started_utc, manifest.ended_utc)


def _time_problem(started: str, ended: str) -> str | None:
    """Why a run's start and end times cannot be one run's (None where either is
    unknown, as in an import)."""
    times = []
    for text in (started, ended):
        if not text:
            return None
        try:
            times.append(datetime.fromisoformat(text))
        except ValueError:
            return None  # no time a reader can use, as an import's: unknown, not damage
    try:
        backwards = times[1] < times[0]
    except TypeError:  # one with a zone, one without
        return "started_utc and ended_utc are not both UTC"
    return "ended_utc is before started_utc" if backwards else None
