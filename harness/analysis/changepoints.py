"""Where a series of runs steps to a new level: binary segmentation with a permutation test.

A series is runs in time order, grouped into points (one run each, or every run of one
label value: ``harness history --by commit``). `scan` looks for the split between two
points that best separates the runs before from the runs after, by the CUSUM statistic
of binary segmentation (Vostrikova 1981; the weight makes a split near an edge no easier
to find than one in the middle)::

    T = max over splits k of  sqrt(n_before * n_after / n) * |mean_before - mean_after|

on each run's log value, winsorised at the segment's median ± 3 robust SDs (a wild run
weighs as a bad run, not as ten). Whether T is larger than chance is judged by permuting
the points of the segment (a point's runs stay together), as E-divisive does (Matteson &
James 2014): no normality is assumed, and a single outlying run, which lands anywhere
under permutation, makes the permuted maxima as large as the observed one. Beside it,
the largest two-sample t over the same splits with the points' means as the units, times
the number of splits; the scan's p is twice the smaller (`split_test` says why both). The
permutations run in batches until 20 exceed the observed maximum or 9 999 have run
(Besag & Clifford 1991), so p goes down to 1e-4 where it matters and stays cheap where
it does not. A split needs `min_runs` runs on each side: one outlying run is never a
change, and a change at the newest point needs that many runs there.

A significant split is kept and both halves are scanned again, until no half has a
split with p < `level`. Every split tested is a candidate (with its p), significant or
not: `harness.analysis.history` tests each again between its neighbours with the kit's
run-level intervals and judges all candidates of a call as one family under
Benjamini-Hochberg. The choice against Otava (Hunter's E-divisive with a t-test merge)
and ruptures' PELT is measured in benchmarks/history_detection.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import stdtr

#: Runs a change needs on each side: one or two outlying runs are not a new level.
MIN_RUNS = 3
#: A split is kept (and its halves scanned) below this permutation p.
LEVEL = 0.05
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


def scan(values: np.ndarray, point: np.ndarray, n_points: int, *,
         min_runs: int = MIN_RUNS, level: float = LEVEL, seed: int = 0) -> list[Candidate]:
    """Binary segmentation of a series (see the module doc): every split tested, in
    point order. `values`: each run's log value; `point`: each run's point (0 to
    `n_points` - 1, in time order)."""
    values = np.asarray(values, float)
    point = np.asarray(point, np.int64)
    keep = np.isfinite(values)
    values, point = values[keep], point[keep]
    rng = np.random.default_rng(seed)
    found: list[Candidate] = []
    todo = [(0, n_points)]
    while todo:
        start, stop = todo.pop()
        cand = split_test(values, point, start, stop, min_runs=min_runs, rng=rng)
        if cand is None:
            continue
        found.append(cand)
        if cand.p_scan < level:
            todo += [(start, cand.point), (cand.point, stop)]
    return sorted(found, key=lambda c: c.point)
