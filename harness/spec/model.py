"""What a spec says: its fields (with their types, defaults and bounds), and the frozen
records a validated spec becomes (`Spec`, and one `RunPlan` per run)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.hosts.hostspec import HostSpec
from harness.settings import Setting
from harness.spec.design import Design
from harness.spec.limits import (
    MAX_CONNECTIONS,
    MAX_CONSECUTIVE_ERRORS,
    MAX_INFLIGHT,
    MAX_PAUSE_US,
    MAX_PROCESSES,
    MAX_RATE_OPS_S,
    MAX_RUN_RECORDS,
    MAX_SECONDS,
    MIN_RATE_OPS_S,
)
from harness.spec.probe import ProbeSpec
from harness.text import redact_data

TOP_LEVEL = {
    "name": "experiment name: the directory under raw_results/",
    "description": "free text",
    "workload": "workload name (harness run --list-workloads)",
    "inventory": "YAML file mapping host names to targets",
    "hosts": "name -> 'localhost' | 'user@host:port' | inventory/ssh-config name | mapping",
    "services": "name -> {kind, host, settings} or {kind, address, auth, database}",
    "clients": "{hosts, processes, connections, inflight, pause_us, probe}",
    "params": "fixed workload parameters",
    "grid": "parameter -> list of values; every combination is one configuration",
    "repetitions": "runs per configuration",
    "run": "{ops | duration_s, warmup_ops | warmup_s, timeout_s, max_consecutive_errors}",
    "timeline": "list of {at_s, action, service, args}: steps run while clients run "
                "(e.g. add_node); needs run.duration_s",
    "on_failure": "continue | stop: what the grid does after a failed run",
    "order": "interleaved (default: every configuration once, then again) | random "
             "(seeded by order_seed) | grouped (each configuration's runs together) | "
             "rounds (interleaved, each round in its own seeded random order; the default "
             "with a design)",
    "order_seed": "seed of order: random or rounds (recorded in every manifest)",
    "design": "{kind: full | fractional, resolution: 3 | 4 | 5 ...}: fractional runs a "
              "two-level fractional factorial over the grid keys (two values each); "
              "`harness run --dry-run` shows it and its aliases",
    "servers": "shared (default: one server set per configuration, kept between its "
               "runs) | fresh (restarted before every run)",
    "until": "{ci_within_pct, max_repetitions}: add repetitions until the 95% CI of "
             "throughput is that tight; or decided ({decided: true, budget: 10m, "
             "equivalence: 5%, max_repetitions: 20}): rounds only for the comparisons "
             "with the first configuration still open",
    "search": "{slo, resolution, max_steps}: `harness run` finds the highest offered rate "
              "that meets the SLO, e.g. {slo: \"p99 < 1ms\"} (harness.run.capacity)",
    "exclude": "list of partial grid points ({grid key: value, ...}) left out of the grid",
    "labels": "name -> text written into every run's manifest (commit, version); "
              "`harness run --label KEY=VALUE` adds or replaces one",
    "export": "{prometheus: PORT | ADDRESS:PORT}: serve live /metrics while the grid runs "
              "(as `harness run --metrics`; docs/live.md)",
}


HOST_FIELDS = {
    "target": (str,), "python": (str,), "address": (str,), "known_hosts": (str,),
    "identity_file": (str,), "ssh_config": (str,), "accept_new_host_key": (bool,),
    "connect_timeout_s": (int, float),
}


# The bounds and why: harness/spec/limits.py.
CLIENT_FIELDS: dict[str, Setting] = {
    "hosts": Setting((list,), ["localhost"], "client hosts; processes are spread over them"),
    "processes": Setting((int,), 1, "client processes (one event loop each)", low=1,
                         high=MAX_PROCESSES, why="each is a Python process"),
    "connections": Setting((int,), 1, "connections per process", low=1,
                           high=MAX_CONNECTIONS, why="sockets of one event loop"),
    "inflight": Setting((int,), 1, "requests in flight per connection", low=1,
                        high=MAX_INFLIGHT, why="beyond any server's pipelining"),
    "pause_us": Setting((int, float), 0, "closed loop, native core: the load generator "
                        "sleeps this long before each wait while requests are in flight, so "
                        "replies and requests travel in batches (a server at its pipelined "
                        "limit serves more); each latency includes up to this much. 0: never",
                        low=0, high=MAX_PAUSE_US, why="longer is think time, not batching"),
    "probe": Setting((dict, type(None)), None, "{rate_ops_s, connections, host}: a latency "
                     "probe beside the load, one open-loop client process of its own "
                     "(harness.spec.probe; docs/live.md)"),
}


_RECORDS = "records a run may hold in memory; measure longer with run.duration_s"


_DAYS = f"{MAX_SECONDS // 86400} days"


RUN_FIELDS: dict[str, Setting] = {
    "ops": Setting((int, type(None)), None, "measured ops per run (over all clients)",
                   low=0, low_open=True, high=MAX_RUN_RECORDS, why=_RECORDS),
    "duration_s": Setting((int, float, type(None)), None, "measured seconds per run",
                          low=0, low_open=True, high=MAX_SECONDS, why=_DAYS),
    "warmup_ops": Setting((int,), 0, "ops before measurement, kept and flagged warmup",
                          low=0, high=MAX_RUN_RECORDS, why=_RECORDS),
    "warmup_s": Setting((int, float), 0.0, "seconds before measurement (duration runs)",
                        low=0, high=MAX_SECONDS, why=_DAYS),
    "timeout_s": Setting((int, float, type(None)), 10.0, "per-op timeout; null disables",
                         low=0, low_open=True, high=MAX_SECONDS, why=_DAYS),
    "max_consecutive_errors": Setting((int,), 200, "a client stops after this many errors",
                                      low=1, high=MAX_CONSECUTIVE_ERRORS),
    "rate_ops_s": Setting((int, float, type(None)), None,
                          "open loop: total target rate over all clients; null = closed loop",
                          low=MIN_RATE_OPS_S, high=MAX_RATE_OPS_S),
    "arrival": Setting((str,), "fixed", "open-loop schedule", choices=("fixed", "poisson")),
    # numpy's generators take no negative seed (the clients' schedules would fail).
    "seed": Setting((int,), 0, "seed of the poisson schedule", low=0),
    "record_keys": Setting((bool,), False, "a `key` column in ops.parquet: the key number "
                           "each op touched (workloads that know it: the get/set mixes, ycsb)"),
    "fail_if_error_rate_above": Setting(
        (int, float, type(None)), None,
        "a run whose share of error and timeout ops exceeds this (0..1) is `failed`, its "
        "records kept; null: only a run without records fails"),
}


#: Client fields a grid may vary (`grid: {clients.inflight: [1, 16]}`).
GRID_CLIENT_FIELDS = ("processes", "connections", "inflight", "pause_us")


#: Run fields a grid may vary (`grid: {run.rate_ops_s: [...]}`: an offered-load sweep).
GRID_RUN_FIELDS = ("rate_ops_s",)


#: The most values a sweep shorthand may make (more is surely a mistake).
MAX_SWEEP_VALUES = 1000


#: More runs than this in one spec is surely a mistake (and would take days).
MAX_RUNS = 100_000


TARGET_RE = re.compile(r"^(?:[A-Za-z0-9._-]+@)?(?:[A-Za-z0-9._-]+|\[[0-9a-fA-F:.]+\])(?::\d+)?$")


TIMELINE_FIELDS = ("at_s", "action", "service", "args")


UNTIL_FIELDS: dict[str, Setting] = {
    "ci_within_pct": Setting((int, float), None, "stop when the 95% CI half-width of "
                             "throughput is at most this % of its mean"),
    "max_repetitions": Setting((int,), 30, "never more repetitions than this",
                               high=MAX_RUNS, why="the most runs a spec may have"),
}

#: `until: decided` (or `until: {decided: true, ...}`): rounds for the comparisons still
#: open (`harness.run.decide`).
DECIDE_FIELDS: dict[str, Setting] = {
    "decided": Setting((bool,), True, "add rounds until every comparison with the first "
                       "configuration is decided or equivalent"),
    "budget": Setting((str, int, float, type(None)), None, "wall time the runs may take, "
                      "e.g. 10m, 90s, 1h (a number: seconds); none: max_repetitions bounds",
                      low=0, low_open=True, high=MAX_SECONDS, why=_DAYS),
    "equivalence": Setting((str, float, type(None)), "5%", "margin of \"equivalent\": "
                           "e.g. 5% (or 0.05)"),
    "max_repetitions": Setting((int,), 20, "never more repetitions than this",
                               high=MAX_RUNS, why="the most runs a spec may have"),
}


@dataclass(frozen=True)
class AuthSpec:
    """Where a server's password comes from (never the password itself): an environment
    variable or a file of the user's, read when the run starts."""

    user: str | None = None
    password_env: str | None = None
    password_file: str | None = None

    def source(self) -> str:
        """What the manifest and messages name instead of the password."""
        return (f"environment variable {self.password_env}" if self.password_env
                else f"file {self.password_file}")


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    kind: str
    host: str
    settings: Mapping[str, Any]
    #: HOST:PORT of a server the kit does not start (None: the kit starts it on `host`).
    address: str | None = None
    auth: AuthSpec | None = None
    #: The database of a PostgreSQL at an address.
    database: str | None = None
    #: Whether `host` was named: a server at an address is observed (its machine's
    #: /proc read) only on a host the spec names.
    observed: bool = True
    #: Services this one serves (a proxy in front of them): they start before it, stop
    #: after it, and serve it, not the workload.
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClientSpec:
    hosts: tuple[str, ...]
    processes: int
    connections: int
    inflight: int
    pause_us: float = 0.0
    #: `clients.probe`: a latency probe beside the load (`harness.spec.probe`).
    probe: ProbeSpec | None = None


