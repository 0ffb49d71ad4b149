"""Experiment specs: YAML -> validated `Spec` -> a deterministic list of `RunPlan`s.

Validation collects every problem before anything runs, each as
``file:field: message (line N)``. Grid keys are workload parameters, ``clients.<field>``
or ``services.<name>.<setting>``; every combination of grid values is one configuration,
run `repetitions` times. Runs are ordered repetition-major (all configurations once, then
again), so slow drift on the machine spreads over configurations instead of biasing one.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from harness.errors import RegistryError, SpecError
from harness.hostspec import HostSpec
from harness.paths import name_problem
from harness.results.ids import config_id
from harness.settings import Setting, check_settings, check_value, did_you_mean, resolve
from harness.specfile import (
    MAX_INVENTORY_BYTES,
    MAX_SPEC_BYTES,
    BadYaml,
    Unreadable,
    load_yaml,
    override_problem,
    read_bounded,
)
from harness.speclimits import (
    MAX_CONNECT_TIMEOUT_S,
    MAX_CONNECTIONS,
    MAX_CONSECUTIVE_ERRORS,
    MAX_INFLIGHT,
    MAX_PAUSE_US,
    MAX_PROCESSES,
    MAX_RATE_OPS_S,
    MAX_RUN_RECORDS,
    MAX_SECONDS,
    MIN_RATE_OPS_S,
    machine_problems,
    run_problems,
    target_port_problem,
)

TOP_LEVEL = {
    "name": "experiment name: the directory under raw_results/",
    "description": "free text",
    "workload": "workload name (harness run --list-workloads)",
    "inventory": "YAML file mapping host names to targets",
    "hosts": "name -> 'localhost' | 'user@host:port' | inventory/ssh-config name | mapping",
    "services": "name -> {kind, host, settings}",
    "clients": "{hosts, processes, connections, inflight, pause_us}",
    "params": "fixed workload parameters",
    "grid": "parameter -> list of values; every combination is one configuration",
    "repetitions": "runs per configuration",
    "run": "{ops | duration_s, warmup_ops | warmup_s, timeout_s, max_consecutive_errors}",
    "timeline": "list of {at_s, action, service, args}: steps run while clients run "
                "(e.g. add_node); needs run.duration_s",
    "on_failure": "continue | stop: what the grid does after a failed run",
    "order": "interleaved (default: every configuration once, then again) | random "
             "(seeded by order_seed) | grouped (each configuration's runs together)",
    "order_seed": "seed of order: random (recorded in every manifest)",
    "servers": "shared (default: one server set per configuration, kept between its "
               "runs) | fresh (restarted before every run)",
    "until": "{ci_within_pct, max_repetitions}: add repetitions until the 95% CI of "
             "throughput is that tight",
    "search": "{slo, resolution, max_steps}: `harness run` finds the highest offered rate "
              "that meets the SLO, e.g. {slo: \"p99 < 1ms\"} (harness.capacity)",
    "exclude": "list of partial grid points ({grid key: value, ...}) left out of the grid",
}
HOST_FIELDS = {
    "target": (str,), "python": (str,), "address": (str,), "known_hosts": (str,),
    "identity_file": (str,), "ssh_config": (str,), "accept_new_host_key": (bool,),
    "connect_timeout_s": (int, float),
}
# The bounds and why: harness/speclimits.py.
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


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    kind: str
    host: str
    settings: Mapping[str, Any]


@dataclass(frozen=True)
class ClientSpec:
    hosts: tuple[str, ...]
    processes: int
    connections: int
    inflight: int
    pause_us: float = 0.0


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
    judged with a pessimistic run-to-run spread: see `runner.ci_halfwidth_pct`) is within
    ± this % of the estimate, at most `max_repetitions` times (`repetitions` is the
    minimum)."""

    ci_within_pct: float
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
    until: UntilRule | None = None
    timeline: tuple[TimelineEvent, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)
    #: Partial grid points to leave out: a point matching every key of one is skipped.
    exclude: tuple[Mapping[str, Any], ...] = ()
    #: The order runs are made in (`ordered`) and whether servers restart before each.
    order: str = "interleaved"
    order_seed: int = 1
    servers: str = "shared"


ORDERS = ("interleaved", "random", "grouped")
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


class _Lines:
    """Maps a field path to its line in the YAML source, for error messages."""

    def __init__(self, node: yaml.Node | None) -> None:
        self.lines: dict[tuple[str, ...], int] = {}
        if node is not None:
            self._walk(node, ())

    def _walk(self, node: yaml.Node, path: tuple[str, ...]) -> None:
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                sub = (*path, str(key.value))
                self.lines[sub] = key.start_mark.line + 1
                self._walk(value, sub)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._walk(item, (*path, str(i)))

    def line(self, dotted: str) -> int | None:
        path = tuple(p for p in dotted.split(".") if p)
        while path and path not in self.lines:
            path = path[:-1]
        return self.lines.get(path)


