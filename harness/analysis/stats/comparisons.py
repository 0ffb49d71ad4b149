"""Statistics over repetitions: confidence intervals, comparisons, ratio tables.

The unit of replication is the run (a "set" in seed 001): per-op latencies inside a run
are not independent, so every interval and test here takes one value per run (e.g. a
run's mean latency or throughput), following Hoefler & Belli (SC15):

- times: arithmetic mean with a t-based 95% CI; a BCa bootstrap CI when the data fail a
  normality check (Shapiro-Wilk), since the t interval assumes normal means;
- rates: harmonic mean, its CI from the t interval of the reciprocals, inverted;
- spread: coefficient of variation;
- two configurations: Welch's t on the log ratio of the averages (`verdict`), whose CI
  is the same statistic inverted and whose p can reach any alpha at 3 runs (rank tests
  cannot: Mann-Whitney's smallest p is 0.10 at 3 vs 3); Hedges' g; the verdict (better,
  worse, no significant difference, inconclusive) from `verdict.decide`;
- several: Welch's one-way ANOVA on log values, then pairwise tests judged as one family
  (`multiplicity`: Benjamini-Hochberg, with intervals at the family's FCR-adjusted level).

Every result records the test or method used and its sample sizes.

One configuration's estimates are in `estimates` (also reachable from here); this module
compares configurations."""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy import stats as st

from harness.analysis.stats import multiplicity, verdict

# One configuration's estimates: used here, and reached through this module by callers.
from harness.analysis.stats.estimates import (  # noqa: F401
    MIN_NORMALITY_N,
    ArrayLike,
    Estimate,
    Normality,
    as_array,
    bootstrap_ci,
    cv,
    harmonic_mean,
    harmonic_mean_ci,
    mean_ci,
    normality,
    run_mean_ci,
    t_ci,
)


@dataclass(frozen=True)
class Comparison:
    """Two configurations compared; `ratio` = mean_a / mean_b."""

    name_a: str
    name_b: str
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    test: str
    statistic: float
    p_value: float
    alpha: float
    effect_size: float
    effect_size_name: str
    ratio: Estimate
    normality_a: Normality
    normality_b: Normality
    #: The log-ratio test behind `ratio` and `p_value` (b as base, a as candidate), which
    #: a family re-judges at its own level (`multiplicity.judge`); None for other tests.
    log_ratio: verdict.LogRatio | None = None

    @property
    def significant(self) -> bool:
        """Significant on its own (raw p); in a family, ask the family's `Claim`."""
        return bool(self.p_value < self.alpha)

    def verdict(self, *, higher_is_better: bool,
                threshold: float = verdict.DEFAULT_THRESHOLD) -> str:
        """a against b on its own (raw p, its 95% CI): better, worse, no significant
        difference or inconclusive (`verdict.decide`). A finding among others is judged
        with them instead (`multiplicity.judge` of their `log_ratio`s)."""
        return verdict.decide(self.ratio.low, self.ratio.high, self.p_value,
                              ratio=self.ratio.value, higher_is_better=higher_is_better,
                              alpha=self.alpha, threshold=threshold)

    @property
    def relative_difference(self) -> Estimate:
        """(mean_a - mean_b) / mean_b with its CI."""
        r = self.ratio
        return Estimate(r.value - 1, r.low - 1, r.high - 1, r.n, r.method, r.confidence)


