"""The runner-worker contract: what one client process does (`ClientConfig`, sent to
`harness.run.worker` as JSON), and the shape of one op handed to a timed loop (`Ticket`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.hosts.endpoint import Endpoint


@dataclass(frozen=True)
class ClientConfig:
    """What one client process does; serialised to JSON for `harness.run.worker`."""

    workload: str
    params: Mapping[str, Any]
    endpoints: Mapping[str, Mapping[str, Any]]
    client_id: int
    connections: int = 1
    inflight: int = 1
    #: Closed loop, native core: µs the loop sleeps before each wait (`clients.pause_us`).
    pause_us: float = 0.0
    ops: int | None = None
    duration_s: float | None = None
    warmup_ops: int = 0
    warmup_s: float = 0.0
    timeout_s: float | None = 10.0
    max_consecutive_errors: int = 200
    #: Open loop: this process's target rate; None = closed loop.
    rate_ops_s: float | None = None
    arrival: str = "fixed"
    #: Fraction of one interval this process's fixed schedule is shifted by.
    phase: float = 0.0
    seed: int = 0
    #: Keep each op's key number (`run.record_keys`).
    record_keys: bool = False
    #: Records per chunk the worker spills to disk (`loadgen.spill`); None: its default.
    chunk_records: int | None = None
    files: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON a worker reads. A field added since workers first read configs is
        left out at its default, so a client machine on an older checkout still runs
        every spec that does not use it."""
        out = asdict(self)
        for name, default in _ADDED_FIELDS.items():
            if out.get(name) == default:
                del out[name]
        return out

    def endpoint_objects(self) -> dict[str, Endpoint]:
        return {k: Endpoint.from_dict(v) for k, v in self.endpoints.items()}


#: Fields added after the first workers (`ClientConfig.to_dict`), with their defaults.
_ADDED_FIELDS: dict[str, Any] = {"record_keys": False, "chunk_records": None,
                                 "pause_us": 0.0}

#: An open-loop op released by the pacer: (seq, intended start); closed loop: (seq, 0).
Ticket = tuple[int, int]
