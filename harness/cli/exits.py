"""The command line's exit codes, and the `harness run` in progress that `main` reports
on when a signal stops it."""

from __future__ import annotations

import signal
from typing import Any

EXIT_OK, EXIT_FAILED_RUNS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
#: The gates (`harness history --gate`, `harness compare --fail-if-worse`): 0 pass, 1 a
#: regression and nothing else, 2 input that could not be read (a usage error, a tree
#: or a run that cannot be read: never 1), 3 not yet judgeable (`history --strict`).
EXIT_PASS, EXIT_REGRESSION, EXIT_UNREADABLE, EXIT_NOT_JUDGEABLE = 0, 1, 2, 3
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143, as a shell reports a process killed by TERM


class _Current:
    """The signal state of the `harness run` in progress (`harness.run.interrupts`)."""

    interrupts: Any = None


current = _Current()


def terminated() -> bool:
    """Whether the run in progress was stopped by SIGTERM (not Ctrl-C)."""
    return current.interrupts is not None and bool(current.interrupts.terminated)
