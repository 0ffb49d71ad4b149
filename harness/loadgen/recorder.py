"""Per-op records in preallocated columns (see `Recorder`)."""

from __future__ import annotations

from array import array

import numpy as np

from harness.results import OpsArrays, outcome, unpack_outcomes

#: Type code of the int64 columns: C `long` where it has 8 bytes (Linux, macOS). Storing a
#: multi-digit int (a clock reading) into an 'l' item converts with PyLong_AsLong; into a
#: 'q' item it takes CPython's generic, several times slower, byte-array conversion.
_I64 = "l" if array("l").itemsize == 8 else "q"

Views = tuple[memoryview, memoryview, memoryview, memoryview, memoryview]

class Recorder:
    """Growable columns of per-op records; growth keeps the same array objects.

    Recording is the per-op cost that a C load generator keeping counters does not pay, so
    each op does as little as it can: two clock reads and three item stores through
    memoryviews (a store through a view costs about half of one into the array): the
    start and end as raw clock readings, and the outcome packed into one integer (op,
    warm-up flag, status and bytes: `results.outcome`). Everything derived is computed
    per column in `to_arrays`: start relative to `base_ns`, latency (end - start, or end -
    intended in open loop), and the time-based half of the warm-up flag (start, or
    intended, before `warmup_end_ns`); the packed flag is only the count-based half
    (seq < warmup_ops).
    """

    # Slots: `n` is read and written per op, ~8 ns faster on a slot than in a dict.
    __slots__ = ("base_ns", "capacity", "end", "intended", "keep_seq", "n", "open_loop",
                 "outcome", "seq", "start", "views", "warmup_end_ns")

    def __init__(self, capacity: int) -> None:
        capacity = max(capacity, 16)
        #: Raw clock readings (perf_counter_ns): the send, the reply; open loop: intended.
        self.start = array(_I64, bytes(8 * capacity))
        self.end = array(_I64, bytes(8 * capacity))
        self.intended = array(_I64, bytes(8 * capacity))
        #: The packed outcome (see `harness.results.outcome`) with the op code and flag.
        self.outcome = array(_I64, bytes(8 * capacity))
        #: The op's seq: with the client's choices it names the key (`run.record_keys`).
        self.seq = array(_I64, bytes(8 * capacity))
        #: False after `drop_seq`: the seq column is not kept (the native core, no keys).
        self.keep_seq = True
        self.open_loop = False
        #: The run's start and warm-up end on the same clock (0: no time-based warm-up).
        self.base_ns = 0
        self.warmup_end_ns = 0
        self.capacity = capacity
        self.n = 0
        self.views = self._views()

    def _views(self) -> Views:
        """Writers' views, in this order: start, end, outcome, intended, seq."""
        return (memoryview(self.start), memoryview(self.end), memoryview(self.outcome),
                memoryview(self.intended), memoryview(self.seq))

    def grow(self) -> None:
        """Double the capacity in place. An array with live views cannot be resized, so the
        views are released first: a writer still holding one gets ValueError on its next
        store and takes the new ones from `views_for`."""
        for view in self.views:
            view.release()
        extra = bytes(8 * self.capacity)
        for col in (self.start, self.end, self.outcome, self.intended,
                    *((self.seq,) if self.keep_seq else ())):
            col.frombytes(extra)
        self.capacity *= 2
        self.views = self._views()

    def views_for(self, i: int) -> Views:
        """The current views, grown until record `i` fits."""
        while i >= self.capacity:
            self.grow()
        return self.views

    def record(self, start_ns: int, end_ns: int, tag: int, status: int, nbytes: int,
               intended_ns: int, seq: int) -> None:
        """One record, the plain way (the timed loops inline this)."""
        i = self.n
        self.n = i + 1
        start_v, end_v, outcome_v, intended_v, seq_v = self.views_for(i)
        start_v[i] = start_ns
        end_v[i] = end_ns
        outcome_v[i] = outcome(status, nbytes) | tag
        intended_v[i] = intended_ns
        seq_v[i] = seq

    def drop_seq(self) -> None:
        """Keep no seqs: 8 bytes per op less for a run whose keys nobody asked for on the
        native core (which writes them only where given a column). The Python paths
        always write them, so only a native run may drop them, before it starts."""
        for view in self.views:
            view.release()
        self.seq = array(_I64)
        self.keep_seq = False
        self.views = self._views()

    def seqs(self) -> np.ndarray:
        """The seq of every record, in record order (`to_arrays`' order)."""
        if not self.keep_seq:
            raise RuntimeError("this run's recorder kept no seqs (drop_seq)")
        n = self.n
        return np.frombuffer(self.seq, np.int64, count=n).copy() if n else np.empty(0, np.int64)

    def to_arrays(self, op_names: tuple[str, ...], client_id: int, offset_ns: int) -> OpsArrays:
        n = self.n

        def np_of(col: array) -> np.ndarray:
            return np.frombuffer(col, np.int64, count=n).copy() if n else np.empty(0, np.int64)

        start, end, packed = np_of(self.start), np_of(self.end), np_of(self.outcome)
        if self.open_loop:
            intended = np_of(self.intended)
            latency, timed_warm = end - intended, intended < self.warmup_end_ns
            intended_ns = intended - self.base_ns + offset_ns
        else:
            latency, timed_warm = end - start, start < self.warmup_end_ns
            intended_ns = np.full(n, -1, np.int64)
        op, status, nbytes, counted_warm = unpack_outcomes(packed)
        return OpsArrays(
            op_names=op_names,
            client=np.full(n, client_id, np.int32),
            op=op,
            start_ns=start - self.base_ns + offset_ns,
            latency_ns=latency,
            intended_ns=intended_ns,
            status=status,
            nbytes=nbytes,
            warmup=counted_warm | timed_warm,
        )

