"""`harness history RAW`: a tree's runs in time order, and where each series changed.

A *series* is one experiment's configuration (config_id) and op, for one metric
(throughput, p50, p99; the mean on request). Its *points* are its runs in the order
they started, or with ``by`` a label's values (``--by commit``), ordered by their first
run, each point pooling all its runs as the kit pools repetitions (total ops over total
time; percentiles of all their ops).

Runs left out of every series, each with why: failed runs (and partial ones unless
``include``), runs without a start time (imports), runs without the ``by`` label, and
runs that failed a measurement check of their own (`RUN_CHECKS`: a saturated client, an
unmet target rate, a warm-up not over, a busy machine): an unsound run raises no alarm.
Duplicates are not left out: in a history every run is a measurement at its time.

Change points (`harness.analysis.stats.changepoints` says how and why):

1. each series and metric is cut where its level changes (optimal partitioning of its
   points under a BIC-like penalty): the candidates;
2. each candidate is tested in the stretch between its neighbouring candidates, twice:
   is there a change in that stretch at all (a permutation test and a t over the
   points, each taking the best split, so the place having been chosen to fit fools
   neither), and the one `harness compare` makes of two trees, the runs since the change
   before against the runs up to the change after: the ratio after/before of the pooled
   metric, each side's SE from the jackknife over its runs, percentiles compared as
   pooled percentiles (never an average of per-run ones), Welch's t on the log ratio;
3. a candidate's p is the larger of the two, and all candidates of the call, over every
   series and metric, are one family judged by Benjamini-Hochberg at `q`
   (`harness.analysis.stats.multiplicity`): while one is not significant (then: smaller than
   `min_effect`), the weakest is dropped and its neighbours, whose stretches grew, are
   tested again. The printed interval of each change is at the family's FCR-adjusted
   level, so it excludes 1 exactly where the change is significant.

A change needs `min_runs` runs after it; any stretch but the newest also needs two points
or more. The newest points that hold fewer runs than that are tested apart, against their
level (`Series.trailing`), and the newest points of the newest level against the level
before it (`Series.newest`): what `harness.analysis.history.gate` asks.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.data.load import Loaded
from harness.analysis.data.opsread import group_runs
from harness.analysis.data.queries import plan
from harness.analysis.data.summary import fixed_duration_runs
from harness.analysis.history.runs import SERIES_KEYS, read, select, unsound_runs
from harness.analysis.stats import intervals, multiplicity, verdict
from harness.analysis.stats.changepoints import (
    MIN_RUNS,
    TailTest,
    locations,
    newest_level,
    split_test,
    trailing,
)
from harness.analysis.stats.intervals import RunInterval
from harness.analysis.stats.loo import RunSorted
from harness.errors import ResultsError
from harness.results.labels import COLUMN_PREFIX, KEY_RE

#: Metric -> (quantile or None, higher is better), by the names `--metric` takes.
METRICS: dict[str, tuple[float | None, bool]] = {
    "throughput_ops_s": (None, True),
    "latency_mean_ms": (None, False),
    "latency_p50_ms": (0.5, False),
    "latency_p99_ms": (0.99, False),
}
DEFAULT_METRICS: tuple[str, ...] = ("throughput_ops_s", "latency_p50_ms", "latency_p99_ms")
#: The report draws a history where a series has this many points.
MIN_POINTS_SHOWN = 5
WORSE, BETTER = "worse", "better"
_NS_PER_MS = 1e6


@dataclass(frozen=True)
class Change:
    """A change point: the series, the first point after it, and after/before."""

    experiment: str
    config_id: str
    op: str
    metric: str
    run_id: str  # the first run after the change
    point: str  # that point: its label value, or the run id
    started_utc: str
    direction: str
    ratio: float
    ci_low: float
    ci_high: float
    ci_level: float
    q: float
    p: float
    p_scan: float
    runs_before: int
    runs_after: int
    points_before: int
    points_after: int
    newest: bool  # it begins at the series' newest point

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Point:
    """One point of a series and metric: its pooled value with the CI over its runs."""

    name: str
    started_utc: str
    value: float
    low: float
    high: float
    runs: int


@dataclass(frozen=True)
class Series:
    """One configuration, op and metric over time, with the levels between changes."""

    experiment: str
    config_id: str
    op: str
    metric: str
    points: tuple[Point, ...]
    #: (first point, last point + 1, pooled value) of each stretch between changes.
    levels: tuple[tuple[int, int, float], ...]
    changes: tuple[Change, ...]
    #: The newest points with fewer runs than a change needs, against their level; the
    #: newest points of the newest level against the level before it (`harness.analysis.
    #: stats.changepoints.trailing`, `newest_level`: what the gate asks).
    trailing: tuple[TailTest, ...] = ()
    newest: TailTest | None = None


@dataclass(frozen=True)
class History:
    changes: tuple[Change, ...]
    series: tuple[Series, ...]
    #: Every run left out, each ``{run_id, experiment, config_id, reason}``.
    left_out: tuple[dict[str, str], ...]
    points: int
    by: str | None
    family: multiplicity.Family
    q: float
    min_effect: float
    min_runs: int
    skipped: tuple[str, ...] = field(default_factory=tuple)
    #: Every point's name (label value or run id), in order; and each kept run's point.
    point_names: tuple[str, ...] = ()
    run_points: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The JSON interface: ``changes``, ``points``, ``left_out`` and how judged."""
        return {
            "changes": [c.as_dict() for c in self.changes],
            "points": self.points,
            "left_out": list(self.left_out),
            "series": len(self.series),
            "candidates": self.family.m,
            "family": self.family.sentence("candidate changes"),
            "by": self.by, "q": self.q, "min_effect": self.min_effect,
            "min_runs": self.min_runs,
        }


