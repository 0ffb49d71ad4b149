"""Live numbers of a running client process, once a second, at no cost per op.

A `Sampler` is a timer on the worker's event loop: each second it reads the records
written since its previous tick from the Recorder's columns (the records the timed loop
writes anyway: nothing is added per op) and writes a summary of them, an `Interval`, to a
small JSON file that the machine's agent hands to the control machine
(`harness.run.livestatus`). The native core writes records from its own thread; the sampler
reads only the records below the count the core publishes with release order
(`ClientRun.published`), so every record it reads is whole.

Latencies go into a log-bucketed histogram (`BUCKETS_PER_OCTAVE` buckets per doubling, so a
percentile read from it is within ~2% of the exact one): histograms of several processes
add up, percentiles of them do not.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.results import (
    ERROR,
    OUTCOME_BYTES_SHIFT,
    OUTCOME_OP_MASK,
    OUTCOME_STATUS_SHIFT,
    OUTCOME_WARMUP,
    TIMEOUT,
)

if TYPE_CHECKING:
    from harness.loadgen.run import ClientRun

INTERVAL_S = 1.0
BUCKETS_PER_OCTAVE = 16
#: Intervals kept in the file: a control machine that missed a poll still gets them.
KEEP = 8
#: Latencies histogrammed per interval at most: above it every k-th record goes in, its
#: count weighted by k, so a tick costs the same at any rate (~0.5 ms on 2015-era cores);
#: a percentile from 64 Ki records is within about a bucket of the exact one.
HIST_SAMPLE = 1 << 16


@dataclass(frozen=True)
class Interval:
    """The records one process completed in one interval of the run."""

    #: The interval's number: k covers (k-1, k] seconds after the process's start; a
    #: process's last interval (`final`) is shorter.
    k: int
    dt_ns: int
    ops: int
    #: Error and timeout records.
    errors: int
    #: Records flagged warm-up (count-based warm-up; time-based is decided at the end).
    warmup: int
    #: Sparse latency histogram: [bucket, count] pairs (see `bucket_ns`).
    hist: list[list[int]] = field(default_factory=list)
    final: bool = False
    #: [op code, status code, records, payload bytes] of every record, per op and status
    #: (op codes index the workload's ops, status codes `harness.results.STATUSES`).
    counts: list[list[int]] = field(default_factory=list)
    #: Sparse latency histogram per op: [op code, bucket, count] triples (the records
    #: histogrammed as for `hist`), and [op code, latency sum in ns] pairs.
    op_hist: list[list[int]] = field(default_factory=list)
    op_sum_ns: list[list[int]] = field(default_factory=list)

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Interval:
        return Interval(**{k: d[k] for k in Interval.__dataclass_fields__ if k in d})


def histogram(latency_ns: np.ndarray, weight: int = 1) -> list[list[int]]:
    """Sparse log-bucketed histogram of `latency_ns`, each counted `weight` times:
    [bucket, count] pairs."""
    if latency_ns.size == 0:
        return []
    buckets = (np.log2(np.maximum(latency_ns, 1)) * BUCKETS_PER_OCTAVE).astype(np.int64)
    counts = np.bincount(buckets) * weight
    nz = np.flatnonzero(counts)
    return [[int(b), int(counts[b])] for b in nz]


def bucket_ns(bucket: int) -> float:
    """A bucket's middle (geometric), in ns."""
    return float(2 ** ((bucket + 0.5) / BUCKETS_PER_OCTAVE))


