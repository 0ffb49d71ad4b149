"""How many runs an open comparison needs (`harness.analysis.stats.planning`), held to a
simulation with a known answer: the estimate from a first round's interval, used as a
second round's size, decides the comparison about as often as the width arithmetic says."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from harness.analysis.stats import planning, verdict


def _row(ratio: float, low: float, high: float, n: int, said: str = verdict.INCONCLUSIVE
         ) -> dict:
    return {"ratio": ratio, "ratio_ci_low": low, "ratio_ci_high": high, "n_base": n,
            "n_cand": n, "verdict": said}


def test_the_width_shrinks_as_one_over_sqrt_runs() -> None:
    # 3 runs, a 1.10x effect whose interval reaches 1.10x * / 1.21 (half-width log 1.1 *
    # 2): to exclude 1 the half-width must fall to log 1.1, so 4x the runs.
    t = pd.DataFrame([_row(1.10, 1.10 / 1.21, 1.10 * 1.21, 3),
                      _row(2.0, 1.5, 2.6, 3, verdict.WORSE)])  # decided: not counted
    now, least, most = planning.runs_to_decide(t, threshold=0.0)
    assert now == 3 and least == most == 12
    # Within ±5% counts as decided too: an estimate of 1.0 needs its half-width below
    # log 1.05.
    t = pd.DataFrame([_row(1.0, 1 / 1.2, 1.2, 5)])
    assert planning.runs_to_decide(t, threshold=0.05)[1] == math.ceil(
        5 * (math.log(1.2) / math.log(1.05)) ** 2)
    assert planning.runs_to_decide(pd.DataFrame([_row(2.0, 1.5, 2.6, 3, verdict.BETTER)]),
                                   0.05) is None
    assert "about 12 per configuration would decide the closest comparison" in (
        planning.would_take_text(pd.DataFrame([_row(1.10, 1.10 / 1.21, 1.10 * 1.21, 3)]),
                                 0.0))


def test_the_planned_runs_decide_a_real_effect_in_a_simulation() -> None:
    """Log-normal runs with a true 1.10x effect and 10% run-to-run spread: a first round
    of 3 runs each gives an interval; the plan's runs per side, taken afresh, exclude 1 in
    most repetitions (t interval on log means at 95%): the plan is not far short."""
    rng = np.random.default_rng(7)
    hits, plans = 0, []
    for _ in range(300):
        a, b = rng.normal(0, 0.1, 3), rng.normal(math.log(1.10), 0.1, 3)
        diff = b.mean() - a.mean()
        se = math.sqrt(a.var(ddof=1) / 3 + b.var(ddof=1) / 3)
        half = stats.t.ppf(0.975, 4) * se
        t = pd.DataFrame([_row(math.exp(diff), math.exp(diff - half), math.exp(diff + half),
                               3)])
        got = planning.runs_to_decide(t, threshold=0.0)
        if got is None:
            continue
        n = min(got[1], 200)
        plans.append(n)
        a, b = rng.normal(0, 0.1, n), rng.normal(math.log(1.10), 0.1, n)
        se = math.sqrt(a.var(ddof=1) / n + b.var(ddof=1) / n)
        low = b.mean() - a.mean() - stats.t.ppf(0.975, 2 * n - 2) * se
        hits += low > 0
    assert len(plans) > 250
    # Planned from a noisy first round, the second decides in over half the repetitions
    # (67% with this seed, median plan 13 runs a side): a plan to just exclude 1 at the
    # effect seen, not a guarantee; it says "about".
    assert hits / len(plans) > 0.5, (hits, len(plans), np.median(plans))


def test_a_studys_open_comparisons_say_how_many_times_the_runs_would_decide() -> None:
    """A study's answers carry their intervals but not their runs: the summary says the
    multiple, the same arithmetic as the runs (4x for the 1.10x of the first test)."""
    assert planning.factor(1.10, 1.10 / 1.21, 1.10 * 1.21, 0.0) == pytest.approx(4.0)
    text = planning.times_text([(1.10, 1.10 / 1.21, 1.10 * 1.21), (1.0, 0.5, 2.0)], 0.05)
    assert "about 4 times the runs per configuration would decide the closest" in text
    assert "more than 100 times all of them" in text  # 1.0x [0.5, 2]: (log 2/log 1.05)^2
    assert planning.times_text([(1.0, float("nan"), float("nan"))], 0.05) == ""


def test_the_summary_of_findings_says_it_for_a_study_that_decided_nothing() -> None:
    from harness.analysis.sections.answers import Answer
    from harness.report.findings import findings_html
    from harness.report.render import Section

    open_ = [Answer(f"c{i} against c0: throughput", verdict.INCONCLUSIVE, 1.10,
                    1.10 / 1.21, 1.10 * 1.21, 0.975, "kv_cache") for i in (1, 2)]
    s = Section("40-kvstore", "KV store", "sec-4", "", answers=[(a, "#sec-4") for a in open_])
    page = findings_html([s])
    assert "2 comparisons, 0 decided" in page
    assert "about 4 times the runs per configuration would decide" in page