@dataclass(eq=False)
class _Work:
    """One series and metric while it is judged."""

    key: tuple[str, str, str]
    metric: str
    run_pos: np.ndarray  # rows of the runs table, in point order
    point: np.ndarray  # each run's point (series-local, 0..)
    names: list[str]
    values: np.ndarray  # each run's log value of the metric
    side: Any  # (positions) -> RunInterval
    seed: int = 0
    #: The changes still standing, and every candidate's last test: (scan p, local).
    changes: set[int] = field(default_factory=set)
    judged: dict[int, tuple[float, verdict.LogRatio]] = field(default_factory=dict)


def _side_function(metric: str, n: np.ndarray, wall_s: np.ndarray, lat_sum_ms: np.ndarray,
                   fixed: np.ndarray, sorted_runs: RunSorted | None, index_of: dict[int, int]
                   ) -> Any:
    """(run positions) -> the pooled metric of those runs with its CI over them."""
    q, _ = METRICS[metric]

    def side(pos: np.ndarray) -> RunInterval:
        idx = np.array([index_of[int(p)] for p in pos], np.int64)
        if q is None and metric == "throughput_ops_s":
            return intervals.throughput_interval(n[idx], wall_s[idx], bool(fixed[idx].all()))
        if q is None:
            return intervals.mean_interval(lat_sum_ms[idx], n[idx])
        assert sorted_runs is not None
        part = RunSorted([sorted_runs.runs[i] for i in idx], sorted_runs.labels[idx])
        return part.with_scale(_NS_PER_MS).interval(q)

    return side


def _per_run(metric: str, n: np.ndarray, wall_s: np.ndarray, lat_sum_ms: np.ndarray,
             sorted_runs: RunSorted | None) -> np.ndarray:
    q, _ = METRICS[metric]
    with np.errstate(divide="ignore", invalid="ignore"):
        if metric == "throughput_ops_s":
            return n / wall_s
        if q is None:
            return lat_sum_ms / n
    assert sorted_runs is not None
    return sorted_runs.with_scale(_NS_PER_MS).per_run(q)


