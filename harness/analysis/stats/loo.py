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

from harness.analysis.stats import intervals

try:  # the C radix sort, built by `pip install -e .` where a compiler is (setup.py)
    from harness.analysis.stats import _radix
except ImportError:  # pragma: no cover - without a compiler: numpy's sorts
    _radix = None


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


class _Percentiles:
    """What `SortedOps` and `RunSorted` share: the interval from their searches, and the
    tail's effective number of runs from each run's count beyond a value."""

    n: int
    counts: np.ndarray
    labels: np.ndarray

    def quantile(self, q: float) -> float:
        raise NotImplementedError

    def per_run(self, q: float) -> np.ndarray:
        raise NotImplementedError

    def leave_one_out(self, q: float) -> np.ndarray:
        raise NotImplementedError

    def tail_runs(self, value: float, q: float) -> float:
        raise NotImplementedError

    def interval(self, q: float, *, confidence: float = 0.95,
                 min_tail_ops: int = intervals.MIN_TAIL_OPS) -> intervals.RunInterval:
        """`intervals.quantile_interval` of these ops, the same to the last bit: the
        method's decisions are `intervals.interval_of_quantile`'s, fed from the searches."""
        if self.n == 0:
            return intervals._no_interval(float("nan"), 0, "no ops", confidence)
        value = self.quantile(q)
        return intervals.interval_of_quantile(
            value, self.counts, q,
            leave_one_out=lambda: self.leave_one_out(q), per_run=lambda: self.per_run(q),
            tail_runs=lambda: self.tail_runs(value, q), median=lambda: self.quantile(0.5),
            confidence=confidence, min_tail_ops=min_tail_ops)

    def _effective_runs(self, beyond: np.ndarray) -> float:
        """`intervals.tail_runs`' weighting of each run's ops beyond the value."""
        if beyond.sum() <= 0:
            return float(self.labels.size)
        w = beyond / beyond.sum()
        return max(2.0, float(1.0 / np.sum(w * w)))


class SortedOps(_Percentiles):
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
        return self._effective_runs(counts)


def quantile_interval_sorted(lat_sorted: np.ndarray, run_sorted: np.ndarray, q: float,
                             **kw: object) -> intervals.RunInterval:
    """`intervals.quantile_interval(lat, run, q)`, given the ops sorted by latency."""
    return SortedOps(lat_sorted, run_sorted).interval(q, **kw)  # type: ignore[arg-type]


class RunSorted(_Percentiles):
    """One group's ops as each run's latencies sorted (integers, ns): every percentile,
    pooled, per-run and leave-one-run-out, by counting the ops at or below a value (one
    binary search per run) and bisecting on the integer latencies. Nothing pooled is
    sorted or kept: 8 bytes per op, each run sorted on its own (in threads, while the
    next files are read), so a billion ops fit where `SortedOps` needs 3x the memory.
    The same interface and the same values as `SortedOps`, to the last bit."""

    def __init__(self, runs: list[np.ndarray], labels: np.ndarray, scale: float = 1.0) -> None:
        keep = [i for i, r in enumerate(runs) if r.size]
        # int64, or int32 where a run's values lie strictly inside its range (`compact`)
        self.runs = [r if r.dtype in (np.int32, np.int64) else r.astype(np.int64)
                     for r in (np.asarray(runs[i]) for i in keep)]
        self.labels = np.asarray(labels)[keep]
        self.counts = np.array([r.size for r in self.runs], np.int64)
        self.n = int(self.counts.sum())
        self.scale = float(scale)
        self._lo = min((int(r[0]) for r in self.runs), default=0)
        self._hi = max((int(r[-1]) for r in self.runs), default=0)

    def with_scale(self, scale: float) -> RunSorted:
        other = copy.copy(self)
        other.scale = float(scale)
        return other

    def max(self) -> float:
        return float(self._hi) / self.scale

    def top(self, m: int) -> np.ndarray:
        """The `m` largest latencies of all runs pooled (raw integers, unordered; all of
        them if there are fewer): each run's last `m`, then the `m` largest of those. For
        the heavy-tail check (`tails.check_top`), which needs no more of the tail."""
        parts = [r[-m:] for r in self.runs] if m > 0 else []
        both = np.concatenate(parts) if parts else np.empty(0, np.int64)
        return both if both.size <= m else np.partition(both, both.size - m)[both.size - m:]

    def _kth(self, k: np.ndarray, without: np.ndarray) -> np.ndarray:
        """The k-th smallest (0-based) of all ops, or of all but run `without` (-1: none),
        elementwise: the least integer v with at least k + 1 such ops at or below it."""
        lo = np.full(k.shape, self._lo, np.int64)
        hi = np.full(k.shape, self._hi, np.int64)
        cols = np.arange(k.size)
        own = without >= 0
        while np.any(lo < hi):
            mid = lo + (hi - lo) // 2
            counts = _search_all(self.runs, mid, "right")
            total = counts.sum(axis=0) - np.where(own, counts[np.maximum(without, 0), cols], 0)
            enough = total >= k + 1
            hi = np.where(enough, mid, hi)
            lo = np.where(enough, lo, mid + 1)
        return lo

    def _quantiles(self, q: float, without: list[int]) -> np.ndarray:
        """`numpy_linear` of all ops but run `without[i]` (-1: none), for each i."""
        sizes = [self.n - (int(self.counts[w]) if w >= 0 else 0) for w in without]
        need: list[tuple[int, int]] = []
        for i, m in enumerate(sizes):
            v = (m - 1) * q
            if m > 0:
                need += [(i, m - 1)] if v >= m - 1 else [(i, math.floor(v)), (i, math.floor(v) + 1)]
        if not need:
            return np.full(len(sizes), np.nan)
        ks = np.array([k for _, k in need], np.int64)
        ws = np.array([without[i] for i, _ in need], np.int64)
        found = dict(zip(need, self._kth(ks, ws).tolist(), strict=True))
        return np.array([
            numpy_linear(m, q, lambda k, i=i: float(found[(i, k)]) / self.scale) if m else np.nan
            for i, m in enumerate(sizes)])

    def quantile(self, q: float) -> float:
        return float(self._quantiles(q, [-1])[0])

    def per_run(self, q: float) -> np.ndarray:
        return np.array([numpy_linear(r.size, q, lambda k, r=r: float(r[k]) / self.scale)
                         for r in self.runs])

    def leave_one_out(self, q: float) -> np.ndarray:
        return self._quantiles(q, list(range(len(self.runs))))

    def _first_raw(self, value: float, strictly_above: bool) -> int:
        """The least integer latency whose scaled value is > `value` (>= when not
        strictly): a guess from the product, corrected on the compared values."""
        def past(x: int) -> bool:
            v = float(x) / self.scale
            return v > value if strictly_above else v >= value

        x = min(max(math.floor(value * self.scale), self._lo - 1), self._hi + 1)
        while x > self._lo - 1 and past(x - 1):
            x -= 1
        while x <= self._hi and not past(x):
            x += 1
        return x

    def tail_runs(self, value: float, q: float) -> float:
        """As `SortedOps.tail_runs`: each run's ops beyond `value`, counted by a search."""
        if q >= 0.5:
            x = self._first_raw(value, strictly_above=True)
            counts = (self.counts - _search_all(self.runs, np.int64(x), "left")).astype(float)
        else:
            x = self._first_raw(value, strictly_above=False)
            counts = _search_all(self.runs, np.int64(x), "left").astype(float)
        return self._effective_runs(counts)


