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
from collections.abc import Callable

import numpy as np

from harness.errors import WorkloadError
from harness.loadgen import native
from harness.loadgen.config import ClientConfig
from harness.loadgen.deadlines import Deadline, TaskDeadline
from harness.loadgen.errtally import ErrorTally
from harness.loadgen.fastpaths import FastPath, _fast_chain, _pipe
from harness.loadgen.pacing import Tickets, pace
from harness.loadgen.recorder import Chunk, Recorder
from harness.loadgen.schedule import Schedule
from harness.loadgen.shared import NEVER, Conn
from harness.results import ERROR, OUTCOME_WARMUP, TIMEOUT, OpsArrays
from harness.results.columns import RecordColumns
from harness.workloads.base import WorkloadClient

#: Open loop: how long after the window's end an op intended before it may still be
#: sent. Below capacity an op due just before the end is then sent however the machine
#: hiccups, not counted unsent; overloaded, the backlog left after it is counted.
SEND_GRACE_NS = 100_000_000


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
        #: Open loop: the ops that are due, released by `pacing.pace`.
        self.tickets = Tickets(self.schedule)
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
        #: Every failure's message by kind (`errtally`), for the manifest.
        self.errors = ErrorTally()
        self.aborted = False
        self.conns = [Conn() for _ in range(cfg.connections)]
        self.base_ns = 0
        self.end_ns: int | None = None
        #: No op is sent from then on: the end, and in open loop `SEND_GRACE_NS` after it.
        self.send_until_ns: int | None = None
        self.warmup_end_ns = 0
        self.deadlines: list[Deadline] = []
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
        cut = min(self.end_ns or NEVER, self.stopped_ns or NEVER)
        due = taken if cut == NEVER else sched.count_before(cut - self.base_ns)
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
        connect = (self.native_run.connect if self.native_run is not None
                   else self.client.connect)
        for c in self.conns:
            try:
                c.conn = await connect()
            except Exception as exc:  # noqa: BLE001 - any driver error means "not connected"
                self.note_error(f"connect: {type(exc).__name__}: {exc}")

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
            self.tickets = Tickets(self.schedule, self.base_ns)
            pacer = asyncio.ensure_future(pace(self, len(slots)))
        try:
            await asyncio.gather(*slots)
        finally:
            if pacer is not None:
                pacer.cancel()
            for d in self.deadlines:
                d.close()
        for c in self.conns:
            await self._drop(c, c.generation)

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

    def _deadline(self, expire: Callable[[], None]) -> Deadline | None:
        if self.cfg.timeout_s is None:
            return None
        watch = Deadline(self.cfg.timeout_s, expire)
        self.deadlines.append(watch)
        return watch

    async def _slot(self, holder: Conn, fast_path: FastPath) -> None:
        task_deadline = TaskDeadline()
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

    async def _call(self, holder: Conn, watch: Deadline | None, expiry: TaskDeadline,
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

    def note_error(self, message: str) -> None:
        """A failure's message: the last one, and its kind's count (`errtally`)."""
        self.last_error = message
        self.errors.add(message)

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
        self.note_error(f"{type(exc).__name__}: {exc}")
        if self.consecutive_errors >= self.cfg.max_consecutive_errors:
            self.stopping = True
            self.stopped_ns = self.stopped_ns or time.perf_counter_ns()
            self.aborted = True
            return
        # Back off a little so a dead server does not turn into a busy loop of errors.
        await asyncio.sleep(min(0.001 * 2 ** min(self.consecutive_errors, 10), 0.5))
        # After an error or timeout the connection's state is unknown: start afresh.
        await self._drop(holder, gen)
