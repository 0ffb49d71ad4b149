"""Where a series of runs steps to a new level: candidate places, and the test of each.

A series is runs in time order, grouped into points (one run each, or every run of one
label value: ``harness history --by commit``). Two steps:

1. `locations`: where the levels change, by optimal partitioning (Jackson et al. 2005,
   the exact search PELT prunes) of the points' mean log values under a BIC-like
   penalty, the noise SD estimated robustly from successive differences (so steps do not
   inflate it). All changes are placed at once: binary segmentation, the kit's first
   choice, masks changes that undo each other (a regression, then its fix: found on a
   real Redis history where throughput fell 6.6x at one commit and rose 4x four commits
   later, and neither was found). A stretch between changes needs `min_runs` runs and,
   except the newest, `min_points` points: one outlying run, or one slow commit in the
   middle of a series, is no new level that stays.
2. `split_test`: for a place between its neighbouring changes, is there a change in that
   stretch at all? Two tests, each valid on its own, combined by Bonferroni (twice the
   smaller p); both take the best split of the stretch, so neither is fooled by the
   place having been chosen to fit:

   - a permutation test of the runs-weighted CUSUM maximum, sqrt(n_before * n_after / n)
     * |mean_before - mean_after|, on each run's log value winsorised at the stretch's
     median ± 3 robust SDs, permuting whole points (a point's runs stay together), as
     E-divisive does (Matteson & James 2014): no distribution assumed, and a wild run,
     which lands anywhere under permutation, makes the permuted maxima as large as the
     observed one. In batches until 20 exceed the observed maximum or 9 999 have run
     (Besag & Clifford 1991);
   - the largest two-sample t over the splits with the points' means as the units
     (pooled SD, P - 2 df), times the number of splits. The permutation alone cannot say
     much about few points: with 7 points and the newest one far off, 2 of 7 orderings
     put it at an end (p >= 0.29) however far it lies; the t weighs how far, against the
     spread of the points, which holds the build-to-build and day-to-day variation that
     the runs within one point do not.

`harness.analysis.history.changes` then tests each place between its neighbours with the kit's
run-level intervals and judges all of a call's candidates as one family under
Benjamini-Hochberg, dropping the weakest and testing its neighbours again until every
one left is significant. The choice against Apache Otava (Hunter's E-divisive with a
t-test merge) is measured in benchmarks/history_detection.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtr

#: Runs a change needs on each side: one or two outlying runs are not a new level.
MIN_RUNS = 3
#: Points a stretch between changes needs, except the newest (the gate's question).
MIN_POINTS = 2
#: The penalty of one more change, in units of the noise variance times log(points).
PENALTY_PER_LOG_POINT = 2.0
#: Winsorising: the segment's median ± this many robust SDs (1.4826 MAD).
CLIP_SDS = 3.0
#: Sequential permutations: batch size, the most, and the exceedances that stop early.
BATCH, MAX_PERMUTATIONS, STOP_AFTER = 200, 9_999, 20


@dataclass(frozen=True)
class Candidate:
    """A split tested by `scan`: the first point after it, its permutation p, and the
    points [start, stop) of the segment it was found in."""

    point: int
    p_scan: float
    start: int
    stop: int
    statistic: float
    permutations: int


def _clipped(y: np.ndarray) -> np.ndarray:
    med = float(np.median(y))
    sd = 1.4826 * float(np.median(np.abs(y - med)))
    return y if sd <= 0 else np.clip(y, med - CLIP_SDS * sd, med + CLIP_SDS * sd)


def _max_stat(sums: np.ndarray, counts: np.ndarray, min_runs: int) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    """Per row of per-point `sums`/`counts` (rows: orderings): the largest CUSUM statistic
    over admissible splits, and where (-1: none admissible)."""
    s, c = np.cumsum(sums, axis=-1)[..., :-1], np.cumsum(counts, axis=-1)[..., :-1]
    total_s, total_c = sums.sum(axis=-1, keepdims=True), counts.sum(axis=-1, keepdims=True)
    right_c = total_c - c
    ok = (c >= min_runs) & (right_c >= min_runs)
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = s / c - (total_s - s) / right_c
        t = np.sqrt(c * right_c / total_c) * np.abs(diff)
    t = np.where(ok, t, -np.inf)
    where = np.argmax(t, axis=-1)
    best = np.take_along_axis(t, where[..., None], axis=-1)[..., 0]
    return best, np.where(np.isfinite(best), where, -1)


def _t_scan(means: np.ndarray, ok: np.ndarray) -> tuple[float, int]:
    """Bonferroni-corrected p of the largest two-sample t over the admissible splits
    `ok` (after point j), the points' means as the units (pooled SD, P - 2 df), and
    where. (1.0, -1) when there are too few points for a t."""
    p_n = means.size
    if p_n < 3 or not ok.any():
        return 1.0, -1
    left_n = np.arange(1, p_n, dtype=float)
    right_n = p_n - left_n
    cs, cs2 = np.cumsum(means)[:-1], np.cumsum(means**2)[:-1]
    total, total2 = means.sum(), (means**2).sum()
    m_left, m_right = cs / left_n, (total - cs) / right_n
    ss = (cs2 - left_n * m_left**2) + ((total2 - cs2) - right_n * m_right**2)
    s2 = np.maximum(ss, 0) / (p_n - 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(m_left - m_right) / np.sqrt(s2 * (1 / left_n + 1 / right_n))
    t = np.where(ok, np.nan_to_num(t, nan=0.0, posinf=np.inf), -np.inf)
    j = int(np.argmax(t))
    p = 2 * float(stdtr(p_n - 2, -t[j])) if np.isfinite(t[j]) else 0.0
    return min(1.0, p * int(ok.sum())), j


def split_test(values: np.ndarray, point: np.ndarray, start: int, stop: int, *,
               min_runs: int = MIN_RUNS, rng: np.random.Generator | None = None
               ) -> Candidate | None:
    """The best split of points [start, stop) and its p; None if no split leaves
    `min_runs` runs on each side.

    Two tests of "a change somewhere in here", each valid on its own, combined by
    Bonferroni (twice the smaller p): the permutation test of the runs-weighted CUSUM
    maximum (no distribution assumed, robust to an outlying run), and the largest t
    over the splits with the points' means as the units, times the number of splits.
    The permutation alone cannot say much about a few points: with 7 points and the
    newest one different, only 2 of 7 orderings put it at an end (p >= 0.29), however
    far it lies; the t can (it weighs how far, against the spread of the points,
    which holds build-to-build and day-to-day variation as the runs within one point
    do not)."""
    rng = rng if rng is not None else np.random.default_rng(0)
    mine = (point >= start) & (point < stop)
    pts = point[mine] - start
    size = stop - start
    counts = np.bincount(pts, minlength=size).astype(float)
    sums = np.bincount(pts, weights=_clipped(values[mine]), minlength=size)
    # The t's point means are not clipped: a newest point far off is what it is looking
    # for, and clipping would pull it back to 3 SDs; a lone wild run among few points
    # widens the t's pooled SD instead.
    raw = np.bincount(pts, weights=values[mine], minlength=size)
    present = counts > 0  # a point whose runs were all left out takes no place
    sums, counts, raw = sums[present], counts[present], raw[present]
    index = np.flatnonzero(present) + start
    if sums.size < 2:
        return None
    best, where = _max_stat(sums, counts, min_runs)
    if where < 0:
        return None
    exceed, done = 0, 0
    while done < MAX_PERMUTATIONS and exceed < STOP_AFTER:
        batch = min(BATCH, MAX_PERMUTATIONS - done)
        order = rng.permuted(np.tile(np.arange(sums.size), (batch, 1)), axis=1)
        perm_best, _ = _max_stat(sums[order], counts[order], min_runs)
        # Ties count as exceedances (the observed ordering is one of the permutations).
        exceed += int(np.count_nonzero(perm_best >= best * (1 - 1e-12)))
        done += batch
    p_perm = (1 + exceed) / (1 + done)
    left = np.cumsum(counts)[:-1]
    p_t, where_t = _t_scan(raw / counts,
                           (left >= min_runs) & (counts.sum() - left >= min_runs))
    if p_t < p_perm:
        where = where_t
    return Candidate(int(index[int(where) + 1]), min(1.0, 2 * min(p_perm, p_t)), start,
                     stop, float(best), done)


def _point_stats(values: np.ndarray, point: np.ndarray, n_points: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    counts = np.bincount(point, minlength=n_points).astype(float)
    sums = np.bincount(point, weights=values, minlength=n_points)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / counts, counts


def noise_sd(means: np.ndarray) -> float:
    """The SD of the points' means about their level: 1.4826 MAD of successive
    differences / sqrt 2 (a step moves one difference, not the spread)."""
    m = means[np.isfinite(means)]
    if m.size < 3:
        return float("nan")
    d = np.diff(m)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def locations(values: np.ndarray, point: np.ndarray, n_points: int, *,
              min_runs: int = MIN_RUNS, min_points: int = MIN_POINTS,
              penalty: float = PENALTY_PER_LOG_POINT) -> list[int]:
    """The first point of each new level (see the module doc), in order."""
    values = np.asarray(values, float)
    point = np.asarray(point, np.int64)
    keep = np.isfinite(values)
    means, counts = _point_stats(values[keep], point[keep], n_points)
    present = counts > 0
    idx = np.flatnonzero(present)
    m, c = means[present], counts[present]
    p_n = m.size
    sd = noise_sd(m)
    if p_n < 2 or not sd > 0:
        return []
    # Optimal partitioning: F[t] = min over s of F[s] + cost(s, t) + beta, points as
    # units (cost: the stretch's sum of squares about its mean, over sd^2).
    beta = penalty * math.log(p_n)
    cs = np.concatenate([[0.0], np.cumsum(m)])
    cs2 = np.concatenate([[0.0], np.cumsum(m * m)])
    cr = np.concatenate([[0.0], np.cumsum(c)])
    best = np.full(p_n + 1, np.inf)
    best[0] = -beta
    last = np.zeros(p_n + 1, np.int64)
    for t in range(1, p_n + 1):
        s = np.arange(t)
        length = t - s
        ss = (cs2[t] - cs2[s]) - (cs[t] - cs[s]) ** 2 / length
        ok = (cr[t] - cr[s] >= min_runs) & ((length >= min_points) | (t == p_n))
        total = np.where(ok, best[s] + ss / sd**2 + beta, np.inf)
        last[t] = int(np.argmin(total))
        best[t] = total[last[t]]
    if not np.isfinite(best[p_n]):
        return []
    cuts, t = [], p_n
    while t > 0:
        t = int(last[t])
        if t > 0:
            cuts.append(int(idx[t]))
    return sorted(cuts)


@dataclass(frozen=True)
class TailTest:
    """The newest `points` points of a series (`runs` runs in all) against a level of it:
    `ratio` their geometric mean over the level's, `p` one-sided (worse)."""

    points: int
    runs: int
    ratio: float
    p: float


