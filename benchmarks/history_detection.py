"""Change points: `harness history`'s detection beside Apache Otava's, on series with a
known answer.

Simulated histories (seeded), one value per point as a CI job that runs one repetition per
commit records it (throughput of a fixed-op run, ops/s), lognormal noise of `noise` per
run, and:

- ``steps``: 0-3 steps of ±5-15% at random points at least 10 apart, 20-200 points;
- ``outliers``: the same with single-run outliers (2% of points, 1.3-2x or 0.5-0.77x);
- ``drift``: no step, a slow drift of ±5% over the whole series (a change point here is a
  false alarm: nothing stepped);
- ``null``: nothing at all.

Both tools see the same series: the kit through `history.detect` (the scan, the local
re-test with the throughput interval of `harness summary`, Benjamini-Hochberg at q =
0.05 over the candidates of each series), Otava through ``otava.analysis.
compute_change_points`` with its defaults (window 50, max p 0.001, no minimum
magnitude), run in its own virtualenv (``--otava-python``; Otava pins Google Cloud and
Slack clients the kit does not need). A detection within ±3 points of a true step is a
true positive (once per step); any other is a false positive. Printed per scenario and
noise: true positives / steps, false positives per 100 points, F1, and the location error.

``--online M`` replays M histories per scenario (steps, outliers, drift; 40-150 points,
steps from the 15th) point by point from the 10th, as a CI job adds commits, with 1 and 3
runs per point, and runs each tool's gate at every point (`harness.analysis.history.gate.
decide`, Otava's change points read the same way): fail when the newest level is worse
than the one before it and began in the open points, either the newest 3 (``window``,
the kit's default) or those after the last accepted point (``since``: the job's first
10 points accepted, then every failure accepted when it happens, from the point it names
as its level's start, as the recipe in docs/compare.md accepts one). Printed per scenario,
runs per point, mode and tool: regressions (worse steps) caught, naming a change within
±3 points of the step, of all; the points of delay after the step (median, p90); false
gate failures (naming no worse step) per 100 points; and the kit's "not yet judgeable"
per 100 points. ``--histories 0`` skips the offline table.

Setup: python3 -m venv /tmp/otava && /tmp/otava/bin/pip install apache-otava
Usage: .venv/bin/python benchmarks/history_detection.py --otava-python /tmp/otava/bin/python
       [--histories N] [--online M] [--seed S]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.analysis.history.changes import detect
from harness.analysis.history.gate import FAIL, PENDING, Newest, decide
from harness.analysis.stats import intervals
from harness.analysis.stats.changepoints import TailTest, newest_level, trailing

TOLERANCE = 3
OPS_PER_RUN = 100_000
BASE_RATE = 50_000.0

OTAVA = r"""
import json, sys
from otava.analysis import compute_change_points
out = []
for series in json.load(sys.stdin):
    cps, _ = compute_change_points(series)
    out.append([int(c.index) for c in cps])
json.dump(out, sys.stdout)
"""


@dataclass(frozen=True)
class History:
    values: np.ndarray  # one run's throughput per point
    steps: tuple[int, ...]  # the first point of each new level
    worse: tuple[int, ...] = ()  # those of `steps` where throughput fell: regressions


def simulate(rng: np.random.Generator, kind: str, noise: float) -> History:
    n = int(rng.integers(20, 201))
    level = np.zeros(n)
    steps: list[int] = []
    if kind in ("steps", "outliers"):
        k = int(rng.integers(0, 4))
        for _ in range(50):  # places at least 10 apart, 5+ from either end
            places = sorted(rng.choice(np.arange(5, n - 5), size=k, replace=False)) \
                if n > 10 + 2 * k else []
            if all(b - a >= 10 for a, b in itertools.pairwise(places)):
                steps = [int(p) for p in places]
                break
        for s in steps:
            level[s:] += math.log(1 + rng.choice([-1, 1]) * rng.uniform(0.05, 0.15))
    if kind == "drift":
        level += np.linspace(0, math.log(1 + rng.choice([-1, 1]) * 0.05), n)
    y = level + rng.normal(0, noise, n)
    if kind == "outliers":
        hit = rng.random(n) < 0.02
        y[hit] += np.log(np.where(rng.random(hit.sum()) < 0.5, rng.uniform(1.3, 2, hit.sum()),
                                  rng.uniform(0.5, 0.77, hit.sum())))
    return History(BASE_RATE * np.exp(y), tuple(steps))


def _side(rates: np.ndarray):
    """The kit's throughput interval of fixed-op runs at these rates."""
    ops = np.full(rates.size, float(OPS_PER_RUN))
    wall = ops / rates

    def side(idx: np.ndarray) -> intervals.RunInterval:
        return intervals.throughput_interval(ops[idx], wall[idx], False)

    return side


