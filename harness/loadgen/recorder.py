"""Per-op records in preallocated columns (see `Recorder`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from harness.results import OpsArrays, outcome
from harness.results.columns import RecordColumns

Views = tuple[memoryview, memoryview, memoryview, memoryview, memoryview]

#: Records per chunk when a run spills (`Recorder.chunk_records`): 32-40 MiB of columns.
CHUNK_RECORDS = 1 << 20


def _column(n: int) -> np.ndarray:
    """A zeroed int64 column. numpy takes it from calloc: pages are mapped as they are
    first written, so a new chunk costs no stall at the moment it is taken (a zeroed
    bytes object would be written through at once). Its memoryview has format 'l' on
    Linux and macOS: a multi-digit int (a clock reading) is stored with PyLong_AsLong."""
    return np.zeros(max(n, 1), np.int64)


@dataclass(eq=False)
class Chunk:
    """Records [base, base + n) of a run, sealed: nothing writes their columns again."""

    k: int
    base: int
    n: int
    start: np.ndarray
    end: np.ndarray
    outcome: np.ndarray
    intended: np.ndarray
    seq: np.ndarray | None
    #: Set once a sink wrote it (`Recorder.written`); freed when read too (`Recorder.read`).
    written: bool = False


class Recorder:
    """Per-op records in preallocated columns, kept whole or spilled in chunks.

    Recording is the per-op cost that a C load generator keeping counters does not pay, so
    each op does as little as it can: two clock reads and three item stores through
    memoryviews (a store through a view costs about half of one into the array): the
    start and end as raw clock readings, and the outcome packed into one integer (op,
    warm-up flag, status and bytes: `results.outcome`). Everything derived is computed
    per column later (`results.columns.RecordColumns.to_arrays`): start relative to
    `base_ns`, latency (end - start, or end - intended in open loop), and the time-based
    half of the warm-up flag (start, or intended, before `warmup_end_ns`); the packed flag
    is only the count-based half (seq < warmup_ops).

    Without `chunk_records` the columns grow (double) until the run ends. With it, full
    columns are sealed as a `Chunk` (records `base` .. `base + n` of the run) and handed
    to `sink`, which writes them out (`loadgen.spill`), and writing goes on at index 0 of
    fresh columns: memory stays flat however long the run. `n` is the index in the
    current columns, `count` the run's records so far.
    """

    # Slots: `n` is read and written per op, ~8 ns faster on a slot than in a dict.
    __slots__ = ("_lock", "base", "base_ns", "capacity", "chunk_records", "chunks", "end", "free",
                 "intended", "keep_seq", "n", "open_loop", "outcome", "read_upto",
                 "sealed", "seq", "sink", "start", "views", "warmup_end_ns")

    def __init__(self, capacity: int, chunk_records: int | None = None,
                 sink: Callable[[Chunk], None] | None = None) -> None:
        #: Records per chunk (fixed capacity), or None: grow, keep the whole run.
        self.chunk_records = chunk_records
        capacity = chunk_records if chunk_records else max(capacity, 16)
        #: Raw clock readings (perf_counter_ns): the send, the reply; open loop: intended.
        self.start = _column(capacity)
        self.end = _column(capacity)
        self.intended = _column(capacity)
        #: The packed outcome (see `harness.results.outcome`) with the op code and flag.
        self.outcome = _column(capacity)
        #: The op's seq: with the client's choices it names the key (`run.record_keys`).
        self.seq = _column(capacity)
        #: False after `drop_seq`: the seq column is not kept (the native core, no keys).
        self.keep_seq = True
        self.open_loop = False
        #: The run's start and warm-up end on the same clock (0: no time-based warm-up).
        self.base_ns = 0
        self.warmup_end_ns = 0
        self.capacity = capacity
        self.n = 0
        #: Records of the run before the current columns (in sealed chunks).
        self.base = 0
        self.chunks = 0
        #: Sealed chunks not yet freed: written by the sink and read by the live sampler.
        self.sealed: list[Chunk] = []
        #: Columns of freed chunks, taken again by `seal` (no new pages per chunk).
        self.free: list[tuple[np.ndarray, ...]] = []
        #: Where the live sampler has read up to (run index); None: no reader waits.
        self.read_upto: int | None = None
        self.sink = sink
        #: `sealed` and `free` change on the run's thread and on the sink's.
        self._lock = threading.Lock()
        self.views = self._views()

    @property
    def count(self) -> int:
        """Records of the run so far, sealed chunks included."""
        return self.base + self.n

    def _views(self) -> Views:
        """Writers' views, in this order: start, end, outcome, intended, seq."""
        return (memoryview(self.start), memoryview(self.end), memoryview(self.outcome),
                memoryview(self.intended), memoryview(self.seq))

    def _release_views(self) -> None:
        """A writer still holding an old view gets ValueError on its next store and
        takes the new ones (`room`)."""
        for view in self.views:
            view.release()

    def grow(self) -> None:
        """Double the capacity (the run is kept whole)."""
        self._release_views()
        cap = self.capacity
        for name in ("start", "end", "outcome", "intended", *(("seq",) if self.keep_seq else ())):
            col = _column(2 * cap)
            col[:cap] = getattr(self, name)
            setattr(self, name, col)
        self.capacity = 2 * cap
        self.views = self._views()

    def seal(self, n: int) -> Chunk:
        """Records [0, n) of the current columns become a chunk, handed to `sink`;
        writing goes on at index 0 of other columns (`n` is then 0, `base` moved on)."""
        self._release_views()
        chunk = Chunk(self.chunks, self.base, n, self.start, self.end, self.outcome,
                      self.intended, self.seq if self.keep_seq else None)
        with self._lock:
            self.chunks += 1
            self.base += n
            self.sealed.append(chunk)
            cols = self.free.pop() if self.free else None
        if cols is None:
            cols = tuple(_column(self.capacity) for _ in range(5 if self.keep_seq else 4))
        self.start, self.end, self.outcome, self.intended = cols[:4]
        if self.keep_seq:
            self.seq = cols[4]
        self.n = 0
        self.views = self._views()
        if self.sink is not None:
            self.sink(chunk)
        return chunk

    def room(self, i: int, k: int = 1) -> int:
        """Make room for records [i, i + k), which the caller has just reserved
        (`n` = i + k), and refresh `views`; returns the index to write them at: `i`, or
        0 when the full columns were sealed (`n` is then k)."""
        if i + k <= self.capacity:  # only the views were stale
            return i
        if not self.chunk_records or i == 0:  # kept whole, or a batch above a chunk
            while i + k > self.capacity:
                self.grow()
            return i
        self.seal(i)
        self.n = k
        return 0

    def written(self, chunk: Chunk) -> None:
        """The sink has written `chunk`: free it unless the live sampler is behind it."""
        chunk.written = True
        self._free()

    def read(self, upto: int | None) -> None:
        """The live sampler has read the records before run index `upto` (None: it has
        stopped; nobody waits to read chunks any more)."""
        self.read_upto = upto
        self._free()

    def _free(self) -> None:
        with self._lock:
            upto = self.read_upto
            while self.sealed and self.sealed[0].written and (
                    upto is None or upto >= self.sealed[0].base + self.sealed[0].n):
                chunk = self.sealed.pop(0)
                if len(self.free) < 2 and len(chunk.start) == self.capacity:
                    self.free.append((chunk.start, chunk.end, chunk.outcome, chunk.intended,
                                      *((chunk.seq,) if chunk.seq is not None else ())))

    def segments(self, first: int, last: int) -> list[tuple[Chunk | Recorder, int, int]]:
        """Where records [first, last) of the run are: (holder, lo, hi) with indices in
        the holder's columns (a sealed chunk not yet freed, or the current columns).
        Records already freed are left out; the caller asks only for records written
        (`ClientRun.published`)."""
        out: list[tuple[Chunk | Recorder, int, int]] = []
        with self._lock:
            sealed = list(self.sealed)
        # The current columns up to their capacity: the native core publishes records
        # (`ClientRun.published`) before `n` is synced from it.
        for holder, base, n in [*((c, c.base, c.n) for c in sealed),
                                (self, self.base, self.capacity)]:
            lo, hi = max(first, base), min(last, base + n)
            if lo < hi:
                out.append((holder, lo - base, hi - base))
        return out

    def record(self, start_ns: int, end_ns: int, tag: int, status: int, nbytes: int,
               intended_ns: int, seq: int) -> None:
        """One record, the plain way (the timed loops inline this)."""
        i = self.n
        self.n = i + 1
        if i >= self.capacity:
            i = self.room(i)
        start_v, end_v, outcome_v, intended_v, seq_v = self.views
        start_v[i] = start_ns
        end_v[i] = end_ns
        outcome_v[i] = outcome(status, nbytes) | tag
        intended_v[i] = intended_ns
        seq_v[i] = seq

    def drop_seq(self) -> None:
        """Keep no seqs: 8 bytes per op less for a run whose keys nobody asked for on the
        native core (which writes them only where given a column). The Python paths
        always write them, so only a native run may drop them, before it starts."""
        self._release_views()
        self.seq = np.empty(0, np.int64)
        self.keep_seq = False
        self.views = self._views()

    def seqs(self, chunk: Chunk | None = None) -> np.ndarray:
        """The seq of every record of `chunk` (default: the current columns), in record
        order (`to_arrays`' order)."""
        if not self.keep_seq:
            raise RuntimeError("this run's recorder kept no seqs (drop_seq)")
        src = chunk if chunk is not None else self
        assert src.seq is not None
        return src.seq[:src.n].copy()

    def columns(self, op_names: tuple[str, ...], client_id: int, offset_ns: int,
                chunk: Chunk | None = None) -> RecordColumns:
        """The raw columns of `chunk`, or of the current columns (the whole run when it
        does not spill): slices, not copies."""
        src = chunk if chunk is not None else self
        n = src.n
        return RecordColumns(op_names, client_id, src.start[:n], src.end[:n],
                             src.outcome[:n], src.intended[:n] if self.open_loop else None,
                             self.base_ns, self.warmup_end_ns, offset_ns)

    def to_arrays(self, op_names: tuple[str, ...], client_id: int, offset_ns: int,
                  chunk: Chunk | None = None) -> OpsArrays:
        """The records of `chunk`, or of the current columns, with everything derived
        (`RecordColumns.to_arrays`: no array aliases the columns, which a spilling
        recorder takes again for later records)."""
        return self.columns(op_names, client_id, offset_ns, chunk).to_arrays()
