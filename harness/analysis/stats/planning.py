"""How many runs an open comparison needs: from the intervals a first round of runs
gave, the runs per configuration that would decide it (better, worse, or equivalent
within the threshold), for the report's "what it would take" and `harness compare`.

An interval's width on the log scale shrinks as 1/sqrt(runs) at the spread seen (the
t quantile shrinks too, so the estimate errs long); Kalibera and Jones (ISMM 2013) plan
repetitions the same way from a first round's variance.
"""

from __future__ import annotations

import math

import pandas as pd

from harness.analysis.stats import verdict

#: Past this many runs per configuration a comparison is called out of reach here.
MOST_RUNS_SAID = 1000


def runs_to_decide(table: pd.DataFrame, threshold: float) -> tuple[int, int, int] | None:
    """(runs now, runs that would decide the closest open comparison, runs that would
    decide them all) per configuration, from the open rows' observed intervals: an
    interval's width on the log scale shrinks as 1/sqrt(runs), and a row is decided once
    its interval excludes 1 (better or worse) or lies within ±`threshold` (equivalent),
    whichever comes first. None where no row is open or none has an interval."""
    needs, now = [], 0
    for r in table.itertuples(index=False):
        if r.verdict != verdict.INCONCLUSIVE or not (r.ratio_ci_low > 0 and r.ratio > 0):
            continue
        n = int(min(r.n_base, r.n_cand))
        need = n * factor(r.ratio, r.ratio_ci_low, r.ratio_ci_high, threshold)
        needs.append(max(n + 1, math.ceil(need)))
        now = max(now, n)
    if not needs:
        return None
    return now, min(needs), max(needs)


def factor(ratio: float, low: float, high: float, threshold: float) -> float:
    """How many times its runs an open comparison needs for its interval to exclude 1
    or to lie within ±`threshold`, whichever comes first: its width on the log scale
    shrinks as 1/sqrt(runs). 1 where the interval has no width."""
    tol = math.log1p(threshold)
    half = (math.log(high) - math.log(low)) / 2
    effect = abs(math.log(ratio))
    ways = [effect, tol - effect] if effect < tol else [effect]
    return min((half / w) ** 2 for w in ways if w > 0) if half > 0 else 1.0


def times_text(intervals: list[tuple[float, float, float]], threshold: float) -> str:
    """For a section whose comparisons are all open and whose run counts the summary
    does not have: how many times the runs would decide the closest and all of them,
    from their (ratio, low, high) at the level printed."""
    fs = [factor(r, lo, hi, threshold) for r, lo, hi in intervals
          if r > 0 and lo > 0 and hi > lo and math.isfinite(hi)]
    if not fs:
        return ""

    def times(f: float) -> str:
        return "more than 100 times" if f > 100 else f"about {max(f, 1.1):.2g} times"

    return (f"At the spread seen, {times(min(fs))} the runs per configuration would "
            f"decide the closest comparison, {times(max(fs))} all of them (decided: the "
            f"interval excludes no change, or lies within ±{threshold:.0%}).")


def would_take_text(table: pd.DataFrame, threshold: float) -> str:
    """One line: what deciding the open comparisons would take, in runs per
    configuration."""
    got = runs_to_decide(table, threshold)
    if got is None:
        return ""
    now, least, most = got

    def runs(k: int) -> str:
        return f"more than {MOST_RUNS_SAID:,}" if k > MOST_RUNS_SAID else f"about {k:,}"

    return (f"None decided with {now} run{'s' if now != 1 else ''} per configuration; at "
            f"the spread seen, {runs(least)} per configuration would decide the closest "
            f"comparison, {runs(most)} all of them (decided: the interval excludes no "
            f"change, or lies within ±{threshold:.0%}).")