def _bounds(changes: set[int], at: int, n_points: int) -> tuple[int, int]:
    """The stretch around the change at point `at`: from the change before it to the
    change after it (the series' ends where there is none)."""
    before = max((c for c in changes if c < at), default=0)
    after = min((c for c in changes if c > at), default=n_points)
    return before, after


def _test(w: _Work, at: int) -> verdict.LogRatio:
    a, b = _bounds(w.changes, at, len(w.names))
    before = w.run_pos[(w.point >= a) & (w.point < at)]
    after = w.run_pos[(w.point >= at) & (w.point < b)]
    x, y = w.side(before), w.side(after)
    return verdict.log_ratio_test(x.log_value, x.se_log, x.df, y.log_value, y.se_log, y.df)


def _retest(w: _Work, at: int, min_runs: int) -> None:
    """The candidate at `at` tested again between the changes standing around it."""
    a, b = _bounds(w.changes, at, len(w.names))
    idx = np.flatnonzero(np.isfinite(w.values))
    found = split_test(w.values[idx], w.point[idx], a, b, min_runs=min_runs,
                       rng=np.random.default_rng(w.seed + at))
    w.judged[at] = (found.p_scan if found is not None else 1.0, _test(w, at))


def _p(judged: tuple[float, verdict.LogRatio]) -> float:
    """A candidate's p: the larger of its stretch's scan and its local test (NaN: the
    local test had no interval, e.g. too few ops for a p99: not in the family)."""
    p_scan, lr = judged
    return float("nan") if math.isnan(lr.p) else max(p_scan, lr.p)


def _effect(ratio: float) -> float:
    return abs(ratio - 1) if ratio > 0 else float("nan")


def _judge(work: list[_Work], q: float, min_effect: float, min_runs: int
           ) -> tuple[multiplicity.Family, list[tuple[_Work, int, float, float]]]:
    """Every candidate of every series one BH family: while one standing is not
    significant (or, then, smaller than `min_effect`), the weakest goes and its
    neighbours are tested again (their stretches grew). Returns the family and
    (work, point, p, q) of each candidate."""
    for w in work:
        for at in sorted(w.changes):
            _retest(w, at, min_runs)
    keys = [(w, at) for w in work for at in sorted(w.changes)]
    while True:
        ps = [_p(w.judged[at]) for w, at in keys]
        family = multiplicity.adjust(ps, q=q)
        standing = [i for i, (w, at) in enumerate(keys) if at in w.changes]
        weak = [i for i in standing if not family.p_adjusted[i] < q]
        if weak:
            drop = max(weak, key=lambda i: np.nan_to_num(family.p_adjusted[i], nan=np.inf))
        else:
            small = [i for i in standing
                     if not _effect(keys[i][0].judged[keys[i][1]][1].ratio) >= min_effect]
            if not small:
                break
            drop = min(small, key=lambda i: np.nan_to_num(
                _effect(keys[i][0].judged[keys[i][1]][1].ratio), nan=-1.0))
        w, at = keys[drop]
        w.changes.discard(at)
        a, b = _bounds(w.changes, at, len(w.names))
        for nb in (a, b):
            if nb in w.changes:
                _retest(w, nb, min_runs)
    rows = [(w, at, p, qv) for (w, at), p, qv in zip(keys, ps, family.p_adjusted,
                                                     strict=True)]
    return family, rows


