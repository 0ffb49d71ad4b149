"""The running servers of a grid whose runs interleave configurations.

Runs are made in the spec's order, interleaved by default (every configuration once, then
again), so slow drift on the machines spreads over all configurations instead of biasing
one. Consecutive runs may then need differently configured servers (a grid over a server
setting). The pool keeps one set of servers per services configuration, up to
`capacity` sets at once, so switching back costs no restart; past that the least
recently used set is stopped first. With `fresh`, a set is restarted before every run
(restart-to-restart variation is then part of the spread, as Treadmill recommends
sampling). Every set knows when it started and how many runs it has served, which each
run's manifest records.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from harness.services.base import RunningService

#: More distinct server configurations than this are not kept running side by side:
#: each run then starts the servers it needs (a restart per switch).
MAX_SETS = 4


@dataclass
class ServerSet:
    key: str
    running: dict[str, RunningService]
    started_utc: str
    #: The instance's number among the sets started by this `harness run` (1-based).
    instance: int
    #: Runs this set has served before the current one.
    runs: int = 0
    #: What a prepare left on these servers that runs keep (`Workload.kept_data`), and
    #: the run that prepared it: the next run of the same data needs no prepare.
    data: str | None = None
    data_run: str = ""


def capacity_for(keys: Sequence[str]) -> int:
    """Sets kept running at once for runs needing `keys` in order: all of them when they
    are few, else one (a pool smaller than the cycle of an interleaved grid would stop a
    set before every run anyway, holding memory for nothing)."""
    distinct = len(set(keys))
    return distinct if distinct <= MAX_SETS else 1


def count_starts(keys: Sequence[str], capacity: int, fresh: bool) -> int:
    """How many server-set starts runs needing `keys` in this order take (`--dry-run`)."""
    if fresh:
        return len(keys)
    kept: OrderedDict[str, None] = OrderedDict()
    starts = 0
    for key in keys:
        if key in kept:
            kept.move_to_end(key)
            continue
        if len(kept) >= capacity:
            kept.popitem(last=False)
        kept[key] = None
        starts += 1
    return starts


class ServerPool:
    """Server sets by configuration key; `stop(running)` stops one."""

    def __init__(self, stop: Callable[[dict[str, RunningService]], None], capacity: int,
                 fresh: bool = False) -> None:
        self._stop = stop
        self.capacity = max(1, capacity)
        self.fresh = fresh
        self.sets: OrderedDict[str, ServerSet] = OrderedDict()
        self.started = 0

    def acquire(self, key: str, start: Callable[[], dict[str, RunningService]]
                ) -> ServerSet:
        """The set for `key`, started by `start()` if needed; a set whose server died
        stays as it is (the run then fails at once, and says so), unless servers are
        `fresh`."""
        have = self.sets.get(key)
        if have is not None and self.fresh:
            self.release(key)
            have = None
        if have is not None:
            self.sets.move_to_end(key)
            return have
        while len(self.sets) >= self.capacity:
            self.release(next(iter(self.sets)))
        running = start()
        self.started += 1
        made = ServerSet(key, running, datetime.now(UTC).isoformat(timespec="milliseconds"),
                         self.started)
        self.sets[key] = made
        return made

    def release(self, key: str) -> None:
        found = self.sets.pop(key, None)
        if found is not None:
            self._stop(found.running)

    def close(self) -> None:
        """Stop every set, most recently used last (as they were started)."""
        while self.sets:
            self.release(next(iter(self.sets)))
