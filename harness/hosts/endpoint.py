"""Where clients reach a running service: plain data that crosses from the runner to
every client process (`harness.loadgen.config`), so it imports nothing of the kit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Endpoint:
    """Where clients reach a running service. `extra` holds protocol details
    (e.g. PostgreSQL user and database); never secrets."""

    kind: str
    host: str
    port: int
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "host": self.host, "port": self.port, "extra": dict(self.extra)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Endpoint:
        return cls(d["kind"], d["host"], int(d["port"]), dict(d.get("extra", {})))
