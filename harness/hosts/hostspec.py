"""How to reach a machine: pure spec data, below the execution layer.

`harness.spec` reads host specs from an experiment file and `harness.hosts` opens them;
this module imports neither, so the two never import each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

LOCAL_NAMES = frozenset({"localhost", "local"})


@dataclass(frozen=True)
class HostSpec:
    """How to reach a host. `target` is `localhost` or an SSH target/alias."""

    name: str
    target: str = "localhost"
    python: str | None = None
    address: str | None = None
    known_hosts: str | None = None
    identity_file: str | None = None
    ssh_config: str | None = None
    accept_new_host_key: bool = False
    connect_timeout_s: float = 10.0
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.target in LOCAL_NAMES