def _clip(text: str, most: int) -> str:
    return text if len(text) <= most else f"{text[:most]}... ({len(text) - most:,} more)"


class _Problems:
    """Collects problems: `bad(field, message)` as `file:field: message (line N)`, or
    `(--set KEY)` for a value an override gave, and `bad.raw(text)` as is (a line that
    names another file, the inventory)."""

    def __init__(self, path: Path, lines: _Lines, overridden: Iterable[str] = ()) -> None:
        self.path, self.lines = path, lines
        self.overridden = list(overridden)
        self.problems: list[str] = []

    def __call__(self, dotted: str, message: str) -> None:
        key = next((k for k in self.overridden
                    if dotted == k or dotted.startswith(f"{k}.")), None)
        line = None if key else self.lines.line(dotted)
        where = f" (--set {key})" if key else f" (line {line})" if line else ""
        # A field or value a spec quotes back may be up to the file's size: clipped.
        self.problems.append(f"{self.path}:{_clip(dotted, 200)}: {_clip(message, 1000)}"
                             + where)

    def raw(self, text: str) -> None:
        self.problems.append(text)


#: Top-level fields whose keys contain dots themselves (grid keys such as
#: `services.kv.appendonly`): `--set grid.services.kv.appendonly=[...]` names one key.
DOTTED_KEY_FIELDS = ("grid",)


def _apply_override(data: dict[str, Any], dotted: str, value: Any) -> None:
    head, _, rest = dotted.partition(".")
    keys = [head, rest] if head in DOTTED_KEY_FIELDS and rest else dotted.split(".")
    cur = data
    for k in keys[:-1]:
        cur = cur.setdefault(k, {})
        if not isinstance(cur, dict):
            raise SpecError([f"--set {dotted}: {k} is not a mapping"])
    cur[keys[-1]] = value


def load_spec(path: Path | str, overrides: Mapping[str, Any] | None = None) -> Spec:
    """Read and validate a spec file; raise SpecError listing every problem."""
    path = Path(path)
    try:
        raw_bytes = read_bounded(path, MAX_SPEC_BYTES, "a spec")
    except Unreadable as exc:
        raise SpecError([f"{path}: cannot read spec ({exc})"]) from None
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw_bytes.count(b"\n", 0, exc.start) + 1
        raise SpecError([f"{path}:{line}: not UTF-8 text (byte 0x{raw_bytes[exc.start]:02x} "
                         f"at offset {exc.start}); save the spec as UTF-8"]) from None
    try:
        node, data = load_yaml(text)
    except BadYaml as exc:
        raise SpecError([p.text(str(path)) for p in exc.problems]) from None
    if not isinstance(data, dict):
        raise SpecError([f"{path}: a spec must be a YAML mapping at the top level"])
    for dotted, value in (overrides or {}).items():
        problem = override_problem(value)
        if problem:
            raise SpecError([f"--set {dotted}: {problem}"])
        _apply_override(data, dotted, value)
    bad = _Problems(path, _Lines(node), overrides or {})
    spec = _validate(path, data, bad)
    if bad.problems:
        raise SpecError(bad.problems)
    assert spec is not None
    for dotted, message in check_grid(spec):
        bad(dotted, message)
    if bad.problems:
        raise SpecError(bad.problems)
    problems = check_plans(spec)
    if problems:
        raise SpecError(problems)
    return spec


def check_plans(spec: Spec) -> list[str]:
    """Problems only a whole run shows, found before anything starts: a service's
    settings taken together (`Service.validate`) and the workload with the run's size and
    clients (`Workload.check_plan`). Each message once, with the first run it concerns."""
    from harness.services import SERVICES
    from harness.workloads import WORKLOADS

    workload = WORKLOADS.get(spec.workload)
    found: dict[str, str] = {}
    for plan in expand(spec):
        msgs = [f"services.{name}.settings: {m}" for name, svc in plan.services.items()
                for m in SERVICES.get(svc.kind).validate(svc.settings)]
        msgs += [f"services.{name}.settings: unknown host {h!r}; hosts: {sorted(spec.hosts)}"
                 for name, svc in plan.services.items()
                 for h in SERVICES.get(svc.kind).extra_hosts(svc.settings)
                 if h not in spec.hosts]
        msgs += [f"run: {m}" for m in workload.check_plan(plan)]
        msgs += _step_problems(spec, plan)
        for m in msgs:
            found.setdefault(m, plan.label())
    return [f"{spec.path}:{m} (in run {label})" for m, label in found.items()]


