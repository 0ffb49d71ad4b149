"""`until` stops on the interval the report prints (pooled throughput, jackknife over
runs), judged with a pessimistic spread so that the reported interval keeps its coverage
after stopping (seeded simulation; benchmarks/stats_coverage.py has the heavier one)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from harness.analysis import intervals
from harness.runner import UNTIL_SPREAD_BOUND, ci_halfwidth_pct, until_met


def test_halfwidth_is_the_reported_interval_with_a_pessimistic_spread():
    runs = [(1000.0, 900.0), (1000.0, 1000.0), (500.0, 1300.0), (1000.0, 950.0)]
    ops = np.array([o for o, _ in runs])
    rates = np.array([r for _, r in runs])
    reported = intervals.ratio_interval(ops, ops / rates)  # what summary prints
    assert reported.value == pytest.approx(ops.sum() / (ops / rates).sum())
    half_log = math.log(reported.high / reported.value)
    inflate = math.sqrt(3 / st.chi2.ppf(1 - UNTIL_SPREAD_BOUND, 3))
    assert ci_halfwidth_pct(runs) == pytest.approx(100 * math.expm1(half_log * inflate))
    assert ci_halfwidth_pct(runs[:1]) is None


def test_until_needs_the_target_met_with_and_without_the_latest_run():
    steady = {1: (100.0, 1000.0), 2: (100.0, 1001.0), 3: (100.0, 999.0), 4: (100.0, 1000.5)}
    assert until_met(steady, 5)
    assert not until_met({1: steady[1], 2: steady[2]}, 5)  # 2 runs: no look without one
    jumpy = {1: (100.0, 1000.0), 2: (100.0, 1300.0), 3: (100.0, 1001.0), 4: (100.0, 1000.0)}
    assert ci_halfwidth_pct(list(jumpy.values())) is not None
    assert not until_met(jumpy, 5)  # met by all four only if the first three met it too


def test_reported_interval_keeps_its_coverage_after_stopping():
    # 5% run-to-run spread, minimum 3 runs, ±5% target, at most 30: the old rule (stop
    # when the 95% CI is within target) left the reported interval covering ~0.90.
    rng = np.random.default_rng(7)
    sims, cv, most = 500, 0.05, 30
    sig = math.sqrt(math.log(1 + cv * cv))
    hits = 0
    for _ in range(sims):
        rates = np.exp(rng.normal(-sig**2 / 2, sig, most))  # true throughput 1
        n = next((k for k in range(3, most + 1)
                  if until_met({i: (1.0, float(r)) for i, r in enumerate(rates[:k])}, 5)),
                 most)
        hits += intervals.ratio_interval(rates[:n], np.ones(n)).contains(1.0)
    assert hits / sims >= 0.93 - 2 * math.sqrt(0.93 * 0.07 / sims)
