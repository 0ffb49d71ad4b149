"""Leave-one-run-out percentiles from one sort, for the run-as-unit percentile intervals.

`intervals.quantile_interval` takes the percentile of all ops without each run in turn:
R passes over the ops (200 runs of 100 M ops: minutes). Here the ops are sorted once
(DuckDB does it, out of core); the k-th smallest op without run l is then found by a
binary search over run l's positions in the sorted order, so every leave-one-out and
per-run percentile costs O(log n). `numpy_linear` reproduces numpy's default
(``method="linear"``) interpolation bit for bit, so `quantile_interval_sorted` returns
exactly what `intervals.quantile_interval` returns on the same ops (a test holds them
together).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import scipy.stats as st

from harness.analysis import intervals


def numpy_linear(n: int, q: float, at: Callable[[int], float]) -> float:
    """``np.quantile(x, q)`` of an n-element x whose i-th smallest value is ``at(i)``
    (numpy's virtual index, bounds and two-sided lerp, as in numpy 1.22+)."""
    v = (n - 1) * q
    if v >= n - 1:
        a = b = float(at(n - 1))
        prev = float(n - 1)
    else:
        prev = float(math.floor(v))
        a, b = float(at(int(prev))), float(at(int(prev) + 1))
    gamma = v - math.floor(v)
    diff = b - a
    return b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma


def quantile_interval_sorted(
    lat_sorted: np.ndarray, run_sorted: np.ndarray, q: float, *, confidence: float = 0.95,
    min_tail_ops: int = intervals.MIN_TAIL_OPS,
) -> intervals.RunInterval:
    """`intervals.quantile_interval(lat, run, q)`, given the ops sorted by latency."""
    lat = np.asarray(lat_sorted, dtype=float)
    n = int(lat.size)
    if n == 0:
        return intervals._no_interval(float("nan"), 0, "no ops", confidence)
    value = numpy_linear(n, q, lat.__getitem__)
    run = np.asarray(run_sorted)
    labels, counts = np.unique(run, return_counts=True)
    if labels.size < 2:
        return intervals._no_interval(value, int(labels.size), "one run: no interval",
                                      confidence)
    tail = counts.min() * (1 - q)
    if tail < min_tail_ops:
        need = math.ceil(min_tail_ops / (1 - q))
        return intervals._no_interval(
            value, int(labels.size),
            f"too few ops for an interval of p{q * 100:g} ({counts.min()} in a run; "
            f"needs {need})", confidence)
    # Positions of each run's ops in the sorted order, run by run, ascending in each.
    order = np.argsort(run, kind="stable")  # groups by run, in `labels` order
    bounds = np.concatenate([[0], np.cumsum(counts)])
    loo = np.empty(labels.size)
    per_run = np.empty(labels.size)
    for j in range(labels.size):
        pos = order[bounds[j]:bounds[j + 1]]
        # Ops of other runs before each of this run's ops: the k-th smallest op of the
        # others sits after the ops of this run that have at most k others before them.
        others_before = pos - np.arange(pos.size)

        def without(k: int, pos: np.ndarray = pos, ob: np.ndarray = others_before) -> float:
            return lat[k + int(np.searchsorted(ob, k, side="right"))]

        loo[j] = numpy_linear(n - pos.size, q, without)
        per_run[j] = numpy_linear(pos.size, q, lambda k, pos=pos: lat[pos[k]])
    jack = intervals.from_leave_one_out(value, loo, confidence=confidence)
    if not (value > 0 and np.all(per_run > 0)) or np.isnan(jack.se_log):
        return jack
    # As in `intervals.quantile_interval`: the larger of the jackknife SE and the spread
    # of the per-run percentiles.
    r = labels.size
    se = max(jack.se_log, float(np.log(per_run).std(ddof=1)) / math.sqrt(r))
    half = float(st.t.ppf(0.5 + confidence / 2, r - 1)) * se
    lv = math.log(value)
    return intervals.RunInterval(value, math.exp(lv - half), math.exp(lv + half), int(r),
                                 se, float(r - 1), intervals.METHOD_QUANTILE, "", confidence)
