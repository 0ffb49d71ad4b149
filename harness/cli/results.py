"""`harness summary | compare | report | import | export | verify`: the commands that
read and write raw results."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import paths
from harness.cli.exits import (
    EXIT_FAILED_RUNS,
    EXIT_NOT_JUDGEABLE,
    EXIT_OK,
    EXIT_PASS,
    EXIT_REGRESSION,
)
from harness.errors import HarnessError, ResultsError

IMPORT_SHOWN_SKIPPED = 5


#: The summary table's headers, with units (`--format table`).
SUMMARY_HEADERS = {
    "ops": "ops", "throughput_ops_s": "throughput ops/s [95% CI]",
    "goodput_ops_s": "goodput ops/s", "latency_mean_ms": "mean ms [95% CI]",
    "latency_p50_ms": "p50 ms [95% CI]", "latency_p99_ms": "p99 ms [95% CI]",
    "error_rate": "errors", "probe_p50_ms": "probe p50 ms", "probe_p99_ms": "probe p99 ms",
}


def cmd_summary(args: argparse.Namespace) -> int:
    from harness.analysis.data import pooling
    from harness.analysis.data.load import check_experiments
    from harness.analysis.summary_table import CHECKS_COLUMN, LEFT_OUT_COLUMNS, summarise_tree

    by = [c.strip() for c in args.by.split(",") if c.strip()] if args.by else None
    exps = [e.strip() for e in args.experiment.split(",")] if args.experiment else None
    trees = [Path(d) for d in args.raw_dir]
    check_experiments(trees, exps)  # a typo is exit 2, not an empty table
    # Progress only on a terminal: piped stderr keeps one line per warning.
    summary = summarise_tree(trees, by, experiments=exps, intervals=True,
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

        from harness.analysis.data.summary_ci import METRICS, NO_CI_NOTE, with_bracketed_ci
        from harness.analysis.sections.tables import human

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
    from harness.analysis.data.probe import PROBE_COLUMNS
    from harness.analysis.data.summary import SUMMARY_COLUMNS
    from harness.analysis.summary_table import LEFT_OUT_COLUMNS

    keys = [c for c in table.columns if c not in (*SUMMARY_COLUMNS, *LEFT_OUT_COLUMNS,
                                                  *PROBE_COLUMNS, column) and "_ci_" not in c]
    lines = []
    for _, row in table.iterrows():
        where = ", ".join(f"{k}={row[k]}" for k in keys) or "all runs"
        for c in row[column]:
            lines.append(f"warning: {c['check']} ({where}; {c['runs']} run"
                         f"{'s' if c['runs'] != 1 else ''}): {c['detail']}")
    return lines


@contextmanager
def unreadable_is_exit_2(what: str) -> Iterator[None]:
    """Reading the input of a command whose exit 1 means "a regression" (`compare`,
    `history`): whatever fails while it is read (a damaged manifest whose counts are not
    numbers, a file that is no Parquet) is one line and exit 2 (`EXIT_UNREADABLE`, as
    every `HarnessError`), never a traceback and 1, which a CI job would read as a
    regression."""
    try:
        yield
    except HarnessError:
        raise
    except Exception as exc:  # any failure to read is "cannot read", not "worse"
        raise ResultsError(f"{what}: could not be read ({type(exc).__name__}: "
                           f"{exc})") from exc


def _sides(args: argparse.Namespace) -> tuple[Path, Path]:
    """The two trees, each narrowed to `--experiment` where given and present."""
    out = []
    for side in (Path(args.base), Path(args.cand)):
        out.append(side / args.experiment if args.experiment and (
            side / args.experiment).is_dir() else side)
    return out[0], out[1]


def _alike(base: Path, cand: Path, by: list[str] | None, allowed: set[str],
           include: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """The --by keys (given, or `likeness.default_by`) and the differences allowed;
    HarnessError naming the others."""
    from harness.analysis.compare import load_tree
    from harness.analysis.data import likeness

    lb, lc = (load_tree(p, ops=False, include=include) for p in (base, cand))
    by = by if by is not None else likeness.default_by(lb, lc)
    found = likeness.differences(lb, lc, by)
    refused = [(k, v) for k, v in found if k not in allowed]
    if refused:
        raise HarnessError(likeness.refusal(refused))
    return by, found


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.analysis.compare import comparison, render, within, worse_beyond
    from harness.analysis.data import pooling
    from harness.analysis.data.load import check_experiments

    given = [c.strip() for c in args.by.split(",") if c.strip()] if args.by else None
    metrics = args.metric or ["throughput", "latency_mean", "latency_p50", "latency_p99"]
    allowed = {k.strip() for k in args.allow_different.split(",") if k.strip()}
    head = ""
    with unreadable_is_exit_2(f"{args.base} or {args.cand}" if args.cand else args.base):
        if args.cand is None:
            check_experiments(Path(args.base), None)
            baseline = dict(_key_value(b) for b in args.baseline or ())
            by = given or ["op"]
            result = within(Path(args.base), args.experiment, baseline=baseline, by=by,
                            metrics=metrics, alpha=args.alpha,
                            threshold=args.threshold / 100, include=args.include,
                            gate=args.gate)
        else:
            if args.baseline:
                raise HarnessError("--baseline names a configuration within one tree: "
                                   "give BASE alone")
            base, cand = _sides(args)
            for side in (base, cand):
                check_experiments(side, None)
            by, differ = _alike(base, cand, given, allowed, args.include)
            if differ:
                head = "allowed differences (--allow-different): " + "; ".join(
                    f"{k}: {v}" for k, v in differ)
            result = comparison(base, cand, by=by, metrics=metrics, alpha=args.alpha,
                                threshold=args.threshold / 100, include=args.include,
                                gate=args.gate)
        table = result.table
        shown = ["configuration", *by] if args.cand is None else by
        text = render(table, shown, args.format, result.family)
        left = pooling.line(result.left_out, args.include)
        warnings = result.warnings(by)
        bad = worse_beyond(table, args.fail_if_worse) if args.fail_if_worse is not None \
            else ()
    # Above and under the table; json keeps stdout one JSON document, so stderr there.
    under = sys.stderr if args.format == "json" else sys.stdout
    if head:
        print(head, file=under)
    print(text)
    if left:
        print(left, file=under)
    for line in warnings:
        print(line, file=under)
    if args.cand is None:  # the verdicts `until: decided` stopped on, if it ran
        for line in _decided(Path(args.base), args.experiment):
            print(line, file=under)
    if len(bad):
        print(f"{len(bad)} metric(s) significantly worse by more than "
              f"{args.fail_if_worse:g}%", file=sys.stderr)
        return EXIT_REGRESSION
    return EXIT_PASS


def _decided(tree: Path, experiment: str | None) -> list[str]:
    """The lines of the one decided.json of `tree` (or of its `experiment`)."""
    from harness.run.decide import decided_lines, read_decided

    dirs = [tree / experiment] if experiment else [tree, *(
        d for d in sorted(tree.iterdir()) if d.is_dir())] if tree.is_dir() else []
    found = [data for d in dirs if (data := read_decided(d)) is not None]
    return decided_lines(found[0]) if len(found) == 1 else []


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise HarnessError(f"--baseline {text!r}: expected KEY=VALUE, e.g. "
                           "value_size_bytes=100")
    return key.strip(), value.strip()


def _share(text: str) -> float:
    """``5%``, ``5`` (percent) or ``0.05``-style shares: ``--min-effect``."""
    t = text.strip()
    try:
        value = float(t.rstrip("%"))
    except ValueError:
        raise HarnessError(f"--min-effect {text!r}: expected a percentage, e.g. 5%") from None
    return value / 100


def cmd_history(args: argparse.Namespace) -> int:
    from harness.analysis.data.load import check_experiments
    from harness.analysis.history.changes import DEFAULT_METRICS, history
    from harness.analysis.history.gate import FAIL, PENDING, gate
    from harness.analysis.history.text import render

    if not args.gate and (args.window is not None or args.since is not None or args.strict):
        raise HarnessError("--window, --since and --strict say how --gate judges: add --gate")
    experiments = ([e.strip() for e in args.experiment.split(",") if e.strip()]
                   if args.experiment else None)
    with unreadable_is_exit_2(args.raw_dir):
        check_experiments(Path(args.raw_dir), experiments)
        # A bar only on a terminal: a CI log or a pipe gets none of its frames.
        h = history(Path(args.raw_dir), experiments=experiments, by=args.by,
                    metrics=args.metric or DEFAULT_METRICS,
                    q=args.alpha, min_effect=_share(args.min_effect), min_runs=args.min_runs,
                    include=args.include,
                    progress=not args.no_progress and sys.stderr.isatty())
        outcome = gate(h, window=args.window, since=args.since) if args.gate else None
        text = render(h, args.format)
    print(text)
    if outcome is None:
        return EXIT_OK
    # The last line names the verdict (json keeps stdout one document: stderr there).
    print(outcome.line, file=sys.stderr if args.format == "json" else sys.stdout)
    if outcome.verdict == FAIL:
        return EXIT_REGRESSION
    return EXIT_NOT_JUDGEABLE if outcome.verdict == PENDING and args.strict else EXIT_PASS


def cmd_explain(args: argparse.Namespace) -> int:
    from harness.analysis.data.load import check_experiments
    from harness.analysis.explain.analysis import explain
    from harness.analysis.explain.text import render

    check_experiments(Path(args.raw_dir), [args.experiment])
    try:
        quantiles = [float(x) for x in args.quantiles.split(",") if x.strip()]
    except ValueError:
        raise HarnessError(f"--quantiles {args.quantiles!r}: expected numbers such as "
                           "0.5,0.99") from None
    e = explain(Path(args.raw_dir), args.experiment, quantiles=quantiles,
                interactions=args.interactions, trend=args.trend,
                covariates=[c.strip() for c in (args.with_ or "").split(",") if c.strip()],
                op=args.op, q=args.alpha, include=args.include)
    print(render(e, args.format))
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from harness.analysis.data.load import check_experiments
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
    for line in outputs.failures:  # written with everything else; named, and not 0
        print(f"error: {line}", file=sys.stderr)
    return EXIT_FAILED_RUNS if outputs.failures else EXIT_OK


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
    for flag in ("count", "size", "requests", "max_ops"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise HarnessError(f"--{flag.replace('_', '-')} {getattr(args, flag)}: must be "
                               "a positive number")
    options = ImportOptions(count=args.count, size=args.size, requests=args.requests,
                            max_ops=args.max_ops)
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
    from harness.analysis.data.load import check_experiments
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
