"""A run's records as parts read one at a time, and what the run's manifest needs of
them in passes over those parts (`OpsParts`, `RunTally`).

Client processes spill their records in chunks (`harness.loadgen.spill`); the control
machine copies the chunk files and never holds them all at once: `write_run` writes
ops.parquet from them a part at a time, and `RunTally` counts, times and takes the exact
percentiles of the console line and the manifest (`harness.run.runstatus`) in a pass or
three. A run small enough (`IN_MEMORY_RECORDS`) is joined in memory and sorted by start,
as it always was; a longer one is written part by part, each part sorted by start (the
parts of one client follow each other in time; rows of different clients interleave
only within a part's span).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.results.arrays import OpsArrays
from harness.results.columns import load_records, records_columns, records_len
from harness.results.schema import ERROR, REDIRECT, STATUSES, TIMEOUT

#: Up to this many records a run is joined in memory (sorted by start, written at once,
#: percentiles by numpy): ~60 bytes each, ~130 MB at most. Above, it streams.
IN_MEMORY_RECORDS = 1 << 21


@dataclass
class OpsParts:
    """A run's records: parts in memory or a worker's npz files (`load_records`), in order.
    `cleanup` is called once they are written (removes the local copies)."""

    op_names: tuple[str, ...]
    items: list[OpsArrays | Path] = field(default_factory=list)
    cleanup: Callable[[], None] | None = None
    _len: int | None = None
    #: A run small enough, joined once (`joined`): read from memory from then on.
    _joined: OpsArrays | None = None

    @classmethod
    def of(cls, ops: OpsArrays | OpsParts) -> OpsParts:
        return ops if isinstance(ops, OpsParts) else cls(ops.op_names, [ops])

    def __len__(self) -> int:
        if self._len is None:
            self._len = sum(len(i) if isinstance(i, OpsArrays) else records_len(i)
                            for i in self.items)
        return self._len

    def parts(self) -> Iterator[OpsArrays]:
        """Each part in turn, loaded when its turn comes."""
        for item in self.items:
            yield item if isinstance(item, OpsArrays) else load_records(item)

    def columns(self, names: Sequence[str]) -> Iterator[dict[str, np.ndarray]]:
        """Only the named columns of each part (an npz member is read alone), or of
        the records joined once they are (`joined`)."""
        for item in [self._joined] if self._joined is not None else self.items:
            if isinstance(item, OpsArrays):
                yield {n: getattr(item, n) for n in names}
            else:
                yield records_columns(item, names)

    def in_memory(self) -> bool:
        return len(self) <= IN_MEMORY_RECORDS

    def joined(self) -> OpsArrays:
        """All records in one `OpsArrays`, sorted by start (a run small enough); read
        from the parts once, kept until `close`."""
        if self._joined is None:
            self._joined = OpsArrays.concat(list(self.parts()), self.op_names)
        return self._joined

    def close(self) -> None:
        self._joined = None
        if self.cleanup is not None:
            self.cleanup()
            self.cleanup = None


@dataclass
class OmitClients(OpsParts):
    """The records of `parts` less those of the `drop` client ids (a view: the parts
    stay the run's, which closes them): the load's ops without the probe's
    (`clients.probe`), for its achieved rate."""

    drop: tuple[int, ...] = ()

    def parts(self) -> Iterator[OpsArrays]:
        for p in super().parts():
            yield p.take(np.flatnonzero(~np.isin(p.client, self.drop)))

    def columns(self, names: Sequence[str]) -> Iterator[dict[str, np.ndarray]]:
        for c in super().columns([*names, *(["client"] if "client" not in names else [])]):
            keep = ~np.isin(c["client"], self.drop)
            yield {n: c[n][keep] for n in names}

    @classmethod
    def of_run(cls, ops: OpsArrays | OpsParts, drop: Sequence[int]) -> OpsParts:
        parts = OpsParts.of(ops)
        return cls(parts.op_names, list(parts.items), drop=tuple(drop)) if drop else parts


# -- exact order statistics in passes -----------------------------------------------------

#: Values kept in memory at once to sort for an order statistic.
KEEP_VALUES = 1 << 22
_BINS = 4096


def _ranks(n: int, qs: Sequence[float]) -> list[tuple[int, int, float]]:
    """numpy's default (linear) percentile: rank h = (n - 1) q between order statistics
    floor(h) and floor(h) + 1."""
    out = []
    for q in qs:
        h = (n - 1) * q / 100
        lo = int(np.floor(h))
        out.append((lo, min(lo + 1, n - 1), h - lo))
    return out


def order_statistics(passes: Callable[[], Iterable[np.ndarray]], ranks: Sequence[int]
                     ) -> dict[int, int]:
    """The values (int64) of the given 0-based ranks in the sorted values that each call
    of `passes` yields (in parts), exactly, holding at most about `KEEP_VALUES` of them
    at once: each pass histograms the values within each rank's current window and
    narrows it to the bin holding the rank, until the window's values fit; one last pass
    keeps those and sorts them."""
    lo = hi = None
    for values in passes():
        if values.size:
            a, b = int(values.min()), int(values.max())
            lo, hi = (a, b) if lo is None else (min(lo, a), max(hi, b))
    if lo is None:
        raise ValueError("no values")
    # Per rank: a [low, high) window of values, and how many values lie below `low`.
    wins = {r: [lo, hi + 1, 0] for r in set(ranks)}
    found: dict[int, int] = {}
    while len(found) < len(wins):
        todo = [r for r in wins if r not in found]
        for r in todo:
            if wins[r][1] - wins[r][0] == 1:  # one value left: many equal values
                found[r] = wins[r][0]
        todo = [r for r in todo if r not in found]
        edges = {}
        for r in todo:
            w0, w1 = wins[r][0], wins[r][1]
            # Integer edges from w0 to w1 (a float grid could round past either end).
            step = max(1, -(-(w1 - w0) // _BINS))
            edges[r] = np.arange(_BINS + 1, dtype=object) * step + w0
            edges[r] = np.array([min(int(e), w1) for e in edges[r]], np.int64)
            edges[r] = np.unique(edges[r])
        counts = {r: np.zeros(len(edges[r]) + 1, np.int64) for r in todo}
        inside = dict.fromkeys(todo, 0)
        for values in passes():
            for r in todo:
                v = values[(values >= wins[r][0]) & (values < wins[r][1])]
                inside[r] += v.size
                if v.size:
                    counts[r] += np.bincount(np.searchsorted(edges[r], v, side="right"),
                                             minlength=len(edges[r]) + 1)
        for r in todo:
            if inside[r] <= KEEP_VALUES:
                continue
            cum = np.cumsum(counts[r])
            b = int(np.searchsorted(cum, r - wins[r][2], side="right"))
            below = int(cum[b - 1]) if b else 0
            # Bin b holds values in [edges[b-1], edges[b]): narrower than the window.
            wins[r] = [int(edges[r][b - 1]), int(edges[r][b]), wins[r][2] + below]
        small = [r for r in todo if inside[r] <= KEEP_VALUES]
        if not small:
            continue
        kept: dict[int, list[np.ndarray]] = {r: [] for r in small}
        for values in passes():
            for r in small:
                kept[r].append(values[(values >= wins[r][0]) & (values < wins[r][1])])
        for r in small:
            v = np.sort(np.concatenate(kept[r])) if kept[r] else np.empty(0, np.int64)
            found[r] = int(v[r - wins[r][2]])
    return found


def percentiles(passes: Callable[[], Iterable[np.ndarray]], n: int,
                qs: Sequence[float]) -> list[float]:
    """`np.percentile(values, qs)` (linear) over values seen in parts, exactly."""
    ranks = _ranks(n, qs)
    stats = order_statistics(passes, [r for lo, hi, _ in ranks for r in (lo, hi)])
    return [stats[lo] + (stats[hi] - stats[lo]) * frac for lo, hi, frac in ranks]


# -- what a run's manifest and console line need --------------------------------------------

@dataclass(frozen=True)
class RunTally:
    """A run's records summed up (see `harness.run.runstatus`, which uses each part)."""

    records: int
    warm: int
    #: `OpsArrays.counts`: by status over measured ops, and measured, warmup, total.
    counts: dict[str, int]
    #: Measured ops that are ops (redirected attempts are not), and the console's line.
    measured: int
    rate_ops_s: float
    p50_ms: float
    p99_ms: float
    error_rate: float
    #: Open loop: p99 of start - intended over measured ops (None without such ops).
    send_lag_p99_ms: float | None
    #: The latest (begin + latency) of any record, ns from the common start (None: none).
    last_end_ns: int | None

    def quick(self) -> tuple[int, float, float, float, float]:
        """`runstatus.quick_stats`' tuple."""
        if not self.measured:
            return 0, 0.0, float("nan"), float("nan"), float("nan")
        return self.measured, self.rate_ops_s, self.p50_ms, self.p99_ms, self.error_rate


_TALLY_COLS = ("start_ns", "latency_ns", "intended_ns", "status", "warmup")


def _masks(c: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(measured ops, their begin, open-loop measured ops) of one part's columns."""
    m = ~c["warmup"] & (c["status"] != REDIRECT)
    begin = np.where(c["intended_ns"] >= 0, c["intended_ns"], c["start_ns"])
    return m, begin, m & (c["intended_ns"] >= 0)


#: A run's records: in memory, in parts, or already summed up.
Ops = OpsArrays | OpsParts | RunTally


def tally(ops: Ops) -> RunTally:
    """What the manifest and the console line need of a run's records, in passes over
    its parts; the percentiles are numpy's, exactly, also where the records do not fit in
    memory (`percentiles`)."""
    if isinstance(ops, RunTally):
        return ops
    parts = OpsParts.of(ops)
    if parts.in_memory():  # read the parts once: the passes below and `write_run` share it
        parts.joined()
    by_status = np.zeros(len(STATUSES), np.int64)
    records = warm = measured = errors = lagged = 0
    first = last = last_any = None
    for c in parts.columns(_TALLY_COLS):
        m, begin, open_m = _masks(c)
        records += int(c["warmup"].shape[0])
        warm += int(np.count_nonzero(c["warmup"]))
        st = c["status"]
        by_status += np.bincount(st[~c["warmup"]].astype(np.int64), minlength=len(STATUSES))
        ends = begin + c["latency_ns"]
        if ends.size:
            top = int(ends.max())
            last_any = top if last_any is None else max(last_any, top)
        if m.any():
            measured += int(m.sum())
            errors += int(np.count_nonzero(np.isin(st[m], (ERROR, TIMEOUT))))
            lo, hi = int(begin[m].min()), int(ends[m].max())
            first = lo if first is None else min(first, lo)
            last = hi if last is None else max(last, hi)
        lagged += int(np.count_nonzero(open_m))
    counts = {name: int(by_status[code]) for code, name in enumerate(STATUSES)}
    counts.update(measured=records - warm, warmup=warm, total=records)
    if not measured:
        return RunTally(records, warm, counts, 0, 0.0, float("nan"), float("nan"),
                        float("nan"), None, last_any)

    def latencies() -> Iterator[np.ndarray]:
        for c in parts.columns(_TALLY_COLS):
            yield c["latency_ns"][_masks(c)[0]]

    def lags() -> Iterator[np.ndarray]:
        for c in parts.columns(_TALLY_COLS):
            open_m = _masks(c)[2]
            yield c["start_ns"][open_m] - c["intended_ns"][open_m]

    if parts.in_memory():  # numpy's percentile as ever
        lat = np.concatenate(list(latencies()))
        p50, p99 = (float(v) for v in np.percentile(lat, [50, 99]))
        lag = (float(np.percentile(np.concatenate(list(lags())), 99)) if lagged else None)
        del lat
    else:
        p50, p99 = percentiles(latencies, measured, [50, 99])
        lag = percentiles(lags, lagged, [99])[0] if lagged else None
    assert first is not None and last is not None
    wall_ns = last - first
    return RunTally(records, warm, counts, measured,
                    measured / (wall_ns / 1e9) if wall_ns > 0 else float("nan"),
                    p50 / 1e6, p99 / 1e6, errors / measured,
                    lag / 1e6 if lag is not None else None, last_any)


def sorted_parts(parts: OpsParts) -> Iterator[OpsArrays]:
    """What ops.parquet gets, in order: the whole run sorted by start when it fits in
    memory, else each part sorted by start."""
    if parts.in_memory():
        yield parts.joined()
        return
    for part in parts.parts():
        yield part.take(np.argsort(part.start_ns, kind="stable"))
