"""Scaling steps executed while the clients run (the spec's `timeline`).

A background thread waits for each event's time, measured from the run's common start
(the Unix ns at which the clients were released, the zero of every op's `start_ns`),
and calls `scale(action, args)` on the running service. Each event's start and end (ns
from the common start, on the same clock as the ops), duration, result and error go
into the manifest under `extra.timeline`. Events not yet begun when the clients finish
are recorded as skipped; one in progress is waited for, since a half-done migration
must not be cut off by stopping the servers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.services.base import RunningService
from harness.spec import TimelineEvent

JOIN_TIMEOUT_S = 900.0


class Timeline:
    def __init__(self, events: Sequence[TimelineEvent], running: Mapping[str, RunningService],
                 start_unix_ns: int, say: Callable[[str], None] | None = None) -> None:
        """`say`: a line as each step begins and ends, beside the live numbers."""
        self.events = sorted(events, key=lambda e: e.at_s)
        self.say = say or (lambda _line: None)
        self.running = running
        self.start_ns = start_unix_ns
        self.records: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="timeline", daemon=True)

    def start(self) -> Timeline:
        if self.events:
            self._thread.start()
        return self

    def _run(self) -> None:
        for ev in self.events:
            base = {"at_s": ev.at_s, "action": ev.action, "service": ev.service,
                    "args": dict(ev.args)}
            wait_s = (self.start_ns + int(ev.at_s * 1e9) - time.time_ns()) / 1e9
            if self._done.wait(max(wait_s, 0.0)):
                self.records.append({**base, "skipped": "the clients had finished"})
                continue
            t0 = time.time_ns()
            result: dict[str, Any] = {}
            error = None
            what = f"{ev.action} {ev.service}" + "".join(f" {k}={v}" for k, v in ev.args.items())
            self.say(f"  [{(t0 - self.start_ns) / 1e9:>4.0f} s] {what}: started")
            try:
                result = self.running[ev.service].scale(ev.action, ev.args)
            except Exception as exc:  # noqa: BLE001 - recorded in the manifest, run goes on
                error = f"{type(exc).__name__}: {exc}"
                self.errors.append(f"timeline {ev.action} {ev.service} at {ev.at_s:g} s: "
                                   f"{error}")
            t1 = time.time_ns()
            self.say(f"  [{(t1 - self.start_ns) / 1e9:>4.0f} s] {what}: "
                     + (f"FAILED: {error}" if error else f"done in {(t1 - t0) / 1e9:.1f} s"))
            self.records.append({**base, "start_ns": t0 - self.start_ns,
                                 "end_ns": t1 - self.start_ns, "duration_s": (t1 - t0) / 1e9,
                                 "result": result, "error": error})

    def finish(self) -> list[dict[str, Any]]:
        """Skip events not yet begun, wait for one in progress; the records."""
        self._done.set()
        if self._thread.is_alive():
            self._thread.join(JOIN_TIMEOUT_S)
        return self.records
