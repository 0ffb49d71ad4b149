"""The Python fast paths of one connection: the callback chain (`_fast_chain`, closed
and open loop) and the batched pipe (`_pipe`, pipelined closed loop). See `ClientRun`
for when each runs; both record exactly like the awaited path (tested)."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from itertools import repeat
from typing import TYPE_CHECKING, Any

from harness.loadgen.config import Ticket
from harness.loadgen.shared import NEVER
from harness.results import ERROR, OUTCOME_WARMUP, TIMEOUT, outcome

if TYPE_CHECKING:
    from harness.loadgen.shared import Conn, LoopRun

#: A fast chain's outcome when the open loop has no op due: wait for the pacer.
_IDLE = object()

#: A fast path's factory: (run, connection) -> its coroutine function, or None (no fast
#: path for this workload). The coroutine runs ops until the connection needs replacing
#: and returns the next op to do the awaited way, or None when there are no more ops.
FastPath = Callable[["LoopRun", "Conn"], "Callable[[], Awaitable[Ticket | None]] | None"]



def _fast_chain(run: LoopRun, holder: Conn) -> Callable[[], Awaitable[Ticket | None]] | None:
    """The callback path of one in-flight slot (see `ClientRun`), or None if the workload
    has no `issuer`. The returned coroutine function runs ops until the connection is
    gone; it returns the next op (seq, intended) to do the awaited way (reconnecting
    first), or None when there are no more ops. Failures are recorded and handled
    (back-off, dropping the connection) inside."""
    loop = asyncio.get_running_loop()
    clock = time.perf_counter_ns
    rec = run.rec
    start_v, end_v, outcome_v, intended_v, seq_v = rec.views
    next_op = run.client.next_op
    last = run.total if run.total is not None else NEVER
    stop_ns = run.send_until_ns if run.send_until_ns is not None else NEVER
    warm_ops = run.cfg.warmup_ops
    open_loop = run.schedule is not None
    get_ticket = run.tickets.get_nowait
    timeout_s = run.cfg.timeout_s
    timeout_ns = int(timeout_s * 1e9) if timeout_s is not None else 0
    conn: Any = None
    waiter: asyncio.Future = loop.create_future()
    held: Ticket | None = None  # an open-loop op taken while the chain was idle
    t0 = tag = intended = cur = 0  # cur: the seq of the op in flight
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
        nonlocal start_v, end_v, outcome_v, seq_v, t0, tag, cur
        t1 = clock()
        if not pending:
            return  # the reply of an op that timed out: already recorded
        # The record (see Recorder): raw readings, nothing derived here.
        i = rec.n
        rec.n = i + 1
        try:
            start_v[i] = t0
        except (IndexError, ValueError):  # full, or sealed or grown by another writer
            i = rec.room(i)
            start_v, end_v, outcome_v, _, seq_v = rec.views
            start_v[i] = t0
        end_v[i] = t1
        outcome_v[i] = code | tag
        seq_v[i] = cur
        seq = run.seq
        if seq >= last or run.stopping or t1 >= stop_ns:
            finish(None)
            return
        run.seq = seq + 1
        cur = seq
        t0 = clock()
        try:
            op = issue(conn, seq)
        except Exception as exc:  # noqa: BLE001 - e.g. the connection is closed: recorded
            issue_failed(seq, exc)
            return
        tag = op | OUTCOME_WARMUP if seq < warm_ops else op

    def done_open(code: int) -> None:
        """`done` in open loop: the intended start is recorded as well."""
        nonlocal start_v, end_v, outcome_v, intended_v, seq_v
        t1 = clock()
        if not pending:
            return
        i = rec.n
        rec.n = i + 1
        try:
            start_v[i] = t0
        except (IndexError, ValueError):
            i = rec.room(i)
            start_v, end_v, outcome_v, intended_v, seq_v = rec.views
            start_v[i] = t0
        end_v[i] = t1
        outcome_v[i] = code | tag
        intended_v[i] = intended
        seq_v[i] = cur
        go_open()

    def fail(exc: BaseException) -> None:
        """The op in flight failed (`exc` is kept as the run's last error)."""
        t1 = clock()
        if not pending:
            return
        rec.record(t0, t1, tag, TIMEOUT if isinstance(exc, TimeoutError) else ERROR, 0,
                   intended, cur)
        run._count_failure()
        finish(exc)

    def issue_failed(seq: int, exc: BaseException) -> None:
        nonlocal tag, cur
        cur = seq
        op = next_op(seq)
        tag = op | OUTCOME_WARMUP if seq < warm_ops else op
        fail(exc)

    def send(seq: int) -> None:
        """Send op `seq` now, or end the chain if the run's time is up. (`done` inlines
        this for the closed loop's per-op path.)"""
        nonlocal t0, tag, pending, cur
        t = clock()
        if t >= stop_ns:
            run.abandoned.append(seq)  # taken, never sent: counted (`unsent_counts`)
            finish(None)
            return
        t0, cur = t, seq
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
            if ticket is not None:
                run.abandoned.append(ticket[0])
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
            if held is not None:  # taken while idle, then the run stopped
                run.abandoned.append(held[0])
                held = None

    return chain


def _pipe(run: LoopRun, holder: Conn) -> Callable[[], Awaitable[Ticket | None]] | None:
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
    start_v, end_v, outcome_v, _, seq_v = rec.views
    depth = run.cfg.inflight
    last = run.total if run.total is not None else NEVER
    stop_ns = run.send_until_ns if run.send_until_ns is not None else NEVER
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
                       0, seq)
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
        nonlocal start_v, end_v, outcome_v, seq_v
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
        except (IndexError, ValueError):  # full, or sealed or grown by another writer
            i = rec.room(i, k)
            start_v, end_v, outcome_v, _, seq_v = rec.views
        failure: BaseException | None = None
        for code, seq in zip(codes, batch, strict=True):
            start_v[i] = pop_t0()
            end_v[i] = t1
            if code.__class__ is not int:  # this op failed
                failure = failure or code  # type: ignore[assignment]
                code = outcome(ERROR, 0) | next_op(seq)
                run._count_failure()
            outcome_v[i] = code | OUTCOME_WARMUP if seq < warm_ops else code  # type: ignore[operator]
            seq_v[i] = seq
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
