"""`harness compare BASE CAND`: did my change make it faster?

Both trees are summarised exactly as `harness summary` does (pooled throughput = total
ops / total time, mean, p50, p99 with 95% CIs over runs, `summary_ci`); groups are matched
on the `by` keys (default ``op``). For each group and metric the ratio cand/base gets a
p-value from Welch's t on the log ratio (`verdict.log_ratio_test`, each side's SE from the
jackknife over its runs). The table's rows (groups x the metrics asked for) are one
family, judged by `multiplicity.judge`: Benjamini-Hochberg at q = `alpha` decides better /
worse, and the ratio's interval is printed at the family's FCR-adjusted level
(1 - R q / m), so a row is better or worse exactly when its printed interval excludes 1,
and "no significant difference" exactly when it lies inside ±threshold. ``gate =
familywise`` judges with Bonferroni and simultaneous intervals instead, for CI gates
(`--fail-if-worse ... --gate familywise`). Raw and adjusted p stand side by side. A
percentile whose runs hold too few ops beyond it, or a side with one run, is
inconclusive with the reason in ``test``, and is not in the family.

Runs are pooled as `harness summary` pools them (`harness.analysis.data.pooling`: complete
runs, one per repetition; ``include`` adds partial ones), and `comparison` returns the
runs each side left out, which `harness compare` says in a line.

Each side's groups are checked as `harness summary` checks them
(`harness.analysis.checks.registry`); a row whose group failed a check on either side says so in
``caveat`` ("the client was saturated in 3 of 5 base runs"), printed after its verdict
("worse, but ..."): the verdict is only as good as the measurements under it.

Trees given as paths are read one ops file at a time (`queries.summarise_with_intervals`:
each run's latencies sorted on its own, 4-8 bytes per op), as `harness summary` reads
them, so a comparison of runs of any size needs no more memory than their summary; a
`Loaded` with its ops in pandas (a notebook's) is judged from those
(`summary_ci.group_intervals`, the same intervals to the last bits).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.checks.registry import Finding, group_checks
from harness.analysis.checks.runfacts import GroupKey
from harness.analysis.checks.words import caveat, warning_lines
from harness.analysis.data import pooling, queries
from harness.analysis.data.load import Loaded, load, load_runs_only
from harness.analysis.data.summary_ci import _key, group_intervals
from harness.analysis.sections.compare_table import render, verdict_text  # noqa: F401
from harness.analysis.stats import multiplicity, verdict
from harness.analysis.stats.intervals import RunInterval
from harness.errors import ResultsError
from harness.results import MANIFEST


@dataclass(frozen=True)
class Metric:
    """A metric `compare` can judge: its summary field and its good direction."""

    name: str
    field: str
    higher_is_better: bool


#: The metrics, by the names `--metric` takes.
METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("throughput", "throughput_ops_s", True),
        Metric("latency_mean", "latency_mean_ms", False),
        Metric("latency_p50", "latency_p50_ms", False),
        Metric("latency_p99", "latency_p99_ms", False),
    )
}

#: Row fields after the group keys, in order (the JSON interface).
ROW_FIELDS: tuple[str, ...] = (
    "metric", "base", "base_ci_low", "base_ci_high", "cand", "cand_ci_low", "cand_ci_high",
    "ratio", "ratio_ci_low", "ratio_ci_high", "ratio_ci_level", "test", "p", "p_adjusted",
    "adjustment", "n_base", "n_cand", "verdict", "caveat",
)

_OPS_COLUMNS = ["op", "client", "start_ns", "latency_ns", "intended_ns", "status", "warmup"]


@dataclass(frozen=True)
class Comparison:
    """`compare`'s table, the runs each side left out ("BASE", "CAND"; their
    `pooling.LEFT_OUT` column says why), how its rows were judged as one family, and
    each side's failed measurement checks."""

    table: pd.DataFrame
    left_out: dict[str, pd.DataFrame] = field(default_factory=dict)
    family: multiplicity.Family | None = None
    #: Each side's ("BASE", "CAND") failed checks per matched group.
    checks: dict[str, dict[GroupKey, list[Finding]]] = field(default_factory=dict)

    def warnings(self, by: Sequence[str]) -> list[str]:
        """A ``warning: check (BASE op=get; 3 runs): detail`` line per failed check."""
        return [line for side, found in self.checks.items()
                for line in warning_lines(found, by, side)]


