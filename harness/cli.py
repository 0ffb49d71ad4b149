"""`harness` command line: run | validate | summary | compare | report | import | export |
hosts | verify | list."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import paths
from harness.errors import HarnessError, SpecError
from harness.run import capacity

EXIT_OK, EXIT_FAILED_RUNS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143, as a shell reports a process killed by TERM
#: The signal state of the `harness run` in progress (`harness.run.interrupts`), for `main`.
_interrupts: Any = None
IMPORT_SHOWN_SKIPPED = 5


def _overrides(items: Sequence[str]) -> dict[str, Any]:
    from harness.spec.files import parse_override

    return dict(parse_override(item) for item in items)


def cmd_run(args: argparse.Namespace) -> int:
    global _interrupts
    from harness.run.interrupts import Interrupts
    from harness.run.runner import Runner
    from harness.spec import load_spec

    spec = load_spec(args.spec, _overrides(args.set))
    interrupts = Interrupts(say=lambda msg: print(msg, file=sys.stderr, flush=True))
    search = capacity.settings_from(spec.raw.get("search"), args.search, args.resolution)
    if search is not None:
        return _run_search(args, spec, search, interrupts)
    runner = Runner(spec, Path(args.out), resume=args.resume, progress=not args.no_progress,
                    live=not args.quiet, interrupts=interrupts)
    plans = runner.plans()
    if args.dry_run:
        for p in plans:
            print(f"{p.index:4d}  {p.config_id}  rep {p.repetition}")
        order = spec.order + (f" (seed {spec.order_seed})" if spec.order == "random" else "")
        starts = runner.server_starts(plans)
        print(f"{len(plans)} run(s) of {spec.name!r} ({spec.workload}) in {order} order, "
              f"{starts} server start(s) ({spec.servers} servers); nothing was started")
        return EXIT_OK
    _interrupts = interrupts
    interrupts.install()
    try:
        outcomes = runner.run()
    finally:
        interrupts.uninstall()
    failed = sum(o.status == "failed" for o in outcomes)
    partial = sum(o.status == "partial" for o in outcomes)
    print(f"{spec.name}: {len(outcomes)} run(s) written to {Path(args.out) / spec.name} "
          f"({failed} failed, {partial} partial)")
    return EXIT_FAILED_RUNS if failed else EXIT_OK


def _run_search(args: argparse.Namespace, spec: Any, search: Any, interrupts: Any) -> int:
    """`harness run --search`: the capacity at the SLO (`harness.run.capacity`)."""
    global _interrupts
    if args.dry_run:
        print(f"search of {spec.name!r} at {search.slo.text}: closed loop first, then open "
              f"loop at {', '.join(f'{f:g}' for f in capacity.COARSE)} of its rate, then "
              f"bisection to {search.resolution:.0%} (at most {search.max_steps} steps), "
              f"{spec.repetitions} run(s) per step; nothing was started")
        return EXIT_OK
    _interrupts = interrupts
    interrupts.install()
    try:
        result = capacity.run_search(
            args.spec, _overrides(args.set), Path(args.out), search,
            runner_kw={"resume": args.resume, "progress": not args.no_progress,
                       "live": not args.quiet, "interrupts": interrupts},
            say=lambda m: print(m, flush=True), figures_dir=Path(args.figures))
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
    from harness.spec import expand, load_spec

    spec = load_spec(args.spec, _overrides(args.set))
    problems = _out_problems(spec, args.out)
    if problems:
        raise SpecError([f"--out {p}" for p in problems])
    print(f"{args.spec}: ok ({len(expand(spec))} runs)")
    return EXIT_OK


#: The summary table's headers, with units (`--format table`).
SUMMARY_HEADERS = {
    "ops": "ops", "throughput_ops_s": "throughput ops/s [95% CI]",
    "goodput_ops_s": "goodput ops/s", "latency_mean_ms": "mean ms [95% CI]",
    "latency_p50_ms": "p50 ms [95% CI]", "latency_p99_ms": "p99 ms [95% CI]",
    "error_rate": "errors",
}


def cmd_summary(args: argparse.Namespace) -> int:
    from harness.analysis import pooling
    from harness.analysis.load import check_experiments
    from harness.analysis.summary_table import CHECKS_COLUMN, LEFT_OUT_COLUMNS, summarise_tree

    by = [c.strip() for c in args.by.split(",") if c.strip()] if args.by else None
    exps = [e.strip() for e in args.experiment.split(",")] if args.experiment else None
    check_experiments(Path(args.raw_dir), exps)  # a typo is exit 2, not an empty table
    # Progress only on a terminal: piped stderr keeps one line per warning.
    summary = summarise_tree(Path(args.raw_dir), by, experiments=exps, intervals=True,
                             progress=sys.stderr.isatty(), include=args.include, checks=True)
    table = summary.table
    # json and csv carry the left-out runs per row (LEFT_OUT_COLUMNS) and the checks that
    # warn (CHECKS_COLUMN: a list in json, that list as JSON text in csv); the table says
    # them in lines under it, where more columns would not fit.
    if args.format == "json":
        print(table.to_json(orient="records", indent=2))
    elif args.format == "csv":
        import json

        table = table.assign(**{CHECKS_COLUMN: [json.dumps(c) for c in table[CHECKS_COLUMN]]})
        print(table.to_csv(index=False), end="")
    else:
        import pandas as pd

        from harness.analysis.summary_ci import METRICS, NO_CI_NOTE, with_bracketed_ci
        from harness.analysis.tables import human

        bare = (table["runs"] >= 2) & table["latency_p99_ms_ci_low"].isna() & (table["ops"] > 0)
        warned = _check_lines(table, CHECKS_COLUMN)
        table = with_bracketed_ci(table.drop(columns=[*LEFT_OUT_COLUMNS, CHECKS_COLUMN]),
                                  list(METRICS))
        # Units in the headers, thousands separators in the numbers (json/csv keep the
        # field names and raw values).
        table["error_rate"] = [("-" if pd.isna(v) else f"{100 * v:.2g}%")
                               for v in table["error_rate"]]
        table = table.rename(columns=SUMMARY_HEADERS)
        with pd.option_context("display.max_rows", None, "display.max_columns", None,
                               "display.width", 250):
            print(table.map(human).to_string(index=False))
        if bare.any():
            print(NO_CI_NOTE)
        for line in warned:
            print(line)
        if left := pooling.line(summary.left_out, args.include):
            print(left)
    return EXIT_OK


def _check_lines(table: Any, column: str) -> list[str]:
    """One warning line per check that warns on a row of `harness summary`'s table:
    ``warning: heavy_tail (experiment=x, op=get; 3 runs): <detail>``."""
    from harness.analysis.summary import SUMMARY_COLUMNS
    from harness.analysis.summary_table import LEFT_OUT_COLUMNS

    keys = [c for c in table.columns
            if c not in (*SUMMARY_COLUMNS, *LEFT_OUT_COLUMNS, column) and "_ci_" not in c]
    lines = []
    for _, row in table.iterrows():
        where = ", ".join(f"{k}={row[k]}" for k in keys) or "all runs"
        for c in row[column]:
            lines.append(f"warning: {c['check']} ({where}; {c['runs']} run"
                         f"{'s' if c['runs'] != 1 else ''}): {c['detail']}")
    return lines


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.analysis import pooling
    from harness.analysis.compare import comparison, render, worse_beyond
    from harness.analysis.load import check_experiments

    for side in (args.base, args.cand):
        check_experiments(Path(side), None)
    by = [c.strip() for c in args.by.split(",") if c.strip()]
    metrics = args.metric or ["throughput", "latency_mean", "latency_p50", "latency_p99"]
    result = comparison(Path(args.base), Path(args.cand), by=by, metrics=metrics,
                        alpha=args.alpha, threshold=args.threshold / 100,
                        include=args.include, gate=args.gate)
    table = result.table
    print(render(table, by, args.format, result.family))
    # Under the table; json keeps stdout one JSON document, so stderr there.
    under = sys.stderr if args.format == "json" else sys.stdout
    if left := pooling.line(result.left_out, args.include):
        print(left, file=under)
    for line in result.warnings(by):
        print(line, file=under)
    if args.fail_if_worse is not None:
        bad = worse_beyond(table, args.fail_if_worse)
        if len(bad):
            print(f"{len(bad)} metric(s) significantly worse by more than "
                  f"{args.fail_if_worse:g}%", file=sys.stderr)
            return EXIT_FAILED_RUNS
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from harness.analysis.load import check_experiments
    from harness.report import build_report

    check_experiments(Path(args.raw), None)  # `--raw nope` was an all-"not run" report
    parameters = dict(_notebook_parameters(args.param))
    if args.compare:
        base, cand = (Path(p).resolve() for p in args.compare)
        for tree in (base, cand):
            check_experiments(tree, None)
        # Absolute: notebooks run in notebooks/, not where the command was typed.
        parameters.update(compare_base=str(base), compare_cand=str(cand))
        if args.by:
            parameters["compare_by"] = [k.strip() for k in args.by.split(",") if k.strip()]
    elif args.by:
        raise HarnessError("--by matches the groups of --compare BASE CAND; give both")
    outputs = build_report(Path(args.raw), Path(args.out), pdf=not args.no_pdf,
                           include=args.include, parameters=parameters)
    for kind, path in outputs.items():
        print(f"{kind}: {path}")
    return EXIT_OK


#: A `-p` value is at most this long (it is parsed as YAML, like a spec's values).
MAX_PARAM_BYTES = 64 * 1024


def _notebook_parameters(pairs: Sequence[Sequence[str]] | None) -> list[tuple[str, Any]]:
    """`-p NAME VALUE` pairs, each VALUE read as YAML (a number, true, a list ...)."""
    import yaml

    out = []
    for name, value in pairs or ():
        if not name.isidentifier():
            raise HarnessError(f"-p {name!r}: not a parameter name")
        if len(value.encode()) > MAX_PARAM_BYTES:
            raise HarnessError(f"-p {name}: value longer than {MAX_PARAM_BYTES} bytes")
        try:
            out.append((name, yaml.safe_load(value)))
        except (yaml.YAMLError, ValueError) as exc:
            raise HarnessError(f"-p {name} {value!r}: not a YAML value ({exc})") from None
    return out


def cmd_import(args: argparse.Namespace) -> int:
    from harness.errors import ResultsError
    from harness.importers import (
        ImportOptions,
        check_new,
        default_experiment,
        import_file,
        write_import,
    )

    # A path here would write outside -o (or nest): refused before anything is read.
    if args.experiment is not None and (problem := paths.name_problem(args.experiment)):
        shown = args.experiment if len(args.experiment) <= 40 else f"{args.experiment[:40]}..."
        raise HarnessError(f"--experiment {shown!r}: {problem}")
    for flag in ("count", "size", "requests"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise HarnessError(f"--{flag} {getattr(args, flag)}: must be a positive number")
    options = ImportOptions(count=args.count, size=args.size, requests=args.requests)
    # Parse and check every file before writing any: a bad one leaves nothing half-imported.
    results = [import_file(args.format, Path(f), options) for f in args.files]
    targets: dict[tuple[str, str], Path] = {}
    for res in results:
        exp = args.experiment or default_experiment(args.format, res.path)
        key = (exp, check_new(res, Path(args.out), exp))
        if key in targets:
            raise ResultsError(f"{res.path}: same content as {targets[key]}; given twice")
        targets[key] = res.path
    for res in results:
        exp = args.experiment or default_experiment(args.format, res.path)
        written = write_import(res, Path(args.out), exp)
        kind = "aggregated " if any(r.aggregated for r in res.runs) else (
            "histogram-bucketed " if any(r.extra.get("latency_source") == "histogram"
                                         for r in res.runs) else "")
        print(f"{res.path}: {len(written)} {kind}run(s) written to {Path(args.out) / exp} "
              f"({args.format}); {len(res.skipped)} noise line(s) skipped")
        for no, text in res.skipped[:IMPORT_SHOWN_SKIPPED]:
            print(f"  skipped line {no}: {text[:100]}")
        if len(res.skipped) > IMPORT_SHOWN_SKIPPED:
            print(f"  ... and {len(res.skipped) - IMPORT_SHOWN_SKIPPED} more")
        for note in res.notes:
            print(f"  note: {note}")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from harness.analysis.load import check_experiments
    from harness.exporters import EXPORTERS, check_outside

    check_outside(Path(args.raw_dir), Path(args.out))
    by = [c.strip() for c in args.by.split(",") if c.strip()] if args.by else None
    exps = [e.strip() for e in args.experiment.split(",")] if args.experiment else None
    check_experiments(Path(args.raw_dir), exps)
    written = EXPORTERS.get(args.format)(Path(args.raw_dir), Path(args.out), by=by,
                                         experiments=exps, interval_s=args.interval,
                                         per=args.per)
    print(f"{args.format}: {len(written)} file(s) written to {Path(args.out)}")
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


def cmd_verify(args: argparse.Namespace) -> int:
    from harness.results import STRAY_REASON, iter_run_dirs, iter_stray_dirs, verify_run

    bad = good = 0
    for run_dir in iter_run_dirs(Path(args.raw_dir)):
        try:
            verify_run(run_dir)
            good += 1
        except HarnessError as exc:
            bad += 1
            print(f"BAD {exc}")
    for stray in iter_stray_dirs(Path(args.raw_dir)):  # records nothing else would name
        bad += 1
        print(f"BAD {stray}: {STRAY_REASON}")
    print(f"{good} run(s) ok, {bad} bad")
    return EXIT_OK if not bad else EXIT_FAILED_RUNS


def cmd_netem_cleanup(args: argparse.Namespace) -> int:
    from harness.netem.cleanup import cleanup

    found = cleanup(force=args.force)
    return EXIT_OK if not found.in_use or args.force else EXIT_FAILED_RUNS


def cmd_list(args: argparse.Namespace) -> int:
    from harness.services import SERVICES
    from harness.workloads import WORKLOADS

    if args.what == "studies" or args.demo or args.legacy:
        return _list_studies(args)
    if args.what == "packages":  # the README's server table, from the declarations
        from harness.services.catalog import readme_table

        print(readme_table())
        return EXIT_OK
    if args.what in ("all", "workloads"):
        for name in WORKLOADS:
            w = WORKLOADS.get(name)
            print(f"workload {name}: {w.description}\n  ops: {', '.join(w.ops)}")
            for p, s in w.params.items():
                print(f"  param {p} (default {s.default!r}): {s.help}")
    if args.what in ("all", "services"):
        for name in SERVICES:
            s = SERVICES.get(name)
            print(f"service {name}:")
            for key, setting in s.settings.items():
                print(f"  setting {key} (default {setting.default!r}): {setting.help}")
            if s.packages:
                print(f"  packages: {' '.join(p.debian for p in s.packages)} (Debian/Ubuntu)")
    return _list_studies(args) if args.what == "all" else EXIT_OK


def _list_studies(args: argparse.Namespace) -> int:
    """The registered studies; `--demo` and `--legacy` print what `make demo` loops over."""
    from harness.studies import STUDIES

    infos = sorted((STUDIES.get(name) for name in STUDIES), key=lambda i: i.notebook)
    if args.demo:  # one line per spec: file name under experiments/, then run options
        root = os.geteuid() == 0 if hasattr(os, "geteuid") else False
        for info in infos:
            for spec in info.specs:
                if spec.demo:
                    sets = () if root else spec.unprivileged_set
                    print(" ".join([spec.file, *(f"--set {s}" for s in sets)]))
        return EXIT_OK
    if args.legacy:  # one line per seed report: importer, file under examples/legacy/, experiment
        for info in infos:
            if info.legacy is not None:
                print(f"{info.legacy.format} {info.legacy.file} {info.legacy.experiment}")
        return EXIT_OK
    for info in infos:
        print(f"study {info.name}: {info.title}\n  notebook: notebooks/{info.notebook}\n"
              f"  workloads: {', '.join(info.workloads)}")
        for spec in info.specs:
            how = [f"experiment {spec.experiment()}"]
            if spec.parameter:
                how.append(f"notebook parameter {spec.parameter}")
            if not spec.demo:
                how.append("not in make demo")
            print(f"  spec experiments/{spec.file} ({', '.join(how)})")
        if info.legacy is not None:
            print(f"  legacy: harness import {info.legacy.format} "
                  f"examples/legacy/{info.legacy.file} --experiment {info.legacy.experiment}")
    return EXIT_OK


def cmd_gen_files(args: argparse.Namespace) -> int:
    from harness.datasets.filegen import check_params, generate_files

    params = {k: getattr(args, k) for k in ("size_bytes", "min_bytes", "max_bytes",
                                             "median_bytes", "sigma")
              if getattr(args, k) is not None}
    problems = check_params(args.dist, **params)
    if args.count < 0:
        problems.append("--count must be >= 0")
    if problems:
        raise HarnessError("gen-files: " + "; ".join(problems))
    specs = generate_files(args.dir, args.count, args.dist, args.seed, **params)
    total = sum(s.size_bytes for s in specs)
    print(f"wrote {len(specs)} file(s), {total:,} bytes, to {args.dir}")
    return EXIT_OK


def _include_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--include", action="append", default=[], choices=("partial",),
                   help="also pool partial runs (interrupted, or with records lost); by "
                   "default only complete runs count, one per repetition, and failed runs "
                   "never; what is left out is said")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harness", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run an experiment spec")
    p.add_argument("spec")
    p.add_argument("--out", default=str(paths.raw_results_dir()), help="raw results directory")
    p.add_argument("--dry-run", action="store_true", help="list the runs, start nothing")
    p.add_argument("--resume", action="store_true", help="skip runs that are complete")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a spec field, e.g. --set repetitions=3 --set run.ops=20")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no live status line (ops/s, p50, p99, errors each second of a run)")
    p.add_argument("--search", metavar="SLO", default=None,
                   help="find the highest offered rate meeting SLO, e.g. \"p99 < 1ms and "
                        "p50 < 200us\" (writes OUT/EXPERIMENT/search.json)")
    p.add_argument("--resolution", type=float, default=None,
                   help="search: stop when the bracket is within this share (default 0.05)")
    p.add_argument("--figures", default=str(paths.figures_dir()),
                   help="search: where the latency-throughput figure goes")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("collect", help="fetch records that runs left on client machines "
                       "(a failed transfer) and complete those runs")
    p.add_argument("spec")
    p.add_argument("--out", default=str(paths.raw_results_dir()), help="raw results directory")
    p.set_defaults(func=cmd_collect)

    p = sub.add_parser("validate", help="check a spec (and --out) without running anything")
    p.add_argument("spec")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", default=str(paths.raw_results_dir()),
                   help="raw results directory the runs would go to (checked too)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("cleanup", help="stop what a killed `harness run` left running and "
                       "write the records it left", description="Reads the state file an "
                       "earlier `harness run` of SPEC left in the experiment directory "
                       "(it was killed, or could not write a run): stops the servers and "
                       "client processes it started (only those: each is matched by pid "
                       "and start time), writes the records of runs it had not written, "
                       "removes its temporary directories, and says what it did. `harness "
                       "run` does the same before it starts.")
    p.add_argument("spec")
    p.add_argument("--out", default=str(paths.raw_results_dir()), help="raw results directory")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.set_defaults(func=cmd_cleanup)

    p = sub.add_parser("summary", help="one row per configuration")
    p.add_argument("raw_dir", nargs="?", default=str(paths.raw_results_dir()))
    p.add_argument("--by", help="comma-separated grouping columns, e.g. op or threads,op")
    p.add_argument("--experiment", help="comma-separated experiment names")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    _include_option(p)
    p.set_defaults(func=cmd_summary)

    p = sub.add_parser("compare", help="did CAND change throughput or latency against BASE?",
                       description="Match groups of two raw-results (or experiment) "
                       "directories and judge each metric: better, worse, no significant "
                       "difference, or inconclusive (too few runs to tell). The rows are one "
                       "family: Benjamini-Hochberg at q decides better/worse and the ratio's "
                       "interval is printed at the matching FCR-adjusted level (1 - Rq/m), "
                       "so a verdict never disagrees with its interval; raw and adjusted p "
                       "side by side.")
    p.add_argument("base", metavar="BASE")
    p.add_argument("cand", metavar="CAND")
    p.add_argument("--by", default="op", help="comma-separated keys to match groups on "
                   "(default: op)")
    p.add_argument("--metric", action="extend", nargs="+",
                   choices=("throughput", "latency_mean", "latency_p50", "latency_p99"),
                   help="metrics to judge (default: all four)")
    p.add_argument("--q", "--alpha", dest="alpha", type=float, default=0.05,
                   help="false discovery rate over the rows (with --gate familywise: the "
                   "familywise error rate); default 0.05")
    p.add_argument("--threshold", type=float, default=5.0, metavar="PCT",
                   help="changes within ±PCT%% count as no difference (default 5)")
    p.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    p.add_argument("--fail-if-worse", type=float, metavar="PCT",
                   help="exit 1 if any metric is significantly worse by more than PCT%%")
    p.add_argument("--gate", choices=("fdr", "familywise"), default="fdr",
                   help="how the rows are judged: fdr (Benjamini-Hochberg, FCR-adjusted "
                   "intervals; the default) or familywise (Bonferroni verdicts with "
                   "simultaneous intervals: for CI gates, where one false 'worse' among "
                   "many rows fails a build)")
    _include_option(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("report", help="execute the notebooks and write report HTML/PDF")
    p.add_argument("--raw", default=str(paths.raw_results_dir()))
    p.add_argument("--out", default=str(paths.report_dir()))
    p.add_argument("--compare", nargs=2, metavar=("BASE", "CAND"),
                   help="add the comparison section: CAND against BASE (two raw-results "
                   "trees), its table and a forest plot of every ratio")
    p.add_argument("--by", help="--compare: comma-separated keys to match groups on "
                   "(default: op)")
    p.add_argument("-p", "--param", nargs=2, action="append", metavar=("NAME", "VALUE"),
                   help="set a notebook parameter, as papermill's -p (VALUE read as YAML: "
                   "-p alpha 0.01, -p include '[partial]'); repeatable")
    p.add_argument("--no-pdf", action="store_true")
    p.add_argument("--pdf", action="store_true", help="(default) also write the PDF")
    _include_option(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("import", help="bring other tools' results into the raw-results format",
                       description="Parse FILEs written by another tool or script and write "
                       "them as runs (source: imported). Formats: perfctest, gae-bench, "
                       "cluster-perf, kv-report, memtier-json, redis-benchmark-csv, "
                       "redis-benchmark, ycsb, ycsb-raw, ycsb-hdr.")
    p.add_argument("format", help="the files' format, e.g. gae-bench or redis-benchmark-csv")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("-o", "--out", required=True, metavar="RAW_DIR", help="raw results directory")
    p.add_argument("--experiment", help="experiment name (default: FORMAT-<file stem>)")
    p.add_argument("--count", type=int, help="ops per timed set (gae-bench, default 50)")
    p.add_argument("--requests", type=int, help="requests per test, which redis-benchmark's "
                   "CSV and -q output do not state (its -n)")
    p.add_argument("--size", type=int, help="value size in bytes (gae-bench, default 100)")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("export", help="raw results -> HdrHistogram logs or CSV tables",
                       description="hdr: one HdrHistogram interval log (values in ns) per "
                       "group, readable by HdrHistogram's own tools, plus index.csv. csv: "
                       "per-run (and op) statistics, or every op with --per op.")
    p.add_argument("format", choices=("hdr", "csv"))
    p.add_argument("raw_dir", metavar="RAW")
    p.add_argument("-o", "--out", required=True,
                   help="hdr: a directory; csv: a file (or a directory for runs.csv/ops.csv)")
    p.add_argument("--by", help="comma-separated grouping columns, e.g. op or threads,op "
                   "(hdr default: experiment + grid parameters; csv default: run_id,op)")
    p.add_argument("--experiment", help="comma-separated experiment names")
    p.add_argument("--interval", type=float, default=1.0, help="hdr: seconds per interval")
    p.add_argument("--per", choices=("run", "op"), default="run",
                   help="csv: one row per run and op (default) or per measured op")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("hosts", help="host utilities")
    hsub = p.add_subparsers(dest="hosts_command", required=True)
    hc = hsub.add_parser("check", help="check a spec's machines before a run: SSH and "
                         "host keys, binaries, the kit on clients, and that the control and "
                         "client machines reach each server machine")
    hc.add_argument("spec")
    hc.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a spec field, as for `harness run`")
    hc.add_argument("--out", default=str(paths.raw_results_dir()),
                    help="raw results directory the runs would go to (checked too)")
    hc.set_defaults(func=cmd_hosts_check)

    p = sub.add_parser("verify", help="check every run's ops checksum, and that no ops file "
                       "lacks its manifest")
    p.add_argument("raw_dir", nargs="?", default=str(paths.raw_results_dir()))
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("gen-files", help="write test files of a given size distribution",
                       description="Write COUNT files 0.txt, 1.txt, ... into DIR; sizes are "
                       "fixed, uniform or log-normal, and the same for the same --seed.")
    p.add_argument("dir")
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--dist", choices=("fixed", "uniform", "lognormal"), default="lognormal")
    p.add_argument("--size-bytes", type=int, help="fixed: every file's size")
    p.add_argument("--min-bytes", type=int, help="uniform: lower bound; lognormal: clip")
    p.add_argument("--max-bytes", type=int, help="uniform: upper bound; lognormal: clip")
    p.add_argument("--median-bytes", type=int, help="lognormal: median size")
    p.add_argument("--sigma", type=float, help="lognormal: sigma of log(size)")
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=cmd_gen_files)

    p = sub.add_parser("list", help="workloads, services, studies, system packages")
    p.add_argument("what", nargs="?", default="all",
                   choices=("all", "workloads", "services", "studies", "packages"))
    p.add_argument("--demo", action="store_true",
                   help="studies: the specs `make demo` runs, one per line with its options")
    p.add_argument("--legacy", action="store_true",
                   help="studies: the seed reports `make demo` imports (format file experiment)")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("netem", help="emulated networks (namespaces, links, relays)")
    nsub = p.add_subparsers(dest="netem_command", required=True)
    nc = nsub.add_parser("cleanup", help="remove every hkv-* namespace, link, relay, "
                         "server and directory a crashed run left behind",
                         description="Finds leftovers by their hkv- prefix, stops their "
                         "processes, deletes namespaces, links and state directories, and "
                         "prints each. Resources whose creating process still runs are "
                         "left alone unless --force. Idempotent.")
    nc.add_argument("--force", action="store_true",
                    help="also remove resources whose owner is still running")
    nc.set_defaults(func=cmd_netem_cleanup)
    return parser


def _show_warning(message: Warning | str, category: type[Warning], filename: str,
                  lineno: int, file: object = None, line: str | None = None) -> None:
    """Warnings (e.g. a corrupt run skipped) as one line each, without source lines."""
    print(f"warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    global _interrupts
    args = build_parser().parse_args(argv)
    _interrupts = None
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return int(args.func(args))
        except BrokenPipeError:
            # `harness list | head`: the reader left. Python's documented way: point
            # stdout at devnull so the interpreter's final flush does not fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_OK
        except SpecError as exc:
            print("\n".join(f"error: {p}" for p in exc.problems), file=sys.stderr)
            return EXIT_USAGE
        except HarnessError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            terminated = _interrupts is not None and _interrupts.terminated
            what = "terminated (SIGTERM)" if terminated else "interrupted"
            print(f"{what}: servers and clients stopped; the run in progress was written "
                  "as partial (or, if its measurement had ended, as it was). Continue with "
                  "--resume.", file=sys.stderr)
            return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
        except BaseException as exc:
            from harness.run.interrupts import StopNow

            if not isinstance(exc, StopNow):
                raise
            terminated = _interrupts is not None and _interrupts.terminated
            print(f"{'terminated (SIGTERM)' if terminated else 'interrupted'} twice: stopped "
                  "at once. Records not written yet stay on the client machines (see the "
                  "lines above); `harness run SPEC --resume` or `harness cleanup SPEC` "
                  "writes them and stops anything left running.", file=sys.stderr)
            return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