def _step_problems(spec: Spec, plan: RunPlan) -> list[str]:
    """Each service's timeline steps, in time order, checked by its kind (a node removed
    must exist then, an added one go to one of its hosts)."""
    from harness.services import SERVICES
    from harness.services.base import Step

    ordered = sorted(enumerate(spec.timeline), key=lambda p: p[1].at_s)  # as they run
    out = []
    for name, svc in plan.services.items():
        steps = [Step(i, ev.at_s, ev.action, ev.args) for i, ev in ordered
                 if ev.service == name]
        if steps:
            out += [f"timeline.{'.'.join(filter(None, (str(step.index), field_)))}: {m}"
                    for step, field_, m in SERVICES.get(svc.kind).check_steps(
                        name, svc.host, svc.settings, steps)]
    return out


def _validate(path: Path, data: dict[str, Any], bad: Any) -> Spec | None:
    from harness.services import SERVICES
    from harness.workloads import WORKLOADS

    def report(msgs: list[str]) -> None:
        for m in msgs:
            field_, _, msg = m.partition(": ")
            bad(field_, msg)

    for key in data:
        if key not in TOP_LEVEL:
            bad(str(key), f"unknown field{did_you_mean(str(key), TOP_LEVEL)}")
    name = data.get("name")
    if problem := name_problem(name):
        bad("name", f"required: {problem}")
    workload = None
    wname = data.get("workload")
    if not isinstance(wname, str):
        bad("workload", f"required: one of {WORKLOADS.names()}")
    else:
        try:
            workload = WORKLOADS.get(wname)
        except RegistryError as exc:
            bad("workload", f"{exc}{did_you_mean(wname, WORKLOADS.names())}")

    hosts = _validate_hosts(path, data, bad)

    services: dict[str, ServiceSpec] = {}
    raw_services = data.get("services") or {}
    if not isinstance(raw_services, Mapping):
        bad("services", "expected a mapping of name -> {kind, host, settings}")
        raw_services = {}
    for sname, sdef in raw_services.items():
        where = f"services.{sname}"
        if not isinstance(sdef, Mapping):
            bad(where, "expected a mapping with kind, host, settings")
            continue
        for k in sdef:
            if k not in ("kind", "host", "settings"):
                hint = did_you_mean(str(k), ["kind", "host", "settings"])
                bad(f"{where}.{k}", f"unknown field{hint}")
        kind = sdef.get("kind", sname)
        host = sdef.get("host", "localhost")
        if not isinstance(host, str) or host not in hosts:
            bad(f"{where}.host", f"unknown host {host!r}; hosts: {sorted(hosts)}")
        if not isinstance(kind, str):
            bad(f"{where}.kind", f"expected a service kind name, got {kind!r}; kinds: "
                                 f"{SERVICES.names()}")
            continue
        try:
            service = SERVICES.get(kind)
        except RegistryError as exc:
            bad(f"{where}.kind", str(exc))
            continue
        raw_settings = sdef.get("settings")
        report(check_settings(f"{where}.settings", raw_settings, service.settings))
        settings = resolve(raw_settings if isinstance(raw_settings, Mapping) else {},
                           service.settings)
        if service.needs_hosts and isinstance(settings.get("hosts"), list):
            for h in settings["hosts"]:
                if not isinstance(h, str) or h not in hosts:
                    bad(f"{where}.settings.hosts", f"unknown host {h!r}; hosts: {sorted(hosts)}")
        services[sname] = ServiceSpec(sname, kind, host, settings)
    if workload is not None:
        # A stand-in (kind `external`) counts as the kind it provides.
        kinds = [SERVICES.get(s.kind).provides(s.settings) for s in services.values()]
        for needed in workload.requires:
            if kinds.count(needed) != 1:
                bad("services", f"workload {wname!r} needs exactly one {needed!r} service, "
                                f"found {kinds.count(needed)}")
        if workload.requires_one_of:
            found = [k for k in kinds if k in workload.requires_one_of]
            if len(found) != 1:
                bad("services", f"workload {wname!r} needs exactly one service of one of the "
                                f"kinds {', '.join(workload.requires_one_of)}, found "
                                f"{len(found)}" + (f" ({', '.join(found)})" if found else ""))

    raw_clients = data.get("clients") or {}
    report(check_settings("clients", raw_clients, CLIENT_FIELDS))
    clients_d = resolve(raw_clients if isinstance(raw_clients, Mapping) else {}, CLIENT_FIELDS)
    if not isinstance(clients_d["hosts"], list):
        clients_d["hosts"] = []
    elif not clients_d["hosts"]:
        bad("clients.hosts", "must name at least one host (processes are spread over them)")
    for h in clients_d["hosts"]:
        if not isinstance(h, str) or h not in hosts:
            bad("clients.hosts", f"unknown host {h!r}; hosts: {sorted(hosts)}")

    params_schema = workload.params if workload else {}
    raw_params = data.get("params") or {}
    if workload:
        report(check_settings("params", raw_params, params_schema))

    grid: dict[str, tuple[Any, ...]] = {}
    raw_grid = data.get("grid") or {}
    if not isinstance(raw_grid, Mapping):
        bad("grid", "expected a mapping of parameter -> list of values")
        raw_grid = {}
    for gkey, values in raw_grid.items():
        where = f"grid.{gkey}"
        if isinstance(values, Mapping):
            values = sweep_values(where, values, bad)
            if values is None:
                continue
        if not isinstance(values, list) or not values:
            bad(where, "expected a non-empty list of values, or a sweep {from, to, factor "
                       "| step | steps}")
            continue
        if len({_canon(v) for v in values}) != len(values):
            bad(where, "values repeat")
        setting = _grid_setting(str(gkey), params_schema, services, workload is not None, bad)
        if setting is not None:
            for i, v in enumerate(values):
                report(check_value(f"{where}.{i}", v, setting))
        grid[str(gkey)] = tuple(values)

    reps = data.get("repetitions", 1)
    if not isinstance(reps, int) or isinstance(reps, bool) or reps < 1:
        bad("repetitions", "must be an integer >= 1")
        reps = 1
    elif reps > MAX_RUNS:
        bad("repetitions", f"must be at most {MAX_RUNS:,} (the most runs a spec may have)")
        reps = 1
    raw_run = data.get("run") or {}
    report(check_settings("run", raw_run, RUN_FIELDS))
    run_d = resolve(raw_run if isinstance(raw_run, Mapping) else {}, RUN_FIELDS)
    if (run_d["ops"] is None) == (run_d["duration_s"] is None):
        bad("run", "give exactly one of run.ops or run.duration_s")
    for dotted, message in run_problems(run_d):
        bad(dotted, message)
    for field_ in GRID_RUN_FIELDS:  # each swept value with the rest of `run`
        for i, v in enumerate(grid.get(f"run.{field_}", ())):
            for _, message in run_problems({**run_d, field_: v}):
                bad(f"grid.run.{field_}.{i}", message)
    limit = run_d["fail_if_error_rate_above"]
    if _number(limit) and not 0 <= limit <= 1:
        bad("run.fail_if_error_rate_above", f"{limit} is not a share of the ops: give a "
                                            "number from 0 to 1, e.g. 0.05 for 5%")
    on_failure = data.get("on_failure", "continue")
    if on_failure not in ("continue", "stop"):
        bad("on_failure", "must be 'continue' or 'stop'")
    order = data.get("order", "interleaved")
    if order not in ORDERS:
        bad("order", f"must be one of {list(ORDERS)}")
    order_seed = data.get("order_seed", 1)
    if not isinstance(order_seed, int) or isinstance(order_seed, bool) or not (
            0 <= order_seed < 2**32):
        bad("order_seed", "must be an integer from 0 to 2**32 - 1")
        order_seed = 1
    if "order_seed" in data and order != "random":
        bad("order_seed", "only order: random uses a seed")
    servers = data.get("servers", "shared")
    if servers not in SERVER_MODES:
        bad("servers", f"must be one of {list(SERVER_MODES)}")
    timeline = _validate_timeline(data.get("timeline"), services, run_d, bad)
    if run_d["record_keys"] is True and workload is not None and not workload.records_keys:
        keyed = ", ".join(n for n in WORKLOADS.names() if WORKLOADS.get(n).records_keys)
        bad("run.record_keys", f"workload {workload.name!r} does not name its ops' keys; "
                               f"workloads that do: {keyed}")
    if workload is not None and isinstance(raw_params, Mapping):
        for msg in workload.validate(resolve(raw_params, params_schema), dict(grid)):
            bad("params", msg)
    _check_pause(clients_d["pause_us"], grid, run_d, "search" in data, bad)
    exclude = _validate_exclude(data.get("exclude"), grid, bad)
    until = _validate_until(data.get("until"), reps, bad)
    if "search" in data:
        from harness.slo import settings_from

        try:
            settings_from(data.get("search"))
        except SpecError as exc:
            for problem in exc.problems:
                bad("search", problem.removeprefix("search: ").removeprefix("search."))

    if not isinstance(name, str) or workload is None:
        return None
    return Spec(
        path=path, name=name, description=str(data.get("description", "")).strip(),
        workload=workload.name, hosts=hosts, services=services,
        clients=ClientSpec(tuple(clients_d["hosts"]), clients_d["processes"],
                           clients_d["connections"], clients_d["inflight"],
                           float(clients_d["pause_us"])),
        params=resolve(raw_params if isinstance(raw_params, Mapping) else {}, params_schema),
        grid=grid, repetitions=reps, size=RunSize(**run_d), on_failure=on_failure, raw=data,
        timeline=timeline,
        exclude=exclude,
        until=until,
        order=order if order in ORDERS else "interleaved",
        order_seed=order_seed,
        servers=servers if servers in SERVER_MODES else "shared",
    )


