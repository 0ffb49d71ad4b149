"""The group-sequential test (`harness.analysis.stats.sequential`): its boundaries spend
what they say, and seeded simulations with a known answer keep its false verdicts and
its intervals' coverage where the docstring promises."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis.stats import sequential as sq

FRACTIONS = [n / 12 for n in range(3, 13)]


def test_one_look_at_the_end_is_the_fixed_design() -> None:
    assert sq.boundaries([1.0], 0.05)[0] == pytest.approx(1.959964, abs=1e-5)
    assert sq.spent(1.0, 0.05) == pytest.approx(0.05)
    assert sq.spent(0.0, 0.05) == 0.0


def test_boundaries_fall_look_by_look_and_end_above_the_fixed_design() -> None:
    c = sq.boundaries(FRACTIONS, 0.05)
    assert (np.diff(c) < 0).all()
    assert 1.96 < c[-1] < 2.3
    assert c[0] > 3.5  # an O'Brien-Fleming-type first look spends almost nothing


def test_boundaries_spend_what_the_function_says_by_monte_carlo() -> None:
    """The recursive integration against 400 000 simulated score paths."""
    t = np.array([0.2, 0.4, 0.6, 0.8, 1.0])
    c = sq.boundaries(t, 0.05)
    rng = np.random.default_rng(52)
    steps = rng.standard_normal((400_000, t.size)) * np.sqrt(np.diff(np.r_[0, t]))
    z = steps.cumsum(axis=1) / np.sqrt(t)
    crossed = np.abs(z) >= c
    first = np.where(crossed.any(axis=1), crossed.argmax(axis=1), -1)
    want = np.diff(np.r_[0, [sq.spent(x, 0.05) for x in t]])
    got = np.array([(first == k).mean() for k in range(t.size)])
    assert np.abs(got - want).max() < 0.0015
    assert (first >= 0).mean() == pytest.approx(0.05, abs=0.002)


def test_bad_looks_and_levels_are_refused() -> None:
    with pytest.raises(ValueError, match="fractions"):
        sq.boundaries([0.5, 0.4], 0.05)
    with pytest.raises(ValueError, match="alpha"):
        sq.boundaries([1.0], 1.5)
    with pytest.raises(ValueError, match="margin"):
        sq.at_look([1, 2], [1, 2], fractions=[1.0], alpha=0.05, margin=0)
    with pytest.raises(ValueError, match="first"):
        sq.replay([1, 2], [1, 2], first=3, max_n=2, alpha=0.05, margin=0.05)


def test_a_huge_effect_is_decided_at_the_first_look() -> None:
    rng = np.random.default_rng(1)
    base = 1000 * np.exp(rng.normal(0, 0.01, 12))
    cand = 3000 * np.exp(rng.normal(0, 0.01, 12))
    looks = sq.replay(base, cand, first=3, max_n=12, alpha=0.05, margin=0.05)
    assert len(looks) == 1 and looks[0].state == sq.BETTER
    assert looks[0].low < 3 < looks[0].high
    worse = sq.replay(cand, base, first=3, max_n=12, alpha=0.05, margin=0.05)
    assert worse[0].state == sq.WORSE
    lat = sq.replay(cand, base, first=3, max_n=12, alpha=0.05, margin=0.05,
                    higher_is_better=False)
    assert lat[0].state == sq.BETTER  # lower latency is better


def test_equal_configurations_end_equivalent_and_the_replay_stops_there() -> None:
    rng = np.random.default_rng(2)
    base = np.exp(rng.normal(0, 0.01, 20))
    cand = np.exp(rng.normal(0, 0.01, 20))
    looks = sq.replay(base, cand, first=3, max_n=20, alpha=0.05, margin=0.05)
    assert looks[-1].state == sq.EQUIVALENT
    assert all(not look.decided for look in looks[:-1])
    assert [look.n_cand for look in looks] == list(range(3, 3 + len(looks)))
    assert looks[-1].low >= 1 / 1.05 and looks[-1].high <= 1.05
    # The same runs give the same looks (a resumed run finds where it stopped).
    assert sq.replay(base, cand, first=3, max_n=20, alpha=0.05, margin=0.05) == looks


def test_an_open_comparison_stays_open_until_its_runs_run_out() -> None:
    rng = np.random.default_rng(3)
    base = np.exp(rng.normal(0, 0.10, 6))
    cand = np.exp(rng.normal(0, 0.10, 6))
    looks = sq.replay(base, cand, first=3, max_n=20, alpha=0.05, margin=0.05)
    assert len(looks) == 4 and looks[-1].state == sq.OPEN
    assert looks[-1].fraction == pytest.approx(6 / 20)


def test_the_family_is_bonferroni() -> None:
    assert sq.family_alpha(0.05, 4) == pytest.approx(0.0125)
    assert sq.family_alpha(0.05, 0) == 0.05


def _simulate(effect: float, noise: float, sims: int, seed: int, max_n: int = 12
              ) -> tuple[float, float, float]:
    """(share decided better/worse, share whose interval at the stop covers the truth,
    median runs a side at the stop) over `sims` seeded comparisons at alpha 0.05."""
    rng = np.random.default_rng(seed)
    decided = covered = 0
    stops = []
    for _ in range(sims):
        base = np.exp(rng.normal(0, noise, max_n))
        cand = (1 + effect) * np.exp(rng.normal(0, noise, max_n))
        last = sq.replay(base, cand, first=3, max_n=max_n, alpha=0.05, margin=0.05)[-1]
        decided += last.state in (sq.BETTER, sq.WORSE)
        covered += last.low <= 1 + effect <= last.high
        stops.append(last.n_cand)
    return decided / sims, covered / sims, float(np.median(stops))


def test_under_no_difference_few_comparisons_end_better_or_worse() -> None:
    """Optional stopping at every look does not inflate the false verdicts: at most 7%
    over 2000 seeded comparisons (the level is 5%; a naive t-test at every look of these
    10 would say better/worse in about 15-20%)."""
    false, covered, _ = _simulate(0.0, 0.05, 2000, seed=52)
    assert false <= 0.07
    assert covered >= 0.93


def test_with_a_large_effect_the_interval_still_covers_at_the_stop() -> None:
    decided, covered, median = _simulate(0.20, 0.05, 500, seed=53)
    assert decided >= 0.95
    assert covered >= 0.93
    assert median < 12  # it stops before the runs run out


def test_naive_looks_would_fail_the_same_check() -> None:
    """The check above can fail: a 95% t interval at every look, stopping at the first
    that excludes 1, says better/worse far more often than 5%."""
    from harness.analysis.stats.verdict import compare_means

    rng = np.random.default_rng(52)
    false = 0
    for _ in range(400):
        base = np.exp(rng.normal(0, 0.05, 12))
        cand = np.exp(rng.normal(0, 0.05, 12))
        false += any(not math.isnan(r.p) and r.p < 0.05 for r in
                     (compare_means(base[:n], cand[:n]) for n in range(3, 13)))
    assert false / 400 > 0.10


def test_a_grid_held_by_bonferroni_rarely_ends_with_any_false_verdict() -> None:
    """Grids of 4 identical configurations (3 comparisons sharing the first, each at
    0.05 / 3, 5% noise, looks at 3..12 runs): any better/worse in at most 7% of 800."""
    rng = np.random.default_rng(54)
    alpha = sq.family_alpha(0.05, 3)
    false = 0
    for _ in range(800):
        base = np.exp(rng.normal(0, 0.05, 12))
        false += any(
            sq.replay(base, np.exp(rng.normal(0, 0.05, 12)), first=3, max_n=12,
                      alpha=alpha, margin=0.05)[-1].state in (sq.BETTER, sq.WORSE)
            for _ in range(3))
    assert false / 800 <= 0.07