@dataclass(frozen=True)
class RunSize:
    ops: int | None
    duration_s: float | None
    warmup_ops: int
    warmup_s: float
    timeout_s: float | None
    max_consecutive_errors: int
    rate_ops_s: float | None = None
    arrival: str = "fixed"
    seed: int = 0
    fail_if_error_rate_above: float | None = None
    record_keys: bool = False

    @property
    def open_loop(self) -> bool:
        return self.rate_ops_s is not None


@dataclass(frozen=True)
class TimelineEvent:
    """At `at_s` seconds after the clients start, `service`.scale(`action`, `args`)."""

    at_s: float
    action: str
    service: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UntilRule:
    """Repeat each configuration until its throughput's 95% CI (the one the report prints,
    judged with a pessimistic run-to-run spread: see `harness.run.until.ci_halfwidth_pct`) is within
    ± this % of the estimate, at most `max_repetitions` times (`repetitions` is the
    minimum)."""

    ci_within_pct: float
    max_repetitions: int


@dataclass(frozen=True)
class DecideRule:
    """`until: decided`: after the first round (`repetitions`), rounds only for the
    configurations whose comparison with the first is still open, by the sequential test
    of `harness.analysis.stats.sequential`, until all are decided or equivalent within
    ±`equivalence`, `budget_s` of wall time is spent, or `max_repetitions` is reached."""

    budget_s: float | None
    equivalence: float
    max_repetitions: int


