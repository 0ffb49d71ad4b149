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

``--online`` also replays a subset in order, as CI would, adding one point at a time,
with 1 and 3 runs per point: the delay is the points added after a step until it is
reported near its place, and the gate's false alarms are replays whose newest point
begins a change where nothing stepped.

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
from dataclasses import dataclass

import numpy as np

from harness.analysis.history.changes import detect
from harness.analysis.stats import intervals

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


def online(h: History, method: str, python: str | None, reps: int, rng: np.random.Generator,
           start: int = 10) -> tuple[list[float], int, int]:
    """Replays `h` one point at a time from `start` points, as CI would. Per true step:
    points added after it until a detection within ±TOLERANCE is reported (NaN: never);
    and the gate's false alarms: prefixes whose newest point begins a reported change
    with no true step at most TOLERANCE points before it, of all prefixes replayed.
    `reps` runs per point (each with its own noise around the point's value); Otava is
    given each point's mean, as a CI job records one number per commit."""
    runs = np.repeat(h.values, reps) * np.exp(rng.normal(0, 0.02, h.values.size * reps)) \
        if reps > 1 else h.values
    prefixes = list(range(start, h.values.size + 1))
    if method == "kit":
        found = kit([runs[: n * reps] for n in prefixes], reps)
    else:
        assert python is not None
        means = [np.exp(np.log(runs[: n * reps]).reshape(n, reps).mean(axis=1))
                 for n in prefixes]
        found = otava(means, python)
    delays: dict[int, float] = {s: math.nan for s in h.steps}
    false_gate = 0
    for n, hits in zip(prefixes, found, strict=True):
        for s in h.steps:
            if math.isnan(delays[s]) and s < n and any(abs(x - s) <= TOLERANCE for x in hits):
                delays[s] = n - 1 - s
        if n - 1 in hits and not any(0 <= n - 1 - s <= TOLERANCE for s in h.steps):
            false_gate += 1
    return list(delays.values()), false_gate, len(prefixes)


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--otava-python", help="python of a virtualenv with apache-otava")
    ap.add_argument("--histories", type=int, default=200, help="per scenario and noise")
    ap.add_argument("--online", type=int, default=0, help="histories replayed in order")
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
    rng = np.random.default_rng(args.seed)
    print(f"{args.histories} histories per row, 20-200 points; TP within ±{TOLERANCE} "
          "points; FP per 100 points; F1; mean location error of the TPs (points)")
    head = f"{'scenario':9s} {'noise':>5s}  {'tool':5s} {'TP/steps':>9s} {'FP/100':>7s} " \
           f"{'F1':>5s} {'loc':>5s} {'s':>6s}"
    print(head)
    for kind in ("steps", "outliers", "drift", "null"):
        for noise in (0.02, 0.04):
            hs = [simulate(rng, kind, noise) for _ in range(args.histories)]
            truth = [h.steps for h in hs]
            points = [h.values.size for h in hs]
            tools = [("kit", lambda v: kit(v))]
            if args.otava_python:
                tools.append(("otava", lambda v: otava(v, args.otava_python)))
            for name, fn in tools:
                t0 = time.perf_counter()
                found = fn([h.values for h in hs])
                took = time.perf_counter() - t0
                s = score(truth, found, points)
                print(f"{kind:9s} {noise:5.0%}  {name:5s} {s['tp']:4d}/{s['steps']:<4d} "
                      f"{s['fp_per_100']:7.2f} {s['f1']:5.2f} {s['loc_err']:5.2f} "
                      f"{took:6.1f}", flush=True)
    if args.online:
        print(f"\nonline replay: {args.online} 'steps' histories at 2% noise, one point "
              "added at a time from the 10th, as CI adds commits; delay = points after a "
              "step until it is found; false gate = replays whose newest point begins a "
              "change with no step there, per 100 replays")
        hs = [h for h in (simulate(rng, "steps", 0.02) for _ in range(args.online * 3))
              if h.steps][: args.online]
        for reps in (1, 3):
            for name in ("kit", "otava") if args.otava_python else ("kit",):
                sub = np.random.default_rng(args.seed + reps)
                d, false, total = [], 0, 0
                for h in hs:
                    dd, f, t = online(h, name, args.otava_python, reps, sub)
                    d += dd
                    false += f
                    total += t
                found = [x for x in d if not math.isnan(x)]
                print(f"{name:5s} runs/point {reps}: steps {len(d)}, found {len(found)}, "
                      f"delay median {np.median(found) if found else math.nan:.1f}, p90 "
                      f"{np.percentile(found, 90) if found else math.nan:.1f} points; "
                      f"false gate {100 * false / total:.2f} per 100", flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