def _check_pause(pause: Any, grid: Mapping[str, tuple[Any, ...]], run_d: Mapping[str, Any],
                 search: bool, bad: Any) -> None:
    """clients.pause_us batches a closed loop; in an open loop it would hold ops past
    their intended starts, and a capacity search runs open loops."""
    paused = [v for v in (pause, *grid.get("clients.pause_us", ())) if _number(v) and v > 0]
    if not paused:
        return
    where = "clients.pause_us" if _number(pause) and pause > 0 else "grid.clients.pause_us"
    if run_d["rate_ops_s"] is not None or "run.rate_ops_s" in grid:
        bad(where, "only a closed loop pauses (run.rate_ops_s is set: an open loop's ops "
                   "would wait past their intended starts); drop one of the two")
    elif search:
        bad(where, "a capacity search offers open-loop rates, which do not pause; drop "
                   "clients.pause_us or search")


UNTIL_FIELDS: dict[str, Setting] = {
    "ci_within_pct": Setting((int, float), None, "stop when the 95% CI half-width of "
                             "throughput is at most this % of its mean"),
    "max_repetitions": Setting((int,), 30, "never more repetitions than this",
                               high=MAX_RUNS, why="the most runs a spec may have"),
}


def _validate_until(raw: Any, reps: int, bad: Any) -> UntilRule | None:
    """`until`: `repetitions` becomes the minimum; more follow while the CI is wide."""
    if raw is None:
        return None
    problems = check_settings("until", raw, UNTIL_FIELDS)
    for m in problems:
        field_, _, msg = m.partition(": ")
        bad(field_, msg)
    if problems or not isinstance(raw, Mapping):
        return None
    rule = resolve(raw, UNTIL_FIELDS)
    pct, most = rule["ci_within_pct"], rule["max_repetitions"]
    if pct is None or not 0 < pct < 100:
        bad("until.ci_within_pct", "required: a percentage between 0 and 100, e.g. 5")
        return None
    if most < max(reps, 2):
        bad("until.max_repetitions", f"must be at least repetitions ({reps}) and 2")
        return None
    return UntilRule(float(pct), most)


