"""The contract every service launcher fulfils.

A service starts a real server on a Host with validated settings, on a free port, waits
until it answers, reports its version and effective configuration for the manifest,
and stops it (its whole process group) on `stop()`, also after errors. A kind whose
server keeps counters (hits, commands, transactions) reads them with `counters`, next to
its protocol, for the telemetry of a run (`harness.run.telemetry`).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.hosts import Host, Process
from harness.hosts.endpoint import Endpoint  # re-exported: services hand endpoints out
from harness.services.packages import SystemPackage
from harness.settings import Setting, resolve


@dataclass(frozen=True)
class Step:
    """A timeline step on one service, as the spec checks it: the index of the event in
    the spec's timeline, its time, action and arguments."""

    index: int
    at_s: float
    action: str
    args: Mapping[str, Any]


#: add_node and remove_node, for kinds whose nodes come and go while clients run.
NODE_ACTION_ARGS: Mapping[str, Mapping[str, Setting]] = {
    "add_node": {"host": Setting((str,), None, "spec host of the new node; default: the "
                                               "next of the service's hosts")},
    "remove_node": {"node": Setting((int,), -1, "which node: its index from 0 in the order "
                                                "they started, or from the end (-1: last)")},
}


def check_node_steps(name: str, nodes: int, hosts: list[str], steps: list[Step]
                     ) -> list[tuple[Step, str, str]]:
    """`NODE_ACTION_ARGS` steps, following the node count from `nodes` at the start: an
    added node's host is one of `hosts`; a removed one exists and is not the last."""
    out = []
    for step in steps:
        if step.action == "add_node":
            host = step.args.get("host")
            if host is not None and host not in hosts:
                out.append((step, "args.host", f"{host!r} is not one of {name}'s hosts {hosts}"))
            nodes += 1
        elif step.action == "remove_node":
            node = step.args.get("node", -1)
            if nodes < 2:
                out.append((step, "", f"at {step.at_s:g} s {name} has one node left; remove_node "
                                "would remove the last"))
            elif isinstance(node, int) and not -nodes <= node < nodes:
                out.append((step, "args.node", f"there is no node {node} at {step.at_s:g} s: "
                                         f"{nodes} nodes, 0 to {nodes - 1} (or -1 to "
                                         f"-{nodes})"))
            nodes -= 1
    return out


