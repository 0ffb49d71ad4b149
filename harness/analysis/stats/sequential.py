"""A group-sequential test of one comparison (cand/base of per-run means, the run the
unit), valid however often it is looked at, and how a grid of them is kept to one level.

At look k each side has its first n_k complete runs. The estimate is the log ratio of the
two sides' means, log(mean cand / mean base), with the delta-method SE of `verdict`'s
Welch test (`verdict.log_mean_se`): Z_k = log ratio / SE. Under "no change" and known
variances, (Z_1, Z_2, ...) is the canonical joint normal of a group-sequential trial,
Cov(Z_i, Z_j) = sqrt(t_i / t_j) (i <= j), at the *information fractions*
t_k = n_k / max_n (runs per side over the most the run may take: known in advance and not
the data's, so the looks cannot follow the statistic).

- **Boundaries**: Lan-DeMets (1983) alpha spending with the O'Brien-Fleming-type function
  alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)), computed for the looks actually taken
  (`boundaries`): each look's boundary c_k is the one whose crossing probability, never
  having crossed before, is alpha(t_k) - alpha(t_{k-1}), by recursive numerical
  integration of the score process (Armitage, McPherson and Rowe 1969) on a grid. Early
  looks spend almost nothing (c_1 is large), the last about what a fixed design would.
  A budget or cap that stops before t = 1 leaves alpha unspent: conservative, still valid.
- **Estimated variance, few runs**: the boundary is in z for known variance; with the
  variance estimated from a handful of runs it is carried over at the same nominal tail
  probability to Welch's t: c_k' = t_{df}^{-1}(Phi(c_k)) (Jennison and Turnbull 2000,
  section 11.4's "significance level" approach). That is an approximation; the seeded
  simulations (tests/analysis/stats/test_sequential.py, benchmarks/sequential_decide.py)
  check the false-decision rate and the coverage it gives. Each look's t boundary is
  crossed about as often as its z boundary says (20 000 null pairs, 5% noise, looks at
  3..20 runs), but over all 18 looks one comparison at a nominal 5% ends better/worse
  in 5.4-5.6% (5% or 10% noise; 0.5% at 2%, where most stop equivalent early): the
  approximation is slightly liberal. Across a grid Bonferroni's slack absorbs it (at
  most 4.7% of grids of 3 comparisons, benchmarks/README.md).
- **Repeated confidence intervals** (Jennison and Turnbull 1989): at each look,
  exp(log ratio +- c_k' SE). Together they cover the true ratio at every look at once with
  probability >= 1 - alpha, so the one printed at the stop is valid whatever rule stopped.
- **Verdicts**, all read off that interval: *better* / *worse* when it excludes 1 (the
  boundary is crossed: |Z_k| >= c_k'), *equivalent* when it lies within
  [1/(1 + margin), 1 + margin] (two one-sided tests, each at the spent level alpha/2 per
  side: Schuirmann's TOST read off the repeated interval), else *open*. A false verdict of
  either kind needs the interval to miss the truth at some look, so the chance of any
  false verdict of one comparison, over all its looks, is at most alpha.
- **A grid's family** (each configuration against the first, m comparisons): Bonferroni,
  each comparison run at alpha / m (`family_alpha`). By the union bound the chance that
  *any* comparison of the grid ends on a false verdict is at most alpha, whatever the
  comparisons' dependence (they share the base configuration) and however each stops;
  that bounds the false discovery rate too, so it keeps the level of the grid's one
  Benjamini-Hochberg family (`multiplicity`), conservatively. Benjamini-Hochberg over
  sequential p-values would need a p-value ordering across looks and positive dependence
  between two-sided tests, neither of which holds here by construction; Bonferroni does.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize, special
from scipy import stats as st

from harness.analysis.stats.verdict import log_mean_se

BETTER = "better"
WORSE = "worse"
EQUIVALENT = "equivalent"
OPEN = "open"
#: Every state a comparison can be in at a look.
STATES: tuple[str, ...] = (BETTER, WORSE, EQUIVALENT, OPEN)
#: The method named in prose and on the live line.
METHOD = "group-sequential, Lan-DeMets O'Brien-Fleming-type alpha spending"

#: Grid points over the continuation region of the score in the numerical integration;
#: the crossing probabilities agree with a Monte Carlo of the score process (tests).
_GRID_POINTS = 801
#: The grid spans at most this many standard deviations of the score (S ~ N(0, t) under
#: no change): beyond, the density is below 1e-14 and the boundary makes no difference.
_GRID_SDS = 8.0
#: A boundary beyond this (in z) is "nothing spent": never crossed.
_Z_CAP = 40.0
_SQRT_2PI = math.sqrt(2 * math.pi)


def spent(t: float, alpha: float) -> float:
    """The two-sided alpha spent by information fraction t: Lan-DeMets' O'Brien-Fleming-
    type function 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)); 0 at t = 0, alpha at t >= 1."""
    if t <= 0:
        return 0.0
    t = min(t, 1.0)
    return float(2 * st.norm.sf(st.norm.isf(alpha / 2) / math.sqrt(t)))


def boundaries(fractions: Sequence[float], alpha: float) -> np.ndarray:
    """Two-sided z boundaries c_1.. for looks at increasing information `fractions`
    (each in (0, 1]): P(|Z_j| < c_j for j < k, |Z_k| >= c_k) = spent(t_k) - spent(t_{k-1})
    under no change. Cached by the looks and alpha."""
    fr = tuple(float(f) for f in fractions)
    if any(not 0 < f <= 1 for f in fr) or any(b <= a for a, b in itertools.pairwise(fr)):
        raise ValueError(f"fractions must increase within (0, 1], not {fr!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, not {alpha!r}")
    return np.array(_boundaries(fr, float(alpha)))


@lru_cache(maxsize=256)
def _boundaries(fr: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    out: list[float] = []
    # Density of the score S = Z sqrt(t) on a grid of the continuation region (the
    # sub-density of the paths that have not crossed yet); None before the first look.
    grid: np.ndarray | None = None
    dens: np.ndarray | None = None
    prev_t, prev_spent = 0.0, 0.0
    for t in fr:
        target = spent(t, alpha) - prev_spent
        sd = math.sqrt(t - prev_t)
        if grid is None:
            c = float(st.norm.isf(target / 2)) if target > 0 else _Z_CAP
        else:
            assert dens is not None
            w = _weights(grid) * dens

            def crossing(c: float, w: np.ndarray = w, g: np.ndarray = grid,
                         sd: float = sd, t: float = t) -> float:
                b = c * math.sqrt(t)
                return float(w @ (special.ndtr((-b - g) / sd) + special.ndtr((g - b) / sd)))

            if target <= 0 or crossing(_Z_CAP) >= target:
                c = _Z_CAP
            else:
                c = float(optimize.brentq(lambda c, want=target: crossing(c) - want,
                                          1e-6, _Z_CAP, xtol=1e-7))
        c = min(c, _Z_CAP)
        out.append(c)
        b = min(c, _GRID_SDS) * math.sqrt(t)
        new = np.linspace(-b, b, _GRID_POINTS)
        if grid is None:
            dens = st.norm.pdf(new / sd) / sd
        else:
            assert dens is not None
            kern = np.exp(-0.5 * ((new[:, None] - grid[None, :]) / sd) ** 2) / (sd * _SQRT_2PI)
            dens = kern @ (_weights(grid) * dens)
        grid = new
        prev_t, prev_spent = t, spent(t, alpha)
    return tuple(out)


def _weights(grid: np.ndarray) -> np.ndarray:
    """Simpson's weights on an evenly spaced grid of odd length (trapezoid otherwise)."""
    h = grid[1] - grid[0]
    w = np.ones(grid.size)
    if grid.size % 2 == 1 and grid.size >= 3:
        w[1:-1:2], w[2:-1:2] = 4.0, 2.0
        return w * h / 3
    w[0] = w[-1] = 0.5
    return w * h