def _validate_exclude(raw: Any, grid: Mapping[str, tuple[Any, ...]], bad: Any
                      ) -> tuple[Mapping[str, Any], ...]:
    """`exclude`: a list of mappings of grid keys to values those keys take in the grid."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        bad("exclude", "expected a list of {grid key: value} mappings")
        return ()
    out = []
    for i, entry in enumerate(raw):
        where = f"exclude.{i}"
        if not isinstance(entry, Mapping) or not entry:
            bad(where, "expected a non-empty mapping of grid key -> value")
            continue
        ok = True
        for key, value in entry.items():
            if key not in grid:
                bad(f"{where}.{key}", f"not a grid key{did_you_mean(str(key), grid)}")
                ok = False
            elif value not in grid[key]:
                bad(f"{where}.{key}", f"{value!r} is not among the grid's values "
                                      f"{list(grid[key])}")
                ok = False
        if ok:
            out.append(dict(entry))
    return tuple(out)


def _validate_timeline(raw: Any, services: Mapping[str, ServiceSpec],
                       run_d: Mapping[str, Any], bad: Any) -> tuple[TimelineEvent, ...]:
    """`timeline`: events at times within the run, each an action the service's kind has."""
    from harness.services import SERVICES

    if raw is None:
        return ()
    if not isinstance(raw, list):
        bad("timeline", "expected a list of {at_s, action, service, args}")
        return ()
    if run_d["duration_s"] is None:
        bad("timeline", "needs run.duration_s: events happen at times within the run")
    length = sum(v for v in (run_d["duration_s"], run_d["warmup_s"]) if _number(v))
    events = []
    for i, ev in enumerate(raw):
        where = f"timeline.{i}"
        if not isinstance(ev, Mapping):
            bad(where, "expected a mapping {at_s, action, service, args}")
            continue
        for k in ev:
            if k not in ("at_s", "action", "service", "args"):
                bad(f"{where}.{k}", f"unknown field{did_you_mean(str(k), TIMELINE_FIELDS)}")
        at, action, sname, args = (ev.get("at_s"), ev.get("action"), ev.get("service"),
                                   ev.get("args") or {})
        if not _number(at) or not 0 <= at < math.inf:  # not NaN either
            bad(f"{where}.at_s", "required: seconds (>= 0) from the start of the clients")
        elif isinstance(run_d["duration_s"], int | float) and at >= length:
            bad(f"{where}.at_s", f"{at} s is not within the run ({length:g} s)")
        if not isinstance(args, Mapping):
            bad(f"{where}.args", "expected a mapping")
        if not isinstance(sname, str) or sname not in services:
            bad(f"{where}.service", f"unknown service {sname!r}; services: {sorted(services)}")
            continue
        kind = services[sname].kind
        actions = SERVICES.get(kind).actions
        if action not in actions:
            bad(f"{where}.action", f"{action!r} is not an action of {kind} service {sname!r}"
                                   f"; actions: {list(actions) or 'none'}")
            continue
        schema = SERVICES.get(kind).action_args.get(action)
        if schema is not None and isinstance(args, Mapping):
            for m in check_settings(f"{where}.args", args, schema):
                field_, _, msg = m.partition(": ")
                bad(field_, msg)
        if isinstance(at, int | float) and isinstance(args, Mapping):
            events.append(TimelineEvent(float(at), action, sname, dict(args)))
    return tuple(events)


