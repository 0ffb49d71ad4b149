"""The command line's exit codes, and the `harness run` in progress that `main` reports
on when a signal stops it."""

from __future__ import annotations

import signal
from typing import Any

EXIT_OK, EXIT_FAILED_RUNS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143, as a shell reports a process killed by TERM


class _Current:
    """The signal state of the `harness run` in progress (`harness.run.interrupts`)."""

    interrupts: Any = None


current = _Current()


def terminated() -> bool:
    """Whether the run in progress was stopped by SIGTERM (not Ctrl-C)."""
    return current.interrupts is not None and bool(current.interrupts.terminated)
