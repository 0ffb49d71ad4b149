"""Experiment specs: YAML -> validated `Spec`.

Validation collects every problem before anything runs, each as
``file:field: message (line N)``; one section's checks are in `sections`, what only
the expanded runs show in `plans`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.errors import RegistryError, SpecError
from harness.paths import name_problem
from harness.results.labels import labels_problems
from harness.settings import check_settings, check_value, did_you_mean, resolve
from harness.spec.access import SERVICE_FIELDS, backends, service_access, service_after
from harness.spec.design import MAX_FACTORS, Design, fractional
from harness.spec.files import (
    MAX_SPEC_BYTES,
    BadYaml,
    Unreadable,
    load_yaml,
    override_problem,
    read_bounded,
)
from harness.spec.limits import (
    run_problems,
)
from harness.spec.model import (
    CLIENT_FIELDS,
    GRID_RUN_FIELDS,
    MAX_RUNS,
    ORDERS,
    RUN_FIELDS,
    SERVER_MODES,
    TOP_LEVEL,
    ClientSpec,
    RunSize,
    ServiceSpec,
    Spec,
)
from harness.spec.plans import canonical, check_grid, check_plans
from harness.spec.probe import validate_probe
from harness.spec.sections import (
    check_pause,
    grid_setting,
    is_number,
    sweep_values,
    validate_exclude,
    validate_export,
    validate_hosts,
    validate_timeline,
    validate_until,
)


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


def load_spec(path: Path | str, overrides: Mapping[str, Any] | None = None,
              labels: Mapping[str, str] | None = None) -> Spec:
    """Read and validate a spec file; raise SpecError listing every problem. `labels`
    (`harness run --label`) add to or replace the spec's own."""
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
    if labels:
        own = data.get("labels")
        data["labels"] = {**(own if isinstance(own, Mapping) else {}), **labels}
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


