"""`harness history --gate`: does the newest point lie in a worse level that no one accepted?

A CI job runs the gate after every commit's runs, so the gate is asked the same question
again at every new point, and its answer must be one a job can act on:

- **fail** when a series' newest level is significantly worse than the level before it
  (a change of the history: `harness.analysis.history.changes`), that change began among
  the points not yet accepted (each series' newest `window` points, default the
  history's `min_runs`; or every point after the one `since` names: a label value or a
  run id, the last commit a job accepted), and the newest points of that level (its
  newest `min_runs`, `changepoints.newest_level`) lie worse than the level before it at
  the one-sided `GATE_LEVEL`, Benjamini-Hochberg over the series and metrics that would
  fail. A regression so fails the job on the first point where it can be shown and, with
  `since`, at every point after until it is fixed (a better level follows, or its newest
  points no longer lie worse) or accepted (`since` moves past where it began);
- **pending** ("not yet judgeable") when no change can be shown yet but the newest
  points, holding fewer runs than a change needs, lie worse than their level
  (`changepoints.trailing`, at `GATE_LEVEL`, Benjamini-Hochberg over every series and
  metric), or
  when a worse level is shown but has too few points yet for its newest ones to be held
  to `GATE_LEVEL`. Said in one line naming how many more runs would tell, and only then:
  a newest point that lies in its level is judged, whatever its runs;
- **pass** otherwise.

False failures. The history's changes are one Benjamini-Hochberg family at `q` over every
candidate of every series and metric, each the larger p of the scans over its stretch
and the run-level test; so one evaluation of a history where nothing changed shows a
change with probability at most about `q`. The gate is asked again at every commit of
the same history, so a change that noise made stands, and is asked about, commit after
commit: the second test, of the newest points alone at `GATE_LEVEL` (0.001), is asked
afresh at each, and a spurious change fails the job only where the newest points too lie
that far off. What both cost per point of history, and how late a real step fails the
job, is measured against Apache Otava replayed the same way in
benchmarks/history_detection.py (``--online``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.analysis.history.changes import WORSE, History, Series
from harness.analysis.stats import multiplicity
from harness.analysis.stats.changepoints import TailTest
from harness.errors import ResultsError
from harness.text import printable

PASS, FAIL, PENDING = "pass", "fail", "pending"
#: The one-sided level at which the newest points of a worse level must lie worse than
#: the level before it (Benjamini-Hochberg over the series and metrics that would fail),
#: and newest runs too few for a change worse than their level (over every series and
#: metric): asked at every commit, each claim is made falsely about once in a thousand.
GATE_LEVEL = 0.001


@dataclass(frozen=True)
class Newest:
    """One series and metric at its newest point, as the gate judges it."""

    name: str
    #: Its newest level is a significant change for the worse (the history's).
    worse: bool = False
    #: That change began among the points not yet accepted.
    opened: bool = False
    point: str = ""  # where the newest level began
    ratio: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    ci_level: float = math.nan
    q: float = math.nan
    #: The trailing tests whose points are all open (`changepoints.trailing`).
    trailing: tuple[TailTest, ...] = ()
    #: The newest points of the newest level against the level before it
    #: (`changepoints.newest_level`), and how many points that level has.
    confirm: TailTest | None = None
    level_points: int = 0


@dataclass(frozen=True)
class Outcome:
    """The gate's verdict (`PASS`, `FAIL`, `PENDING`) and its one line."""

    verdict: str
    line: str
    failing: tuple[Newest, ...] = ()
    #: PENDING: the runs still needed before the newest points can be judged.
    more_runs: int = 0


def _pending(items: Sequence[Newest], level: float, min_runs: int) -> Outcome | None:
    """Newest runs too few for a change that lie worse than their level at `level`
    (Benjamini-Hochberg over every series and metric), if any."""
    tested = [x for x in items if x.trailing]
    family = multiplicity.adjust(
        [min(1.0, len(x.trailing) * min(t.p for t in x.trailing)) for x in tested], q=level)
    off = [(x, qv) for x, qv in zip(tested, family.p_adjusted, strict=True) if qv < level]
    if not off:
        return None
    x, qv = min(off, key=lambda o: o[1])
    t = min(x.trailing, key=lambda t: t.p)
    # For the likeliest start of each: the runs a change beginning there still needs.
    more = max(min_runs - min(y.trailing, key=lambda tt: tt.p).runs for y, _ in off)
    return Outcome(PENDING, printable(
        f"gate: not yet judgeable: the newest runs of {len(off)} of {len(items)} series x "
        f"metrics lie worse than their level (worst: {x.name} {t.ratio:.3g}x over "
        f"{t.runs} run(s), q = {qv:.2g}); a change needs {min_runs} runs: {more} more "
        "run(s) will tell"), more_runs=more)


