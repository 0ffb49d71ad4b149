"""Intervals over runs: known answers, and coverage by seeded simulation at the built-in
specs' repetition counts (3, 5 and 10 runs). A heavier version with more settings is
benchmarks/stats_coverage.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as st

from harness.analysis.stats import intervals


def mixture_quantile(q: float, sigma: float, run_sd: float) -> float:
    """q-quantile of lognormal(0, sigma) ops scaled by a lognormal(0, run_sd) run effect,
    pooled over infinitely many runs (Gauss-Hermite over the run effect)."""
    x, w = np.polynomial.hermite_e.hermegauss(60)
    w = w / w.sum()

    def f(lx: float) -> float:
        return float((w * st.norm.cdf((lx - run_sd * x) / sigma)).sum() - q)

    return math.exp(optimize.brentq(f, -20, 20))


def test_ratio_interval_known_answer():
    # Three runs of 100 ops in 1, 2 and 1 s: pooled 300 / 4 s = 75 ops/s; leave-one-out
    # rates 200/3, 100, 200/3 -> jackknife SE of the log.
    ops, wall = np.array([100.0, 100, 100]), np.array([1.0, 2.0, 1.0])
    iv = intervals.ratio_interval(ops, wall)
    logs = np.log([200 / 3, 100, 200 / 3])
    se = math.sqrt(2 / 3 * ((logs - logs.mean()) ** 2).sum())
    half = st.t.ppf(0.975, 2) * se
    assert iv.value == pytest.approx(75)
    assert (iv.low, iv.high) == pytest.approx((75 * math.exp(-half), 75 * math.exp(half)))
    assert iv.n_runs == 3 and iv.df == 2


def test_one_run_gets_no_interval_and_says_so():
    iv = intervals.ratio_interval(np.array([100.0]), np.array([1.0]))
    assert iv.value == 100 and math.isnan(iv.low) and "one run" in iv.note


def test_percentile_of_too_few_ops_gets_no_interval():
    rng = np.random.default_rng(0)
    lat, run = rng.lognormal(0, 0.5, 500), np.repeat(np.arange(5), 100)
    iv = intervals.quantile_interval(lat, run, 0.99)
    assert iv.value == pytest.approx(np.quantile(lat, 0.99))
    assert math.isnan(iv.low) and "too few ops" in iv.note and "needs 1000" in iv.note
    assert not math.isnan(intervals.quantile_interval(lat, run, 0.5).low)


def _coverage(runs: int, ops: int, sigma: float, run_sd: float, sims: int, seed: int):
    rng = np.random.default_rng(seed)
    lat = np.exp(rng.normal(0, sigma, (sims, runs, ops)) + rng.normal(0, run_sd,
                                                                       (sims, runs, 1)))
    mean = math.exp(sigma**2 / 2 + run_sd**2 / 2)
    truth = {"throughput": 1 / mean, "mean": mean,
             "p50": mixture_quantile(0.5, sigma, run_sd),
             "p99": mixture_quantile(0.99, sigma, run_sd)}
    hits = dict.fromkeys(truth, 0)
    label = np.repeat(np.arange(runs), ops)
    n = np.full(runs, float(ops))
    for x in lat:
        busy = x.sum(axis=1)  # closed loop, one client: a run's wall time
        hits["throughput"] += intervals.throughput_interval(n, busy, False).contains(
            truth["throughput"])
        hits["mean"] += intervals.mean_interval(busy, n).contains(truth["mean"])
        hits["p50"] += intervals.quantile_interval(x.ravel(), label, 0.5).contains(
            truth["p50"])
        hits["p99"] += intervals.quantile_interval(x.ravel(), label, 0.99).contains(
            truth["p99"])
    return {k: v / sims for k, v in hits.items()}


@pytest.mark.parametrize(("runs", "run_sd"), [(5, 0.05), (5, 0.2), (3, 0.1), (10, 0.1)])
def test_coverage_of_every_printed_interval(runs, run_sd):
    # 5 runs of 1000 ops with run-to-run variation: the issue asks >= 0.93. With 400
    # simulated experiments the Monte Carlo SE is ~0.011, so the bar is 0.93 - 2 SE.
    sims = 400
    cov = _coverage(runs, 1000, 0.5, run_sd, sims, seed=runs * 100 + int(run_sd * 100))
    floor = 0.93 - 2 * math.sqrt(0.93 * 0.07 / sims)
    assert all(c >= floor for c in cov.values()), cov
    assert all(c <= 0.995 for c in cov.values()), cov  # not uselessly wide either


def test_each_run_counts_once_and_equal_runs_pool_to_total_over_total():
    ops, wall = np.array([100.0, 100, 100]), np.array([1.0, 2.0, 1.0])
    # Fixed-count runs of equal ops: the harmonic mean of the rates, = 300 ops / 4 s.
    assert intervals.throughput_interval(ops, wall, False).value == pytest.approx(75)
    # Fixed-duration runs of equal time: the arithmetic mean of the rates, = total/total.
    ops2, wall2 = np.array([100.0, 300, 200]), np.array([2.0, 2.0, 2.0])
    assert intervals.throughput_interval(ops2, wall2, True).value == pytest.approx(100)
    # Unequal lengths: each run once, not the longest deciding.
    ops3, wall3 = np.array([1000.0, 100]), np.array([10.0, 2.0])  # 100 and 50 ops/s
    assert intervals.throughput_interval(ops3, wall3, False).value == pytest.approx(
        2 / (1 / 100 + 1 / 50))
    assert intervals.throughput_interval(ops3, wall3, True).value == pytest.approx(75)
    assert intervals.mean_interval(np.array([10.0, 6.0]), np.array([4.0, 2.0])).value == \
        pytest.approx((2.5 + 3) / 2)


@pytest.mark.parametrize(("runs", "run_sd"), [(5, 0.1), (10, 0.05)])
def test_runs_of_unequal_length_keep_their_coverage(runs, run_sd):
    """Issue 26, item 2: one run in five 10x longer made the pooled intervals (total /
    total, the longest run deciding) cover 0.86-0.90; each run counting once keeps
    0.93-0.97 (benchmarks/stats_coverage.py has every setting)."""
    rng = np.random.default_rng(runs * 7 + int(run_sd * 100))
    sims, sigma = 600, 0.5
    ops = np.array([5000.0 if i % 5 == 0 else 500.0 for i in range(runs)])
    mean = math.exp(sigma**2 / 2 + run_sd**2 / 2)
    kit = {"throughput": 0, "mean": 0}
    pooled = 0
    for _ in range(sims):
        busy = np.array([rng.lognormal(0, sigma, int(n)).sum() for n in ops]) * \
            rng.lognormal(0, run_sd, runs)
        kit["throughput"] += intervals.throughput_interval(ops, busy, False).contains(1 / mean)
        kit["mean"] += intervals.mean_interval(busy, ops).contains(mean)
        pooled += intervals.ratio_interval(busy, ops).contains(mean)
    se = math.sqrt(0.95 * 0.05 / sims)
    for k, v in kit.items():
        assert 0.93 - 2 * se <= v / sims <= 0.97 + 2 * se, (k, v / sims)
    assert pooled / sims < 0.93  # what the kit printed before


def test_p999_gets_an_interval_at_10000_ops_per_run_and_it_covers():
    # The datastore table prints p99.9 with this interval once every run has 10 000 ops
    # (10 beyond it). 5 runs, 10% run-to-run SD; 250 simulated experiments (~3 s), so the
    # bar is 0.93 - 2 Monte Carlo SE. benchmarks/stats_coverage.py has more settings.
    sims, runs, ops, run_sd = 250, 5, 10_000, 0.1
    rng = np.random.default_rng(999)
    truth = mixture_quantile(0.999, 0.5, run_sd)
    label = np.repeat(np.arange(runs), ops)
    hits = 0
    for _ in range(sims):
        x = np.exp(rng.normal(0, 0.5, (runs, ops)) + rng.normal(0, run_sd, (runs, 1)))
        iv = intervals.quantile_interval(x.ravel(), label, 0.999)
        assert not math.isnan(iv.low)
        hits += iv.contains(truth)
    floor = 0.93 - 2 * math.sqrt(0.93 * 0.07 / sims)
    assert floor <= hits / sims <= 0.995
    short = intervals.quantile_interval(x.ravel()[: runs * 9_999], label[: runs * 9_999],
                                        0.999)
    assert math.isnan(short.low) and "needs 10000" in short.note


def test_tail_runs_counts_the_runs_holding_the_tail():
    # Beyond a pooled value of 10: run 0 holds 20 ops, runs 1 and 2 hold 10 each ->
    # shares 1/2, 1/4, 1/4 -> Kish's 1 / (1/4 + 1/16 + 1/16) = 8/3.
    lat = np.concatenate([np.r_[np.ones(80), np.full(20, 20.0)],
                          np.r_[np.ones(90), np.full(10, 20.0)],
                          np.r_[np.ones(90), np.full(10, 20.0)]])
    run = np.repeat([0, 1, 2], 100)
    labels = np.arange(3)
    assert intervals.tail_runs(lat, run, labels, 10.0, 0.9) == pytest.approx(8 / 3)
    # Below it (q < 0.5): 80, 90, 90 ops.
    w = np.array([80, 90, 90]) / 260
    assert intervals.tail_runs(lat, run, labels, 10.0, 0.1) == pytest.approx(1 / (w @ w))
    # One run holds the whole tail: counted as 2 (t on 1 df), never fewer.
    one = np.r_[np.full(100, 20.0), np.ones(200)]
    assert intervals.tail_runs(one, run, labels, 10.0, 0.9) == 2.0
    # The interval's df is that, less one.
    x = lat * np.linspace(1, 1.01, 300)
    iv = intervals.quantile_interval(x, run, 0.5)
    assert iv.n_runs == 3 and not math.isnan(iv.low)
    assert iv.df == pytest.approx(intervals.tail_runs(x, run, labels, iv.value, 0.5) - 1)
    assert iv.df < 2  # the runs' shares beyond the median differ


def test_a_tail_percentile_is_never_printed_below_the_median():
    """Issue 26, p.29: a p99 "1.31 (0.00193-883)" on 1 df, its low end below the p50.
    One run of three holds the tail: t on ~1 df, and the low end is cut at the median."""
    from harness.analysis.stats import loo

    rng = np.random.default_rng(3)
    lat = np.concatenate([rng.lognormal(0, 0.5, 1000), rng.lognormal(0, 0.5, 1000),
                          rng.lognormal(1.5, 0.5, 1000)])
    label = np.repeat(np.arange(3), 1000)
    iv = intervals.quantile_interval(lat, label, 0.99)
    assert iv.df == 1  # the tail rests on one run's ops
    assert iv.low == pytest.approx(np.quantile(lat, 0.5))
    assert iv.method.endswith("cut at the median") and iv.high > iv.value
    order = np.argsort(lat, kind="stable")
    same = loo.quantile_interval_sorted(lat[order], label[order], 0.99)
    assert (same.low, same.high, same.method) == (iv.low, iv.high, iv.method)
    # Equal runs are not cut.
    even = intervals.quantile_interval(rng.lognormal(0, 0.5, 3000), label, 0.99)
    assert "cut" not in even.method and even.low > np.quantile(lat, 0.5)