def _grid_setting(
    key: str, params: Mapping[str, Setting], services: Mapping[str, ServiceSpec],
    check_params: bool, bad: Any,
) -> Setting | None:
    from harness.services import SERVICES

    parts = key.split(".")
    if parts[0] == "run" and len(parts) == 2:
        if parts[1] in GRID_RUN_FIELDS:
            return RUN_FIELDS[parts[1]]
        bad(f"grid.{key}", f"only {', '.join(f'run.{f}' for f in GRID_RUN_FIELDS)} can vary")
        return None
    if parts[0] == "clients" and len(parts) == 2:
        if parts[1] in GRID_CLIENT_FIELDS:
            return CLIENT_FIELDS[parts[1]]
        bad(f"grid.{key}", f"only {', '.join(f'clients.{f}' for f in GRID_CLIENT_FIELDS)} "
                           "can vary")
        return None
    if parts[0] == "services" and len(parts) == 3:
        svc = services.get(parts[1])
        if svc is None:
            bad(f"grid.{key}", f"unknown service {parts[1]!r}; services: {sorted(services)}")
            return None
        schema = SERVICES.get(svc.kind).settings
        if parts[2] not in schema:
            bad(f"grid.{key}", f"unknown {svc.kind} setting{did_you_mean(parts[2], schema)}")
            return None
        return schema[parts[2]]
    if key in params:
        return params[key]
    if check_params:
        bad(f"grid.{key}", f"not a workload parameter{did_you_mean(key, params)}; known: "
                           f"{sorted(params)}, run.rate_ops_s, clients.<field>, "
                           "services.<name>.<setting>")
    return None


def _read_inventory(path: Path, inv: Any, bad: Any) -> Mapping[str, Any]:
    """The inventory a spec names, bounded and checked as the spec itself is; problems
    inside it name the inventory file (`bad.raw`), the others the spec's field."""
    if not isinstance(inv, str) or not inv or "\0" in inv:
        bad("inventory", "expected the file name of an inventory (host name -> target)")
        return {}
    inv_path = (path.parent / inv).resolve()
    try:
        text = read_bounded(inv_path, MAX_INVENTORY_BYTES, "an inventory").decode()
        inventory = load_yaml(text)[1] or {}
    except (Unreadable, UnicodeDecodeError) as exc:
        bad("inventory", f"cannot read inventory {inv_path}: {exc}")
        return {}
    except BadYaml as exc:
        for p in exc.problems:
            bad.raw(p.text(str(inv_path)))
        return {}
    if not isinstance(inventory, Mapping):
        bad("inventory", f"{inv_path}: expected a mapping of host name -> target")
        return {}
    return inventory


def _validate_hosts(path: Path, data: Mapping[str, Any], bad: Any) -> dict[str, HostSpec]:
    inv = data.get("inventory")
    inventory = _read_inventory(path, inv, bad) if inv is not None else {}
    raw = data.get("hosts", {"localhost": "localhost"})
    if not isinstance(raw, Mapping) or not raw:
        bad("hosts", "expected a non-empty mapping of name -> target")
        return {}
    hosts: dict[str, HostSpec] = {}
    for hname, entry in raw.items():
        where = f"hosts.{hname}"
        if isinstance(entry, str) and entry in inventory:
            entry = inventory[entry]
        if isinstance(entry, str):
            entry = {"target": entry}
        if not isinstance(entry, Mapping):
            bad(where, "expected a target string or a mapping with 'target'")
            continue
        ok = True
        for k, v in entry.items():
            if k not in HOST_FIELDS:
                bad(f"{where}.{k}", f"unknown field{did_you_mean(str(k), HOST_FIELDS)}")
                ok = False
            elif not isinstance(v, HOST_FIELDS[k]) or (isinstance(v, bool) and bool not in
                                                        HOST_FIELDS[k]):
                bad(f"{where}.{k}", f"expected {HOST_FIELDS[k][0].__name__}, got {v!r}")
                ok = False
        target = entry.get("target", "localhost")
        if isinstance(target, str) and not TARGET_RE.match(target):
            bad(f"{where}.target", f"{target!r} is not localhost, user@host:port or a host name")
            ok = False
        elif isinstance(target, str) and target_port_problem(target):
            bad(f"{where}.target", str(target_port_problem(target)))
            ok = False
        timeout = entry.get("connect_timeout_s")
        if _number(timeout) and not 0 < timeout <= MAX_CONNECT_TIMEOUT_S:
            bad(f"{where}.connect_timeout_s", "must be more than 0 and at most "
                                              f"{MAX_CONNECT_TIMEOUT_S:,} s")
            ok = False
        if ok:
            hosts[str(hname)] = HostSpec(name=str(hname), **entry)
    return hosts


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _canon(value: Any) -> str:
    """A comparable text of a YAML value (mappings may mix key types)."""
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