def load_tree(path: Path, *, ops: bool = True, include: Sequence[str] = ()) -> Loaded:
    """A raw-results directory, or one experiment directory inside one, pooled
    (`include`: as `load`'s); `ops`: with the ops in pandas (else the runs only, for the
    DuckDB queries)."""
    path = Path(path)
    if not path.is_dir():
        raise ResultsError(f"{path}: not a directory of raw results")
    is_experiment = any((child / MANIFEST).is_file() for child in path.iterdir()
                        if child.is_dir())
    raw, experiments = (path.parent, [path.name]) if is_experiment else (path, None)
    loaded = (load(raw, experiments=experiments, columns=_OPS_COLUMNS, include=include)
              if ops else load_runs_only(raw, experiments=experiments, include=include))
    if loaded.runs.empty and loaded.left_out.empty:
        raise ResultsError(f"{path}: no runs found (expected <experiment>/<run_id>/"
                           f"{MANIFEST} below it, or <run_id>/{MANIFEST})")
    if loaded.runs.empty:  # "no group in common" would hide why
        raise ResultsError(f"{path}: no run to compare: every one was "
                           + pooling.line(loaded.left_out, include))
    return loaded


def _intervals(side: Loaded | Path, by: list[str], include: Sequence[str]
               ) -> tuple[dict[tuple[object, ...], dict[str, RunInterval]], Loaded]:
    """{group key: {metric field: interval}} of one side (see the module doc), and the
    side's runs as pooled (with those it left out)."""
    if isinstance(side, Loaded):
        return group_intervals(side, by), side
    loaded = load_tree(side, ops=False, include=include)
    return queries.summarise_with_intervals(loaded, by)[1], loaded


def _row(key: dict[str, object], m: Metric, b: RunInterval, c: RunInterval
         ) -> tuple[dict, verdict.LogRatio]:
    lr = verdict.log_ratio_test(b.log_value, b.se_log, b.df, c.log_value, c.se_log, c.df)
    note = b.note or c.note
    test = lr.test if not math.isnan(lr.p) else f"none: {note or 'no interval'}"
    return {**key, "metric": m.name, "base": b.value, "base_ci_low": b.low,
            "base_ci_high": b.high, "cand": c.value, "cand_ci_low": c.low,
            "cand_ci_high": c.high, "test": test, "n_base": b.n_runs,
            "n_cand": c.n_runs}, lr


def compare(
    base: Loaded | Path,
    cand: Loaded | Path,
    *,
    by: Sequence[str] = ("op",),
    metrics: Sequence[str] = tuple(METRICS),
    alpha: float = 0.05,
    threshold: float = verdict.DEFAULT_THRESHOLD,
    include: Sequence[str] = (),
    gate: str = multiplicity.FDR,
) -> pd.DataFrame:
    """One row per matched group and metric: the `ROW_FIELDS` after the `by` columns
    (`comparison`'s table)."""
    return comparison(base, cand, by=by, metrics=metrics, alpha=alpha, threshold=threshold,
                      include=include, gate=gate).table


def comparison(
    base: Loaded | Path,
    cand: Loaded | Path,
    *,
    by: Sequence[str] = ("op",),
    metrics: Sequence[str] = tuple(METRICS),
    alpha: float = 0.05,
    threshold: float = verdict.DEFAULT_THRESHOLD,
    include: Sequence[str] = (),
    gate: str = multiplicity.FDR,
) -> Comparison:
    """The comparison table (one row per matched group and metric: the `ROW_FIELDS` after
    the `by` columns) and the runs each side left out. The rows are one family judged at
    `alpha` by `gate` (`multiplicity.METHODS`: fdr, or familywise for CI gates).

    Trees given as paths are pooled with `include` (a `Loaded` was pooled when loaded).
    Groups present on one side only are left out; with none in common this raises
    `ResultsError` listing both sides' groups.
    """
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ResultsError(f"unknown metric {unknown[0]!r}; choose from {', '.join(METRICS)}")
    by = list(by)
    (ib, lb), (ic, lc) = _intervals(base, by, include), _intervals(cand, by, include)
    rows, tests, common = match_rows(ib, ic, by, metrics)
    judged = judge_rows(rows, tests, alpha=alpha, threshold=threshold, gate=gate)
    found = {"BASE": group_checks(lb, by), "CAND": group_checks(lc, by)}
    add_caveats(rows, by, found["BASE"], found["CAND"])
    table = pd.DataFrame(rows, columns=[*by, *ROW_FIELDS])
    return Comparison(table, {"BASE": lb.left_out, "CAND": lc.left_out}, judged.family,
                      {side: {k: v for k, v in f.items() if v and k in common}
                       for side, f in found.items()})


