"""The places and tests of `harness history`: false alarms at the level, steps found
where they are (also a regression and its fix), the newest point judged by its own runs,
outliers not taken for levels."""

from __future__ import annotations

import math

import numpy as np

from harness.analysis.history.changes import detect
from harness.analysis.stats import intervals
from harness.analysis.stats.changepoints import (
    locations,
    newest_level,
    noise_sd,
    split_test,
    trailing,
)


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


def test_the_trailing_test_holds_its_level_and_finds_a_newest_step() -> None:
    """Seeded series of 15 runs, one per point, 3% noise: the one-sided p of the newest
    runs against their level is uniform when nothing changed, and small after a +15%
    step of one run."""
    rng = np.random.default_rng(7)
    point = np.arange(15)
    null_p, step_p = [], []
    for _ in range(2000):
        y = rng.normal(0, 0.03, 15)
        tests = trailing(y, point, [], min_runs=3)
        assert [t.points for t in tests] == [1, 2] and [t.runs for t in tests] == [1, 2]
        null_p.append(tests[0].p)
        y[-1] += math.log(1.15)
        step_p.append(trailing(y, point, [], min_runs=3)[0].p)
    assert 0.035 < np.mean(np.array(null_p) < 0.05) < 0.065
    assert np.mean(np.array(step_p) < 0.01) > 0.9
    # Higher is better (throughput): the same step up is no worse run.
    assert trailing(y, point, [], min_runs=3, higher_is_better=True)[0].p > 0.99
    # The newest point alone holds enough runs: nothing to test, the gate can judge it.
    assert trailing(np.zeros(9) + rng.normal(0, 0.03, 9), np.arange(9) // 3, [],
                    min_runs=3) == ()


def test_the_newest_points_of_a_level_against_the_level_before() -> None:
    """Three runs per point, 20 points, a level change at 12 in the model (`cuts`): the
    newest 3 points against points 0-11, points as units (the runs of a point share its
    offset, 2% here, beside their own 2%). When nothing stepped, its p is uniform, so at
    the gate's 0.001 one in a thousand; a 10% step shows at once."""
    rng = np.random.default_rng(11)
    point = np.repeat(np.arange(20), 3)
    null_p, step_p = [], []
    for _ in range(2000):
        y = np.repeat(rng.normal(0, 0.02, 20), 3) + rng.normal(0, 0.02, 60)
        found = newest_level(y, point, [12])
        assert found is not None and (found.points, found.runs) == (3, 9)
        null_p.append(found.p)
        y[point >= 12] += math.log(1.10)
        step = newest_level(y, point, [12])
        assert step is not None
        step_p.append(step.p)
        assert abs(step.ratio / found.ratio - 1.10) < 1e-9
    assert 0.035 < np.mean(np.array(null_p) < 0.05) < 0.065
    assert np.mean(np.array(null_p) < 0.001) < 0.003
    assert np.mean(np.array(step_p) < 0.001) > 0.9
    # A level of one point is held to the level before on that point alone.
    assert newest_level(y, point, [19]).points == 1
    assert newest_level(y, point, []) is None