def t_boundary(c: float, df: float) -> float:
    """z boundary `c` carried to Welch's t at `df` degrees of freedom at the same nominal
    tail probability (the variance is estimated from few runs)."""
    if c >= _Z_CAP:
        return math.inf
    if not math.isfinite(df):
        return c
    return float(-special.stdtrit(df, special.ndtr(-c)))


def family_alpha(alpha: float, comparisons: int) -> float:
    """The level each of a grid's `comparisons` runs at: Bonferroni, alpha / m."""
    return alpha / max(1, comparisons)


@dataclass(frozen=True)
class Look:
    """One comparison at one look: its state, the estimate and the repeated CI."""

    state: str
    look: int
    n_base: int
    n_cand: int
    fraction: float
    ratio: float
    low: float
    high: float
    z: float
    boundary: float
    alpha: float

    @property
    def decided(self) -> bool:
        return self.state != OPEN


def at_look(base: Sequence[float], cand: Sequence[float], *, fractions: Sequence[float],
            alpha: float, margin: float, higher_is_better: bool = True) -> Look:
    """The comparison of per-run values `base` and `cand` (positive; equal counts or
    not) at the last of the looks at `fractions` (all taken so far, this one last)."""
    if not 0 < margin < 1:
        raise ValueError(f"margin must be between 0 and 1, not {margin!r}")
    c = float(boundaries(fractions, alpha)[-1])
    lb, sb, db = log_mean_se(np.asarray(base, dtype=float))
    lc, sc, dc = log_mean_se(np.asarray(cand, dtype=float))
    diff = lc - lb
    var = sb**2 + sc**2
    k, t = len(fractions), float(fractions[-1])
    if not (math.isfinite(diff) and math.isfinite(var)):
        return Look(OPEN, k, len(base), len(cand), t, math.exp(diff) if math.isfinite(diff)
                    else math.nan, math.nan, math.nan, math.nan, c, alpha)
    if var == 0:
        df, z = math.inf, (0.0 if diff == 0 else math.copysign(math.inf, diff))
    else:
        denom = sum(v**2 / d for v, d in ((sb**2, db), (sc**2, dc)) if v > 0)
        df, z = var**2 / denom, diff / math.sqrt(var)
    ct = t_boundary(c, df)
    half = min(ct * math.sqrt(var), 700.0)  # no bound: (0, inf)
    low, high = math.exp(max(diff - half, -745.0)), math.exp(min(diff + half, 709.0))
    state = _state(low, high, margin, higher_is_better)
    return Look(state, k, len(base), len(cand), t, math.exp(diff), low, high, z, ct, alpha)