def hedges_g(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = a.size, b.size
    if na < 2 or nb < 2:
        return float("nan")
    pooled = np.sqrt(((na - 1) * a.var(ddof=1) + (nb - 1) * b.var(ddof=1)) / (na + nb - 2))
    if pooled == 0:
        return float("nan")
    return float((a.mean() - b.mean()) / pooled * (1 - 3 / (4 * (na + nb) - 9)))


def ratio_ci(
    a: ArrayLike,
    b: ArrayLike,
    confidence: float = 0.95,
    *,
    method: str = "delta",
    seed: int = 0,
) -> Estimate:
    """CI of mean(a) / mean(b) for independent samples.

    ``delta``: log ratio ± t·SE with SE² = s_a²/(n_a·ā²) + s_b²/(n_b·b̄²) and Welch-
    Satterthwaite degrees of freedom. ``bootstrap``: BCa, resampling each sample.
    """
    x, y = as_array(a), as_array(b)
    n = int(x.size + y.size)
    value = float(x.mean() / y.mean()) if x.size and y.size else float("nan")
    if x.size < 2 or y.size < 2:
        return Estimate(value, float("nan"), float("nan"), n, method, confidence)
    if method == "bootstrap":
        if np.ptp(x) == 0 and np.ptp(y) == 0:
            return Estimate(value, value, value, n, "bootstrap BCa", confidence)
        res = st.bootstrap(
            (x, y),
            lambda p, q, axis: np.mean(p, axis=axis) / np.mean(q, axis=axis),
            confidence_level=confidence,
            n_resamples=9999,
            method="BCa",
            rng=np.random.default_rng(seed),
            vectorized=True,
        )
        ci = res.confidence_interval
        return Estimate(value, float(ci.low), float(ci.high), n, "bootstrap BCa", confidence)
    if method != "delta":
        raise ValueError(f"method must be delta or bootstrap, not {method!r}")
    va = x.var(ddof=1) / (x.size * x.mean() ** 2)
    vb = y.var(ddof=1) / (y.size * y.mean() ** 2)
    se = np.sqrt(va + vb)
    if se == 0:
        return Estimate(value, value, value, n, "delta (log ratio)", confidence)
    df = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    half = st.t.ppf(0.5 + confidence / 2, df) * se
    return Estimate(value, float(value * np.exp(-half)), float(value * np.exp(half)), n,
                    "delta (log ratio)", confidence)


def compare_two(
    a: ArrayLike,
    b: ArrayLike,
    *,
    names: tuple[str, str] = ("a", "b"),
    alpha: float = 0.05,
    confidence: float = 0.95,
    test: str = "auto",
    rate: bool = False,
) -> Comparison:
    """a vs b: the test, its p, the ratio of averages a/b with its CI, an effect size.

    ``auto``: for positive values (times, rates) Welch's t on the log ratio of the
    averages (arithmetic; harmonic for a `rate` of fixed-count runs), whose p can reach
    any alpha at 3 runs and whose CI is the same statistic inverted; Welch's t otherwise.
    `test` may force ``welch`` or ``mannwhitney``; a rank test is refused where its
    smallest attainable p is not below alpha (it could not reject whatever the data).
    """
    x, y = as_array(a), as_array(b)
    na_, nb_ = normality(x, alpha), normality(y, alpha)
    lr: verdict.LogRatio | None = None
    if test == "auto":
        positive = x.size and y.size and (x > 0).all() and (y > 0).all()
        test = "logratio" if positive else "welch"
    mean_a = harmonic_mean(x) if rate else float(x.mean())
    mean_b = harmonic_mean(y) if rate else float(y.mean())
    if test == "logratio":
        lr = verdict.compare_means(y, x, rate=rate, confidence=confidence)
        name, statistic, p_value = lr.test, lr.t, lr.p
        effect, effect_name = hedges_g(x, y), "Hedges' g"
        ratio = Estimate(lr.ratio, lr.low, lr.high, int(x.size + y.size), lr.test,
                         confidence)
    elif test == "welch":
        res = st.ttest_ind(x, y, equal_var=False)
        name, effect, effect_name = "Welch's t-test", hedges_g(x, y), "Hedges' g"
        statistic, p_value = float(res.statistic), float(res.pvalue)
        ratio = ratio_ci(x, y, confidence, method="delta")
    elif test == "mannwhitney":
        floor = verdict.min_attainable_p("mannwhitney", int(x.size), int(y.size))
        if floor >= alpha:
            raise ValueError(
                f"Mann-Whitney U cannot reject at alpha {alpha} with {x.size} vs {y.size} "
                f"runs (smallest attainable p = {floor:.3g}); use the default test")
        res = st.mannwhitneyu(x, y, alternative="two-sided", method="auto")
        # rank-biserial r = 2U/(n_a n_b) - 1: +1 when every a exceeds every b.
        effect = float(2 * res.statistic / (x.size * y.size) - 1)
        name, effect_name = "Mann-Whitney U", "rank-biserial r"
        statistic, p_value = float(res.statistic), float(res.pvalue)
        ratio = ratio_ci(x, y, confidence, method="bootstrap")
    else:
        raise ValueError(f"test must be auto, logratio, welch or mannwhitney, not {test!r}")
    return Comparison(
        name_a=names[0],
        name_b=names[1],
        n_a=int(x.size),
        n_b=int(y.size),
        mean_a=mean_a,
        mean_b=mean_b,
        test=name,
        statistic=statistic,
        p_value=p_value,
        alpha=alpha,
        effect_size=effect,
        effect_size_name=effect_name,
        ratio=ratio,
        normality_a=na_,
        normality_b=nb_,
        log_ratio=lr,
    )


@dataclass(frozen=True)
class MultiComparison:
    """An omnibus test over several configurations, then the pairwise tests judged as one
    family (`multiplicity.judge`: better/worse iff the pair's adjusted interval, printed
    at `judged.family.level`, excludes 1)."""

    test: str
    statistic: float
    p_value: float
    alpha: float
    n: dict[str, int]
    pairwise: list[Comparison] = field(default_factory=list)
    judged: multiplicity.Judged | None = None

    @property
    def significant(self) -> bool:
        return bool(self.p_value < self.alpha)

    @property
    def p_adjusted(self) -> list[float]:
        return [c.p_adjusted for c in self.judged.claims] if self.judged else []

    def pairwise_table(self) -> pd.DataFrame:
        rows = [
            {
                "a": c.name_a,
                "b": c.name_b,
                "n_a": c.n_a,
                "n_b": c.n_b,
                "ratio": j.ratio,
                "ratio_low": j.low,
                "ratio_high": j.high,
                "ratio_level": j.level,
                "test": c.test,
                "p": c.p_value,
                "p_adjusted": j.p_adjusted,
                "significant": j.significant,
            }
            for c, j in zip(self.pairwise, self.judged.claims if self.judged else [],
                            strict=True)
        ]
        return pd.DataFrame(rows)


def welch_anova(samples: Sequence[np.ndarray]) -> tuple[float, float]:
    """Welch's one-way ANOVA (F, p), as scipy >= 1.16's f_oneway(equal_var=False); here so
    that the kit runs on older scipy. Groups with zero spread make it undefined (NaN)."""
    n = np.array([s.size for s in samples], float)
    m = np.array([s.mean() for s in samples])
    v = np.array([s.var(ddof=1) if s.size > 1 else np.nan for s in samples])
    k = n.size
    if (n < 2).any() or not (v > 0).all():
        return float("nan"), float("nan")
    w = n / v
    mw = float(np.sum(w * m) / w.sum())
    a = float(np.sum(w * (m - mw) ** 2) / (k - 1))
    tmp = float(np.sum((1 - w / w.sum()) ** 2 / (n - 1)))
    f = a / (1 + 2 * (k - 2) / (k**2 - 1) * tmp)
    df2 = (k**2 - 1) / (3 * tmp)
    return float(f), float(st.f.sf(f, k - 1, df2))


def compare_many(
    groups: Mapping[str, ArrayLike], *, alpha: float = 0.05, confidence: float = 0.95,
    rate: bool = False,
) -> MultiComparison:
    """Welch's one-way ANOVA (on log values when all are positive), then every pair with
    `compare_two`, the pairs judged as one family (`multiplicity.judge`; all values
    positive, else the pairs are not judged)."""
    data = {k: as_array(v) for k, v in groups.items()}
    if len(data) < 2:
        raise ValueError("compare_many needs at least two groups")
    positive = all(v.size and (v > 0).all() for v in data.values())
    # On log values for times and rates, like the pairwise tests; a rank test (Kruskal-
    # Wallis) has too little power at 3-5 runs per group.
    stat, p = welch_anova([np.log(v) if positive else v for v in data.values()])
    name = "Welch's one-way ANOVA" + (" on log values" if positive else "")
    pairs = [
        compare_two(data[a], data[b], names=(a, b), alpha=alpha, confidence=confidence,
                    rate=rate)
        for a, b in itertools.combinations(data, 2)
    ]
    return MultiComparison(
        test=name,
        statistic=stat,
        p_value=p,
        alpha=alpha,
        n={k: int(v.size) for k, v in data.items()},
        pairwise=pairs,
        judged=multiplicity.judge([c.log_ratio for c in pairs], True, q=alpha)
        if all(c.log_ratio is not None for c in pairs) else None,
    )


def pairwise_family(
    groups: Mapping[str, ArrayLike], *, alpha: float = 0.05, rate: bool = False,
    higher_is_better: bool = False,
    extra: Sequence[tuple[Hashable, verdict.LogRatio, bool]] = (),
) -> tuple[dict[tuple[str, str], Comparison], multiplicity.Judged]:
    """Every pair (a, b) of `groups` (in their order, a before b) compared with
    `compare_two(a, b)`, and judged as one family with any `extra` (key, test,
    higher_is_better) claims of the same section: ({(a, b): comparison}, the judged
    family, its claims named (a, b) and by the extras' keys)."""
    data = {k: as_array(v) for k, v in groups.items()}
    pairs = {(a, b): compare_two(data[a], data[b], names=(a, b), alpha=alpha, rate=rate)
             for a, b in itertools.combinations(data, 2)
             if data[a].size >= 2 and data[b].size >= 2}
    keys: list[Hashable] = list(pairs)
    tests = [c.log_ratio for c in pairs.values()]
    hib = [higher_is_better] * len(tests)
    for key, test, h in extra:
        keys.append(key)
        tests.append(test)
        hib.append(h)
    if any(t is None for t in tests):
        raise ValueError("pairwise_family needs positive values (log-ratio tests)")
    return pairs, multiplicity.judge(tests, hib, q=alpha, keys=keys)


def config_table(
    per_run: pd.DataFrame,
    by: Sequence[str],
    value: str,
    *,
    rate: bool = False,
    confidence: float = 0.95,
    method: str = "auto",
) -> pd.DataFrame:
    """Per configuration across repetitions: n, mean (harmonic if `rate`), CI, CV, method."""
    rows = []
    for key, grp in per_run.groupby(list(by), sort=True, dropna=False, observed=True):
        vals = grp[value].to_numpy(float)
        est = run_mean_ci(vals, confidence, rate=rate, method=method)
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key, strict=True)), "n": est.n, "mean": est.value,
                     "ci_low": est.low, "ci_high": est.high, "cv": cv(vals),
                     "method": est.method})
    return pd.DataFrame(rows, columns=[*by, "n", "mean", "ci_low", "ci_high", "cv", "method"])


