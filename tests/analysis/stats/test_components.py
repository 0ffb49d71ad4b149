"""`harness plan`'s numbers (`harness.analysis.stats.components`), against simulations
with known variance components: runs whose means vary run to run by a known SD and whose
ops arrive at rates that vary from stretch to stretch by another; the estimates recover
both, and the runs a plan asks for give intervals as narrow as the target."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from harness.analysis.stats import components as comp

RATE = 20_000.0  # ops/s
RUN_S = 2.0


def simulate_run(rng: np.random.Generator, between: float, within: float,
                 length_s: float = RUN_S) -> np.ndarray:
    """Start times (ns) of one run's ops: its rate drawn around RATE (SD `between`,
    relative), each of 100 stretches per `RUN_S` around that (SD `within`), Poisson
    arrivals in each."""
    run_rate = RATE * np.exp(rng.normal(0, between))
    stretches = int(100 * length_s / RUN_S)
    width = length_s / stretches
    starts = []
    for i in range(stretches):
        rate = run_rate * np.exp(rng.normal(0, within))
        n = rng.poisson(rate * width)
        starts.append(np.sort(rng.uniform(i * width, (i + 1) * width, n)))
    return (np.concatenate(starts) * 1e9).astype(np.int64)


def test_the_components_are_recovered_from_runs_with_known_spread() -> None:
    rng = np.random.default_rng(7)
    between, within_stretch = 0.08, 0.15
    # Each tenth of a run averages 10 stretches: its SD is the stretch's / sqrt(10), plus
    # the Poisson noise of ~4,000 ops.
    within_tenth = np.sqrt(within_stretch ** 2 / 10 + 1 / (RATE * RUN_S / 10))
    found = [comp.components([comp.run_rates(simulate_run(rng, between, within_stretch),
                                             RUN_S + 0.5) for _ in range(8)])
             for _ in range(60)]
    b = np.median([np.sqrt(c.between_rel_var) for c in found])
    w = np.median([np.sqrt(c.within_rel_var) for c in found])
    assert b == pytest.approx(between, rel=0.2), b
    assert w == pytest.approx(within_tenth, rel=0.15), (w, within_tenth)
    assert all(c.overhead_s == pytest.approx(0.5, abs=0.05) for c in found)


def test_the_runs_a_plan_asks_for_give_the_target_width() -> None:
    """The plan's runs, simulated: the median half-width of the 95% t interval of the
    runs' mean lies at the target (it is the least n whose expected width reaches it),
    and one run fewer is wider."""
    rng = np.random.default_rng(11)
    sd, target = 0.10, 0.05
    n = comp.runs_for(sd ** 2, target)
    assert n is not None and 16 <= n <= 20  # (1.96 * 0.10 / 0.05)^2 = 15.4, t adds a few

    def half_width(k: int) -> float:
        x = rng.normal(1.0, sd, size=(4000, k))
        return float(np.median(stats.t.ppf(0.975, k - 1) * x.std(axis=1, ddof=1)
                               / np.sqrt(k)))

    assert half_width(n) == pytest.approx(target, rel=0.06)
    assert half_width(n - 3) > target


def test_longer_runs_help_only_the_within_part() -> None:
    noisy_within = comp.Components(5, RATE, 0.0001, 0.04, RUN_S, 1.0)
    noisy_between = comp.Components(5, RATE, 0.01, 0.0001, RUN_S, 1.0)
    a = comp.plan(noisy_within, 0.02)
    b = comp.plan(noisy_between, 0.02)
    assert [o.runs for o in a] == sorted((o.runs for o in a), reverse=True)
    assert a[-1].runs < a[0].runs / 3  # 4x as long: far fewer runs
    assert b[-1].runs == pytest.approx(b[0].runs, rel=0.05)  # length buys nothing
    assert comp.cheapest(b).length_s == min(o.length_s for o in b)


def test_too_few_ops_or_runs_plan_nothing_and_out_of_reach_says_so() -> None:
    assert comp.run_rates(np.arange(50, dtype=np.int64)) is None
    one = comp.run_rates(np.arange(0, 10**9, 10**5, dtype=np.int64))
    assert one is not None and comp.components([one]) is None
    assert comp.runs_for(1.0, 0.01) is None  # beyond MOST_RUNS
    far = comp.plan(comp.Components(3, RATE, 1.0, 1.0, 1.0, 0.0), 0.01)
    assert comp.cheapest(far) is None
