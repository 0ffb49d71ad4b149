"""The live status line of `harness run`: once a second, the last second's ops/s, p50,
p99 and errors of a run, summed over all its client processes on every machine.

Each client process writes its intervals itself (`harness.loadgen.live`, a timer, nothing
per op); here a thread asks every client machine's agent for the new ones once a second
(one request per machine, all at once, over the links the run already uses) and prints
second k when every process has sent its interval k (or has ended before it). A machine
that does not answer in time is skipped: the status line never holds up or fails a run,
and a second some process never sent is printed `LATE_S` seconds later with the clients
it has.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from harness.errors import HostError
from harness.loadgen.live import INTERVAL_S, Interval, merge, percentile_ns
from harness.run.agentctl import Pending
from harness.run.clients import ClientGroup, Worker

#: How long a poll waits for a machine's reply before skipping it this second.
POLL_TIMEOUT_S = 0.8
#: A last interval shorter than this (a partial second) is not printed.
PARTIAL_S = 0.95 * INTERVAL_S
#: A second is printed this long after it ended even if some process has not sent it.
LATE_S = 3.0
#: With a sink (/metrics), how long `stop` keeps asking for the processes' last intervals.
FINAL_WAIT_S = 5.0


def format_line(k: int, intervals: list[Interval], clients: int, warmup_s: float = 0.0) -> str:
    """One status line from the processes' intervals number k."""
    ops_s = sum(i.ops * 1e9 / i.dt_ns for i in intervals if i.dt_ns > 0)
    hist = merge(i.hist for i in intervals)
    p50, p99 = percentile_ns(hist, 50), percentile_ns(hist, 99)
    ops = sum(i.ops for i in intervals)
    errors = sum(i.errors for i in intervals)

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v / 1e6:.3f} ms"

    line = (f"  [{k * INTERVAL_S:>4.0f} s] {ops_s:>12,.0f} ops/s  p50 {ms(p50)}  "
            f"p99 {ms(p99)}  errors {errors}")
    # Warm-up by time (second k is within the run's warmup_s) or by count (most of its
    # records are flagged).
    if k * INTERVAL_S <= warmup_s or (ops and sum(i.warmup for i in intervals) * 2 > ops):
        line += "  (warm-up)"
    if any(i.final for i in intervals):
        line += "  (last)"
    if len(intervals) < clients:
        line += f"  ({len(intervals)}/{clients} clients)"
    return line


class LiveStatus:
    """Polls a started `ClientGroup`'s live files and `say`s one line per second."""

    def __init__(self, group: ClientGroup, say: Callable[[str], None],
                 sink: Callable[[str, str, Interval], None] | None = None,
                 lines: bool = True, note: str = "") -> None:
        """`sink(live file, host name, interval)` gets each interval once, as it comes
        (`harness.run.metrics`); `lines=False` prints no status line (--quiet); `note`
        ends the run's first line (where its /metrics are served)."""
        self.group = group
        self.say = say
        self.sink = sink
        self.print_lines = lines
        self.note = note
        self.warmup_s = group.plan.size.warmup_s or 0.0
        self.workers: list[Worker] = [w for w in group.workers if w.files.get("live")]
        #: live file -> interval number -> its interval.
        self.got: dict[str, dict[int, Interval]] = {w.files["live"]: {} for w in self.workers}
        #: live file -> number of its final interval; -> the newest number it sent.
        self.final: dict[str, int] = {}
        self.seen: dict[str, int] = {path: 0 for path in self.got}
        self.host_of = {w.files["live"]: w.host.name for w in self.workers}
        self.next_k = 1
        self.lines = 0
        self._t0 = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> LiveStatus:
        """Call once the group's processes are released (`ClientGroup.go`)."""
        self._t0 = time.monotonic()
        if self.workers:
            self._thread = threading.Thread(target=self._loop, name="live-status",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """After the processes ended: fetch what is left and print every second not yet
        printed (the processes' last, shorter intervals included)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            try:
                self.poll()
                # The /metrics counts are only whole with every process's last interval:
                # a busy machine that missed this poll is asked again, for a while.
                deadline = time.monotonic() + FINAL_WAIT_S
                while (self.sink is not None and len(self.final) < len(self.got)
                       and time.monotonic() < deadline):
                    time.sleep(0.1)
                    self.poll()
                self.emit(flush=True)
            except Exception as exc:  # noqa: BLE001 - the run's records come next
                self.say(f"  live numbers stopped: {type(exc).__name__}: {exc}")

    def _loop(self) -> None:
        try:
            self._every_second()
        except Exception as exc:  # noqa: BLE001 - a status line must never fail a run
            self.say(f"  live numbers stopped: {type(exc).__name__}: {exc}")

    def _every_second(self) -> None:
        k = 1
        # Polled a little after each second boundary, when the processes have written it.
        while not self._stop.wait(max(0.0, self._t0 + k * INTERVAL_S + 0.2
                                      - time.monotonic())):
            self.poll()
            self.emit(flush=False)
            k = int((time.monotonic() - self._t0) / INTERVAL_S) + 1

    def poll(self) -> None:
        by_host: dict[str, list[Worker]] = {}
        for w in self.workers:
            by_host.setdefault(w.host.name, []).append(w)
        asked: list[Pending] = []
        for ws in by_host.values():
            link = self.group.agents.peek(ws[0].host)
            if link is None:
                continue  # reconnecting (the run's own steps do that), or gone
            pairs = [[w.files["live"], self.seen[w.files["live"]]] for w in ws]
            asked.append(link.send("live", pairs=pairs))
        deadline = time.monotonic() + POLL_TIMEOUT_S
        for pending in asked:
            with contextlib.suppress(HostError):
                reply = pending.result(max(0.01, deadline - time.monotonic()))
                self._take(reply.get("intervals", {}))

    def _take(self, intervals: dict[str, list[dict]]) -> None:
        for path, items in intervals.items():
            if path not in self.got:
                continue
            for item in items:
                with contextlib.suppress(KeyError, TypeError, ValueError):
                    iv = Interval.from_dict(item)
                    if self.sink is not None and iv.k > self.seen[path]:  # new
                        self.sink(path, self.host_of[path], iv)
                    if iv.k >= self.next_k:  # not printed yet
                        self.got[path][iv.k] = iv
                    self.seen[path] = max(self.seen[path], iv.k)
                    if iv.final:
                        self.final[path] = iv.k

    def _ready(self, k: int) -> bool:
        return all(k in got or self.final.get(path, k) < k for path, got in self.got.items())

    def emit(self, flush: bool) -> None:
        """Print seconds in order while they are complete (or late, or `flush`)."""
        last = max(self.seen.values(), default=0)
        while self.next_k <= last:
            k = self.next_k
            late = time.monotonic() - self._t0 > k * INTERVAL_S + LATE_S
            if not (flush or late or self._ready(k)):
                return
            have = [got.pop(k) for got in self.got.values() if k in got]
            # Processes still running at k: the ones that did not end before it.
            clients = sum(1 for path in self.got if self.final.get(path, k) >= k)
            # The run's last, partial second (every process ended within it) is not a
            # line: a rate over a fraction of a second reads like a drop, and the run's
            # own line follows at once.
            stub = have and all(i.final and i.dt_ns < PARTIAL_S * 1e9 for i in have)
            if have and not stub and self.print_lines:
                line = format_line(k, have, clients, self.warmup_s)
                self.say(line + self.note if self.note and not self.lines else line)
                self.lines += 1
            self.next_k += 1