def _tail_test(values: np.ndarray, point: np.ndarray, cuts: Sequence[int], tail: np.ndarray,
               ref: np.ndarray, higher_is_better: bool, clip_tail: bool) -> TailTest | None:
    """The mean of the points `tail` against that of the points `ref` (arrays of point
    indices), one-sided in the worse direction; points as units, each its runs' mean log
    value (the runs of one point share its build and its minute: not independent draws).
    Robust as the scan is: every point is winsorised at its level's median ± 3 robust SDs
    (1.4826 MAD of the points' distances from their levels' medians; levels between
    `cuts`), the tail's too where `clip_tail`, so a wild point neither makes nor hides a
    level; the SD pooled from the other points' winsorised residuals about their levels'
    means, points - levels df. None without a ref, a tail or a df."""
    n_points = int(point.max()) + 1
    counts = np.bincount(point, minlength=n_points)
    sums = np.bincount(point, weights=values, minlength=n_points)
    present = counts > 0
    tail, ref = tail[present[tail]], ref[present[ref]]
    if not tail.size or not ref.size:
        return None
    idx = np.flatnonzero(present)
    means = np.zeros(n_points)
    means[idx] = sums[idx] / counts[idx]
    level = np.searchsorted(np.asarray(sorted(cuts), np.int64), np.arange(n_points),
                            side="right")
    rest = idx[~np.isin(idx, tail)]
    center = np.zeros(n_points)
    for lv in np.unique(level[idx]):
        mine = idx[level[idx] == lv]
        center[mine] = float(np.median(means[mine]))
    spread = 1.4826 * float(np.median(np.abs(means[rest] - center[rest]))) if rest.size \
        else 0.0
    clipped = means.copy()
    if spread > 0:
        lo, hi = center - CLIP_SDS * spread, center + CLIP_SDS * spread
        clipped = np.clip(means, lo, hi)
        if not clip_tail:
            clipped[tail] = means[tail]
    level_n = np.bincount(level[rest], minlength=n_points)
    level_mean = np.bincount(level[rest], weights=clipped[rest],
                             minlength=n_points) / np.maximum(level_n, 1)
    df = int(rest.size) - int(np.count_nonzero(level_n))
    if df < 1:
        return None
    sd = math.sqrt(float(((clipped[rest] - level_mean[level[rest]]) ** 2).sum()) / df)
    d = float(clipped[tail].mean() - clipped[ref].mean())
    se = sd * math.sqrt(1 / tail.size + 1 / ref.size)
    worse = -d if higher_is_better else d
    t = worse / se if se > 0 else (math.inf if worse > 0 else -math.inf if worse else 0.0)
    p = float(stdtr(df, -t)) if math.isfinite(t) else (0.0 if t > 0 else 1.0)
    return TailTest(int(tail.size), int(counts[tail].sum()), math.exp(d), p)


