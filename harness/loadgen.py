"""The timed loop of one client process: connections x requests in flight.

Closed loop (the seeds' way): each in-flight slot issues its next op when the previous
one returns. Open loop (`rate_ops_s` set): each op has an intended start from a
`Schedule`; a free slot waits for it, and the op's latency is measured from the
intended start (`latency_ns` = end - intended, the time a user arriving on schedule
waits), while `start_ns` is the actual send, so service time = end - start_ns. When the
slots cannot keep up, ops start late and their latency says so: a server stall is never
hidden by the clients pausing with it (coordinated omission).

Start and latency come from one monotonic ns clock; records go into
preallocated `array.array` columns, written through memoryviews, turned into numpy at the
end (see `Recorder` for what one record costs). Every attempt is a record: a failed op or
a failed reconnect is an `error` record, a timed-out op `timeout`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.results import ERROR, TIMEOUT, OpsArrays
from harness.schedule import Schedule
from harness.services.base import Endpoint
from harness.workloads.base import WorkloadClient


@dataclass(frozen=True)
class ClientConfig:
    """What one client process does; serialised to JSON for `harness.worker`."""

    workload: str
    params: Mapping[str, Any]
    endpoints: Mapping[str, Mapping[str, Any]]
    client_id: int
    connections: int = 1
    inflight: int = 1
    ops: int | None = None
    duration_s: float | None = None
    warmup_ops: int = 0
    warmup_s: float = 0.0
    timeout_s: float | None = 10.0
    max_consecutive_errors: int = 200
    #: Open loop: this process's target rate; None = closed loop.
    rate_ops_s: float | None = None
    arrival: str = "fixed"
    #: Fraction of one interval this process's fixed schedule is shifted by.
    phase: float = 0.0
    seed: int = 0
    files: Mapping[str, str] = field(default_factory=dict)

    def endpoint_objects(self) -> dict[str, Endpoint]:
        return {k: Endpoint.from_dict(v) for k, v in self.endpoints.items()}


#: Type code of the int64 columns: C `long` where it has 8 bytes (Linux, macOS). Storing a
#: multi-digit int (a clock reading) into an 'l' item converts with PyLong_AsLong; into a
#: 'q' item it takes CPython's generic, several times slower, byte-array conversion.
_I64 = "l" if array("l").itemsize == 8 else "q"

Views = tuple[memoryview, memoryview, memoryview, memoryview, memoryview, memoryview,
              memoryview]


class Recorder:
    """Growable columns of per-op records; growth keeps the same array objects.

    Recording is the per-op cost that a C load generator keeping counters does not pay, so
    each op does as little as it can: two clock reads and five item stores (start and end
    as raw clock readings, op, status, bytes) through memoryviews (a store through a view
    costs about half of one into the array). Everything derived is computed per column in
    `to_arrays`: start relative to `base_ns`, latency (end - start, or end - intended in
    open loop), and the time-based half of the warm-up flag (start, or intended, before
    `warmup_end_ns`); `warmup` holds only the count-based half (seq < warmup_ops), stored
    for the few ops it concerns.
    """

    def __init__(self, capacity: int) -> None:
        capacity = max(capacity, 16)
        self.op = array("b", bytes(capacity))
        #: Raw clock readings (perf_counter_ns): the send, the reply; open loop: intended.
        self.start = array(_I64, bytes(8 * capacity))
        self.end = array(_I64, bytes(8 * capacity))
        self.intended = array(_I64, bytes(8 * capacity))
        self.status = array("b", bytes(capacity))
        self.nbytes = array(_I64, bytes(8 * capacity))
        self.warmup = array("b", bytes(capacity))
        self.open_loop = False
        #: The run's start and warm-up end on the same clock (0: no time-based warm-up).
        self.base_ns = 0
        self.warmup_end_ns = 0
        self.capacity = capacity
        self.n = 0
        self.views = self._views()

    def _views(self) -> Views:
        """Writers' views, in this order: start, end, op, status, nbytes, warmup, intended."""
        return (memoryview(self.start), memoryview(self.end), memoryview(self.op),
                memoryview(self.status), memoryview(self.nbytes), memoryview(self.warmup),
                memoryview(self.intended))

    def grow(self) -> None:
        """Double the capacity in place. An array with live views cannot be resized, so the
        views are released first: a writer still holding one gets ValueError on its next
        store and takes the new ones from `views_for`."""
        for view in self.views:
            view.release()
        extra = self.capacity
        for col, width in ((self.op, 1), (self.start, 8), (self.end, 8),
                           (self.status, 1), (self.nbytes, 8), (self.warmup, 1),
                           (self.intended, 8)):
            col.frombytes(bytes(width * extra))
        self.capacity += extra
        self.views = self._views()

    def views_for(self, i: int) -> Views:
        """The current views, grown until record `i` fits."""
        while i >= self.capacity:
            self.grow()
        return self.views

    def to_arrays(self, op_names: tuple[str, ...], client_id: int, offset_ns: int) -> OpsArrays:
        n = self.n

        def np_of(col: array, dtype: Any) -> np.ndarray:
            return np.frombuffer(col, dtype=dtype, count=n).copy() if n else np.empty(0, dtype)

        start, end = np_of(self.start, np.int64), np_of(self.end, np.int64)
        if self.open_loop:
            intended = np_of(self.intended, np.int64)
            latency, timed_warm = end - intended, intended < self.warmup_end_ns
            intended_ns = intended - self.base_ns + offset_ns
        else:
            latency, timed_warm = end - start, start < self.warmup_end_ns
            intended_ns = np.full(n, -1, np.int64)
        return OpsArrays(
            op_names=op_names,
            client=np.full(n, client_id, np.int32),
            op=np_of(self.op, np.int8),
            start_ns=start - self.base_ns + offset_ns,
            latency_ns=latency,
            intended_ns=intended_ns,
            status=np_of(self.status, np.int8),
            nbytes=np_of(self.nbytes, np.int64),
            warmup=(np_of(self.warmup, np.int8) != 0) | timed_warm,
        )