def validate_design(raw: Any, grid: Mapping[str, Sequence[Any]], data: Mapping[str, Any],
                    bad: Any) -> Design | None:
    """The fractional factorial a spec's ``design:`` asks for (None: the full grid)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        bad("design", "expected {kind: full | fractional, resolution: N}")
        return None
    for key in raw:
        if key not in ("kind", "resolution"):
            bad(f"design.{key}", "unknown field (kind, resolution)")
    kind = raw.get("kind", "full")
    if kind == "full":
        if "resolution" in raw:
            bad("design.resolution", "only kind: fractional has a resolution")
        return None
    if kind != "fractional":
        bad("design.kind", f"{kind!r}: must be full or fractional")
        return None
    res = raw.get("resolution")
    if not isinstance(res, int) or isinstance(res, bool) or res < 3:
        bad("design.resolution", "an integer of 3 or more: III keeps main effects apart, "
                                 "IV also from two-factor interactions, V everything "
                                 "up to two factors")
        return None
    if len(grid) < 3:
        bad("design", f"a fractional design needs 3 or more grid keys (this grid has "
                      f"{len(grid)}): with fewer, run the full grid")
        return None
    two = [k for k, v in grid.items() if len(v) != 2]
    if two:
        bad("design", f"every grid key needs exactly two values for a two-level design; "
                      f"{', '.join(two)} ha{'s' if len(two) == 1 else 've'} "
                      f"{', '.join(str(len(grid[k])) for k in two)}")
        return None
    if res > len(grid) + 1:
        bad("design.resolution", f"{res} is more than {len(grid)} factors allow "
                                 f"({len(grid) + 1}: the full grid)")
        return None
    if len(grid) > MAX_FACTORS:
        bad("design", f"{len(grid)} grid keys: a fractional design takes at most "
                      f"{MAX_FACTORS}")
        return None
    if data.get("exclude"):
        bad("exclude", "a fractional design chooses its points: no exclude with it")
        return None
    return fractional(list(grid), [grid[k] for k in grid], res)


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

    hosts = validate_hosts(path, data, bad)

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
            if k not in SERVICE_FIELDS:
                hint = did_you_mean(str(k), SERVICE_FIELDS)
                bad(f"{where}.{k}", f"unknown field{hint}")
        kind = sdef.get("kind", sname)
        host = sdef.get("host", "localhost")
        # A server at an address needs no host: one named is the machine observed.
        if (not isinstance(host, str) or host not in hosts) and (
                "host" in sdef or "address" not in sdef):
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
        if "tls" in sdef:  # written beside address and auth; a setting (a grid key) really
            raw_settings = {**(raw_settings if isinstance(raw_settings, Mapping) else {}),
                            "tls": sdef["tls"]}
        access = service_access(where, sdef, kind, service, bad)
        if access.get("address") is not None and isinstance(raw_settings, Mapping):
            for k in [k for k in raw_settings if k not in service.address_settings]:
                bad(f"{where}.settings.{k}", "a launcher's setting: the server at "
                    f"{access['address']} runs with its own (the manifest records them as "
                    "it reports them); drop it, or let the kit start the server")
            raw_settings = {k: v for k, v in raw_settings.items()
                            if k in service.address_settings}
        report(check_settings(f"{where}.settings", raw_settings, service.settings))
        settings = resolve(raw_settings if isinstance(raw_settings, Mapping) else {},
                           service.settings)
        if service.needs_hosts and isinstance(settings.get("hosts"), list):
            for h in settings["hosts"]:
                if not isinstance(h, str) or h not in hosts:
                    bad(f"{where}.settings.hosts", f"unknown host {h!r}; hosts: {sorted(hosts)}")
        after = service_after(where, sdef, kind, list(services), bad)
        services[sname] = ServiceSpec(sname, kind, host, settings, **access, after=after)
    if workload is not None:
        for sname, svc in services.items():
            wipes = workload.clears.get(svc.kind) if svc.address is not None else None
            if wipes:
                bad(f"services.{sname}.address", f"workload {wname!r} wipes data on its "
                    f"{svc.kind} ({wipes}): it is never run against a server the kit did "
                    "not start; let the kit start one, or pick another workload")
        # A stand-in (kind `external`) counts as the kind it provides; services behind a
        # proxy (named in its `after:`) serve the proxy, not the workload.
        kinds = [SERVICES.get(s.kind).provides(s.settings) for s in services.values()
                 if s.name not in backends(services)]
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
        if len({canonical(v) for v in values}) != len(values):
            bad(where, "values repeat")
        setting = grid_setting(str(gkey), params_schema, services, workload is not None, bad)
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
    if is_number(limit) and not 0 <= limit <= 1:
        bad("run.fail_if_error_rate_above", f"{limit} is not a share of the ops: give a "
                                            "number from 0 to 1, e.g. 0.05 for 5%")
    on_failure = data.get("on_failure", "continue")
    if on_failure not in ("continue", "stop"):
        bad("on_failure", "must be 'continue' or 'stop'")
    design = validate_design(data.get("design"), grid, data, bad)
    order = data.get("order", "rounds" if design is not None else "interleaved")
    if order not in ORDERS:
        bad("order", f"must be one of {list(ORDERS)}")
    order_seed = data.get("order_seed", 1)
    if not isinstance(order_seed, int) or isinstance(order_seed, bool) or not (
            0 <= order_seed < 2**32):
        bad("order_seed", "must be an integer from 0 to 2**32 - 1")
        order_seed = 1
    if "order_seed" in data and order not in ("random", "rounds"):
        bad("order_seed", "only order: random and order: rounds use a seed")
    servers = data.get("servers", "shared")
    if servers not in SERVER_MODES:
        bad("servers", f"must be one of {list(SERVER_MODES)}")
    timeline = validate_timeline(data.get("timeline"), services, run_d, bad)
    if run_d["record_keys"] is True and workload is not None and not workload.records_keys:
        keyed = ", ".join(n for n in WORKLOADS.names() if WORKLOADS.get(n).records_keys)
        bad("run.record_keys", f"workload {workload.name!r} does not name its ops' keys; "
                               f"workloads that do: {keyed}")
    if workload is not None and isinstance(raw_params, Mapping):
        for msg in workload.validate(resolve(raw_params, params_schema), dict(grid)):
            bad("params", msg)
    check_pause(clients_d["pause_us"], grid, run_d, "search" in data, bad)
    probe = validate_probe(clients_d["probe"], hosts, clients_d["hosts"], run_d, bad)
    exclude = validate_exclude(data.get("exclude"), grid, bad)
    until = validate_until(data.get("until"), reps, bad)
    if "search" in data:
        from harness.spec.slo import settings_from

        try:
            settings_from(data.get("search"))
        except SpecError as exc:
            for problem in exc.problems:
                bad("search", problem.removeprefix("search: ").removeprefix("search."))

    metrics_at = validate_export(data.get("export"), bad, search="search" in data)
    labels = data.get("labels") or {}
    for problem in labels_problems(labels):
        bad("labels", problem)
    if not isinstance(name, str) or workload is None:
        return None
    return Spec(
        path=path, name=name, description=str(data.get("description", "")).strip(),
        workload=workload.name, hosts=hosts, services=services,
        clients=ClientSpec(tuple(clients_d["hosts"]), clients_d["processes"],
                           clients_d["connections"], clients_d["inflight"],
                           float(clients_d["pause_us"]), probe),
        params=resolve(raw_params if isinstance(raw_params, Mapping) else {}, params_schema),
        grid=grid, repetitions=reps, size=RunSize(**run_d), on_failure=on_failure, raw=data,
        timeline=timeline,
        exclude=exclude,
        until=until,
        order=order if order in ORDERS else "interleaved",
        order_seed=order_seed,
        servers=servers if servers in SERVER_MODES else "shared",
        labels=dict(labels) if isinstance(labels, Mapping) else {},
        design=design, metrics_at=metrics_at,
    )