def _finite(values: np.ndarray, point: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values = np.asarray(values, float)
    point = np.asarray(point, np.int64)
    keep = np.isfinite(values)
    return values[keep], point[keep]


def trailing(values: np.ndarray, point: np.ndarray, cuts: Sequence[int], *,
             min_runs: int = MIN_RUNS, higher_is_better: bool = False
             ) -> tuple[TailTest, ...]:
    """For each k = 1.. while the newest k points hold fewer than `min_runs` runs (so no
    change can begin among them yet): those points against the rest of the newest level
    (which begins at the last of `cuts`, the series' change points), `_tail_test`.
    Empty when the newest point alone has `min_runs` runs: a change there can be judged."""
    v, pt = _finite(values, point)
    if not pt.size:
        return ()
    n_points = int(np.asarray(point).max()) + 1
    counts = np.bincount(pt, minlength=n_points)
    newest_k = int(np.count_nonzero(np.cumsum(counts[::-1]) < min_runs))
    start = max(cuts, default=0)
    out: list[TailTest] = []
    for k in range(1, newest_k + 1):
        tail = np.arange(n_points - k, n_points)
        found = _tail_test(v, pt, cuts, tail, np.arange(start, n_points - k),
                           higher_is_better, clip_tail=False)
        if found is not None and not (out and out[-1].runs == found.runs):
            out.append(found)  # (a point whose runs were all left out adds no test)
    return tuple(out)


def newest_level(values: np.ndarray, point: np.ndarray, cuts: Sequence[int], *,
                 points: int = MIN_RUNS, higher_is_better: bool = False) -> TailTest | None:
    """The newest `points` points of the newest level (all of it, if it has fewer)
    against the level before it, `_tail_test`: does the series' newest stretch, and not
    only its newest level as a whole, lie off the level before? None with one level."""
    if not cuts:
        return None
    v, pt = _finite(values, point)
    if not pt.size:
        return None
    n_points = int(np.asarray(point).max()) + 1
    cuts = sorted(cuts)
    at, before = cuts[-1], (cuts[-2] if len(cuts) > 1 else 0)
    tail = np.arange(max(at, n_points - points), n_points)
    return _tail_test(v, pt, cuts, tail, np.arange(before, at), higher_is_better,
                      clip_tail=True)
