"""Timeouts of the timed loop's awaited calls (`run.ClientRun`), cheaper than
`asyncio.timeout` per op."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class Deadline:
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


class TaskDeadline:
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