def match_rows(ib: Mapping[tuple[object, ...], Mapping[str, RunInterval]],
               ic: Mapping[tuple[object, ...], Mapping[str, RunInterval]], by: Sequence[str],
               metrics: Sequence[str], head: Mapping[str, object] | None = None
               ) -> tuple[list[dict[str, Any]], list[verdict.LogRatio], list[Any]]:
    """A row and its test per group both sides have and metric (`head`'s fields first),
    and the groups in common; ResultsError naming both sides' groups when none is."""
    common = [k for k in ib if k in ic]
    if not common:
        def names(groups: Mapping) -> list[str]:
            return sorted("/".join(map(str, k)) for k in groups)

        raise ResultsError(
            f"BASE and CAND have no group in common on {', '.join(by) or '(nothing)'}: "
            f"base has {names(ib) or 'none'}, cand has {names(ic) or 'none'}; "
            "choose other --by keys")
    rows, tests = [], []
    for key in sorted(common, key=str):
        values = {**(head or {}), **dict(zip(by, key, strict=True))}
        for name in metrics:
            m = METRICS[name]
            row, lr = _row(values, m, ib[key][m.field], ic[key][m.field])
            rows.append(row)
            tests.append(lr)
    return rows, tests, common


def judge_rows(rows: list[dict[str, Any]], tests: list[verdict.LogRatio], *, alpha: float,
               threshold: float, gate: str) -> Any:
    """Judge every row as one claim of one family (verdicts and printed intervals agree),
    writing the ratio, its interval, p-values and verdict into each row; the judged
    family."""
    judged = multiplicity.judge(
        tests, [METRICS[r["metric"]].higher_is_better for r in rows], q=alpha,
        threshold=threshold, method=gate)
    for row, c in zip(rows, judged.claims, strict=True):
        row.update(ratio=c.ratio, ratio_ci_low=c.low, ratio_ci_high=c.high,
                   ratio_ci_level=c.level, p=c.p, p_adjusted=c.p_adjusted,
                   adjustment=judged.family.name, verdict=c.verdict)
    return judged


def add_caveats(rows: list[dict[str, Any]], by: Sequence[str],
                base: Mapping[GroupKey, list[Finding]],
                cand: Mapping[GroupKey, list[Finding]]) -> None:
    """Each row's ``caveat``: the failed checks of either side its verdict rests on."""
    for row in rows:
        key = _key([row[k] for k in by])
        row["caveat"] = "; ".join([*caveat(base.get(key, ()), "base", row["metric"]),
                                   *caveat(cand.get(key, ()), "cand", row["metric"])])


def worse_beyond(table: pd.DataFrame, pct: float) -> pd.DataFrame:
    """Rows judged worse whose estimate is worse by more than `pct` percent."""
    worse = table[table["verdict"] == verdict.WORSE]
    higher = worse["metric"].map(lambda m: METRICS[m].higher_is_better).astype(bool)
    change = np.where(higher, 1 - worse["ratio"], worse["ratio"] - 1)
    return worse[change > pct / 100]


def section(base: str | Path | None, cand: str | Path | None, *,
            by: Sequence[str] | None = None,
            alpha: float = 0.05, threshold: float = verdict.DEFAULT_THRESHOLD,
            include: Sequence[str] = (), figures_dir: str | Path | None = None) -> Any:
    """The report's comparison section (notebooks/60-compare.ipynb): `section_parts`,
    all but the last displayed here and the last returned for the cell to show."""
    from IPython.display import display

    parts = section_parts(base, cand, by=by, alpha=alpha, threshold=threshold,
                          include=include, figures_dir=figures_dir)
    for part in parts[:-1]:
        display(part)
    return parts[-1]


