"""The one verdict function of the kit, and the run-level test that feeds it.

Every "better / worse / no significant difference / inconclusive" the kit prints (prose,
tables, `harness compare`) comes from `decide`:

- **better** / **worse**: the test rejects "no change" at `alpha` (in a family of claims:
  the adjusted p of `multiplicity`) and the ratio's direction says which, knowing whether
  higher is better (throughput) or lower is (latency);
- **no significant difference**: not rejected, and the ratio's CI lies inside
  [1 - threshold, 1 + threshold] (default 5%): any change is smaller than that;
- **inconclusive**: not rejected, and the CI still allows a change larger than the
  threshold: too few runs to tell, printed with the estimate and its CI.

The CI given must be the one printed, at the level that matches the p given: a single
test's 95% CI with its raw p, or, in a family, the interval at the family's adjusted level
with the adjusted p (`multiplicity.judge` passes both), so that better/worse is exactly
"the printed interval excludes 1".

The test (`log_ratio_test`) is Welch's t on the log of a ratio of two run-level estimates:
log(cand / base) / SE with Welch-Satterthwaite degrees of freedom, where each side's SE of
its log estimate comes from its runs (the run is the unit; see `intervals`). The CI of the
ratio is the same statistic inverted (at any level: `LogRatio.at_level`). Unlike a rank
test (Mann-Whitney's smallest p is 0.10 at 3 vs 3 runs, Wilcoxon's 0.0625 at 5 pairs) its
p can fall below any alpha at 3 runs; `min_attainable_p` says what a rank test could reach,
and the methodology notebook shows the power and false-positive rates by simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats as st

BETTER = "better"
WORSE = "worse"
NO_DIFFERENCE = "no significant difference"
INCONCLUSIVE = "inconclusive"
#: Every outcome `decide` can give.
VERDICTS: tuple[str, ...] = (BETTER, WORSE, NO_DIFFERENCE, INCONCLUSIVE)

#: Default equivalence margin: changes within ±5% count as "no difference".
DEFAULT_THRESHOLD = 0.05
#: The test named in results and prose.
LOG_RATIO_TEST = "Welch t on log ratio"


def decide(
    ratio_low: float,
    ratio_high: float,
    p: float,
    *,
    ratio: float,
    higher_is_better: bool,
    alpha: float = 0.05,
    threshold: float = DEFAULT_THRESHOLD,
) -> str:
    """The verdict for a ratio cand/base with its CI and (adjusted) p-value.

    A NaN p or CI (fewer than 2 runs on a side) is inconclusive: nothing was tested.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, not {alpha!r}")
    if not threshold >= 0:
        raise ValueError(f"threshold must be >= 0, not {threshold!r}")
    if math.isnan(p) or math.isnan(ratio):
        return INCONCLUSIVE
    if p < alpha and ratio != 1:
        up = ratio > 1
        return BETTER if up == higher_is_better else WORSE
    if math.isnan(ratio_low) or math.isnan(ratio_high):
        return INCONCLUSIVE
    if 1 - threshold <= ratio_low and ratio_high <= 1 + threshold:
        return NO_DIFFERENCE
    return INCONCLUSIVE


def min_attainable_p(test: str, n_a: int, n_b: int | None = None) -> float:
    """Smallest two-sided p an exact rank test can give at these sample sizes.

    ``mannwhitney``: 2 / C(n_a + n_b, n_a); ``wilcoxon`` (n_a pairs): 2 / 2**n_a. A rank
    test whose smallest p is not below alpha cannot reject whatever the data; the kit
    never uses one there.
    """
    if test == "mannwhitney":
        if n_b is None:
            raise ValueError("mannwhitney needs both sample sizes")
        return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))
    if test == "wilcoxon":
        return min(1.0, 2.0 / 2**n_a)
    raise ValueError(f"test must be mannwhitney or wilcoxon, not {test!r}")


