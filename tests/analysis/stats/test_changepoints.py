"""The places and tests of `harness history`: false alarms at the level, steps found
where they are (also a regression and its fix), the newest point judged by its own runs,
outliers not taken for levels."""

from __future__ import annotations

import numpy as np

from harness.analysis.history.changes import detect
from harness.analysis.stats import intervals
from harness.analysis.stats.changepoints import locations, noise_sd, split_test


def test_without_a_change_the_stretch_test_alarms_at_most_at_its_level() -> None:
    rng = np.random.default_rng(11)
    alarms = 0
    for i in range(300):
        n = int(rng.integers(10, 120))
        c = split_test(rng.normal(0, 0.03, n), np.arange(n), 0, n,
                       rng=np.random.default_rng(i))
        alarms += c is not None and c.p_scan < 0.05
    # 300 series at 5%: 15 expected at most; 26 is beyond 2.6 binomial SDs of that.
    assert alarms <= 26


def test_steps_are_placed_where_they_are_also_a_regression_and_its_fix() -> None:
    rng = np.random.default_rng(2)
    y = rng.normal(0, 0.02, 80)
    y[30:55] += np.log(0.8)  # down at 30, back at 55: binary segmentation masks these
    assert locations(y, np.arange(80), 80) == [30, 55]
    flat = rng.normal(0, 0.02, 80)
    assert locations(flat, np.arange(80), 80) == []
    assert abs(noise_sd(y) - 0.02) < 0.006  # the steps do not inflate the noise


def test_the_newest_point_is_judged_by_its_runs_and_needs_enough_of_them() -> None:
    rng = np.random.default_rng(5)
    point = np.repeat(np.arange(7), 3)  # 7 commits x 3 runs
    y = rng.normal(0, 0.02, point.size) + np.where(point == 6, np.log(1.2), 0)
    assert locations(y, point, 7) == [6]
    c = split_test(y, point, 0, 7)
    assert c is not None and c.point == 6 and c.p_scan < 0.001
    # Two runs at the newest point: no place and no split may put them alone on a side.
    two = point.size - 1
    assert 6 not in locations(y[:two], point[:two], 7)
    c2 = split_test(y[:two], point[:two], 0, 7)
    assert c2 is None or c2.point != 6


def test_one_wild_run_is_not_a_level() -> None:
    rng = np.random.default_rng(8)
    found = 0
    for _ in range(40):
        y = rng.normal(0, 0.02, 60)
        y[int(rng.integers(3, 57))] += np.log(3.0)
        # It may be cut out as a candidate; its tests then see no level.
        ops = np.full(60, 1e5)
        wall = ops / np.exp(y)

        def side(i: np.ndarray, ops: np.ndarray = ops, wall: np.ndarray = wall
                 ) -> intervals.RunInterval:
            return intervals.throughput_interval(ops[i], wall[i], False)

        found += len(detect([y], [np.arange(60)], [side])[1][0])
    assert found <= 2  # 40 series at q = 0.05: a false change in 2 at most
    # One slow run of three at a point: no level either, though that point's mean moved.
    point = np.repeat(np.arange(12), 3)
    y = rng.normal(0, 0.02, point.size)
    y[16] += np.log(2.0)
    ops = np.full(point.size, 1e5)
    wall = ops / np.exp(y)

    def side3(i: np.ndarray) -> intervals.RunInterval:
        return intervals.throughput_interval(ops[i], wall[i], False)

    assert detect([y], [point], [side3])[1][0] == []
