"""`clients.probe`: a latency probe beside the load (issue 53 item 4).

One extra open-loop client process at a low fixed rate, on connections of its own (and
a host of its own where given), issuing the workload's ops during every measured run;
its records go into the run's ops file under client ids the manifest names
(``loadgen.probe_clients``). A load client's own queueing inflates the latency it
records at high load (mutilate samples latency with `-Q`/`-C` connections apart from
its agents' load for that reason; Lancet has latency agents); the probe, never more
than one op in flight per connection, shows how much.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.settings import Setting, report_settings, resolve

#: Ops/s of the probe: a probe that moves the server measures itself, not the load's
#: effect. 10,000/s is far below what any server the kit drives serves.
MAX_PROBE_RATE_OPS_S = 10_000.0
MIN_PROBE_RATE_OPS_S = 1.0
#: A few connections spread the probe's ops; more would be load.
MAX_PROBE_CONNECTIONS = 16

PROBE_FIELDS: dict[str, Setting] = {
    "rate_ops_s": Setting((int, float), 200, "the probe's fixed open-loop rate (ops/s)",
                          low=MIN_PROBE_RATE_OPS_S, high=MAX_PROBE_RATE_OPS_S,
                          why="a probe must not move the server"),
    "connections": Setting((int,), 1, "the probe's own connections", low=1,
                           high=MAX_PROBE_CONNECTIONS, why="more would be load"),
    "host": Setting((str, type(None)), None, "client host of the probe (default: the "
                    "first of clients.hosts)"),
}


@dataclass(frozen=True)
class ProbeSpec:
    """The probe's process: `rate_ops_s` on `connections` connections from `host`."""

    rate_ops_s: float
    connections: int
    host: str

    def to_dict(self) -> dict[str, Any]:
        return {"rate_ops_s": self.rate_ops_s, "connections": self.connections,
                "host": self.host}


def validate_probe(raw: Any, hosts: Mapping[str, Any], client_hosts: list[Any],
                   run_d: Mapping[str, Any], bad: Any) -> ProbeSpec | None:
    """`clients.probe` checked (each problem through `bad(field, message)`), or None
    where it is not given or wrong."""
    if raw is None:
        return None
    if report_settings("clients.probe", raw, PROBE_FIELDS, bad) or not isinstance(raw, Mapping):
        return None
    d = resolve(raw, PROBE_FIELDS)
    host = d["host"] if d["host"] is not None else (client_hosts[0] if client_hosts else None)
    if host is None:
        return None
    if host not in hosts:
        bad("clients.probe.host", f"unknown host {host!r}; hosts: {sorted(hosts)}")
        return None
    if run_d.get("duration_s") is None:
        bad("clients.probe", "needs run.duration_s: the probe runs as long as the load, "
                             "which a run of run.ops does not fix ahead")
        return None
    return ProbeSpec(float(d["rate_ops_s"]), int(d["connections"]), str(host))
