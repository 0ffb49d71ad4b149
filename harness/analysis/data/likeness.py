"""Are two trees measurements of like things? What `harness compare` checks before it
judges anything: the workload, the servers' kinds, the load generator's settings and
every parameter outside the keys the groups are matched on. A comparison of memcached
against Redis under different workloads, or of two value sizes pooled into one group,
printed verdicts that meant nothing; now each difference is named in one line and the
comparison refused, unless the user says the difference is the point
(`--allow-different`).

Also the default matching: every grid key the two trees share, and the op, so nothing is
pooled across configurations unasked (`default_by`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.data.load import Loaded
from harness.errors import HarnessError
from harness.results import read_manifest
from harness.results.manifest import COUNT_PREFIX, KIT_PREFIX, LOADGEN_PREFIX
from harness.text import printable

#: The load generator's settings that make two measurements unlike: the load offered
#: (its results, such as the achieved rate, are no setting; a run's length and warm-up
#: change how precisely it measures, not what).
LOADGEN_SETTINGS = ("processes", "connections", "inflight", "mode", "target_rate_ops_s",
                    "arrival", "pause_us")
#: Run-table columns that are neither a parameter nor a setting.
_NOT_PARAMS = {"run_id", "experiment", "workload", "config_id", "repetition", "status",
               "started_utc", "ended_utc", "source", "spec_file", "error", "labels",
               "run_dir"}
#: How many differences a refusal names before it counts the rest.
SHOWN = 4


def default_by(base: Loaded, cand: Loaded) -> list[str]:
    """The op and every grid key the two trees share (in the base's order); with more
    than one experiment on a side, the experiment first: groups never pool across
    configurations or experiments unasked."""
    shared = [k for k in base.grid_keys if k in cand.grid_keys and k != "op"]
    several = max(base.runs["experiment"].nunique(), cand.runs["experiment"].nunique()) > 1
    return [*(["experiment"] if several else []), "op", *shared]


def differences(base: Loaded, cand: Loaded, by: Sequence[str]) -> list[tuple[str, str]]:
    """(key, "base value(s) against cand value(s)") for each difference outside `by`.
    Matched on the experiment, only the experiments both trees hold are compared: one
    that a side alone holds matches nothing and is left out as its groups are, and its
    workload or servers are no difference (a base tree with a Redis experiment beside the
    memcached one the candidate re-measured)."""
    out: list[tuple[str, str]] = []
    if "experiment" in by:
        both = set(base.runs["experiment"].astype(str)) & set(cand.runs["experiment"].astype(str))
        base, cand = (side.runs_where(side.runs["experiment"].astype(str).isin(both))
                      for side in (base, cand))

    def values(frame: pd.DataFrame, col: str) -> list[str]:
        if col not in frame:
            return []
        return sorted({_text(v) for v in frame[col] if not _missing(v)})

    if "experiment" not in by and (base.runs["experiment"].nunique() > 1
                                   or cand.runs["experiment"].nunique() > 1):
        b, c = values(base.runs, "experiment"), values(cand.runs, "experiment")
        if b != c:
            out.append(("experiment", f"{_list(b)} against {_list(c)}"))
    for col in ("workload",):
        b, c = values(base.runs, col), values(cand.runs, col)
        if b != c:
            out.append((col, f"{_list(b)} against {_list(c)}"))
    b, c = _server_kinds(base), _server_kinds(cand)
    if b != c:
        out.append(("servers", f"{_list(b)} against {_list(c)}"))
    params = sorted((set(_params(base.runs)) | set(_params(cand.runs))) - set(by))
    for col in params:
        b, c = values(base.runs, col), values(cand.runs, col)
        if b != c:
            out.append((col, f"{_list(b) or 'unset'} against {_list(c) or 'unset'}"))
    for key in LOADGEN_SETTINGS:
        if key in by:
            continue
        b, c = values(base.runs, LOADGEN_PREFIX + key), values(cand.runs, LOADGEN_PREFIX + key)
        if b != c:
            out.append((key, f"{_list(b) or 'unset'} against {_list(c) or 'unset'}"))
    return out


def refusal(found: Iterable[tuple[str, str]]) -> str:
    """One line naming the differences (the first few, the rest counted) and the way
    to compare all the same."""
    found = list(found)
    said = "; ".join(f"{k}: {v}" for k, v in found[:SHOWN])
    more = f"; and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    keys = ",".join(k for k, _ in found)
    return (f"BASE and CAND are not measurements of like things ({said}{more}); compare "
            f"like with like, match on what differs with --by, or say the difference is "
            f"the point with --allow-different {keys}")


def _params(runs: pd.DataFrame) -> list[str]:
    return [c for c in runs.columns if c not in _NOT_PARAMS and not c.startswith(
        (LOADGEN_PREFIX, COUNT_PREFIX, KIT_PREFIX, "label_"))]


def _server_kinds(loaded: Loaded) -> list[str]:
    """The kinds of the servers each configuration measured (one manifest a config)."""
    kinds: set[str] = set()
    runs = loaded.runs.drop_duplicates("config_id")
    for run_dir in runs["run_dir"].head(200):
        try:
            services = read_manifest(Path(run_dir)).services
        except (HarnessError, OSError):  # read once by the loader; gone since: unknown
            continue
        kinds |= {str(s.get("kind")) for s in services.values()
                  if isinstance(s, dict) and s.get("kind")}
    return sorted(kinds)


def _missing(v: Any) -> bool:
    try:
        return v is None or bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _text(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return printable(v if isinstance(v, str) else json.dumps(v, default=str))[:60]


def _list(values: Sequence[str]) -> str:
    shown = ", ".join(values[:3])
    return shown + (f" (+{len(values) - 3})" if len(values) > 3 else "")
