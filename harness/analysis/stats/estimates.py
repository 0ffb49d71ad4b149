"""One configuration's estimates over its runs, each with the method it used: the mean
with a t or BCa bootstrap interval (`mean_ci`), the harmonic mean of rates, the
coefficient of variation, and a run-level mean with its interval (`run_mean_ci`).
`harness.analysis.stats.comparisons` is where they are used and compared (see there for why the
run is the unit)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats as st

from harness.analysis.stats.intervals import ratio_interval as ratio_interval_runs

ArrayLike = Sequence[float] | np.ndarray | pd.Series

#: Below this many samples a normality test says nothing; parametric methods are used.
MIN_NORMALITY_N = 3


def as_array(x: ArrayLike) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    return a[~np.isnan(a)]


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its confidence interval and how it was obtained."""

    value: float
    low: float
    high: float
    n: int
    method: str
    confidence: float = 0.95

    def contains(self, x: float) -> bool:
        return bool(self.low <= x <= self.high)


@dataclass(frozen=True)
class Normality:
    test: str
    p_value: float
    normal: bool
    n: int


def normality(x: ArrayLike, alpha: float = 0.05) -> Normality:
    """Shapiro-Wilk; with fewer than 3 samples (or zero spread) it cannot reject normality."""
    a = as_array(x)
    if a.size < MIN_NORMALITY_N or np.ptp(a) == 0:
        return Normality("none (too few samples)", float("nan"), True, int(a.size))
    p = float(st.shapiro(a).pvalue)
    return Normality("Shapiro-Wilk", p, p >= alpha, int(a.size))


def t_ci(x: ArrayLike, confidence: float = 0.95) -> Estimate:
    """Mean with the Student-t interval mean ± t(n-1) s/√n."""
    a = as_array(x)
    n = int(a.size)
    mean = float(a.mean()) if n else float("nan")
    if n < 2:
        return Estimate(mean, float("nan"), float("nan"), n, "t", confidence)
    half = st.t.ppf(0.5 + confidence / 2, n - 1) * a.std(ddof=1) / np.sqrt(n)
    return Estimate(mean, float(mean - half), float(mean + half), n, "t", confidence)


def bootstrap_ci(
    x: ArrayLike,
    confidence: float = 0.95,
    *,
    statistic=np.mean,
    n_resamples: int = 9999,
    seed: int = 0,
) -> Estimate:
    """BCa bootstrap interval of `statistic` (seeded, so reports are reproducible)."""
    a = as_array(x)
    n = int(a.size)
    value = float(statistic(a)) if n else float("nan")
    if n < 2 or np.ptp(a) == 0:
        return Estimate(value, value if n else float("nan"), value if n else float("nan"), n,
                        "bootstrap BCa", confidence)
    res = st.bootstrap(
        (a,),
        statistic,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method="BCa",
        rng=np.random.default_rng(seed),
        vectorized=True,
    )
    return Estimate(value, float(res.confidence_interval.low),
                    float(res.confidence_interval.high), n, "bootstrap BCa", confidence)


def mean_ci(
    x: ArrayLike, confidence: float = 0.95, *, method: str = "auto", alpha: float = 0.05,
    positive: bool = False,
) -> Estimate:
    """Mean with CI: ``t``, ``bootstrap``, or ``auto`` (t unless Shapiro-Wilk rejects).

    `positive`: the quantity cannot be negative (a time, a rate). A t interval from few,
    spread-out runs can then reach below zero, which a reader takes for a mistake; it is
    cut at zero. Cutting an interval to the possible values keeps its coverage (the true
    mean is never below zero), and the method says so.
    """
    if method == "auto":
        method = "t" if normality(x, alpha).normal else "bootstrap"
    if method == "t":
        est = t_ci(x, confidence)
    elif method == "bootstrap":
        est = bootstrap_ci(x, confidence)
    else:
        raise ValueError(f"method must be auto, t or bootstrap, not {method!r}")
    if positive and est.low < 0:
        est = replace(est, low=0.0, method=f"{est.method}, cut at 0")
    return est


def harmonic_mean(x: ArrayLike, weights: ArrayLike | None = None) -> float:
    """Harmonic mean (the right average of rates over equal amounts of work)."""
    a = as_array(x)
    if weights is None:
        return float(a.size / np.sum(1.0 / a)) if a.size else float("nan")
    w = np.asarray(weights, dtype=float)
    return float(np.sum(w) / np.sum(w / np.asarray(x, dtype=float)))


def harmonic_mean_ci(x: ArrayLike, confidence: float = 0.95) -> Estimate:
    """Harmonic mean of rates; CI = the t interval of the reciprocals, inverted.

    Where that t interval reaches zero (few, skewed samples) its inverse is unbounded;
    the BCa bootstrap of the reciprocals' mean is used instead, and the method says so.
    """
    a = as_array(x)
    inv = t_ci(1.0 / a, confidence)
    method = "harmonic, t on 1/x"
    if not inv.low > 0:
        inv = bootstrap_ci(1.0 / a, confidence)
        method = "harmonic, bootstrap BCa on 1/x"
    low = 1.0 / inv.high if inv.high > 0 else float("nan")
    high = 1.0 / inv.low if inv.low > 0 else float("nan")
    return Estimate(harmonic_mean(a), low, high, int(a.size), method, confidence)


def cv(x: ArrayLike) -> float:
    """Coefficient of variation: sample standard deviation / mean."""
    a = as_array(x)
    return float(a.std(ddof=1) / a.mean()) if a.size > 1 else float("nan")


def run_mean_ci(x: ArrayLike, confidence: float = 0.95, *, rate: bool = False,
                method: str = "auto") -> Estimate:
    """Mean over runs (harmonic if `rate`) with the kit's interval for positive values:
    the jackknife of the log mean with t on n - 1 df (`intervals`), which keeps its
    coverage for skewed runs (0.93-0.95 at log-sd 0.5, 3-10 runs, where the t interval
    or a BCa picked by a normality pre-test cover 0.91-0.92). Values that are not all
    positive, or `method` t/bootstrap, fall back to `mean_ci`."""
    a = as_array(x)
    if method != "auto" or not a.size or not (a > 0).all():
        return mean_ci(a, confidence, method=method, positive=True)
    ones = np.ones(a.size)
    iv = ratio_interval_runs(ones, 1.0 / a, confidence=confidence) if rate else \
        ratio_interval_runs(a, ones, confidence=confidence)
    return Estimate(iv.value, iv.low, iv.high, iv.n_runs,
                    ("harmonic, " if rate else "") + iv.method, confidence)
