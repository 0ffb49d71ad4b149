"""The scan of `harness history`: false alarms at its level, a step found where it is,
the newest point judged by its own runs, outliers not taken for levels."""

from __future__ import annotations

import numpy as np

from harness.analysis.changepoints import LEVEL, scan, split_test


def test_on_series_without_a_change_a_split_is_kept_at_most_at_the_level() -> None:
    rng = np.random.default_rng(11)
    alarms = 0
    for i in range(300):
        n = int(rng.integers(10, 120))
        y = rng.normal(0, 0.03, n)
        alarms += any(c.p_scan < LEVEL for c in scan(y, np.arange(n), n, seed=i))
    # 300 series at 5%: 15 expected at most; 26 is beyond 2.6 binomial SDs of that.
    assert alarms <= 26


def test_a_step_is_found_where_it_is() -> None:
    rng = np.random.default_rng(2)
    y = rng.normal(0, 0.02, 80)
    y[50:] += np.log(1.08)
    kept = [c.point for c in scan(y, np.arange(80), 80) if c.p_scan < LEVEL]
    assert kept == [50]


def test_the_newest_point_is_judged_by_its_runs_and_needs_enough_of_them() -> None:
    rng = np.random.default_rng(5)
    point = np.repeat(np.arange(7), 3)  # 7 commits x 3 runs
    y = rng.normal(0, 0.02, point.size) + np.where(point == 6, np.log(1.2), 0)
    c = split_test(y, point, 0, 7)
    assert c is not None and c.point == 6 and c.p_scan < 0.001
    # Two runs at the newest point: no split may put them alone on a side.
    two = point.size - 1
    c2 = split_test(y[:two], point[:two], 0, 7)
    assert c2 is None or c2.point != 6


def test_one_wild_run_is_not_a_level() -> None:
    rng = np.random.default_rng(8)
    for seed in range(20):
        y = rng.normal(0, 0.02, 60)
        y[int(rng.integers(3, 57))] += np.log(3.0)
        assert not [c for c in scan(y, np.arange(60), 60, seed=seed) if c.p_scan < 0.01]