def detect(values: Sequence[np.ndarray], points: Sequence[np.ndarray],
           sides: Sequence[Any], *, q: float = multiplicity.DEFAULT_Q,
           min_effect: float = 0.0, min_runs: int = MIN_RUNS,
           ) -> tuple[multiplicity.Family, list[list[tuple[int, verdict.LogRatio, float]]]]:
    """The change points of several series judged as one family, from arrays: each
    series' runs' log values, their points (0.., in order) and a side function
    ((run indices) -> `RunInterval` of the pooled metric). Per series, its changes as
    (first point after, after/before at the family's level, q). `history` does the same
    on a tree; benchmarks/history_detection.py on simulated series."""
    work = []
    for i, (v, pt, side) in enumerate(zip(values, points, sides, strict=True)):
        pt = np.asarray(pt, np.int64)
        v = np.asarray(v, float)
        n_points = int(pt.max()) + 1 if pt.size else 0
        w = _Work(("", "", str(i)), "", np.arange(pt.size), pt,
                  [str(j) for j in range(n_points)], v, side, seed=i)
        w.changes = set(locations(v, pt, n_points, min_runs=min_runs))
        work.append(w)
    family, rows = _judge(work, q, min_effect, min_runs)
    out: list[list[tuple[int, verdict.LogRatio, float]]] = [[] for _ in work]
    where = {id(w): i for i, w in enumerate(work)}
    for w, at, _, qv in rows:
        if at in w.changes:
            out[where[id(w)]].append((at, w.judged[at][1].at_level(family.level), qv))
    return family, out


