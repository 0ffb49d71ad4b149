"""What the timed loop (`run.ClientRun`) shares with the paths it hands connections to
(`fastpaths`, `native`): a connection's holder, and the run as those paths see it. Here
so that they name the run's type without importing `run`, which imports them."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from harness.loadgen.config import ClientConfig
from harness.loadgen.recorder import Recorder
from harness.loadgen.schedule import Schedule
from harness.workloads.base import WorkloadClient

#: "No such time" (no end, not stopped): later than any clock reading.
NEVER = 1 << 62


class Conn:
    """One connection shared by its in-flight slots; reconnects after a failure."""

    __slots__ = ("conn", "generation", "lock")

    def __init__(self) -> None:
        self.conn: Any = None
        self.generation = 0
        self.lock = asyncio.Lock()


class LoopRun(Protocol):
    """The `ClientRun` the fast paths and the native core drive: its settings, records,
    counters and the calls they make back into it."""

    cfg: ClientConfig
    client: WorkloadClient
    rec: Recorder
    schedule: Schedule | None
    tickets: Any
    conns: list[Conn]
    total: int | None
    seq: int
    first_measured: int
    base_ns: int
    end_ns: int | None
    send_until_ns: int | None
    stopping: bool
    stopped_ns: int
    aborted: bool
    abandoned: list[int]
    failures: int
    consecutive_errors: int
    _served_at_failure: int
    last_error: str | None

    def _count_failure(self) -> None: ...

    async def _take(self) -> tuple[int, int] | None: ...

    async def _drop(self, holder: Conn, seen: int) -> bool: ...

    async def _on_error(self, holder: Conn, gen: int, exc: BaseException) -> None: ...
