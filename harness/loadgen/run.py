"""The timed loop of one client process: connections x requests in flight.

Closed loop (the seeds' way): each in-flight slot issues its next op when the previous
one returns. Open loop (`rate_ops_s` set): each op has an intended start from a
`Schedule`; a free slot waits for it, and the op's latency is measured from the
intended start (`latency_ns` = end - intended, the time a user arriving on schedule
waits), while `start_ns` is the actual send, so service time = end - start_ns. When the
slots cannot keep up, ops start late and their latency says so: a server stall is never
hidden by the clients pausing with it (coordinated omission). Overloaded, every op
intended before the end is a record or counted (`ClientRun.unsent_counts`): the ops
still waiting at the end are never sent, and the warm-up's still waiting when the first
measured op is due are dropped, so the measured window is spent on measured ops.

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
import dataclasses
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from harness.errors import WorkloadError
from harness.loadgen import native
from harness.loadgen.config import ClientConfig, Ticket
from harness.loadgen.fastpaths import FastPath, _fast_chain, _pipe
from harness.loadgen.recorder import Chunk, Recorder
from harness.loadgen.schedule import Schedule
from harness.loadgen.shared import Conn
from harness.results import ERROR, OUTCOME_WARMUP, TIMEOUT, OpsArrays
from harness.results.columns import RecordColumns
from harness.workloads.base import WorkloadClient

#: "No such time" (no end, not stopped): later than any clock reading.
_NEVER = 1 << 62
#: Open loop: how long after the window's end an op intended before it may still be
#: sent. Below capacity an op due just before the end is then sent however the machine
#: hiccups, not counted unsent; overloaded, the backlog left after it is counted.
SEND_GRACE_NS = 100_000_000


async def _sleep_until(when_ns: int, clock: Any) -> None:
    """Wait until `when_ns` on `clock`, closer than the loop's ~1 ms timer grain: sleep
    coarsely, then yield to the loop (other slots keep working) until it is time."""
    left = when_ns - clock()
    if left > 2_000_000:
        await asyncio.sleep((left - 1_500_000) / 1e9)
    while clock() < when_ns:
        await asyncio.sleep(0)



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


class _Tickets:
    """Open loop: the ops the pacer released (they are due) that no slot took yet.

    They are always consecutive seqs, `head` to `released` - 1, so two counters stand
    for them rather than a queue of tuples: a backlog of millions (clients far below the
    rate) costs no memory, and a pacer that is behind releases all that is due at once.
    The op released last, the one an idle slot takes below capacity, is kept as its
    (seq, intended); an older one's intended start is read from the schedule again.
    """

    __slots__ = ("at", "base_ns", "closed", "dropped", "head", "last", "released",
                 "waiters")

    def __init__(self, schedule: Schedule | None, base_ns: int = 0) -> None:
        self.at = schedule.at if schedule is not None else None
        self.base_ns = base_ns
        self.head = self.released = 0
        self.last: Ticket = (-1, 0)
        self.closed = False
        #: Warm-up ops dropped at the warm-up's end (`drop_until`).
        self.dropped = 0
        self.waiters: deque[asyncio.Future] = deque()

    def get_nowait(self) -> Ticket | None:
        """The oldest op due as (seq, intended), or None once the pacer is done and no op
        is left; raises asyncio.QueueEmpty when none is due yet (as asyncio.Queue)."""
        seq = self.head
        if seq < self.released:
            self.head = seq + 1
            last = self.last
            return last if last[0] == seq else (seq, self.base_ns + self.at(seq))  # type: ignore[misc]
        if self.closed:
            return None
        raise asyncio.QueueEmpty

    async def get(self) -> Ticket | None:
        """`get_nowait`, waiting for the pacer when no op is due."""
        while True:
            try:
                return self.get_nowait()
            except asyncio.QueueEmpty:
                pass
            waiter = asyncio.get_running_loop().create_future()
            self.waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake(1)  # woken, then cancelled: another slot takes the op
                with contextlib.suppress(ValueError):
                    self.waiters.remove(waiter)
                raise

    def _wake(self, n: int) -> None:
        waiters = self.waiters
        while n > 0 and waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                n -= 1

    def release(self, seq: int, intended: int) -> None:
        """Op `seq`, the next, is due now (the pacer on schedule)."""
        self.last = (seq, intended)
        self.released = seq + 1
        if self.waiters:
            self._wake(1)

    def release_upto(self, end: int) -> None:
        """Every op before `end` is due (the pacer was behind)."""
        self.released = end
        self._wake(end - self.head)

    def drop_until(self, seq: int) -> None:
        """The warm-up is over: its ops still waiting (those before `seq`) are dropped."""
        if self.head < seq:
            self.dropped += seq - self.head
            self.head = seq

    def close(self) -> None:
        """No more ops will be released: slots take what is left, then None."""
        self.closed = True
        self._wake(len(self.waiters))


class ClientRun:
    """Runs one process's share of a run and keeps its records.

    Ops run one of four ways, fastest first; all record alike (tested):

    - a workload with `native_ops` (the get/set mixes), when the native core is built and
      not switched off (KVBENCH_ENGINE=python): the core runs every connection in C
      (`harness.loadgen.native`), this class keeps the slow path;
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

    def __init__(self, cfg: ClientConfig, client: WorkloadClient,
                 chunk_records: int | None = None) -> None:
        """`chunk_records`: seal the records in chunks of that many (`Recorder`), for a
        sink that spills them (`harness.run.worker`); None keeps the whole run in memory."""
        self.cfg = cfg
        self.client = client
        if cfg.record_keys:
            client.log_keys()
        warm = cfg.warmup_ops
        self.total = warm + cfg.ops if cfg.ops is not None else None
        self.rec = Recorder(self.total if self.total is not None else 1 << 16, chunk_records)
        self.schedule = (Schedule(cfg.rate_ops_s, cfg.arrival, seed=cfg.seed, phase=cfg.phase)
                         if cfg.rate_ops_s else None)
        self.rec.open_loop = self.schedule is not None
        self.seq = 0
        #: Open loop: the ops that are due, released by `_pace`.
        self.tickets = _Tickets(self.schedule)
        #: Open loop: the first measured seq: warm-up is decided by the intended start
        #: (before `warmup_s`) or by the count (`warmup_ops`), and starts only grow.
        self.first_measured = 0
        if self.schedule is not None:
            warm_ns = int(cfg.warmup_s * 1e9) if cfg.duration_s is not None else 0
            self.first_measured = max(warm, self.schedule.count_before(warm_ns))
        #: Open loop: seqs taken to send and then not sent (the run's time was up), and
        #: when the run began to stop early (`unsent_counts`).
        self.abandoned: list[int] = []
        self.stopped_ns = 0
        self.stopping = False
        #: Failed ops with no op served in between (see `_count_failure`).
        self.consecutive_errors = 0
        self.failures = 0
        self._served_at_failure = 0
        self.last_error: str | None = None
        self.aborted = False
        self.conns = [Conn() for _ in range(cfg.connections)]
        self.base_ns = 0
        self.end_ns: int | None = None
        #: No op is sent from then on: the end, and in open loop `SEND_GRACE_NS` after it.
        self.send_until_ns: int | None = None
        self.warmup_end_ns = 0
        self.deadlines: list[_Deadline] = []
        #: Which engine measured (the manifest's `loadgen.engine`): "native" or "python".
        self.engine = "python"
        # The native core's tables are made here, well before the common start.
        native_ops = native.uses_native(self)
        self.native_run = (native.NativeRun(self, native_ops)
                           if native_ops is not None else None)
        if cfg.pause_us and self.native_run is None:
            raise WorkloadError(
                f"clients.pause_us: only the native core pauses, and this run would use the "
                f"Python engine ({native.why_python(client)}); drop clients.pause_us")
        if self.native_run is not None and not cfg.record_keys:
            self.rec.drop_seq()
        if client.records_attempts:
            client.record_attempt = self.record_attempt

    def stop(self) -> None:
        """Stop issuing ops (SIGTERM, SIGINT): ops in flight finish or time out."""
        self.stopping = True
        self.stopped_ns = self.stopped_ns or time.perf_counter_ns()
        if self.native_run is not None:
            self.native_run.stop()

    def columns(self, op_names: tuple[str, ...], offset_ns: int = 0,
                chunk: Chunk | None = None) -> RecordColumns:
        """The raw columns of `chunk`, or of the current columns (`Recorder.columns`),
        with each op's key number when the run records keys (`run.record_keys`): the
        client maps its seqs to keys."""
        cols = self.rec.columns(op_names, self.cfg.client_id, offset_ns, chunk)
        if not self.cfg.record_keys:
            return cols
        keys = self.client.keynums(self.rec.seqs(chunk))
        if keys is None:  # the spec refuses this; a hand-made config may not
            raise WorkloadError(f"{self.cfg.workload}: its clients do not name their keys")
        return dataclasses.replace(cols, key=np.asarray(keys, np.int64))

    def arrays(self, op_names: tuple[str, ...], offset_ns: int = 0,
               chunk: Chunk | None = None) -> OpsArrays:
        """The records of `chunk`, or of the current columns, everything derived."""
        return self.columns(op_names, offset_ns, chunk).to_arrays()

    def unsent_counts(self) -> tuple[int, int]:
        """Open loop, after `run`: (measured, warm-up) ops intended before the run's end
        and never sent. The end is the window's (`duration_s`), or when the run began to
        stop early; a run of `ops` without either has none left. Seqs are taken in
        order, so the ops due and not taken are those from the last taken (or the first
        measured one) to the end, plus the taken ones never sent (`abandoned`) and the
        warm-up ops dropped. (0, 0) in closed loop and before the run."""
        sched = self.schedule
        if sched is None or not self.base_ns:
            return 0, 0
        if self.native_run is not None:
            taken, dropped = self.native_run.taken, self.native_run.dropped
        else:
            taken, dropped = self.tickets.head, self.tickets.dropped
        cut = min(self.end_ns or _NEVER, self.stopped_ns or _NEVER)
        due = taken if cut == _NEVER else sched.count_before(cut - self.base_ns)
        if self.total is not None:
            due = min(due, self.total)
        first = self.first_measured
        lost = [s for s in self.abandoned if s < due]
        measured = max(0, due - max(taken, first)) + sum(s >= first for s in lost)
        warmup = dropped + max(0, min(due, first) - taken) + sum(s < first for s in lost)
        return measured, warmup

    def published(self) -> int:
        """How many records of the run are whole and may be read now (`loadgen.live`,
        through `Recorder.segments`): sealed chunks', then the count the
        native core publishes (release order) while it writes from its own thread, else
        `rec.n` (the Python paths write on this thread)."""
        engine = self.native_run.engine if self.native_run is not None else None
        rec = self.rec
        return rec.base + (engine.published() if engine is not None else rec.n)

    def record_attempt(self, op: int, seq: int, start_ns: int, end_ns: int,
                       status: int) -> None:
        """One more record for op `seq`: an attempt that did not serve it (e.g. a
        redirected request), timed by the workload on this clock (perf_counter_ns). Only
        clients with `records_attempts` call it, so other workloads' loop is unchanged.
        Intended = start: in open loop an attempt's latency is its own duration, and its
        warm-up flag follows its start, as in closed loop."""
        tag = op | OUTCOME_WARMUP if seq < self.cfg.warmup_ops else op
        self.rec.record(start_ns, end_ns, tag, status, 0, start_ns, seq)

    async def connect_all(self) -> None:
        """Open connections before the common start; failures are retried in the loop."""
        for c in self.conns:
            try:
                c.conn = await self.client.connect()
            except Exception as exc:  # noqa: BLE001 - any driver error means "not connected"
                self.last_error = f"connect: {type(exc).__name__}: {exc}"

    async def run(self) -> None:
        cfg = self.cfg
        native_run = self.native_run
        self.base_ns = self.rec.base_ns = time.perf_counter_ns()
        if cfg.duration_s is not None:
            self.warmup_end_ns = self.base_ns + int(cfg.warmup_s * 1e9)
            self.end_ns = self.warmup_end_ns + int(cfg.duration_s * 1e9)
            self.send_until_ns = self.end_ns + (SEND_GRACE_NS if self.schedule else 0)
        self.rec.warmup_end_ns = self.warmup_end_ns
        if native_run is not None:
            self.engine = "native"
            try:
                await native_run.go()
            finally:
                for c in self.conns:
                    await self._drop(c, c.generation)
            return
        if self.schedule is None and cfg.inflight > 1 and self.client.pipeline() is not None:
            # Pipelined closed loop: one batched pipe per connection (see `_pipe`).
            slots = [self._slot(c, _pipe) for c in self.conns]
        else:
            slots = [self._slot(c, _fast_chain) for c in self.conns
                     for _ in range(cfg.inflight)]
        pacer = None
        if self.schedule is not None:
            self.tickets = _Tickets(self.schedule, self.base_ns)
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
        """Open loop: release each op to the slots at its intended start (`_Tickets`).

        One pacer per process does the precise waiting (see `_sleep_until`), so the slots
        never spin; an op released while every slot is busy waits, starts late, and its
        latency (from the intended start) shows the wait. When the first measured op is
        due, the warm-up ops still waiting are dropped (and counted): sent then, they
        would only make the measured ops wait behind a stale backlog.
        """
        sched, tickets, first = self.schedule, self.tickets, self.first_measured
        assert sched is not None
        try:
            seq = await self._release(0, first, n_slots)
            if seq != first or self.stopping:
                return
            if first:  # the warm-up ends when the first measured op is due
                when = self.base_ns + sched.at(first)
                if when >= (self.end_ns or _NEVER):
                    return
                await _sleep_until(when, time.perf_counter_ns)
                tickets.drop_until(first)
            await self._release(first, _NEVER, n_slots)
        finally:
            tickets.close()

    async def _release(self, seq: int, upto: int, n_slots: int) -> int:
        """Release ops `seq`.. (before `upto`, the run's op count and its end) each at its
        intended start; returns the next seq not released."""
        sched, tickets, base = self.schedule, self.tickets, self.base_ns
        assert sched is not None
        clock = time.perf_counter_ns
        at = sched.at
        if self.total is not None:
            upto = min(upto, self.total)
        end_ns = self.end_ns if self.end_ns is not None else _NEVER
        while seq < upto and not self.stopping:
            intended = base + at(seq)
            if intended >= end_ns:
                break
            left = intended - clock()
            if left > 0:  # on schedule: `_sleep_until`, with the clock read once
                if left > 2_000_000:
                    await asyncio.sleep((left - 1_500_000) / 1e9)
                while clock() < intended:
                    await asyncio.sleep(0)
                tickets.release(seq, intended)
                seq += 1
                continue
            # Behind: every op due now is released at once, not one per pass (which
            # would never catch up, nor let the slots run). More ops still waiting from
            # before than there are slots (slots woken and not yet run take one each):
            # they are all busy, and need no pacer for a while.
            busy = tickets.released - tickets.head > n_slots
            seq = min(upto, sched.count_before(min(clock() + 1, end_ns) - base))
            tickets.release_upto(seq)
            await asyncio.sleep(0.001 if busy else 0)
        return seq

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

    async def _drop(self, holder: Conn, seen: int) -> bool:
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

    async def _reconnect(self, holder: Conn, seen: int) -> None:
        if await self._drop(holder, seen):
            holder.conn = await self.client.connect()

    def _deadline(self, expire: Callable[[], None]) -> _Deadline | None:
        if self.cfg.timeout_s is None:
            return None
        watch = _Deadline(self.cfg.timeout_s, expire)
        self.deadlines.append(watch)
        return watch

    async def _slot(self, holder: Conn, fast_path: FastPath) -> None:
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

    async def _call(self, holder: Conn, watch: _Deadline | None, expiry: _TaskDeadline,
                    seq: int, intended: int) -> bool:
        """One op, awaited: reconnect if needed, execute, record (every failure too).
        False if the run's time was up before it started."""
        clock = time.perf_counter_ns
        op = self.client.next_op(seq)
        t0 = clock()
        if self.send_until_ns is not None and t0 >= self.send_until_ns:
            self.abandoned.append(seq)  # the run's time is up: never sent, counted
            return False
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
                            0, intended, seq)
            self._count_failure()
            await self._on_error(holder, gen, exc)
            return True
        tag = op | OUTCOME_WARMUP if seq < self.cfg.warmup_ops else op
        self.rec.record(t0, t1, tag, status, nbytes, intended, seq)
        return True

    def _count_failure(self) -> None:
        """Count a failed op just recorded. Ops served = records - failures, so a success
        needs no bookkeeping of its own: the count restarts when ops were served since
        the previous failure."""
        self.failures += 1
        served = self.rec.count - self.failures
        if served != self._served_at_failure:
            self._served_at_failure = served
            self.consecutive_errors = 0
        self.consecutive_errors += 1

    async def _on_error(self, holder: Conn, gen: int, exc: BaseException) -> None:
        self.last_error = f"{type(exc).__name__}: {exc}"
        if self.consecutive_errors >= self.cfg.max_consecutive_errors:
            self.stopping = True
            self.stopped_ns = self.stopped_ns or time.perf_counter_ns()
            self.aborted = True
            return
        # Back off a little so a dead server does not turn into a busy loop of errors.
        await asyncio.sleep(min(0.001 * 2 ** min(self.consecutive_errors, 10), 0.5))
        # After an error or timeout the connection's state is unknown: start afresh.
        await self._drop(holder, gen)
