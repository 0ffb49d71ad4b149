"""A validated spec -> a deterministic list of `RunPlan`s.

Grid keys are workload parameters, ``clients.<field>``, ``run.rate_ops_s`` or
``services.<name>.<setting>``; every combination of grid values is one configuration,
run `repetitions` times. Runs are ordered repetition-major (all configurations once, then
again), so slow drift on the machine spreads over configurations instead of biasing one."""

from __future__ import annotations

import itertools
import json
import math
import random
from dataclasses import replace
from typing import Any

from harness.results.ids import config_id
from harness.spec.limits import (
    machine_problems,
)
from harness.spec.model import MAX_RUNS, RunPlan, Spec


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
                for m in SERVICES.get(svc.kind).validate(svc.settings, name=name,
                                                         behind=svc.after)]
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


def check_grid(spec: Spec) -> list[tuple[str, str]]:
    """(field, problem) of a grid that cannot run as meant: more than `MAX_RUNS` runs
    (`until` may repeat up to its max_repetitions), every point excluded, fewer ops per
    run than client processes to share them, or more client processes and connections
    than one machine can have (`speclimits.machine_problems`)."""
    design = spec.design
    # A fractional design runs 2^(k-p) of the grid's 2^k points.
    configs = (2 ** (design.k - design.p) if design is not None else
               math.prod(len(v) for v in spec.grid.values()))
    reps = max(spec.repetitions, spec.until.max_repetitions if spec.until else 0)
    if configs * reps > MAX_RUNS:
        sizes = (f"a 2^({design.k}-{design.p}) design's {configs:,}" if design is not None
                 else " x ".join(str(len(v)) for v in spec.grid.values()) or "1")
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
    if spec.design is not None:  # a fractional factorial: its points, not all
        points = spec.design.points()
    else:
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
    shuffled, then `plans` kept, so a resumed grid keeps its order); rounds: interleaved,
    each repetition's configurations in their own seeded random order (a design's
    default); grouped: each configuration's runs together, in the order configurations
    first appear."""
    if spec.order == "interleaved":
        return list(plans)
    if spec.order == "random":
        full = expand(spec)
        random.Random(spec.order_seed).shuffle(full)
        rank = {p.index: i for i, p in enumerate(full)}
        return sorted(plans, key=lambda p: rank.get(p.index, len(rank) + p.index))
    if spec.order == "rounds":
        # Every configuration once per round (drift spreads over all of them), and the
        # order inside each round drawn afresh (no configuration always first).
        rng = random.Random(spec.order_seed)
        rank = {}
        for rep in range(1, max((p.repetition for p in plans), default=0) + 1):
            configs = sorted({p.config_id for p in expand(spec)})
            rng.shuffle(configs)
            rank.update({(rep, c): i for i, c in enumerate(configs)})
        return sorted(plans, key=lambda p: (p.repetition, rank.get((p.repetition,
                                                                     p.config_id), 0)))
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


def canonical(value: Any) -> str:
    """A comparable text of a YAML value (mappings may mix key types)."""
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)
