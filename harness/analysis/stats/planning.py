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
    tol = math.log1p(threshold)
    for r in table.itertuples(index=False):
        if r.verdict != verdict.INCONCLUSIVE or not (r.ratio_ci_low > 0 and r.ratio > 0):
            continue
        n = int(min(r.n_base, r.n_cand))
        half = (math.log(r.ratio_ci_high) - math.log(r.ratio_ci_low)) / 2
        effect = abs(math.log(r.ratio))
        ways = [effect, tol - effect] if effect < tol else [effect]
        need = min(n * (half / w) ** 2 for w in ways if w > 0) if half > 0 else n
        needs.append(max(n + 1, math.ceil(need)))
        now = max(now, n)
    if not needs:
        return None
    return now, min(needs), max(needs)


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