def check_grid(spec: Spec) -> list[tuple[str, str]]:
    """(field, problem) of a grid that cannot run as meant: more than `MAX_RUNS` runs
    (`until` may repeat up to its max_repetitions), every point excluded, fewer ops per
    run than client processes to share them, or more client processes and connections
    than one machine can have (`speclimits.machine_problems`)."""
    configs = math.prod(len(v) for v in spec.grid.values())
    reps = max(spec.repetitions, spec.until.max_repetitions if spec.until else 0)
    if configs * reps > MAX_RUNS:
        sizes = " x ".join(str(len(v)) for v in spec.grid.values()) or "1"
        which = "repetitions" if reps == spec.repetitions else "until.max_repetitions"
        return [("grid", f"{sizes} configurations x {reps} {which} = {configs * reps:,} "
                         f"runs, more than {MAX_RUNS:,}; narrow the grid or split the "
                         "experiment")]
    plans = expand(spec)
    if not plans:
        return [("exclude", f"every one of the grid's {configs} configurations is excluded; "
                            "nothing would run")]
    problems: dict[tuple[str, str], None] = {}
    where = "grid.clients.processes" if "clients.processes" in spec.grid else "run.ops"
    for plan in plans:
        ops, procs = plan.size.ops, plan.clients.processes
        if ops is not None and ops < procs:
            problems[(where, f"{ops} ops cannot be shared by {procs} client processes (each "
                             "needs at least one); raise run.ops or lower clients.processes")
                     ] = None
        for problem in machine_problems(spec.hosts, plan.clients.hosts, procs,
                                        plan.clients.connections, spec.grid):
            problems[problem] = None
    return list(problems)


def expand(spec: Spec) -> list[RunPlan]:
    """Every configuration x repetition, repetition-major, deterministically."""
    keys = list(spec.grid)
    combos = itertools.product(*spec.grid.values())
    points = [dict(zip(keys, combo, strict=True)) for combo in combos]
    points = [p for p in points
              if not any(all(p[k] == v for k, v in ex.items()) for ex in spec.exclude)]
    plans: list[RunPlan] = []
    for rep in range(1, spec.repetitions + 1):
        for point in points:
            params = dict(spec.params)
            clients = spec.clients
            services = dict(spec.services)
            size = spec.size
            for k, v in point.items():
                parts = k.split(".")
                if parts[0] == "run" and len(parts) == 2:
                    size = replace(size, **{parts[1]: v})
                elif parts[0] == "clients" and len(parts) == 2:
                    clients = replace(clients, **{parts[1]: v})
                elif parts[0] == "services" and len(parts) == 3:
                    svc = services[parts[1]]
                    services[parts[1]] = replace(svc, settings={**svc.settings, parts[2]: v})
                else:
                    params[k] = v
            plans.append(RunPlan(len(plans), spec.name, spec.workload, config_id(point), point,
                                 rep, params, clients, services, size))
    return plans


def ordered(spec: Spec, plans: list[RunPlan]) -> list[RunPlan]:
    """`plans` (from `expand`, or the part of them still to run) in the order the spec
    asks for. interleaved: as `expand` makes them (repetition-major: slow drift spreads
    over every configuration); random: shuffled by `order_seed` (the whole grid is
    shuffled, then `plans` kept, so a resumed grid keeps its order); grouped: each
    configuration's runs together, in the order configurations first appear."""
    if spec.order == "interleaved":
        return list(plans)
    if spec.order == "random":
        full = expand(spec)
        random.Random(spec.order_seed).shuffle(full)
        rank = {p.index: i for i, p in enumerate(full)}
        return sorted(plans, key=lambda p: rank.get(p.index, len(rank) + p.index))
    first: dict[str, int] = {}
    for p in plans:
        first.setdefault(p.config_id, len(first))
    return sorted(plans, key=lambda p: (first[p.config_id], p.repetition))


#: The most a closed-loop client process does per second (the native core measured
#: ~150-210k ops/s on one core): bounds a duration run's records for the room check.
MAX_CLOSED_OPS_S_PER_PROCESS = 300_000


def records_per_run(spec: Spec) -> int:
    """At most how many records one run of `spec` keeps (every run of the grid): what
    the output directory must have room for (`harness.results.outdir`)."""
    most = 0
    for plan in expand(spec):
        size = plan.size
        if size.ops is not None:
            n = size.ops + size.warmup_ops
        else:
            seconds = float(size.duration_s or 0) + float(size.warmup_s or 0)
            rate = (size.rate_ops_s if size.rate_ops_s is not None
                    else MAX_CLOSED_OPS_S_PER_PROCESS * plan.clients.processes)
            n = int(seconds * rate) + size.warmup_ops
        most = max(most, n)
    return most


