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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.checks.registry import Finding, group_checks
from harness.analysis.checks.runfacts import GroupKey
from harness.analysis.checks.words import caveat, warning_lines
from harness.analysis.data import pooling, queries
from harness.analysis.data.formats import bound_text, ratio_text, unbounded
from harness.analysis.data.load import Loaded, load, load_runs_only
from harness.analysis.data.summary_ci import _key, group_intervals
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
    common = [k for k in ib if k in ic]
    if not common:
        def names(groups: dict) -> list[str]:
            return sorted("/".join(map(str, k)) for k in groups)

        raise ResultsError(
            f"BASE and CAND have no group in common on {', '.join(by) or '(nothing)'}: "
            f"base has {names(ib) or 'none'}, cand has {names(ic) or 'none'}; "
            "choose other --by keys")
    rows, tests = [], []
    for key in sorted(common, key=str):
        values = dict(zip(by, key, strict=True))
        for name in metrics:
            m = METRICS[name]
            row, lr = _row(values, m, ib[key][m.field], ic[key][m.field])
            rows.append(row)
            tests.append(lr)
    # Every row tested is one claim of one family: verdicts and printed intervals agree.
    judged = multiplicity.judge(
        tests, [METRICS[r["metric"]].higher_is_better for r in rows], q=alpha,
        threshold=threshold, method=gate)
    for row, c in zip(rows, judged.claims, strict=True):
        row.update(ratio=c.ratio, ratio_ci_low=c.low, ratio_ci_high=c.high,
                   ratio_ci_level=c.level, p=c.p, p_adjusted=c.p_adjusted,
                   adjustment=judged.family.name, verdict=c.verdict)
    found = {"BASE": group_checks(lb, by), "CAND": group_checks(lc, by)}
    for row in rows:
        key = _key([row[k] for k in by])
        row["caveat"] = "; ".join([*caveat(found["BASE"].get(key, ()), "base", row["metric"]),
                                   *caveat(found["CAND"].get(key, ()), "cand", row["metric"])])
    table = pd.DataFrame(rows, columns=[*by, *ROW_FIELDS])
    return Comparison(table, {"BASE": lb.left_out, "CAND": lc.left_out}, judged.family,
                      {side: {k: v for k, v in f.items() if v and k in common}
                       for side, f in found.items()})


def worse_beyond(table: pd.DataFrame, pct: float) -> pd.DataFrame:
    """Rows judged worse whose estimate is worse by more than `pct` percent."""
    worse = table[table["verdict"] == verdict.WORSE]
    higher = worse["metric"].map(lambda m: METRICS[m].higher_is_better).astype(bool)
    change = np.where(higher, 1 - worse["ratio"], worse["ratio"] - 1)
    return worse[change > pct / 100]


def verdict_text(row: dict[str, Any]) -> str:
    """The verdict, qualified by the failed checks it rests on ("worse, but the client
    was saturated in 3 of 5 base runs")."""
    return f"{row['verdict']}, but {row['caveat']}" if row.get("caveat") else row["verdict"]


def _fmt(x: object) -> str:
    from harness.analysis.sections.tables import human

    return human(x)


#: The unit of each metric, shown in the text and Markdown tables.
UNITS = {"throughput": "ops/s", "latency_mean": "ms", "latency_p50": "ms",
         "latency_p99": "ms"}


def render(table: pd.DataFrame, by: Sequence[str], fmt: str,
           family: multiplicity.Family | None = None) -> str:
    """``table``: aligned text; ``markdown``: a pipe table; ``json``: a list of rows. The
    ratio's column states the level its intervals were printed at, and `family` (how the
    rows were judged) is said under the table."""
    if fmt == "json":
        return table.to_json(orient="records", indent=2)
    rows = []
    for r in table.to_dict("records"):
        def ci(v: float, lo: float, hi: float, n: int, text: Any = _fmt) -> str:
            if math.isnan(lo):
                return ""
            if unbounded(v, lo, hi):  # an interval that bounds nothing says so
                return f" [{bound_text(n, v, lo, hi)}]"
            return f" [{text(lo)}, {text(hi)}]"

        unit = UNITS.get(r["metric"])
        nb, nc = (int(r[k]) if isinstance(r[k], int | float) and r[k] == r[k] else 0
                  for k in ("n_base", "n_cand"))
        rows.append([*(_fmt(r[k]) for k in by),
                     f"{r['metric']} ({unit})" if unit else r["metric"],
                     _fmt(r["base"]) + ci(r["base"], r["base_ci_low"], r["base_ci_high"], nb),
                     _fmt(r["cand"]) + ci(r["cand"], r["cand_ci_low"], r["cand_ci_high"], nc),
                     ratio_text(r["ratio"]) + ci(r["ratio"], r["ratio_ci_low"],
                                                 r["ratio_ci_high"], min(nb, nc),
                                                 lambda x: ratio_text(x)[:-1]),
                     _p(r["p"]), _p(r["p_adjusted"]),
                     f"{r['n_base']}/{r['n_cand']}", verdict_text(r)])
    levels = table["ratio_ci_level"].dropna().unique() if len(table) else []
    level = multiplicity.fmt_level(float(levels[0])) if len(levels) == 1 else "adjusted"
    name = table["adjustment"].iloc[0] if len(table) else multiplicity.NAMES[
        multiplicity.FDR]
    head = [*by, "metric", "base [95% CI]", "cand [95% CI]", f"cand/base [{level} CI]",
            "p", f"p ({'BH' if name == multiplicity.NAMES[multiplicity.FDR] else name})",
            "runs", "verdict"]
    # Why a row has no test (one run, too few ops beyond a percentile), once per reason.
    notes = sorted({f"{r['metric']}: {r['test'][len('none: '):]}"
                    for r in table.to_dict("records") if r["test"].startswith("none: ")})
    if family is not None:
        notes.insert(0, family.sentence("rows"))
    if fmt == "markdown":
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines + [""] + [f"- {n}" for n in notes] if notes else lines)
    if fmt != "table":
        raise ValueError(f"format must be table, json or markdown, not {fmt!r}")
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows, strict=True)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in [head, *rows]]
    return "\n".join(lines + [f"note: {n}" for n in notes])


def _p(p: float) -> str:
    return "-" if math.isnan(p) else f"{p:.3g}"


def section(base: str | Path | None, cand: str | Path | None, *, by: Sequence[str] = ("op",),
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
                  by: Sequence[str] = ("op",), alpha: float = 0.05,
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