def _state(low: float, high: float, margin: float, higher_is_better: bool) -> str:
    """better / worse / equivalent / open from a repeated CI of cand/base."""
    if low > 1 or high < 1:
        up = low > 1
        return BETTER if up == higher_is_better else WORSE
    if low >= 1 / (1 + margin) and high <= 1 + margin:
        return EQUIVALENT
    return OPEN


def replay(base: Sequence[float], cand: Sequence[float], *, first: int, max_n: int,
           alpha: float, margin: float, higher_is_better: bool = True) -> list[Look]:
    """Every look of one comparison, from its runs in the order they were made: look k
    takes each side's first first + k - 1 runs (as many as both have, at most max_n),
    and the looks end at the first decided one. The same runs give the same looks, so
    a run resumed or re-read finds the state it stopped in."""
    if first < 2 or max_n < first:
        raise ValueError(f"need 2 <= first <= max_n, not first={first}, max_n={max_n}")
    most = min(len(base), len(cand), max_n)
    looks: list[Look] = []
    fractions: list[float] = []
    for n in range(first, most + 1):
        fractions.append(n / max_n)
        look = at_look(base[:n], cand[:n], fractions=fractions, alpha=alpha,
                       margin=margin, higher_is_better=higher_is_better)
        looks.append(look)
        if look.decided:
            break
    return looks