def history(
    raw: Path | str,
    *,
    experiments: Sequence[str] | None = None,
    by: str | None = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
    q: float = multiplicity.DEFAULT_Q,
    min_effect: float = 0.0,
    min_runs: int = MIN_RUNS,
    include: Sequence[str] = (),
    progress: bool = False,
) -> History:
    """The history of every series in `raw` (see the module doc)."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ResultsError(f"unknown metric {unknown[0]!r}; choose from {', '.join(METRICS)}")
    if by is not None and not KEY_RE.match(by):
        raise ResultsError(f"--by {by!r} is not a label name (harness run --label KEY=VALUE)")
    if min_runs < 2:
        raise ResultsError("min_runs must be at least 2: a change needs runs on each side "
                           "to have an interval")
    if not 0 <= min_effect < 1:
        raise ResultsError(f"min_effect {min_effect!r} must be a share from 0 to 1 (5% = 0.05)")
    loaded = read(Path(raw), experiments, progress)
    if loaded.runs.empty:
        raise ResultsError(f"{raw}: no runs found (expected <experiment>/<run_id>/"
                           "manifest.json below it)")
    runs, left = select(loaded, by, include)
    unsound = unsound_runs(Loaded(runs, pd.DataFrame(), loaded.grid_keys)) if len(runs) else {}
    if unsound:
        bad = runs["run_id"].astype(str).isin(list(unsound)).to_numpy()
        left += [{"run_id": str(r.run_id), "experiment": str(r.experiment),
                  "config_id": str(r.config_id), "reason": unsound[str(r.run_id)]}
                 for r in runs[bad].itertuples()]
        runs = runs[~bad].reset_index(drop=True)
    skipped = tuple(f"{s.run_dir}: {s.reason}" for s in loaded.skipped)
    if runs.empty:
        return History((), (), tuple(left), 0, by, multiplicity.adjust([], q=q), q,
                       min_effect, min_runs, skipped)
    # Points: each run, or each value of the label, in the order of their first run.
    runs["_point"] = (runs[COLUMN_PREFIX + by].astype(str) if by is not None
                      else runs["run_id"].astype(str))
    first = runs.groupby("_point")["_start"].min().sort_values(kind="stable")
    order = {name: i for i, name in enumerate(first.index)}
    runs["_order"] = runs["_point"].map(order)
    runs = runs.sort_values(["_order", "_start", "run_id"], kind="stable",
                            ignore_index=True)

    loaded_kept = Loaded(runs.drop(columns=["_start", "_point", "_order"]), pd.DataFrame(),
                         loaded.grid_keys)
    p = plan(loaded_kept, SERIES_KEYS)
    units, sorted_by_group = group_runs(loaded_kept, p, progress=progress)
    fixed_all = fixed_duration_runs(loaded_kept.runs)
    work: list[_Work] = []
    for g, u in units.groupby(["rgroup", "op"], sort=False):
        key = tuple(str(v) for v in p.key_values(g))
        pos = u["run_pos"].to_numpy(np.int64)
        order_pos = np.argsort(runs["_order"].to_numpy()[pos], kind="stable")
        u = u.iloc[order_pos]
        pos = pos[order_pos]
        global_point = runs["_order"].to_numpy()[pos]
        uniq, local = np.unique(global_point, return_inverse=True)
        names = [str(first.index[i]) for i in uniq]
        n = u["n"].to_numpy(np.float64)
        wall_s = u["wall_ns"].to_numpy(np.float64) / 1e9
        lat_ms = u["lat_sum_ns"].to_numpy(np.float64) / _NS_PER_MS
        srt = sorted_by_group.get(g)
        if srt is not None:  # in this series' point order
            where = {int(lab): i for i, lab in enumerate(srt.labels)}
            srt = RunSorted([srt.runs[where[int(x)]] for x in pos], pos.copy())
        index_of = {int(x): i for i, x in enumerate(pos)}
        for metric in metrics:
            values = np.log(_per_run(metric, n, wall_s, lat_ms, srt))
            side = _side_function(metric, n, wall_s, lat_ms, fixed_all[pos], srt, index_of)
            seed = zlib.crc32("\0".join((*key, metric)).encode())  # same every time
            w = _Work(key, metric, pos, local, names, values, side, seed=seed)
            w.changes = set(locations(values, local, len(names), min_runs=min_runs))
            work.append(w)
    family, rows = _judge(work, q, min_effect, min_runs)
    changes_by: dict[int, list[Change]] = {id(w): [] for w in work}
    all_changes: list[Change] = []
    for w, at, pv, qv in rows:
        if at not in w.changes:
            continue
        p_scan, local = w.judged[at]
        lr = local.at_level(family.level)
        hib = METRICS[w.metric][1]
        worse = (lr.ratio < 1) if hib else (lr.ratio > 1)
        a, b = _bounds(w.changes, at, len(w.names))
        first_run = int(w.run_pos[np.flatnonzero(w.point == at)[0]])
        row = runs.iloc[first_run]
        ch = Change(
            experiment=w.key[0], config_id=w.key[1], op=w.key[2], metric=w.metric,
            run_id=str(row["run_id"]), point=w.names[at],
            started_utc=str(row["started_utc"]), direction=WORSE if worse else BETTER,
            ratio=lr.ratio, ci_low=lr.low, ci_high=lr.high, ci_level=lr.confidence, q=qv,
            p=pv, p_scan=p_scan,
            runs_before=int(np.count_nonzero((w.point >= a) & (w.point < at))),
            runs_after=int(np.count_nonzero((w.point >= at) & (w.point < b))),
            points_before=at - a, points_after=b - at,
            newest=at == len(w.names) - 1)
        changes_by[id(w)].append(ch)
        all_changes.append(ch)
    series = []
    for w in work:
        pts = []
        for i, name in enumerate(w.names):
            mine = w.run_pos[w.point == i]
            est = w.side(mine)
            pts.append(Point(name, str(runs.iloc[int(mine[0])]["started_utc"]), est.value,
                             est.low, est.high, int(mine.size)))
        cuts = [0, *sorted(w.changes), len(w.names)]
        levels = tuple((a, b, w.side(w.run_pos[(w.point >= a) & (w.point < b)]).value)
                       for a, b in itertools.pairwise(cuts))
        hib = METRICS[w.metric][1]
        series.append(Series(
            *w.key, w.metric, tuple(pts), levels,
            tuple(sorted(changes_by[id(w)], key=lambda c: c.started_utc)),
            trailing(w.values, w.point, cuts[1:-1], min_runs=min_runs, higher_is_better=hib),
            newest_level(w.values, w.point, cuts[1:-1], points=min_runs,
                         higher_is_better=hib)))
    all_changes.sort(key=lambda c: (c.experiment, c.config_id, c.op, c.metric,
                                    c.started_utc))
    return History(tuple(all_changes), tuple(series), tuple(left), len(first), by, family,
                   q, min_effect, min_runs, skipped, tuple(str(x) for x in first.index),
                   dict(zip(runs["run_id"].astype(str), runs["_order"].astype(int),
                            strict=True)))