def ratio_table(
    per_run: pd.DataFrame,
    group: str,
    value: str,
    *,
    baseline: str | None = None,
    lower_is_better: bool = True,
    confidence: float = 0.95,
    order: Sequence[str] | None = None,
    family: multiplicity.Judged | None = None,
) -> pd.DataFrame:
    """Mean of `value` per `group` with its CI, and its ratio to the baseline with CI.

    The baseline is the fastest group (lowest mean if `lower_is_better`, else highest)
    unless named; the absolute baseline stays in the table beside the ratios. With
    `family` (claims named (a, b) by group, as `pairwise_family` makes them), each ratio's
    interval is its claim's, at the family's level (``ratio_level``), so that the table
    and the findings beside it print one interval per comparison.
    """
    samples = {
        str(k): g[value].to_numpy(float)
        for k, g in per_run.groupby(group, sort=True, observed=True)
    }
    if not samples:
        return pd.DataFrame(columns=[group, "n", "mean", "ci_low", "ci_high", "method",
                                     "ratio", "ratio_low", "ratio_high", "ratio_level",
                                     "baseline"])
    means = {k: float(np.nanmean(v)) for k, v in samples.items()}
    if baseline is None:
        pick = min if lower_is_better else max
        baseline = pick(means, key=means.__getitem__)
    rows = []
    for k, v in samples.items():
        est = run_mean_ci(v, confidence)
        if k == baseline:
            ratio = Estimate(1.0, float("nan"), float("nan"), int(v.size), "baseline")
        else:
            # The same statistic as every comparison: Welch's t on the log ratio.
            lr = verdict.compare_means(samples[baseline], v, confidence=confidence)
            ratio = Estimate(lr.ratio, lr.low, lr.high, int(v.size + samples[baseline].size),
                             lr.test, confidence)
        level = confidence
        if family is not None and k != baseline and (
                o := family.oriented(k, baseline)) is not None:
            ratio = replace(ratio, value=o[0], low=o[1], high=o[2])
            level = family.family.level
        rows.append({group: k, "n": est.n, "mean": est.value, "ci_low": est.low,
                     "ci_high": est.high, "method": est.method, "ratio": ratio.value,
                     "ratio_low": ratio.low, "ratio_high": ratio.high,
                     "ratio_level": level, "baseline": k == baseline})
    table = pd.DataFrame(rows)
    if order is not None:
        rank = {name: i for i, name in enumerate(order)}
        table = table.sort_values(group, key=lambda s: s.map(lambda v: rank.get(v, len(rank))))
    else:
        # Like seed 001's table: the largest ratio first, down to 1 for the baseline.
        table = table.sort_values("mean", ascending=not lower_is_better)
    return table.reset_index(drop=True)