def kit(histories: list[np.ndarray], reps: int = 1) -> list[list[int]]:
    """Each history is its own `harness history` call; with `reps`, every `reps`
    consecutive values are the runs of one point (``--by commit``, repetitions: reps)."""
    out = []
    for rates in histories:
        point = np.arange(rates.size) // reps
        _, found = detect([np.log(rates)], [point], [_side(rates)])
        out.append(sorted(p for p, _, _ in found[0]))
    return out


def otava(histories: list[np.ndarray], python: str) -> list[list[int]]:
    done = subprocess.run([python, "-c", OTAVA], input=json.dumps([h.tolist()
                                                                    for h in histories]),
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def score(truth: list[tuple[int, ...]], found: list[list[int]], points: list[int]
          ) -> dict[str, float]:
    tp = fp = fn = 0
    errors = []
    for steps, hits in zip(truth, found, strict=True):
        free = list(steps)
        for h in hits:
            near = [s for s in free if abs(h - s) <= TOLERANCE]
            if near:
                s = min(near, key=lambda s: abs(h - s))
                free.remove(s)
                tp += 1
                errors.append(abs(h - s))
            else:
                fp += 1
        fn += len(free)
    steps_n = sum(len(t) for t in truth)
    return {"tp": tp, "steps": steps_n, "fp_per_100": 100 * fp / sum(points),
            "f1": 2 * tp / (2 * tp + fp + fn) if (tp + fp + fn) else float("nan"),
            "loc_err": float(np.mean(errors)) if errors else float("nan")}


#: The online replay: histories of this many points, replayed from `START`, steps from
#: `FIRST_STEP` on (the points before `START` are the job's first, accepted history).
ONLINE_POINTS, START, FIRST_STEP = (40, 150), 10, 15
#: The gate's open points in the stateless mode: the newest 3 (`--window`'s default).
WINDOW = 3
SINCE, WINDOWED = "since", "window"


def simulate_online(rng: np.random.Generator, kind: str, noise: float) -> History:
    """A history to replay: `kind` as `simulate` (steps, outliers, drift), 40-150 points,
    0-3 steps of ±5-15% at least 10 apart, none before `FIRST_STEP` or in the last 5."""
    n = int(rng.integers(*ONLINE_POINTS))
    level = np.zeros(n)
    steps: list[int] = []
    if kind in ("steps", "outliers"):
        k = int(rng.integers(0, 4))
        for _ in range(50):
            places = sorted(rng.choice(np.arange(FIRST_STEP, n - 5), size=k, replace=False))
            if all(b - a >= 10 for a, b in itertools.pairwise(places)):
                steps = [int(p) for p in places]
                break
    worse = []
    for s in steps:
        sign = rng.choice([-1, 1])
        level[s:] += math.log(1 + sign * rng.uniform(0.05, 0.15))
        if sign < 0:
            worse.append(s)
    if kind == "drift":
        level += np.linspace(0, math.log(1 + rng.choice([-1, 1]) * 0.05), n)
    y = level + rng.normal(0, noise, n)
    if kind == "outliers":
        hit = rng.random(n) < 0.02
        y[hit] += np.log(np.where(rng.random(hit.sum()) < 0.5, rng.uniform(1.3, 2, hit.sum()),
                                  rng.uniform(0.5, 0.77, hit.sum())))
    return History(BASE_RATE * np.exp(y), tuple(steps), tuple(worse))


@dataclass
class Replay:
    """What one tool's gate did over replays: per true regression (a worse step), the
    points after it until the gate failed naming it (NaN: never); failures naming no
    regression; points `pending` (the kit's "not yet judgeable"); points replayed; and,
    for a job that accepts nothing, the points after a caught regression (until the next
    step) and how many of them still failed (`held`)."""

    delays: list[float]
    false: int = 0
    pending: int = 0
    points: int = 0
    after: int = 0
    held: int = 0

    def add(self, other: Replay) -> None:
        self.delays += other.delays
        self.false += other.false
        self.pending += other.pending
        self.points += other.points
        self.after += other.after
        self.held += other.held


@dataclass(frozen=True)
class KitPrefix:
    """What `harness history` finds on one prefix (throughput: higher is better):
    `history.detect`'s changes, and `changepoints.trailing`'s and `newest_level`'s tests."""

    found: list[Any]
    trailing: tuple[TailTest, ...]
    newest: TailTest | None
    points: int


def _kit(rates: np.ndarray, reps: int) -> KitPrefix:
    point = np.arange(rates.size) // reps
    _, found = detect([np.log(rates)], [point], [_side(rates)])
    cuts = sorted(at for at, _, _ in found[0])
    return KitPrefix(found[0], trailing(np.log(rates), point, cuts, higher_is_better=True),
                     newest_level(np.log(rates), point, cuts, higher_is_better=True),
                     int(point[-1]) + 1)


def _kit_newest(k: KitPrefix, first_open: int) -> Newest:
    """What `harness history --gate` judges of the prefix (`gate.newest`)."""
    tail = tuple(t for t in k.trailing if k.points - t.points >= first_open)
    if not k.found:
        return Newest("kit", trailing=tail)
    at, lr, qv = max(k.found, key=lambda f: f[0])
    return Newest("kit", lr.ratio < 1, at >= first_open, str(at), lr.ratio, lr.low, lr.high,
                  lr.confidence, qv, tail, k.newest, k.points - at)


def _otava_newest(means: np.ndarray, cps: list[int], first_open: int) -> Newest:
    """Otava's change points read as the kit's gate reads its own: the newest level
    begins at the last one, worse if its mean is below the level's before it."""
    if not cps:
        return Newest("otava")
    cps = sorted(cps)
    at, before = cps[-1], (cps[-2] if len(cps) > 1 else 0)
    ratio = float(means[at:].mean() / means[before:at].mean())
    # Otava's own test is its only one: the gate's confirmation always holds for it.
    held = TailTest(means.size - at, means.size - at, ratio, 0.0)
    return Newest("otava", ratio < 1, at >= first_open, str(at), ratio, trailing=(),
                  confirm=held, level_points=means.size - at)


def online(h: History, reps: int, rng: np.random.Generator, python: str | None
           ) -> dict[tuple[str, str], Replay]:
    """Replays `h` one point at a time from `START` points, as a CI job adds commits, and
    runs each tool's gate at every point in two ways: ``window`` (stateless: the change
    must begin in the newest `WINDOW` points) and ``since`` (the job keeps the last
    accepted point: the history before `START`, then each failure, accepted at once
    where it says its level began, as docs/compare.md's recipe accepts one).
    `reps` runs per point (each its own noise around the point's value); Otava gets each
    point's mean, one number per commit."""
    runs = (np.repeat(h.values, reps) * np.exp(rng.normal(0, 0.02, h.values.size * reps))
            if reps > 1 else h.values)
    means = np.exp(np.log(runs).reshape(-1, reps).mean(axis=1))
    prefixes = list(range(START, h.values.size + 1))
    tools = ["kit"] + (["otava"] if python else [])
    otava_cps = otava([means[:n] for n in prefixes], python) if python else []
    falls = list(h.worse)
    out = {(t, m): Replay([math.nan] * len(falls)) for t in tools for m in (WINDOWED, SINCE)}
    accepted = {t: START - 1 for t in tools}
    for i, n in enumerate(prefixes):
        kit = _kit(runs[: n * reps], reps)
        for tool in tools:  # a job that accepts nothing: does a caught regression hold?
            r = out[(tool, SINCE)]
            live = [j for j, s in enumerate(falls) if not math.isnan(r.delays[j]) and s < n
                    and not any(s < t < n for t in h.steps)]
            if live:
                item = (_kit_newest(kit, START) if tool == "kit"
                        else _otava_newest(means[:n], otava_cps[i], START))
                r.after += 1
                r.held += decide([item], min_runs=3, scope="").verdict == FAIL
        for tool, mode in out:
            first_open = n - WINDOW if mode == WINDOWED else accepted[tool] + 1
            if tool == "kit":
                item = _kit_newest(kit, first_open)
            else:
                item = _otava_newest(means[:n], otava_cps[i], first_open)
            outcome = decide([item], min_runs=3, scope="")
            r = out[(tool, mode)]
            r.points += 1
            r.pending += outcome.verdict == PENDING
            if outcome.verdict != FAIL:
                continue
            at = int(item.point)
            if mode == SINCE:  # seen and accepted: --since the point the failure names
                accepted[tool] = at
            hit = [j for j, s in enumerate(falls) if s < n and abs(at - s) <= TOLERANCE]
            if not hit:
                r.false += 1
            for j in hit:
                if math.isnan(r.delays[j]):
                    r.delays[j] = n - 1 - falls[j]
    return out


def real(raw: str, by: str, truth: list[str], python: str | None) -> None:
    """The kit's changes on a real tree, and Otava's on each series' point values."""
    from harness.analysis.history.changes import history

    h = history(raw, by=by)
    print(f"{raw}: {h.points} points by {by}, {len(h.left_out)} run(s) left out; "
          f"settings changed at {', '.join(truth) or '(not given)'}")
    found_otava = otava([np.array([p.value for p in s.points]) for s in h.series],
                        python) if python else [[] for _ in h.series]
    for s, ot in zip(h.series, found_otava, strict=True):
        kit_at = [f"{c.point} {c.ratio:.3g}x [{c.ci_low:.3g}, {c.ci_high:.3g}]"
                  for c in s.changes]
        names = [p.name for p in s.points]
        print(f"  {s.config_id} {s.op} {s.metric}: kit {'; '.join(kit_at) or 'none'}"
              + (f" | otava {', '.join(names[i] for i in ot) or 'none'}" if python
                 else ""))


def offline(rng: np.random.Generator, histories: int, python: str | None) -> None:
    """The first table: every scenario and noise, each tool on whole histories."""
    print(f"{histories} histories per row, 20-200 points; TP within ±{TOLERANCE} "
          "points; FP per 100 points; F1; mean location error of the TPs (points)")
    head = f"{'scenario':9s} {'noise':>5s}  {'tool':5s} {'TP/steps':>9s} {'FP/100':>7s} " \
           f"{'F1':>5s} {'loc':>5s} {'s':>6s}"
    print(head)
    for kind in ("steps", "outliers", "drift", "null"):
        for noise in (0.02, 0.04):
            hs = [simulate(rng, kind, noise) for _ in range(histories)]
            truth = [h.steps for h in hs]
            points = [h.values.size for h in hs]
            tools = [("kit", lambda v: kit(v))]
            if python:
                tools.append(("otava", lambda v: otava(v, python)))
            for name, fn in tools:
                t0 = time.perf_counter()
                found = fn([h.values for h in hs])
                took = time.perf_counter() - t0
                s = score(truth, found, points)
                print(f"{kind:9s} {noise:5.0%}  {name:5s} {s['tp']:4d}/{s['steps']:<4d} "
                      f"{s['fp_per_100']:7.2f} {s['f1']:5.2f} {s['loc_err']:5.2f} "
                      f"{took:6.1f}", flush=True)


SCENARIOS = ("steps", "outliers", "drift")


def replay(histories: int, seed: int, python: str | None,
           scenarios: Sequence[str] = SCENARIOS, reps_list: Sequence[int] = (1, 3)) -> None:
    """The online table (see the module doc). Each scenario's histories, and each
    runs-per-point's noise, come from their own seeds: a subset prints the same rows."""
    print(f"\nonline replay: {histories} histories per row, {ONLINE_POINTS[0]}-"
          f"{ONLINE_POINTS[1]} points at 2% noise, replayed one point at a time from the "
          f"{START}th as a CI job adds commits, each tool's gate at every point: fail when "
          "the newest level is worse than the one before and began in the open points "
          f"(window: the newest {WINDOW}; since: after the last accepted point, each "
          "failure accepted at once, from where it says its level began). caught = "
          "regressions (worse steps) the gate failed "
          f"on, naming a change within ±{TOLERANCE} points; delay = points after the step "
          "(median, p90); false = failures naming no regression, per 100 points; pending = "
          "the kit's 'not yet judgeable', per 100 points; held = a job that accepts "
          "nothing: of the points after a caught regression (to the next step), the share "
          "that still failed")
    print(f"{'scenario':9s} {'runs/pt':>7s} {'mode':6s} {'tool':5s} {'caught':>9s} "
          f"{'delay':>5s} {'p90':>4s} {'false':>6s} {'pending':>7s} {'held':>5s} {'s':>6s}")
    for kind in scenarios:
        k = SCENARIOS.index(kind)
        hs = [simulate_online(np.random.default_rng([seed, 49, k, i]), kind, 0.02)
              for i in range(histories)]
        for reps in reps_list:
            t0 = time.perf_counter()
            total: dict[tuple[str, str], Replay] = {}
            for i, h in enumerate(hs):
                sub = np.random.default_rng([seed, 49, k, i, reps])
                for key, r in online(h, reps, sub, python).items():
                    total.setdefault(key, Replay([])).add(r)
            took = time.perf_counter() - t0
            for (tool, mode), r in sorted(total.items(), key=lambda kv: (kv[0][1],
                                                                         kv[0][0])):
                found = [x for x in r.delays if not math.isnan(x)]
                med = f"{np.median(found):.0f}" if found else "-"
                p90 = f"{np.percentile(found, 90):.0f}" if found else "-"
                pending = f"{100 * r.pending / r.points:.2f}" if tool == "kit" else "-"
                held = f"{100 * r.held / r.after:.0f}%" if mode == SINCE and r.after else "-"
                print(f"{kind:9s} {reps:7d} {mode:6s} {tool:5s} "
                      f"{len(found):4d}/{len(r.delays):<4d} {med:>5s} {p90:>4s} "
                      f"{100 * r.false / r.points:6.2f} {pending:>7s} {held:>5s} "
                      f"{took:6.0f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--otava-python", help="python of a virtualenv with apache-otava")
    ap.add_argument("--histories", type=int, default=200, help="per scenario and noise")
    ap.add_argument("--online", type=int, default=0, help="histories replayed in order")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS),
                    help="--online: which (comma-separated)")
    ap.add_argument("--runs-per-point", default="1,3", help="--online: which")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--real", metavar="RAW", help="also a real tree: `harness history "
                    "RAW --by LABEL` beside Otava on each series' point values")
    ap.add_argument("--by", default="commit", help="--real: the label of the points")
    ap.add_argument("--truth", default="", help="--real: where the settings changed, "
                    "e.g. c05,c09 (label values)")
    args = ap.parse_args()
    if args.real:
        real(args.real, args.by, [t for t in args.truth.split(",") if t],
             args.otava_python)
        return
    if args.histories:
        offline(np.random.default_rng(args.seed), args.histories, args.otava_python)
    if args.online:  # its own draws: the same replays with or without the first table
        replay(args.online, args.seed, args.otava_python,
               [k for k in args.scenarios.split(",") if k],
               [int(r) for r in args.runs_per_point.split(",") if r])
    sys.stdout.flush()


if __name__ == "__main__":
    main()