@dataclass(frozen=True)
class LogRatio:
    """cand/base with its CI from Welch's t on the log ratio, and the test's p.

    `se_log` and `df` give the interval at any level (`at_level`): a family of claims
    prints its intervals at the level its multiplicity rule sets (`multiplicity`)."""

    ratio: float
    low: float
    high: float
    p: float
    df: float
    test: str = LOG_RATIO_TEST
    t: float = float("nan")
    se_log: float = float("nan")
    confidence: float = 0.95

    def at_level(self, confidence: float) -> LogRatio:
        """The same test with its interval at `confidence`: exp(log ratio ± t·SE)."""
        if not 0 < confidence < 1:
            raise ValueError(f"confidence must be between 0 and 1, not {confidence!r}")
        if math.isnan(self.low) or math.isnan(self.se_log) or not self.ratio > 0:
            return replace(self, confidence=confidence)
        half = float(st.t.ppf(0.5 + confidence / 2, self.df)) * self.se_log \
            if self.se_log > 0 else 0.0
        lr = math.log(self.ratio)
        return replace(self, low=math.exp(lr - half), high=math.exp(lr + half),
                       confidence=confidence)


def log_ratio_test(
    log_base: float, se_base: float, df_base: float,
    log_cand: float, se_cand: float, df_cand: float,
    *, confidence: float = 0.95,
) -> LogRatio:
    """Welch's t on log(cand) - log(base), each with its standard error and degrees of
    freedom (n_runs - 1). Both SEs zero (identical runs): the CI is the point."""
    diff = log_cand - log_base
    ratio = float(np.exp(diff))
    var = se_base**2 + se_cand**2
    if not np.isfinite(var) or not np.isfinite(diff):
        return LogRatio(ratio, float("nan"), float("nan"), float("nan"), float("nan"),
                        confidence=confidence)
    if var == 0:
        p = 1.0 if diff == 0 else 0.0
        return LogRatio(ratio, ratio, ratio, p, float("inf"), LOG_RATIO_TEST,
                        0.0 if diff == 0 else math.copysign(math.inf, diff), 0.0, confidence)
    # Welch-Satterthwaite: a side with zero variance contributes no term.
    denom = sum(v**2 / d for v, d in ((se_base**2, df_base), (se_cand**2, df_cand)) if v > 0)
    df = float(var**2 / denom)
    se = math.sqrt(var)
    p = float(2 * st.t.sf(abs(diff) / se, df))
    half = float(st.t.ppf(0.5 + confidence / 2, df)) * se
    return LogRatio(ratio, float(np.exp(diff - half)), float(np.exp(diff + half)), p, df,
                    LOG_RATIO_TEST, diff / se, se, confidence)


def log_mean_se(x: np.ndarray) -> tuple[float, float, float]:
    """log of the arithmetic mean of positive per-run values, its delta-method SE and
    degrees of freedom: (log mean, s / (sqrt(n) mean), n - 1)."""
    a = np.asarray(x, dtype=float)
    a = a[~np.isnan(a)]
    n = a.size
    if n == 0 or not (a > 0).all():
        return float("nan"), float("nan"), float("nan")
    m = float(a.mean())
    if n < 2:
        return math.log(m), float("nan"), float("nan")
    return math.log(m), float(a.std(ddof=1) / (math.sqrt(n) * m)), float(n - 1)


def compare_means(
    base: np.ndarray, cand: np.ndarray, *, rate: bool = False, confidence: float = 0.95,
) -> LogRatio:
    """Ratio of averages cand/base of positive per-run values with Welch's t on its log.

    The average is the kit's rule for the quantity: arithmetic for times (and for rates of
    fixed-duration runs), harmonic for rates of fixed-count runs (`rate`), which is the
    arithmetic mean of the reciprocals, inverted.
    """
    b, c = np.asarray(base, float), np.asarray(cand, float)
    if rate:
        lb, sb, db = log_mean_se(1.0 / b)
        lc, sc, dc = log_mean_se(1.0 / c)
        return log_ratio_test(-lb, sb, db, -lc, sc, dc, confidence=confidence)
    return log_ratio_test(*log_mean_se(b), *log_mean_se(c), confidence=confidence)


def paired_log_ratio(
    base: np.ndarray, cand: np.ndarray, *, confidence: float = 0.95,
) -> LogRatio:
    """Paired runs (same repetition, shared conditions): one-sample t on log(cand/base);
    the ratio is the geometric mean of the pair ratios."""
    d = np.log(np.asarray(cand, float)) - np.log(np.asarray(base, float))
    d = d[~np.isnan(d)]
    n = d.size
    if n < 2:
        r = float(np.exp(d.mean())) if n else float("nan")
        return LogRatio(r, float("nan"), float("nan"), float("nan"), float("nan"),
                        "paired t on log ratio", confidence=confidence)
    m, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(n))
    res = log_ratio_test(0.0, 0.0, float(n - 1), m, se, float(n - 1), confidence=confidence)
    return replace(res, test="paired t on log ratio")

