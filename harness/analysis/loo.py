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

import copy
import math
from collections.abc import Callable

import numpy as np

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


class SortedOps:
    """One group's ops sorted by latency, with each run's positions in that order: every
    percentile, per-run and leave-one-run-out, is then O(log n).

    `scale` divides each value as it is read (ns in, ms out: the division happens on the
    two values an interpolation uses, exactly as on a divided array)."""

    def __init__(self, lat_sorted: np.ndarray, run_sorted: np.ndarray,
                 scale: float = 1.0) -> None:
        self.lat = np.asarray(lat_sorted)
        self.scale = float(scale)
        self.n = int(self.lat.size)
        run = np.asarray(run_sorted)
        if run.dtype.kind in "iu" and run.size and run.min() >= 0:
            counts = np.bincount(run)  # run positions: no sorted copy of the runs needed
            self.labels = np.flatnonzero(counts)
            self.counts = counts[self.labels]
        else:
            self.labels, self.counts = np.unique(run, return_counts=True)
        if run.dtype.kind in "iu" and run.size and run.max() < 2**15 and run.min() >= 0:
            run = run.astype(np.int16)  # a stable argsort of 16-bit ints is a radix sort
        order = np.argsort(run, kind="stable")  # grouped by run, in `labels` order
        if self.n < 2**31:
            order = order.astype(np.int32)  # 4 bytes per op instead of 8 (100 M: 400 MB)
        bounds = np.concatenate([[0], np.cumsum(self.counts)])
        self.positions = [order[bounds[j]:bounds[j + 1]] for j in range(self.labels.size)]
        # Ops of other runs before each of a run's ops (for the leave-one-out search).
        self.others_before = [pos - np.arange(pos.size, dtype=pos.dtype)
                              for pos in self.positions]

    def with_scale(self, scale: float) -> SortedOps:
        """The same ops read divided by `scale` (shares the arrays)."""
        other = copy.copy(self)
        other.scale = float(scale)
        return other

    def at(self, i: int) -> float:
        return float(self.lat[i]) / self.scale

    def quantile(self, q: float) -> float:
        """``np.quantile(all ops, q)``."""
        return numpy_linear(self.n, q, self.at)

    def per_run(self, q: float) -> np.ndarray:
        return np.array([numpy_linear(pos.size, q, lambda k, pos=pos: self.at(pos[k]))
                         for pos in self.positions])

    def leave_one_out(self, q: float) -> np.ndarray:
        """The `q` quantile of all ops without each run in turn (`labels` order): the k-th
        smallest op of the others sits after the ops of the left-out run that have at
        most k others before them."""
        out = np.empty(len(self.positions))
        for j, ob in enumerate(self.others_before):
            out[j] = numpy_linear(
                self.n - ob.size, q,
                lambda k, ob=ob: self.at(k + int(np.searchsorted(ob, k, side="right"))))
        return out

    def interval(self, q: float, *, confidence: float = 0.95,
                 min_tail_ops: int = intervals.MIN_TAIL_OPS) -> intervals.RunInterval:
        """`intervals.quantile_interval` of these ops, the same to the last bit: the
        method's decisions are `intervals.interval_of_quantile`'s, fed from the sort."""
        if self.n == 0:
            return intervals._no_interval(float("nan"), 0, "no ops", confidence)
        value = self.quantile(q)
        return intervals.interval_of_quantile(
            value, self.counts, q,
            leave_one_out=lambda: self.leave_one_out(q), per_run=lambda: self.per_run(q),
            tail_runs=lambda: self.tail_runs(value, q),
            confidence=confidence, min_tail_ops=min_tail_ops)

    def _first(self, value: float, strictly_above: bool) -> int:
        """First sorted index whose value is > `value` (or >= when not strictly): a
        search on the raw values, then corrected on the scaled ones that are compared."""
        k = int(np.searchsorted(self.lat, value * self.scale, side="left"))
        k = min(max(k, 0), self.n)

        def past(i: int) -> bool:
            v = self.at(i)
            return v > value if strictly_above else v >= value

        while k > 0 and past(k - 1):
            k -= 1
        while k < self.n and not past(k):
            k += 1
        return k

    def tail_runs(self, value: float, q: float) -> float:
        """`intervals.tail_runs` from the sorted ops: each run's ops beyond `value`
        (above for q >= 0.5, else below) counted by a search in its positions."""
        if q >= 0.5:
            k = self._first(value, strictly_above=True)
            counts = np.array([pos.size - np.searchsorted(pos, k) for pos in self.positions],
                              float)
        else:
            k = self._first(value, strictly_above=False)
            counts = np.array([np.searchsorted(pos, k) for pos in self.positions], float)
        if counts.sum() <= 0:
            return float(self.labels.size)
        w = counts / counts.sum()
        return max(2.0, float(1.0 / np.sum(w * w)))


def quantile_interval_sorted(lat_sorted: np.ndarray, run_sorted: np.ndarray, q: float,
                             **kw: object) -> intervals.RunInterval:
    """`intervals.quantile_interval(lat, run, q)`, given the ops sorted by latency."""
    return SortedOps(lat_sorted, run_sorted).interval(q, **kw)  # type: ignore[arg-type]