def merge(hists: Iterable[list[list[int]]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for h in hists:
        for b, c in h:
            out[b] = out.get(b, 0) + c
    return out


def percentile_ns(hist: Mapping[int, int], q: float) -> float | None:
    """The q-th percentile (0-100, nearest rank) of a merged histogram; None if empty."""
    total = sum(hist.values())
    if not total:
        return None
    rank = max(1, int(np.ceil(q / 100 * total)))
    seen = 0
    for b in sorted(hist):
        seen += hist[b]
        if seen >= rank:
            return bucket_ns(b)
    return bucket_ns(max(hist))  # unreachable: the counts add up to `total`


@dataclass
class Breakdown:
    """Per-op tallies of one interval (`Interval.counts`, `op_hist`, `op_sum_ns`)."""

    counts: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    hist: dict[tuple[int, int], int] = field(default_factory=dict)
    sum_ns: dict[int, int] = field(default_factory=dict)

    def add(self, packed: np.ndarray, op_sampled: np.ndarray, latency_ns: np.ndarray,
            weight: int) -> None:
        """Every record's `packed` outcome; the sampled ones' ops and latencies."""
        # The low 16 bits are the op, the warm-up flag and the status: one key per record.
        key = packed & 0xFFFF & ~OUTCOME_WARMUP
        n = np.bincount(key)
        where = np.flatnonzero(n)
        nbytes = np.bincount(key, weights=packed >> OUTCOME_BYTES_SHIFT)[where]
        for k, c, b in zip(where.tolist(), n[where].tolist(), nbytes.tolist(), strict=True):
            row = self.counts.setdefault((k & OUTCOME_OP_MASK, k >> OUTCOME_STATUS_SHIFT),
                                         [0, 0])
            row[0] += c
            row[1] += int(b)
        if latency_ns.size == 0:
            return
        buckets = (np.log2(np.maximum(latency_ns, 1)) * BUCKETS_PER_OCTAVE).astype(np.int64)
        counts = np.bincount(op_sampled * HIST_SPAN + buckets)
        where = np.flatnonzero(counts)
        for k, c in zip(where.tolist(), counts[where].tolist(), strict=True):
            at = divmod(k, HIST_SPAN)
            self.hist[at] = self.hist.get(at, 0) + c * weight
        sums = np.bincount(op_sampled, weights=latency_ns)
        for op in np.flatnonzero(sums).tolist():
            self.sum_ns[op] = self.sum_ns.get(op, 0) + int(sums[op]) * weight

    def whole_hist(self) -> dict[int, int]:
        """The histogram of every op together."""
        out: dict[int, int] = {}
        for (_, b), c in self.hist.items():
            out[b] = out.get(b, 0) + c
        return out

    def fields(self) -> dict[str, list[list[int]]]:
        return {"counts": [[o, s, n, b] for (o, s), (n, b) in sorted(self.counts.items())],
                "op_hist": [[o, b, c] for (o, b), c in sorted(self.hist.items())],
                "op_sum_ns": [[o, t] for o, t in sorted(self.sum_ns.items())]}


#: Histogram buckets per op in `Breakdown`'s keys: above any bucket of an int64 latency.
HIST_SPAN = 64 * BUCKETS_PER_OCTAVE


def summarize(run: ClientRun, first: int, last: int, by_op: Breakdown | None = None
              ) -> tuple[int, int, int, list[list[int]]]:
    """(ops, errors, warm-up ops, histogram) of records [first, last) of the run (run
    indices: `Recorder.segments` finds them in sealed chunks and the current columns).
    Latency as `Recorder.to_arrays` has it: end - start, or end - intended in open loop.
    `by_op`, if given, gets the per-op tallies too."""
    rec = run.rec
    if last <= first:
        return 0, 0, 0, []
    step = -(-(last - first) // HIST_SAMPLE)
    ops = errors = warm = 0
    hists: list[list[list[int]]] = []
    for holder, lo, hi in rec.segments(first, last):
        # Slices for this call only, dropped before the columns can be taken again.
        end = holder.end[lo:hi:step]
        begin = (holder.intended if rec.open_loop else holder.start)[lo:hi:step]
        packed = holder.outcome[lo:hi]
        # Counted over every record, in bytes: the status byte, the op byte (warm-up flag).
        status = (packed >> OUTCOME_STATUS_SHIFT).astype(np.uint8)
        errors += int(np.count_nonzero(status == ERROR) + np.count_nonzero(status == TIMEOUT))
        warm += int(np.count_nonzero(packed.astype(np.uint8) & OUTCOME_WARMUP))
        ops += hi - lo
        latency = end - begin
        if by_op is None:
            hists.append(histogram(latency, step))
        else:  # its per-op histograms add up to the whole one: one log2 pass, not two
            by_op.add(packed, packed[::step] & OUTCOME_OP_MASK, latency, step)
        del end, begin, packed, latency
    merged = merge(hists) if by_op is None else by_op.whole_hist()
    return ops, errors, warm, [[b, merged[b]] for b in sorted(merged)]


def last_end_ns(run: ClientRun, first: int, last: int) -> int | None:
    """The latest reply of records [first, last) still held (None: none is)."""
    ends = [int(holder.end[lo:hi].max()) for holder, lo, hi in run.rec.segments(first, last)]
    return max(ends) if ends else None


class Sampler:
    """Writes the last intervals of `run` to `path` as JSON ({"intervals": [...]}), each
    second on the running loop, and a final, shorter one at `stop`."""

    def __init__(self, run: ClientRun, path: str, interval_s: float = INTERVAL_S) -> None:
        self.run = run
        self.path = path
        self.interval_s = interval_s
        #: The last intervals, as JSON text (each serialised once).
        self.intervals: list[str] = []
        self.k = 0
        self.prev_n = 0
        self.prev_ns = 0
        self.t0_loop = 0.0
        self.handle: asyncio.TimerHandle | None = None
        #: Thread CPU time the ticks took (benchmarks report it).
        self.cpu_ns = 0

    def start(self) -> None:
        """Call at the run's start, on its loop."""
        loop = asyncio.get_running_loop()
        self.t0_loop = loop.time()
        self.prev_ns = time.perf_counter_ns()
        self.prev_n = self.run.published()
        # Sealed chunks wait for this reader before their columns are freed.
        self.run.rec.read(self.prev_n)
        self.handle = loop.call_at(self.t0_loop + self.interval_s, self._tick)

    def _tick(self) -> None:
        self._guarded(final=False)
        loop = asyncio.get_running_loop()
        # On the run's second boundaries, not a second after this tick: no drift.
        self.handle = loop.call_at(self.t0_loop + (self.k + 1) * self.interval_s, self._tick)

    def stop(self) -> None:
        """The last interval (what the run did since the last tick), marked final."""
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        self._guarded(final=True)
        self.run.rec.read(None)  # no reader any more: written chunks may go

    def _guarded(self, final: bool) -> None:
        """`sample`, whose failure goes to the process's log: it must never cost the run
        its records."""
        try:
            self.sample(final)
        except Exception as exc:  # noqa: BLE001 - live numbers are a courtesy
            print(f"live numbers: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)

    def sample(self, final: bool) -> None:
        cpu0 = time.thread_time_ns()
        now, n = time.perf_counter_ns(), self.run.published()
        by_op = Breakdown()
        ops, errors, warm, hist = summarize(self.run, self.prev_n, n, by_op)
        if final and n > self.prev_n:
            # The last interval ends with its last reply, not with the teardown after it
            # (closing connections): its rate is the rate the ops ran at.
            last_end = last_end_ns(self.run, self.prev_n, n)
            if last_end is not None:
                now = max(self.prev_ns + 1, min(now, last_end))
        self.k += 1
        self.intervals.append(json.dumps(asdict(Interval(self.k, now - self.prev_ns, ops,
                                                         errors, warm, hist, final,
                                                         **by_op.fields())),
                                         allow_nan=False))  # counts only: no NaN
        del self.intervals[:-KEEP]
        self.prev_n, self.prev_ns = n, now
        self.run.rec.read(n)
        tmp = f"{self.path}.tmp"
        try:
            Path(tmp).write_text('{"intervals": [' + ", ".join(self.intervals) + "]}")
            os.replace(tmp, self.path)
        except OSError:
            pass  # a full disk must not stop the run: its records matter, this does not
        self.cpu_ns += time.thread_time_ns() - cpu0
