"""The checks of one section of a spec each (hosts, grid keys, timeline, exclude, until,
the pause), called by `load`'s validation with its `bad(field, message)`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.hosts.hostspec import HostSpec
from harness.settings import Setting, did_you_mean, report_settings, resolve
from harness.spec.access import listen_problem, metrics_listen
from harness.spec.decided import validate_decided
from harness.spec.files import (
    MAX_INVENTORY_BYTES,
    BadYaml,
    Unreadable,
    load_yaml,
    read_bounded,
)
from harness.spec.limits import (
    MAX_CONNECT_TIMEOUT_S,
    target_port_problem,
)
from harness.spec.model import (
    CLIENT_FIELDS,
    GRID_CLIENT_FIELDS,
    GRID_RUN_FIELDS,
    HOST_FIELDS,
    MAX_SWEEP_VALUES,
    RUN_FIELDS,
    TARGET_RE,
    TIMELINE_FIELDS,
    UNTIL_FIELDS,
    DecideRule,
    ServiceSpec,
    TimelineEvent,
    UntilRule,
)


def check_pause(pause: Any, grid: Mapping[str, tuple[Any, ...]], run_d: Mapping[str, Any],
                 search: bool, bad: Any) -> None:
    """clients.pause_us batches a closed loop; in an open loop it would hold ops past
    their intended starts, and a capacity search runs open loops."""
    paused = [v for v in (pause, *grid.get("clients.pause_us", ())) if is_number(v) and v > 0]
    if not paused:
        return
    where = "clients.pause_us" if is_number(pause) and pause > 0 else "grid.clients.pause_us"
    if run_d["rate_ops_s"] is not None or "run.rate_ops_s" in grid:
        bad(where, "only a closed loop pauses (run.rate_ops_s is set: an open loop's ops "
                   "would wait past their intended starts); drop one of the two")
    elif search:
        bad(where, "a capacity search offers open-loop rates, which do not pause; drop "
                   "clients.pause_us or search")


def validate_until(raw: Any, reps: int, bad: Any) -> UntilRule | DecideRule | None:
    """`until`: `repetitions` becomes the minimum; more follow while the CI is wide, or
    (`decided`) while a comparison with the first configuration is open."""
    if raw is None:
        return None
    if raw == "decided" or (isinstance(raw, Mapping) and "decided" in raw):
        return validate_decided({} if raw == "decided" else raw, reps, bad)
    if isinstance(raw, str):
        bad("until", f"expected decided or a mapping {{ci_within_pct, max_repetitions}}, "
                     f"got {raw!r}")
        return None
    if report_settings("until", raw, UNTIL_FIELDS, bad) or not isinstance(raw, Mapping):
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


def validate_export(raw: Any, bad: Any, search: bool = False) -> tuple[str, int] | None:
    """`export: {prometheus: PORT | ADDRESS:PORT}`: the live /metrics endpoint
    (`harness.run.metrics`); every interface is never bound, and a capacity search
    (`search`) serves none."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        bad("export", "expected a mapping, e.g. {prometheus: 127.0.0.1:9464}")
        return None
    for key in raw:
        if key != "prometheus":
            bad(f"export.{key}", f"unknown field{did_you_mean(str(key), ['prometheus'])}")
    where = raw.get("prometheus")
    if where is None:
        return None
    if not isinstance(where, (str, int)) or isinstance(where, bool):
        bad("export.prometheus", "expected PORT or ADDRESS:PORT, e.g. 127.0.0.1:9464")
        return None
    if search:
        bad("export.prometheus", "a capacity search (search:) serves no /metrics "
                                 "endpoint; drop one of the two")
        return None
    try:
        return metrics_listen(str(where))
    except ValueError as exc:
        bad("export.prometheus", str(exc))
        return None


def validate_exclude(raw: Any, grid: Mapping[str, tuple[Any, ...]], bad: Any
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


def validate_timeline(raw: Any, services: Mapping[str, ServiceSpec],
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
    length = sum(v for v in (run_d["duration_s"], run_d["warmup_s"]) if is_number(v))
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
        if not is_number(at) or not 0 <= at < math.inf:  # not NaN either
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
            report_settings(f"{where}.args", args, schema, bad)
        if isinstance(at, int | float) and isinstance(args, Mapping):
            events.append(TimelineEvent(float(at), action, sname, dict(args)))
    return tuple(events)


def grid_setting(
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
        if svc.address is not None and parts[2] not in SERVICES.get(svc.kind).address_settings:
            bad(f"grid.{key}", f"service {parts[1]!r} is at an address: the kit cannot "
                               f"change its {parts[2]}")
            return None
        return schema[parts[2]]
    if key in params:
        return params[key]
    if check_params:
        bad(f"grid.{key}", f"not a workload parameter{did_you_mean(key, params)}; known: "
                           f"{sorted(params)}, run.rate_ops_s, clients.<field>, "
                           "services.<name>.<setting>")
    return None


def read_inventory(path: Path, inv: Any, bad: Any) -> Mapping[str, Any]:
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


def validate_hosts(path: Path, data: Mapping[str, Any], bad: Any) -> dict[str, HostSpec]:
    inv = data.get("inventory")
    inventory = read_inventory(path, inv, bad) if inv is not None else {}
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
        for key, value in (("address", entry.get("address")),
                           ("target", _target_address(entry.get("target")))):
            if isinstance(value, str) and (problem := listen_problem(value)):
                bad(f"{where}.{key}", problem)
                ok = False
        timeout = entry.get("connect_timeout_s")
        if is_number(timeout) and not 0 < timeout <= MAX_CONNECT_TIMEOUT_S:
            bad(f"{where}.connect_timeout_s", "must be more than 0 and at most "
                                              f"{MAX_CONNECT_TIMEOUT_S:,} s")
            ok = False
        if ok:
            hosts[str(hname)] = HostSpec(name=str(hname), **entry)
    return hosts


def _target_address(target: Any) -> str | None:
    """The host part of an SSH target `user@host:port` (None for localhost)."""
    if not isinstance(target, str) or target in ("localhost", "local"):
        return None
    host = target.rsplit("@", 1)[-1]
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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
    if not (is_number(lo) and is_number(hi)) or len(how) != 1:
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
        if not is_number(by) or not by > 1:
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
        if not is_number(by) or not by > 0:
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
