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

Workloads that offer `issuer` run from the driver's reply callbacks (see `ClientRun`):
the C tools' way of working, and what lets one Python process come near them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from array import array
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np

from harness.results import (
    ERROR,
    OUTCOME_BYTES_SHIFT,
    OUTCOME_OP_MASK,
    OUTCOME_STATUS_SHIFT,
    OUTCOME_WARMUP,
    TIMEOUT,
    OpsArrays,
    outcome,
)
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

Views = tuple[memoryview, memoryview, memoryview, memoryview]
#: An open-loop op released by the pacer: (seq, intended start); closed loop: (seq, 0).
Ticket = tuple[int, int]


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
    __slots__ = ("base_ns", "capacity", "end", "intended", "n", "open_loop", "outcome",
                 "start", "views", "warmup_end_ns")

    def __init__(self, capacity: int) -> None:
        capacity = max(capacity, 16)
        #: Raw clock readings (perf_counter_ns): the send, the reply; open loop: intended.
        self.start = array(_I64, bytes(8 * capacity))
        self.end = array(_I64, bytes(8 * capacity))
        self.intended = array(_I64, bytes(8 * capacity))
        #: The packed outcome (see `harness.results.outcome`) with the op code and flag.
        self.outcome = array(_I64, bytes(8 * capacity))
        self.open_loop = False
        #: The run's start and warm-up end on the same clock (0: no time-based warm-up).
        self.base_ns = 0
        self.warmup_end_ns = 0
        self.capacity = capacity
        self.n = 0
        self.views = self._views()

    def _views(self) -> Views:
        """Writers' views, in this order: start, end, outcome, intended."""
        return (memoryview(self.start), memoryview(self.end), memoryview(self.outcome),
                memoryview(self.intended))

    def grow(self) -> None:
        """Double the capacity in place. An array with live views cannot be resized, so the
        views are released first: a writer still holding one gets ValueError on its next
        store and takes the new ones from `views_for`."""
        for view in self.views:
            view.release()
        extra = bytes(8 * self.capacity)
        for col in (self.start, self.end, self.outcome, self.intended):
            col.frombytes(extra)
        self.capacity *= 2
        self.views = self._views()

    def views_for(self, i: int) -> Views:
        """The current views, grown until record `i` fits."""
        while i >= self.capacity:
            self.grow()
        return self.views

    def record(self, start_ns: int, end_ns: int, tag: int, status: int, nbytes: int,
               intended_ns: int) -> None:
        """One record, the plain way (the timed loops inline this)."""
        i = self.n
        self.n = i + 1
        start_v, end_v, outcome_v, intended_v = self.views_for(i)
        start_v[i] = start_ns
        end_v[i] = end_ns
        outcome_v[i] = outcome(status, nbytes) | tag
        intended_v[i] = intended_ns

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
        return OpsArrays(
            op_names=op_names,
            client=np.full(n, client_id, np.int32),
            op=(packed & OUTCOME_OP_MASK).astype(np.int8),
            start_ns=start - self.base_ns + offset_ns,
            latency_ns=latency,
            intended_ns=intended_ns,
            status=((packed >> OUTCOME_STATUS_SHIFT) & 0xFF).astype(np.int8),
            nbytes=packed >> OUTCOME_BYTES_SHIFT,
            warmup=((packed & OUTCOME_WARMUP) != 0) | timed_warm,
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
    slot fires at the earliest deadline it was armed for, calls `expire` if the call in
    flight is past its own deadline and otherwise re-arms for that deadline. A call
    therefore times out at its deadline, as with `asyncio.timeout`.
    """

    __slots__ = ("deadline_ns", "expire", "handle", "loop", "timeout_ns")

    def __init__(self, timeout_s: float, expire: Callable[[], None]) -> None:
        self.timeout_ns = int(timeout_s * 1e9)
        self.deadline_ns = 0  # 0: no call in flight
        self.expire = expire
        self.handle: asyncio.TimerHandle | None = None
        self.loop = asyncio.get_running_loop()

    def start(self, now_ns: int) -> None:
        """A call starts at `now_ns` (perf_counter_ns)."""
        self.deadline_ns = now_ns + self.timeout_ns
        if self.handle is None:
            self.handle = self.loop.call_later(self.timeout_ns / 1e9, self._fire)

    def _fire(self) -> None:
        self.handle = None
        if not self.deadline_ns:
            return  # between calls: the next call re-arms
        left_ns = self.deadline_ns - time.perf_counter_ns()
        if left_ns > 0:
            self.handle = self.loop.call_later(left_ns / 1e9, self._fire)
        else:
            self.deadline_ns = 0
            self.expire()

    def close(self) -> None:
        self.deadline_ns = 0
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


class _TaskDeadline:
    """Expiry for an awaited call: cancel the slot's task, and tell that cancel apart."""

    def __init__(self) -> None:
        self.task = asyncio.current_task()
        self.expired = False

    def expire(self) -> None:
        if self.task is not None and not self.task.done():
            self.expired = True
            self.task.cancel()

    def take_expiry(self) -> bool:
        """After a CancelledError: True if only our expiry caused it (then it becomes a
        timeout, as with `asyncio.timeout`); False if the task was cancelled otherwise."""
        if not self.expired:
            return False
        self.expired = False
        return self.task is not None and self.task.uncancel() == 0


#: A fast chain's outcome when the open loop has no op due: wait for the pacer.
_IDLE = object()


class ClientRun:
    """Runs one process's share of a run and keeps its records.

    Ops run one of three ways, fastest first; all three record alike (tested):

    - pipelined closed loop (`inflight` > 1) of a workload with `pipeline`: one batched
      pipe per connection (`_pipe`): inflight ops in one write, each read's replies
      recorded in one loop and replaced in one write;
    - a workload with `issuer` (the get/set mixes) otherwise: each in-flight slot is a
      chain of callbacks (`_fast_chain`): the reply handler records the op and sends
      the next from inside the driver's `data_received`: no future, task switch or
      coroutine frame per op;
    - any other workload: each slot awaits `execute` per op (`_call`).

    A fast path's task only waits for it to break (an error, a timeout, the end) and
    handles that: back-off, replacing the connection, reconnecting the awaited way.
    """

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
        #: Failed ops with no op served in between (see `_count_failure`).
        self.consecutive_errors = 0
        self.failures = 0
        self._served_at_failure = 0
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
        clients with `records_attempts` call it, so other workloads' loop is unchanged.
        Intended = start: in open loop an attempt's latency is its own duration, and its
        warm-up flag follows its start, as in closed loop."""
        tag = op | OUTCOME_WARMUP if seq < self.cfg.warmup_ops else op
        self.rec.record(start_ns, end_ns, tag, status, 0, start_ns)

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
        if self.schedule is None and cfg.inflight > 1 and self.client.pipeline() is not None:
            # Pipelined closed loop: one batched pipe per connection (see `_pipe`).
            slots = [self._slot(c, _pipe) for c in self.conns]
        else:
            slots = [self._slot(c, _fast_chain) for c in self.conns
                     for _ in range(cfg.inflight)]
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

    async def _take(self) -> tuple[int, int] | None:
        """The next op to issue, as (seq, intended; 0 in closed loop), or None: no more."""
        if self.stopping:
            return None
        if self.schedule is not None:
            return await self.tickets.get()  # released by the pacer when the op is due
        seq = self.seq
        if self.total is not None and seq >= self.total:
            return None
        self.seq = seq + 1
        return seq, 0

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

    def _deadline(self, expire: Callable[[], None]) -> _Deadline | None:
        if self.cfg.timeout_s is None:
            return None
        watch = _Deadline(self.cfg.timeout_s, expire)
        self.deadlines.append(watch)
        return watch

    async def _slot(self, holder: _Conn, fast_path: FastPath) -> None:
        task_deadline = _TaskDeadline()
        watch = self._deadline(task_deadline.expire)
        fast = fast_path(self, holder)
        while not self.stopping:
            # The steady state: ops in callbacks until the chain needs a connection.
            ticket = await fast() if fast is not None else await self._take()
            if ticket is None:
                return
            # One op awaited: the workload has no fast path, or (re)connecting first.
            if not await self._call(holder, watch, task_deadline, *ticket):
                return

    async def _call(self, holder: _Conn, watch: _Deadline | None, expiry: _TaskDeadline,
                    seq: int, intended: int) -> bool:
        """One op, awaited: reconnect if needed, execute, record (every failure too).
        False if the run's time was up before it started."""
        clock = time.perf_counter_ns
        op = self.client.next_op(seq)
        t0 = clock()
        if self.end_ns is not None and t0 >= self.end_ns:
            return False  # the run's time is up
        gen = holder.generation
        try:
            call_ns = t0
            if holder.conn is None:
                await self._reconnect(holder, gen)
                gen = holder.generation
                call_ns = clock()  # the timeout covers the call, not the reconnect
            if watch is None:
                status, nbytes = await self.client.execute(holder.conn, op, seq)
            else:
                watch.start(call_ns)
                try:
                    status, nbytes = await self.client.execute(holder.conn, op, seq)
                finally:
                    watch.deadline_ns = 0
            t1 = clock()
        except (Exception, asyncio.CancelledError) as exc:
            # Every failure is recorded, none raised; a cancel is ours only if it expired.
            t1 = clock()
            if isinstance(exc, asyncio.CancelledError):
                if not expiry.take_expiry():
                    raise
                exc = TimeoutError(f"no reply within {self.cfg.timeout_s} s")
            tag = op | OUTCOME_WARMUP if seq < self.cfg.warmup_ops else op
            self.rec.record(t0, t1, tag, TIMEOUT if isinstance(exc, TimeoutError) else ERROR,
                            0, intended)
            self._count_failure()
            await self._on_error(holder, gen, exc)
            return True
        tag = op | OUTCOME_WARMUP if seq < self.cfg.warmup_ops else op
        self.rec.record(t0, t1, tag, status, nbytes, intended)
        return True

    def _count_failure(self) -> None:
        """Count a failed op just recorded. Ops served = records - failures, so a success
        needs no bookkeeping of its own: the count restarts when ops were served since
        the previous failure."""
        self.failures += 1
        served = self.rec.n - self.failures
        if served != self._served_at_failure:
            self._served_at_failure = served
            self.consecutive_errors = 0
        self.consecutive_errors += 1

    async def _on_error(self, holder: _Conn, gen: int, exc: BaseException) -> None:
        self.last_error = f"{type(exc).__name__}: {exc}"
        if self.consecutive_errors >= self.cfg.max_consecutive_errors:
            self.stopping = True
            self.aborted = True
            return
        # Back off a little so a dead server does not turn into a busy loop of errors.
        await asyncio.sleep(min(0.001 * 2 ** min(self.consecutive_errors, 10), 0.5))
        # After an error or timeout the connection's state is unknown: start afresh.
        await self._drop(holder, gen)


#: A fast path's factory: (run, connection) -> its coroutine function, or None (no fast
#: path for this workload). The coroutine runs ops until the connection needs replacing
#: and returns the next op to do the awaited way, or None when there are no more ops.
FastPath = Callable[["ClientRun", "_Conn"], "Callable[[], Awaitable[Ticket | None]] | None"]

#: "No limit" for the fast chain's op-count and end-time checks: one comparison each.
_NEVER = 1 << 62


def _fast_chain(run: ClientRun, holder: _Conn) -> Callable[[], Awaitable[Ticket | None]] | None:
    """The callback path of one in-flight slot (see `ClientRun`), or None if the workload
    has no `issuer`. The returned coroutine function runs ops until the connection is
    gone; it returns the next op (seq, intended) to do the awaited way (reconnecting
    first), or None when there are no more ops. Failures are recorded and handled
    (back-off, dropping the connection) inside."""
    loop = asyncio.get_running_loop()
    clock = time.perf_counter_ns
    rec = run.rec
    start_v, end_v, outcome_v, intended_v = rec.views
    next_op = run.client.next_op
    last = run.total if run.total is not None else _NEVER
    stop_ns = run.end_ns if run.end_ns is not None else _NEVER
    warm_ops = run.cfg.warmup_ops
    open_loop = run.schedule is not None
    get_ticket = run.tickets.get_nowait
    timeout_s = run.cfg.timeout_s
    timeout_ns = int(timeout_s * 1e9) if timeout_s is not None else 0
    conn: Any = None
    waiter: asyncio.Future = loop.create_future()
    held: Ticket | None = None  # an open-loop op taken while the chain was idle
    t0 = tag = intended = 0
    pending = False  # an op is in flight; its reply (or failure) is still to be recorded
    timer: asyncio.TimerHandle | None = None

    def finish(result: object) -> None:
        nonlocal pending, timer
        pending = False
        if timer is not None:
            timer.cancel()
            timer = None
        if not waiter.done():
            waiter.set_result(result)

    def watch() -> None:
        """The chain's timeout: one timer per slot, re-armed for the deadline of the op
        in flight (its start + the timeout), instead of a timer or a store per op."""
        nonlocal timer
        timer = None
        if not pending:
            return
        left_ns = t0 + timeout_ns - clock()
        if left_ns > 0:
            timer = loop.call_later(left_ns / 1e9, watch)
        else:
            fail(TimeoutError(f"no reply within {timeout_s} s"))

    def done(code: int) -> None:
        """The reply of the op in flight: `code` is `results.outcome(status, nbytes)`.
        Records it and issues the next op (`go`, inlined: one call less per op)."""
        nonlocal start_v, end_v, outcome_v, t0, tag
        t1 = clock()
        if not pending:
            return  # the reply of an op that timed out: already recorded
        # The record (see Recorder): raw readings, nothing derived here.
        i = rec.n
        rec.n = i + 1
        try:
            start_v[i] = t0
        except (IndexError, ValueError):  # full, or grown by another writer
            start_v, end_v, outcome_v, _ = rec.views_for(i)
            start_v[i] = t0
        end_v[i] = t1
        outcome_v[i] = code | tag
        seq = run.seq
        if seq >= last or run.stopping or t1 >= stop_ns:
            finish(None)
            return
        run.seq = seq + 1
        t0 = clock()
        try:
            op = issue(conn, seq)
        except Exception as exc:  # noqa: BLE001 - e.g. the connection is closed: recorded
            issue_failed(seq, exc)
            return
        tag = op | OUTCOME_WARMUP if seq < warm_ops else op

    def done_open(code: int) -> None:
        """`done` in open loop: the intended start is recorded as well."""
        nonlocal start_v, end_v, outcome_v, intended_v
        t1 = clock()
        if not pending:
            return
        i = rec.n
        rec.n = i + 1
        try:
            start_v[i] = t0
        except (IndexError, ValueError):
            start_v, end_v, outcome_v, intended_v = rec.views_for(i)
            start_v[i] = t0
        end_v[i] = t1
        outcome_v[i] = code | tag
        intended_v[i] = intended
        go_open()

    def fail(exc: BaseException) -> None:
        """The op in flight failed (`exc` is kept as the run's last error)."""
        t1 = clock()
        if not pending:
            return
        rec.record(t0, t1, tag, TIMEOUT if isinstance(exc, TimeoutError) else ERROR, 0,
                   intended)
        run._count_failure()
        finish(exc)

    def issue_failed(seq: int, exc: BaseException) -> None:
        nonlocal tag
        op = next_op(seq)
        tag = op | OUTCOME_WARMUP if seq < warm_ops else op
        fail(exc)

    def send(seq: int) -> None:
        """Send op `seq` now, or end the chain if the run's time is up. (`done` inlines
        this for the closed loop's per-op path.)"""
        nonlocal t0, tag, pending
        t = clock()
        if t >= stop_ns:
            finish(None)
            return
        t0 = t
        pending = True
        try:
            op = issue(conn, seq)
        except Exception as exc:  # noqa: BLE001 - e.g. the connection is closed: recorded
            issue_failed(seq, exc)
            return
        tag = op | OUTCOME_WARMUP if seq < warm_ops else op

    def go() -> None:
        """Closed loop: issue the next op, or end the chain."""
        seq = run.seq
        if seq >= last or run.stopping:
            finish(None)
            return
        run.seq = seq + 1
        send(seq)

    def go_open() -> None:
        """Open loop: issue the next op that is due, or end the chain (or idle it)."""
        nonlocal held, intended
        if held is not None:
            ticket, held = held, None
        else:
            try:
                ticket = get_ticket()
            except asyncio.QueueEmpty:
                finish(_IDLE)
                return
        if ticket is None or run.stopping:
            finish(None)
            return
        seq, intended = ticket
        send(seq)

    issue = run.client.issuer(done_open if open_loop else done, fail)
    if issue is None:
        return None
    start = go_open if open_loop else go

    async def chain() -> Ticket | None:
        nonlocal conn, waiter, held, timer
        try:
            while not run.stopping:
                if holder.conn is None:
                    ticket, held = held, None
                    return ticket if ticket is not None else await run._take()
                conn, gen = holder.conn, holder.generation
                waiter = loop.create_future()
                if timeout_ns:
                    timer = loop.call_later(timeout_s, watch)  # type: ignore[arg-type]
                start()
                result = await waiter
                if result is None:
                    return None
                if result is _IDLE:
                    held = await run.tickets.get()  # released by the pacer when due
                    if held is None:
                        return None
                    continue
                await run._on_error(holder, gen, result)  # type: ignore[arg-type]
            return None
        finally:
            finish(None)  # cancelled meanwhile: a late reply must not issue more

    return chain


def _pipe(run: ClientRun, holder: _Conn) -> Callable[[], Awaitable[Ticket | None]] | None:
    """Pipelined closed loop on one connection, in batches (or None if the workload has
    no `pipeline`): `inflight` ops are sent in one write; each batch of replies that one
    read brings is recorded in a loop and as many new ops go out in one write, the way
    redis-benchmark -P and memtier pipeline. No call per op, where the callback chain
    makes five. The ops of a batch share their send time, and the replies of a read
    their arrival time. A failure (an error reply, a timeout, a lost connection) fails
    every op in flight on the connection, which is then replaced, as in the other paths.
    Same contract as `_fast_chain`."""
    pipeline = run.client.pipeline()
    if pipeline is None:
        return None
    send, outcomes, next_op = pipeline.send, pipeline.outcomes, run.client.next_op
    loop = asyncio.get_running_loop()
    clock = time.perf_counter_ns
    rec = run.rec
    start_v, end_v, outcome_v, _ = rec.views
    depth = run.cfg.inflight
    last = run.total if run.total is not None else _NEVER
    stop_ns = run.end_ns if run.end_ns is not None else _NEVER
    warm_ops = run.cfg.warmup_ops
    timeout_s = run.cfg.timeout_s
    timeout_ns = int(timeout_s * 1e9) if timeout_s is not None else 0
    t0s: deque[int] = deque()  # send time of each op in flight, in order
    seqs: deque[int] = deque()  # and its seq
    pop_seq, pop_t0 = seqs.popleft, t0s.popleft
    conn: Any = None
    waiter: asyncio.Future = loop.create_future()
    timer: asyncio.TimerHandle | None = None
    active = False

    def finish(result: object) -> None:
        nonlocal active, timer
        active = False
        if conn is not None:
            conn.consume(None)
        if timer is not None:
            timer.cancel()
            timer = None
        if not waiter.done():
            waiter.set_result(result)

    def fail(exc: BaseException, first: int) -> None:
        """Every op in flight failed: the oldest with status `first`, the rest ERROR."""
        t1 = clock()
        status = first
        while seqs:
            seq = pop_seq()
            op = next_op(seq)
            rec.record(pop_t0(), t1, op | OUTCOME_WARMUP if seq < warm_ops else op, status, 0,
                       0)
            run._count_failure()
            status = ERROR
        finish(exc)

    def refill(k: int) -> None:
        """Send up to `k` more ops; end when there are none and none is in flight."""
        seq = run.seq
        n = min(k, last - seq)
        if n > 0 and not run.stopping:
            t0 = clock()
            if t0 < stop_ns:
                run.seq = seq + n
                new = range(seq, seq + n)
                seqs.extend(new)
                t0s.extend(repeat(t0, n))
                try:
                    send(conn, new)
                except Exception as exc:  # noqa: BLE001 - e.g. the connection is closed
                    fail(exc, ERROR)
                return
        if not seqs:
            finish(None)

    def on_replies(replies: list[Any]) -> None:
        nonlocal start_v, end_v, outcome_v
        t1 = clock()
        if not active:
            return
        k = len(replies)
        batch = [pop_seq() for _ in range(k)]
        codes = outcomes(replies, batch)
        i = rec.n
        rec.n = i + k
        try:
            start_v[i + k - 1] = 0  # room for the whole batch?
        except (IndexError, ValueError):  # full, or grown by another writer
            start_v, end_v, outcome_v, _ = rec.views_for(i + k - 1)
        failure: BaseException | None = None
        for code, seq in zip(codes, batch, strict=True):
            start_v[i] = pop_t0()
            end_v[i] = t1
            if code.__class__ is not int:  # this op failed
                failure = failure or code  # type: ignore[assignment]
                code = outcome(ERROR, 0) | next_op(seq)
                run._count_failure()
            outcome_v[i] = code | OUTCOME_WARMUP if seq < warm_ops else code  # type: ignore[operator]
            i += 1
        if failure is not None:
            fail(failure, ERROR)
            return
        refill(k)

    def on_lost(exc: Exception) -> None:
        if active:
            fail(exc, ERROR)

    def watch() -> None:
        """The timeout of the oldest op in flight; one timer per connection."""
        nonlocal timer
        timer = None
        if not active:
            return
        left_ns = (t0s[0] + timeout_ns - clock()) if t0s else timeout_ns
        if left_ns > 0:
            timer = loop.call_later(left_ns / 1e9, watch)
        else:
            fail(TimeoutError(f"no reply within {timeout_s} s"), TIMEOUT)

    async def pipe() -> Ticket | None:
        nonlocal conn, waiter, timer, active
        try:
            while not run.stopping:
                if holder.conn is None:
                    return await run._take()
                conn, gen = holder.conn, holder.generation
                waiter = loop.create_future()
                active = True
                conn.consume(on_replies, on_lost)
                if timeout_ns:
                    timer = loop.call_later(timeout_s, watch)  # type: ignore[arg-type]
                refill(depth)
                result = await waiter
                if result is None:
                    return None
                await run._on_error(holder, gen, result)  # type: ignore[arg-type]
            return None
        finally:
            finish(None)  # cancelled meanwhile: late replies must not send more

    return pipe
