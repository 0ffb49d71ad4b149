"""Ctrl-C and SIGTERM while `harness run` runs, so that no signal costs measured data.

The first signal stops the run as Ctrl-C always did (KeyboardInterrupt: clients told to
stop, they save what they measured, the run is written as partial), unless the run's
records are being collected or written at that moment: then it is deferred until the
run directory is in place, and the grid stops after it. A second signal stops waiting
at once (`StopNow`): whatever was not written yet stays where it is (the client
machines' record files, listed in the experiment's state file, `harness.run.inflight`),
and the next `harness run`, `--resume` or `harness cleanup` writes it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any


class StopNow(BaseException):
    """A second Ctrl-C / SIGTERM: stop at once and keep records where they are.

    A BaseException that is not a KeyboardInterrupt, so the handlers of the first signal
    (which stop clients and write the run) do not catch it."""


class Interrupts:
    """Signal state of one `harness run`; `install` only in the main thread."""

    def __init__(self, say: Callable[[str], None] | None = None) -> None:
        self.say = say or (lambda _msg: None)
        self.count = 0
        self.terminated = False
        #: Set when a signal arrived inside `protect`: the caller stops after the step.
        self.pending = False
        self._depth = 0
        self._what = ""
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # handlers can only be installed from the main thread
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._on_signal)

    def uninstall(self) -> None:
        for sig, prev in self._previous.items():
            signal.signal(sig, prev)
        self._previous.clear()

    def _on_signal(self, signum: int, frame: object) -> None:
        self.count += 1
        self.terminated |= signum == signal.SIGTERM
        name = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
        if self.count > 1:
            raise StopNow(name)
        if self._depth:
            self.pending = True
            self.say(f"{name}: finishing {self._what} first, then stopping "
                     f"({name} again stops at once; its records are kept either way)")
            return
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def protect(self, what: str) -> Iterator[None]:
        """A first signal inside waits until the block is done (sets `pending`)."""
        self._depth += 1
        self._what = what
        try:
            yield
        finally:
            self._depth -= 1

    @property
    def interrupted(self) -> bool:
        return self.count > 0