@dataclass
class RunningService:
    """A started server. `stop()` is idempotent."""

    name: str
    kind: str
    host: Host
    endpoint: Endpoint
    version: str
    config: dict[str, Any]
    processes: list[Process]
    workdir: str | None = None
    _stopped: bool = False
    #: What the launcher keeps for later calls (e.g. the psql that reads counters);
    #: not part of the manifest.
    internal: dict[str, Any] = field(default_factory=dict, repr=False)

    def info(self) -> dict[str, Any]:
        """What the manifest records about this service."""
        return {
            "kind": self.kind,
            "host": self.host.name,
            "address": self.endpoint.host,
            "port": self.endpoint.port,
            "version": self.version,
            "config": self.config,
            "pids": [p.pid for p in self.processes],
        }

    def alive(self) -> bool:
        return all(self.host.is_alive(p) for p in self.processes)

    def server_processes(self) -> list[Process]:
        """The server processes running now, for the run's telemetry (their CPU and
        memory): `processes`, unless a kind keeps them elsewhere."""
        return list(self.processes)

    def scale(self, action: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Change the running service (e.g. add a node) while clients run; returns what
        the manifest records about the step. Only kinds that declare `actions` can."""
        raise NotImplementedError(f"{self.kind} {self.name!r} cannot {action!r}")

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for proc in reversed(self.processes):
            self.host.stop(proc)
        if self.workdir:
            self.host.remove_tree(self.workdir)


class Service(abc.ABC):
    """A kind of server the harness can start (memcached, postgres, redis, ...)."""

    kind: str
    #: Accepted settings; the spec validator rejects anything else before a run starts.
    settings: Mapping[str, Setting]
    #: Executables the service needs on its host (for `harness hosts check`).
    binaries: tuple[str, ...]
    #: The system packages that provide them: the one declaration the installers, the
    #: manual's server table (docs/servers.md) and the test fixtures are checked
    #: against (`harness.services.catalog`).
    packages: tuple[SystemPackage, ...] = ()
    #: When True, the runner passes `start(..., peers=...)`: the endpoints of the services
    #: started before this one in the spec, by kind (an app that needs its memcached).
    needs_peers: bool = False
    #: When True, the runner passes `start(..., hosts=...)`: every connected spec host by
    #: name, for services spread over the hosts named in their `hosts` setting.
    needs_hosts: bool = False
    #: When True, the runner passes `start(..., access=...)`: the exact addresses the
    #: control machine and the spec's client machines connect from (`services.access`),
    #: for servers that admit by address (PostgreSQL's pg_hba.conf).
    needs_access: bool = False
    #: Timeline actions its RunningService can `scale` (spec field `timeline`), and the
    #: arguments each takes (checked by the spec like settings).
    actions: tuple[str, ...] = ()
    action_args: Mapping[str, Mapping[str, Setting]] = {}
    #: Names of `counters` that are levels (connections open, items stored), not counts
    #: of events: a run reports their value at its end, not a difference.
    gauges: tuple[str, ...] = ()
    #: Whether a server of this kind the kit did not start can be measured at an address
    #: (`attach`; spec field `address`).
    attachable: bool = False
    #: The settings that still mean something for a server at an address (the rest only
    #: a launcher can apply, and are refused there).
    address_settings: tuple[str, ...] = ()

    @abc.abstractmethod
    def start(self, host: Host, name: str, settings: Mapping[str, Any]) -> RunningService:
        """Start the server with `settings` (defaults filled in) and wait until it answers."""

    def attach(self, host: Host, spec: Any, creds: Any) -> RunningService:
        """The server at `spec.address` (a spec's `ServiceSpec`), asked who it is as after
        a start (`harness.services.attached`); ServiceError in one line naming the
        service, what failed and what to fix. `creds`: its `Credentials`, or None."""
        raise NotImplementedError(f"{self.kind} cannot be measured at an address")

    def provides(self, settings: Mapping[str, Any]) -> str:
        """The service kind this service counts as for a workload's `requires` (its own,
        except for stand-ins such as `external`)."""
        return self.kind

    def resolve(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Settings with defaults filled in."""
        return resolve(settings, self.settings)

    def extra_hosts(self, settings: Mapping[str, Any]) -> list[str]:
        """Spec hosts this service runs on besides its own (connected by the runner and
        passed as `hosts=`): by default its `hosts` setting, if it `needs_hosts`."""
        return list(settings.get("hosts") or []) if self.needs_hosts else []

    def validate(self, settings: Mapping[str, Any], *, name: str = "",
                 behind: Sequence[str] = ()) -> list[str]:
        """Problems of settings taken together (messages without a prefix): every check
        `start` makes of them that needs no machine, so that `harness validate` says what
        `harness run` would (the spec checks every run's settings with this before
        anything starts). `name`: the service's; `behind`: the services it is in front
        of (its `after:`)."""
        return []

    def check_steps(self, name: str, host: str, settings: Mapping[str, Any],
                    steps: list[Step]) -> list[tuple[Step, str, str]]:
        """(step, field, problem) of a run's timeline steps on this service (given in
        time order) that `scale` could not take: a step must not fail mid-run for a
        reason known before the run. The field is relative to the step ("args.node")."""
        return []

    def missing_binaries(self, host: Host, settings: Mapping[str, Any] | None = None
                         ) -> list[str]:
        """The programs this kind needs (for these settings) that `host` lacks."""
        return [b for b in self.binaries if host.which(b) is None]

    def counters(self, svc: RunningService) -> dict[str, float] | None:
        """The running server's own counters now, name -> number, asked over its
        protocol (read at a run's edges, never per op); None: this kind keeps none."""
        return None

    def replication(self, svc: RunningService) -> dict[str, Any] | None:
        """Where the server's replicas stand against it now (offsets, links, lag), read
        at a run's edges for the telemetry's `replication`; None: it has no replicas."""
        return None

    def counter_delta(self, start: Mapping[str, float], end: Mapping[str, float]
                      ) -> dict[str, float]:
        """What happened between two `counters` readings: the difference of each
        counter (one first seen at the end counts from 0), the end value of `gauges`
        (a member's too: `replica0.connected_clients`)."""
        out: dict[str, float] = {}
        for k, v in end.items():
            gauge = k in self.gauges or k.rpartition(".")[2] in self.gauges
            d = v if gauge else v - start.get(k, 0)
            out[k] = round(d, 6) if isinstance(d, float) else d  # no 0.30000000000000004
        return out
