"""No core files from the kit's processes: they hold the servers' passwords (read from
the environment or a file), TLS keys and SSH keys, and a crash would copy their memory,
secrets and all, into a file where /proc/sys/kernel/core_pattern says (often the working
directory) or to a crash collector."""

from __future__ import annotations

import resource


def no_core_dumps() -> None:
    """Lower this process's soft RLIMIT_CORE to 0, whatever `ulimit -c` its shell had.
    Children inherit it (the agent, the workers it forks, the servers it launches); only
    the soft limit is lowered, so a user may raise it again for a process of their own.
    `harness run` calls it on the control machine, the agent on every client machine
    (an agent started over SSH inherits nothing from the control machine)."""
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
