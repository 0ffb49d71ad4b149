"""Statistics against known answers: hand-computed values, scipy, and simulation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from harness.analysis.stats import comparisons as stats
from harness.analysis.stats import multiplicity


def test_t_ci_hand_computed():
    # mean 3, s = sqrt(2.5), t(0.975, 4) = 2.776445 -> half-width 1.963243
    est = stats.t_ci([1, 2, 3, 4, 5])
    assert est.value == 3
    assert est.low == pytest.approx(3 - 1.963243, abs=1e-6)
    assert est.high == pytest.approx(3 + 1.963243, abs=1e-6)
    assert est.n == 5 and est.method == "t"


def test_t_ci_single_sample_has_no_interval():
    est = stats.t_ci([4.0])
    assert est.value == 4.0 and np.isnan(est.low) and np.isnan(est.high)


def test_harmonic_mean_and_cv():
    assert stats.harmonic_mean([1, 2, 4]) == pytest.approx(3 / 1.75)
    assert stats.harmonic_mean([10, 20], weights=[1, 1]) == pytest.approx(2 / (0.1 + 0.05))
    assert stats.cv([2, 4, 6]) == pytest.approx(2 / 4)


def test_harmonic_mean_ci_inverts_reciprocal_interval():
    rates = np.array([100.0, 120.0, 90.0, 110.0])
    est = stats.harmonic_mean_ci(rates)
    inv = stats.t_ci(1 / rates)
    assert est.value == pytest.approx(st.hmean(rates))
    assert est.low == pytest.approx(1 / inv.high)
    assert est.high == pytest.approx(1 / inv.low)


def test_welch_matches_scipy():
    rng = np.random.default_rng(3)
    a, b = rng.normal(10, 1, 10), rng.normal(11, 2, 12)
    c = stats.compare_two(a, b, test="welch")
    ref = st.ttest_ind(a, b, equal_var=False)
    assert c.test == "Welch's t-test"
    assert c.p_value == pytest.approx(ref.pvalue)
    assert c.statistic == pytest.approx(ref.statistic)
    assert (c.n_a, c.n_b) == (10, 12)
    assert c.ratio.value == pytest.approx(a.mean() / b.mean())


def test_mann_whitney_matches_scipy_and_rank_biserial():
    a, b = [1.0, 2.0, 3.0, 3.5], [4.0, 5.0, 6.0, 7.0, 8.0]  # smallest p 2/126 < 0.05
    c = stats.compare_two(a, b, test="mannwhitney")
    ref = st.mannwhitneyu(a, b, alternative="two-sided")
    assert c.test == "Mann-Whitney U"
    assert c.p_value == pytest.approx(ref.pvalue)
    assert c.effect_size == pytest.approx(-1.0)  # every a below every b


def test_auto_choice_is_the_log_ratio_test_for_positive_values():
    rng = np.random.default_rng(0)
    skewed = stats.compare_two(rng.lognormal(0, 1.5, 30), rng.lognormal(0, 1.5, 30))
    assert skewed.test == "Welch t on log ratio"  # no normality pre-test picks the test
    signed = stats.compare_two(rng.normal(0, 1, 30), rng.normal(0, 1, 30))
    assert signed.test == "Welch's t-test"  # a log ratio needs positive values


def test_hedges_g_hand_computed():
    # pooled sd = 1, difference 2, correction 1 - 3/(4*6-9) = 0.8
    g = stats.hedges_g(np.array([1.0, 2.0, 3.0]), np.array([-1.0, 0.0, 1.0]))
    assert g == pytest.approx(2 * 0.8)


def test_compare_many_welch_anova_on_logs():
    rng = np.random.default_rng(5)
    groups = {"x": rng.normal(1, 0.1, 10), "y": rng.normal(1.1, 0.1, 10),
              "z": rng.normal(1.0, 0.1, 10)}
    m = stats.compare_many(groups)
    assert m.test == "Welch's one-way ANOVA on log values"
    # Reference: Welch's ANOVA by its textbook formulas (scipy's needs >= 1.16; see
    # test_verdict.test_welch_anova_matches_scipy).
    logs = [np.log(v) for v in groups.values()]
    n = np.array([len(v) for v in logs])
    w = n / np.array([v.var(ddof=1) for v in logs])
    mw = sum(w * [v.mean() for v in logs]) / w.sum()
    a = sum(w * (np.array([v.mean() for v in logs]) - mw) ** 2) / 2
    tmp = sum((1 - w / w.sum()) ** 2 / (n - 1))
    f = a / (1 + 2 * 1 / 8 * tmp)
    assert m.p_value == pytest.approx(st.f.sf(f, 2, 8 / (3 * tmp)))
    assert len(m.pairwise) == 3 and m.n == {"x": 10, "y": 10, "z": 10}
    np.testing.assert_allclose(m.p_adjusted, multiplicity.adjust(
        [c.p_value for c in m.pairwise]).p_adjusted)
    assert m.judged.family.level == pytest.approx(
        1 - max(m.judged.family.rejections, 1) * 0.05 / 3)
    assert list(m.pairwise_table().columns)[:2] == ["a", "b"]


def test_t_ci_covers_true_mean_about_95_percent():
    rng = np.random.default_rng(42)
    draws = rng.normal(10.0, 2.0, size=(4000, 10))
    hits = sum(stats.t_ci(row).contains(10.0) for row in draws)
    assert 0.935 <= hits / len(draws) <= 0.965


def test_positive_quantities_cut_the_t_interval_at_zero() -> None:
    # Three runs of a time, one slow: mean 11, s = 10.44, t(0.975, 2) = 4.3027 -> the
    # t interval reaches down to -14.9 ms, which no time can be.
    times = [3.0, 7.0, 23.0]
    plain = stats.mean_ci(times, method="t")
    assert plain.low == pytest.approx(11 - 4.302653 * np.std(times, ddof=1) / np.sqrt(3))
    assert plain.low < 0
    cut = stats.mean_ci(times, method="t", positive=True)
    assert cut.low == 0.0 and cut.high == plain.high and cut.value == plain.value
    assert cut.method == "t, cut at 0"
    # An interval already above zero is left alone.
    assert stats.mean_ci([10.0, 11.0, 12.0], positive=True) == stats.mean_ci([10.0, 11.0, 12.0])
    # Tables of measures use it: no negative lower bound for any configuration.
    per_run = pd.DataFrame({"cfg": ["a"] * 3 + ["b"] * 3, "ms": [*times, 5.0, 5.5, 6.0]})
    table = stats.config_table(per_run, ["cfg"], "ms", method="t")
    assert (table["ci_low"] >= 0).all() and table["method"].tolist() == ["t, cut at 0", "t"]
    assert (stats.ratio_table(per_run, "cfg", "ms")["ci_low"] >= 0).all()


def test_cutting_at_zero_keeps_coverage() -> None:
    """Skewed positive data (lognormal, n=3): the cut interval covers the true mean as
    often as the plain one, since the cut only removes impossible values."""
    rng = np.random.default_rng(7)
    true_mean = float(np.exp(0.5 * 1.2 ** 2))
    draws = rng.lognormal(0.0, 1.2, size=(3000, 3))
    plain = sum(stats.mean_ci(r, method="t").contains(true_mean) for r in draws)
    cut = [stats.mean_ci(r, method="t", positive=True) for r in draws]
    assert sum(e.contains(true_mean) for e in cut) == plain
    assert min(e.low for e in cut) == 0.0


def test_ratio_ci_delta_covers_true_ratio_about_95_percent():
    rng = np.random.default_rng(7)
    hits = 0
    n_draws = 2000
    for _ in range(n_draws):
        a, b = rng.normal(3.0, 0.3, 10), rng.normal(1.0, 0.1, 10)
        hits += stats.ratio_ci(a, b).contains(3.0)
    assert 0.93 <= hits / n_draws <= 0.97


def test_bootstrap_ci_covers_skewed_mean_roughly():
    rng = np.random.default_rng(11)
    true_mean = np.exp(0.5**2 / 2)  # lognormal(0, 0.5)
    n_draws = 300
    hits = sum(
        stats.bootstrap_ci(rng.lognormal(0, 0.5, 30), n_resamples=999).contains(true_mean)
        for _ in range(n_draws)
    )
    # BCa is slightly liberal at n = 30 on skewed data; "roughly 95%" is the claim.
    assert 0.88 <= hits / n_draws <= 0.99


def test_mean_ci_auto_picks_bootstrap_for_skewed_data():
    rng = np.random.default_rng(1)
    assert stats.mean_ci(rng.lognormal(0, 1.5, 40)).method == "bootstrap BCa"
    assert stats.mean_ci(rng.normal(0, 1, 40)).method == "t"
    with pytest.raises(ValueError):
        stats.mean_ci([1, 2], method="magic")


def test_ratio_table_fastest_baseline_and_absolute_means():
    per_run = pd.DataFrame(
        {"op": ["fast"] * 3 + ["slow"] * 3, "ms": [1.0, 1.1, 0.9, 3.0, 3.3, 2.7]}
    )
    table = stats.ratio_table(per_run, "op", "ms")
    # like the seed 001 table: slowest first, ratios down to 1 for the fastest
    assert list(table["op"]) == ["slow", "fast"]
    assert table.loc[1, "baseline"] and table.loc[1, "ratio"] == 1.0
    assert table.loc[0, "mean"] == pytest.approx(3.0)
    assert table.loc[0, "ratio"] == pytest.approx(3.0)
    assert table.loc[0, "ratio_low"] < 3.0 < table.loc[0, "ratio_high"]


def test_config_table_uses_harmonic_mean_for_rates():
    per_run = pd.DataFrame({"cfg": ["a", "a", "b", "b"], "rate": [100.0, 300.0, 10.0, 10.0]})
    table = stats.config_table(per_run, ["cfg"], "rate", rate=True)
    assert table.loc[0, "mean"] == pytest.approx(150.0)
    assert table.loc[0, "n"] == 2 and table.loc[0, "method"].startswith("harmonic")


def test_harmonic_ci_stays_bounded_on_skewed_rates() -> None:
    """Captured store_write throughputs (ops/s, 10 sets, one slow set): the t interval of
    their reciprocals reaches below 0, so its inverse would be unbounded."""
    from harness.analysis.stats.comparisons import harmonic_mean, harmonic_mean_ci, t_ci

    rates = np.array([3598.9, 3301.9, 336.8, 3910.2, 4263.6, 3073.8, 3468.5, 4222.3, 3690.5,
                      2579.2])
    assert t_ci(1.0 / rates).low <= 0
    est = harmonic_mean_ci(rates)
    assert est.method == "harmonic, bootstrap BCa on 1/x"
    assert np.isfinite(est.low) and np.isfinite(est.high)
    assert est.low < harmonic_mean(rates) < est.high


def test_bars_with_ci_survives_an_unbounded_interval() -> None:
    import pandas as pd

    from harness.analysis.figures import plots

    table = pd.DataFrame({"op": ["a", "b"], "n": [3, 3], "mean": [10.0, 20.0],
                          "ci_low": [8.0, 5.0], "ci_high": [12.0, float("inf")]})
    fig = plots.bars_with_ci(table, "op", title="t", ylabel="ops/s")
    top = fig.axes[0].get_ylim()[1]
    assert 20 < top < 100