@dataclass(frozen=True)
class Spec:
    path: Path
    name: str
    description: str
    workload: str
    hosts: Mapping[str, HostSpec]
    services: Mapping[str, ServiceSpec]
    clients: ClientSpec
    params: Mapping[str, Any]
    grid: Mapping[str, tuple[Any, ...]]
    repetitions: int
    size: RunSize
    on_failure: str = "continue"
    until: UntilRule | DecideRule | None = None
    timeline: tuple[TimelineEvent, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)
    #: Partial grid points to leave out: a point matching every key of one is skipped.
    exclude: tuple[Mapping[str, Any], ...] = ()
    #: The order runs are made in (`ordered`) and whether servers restart before each.
    order: str = "interleaved"
    order_seed: int = 1
    servers: str = "shared"
    #: Written into every run's manifest (`harness.results.labels`).
    labels: Mapping[str, str] = field(default_factory=dict)
    #: A fractional factorial over the grid (`harness.spec.design`); None: every point.
    design: Design | None = None
    #: `export: {prometheus: ...}`: where the live /metrics endpoint listens, if anywhere.
    metrics_at: tuple[str, int] | None = None


ORDERS = ("interleaved", "random", "grouped", "rounds")


SERVER_MODES = ("shared", "fresh")


@dataclass(frozen=True)
class RunPlan:
    """One run: a configuration (grid point) and a repetition number (1-based)."""

    index: int
    experiment: str
    workload: str
    config_id: str
    grid_point: Mapping[str, Any]
    repetition: int
    params: Mapping[str, Any]
    clients: ClientSpec
    services: Mapping[str, ServiceSpec]
    size: RunSize

    def label(self) -> str:
        point = " ".join(f"{k}={v}" for k, v in self.grid_point.items()) or "default"
        return f"{point} rep {self.repetition}"

    def services_key(self) -> str:
        """Runs with equal keys can share running servers."""
        return json.dumps({n: [s.kind, s.host, dict(s.settings)] for n, s in
                           sorted(self.services.items())}, sort_keys=True, default=str)


# Host fields that say where credentials live; never copied into raw results.
_CREDENTIAL_FIELDS = ("identity_file", "known_hosts", "ssh_config")


def recorded_spec(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The spec as every manifest keeps it: JSON-safe, without the hosts' identity
    files, known_hosts and ssh_config paths, and with any password in a URL masked."""
    doc = json.loads(json.dumps(dict(raw), default=str))

    hosts = doc.get("hosts")
    if isinstance(hosts, dict):
        for host in hosts.values():
            if isinstance(host, dict):
                for key in _CREDENTIAL_FIELDS:
                    host.pop(key, None)
    return redact_data(doc)
