"""Which runs a number pools: complete runs, one per repetition; the rest are left out,
each with why, and every output says how many.

After Ctrl-C and ``harness run --resume`` a configuration holds the partial run of the
interrupted repetition beside its complete re-run, and two ``harness run``s of one spec
at once may both write a repetition: counted together, 4 repetitions become 5 runs, a
cut-short run weighs as much as a whole one, and intervals that take the run as the unit
claim more evidence than there is. So `harness summary`, `compare`, every study and the
report pool (through `harness.analysis.data.load`):

- complete runs, and partial ones only when asked (``include=("partial",)``,
  ``--include partial``); failed runs never: whatever ops they hold measured a setup
  that broke (a server gone, an error rate past the spec's limit);
- one run per (experiment, config_id, repetition, labels): a complete one before a
  partial one, then the earliest started (then the least run_id, for runs without a
  start time such as imported ones); the others are duplicates. Runs labelled
  differently (``--label commit=...``: another build) are never duplicates of each other.

A run left out is kept with its reason (`REASONS`); the runs table of `load_runs` and
the report's appendix still list every run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd

from harness.errors import ResultsError
from harness.results import RUN_STATUSES

#: Run statuses that ``include`` may add to the complete runs.
INCLUDABLE: tuple[str, ...] = ("partial",)
#: Why a run is left out, in the order outputs name them.
REASONS: tuple[str, ...] = ("partial", "failed", "duplicate")
#: The column of a left-out runs table that holds the reason.
LEFT_OUT = "left_out"
#: A repetition is one run of one configuration of one experiment, of one labelling.
REPETITION_KEYS: tuple[str, ...] = ("experiment", "config_id", "repetition", "labels")


def check_include(include: Iterable[str]) -> tuple[str, ...]:
    """`include` as a tuple; raises `ResultsError` on a status it cannot add."""
    out = tuple(dict.fromkeys(include))
    for status in out:
        if status == "failed":
            raise ResultsError("failed runs are never pooled: their ops measured a setup "
                               "that broke (`harness summary --by status` cannot show "
                               "them either; the report's failures table lists them)")
        if status not in INCLUDABLE:
            known = [s for s in RUN_STATUSES if s not in ("complete", "failed")]
            raise ResultsError(f"unknown run status {status!r} to include; choose from "
                               f"{', '.join(known)} (complete runs are always pooled)")
    return out


def pool(runs: pd.DataFrame, include: Iterable[str] = ()) -> tuple[pd.DataFrame,
                                                                   pd.DataFrame]:
    """(pooled runs, left-out runs with a `LEFT_OUT` column), each in `runs`' order.

    `runs` is a runs table (`harness.analysis.data.load.runs_frame`); see the module doc."""
    include = check_include(include)
    runs = runs.reset_index(drop=True)
    if "labels" not in runs:  # a table made by hand, or before labels: none
        runs = runs.assign(labels="{}")
    status = runs["status"].astype(str)
    eligible = (status == "complete") | status.isin(include)
    reason = pd.Series(None, index=runs.index, dtype=object)
    reason[status == "failed"] = "failed"
    reason[(status == "partial") & ~eligible] = "partial"
    if eligible.any():
        cand = runs.loc[eligible, list(REPETITION_KEYS)].assign(
            _rank=(status[eligible] != "complete").astype(int),
            _start=pd.to_datetime(runs.loc[eligible, "started_utc"], utc=True,
                                  errors="coerce", format="ISO8601"),
            _id=runs.loc[eligible, "run_id"].astype(str))
        cand = cand.sort_values(["_rank", "_start", "_id"], na_position="last",
                                kind="stable")
        dup = cand.duplicated(list(REPETITION_KEYS), keep="first")
        reason[dup[dup].index] = "duplicate"
    kept = reason.isna().to_numpy()
    left_out = runs[~kept].assign(**{LEFT_OUT: reason[~kept]})
    return runs[kept].reset_index(drop=True), left_out.reset_index(drop=True)


def counts(left_out: pd.DataFrame) -> dict[str, dict[str, int]]:
    """experiment -> reason -> runs left out (reasons in `REASONS` order, none at 0)."""
    out: dict[str, dict[str, int]] = {}
    if left_out.empty:
        return out
    table = left_out.groupby(["experiment", LEFT_OUT]).size()
    for exp in sorted(left_out["experiment"].astype(str).unique()):
        out[exp] = {r: int(table[(exp, r)]) for r in REASONS if (exp, r) in table.index}
    return out


def phrase(by_reason: Mapping[str, int]) -> str:
    """``2 partial, 1 failed and 1 duplicate run`` (the noun agrees with the last count,
    as one says it); empty for nothing."""
    items = [(n, r) for r in REASONS if (n := int(by_reason.get(r, 0)))]
    if not items:
        return ""
    words = [f"{n} {r}" for n, r in items]
    text = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
    return f"{text} run{'s' if items[-1][0] != 1 else ''}"


#: How each output adds partial runs, in its hint.
CLI_HINT = "--include partial adds the partial ones"
REPORT_HINT = ("`harness report --include partial`, or `include = [\"partial\"]` in a "
               "notebook, adds the partial ones")


def _hints(reasons: set[str], include: Iterable[str], add: str) -> str:
    hints = []
    if "partial" in reasons and "partial" not in tuple(include):
        hints.append(add)
    if "duplicate" in reasons:
        hints.append("a duplicate repeats the configuration and repetition of a run "
                     "that counts: complete before partial, then the earliest")
    return f" ({'; '.join(hints)})" if hints else ""


def line(left_out: pd.DataFrame | Mapping[str, pd.DataFrame], include: Iterable[str] = (),
         add: str = CLI_HINT) -> str:
    """One line for under a CLI table: what was left out, per experiment (and per side,
    given ``{"BASE": ..., "CAND": ...}``), and how to add the partial runs (`add`); empty
    when nothing was."""
    sides = left_out if isinstance(left_out, Mapping) else {"": left_out}
    parts, reasons = [], set()
    for side, frame in sides.items():
        per = counts(frame)
        if per:
            text = "; ".join(f"{exp}: {phrase(c)}" for exp, c in per.items())
            parts.append(f"of {side}, {text}" if side else text)
            reasons.update(r for c in per.values() for r in c)
    if not parts:
        return ""
    return f"left out: {'; '.join(parts)}" + _hints(reasons, include, add)


def overview_sentence(left_out: pd.DataFrame, include: Iterable[str] = ()) -> str:
    """The report overview's sentence: the rule, and per experiment what it left out."""
    include = tuple(include)
    rule = ("Every table and figure counts complete runs"
            + (" and partial ones" if "partial" in include else "")
            + ", one run per repetition, and no failed run")
    per = counts(left_out)
    if not per:
        return f"{rule}; none was left out."
    items = "; ".join(f"`{exp}`: {phrase(c)} left out" for exp, c in per.items())
    reasons = {r for c in per.values() for r in c}
    return f"{rule}: {items}{_hints(reasons, include, REPORT_HINT)}."


def study_note(left_out: pd.DataFrame, pooled: pd.DataFrame, include: Iterable[str] = ()
               ) -> str:
    """A study's sentence on its runs: partial runs pooled (when asked for) and what was
    left out, with the overview's hints; empty when every run is complete and counted."""
    out = []
    n_partial = int((pooled["status"] == "partial").sum()) if len(pooled) else 0
    if n_partial:
        out.append(f"{n_partial} partial run{'s' if n_partial != 1 else ''} pooled with "
                   "the complete ones (`include`)")
    total = {r: int((left_out[LEFT_OUT] == r).sum()) for r in REASONS} if len(left_out) \
        else {}
    if any(total.values()):
        reasons = {r for r, n in total.items() if n}
        out.append(f"{phrase(total)} left out{_hints(reasons, include, REPORT_HINT)}; the "
                   "appendix lists every run")
    return "; ".join(out) + "." if out else ""
