"""`harness run | collect | validate | cleanup | hosts check`: the commands that start
or stop something on the spec's machines."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.cli import exits
from harness.cli.exits import EXIT_FAILED_RUNS, EXIT_OK
from harness.errors import SpecError
from harness.results.schema import ERROR_SHARE_BAR
from harness.run import capacity
from harness.run.nocore import no_core_dumps


def _overrides(items: Sequence[str]) -> dict[str, Any]:
    from harness.spec.files import parse_override

    return dict(parse_override(item) for item in items)


def _labels(items: Sequence[str]) -> dict[str, str]:
    """`--label KEY=VALUE`s as a mapping (the last of a key wins); SpecError naming a bad
    one before anything runs."""
    from harness.results.labels import parse_label

    try:
        return dict(parse_label(item) for item in items)
    except ValueError as exc:
        raise SpecError([str(exc)]) from None


def _metrics(args: argparse.Namespace, spec: Any) -> dict[str, Any]:
    """`--metrics` (or the spec's `export: {prometheus: ...}`) as the Runner's keywords;
    SpecError naming the option if it is no address to listen at."""
    from harness.run.metrics import LINGER_S
    from harness.spec.access import metrics_listen

    where = spec.metrics_at
    if getattr(args, "metrics", None) is not None:
        try:
            where = metrics_listen(args.metrics)
        except ValueError as exc:
            raise SpecError([f"--metrics: {exc}"]) from None
    linger = getattr(args, "metrics_linger", None)
    if linger is not None and not linger >= 0:
        raise SpecError(["--metrics-linger: must be 0 or more seconds"])
    return {"metrics": where, "metrics_linger_s": LINGER_S if linger is None else linger}


def _until(args: argparse.Namespace) -> dict[str, Any]:
    """`--until decided [--budget T] [--equivalence M]` as an override of `until`."""
    until = getattr(args, "until", None)
    extra = {k: v for k in ("budget", "equivalence")
             if (v := getattr(args, k, None)) is not None}
    if until is None:
        if extra:
            raise SpecError([f"--{next(iter(extra))}: goes with --until decided"])
        return {}
    return {"until": {"decided": True, **extra}}


def cmd_run(args: argparse.Namespace) -> int:
    from harness.run.interrupts import Interrupts
    from harness.run.runner import Runner
    from harness.spec import load_spec
    from harness.spec.access import unverified_tls, unverified_tls_line

    labels = _labels(args.label)
    spec = load_spec(args.spec, {**_overrides(args.set), **_until(args)}, labels)
    no_core_dumps()
    for name in unverified_tls(spec.services, spec.grid):
        print(unverified_tls_line(name, spec.services[name]), file=sys.stderr, flush=True)
    interrupts = Interrupts(say=lambda msg: print(msg, file=sys.stderr, flush=True))
    search = capacity.settings_from(spec.raw.get("search"), args.search, args.resolution)
    metrics = _metrics(args, spec)
    if search is not None:
        if metrics["metrics"] is not None:
            raise SpecError(["--metrics / export.prometheus: a capacity search serves no "
                             "/metrics endpoint (its steps are separate grids); drop one"])
        return _run_search(args, spec, search, interrupts)
    runner = Runner(spec, Path(args.out), resume=args.resume, progress=not args.no_progress,
                    live=not args.quiet, interrupts=interrupts, **metrics)
    plans = runner.plans()
    if args.dry_run:
        if spec.design is not None:
            print("\n".join(spec.design.describe()))
        for p in plans:
            print(f"{p.index:4d}  {p.config_id}  rep {p.repetition}")
        order = spec.order + (f" (seed {spec.order_seed})" if spec.order == "random" else "")
        starts = runner.server_starts(plans)
        print(f"{len(plans)} run(s) of {spec.name!r} ({spec.workload}) in {order} order, "
              f"{starts} server start(s) ({spec.servers} servers); nothing was started")
        return EXIT_OK
    exits.current.interrupts = interrupts
    interrupts.install()
    try:
        outcomes = runner.run()
    finally:
        interrupts.uninstall()
    failed = sum(o.status == "failed" for o in outcomes)
    partial = sum(o.status == "partial" for o in outcomes)
    print(f"{spec.name}: {len(outcomes)} run(s) written to {Path(args.out) / spec.name} "
          f"({failed} failed, {partial} partial)")
    # Failed ops are a finding, not a footnote: a "complete" run with errors beyond a
    # trace is named, and the command fails, as for a failed run.
    erring = [o for o in outcomes if o.status != "failed" and o.error_rate > ERROR_SHARE_BAR]
    if erring:
        shown = ", ".join(f"{o.plan.label()} ({o.error_rate:.1%})" for o in erring[:5])
        more = f" and {len(erring) - 5} more" if len(erring) > 5 else ""
        print(f"{spec.name}: {len(erring)} run(s) with failed ops over {ERROR_SHARE_BAR:.1%} "
              f"of their measured ops: {shown}{more}; their latencies and throughput include "
              "the failures (the `errors` check); `harness summary` gives the first error "
              "of each kind", file=sys.stderr)
    return EXIT_FAILED_RUNS if failed or erring else EXIT_OK


def _run_search(args: argparse.Namespace, spec: Any, search: Any, interrupts: Any) -> int:
    """`harness run --search`: the capacity at the SLO (`harness.run.capacity`)."""
    if args.dry_run:
        print(f"search of {spec.name!r} at {search.slo.text}: closed loop first, then open "
              f"loop at {', '.join(f'{f:g}' for f in capacity.COARSE)} of its rate, then "
              f"bisection to {search.resolution:.0%} (at most {search.max_steps} steps), "
              f"{spec.repetitions} run(s) per step; nothing was started")
        return EXIT_OK
    exits.current.interrupts = interrupts
    interrupts.install()
    try:
        result = capacity.run_search(
            args.spec, _overrides(args.set), Path(args.out), search,
            runner_kw={"resume": args.resume, "progress": not args.no_progress,
                       "live": not args.quiet, "interrupts": interrupts},
            say=lambda m: print(m, flush=True), figures_dir=Path(args.figures),
            labels=spec.labels)
    finally:
        interrupts.uninstall()
    print(f"{spec.name}: {len(result.steps)} step(s); {result.stopped}; written to "
          f"{Path(args.out) / spec.name / 'search.json'}")
    print(result.last_line())
    return EXIT_OK if result.capacity_ops_s is not None else EXIT_FAILED_RUNS


def cmd_cleanup(args: argparse.Namespace) -> int:
    """Stop what an earlier `harness run` of SPEC left running and write the records it
    left on client machines (`harness.run.recovery`)."""
    from harness.run.inflight import ExperimentLock
    from harness.run.recovery import recover
    from harness.spec import load_spec

    spec = load_spec(args.spec, _overrides(args.set))
    exp_dir = Path(args.out) / spec.name
    if not exp_dir.is_dir():
        print(f"{spec.name}: nothing to clean up ({exp_dir} does not exist)")
        return EXIT_OK
    lock = ExperimentLock(exp_dir, spec=str(spec.path))
    lock.acquire()
    try:
        found = recover(spec, Path(args.out), lock=lock, by="harness cleanup")
    finally:
        left = not lock.state.empty()
        if left:
            lock.keep()
        else:
            lock.release()
    print(f"{spec.name}: {len(found.processes_stopped)} process(es) stopped, "
          f"{len(found.runs_written)} run(s) written, {len(found.temp_dirs)} temp "
          f"director(ies) dealt with" + (f"; {len(found.runs_left)} run(s) still on "
                                        "unreachable machines" if found.runs_left else ""))
    return EXIT_FAILED_RUNS if left else EXIT_OK


def cmd_collect(args: argparse.Namespace) -> int:
    """Fetch records that runs left on client machines (issue 13: transfers)."""
    from harness.run.inflight import ExperimentLock
    from harness.run.recollect import collect_pending
    from harness.run.recovery import recover
    from harness.spec import load_spec

    spec = load_spec(args.spec)
    exp_dir = Path(args.out) / spec.name
    lock = ExperimentLock(exp_dir, spec=str(spec.path))
    if exp_dir.is_dir():  # never beside a `harness run` writing the same experiment
        lock.acquire()
        recover(spec, Path(args.out), lock=lock, by="harness collect")
    try:
        report = collect_pending(spec, Path(args.out))
    finally:
        if lock.state.empty():
            lock.release()
        else:
            lock.keep()
    if not report.runs_with_pending:
        print(f"{spec.name}: nothing to collect (no run has records left on a machine)")
        return EXIT_OK
    print(f"{spec.name}: {report.runs_with_pending} run(s) had records on client machines; "
          f"{report.runs_completed} run(s) completed; {report.files_still_pending} record "
          "file(s) still there")
    return EXIT_FAILED_RUNS if report.files_still_pending else EXIT_OK


def _out_problems(spec: Any, out: str) -> list[str]:
    from harness.results.outdir import out_dir_problems
    from harness.spec import records_per_run

    return out_dir_problems(Path(out), spec.name, records_per_run(spec))


def cmd_validate(args: argparse.Namespace) -> int:
    from harness.services.attached import credential_problems
    from harness.spec import expand, load_spec
    from harness.spec.access import unverified_tls, unverified_tls_line

    spec = load_spec(args.spec, _overrides(args.set))
    problems = [f"--out {p}" for p in _out_problems(spec, args.out)]
    problems += credential_problems(spec.services)
    if problems:
        raise SpecError(problems)
    for name in unverified_tls(spec.services, spec.grid):  # as `harness run` says it
        print(unverified_tls_line(name, spec.services[name]), file=sys.stderr)
    print(f"{args.spec}: ok ({len(expand(spec))} runs)")
    return EXIT_OK


def cmd_hosts_check(args: argparse.Namespace) -> int:
    """Everything the spec's machines must offer (harness.run.preflight), one line each."""
    from harness.run import preflight
    from harness.spec import load_spec

    spec = load_spec(args.spec, _overrides(args.set))
    bad = 0
    for problem in _out_problems(spec, args.out):
        bad += 1
        print(f"--out {problem}")
    for problem in preflight.loopback_problems(spec):
        bad += 1
        print(f"{args.spec}: {problem}")
    hosts, failed = preflight.connect_all(spec, list(spec.hosts))
    try:
        no_python: set[str] = set()
        for name, hspec in spec.hosts.items():
            if name in failed:
                bad += 1
                print(f"{name} ({hspec.target}): unreachable: {failed[name]}")
                continue
            problems = preflight.host_problems(spec, name, hosts[name])
            no_python |= {name} if any(p.startswith("python ") for p in problems) else set()
            bad += bool(problems)
            print(f"{name} ({hspec.target}): {'; '.join(problems) or 'ok'}")
        by_address = preflight.admitting_services(spec)
        for r in preflight.reach(spec, hosts, frozenset(no_python)):
            problem = r.problem or preflight.translation_problem(
                r, by_address.get(r.server, []))
            bad += problem is not None
            print(f"reach {r.source} -> {r.server} ({r.address}, a free TCP port): "
                  + (f"ok, from {r.from_address}" if problem is None
                     else f"FAILED: {problem}"))
    finally:
        for h in hosts.values():
            h.close()
    return EXIT_OK if not bad else EXIT_FAILED_RUNS