async def _sleep_until(when_ns: int, clock: Any) -> None:
    """Wait until `when_ns` on `clock`, closer than the loop's ~1 ms timer grain: sleep
    coarsely, then yield to the loop (other slots keep working) until it is time."""
    left = when_ns - clock()
    if left > 2_000_000:
        await asyncio.sleep((left - 1_500_000) / 1e9)
    while clock() < when_ns:
        await asyncio.sleep(0)


class _Conn:
    """One connection shared by its in-flight slots; reconnects after a failure."""

    __slots__ = ("conn", "generation", "lock")

    def __init__(self) -> None:
        self.conn: Any = None
        self.generation = 0
        self.lock = asyncio.Lock()


class _Deadline:
    """The timeout of one slot's calls, without a loop timer per call.

    `asyncio.timeout` schedules and cancels a timer on every op (~5 us, as much as the
    rest of the op's Python work). Here a call only stores its deadline; one timer per
    slot fires at the earliest deadline it was armed for, cancels the slot's task if the
    call in flight is past its own deadline and otherwise re-arms for that deadline. A
    call therefore times out at its deadline, as with `asyncio.timeout`.
    """

    __slots__ = ("deadline_ns", "expired", "handle", "loop", "task", "timeout_ns")

    def __init__(self, timeout_s: float) -> None:
        self.timeout_ns = int(timeout_s * 1e9)
        self.deadline_ns = 0  # 0: no call in flight
        self.expired = False
        self.handle: asyncio.TimerHandle | None = None
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()

    def start(self, now_ns: int) -> None:
        """A call starts at `now_ns` (perf_counter_ns)."""
        self.deadline_ns = now_ns + self.timeout_ns
        if self.handle is None:
            self.handle = self.loop.call_later(self.timeout_ns / 1e9, self._fire)

    def _fire(self) -> None:
        self.handle = None
        if not self.deadline_ns or self.task is None or self.task.done():
            return  # between calls (the next call re-arms) or finished
        left_ns = self.deadline_ns - time.perf_counter_ns()
        if left_ns > 0:
            self.handle = self.loop.call_later(left_ns / 1e9, self._fire)
        else:
            self.expired = True
            self.task.cancel()

    def take_expiry(self) -> bool:
        """After a CancelledError: True if only our expiry caused it (then it becomes a
        timeout, as with `asyncio.timeout`); False if the task was cancelled otherwise."""
        if not self.expired:
            return False
        self.expired = False
        return self.task is not None and self.task.uncancel() == 0

    def close(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


class ClientRun:
    """Runs one process's share of a run and keeps its records."""

    def __init__(self, cfg: ClientConfig, client: WorkloadClient) -> None:
        self.cfg = cfg
        self.client = client
        warm = cfg.warmup_ops
        self.total = warm + cfg.ops if cfg.ops is not None else None
        self.rec = Recorder(self.total if self.total is not None else 1 << 16)
        self.schedule = (Schedule(cfg.rate_ops_s, cfg.arrival, seed=cfg.seed, phase=cfg.phase)
                         if cfg.rate_ops_s else None)
        self.rec.open_loop = self.schedule is not None
        self.seq = 0
        #: Open loop: (seq, intended) of ops that are due, from `_pace`; None = stop.
        self.tickets: asyncio.Queue[tuple[int, int] | None] = asyncio.Queue()
        self.stopping = False
        self.consecutive_errors = 0
        self.last_error: str | None = None
        self.aborted = False
        self.conns = [_Conn() for _ in range(cfg.connections)]
        self.base_ns = 0
        self.end_ns: int | None = None
        self.warmup_end_ns = 0
        self.deadlines: list[_Deadline] = []
        if client.records_attempts:
            client.record_attempt = self.record_attempt

    def record_attempt(self, op: int, seq: int, start_ns: int, end_ns: int,
                       status: int) -> None:
        """One more record for op `seq`: an attempt that did not serve it (e.g. a
        redirected request), timed by the workload on this clock (perf_counter_ns). Only
        clients with `records_attempts` call it, so other workloads' loop is unchanged."""
        rec = self.rec
        i = rec.n
        rec.n = i + 1
        start_v, end_v, op_v, status_v, bytes_v, warm_v, intended_v = rec.views_for(i)
        op_v[i] = op
        # Intended = start: in open loop an attempt's latency is its own duration, and its
        # warm-up flag follows its start, as in closed loop.
        start_v[i] = intended_v[i] = start_ns
        end_v[i] = end_ns
        status_v[i] = status
        bytes_v[i] = 0
        if seq < self.cfg.warmup_ops:
            warm_v[i] = 1

    async def connect_all(self) -> None:
        """Open connections before the common start; failures are retried in the loop."""
        for c in self.conns:
            try:
                c.conn = await self.client.connect()
            except Exception as exc:  # noqa: BLE001 - any driver error means "not connected"
                self.last_error = f"connect: {type(exc).__name__}: {exc}"

    async def run(self) -> None:
        cfg = self.cfg
        self.base_ns = self.rec.base_ns = time.perf_counter_ns()
        if cfg.duration_s is not None:
            self.warmup_end_ns = self.base_ns + int(cfg.warmup_s * 1e9)
            self.end_ns = self.warmup_end_ns + int(cfg.duration_s * 1e9)
        self.rec.warmup_end_ns = self.warmup_end_ns
        slots = [self._slot(c) for c in self.conns for _ in range(cfg.inflight)]
        pacer = None
        if self.schedule is not None:
            self.tickets = asyncio.Queue()
            pacer = asyncio.ensure_future(self._pace(len(slots)))
        try:
            await asyncio.gather(*slots)
        finally:
            if pacer is not None:
                pacer.cancel()
            for d in self.deadlines:
                d.close()
        for c in self.conns:
            await self._drop(c, c.generation)

    async def _pace(self, n_slots: int) -> None:
        """Open loop: release each op to the slots at its intended start.

        One pacer per process does the precise waiting (see `_sleep_until`), so the slots
        never spin; an op released while every slot is busy waits in the queue, starts
        late, and its latency (from the intended start) shows the wait.
        """
        clock, sched, put = time.perf_counter_ns, self.schedule, self.tickets.put_nowait
        assert sched is not None
        seq = 0
        try:
            while not self.stopping and (self.total is None or seq < self.total):
                intended = self.base_ns + sched.at(seq)
                if self.end_ns is not None and intended >= self.end_ns:
                    break
                await _sleep_until(intended, clock)
                put((seq, intended))
                seq += 1
        finally:
            for _ in range(n_slots):
                put(None)

    async def _drop(self, holder: _Conn, seen: int) -> bool:
        """Close the connection if nobody replaced it since `seen`; True if we did."""
        async with holder.lock:
            if holder.generation != seen:
                return False  # another slot dropped or reconnected it already
            old, holder.conn = holder.conn, None
            holder.generation += 1
        if old is not None:
            with contextlib.suppress(Exception):  # closing a broken connection may fail
                await asyncio.wait_for(self.client.close(old), 1)
        return True

    async def _reconnect(self, holder: _Conn, seen: int) -> None:
        if await self._drop(holder, seen):
            holder.conn = await self.client.connect()

    async def _slot(self, holder: _Conn) -> None:
        clock = time.perf_counter_ns
        rec = self.rec
        start_v, end_v, op_v, status_v, bytes_v, warm_v, intended_v = rec.views
        execute, next_op = self.client.execute, self.client.next_op
        timeout = self.cfg.timeout_s
        watch = None if timeout is None else _Deadline(timeout)
        if watch is not None:
            self.deadlines.append(watch)
        total, end_ns, warm_ops = self.total, self.end_ns, self.cfg.warmup_ops
        sched = self.schedule
        intended = 0
        tickets = self.tickets
        while not self.stopping:
            if sched is not None:
                ticket = await tickets.get()  # released by the pacer when the op is due
                if ticket is None:
                    return
                seq, intended = ticket
            else:
                seq = self.seq
                if total is not None and seq >= total:
                    return
                self.seq = seq + 1
            op = next_op(seq)
            t0 = clock()
            if end_ns is not None and t0 >= end_ns:
                return
            gen = holder.generation
            try:
                call_ns = t0
                if holder.conn is None:
                    await self._reconnect(holder, gen)
                    gen = holder.generation
                    call_ns = clock()  # the timeout covers the call, not the reconnect
                if watch is None:
                    status, nbytes = await execute(holder.conn, op, seq)
                else:
                    watch.start(call_ns)
                    try:
                        status, nbytes = await execute(holder.conn, op, seq)
                    finally:
                        watch.deadline_ns = 0
                t1 = clock()
                self.consecutive_errors = 0
            except (Exception, asyncio.CancelledError) as exc:
                # Every failure is recorded, none raised; a cancel is ours only if it expired.
                t1 = clock()
                if isinstance(exc, asyncio.CancelledError):
                    if watch is None or not watch.take_expiry():
                        raise
                    exc = TimeoutError(f"no reply within {timeout} s")
                status = TIMEOUT if isinstance(exc, TimeoutError) else ERROR
                nbytes = 0
                await self._on_error(holder, gen, exc)
            # The record (see Recorder): raw readings, nothing derived here.
            i = rec.n
            rec.n = i + 1
            try:
                start_v[i] = t0
            except (IndexError, ValueError):  # full, or grown by another writer
                start_v, end_v, op_v, status_v, bytes_v, warm_v, intended_v = \
                    rec.views_for(i)
                start_v[i] = t0
            end_v[i] = t1
            op_v[i] = op
            status_v[i] = status
            bytes_v[i] = nbytes
            if seq < warm_ops:
                warm_v[i] = 1
            if sched is not None:
                intended_v[i] = intended

    async def _on_error(self, holder: _Conn, gen: int, exc: BaseException) -> None:
        self.last_error = f"{type(exc).__name__}: {exc}"
        self.consecutive_errors += 1
        if self.consecutive_errors >= self.cfg.max_consecutive_errors:
            self.stopping = True
            self.aborted = True
            return
        # Back off a little so a dead server does not turn into a busy loop of errors.
        await asyncio.sleep(min(0.001 * 2 ** min(self.consecutive_errors, 10), 0.5))
        # After an error or timeout the connection's state is unknown: start afresh.
        await self._drop(holder, gen)