# Host fields that say where credentials live; never copied into raw results.
_CREDENTIAL_FIELDS = ("identity_file", "known_hosts", "ssh_config")
_URL_PASSWORD = re.compile(r"(://[^/:@\s]*):[^/@\s]*@")


def recorded_spec(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The spec as every manifest keeps it: JSON-safe, without the hosts' identity
    files, known_hosts and ssh_config paths, and with any password in a URL masked."""
    doc = json.loads(json.dumps(dict(raw), default=str))

    def scrub(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        if isinstance(value, str):
            return _URL_PASSWORD.sub(r"\1:***@", value)
        return value

    hosts = doc.get("hosts")
    if isinstance(hosts, dict):
        for host in hosts.values():
            if isinstance(host, dict):
                for key in _CREDENTIAL_FIELDS:
                    host.pop(key, None)
    return scrub(doc)


def sweep_values(where: str, sweep: Mapping[str, Any], bad: Any) -> list[Any] | None:
    """The values of a grid sweep shorthand: ``{from: A, to: B, factor: F}`` (A, A*F,
    ... up to B), ``{from: A, to: B, step: S}`` (A, A+S, ... up to B) or ``{from: A, to:
    B, steps: N}`` (N values from A to B, geometrically spaced, as load sweeps are; add
    ``spacing: linear`` for equal steps). B is included when the steps land on it
    (within 1e-9); whole values are ints, others kept to 4 significant digits. None
    (and `bad` called) when the sweep is malformed."""
    known = {"from", "to", "factor", "step", "steps", "spacing"}
    unknown = sorted(set(map(str, sweep)) - known)
    if unknown:
        bad(where, f"unknown sweep field(s) {unknown}; a sweep is {{from, to, factor | "
                   "step | steps [, spacing: geometric | linear]}")
        return None
    lo, hi = sweep.get("from"), sweep.get("to")
    how = [k for k in ("factor", "step", "steps") if k in sweep]
    if not (_number(lo) and _number(hi)) or len(how) != 1:
        bad(where, "a sweep needs numbers `from` and `to` and exactly one of `factor` "
                   "(geometric), `step` (linear) or `steps` (how many values)")
        return None
    lo, hi = float(lo), float(hi)
    by = sweep[how[0]]
    if not (math.isfinite(lo) and math.isfinite(hi)) or not lo < hi:
        bad(where, f"`from` ({sweep['from']}) must be below `to` ({sweep['to']})")
        return None
    spacing = sweep.get("spacing", "geometric" if how[0] != "step" else "linear")
    if spacing not in ("geometric", "linear") or ("spacing" in sweep and how[0] != "steps"):
        bad(where, "`spacing` (geometric | linear) goes with `steps` only")
        return None
    out: list[float] = []
    if how[0] == "factor":
        if not _number(by) or not by > 1:
            bad(f"{where}.factor", "must be a number above 1")
            return None
        if lo <= 0:
            bad(f"{where}.from", "a geometric sweep starts above 0")
            return None
        n = math.floor(math.log(hi / lo) / math.log(by) + 1e-9) + 1
        if n > MAX_SWEEP_VALUES:
            bad(where, f"{n:,} values, more than {MAX_SWEEP_VALUES:,}")
            return None
        out = [lo * by ** i for i in range(n)]
    elif how[0] == "step":
        if not _number(by) or not by > 0:
            bad(f"{where}.step", "must be a number above 0")
            return None
        n = math.floor((hi - lo) / by + 1e-9) + 1
        if n > MAX_SWEEP_VALUES:
            bad(where, f"{n:,} values, more than {MAX_SWEEP_VALUES:,}")
            return None
        out = [lo + by * i for i in range(n)]
    else:
        if not isinstance(by, int) or isinstance(by, bool) or not 2 <= by <= MAX_SWEEP_VALUES:
            bad(f"{where}.steps", f"must be an integer from 2 to {MAX_SWEEP_VALUES:,}")
            return None
        if spacing == "geometric" and lo <= 0:
            bad(f"{where}.from", "a geometric sweep starts above 0")
            return None
        out = ([lo * (hi / lo) ** (i / (by - 1)) for i in range(by)] if spacing == "geometric"
               else [lo + (hi - lo) * i / (by - 1) for i in range(by)])
    # Whole numbers as ints, the others to 4 significant digits: config ids and labels
    # read 2000 and 1931, not 2000.0000000002 and 1930.697728883.
    rounded = [v if abs(v - round(v)) < 1e-6 * max(1.0, abs(v)) else float(f"{v:.4g}")
               for v in out]
    return [round(v) if float(v).is_integer() else v for v in rounded]
