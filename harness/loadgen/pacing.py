"""Open loop: the ops that are due (`Tickets`) and the pacer that releases each at its
intended start (`pace`), for the timed loop's Python paths (`run.ClientRun`; the native
core paces in C)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from typing import Any

from harness.loadgen.config import Ticket
from harness.loadgen.schedule import Schedule
from harness.loadgen.shared import NEVER, LoopRun


async def sleep_until(when_ns: int, clock: Any) -> None:
    """Wait until `when_ns` on `clock`, closer than the loop's ~1 ms timer grain: sleep
    coarsely, then yield to the loop (other slots keep working) until it is time."""
    left = when_ns - clock()
    if left > 2_000_000:
        await asyncio.sleep((left - 1_500_000) / 1e9)
    while clock() < when_ns:
        await asyncio.sleep(0)


class Tickets:
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


async def pace(run: LoopRun, n_slots: int) -> None:
    """Open loop: release each op to the slots at its intended start (`Tickets`).

    One pacer per process does the precise waiting (see `sleep_until`), so the slots
    never spin; an op released while every slot is busy waits, starts late, and its
    latency (from the intended start) shows the wait. When the first measured op is
    due, the warm-up ops still waiting are dropped (and counted): sent then, they
    would only make the measured ops wait behind a stale backlog.
    """
    sched, tickets, first = run.schedule, run.tickets, run.first_measured
    assert sched is not None
    try:
        seq = await _release(run, 0, first, n_slots)
        if seq != first or run.stopping:
            return
        if first:  # the warm-up ends when the first measured op is due
            when = run.base_ns + sched.at(first)
            if when >= (run.end_ns or NEVER):
                return
            await sleep_until(when, time.perf_counter_ns)
            tickets.drop_until(first)
        await _release(run, first, NEVER, n_slots)
    finally:
        tickets.close()

async def _release(run: LoopRun, seq: int, upto: int, n_slots: int) -> int:
    """Release ops `seq`.. (before `upto`, the run's op count and its end) each at its
    intended start; returns the next seq not released."""
    sched, tickets, base = run.schedule, run.tickets, run.base_ns
    assert sched is not None
    clock = time.perf_counter_ns
    at = sched.at
    if run.total is not None:
        upto = min(upto, run.total)
    end_ns = run.end_ns if run.end_ns is not None else NEVER
    while seq < upto and not run.stopping:
        intended = base + at(seq)
        if intended >= end_ns:
            break
        left = intended - clock()
        if left > 0:  # on schedule: `sleep_until`, with the clock read once
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