def section_parts(base: str | Path | None, cand: str | Path | None, *,
                  by: Sequence[str] | None = None, alpha: float = 0.05,
                  threshold: float = verdict.DEFAULT_THRESHOLD, include: Sequence[str] = (),
                  figures_dir: str | Path | None = None) -> list[Any]:
    """The comparison's table with a tally of its verdicts and what each side left out,
    then a forest plot of every row's ratio and interval; only a note (which the report
    leaves out) when no trees are given."""
    from harness.analysis.figures import plots
    from harness.analysis.sections.display import markdown

    if not base or not cand:
        return [markdown("No comparison configured: set the notebook parameters "
                         "`compare_base` and `compare_cand` to two raw-results directories "
                         "(`harness report --compare BASE CAND`, or `harness compare BASE "
                         "CAND` on its own).", omit=True)]
    from harness.analysis.data import likeness

    lb, lc = (load_tree(Path(p), ops=False, include=include) for p in (base, cand))
    by = list(by) if by else likeness.default_by(lb, lc)
    found = likeness.differences(lb, lc, by)
    if found:  # unlike things: said, and no verdict drawn
        return [markdown(f"`{cand}` against `{base}`: "
                         + likeness.refusal(found).replace("--allow-different", "`harness "
                                                           "compare --allow-different`")
                         + ". Set `compare_by` to match on what differs.")]
    result = comparison(Path(base), Path(cand), by=by, alpha=alpha, threshold=threshold,
                        include=include)
    table = result.table
    counts = table["verdict"].value_counts()
    tally = ", ".join(f"{counts[v]} {v}" for v in verdict.VERDICTS if v in counts)
    head = (f"`{cand}` against `{base}`, groups matched on {', '.join(by)}: {tally} "
            f"(of {len(table)} group × metric rows, one family: "
            f"{result.family.sentence('rows')}; better or worse exactly where the printed "
            f"interval of the ratio excludes 1, no significant difference where it lies "
            f"within ±{threshold:.0%}).")
    left = pooling.line(result.left_out, include, pooling.REPORT_HINT)
    warned = [w.removeprefix("warning: ") for w in result.warnings(by)]
    checked = ("\n\nMeasurement checks that failed (a verdict resting on one says so):\n\n"
               + "\n".join(f"- {w}" for w in warned)) if warned else ""
    fig = plots.forest(table, list(by), threshold=threshold)
    parts = [markdown(head + "\n\n" + render(table, list(by), "markdown")
                      + (f"\n\n{left[0].upper()}{left[1:]}." if left else "") + checked),
             _answers(table, list(by), base, cand, threshold),
             plots.publish(fig, "compare-forest", Path(figures_dir) if figures_dir else None)]
    from harness.analysis.figures import sweeps

    curves = sweeps.compare_figure(Path(base), Path(cand))  # both trees swept the load
    if curves is not None:
        parts.append(plots.publish(curves, "compare-capacity",
                                   Path(figures_dir) if figures_dir else None))
    return parts