_I32 = np.iinfo(np.int32)


def compact(lat: np.ndarray) -> np.ndarray:
    """Integer latencies as int32 when every value lies strictly inside its range (half
    the memory, and sorting is ~40% faster), else as they are; `RunSorted` takes both."""
    if lat.size and lat.dtype == np.int64 and _I32.min < lat.min() and lat.max() < _I32.max:
        return lat.astype(np.int32)
    return lat


def sort_ints(lat: np.ndarray) -> np.ndarray:
    """`np.sort` of integer latencies, the same array, by an LSD radix sort of the values
    less their least: in C (`_radix`, 11-bit digits) where it is built, else in numpy's
    stable sort of 16-bit digits (a counting sort). numpy's own sort dispatches an
    AVX-512 path that is slow on AMD Zen 4 (28 ns per int32 on this machine's EPYC, 4.5x
    its AVX2 path), and a comparison sort is O(n log n) anyway."""
    if lat.size < 4096 or lat.dtype.kind not in "iu":
        return np.sort(lat)
    lo = int(lat.min())
    span = int(lat.max()) - lo
    if span >= 2**32:
        return np.sort(lat)
    u = (lat - lat.dtype.type(lo)).astype(np.uint32) if lo else lat.astype(np.uint32)
    if _radix is not None:
        scratch = np.empty_like(u)
        out = (u, scratch)[_radix.sort_u32(u, scratch)]
    elif span < 2**16:
        out = np.sort(u.astype(np.uint16), kind="stable")
    else:
        u = u[np.argsort(u.astype(np.uint16), kind="stable")]  # the low digit
        out = u[np.argsort((u >> 16).astype(np.uint16), kind="stable")]  # then the high
    if out.dtype == np.uint32 and lat.dtype.itemsize == 4:  # in place: no fresh array
        out += np.uint32(lo % 2**32)  # modulo 2**32, as the int32 it is viewed as
        return out.view(lat.dtype)
    return out.astype(lat.dtype) + lat.dtype.type(lo)


def _search_all(runs: list[np.ndarray], v: np.ndarray | np.int64, side: str) -> np.ndarray:
    """`np.searchsorted(r, v)` for each run r (one row each), with int64 `v`: cast once
    for the int32 runs, clipped to its range first (exact: their values lie strictly
    inside it), so numpy never casts a whole run to int64 and no run casts `v` again
    (the binary searches' cost was mostly that per-run cast)."""
    v = np.asarray(v, np.int64)
    if not runs:
        return np.zeros((0, *v.shape), np.int64)
    v32 = np.clip(v, _I32.min, _I32.max).astype(np.int32)
    return np.stack([np.searchsorted(r, v32 if r.dtype == np.int32 else v, side=side)
                     for r in runs])