def decide(items: Sequence[Newest], *, min_runs: int, scope: str,
           level: float = GATE_LEVEL) -> Outcome:
    """The verdict over every series and metric (see the module doc); `scope` words the
    open points (``in the newest 3 point(s)``, ``after c05``)."""
    candidates = [x for x in items if x.worse and x.opened]
    family = multiplicity.adjust([x.confirm.p if x.confirm else math.nan
                                  for x in candidates], q=level)
    failing = tuple(x for x, qv in zip(candidates, family.p_adjusted, strict=True)
                    if qv < level)
    if failing:
        c = max(failing, key=lambda x: abs(math.log(x.ratio)))
        # Names from the tree, printed on a terminal: as text, never as control sequences.
        return Outcome(FAIL, printable(
            f"gate: FAIL: {len(failing)} of {len(items)} series x metrics lie in a worse "
            f"level that began {scope}; worst: {c.name} {c.ratio:.3g}x [{c.ci_low:.3g}, "
            f"{c.ci_high:.3g}] ({multiplicity.fmt_level(c.ci_level)} CI, q = {c.q:.2g}) "
            f"from {c.point}"),
            failing)
    if pending := _pending(items, level, min_runs):
        return pending
    young = [x for x in candidates if x.level_points < min_runs]
    if young:
        c = max(young, key=lambda x: abs(math.log(x.ratio)))
        runs = max(x.confirm.runs / x.confirm.points if x.confirm else 1 for x in young)
        more = math.ceil(max(min_runs - x.level_points for x in young) * runs)
        return Outcome(PENDING, printable(
            f"gate: not yet judgeable: a worse level began {scope} in {len(young)} of "
            f"{len(items)} series x metrics (worst: {c.name} {c.ratio:.3g}x from "
            f"{c.point}), its newest points not yet worse than the level before at the "
            f"gate's level {level:g}: {more} more run(s) will tell"), more_runs=more)
    faded = len(candidates)
    kept = [x for x in items if x.worse and not x.opened]
    note = "".join([
        f"; {faded} of {len(items)} series x metrics in a worse level that began {scope}, "
        "whose newest points no longer lie worse than the level before it" if faded else "",
        f"; {len(kept)} of {len(items)} series x metrics stay in a worse level that began "
        "before them (accepted)" if kept else ""])
    return Outcome(PASS, printable(f"gate: pass: no worse level began {scope}{note}"))


def _first_open(s: Series, h: History, since: int | None, window: int) -> int:
    """The first of the series' points not accepted."""
    if since is None:
        return max(0, len(s.points) - window)
    order = {name: i for i, name in enumerate(h.point_names)}
    return sum(1 for p in s.points if order[p.name] <= since)


def _since(h: History, since: str) -> int:
    order = {name: i for i, name in enumerate(h.point_names)}
    if since in order:
        return order[since]
    if since in h.run_points:
        return h.run_points[since]
    what = f"label {h.by}'s values" if h.by else "run ids"
    raise ResultsError(f"--since {printable(since)!r}: no point of this history has that "
                       f"name ({what}, or the id of a run it uses)")


def newest(h: History, *, window: int | None = None, since: str | None = None
           ) -> list[Newest]:
    """Each series and metric of `h` at its newest point (see `decide`)."""
    if window is not None and since is not None:
        raise ResultsError("--window and --since both name the open points: give one")
    window = h.min_runs if window is None else window
    if window < 1:
        raise ResultsError(f"--window {window}: at least 1 point")
    at = _since(h, since) if since is not None else None
    out = []
    for s in h.series:
        first_open = _first_open(s, h, at, window)
        tail = tuple(t for t in s.trailing if len(s.points) - t.points >= first_open)
        name = f"{s.experiment} {s.config_id} {s.op} {s.metric}"
        start = s.levels[-1][0] if s.levels else 0
        c = next((c for c in s.changes if start and c.point == s.points[start].name), None)
        if c is None:
            out.append(Newest(name, trailing=tail))
            continue
        out.append(Newest(name, c.direction == WORSE, start >= first_open, c.point,
                          c.ratio, c.ci_low, c.ci_high, c.ci_level, c.q, tail, s.newest,
                          len(s.points) - start))
    return out


def gate(h: History, *, window: int | None = None, since: str | None = None) -> Outcome:
    """`harness history --gate` (see the module doc)."""
    scope = (f"after {printable(since)}" if since is not None
             else f"in the newest {h.min_runs if window is None else window} point(s)")
    return decide(newest(h, window=window, since=since), min_runs=h.min_runs, scope=scope)
