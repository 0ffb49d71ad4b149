"""The failed measurement checks (`checks`) in words and tables: the caveat a verdict
resting on them carries, the summary's ``checks`` column, the report's table of them,
and the warning lines under a CLI table."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from harness.analysis.checks.registry import CHECKS, Finding
from harness.analysis.checks.runfacts import GroupKey


def caveat(findings: Sequence[Finding], side: str, metric: str | None = None) -> list[str]:
    """Phrases qualifying a verdict on a side's group (``the client was saturated in 3
    of 5 base runs``); given a `metric`, only the checks that bear on it (a heavy tail
    qualifies a mean's verdict, not a p99's)."""
    return [CHECKS[f.check].caveat.format(k=len(f.runs), n=f.judged, side=side)
            for f in findings
            if metric is None or CHECKS[f.check].metrics is None
            or metric in CHECKS[f.check].metrics]


def findings_table(found: Mapping[GroupKey, Sequence[Finding]], by: Sequence[str]
                   ) -> pd.DataFrame:
    """One row per group and failed check: the `by` values, ``check``, ``runs`` (failing)
    and ``judged``, ``detail``; in group order, then `CHECKS` order."""
    rows = [[*key, f.check, len(f.runs), f.judged, f.detail]
            for key, fs in found.items() for f in fs]
    return pd.DataFrame(rows, columns=[*by, "check", "runs", "judged", "detail"])


def report_frame(found: Mapping[GroupKey, Sequence[Finding]], by: Sequence[str],
                 label: Sequence[str] | None = None) -> pd.DataFrame:
    """The report's "Measurement checks" table: one row per configuration and failed
    check: ``configuration`` (``k=v, ...`` of the `label` keys, default all of `by`;
    keys a configuration lacks are left out), ``check``, ``runs`` (``3 of 5``) and
    ``detail``."""
    rows = []
    for key, fs in found.items():
        config = configuration_label(key, by, label)
        rows += [[config, f.check, f"{len(f.runs)} of {f.judged}", f.detail] for f in fs]
    return pd.DataFrame(rows, columns=["configuration", "check", "runs", "detail"])


def configuration_label(key: GroupKey, by: Sequence[str],
                        label: Sequence[str] | None = None) -> str:
    """``k=v, ...`` of a group's `label` keys (default all of `by`), leaving out keys the
    configuration lacks; ``all runs`` when none is left."""
    values = dict(zip(by, key, strict=True))
    keys = list(label) if label is not None else list(by)
    return ", ".join(f"{k}={values[k]}" for k in keys
                     if k in values and _present(values[k])) or "all runs"


def _present(value: object) -> bool:
    """Whether a group key's value is one (an experiment without that grid key has a
    missing value there: NaN, None, or the grouping's "\\0nan" sentinel)."""
    if value is None or value == "\0nan":
        return False
    return not (isinstance(value, float) and math.isnan(value)) and str(value) not in (
        "nan", "<NA>")


def warning_lines(found: Mapping[GroupKey, Sequence[Finding]], by: Sequence[str],
                  side: str = "") -> list[str]:
    """``warning: client_saturated (BASE op=get; 3 runs): ...`` per failed check, for
    under a CLI table (as `harness summary` words its own)."""
    out = []
    for key, fs in found.items():
        where = configuration_label(key, by)
        for f in fs:
            k = len(f.runs)
            out.append(f"warning: {f.check} ({side + ' ' if side else ''}{where}; {k} run"
                       f"{'s' if k != 1 else ''}): {f.detail}")
    return out