def _answers(table: pd.DataFrame, by: Sequence[str], base: str | Path, cand: str | Path,
             threshold: float) -> Any:
    """For the report's summary of findings: each row's verdict, and the question the
    comparison answers with its rows' ratios pooled per metric (the geometric mean over
    the rows; its interval the rows' own averaged on the log scale, as wide as if the
    rows moved together) and what deciding the open rows would take."""
    from harness.analysis.sections import answers
    from harness.analysis.stats import planning

    heading = "Comparison of two result trees"
    found = [answers.Answer(
        " ".join(f"{k}={r[k]}" for k in by) + f" {r['metric']}: candidate against base",
        r["verdict"], float(r["ratio"]), float(r["ratio_ci_low"]), float(r["ratio_ci_high"]),
        float(r["ratio_ci_level"]), heading=heading) for r in table.to_dict("records")]
    pooled = []
    for metric, rows in table.groupby("metric", sort=False):
        ok = rows[(rows["ratio"] > 0) & (rows["ratio_ci_low"] > 0)]
        if ok.empty:
            continue
        logs = [float(np.exp(np.log(ok[c]).mean())) for c in
                ("ratio", "ratio_ci_low", "ratio_ci_high")]
        runs = int(min(ok["n_base"].min(), ok["n_cand"].min()))
        pooled.append(answers.Estimate(f"{metric} ratio, geometric mean over {len(ok)} "
                                       f"row{'s' if len(ok) != 1 else ''}", *logs, "×",
                                       runs))
    asked = answers.Question("", f"Did {cand} change throughput or latency against {base}?",
                             tuple(pooled), would_take=planning.would_take_text(
                                 table, threshold), heading=heading)
    return answers.publish(found, [asked])


def within(tree: Path, experiment: str | None = None, *,
           baseline: Mapping[str, str] | None = None, by: Sequence[str] = ("op",),
           metrics: Sequence[str] = tuple(METRICS), alpha: float = 0.05,
           threshold: float = verdict.DEFAULT_THRESHOLD, include: Sequence[str] = (),
           gate: str = multiplicity.FDR) -> Comparison:
    """`comparison` of each configuration of one experiment's grid against the first (or
    the one `baseline` names, KEY=VALUE of grid keys), all rows one family; the table's
    first column ``configuration`` names the candidate ("value_size_bytes=4096")."""
    loaded = load_tree(Path(tree), include=include)
    names = sorted(set(loaded.runs["experiment"].astype(str)))
    if experiment is None and len(names) == 1:
        experiment = names[0]
    if experiment not in names:
        raise ResultsError(f"{tree}: name the experiment to compare within with "
                           f"--experiment ({', '.join(names) or 'none here'})")
    loaded = loaded.runs_where(loaded.runs["experiment"].astype(str) == experiment)
    keys = [k for k in loaded.grid_keys if k not in by and k in loaded.runs
            and loaded.runs[k].nunique(dropna=True) > 1]
    if not keys:
        raise ResultsError(f"{experiment}: one configuration, nothing to compare within it "
                           "(harness compare BASE CAND compares it with another tree)")
    configs = [tuple(c) for c in loaded.runs[keys].drop_duplicates().itertuples(index=False)]
    base = configs[0]
    if baseline:
        unknown = sorted(set(baseline) - set(keys))
        if unknown:
            raise ResultsError(f"--baseline {unknown[0]}: not a grid key varied in "
                               f"{experiment} ({', '.join(keys)})")
        chosen = [c for c in configs if all(str(dict(zip(keys, c, strict=True))[k]) == v
                                            for k, v in baseline.items())]
        if not chosen:
            raise ResultsError(f"--baseline {baseline}: no configuration of {experiment} "
                               "has those values")
        base = chosen[0]

    def runs_of(c: tuple[Any, ...]) -> Loaded:
        mask = pd.Series(True, index=loaded.runs.index)
        for k, v in zip(keys, c, strict=True):
            mask &= loaded.runs[k].astype(str) == str(v)
        return loaded.runs_where(mask)

    lb = runs_of(base)
    ib = group_intervals(lb, list(by))
    found_b = group_checks(lb, list(by))
    rows, tests, found_c = [], [], {}
    for c in configs:
        if c == base:
            continue
        lc = runs_of(c)
        label = ", ".join(f"{k}={v}" for k, v in zip(keys, c, strict=True))
        got, lrs, _ = match_rows(ib, group_intervals(lc, list(by)), list(by), metrics,
                                 {"configuration": label})
        cand_found = group_checks(lc, list(by))
        add_caveats(got, list(by), found_b, cand_found)
        rows += got
        tests += lrs
        found_c.update(cand_found)
    judged = judge_rows(rows, tests, alpha=alpha, threshold=threshold, gate=gate)
    table = pd.DataFrame(rows, columns=["configuration", *by, *ROW_FIELDS])
    return Comparison(table, {"BASE": loaded.left_out}, judged.family,
                      {"BASE": {k: v for k, v in found_b.items() if v}})
