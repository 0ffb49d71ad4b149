"""How many runs, and how long: a plan from the variance components of a first round
(Kalibera and Jones, "Rigorous benchmarking in reasonable time", ISMM 2013).

A configuration's throughput varies at two levels: from run to run (a server started
afresh, a different placement in memory, the machine's state) and within a run (from one
stretch of seconds to the next). A run's mean carries the within-run part divided by the
stretches it averages, so a longer run lowers only that part; more runs lower both. From
a first round, per configuration:

- within: the variance of the throughput of `WINDOWS` equal stretches of each run's
  measured time (relative to the mean), pooled over runs;
- between: the variance of the runs' mean throughputs less what the within part explains
  (`within / WINDOWS`), floored at 0, as the one-way random-effects estimate is.

A plan at run length ``f`` times the first round's: a run's mean varies by
``between + within / (WINDOWS * f)``, and the runs `n` to reach a 95% interval of
half-width `target` (relative) are the least with ``t(n-1) * sqrt(var / n) <= target``.
Each run also costs its fixed overhead (start, warm-up, writing), read from the first
round's manifests, so the cheapest plan is the one with the least total time. The
stretches of one run are taken as independent, which a slow drift within runs breaks:
the within part is then overstated, and so is what a longer run would buy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

#: Equal stretches a run's measured time is cut into for the within-run variance.
WINDOWS = 10
#: The least ops a stretch must hold for its rate to mean anything.
MIN_OPS_PER_WINDOW = 20
#: Run lengths a plan considers, as multiples of the first round's.
LENGTHS = (0.5, 1.0, 2.0, 4.0)
#: Runs past which a plan is called out of reach.
MOST_RUNS = 1000


@dataclass(frozen=True)
class RunRates:
    """One run's throughput: over its measured time, and per stretch of it."""

    mean_ops_s: float
    windows_ops_s: tuple[float, ...]
    measured_s: float
    wall_s: float | None  # start to end of the run, as its manifest says


@dataclass(frozen=True)
class Components:
    """A configuration's first round, as the plan reads it (variances relative to the
    mean, squared)."""

    runs: int
    mean_ops_s: float
    between_rel_var: float
    within_rel_var: float
    run_s: float
    overhead_s: float


@dataclass(frozen=True)
class Option:
    """Runs of one length that would reach the target, and the time they take."""

    length_s: float
    runs: int | None  # None: more than MOST_RUNS
    total_s: float | None


def run_rates(start_ns: np.ndarray, wall_s: float | None = None) -> RunRates | None:
    """A run's rates from the start times of its measured ops; None when it has too few
    ops for `WINDOWS` stretches of `MIN_OPS_PER_WINDOW`."""
    start = np.sort(np.asarray(start_ns, dtype=np.int64))
    if start.size < WINDOWS * MIN_OPS_PER_WINDOW:
        return None
    t0, t1 = int(start[0]), int(start[-1])
    if t1 <= t0:
        return None
    measured_s = (t1 - t0) / 1e9
    edges = np.linspace(t0, t1, WINDOWS + 1)
    counts, _ = np.histogram(start, bins=edges)
    width_s = measured_s / WINDOWS
    return RunRates(start.size / measured_s, tuple(float(c / width_s) for c in counts),
                    measured_s, wall_s)


def components(runs: Sequence[RunRates]) -> Components | None:
    """The variance components of one configuration's runs; None with fewer than 2."""
    runs = [r for r in runs if r.mean_ops_s > 0]
    if len(runs) < 2:
        return None
    means = np.array([r.mean_ops_s for r in runs])
    grand = float(means.mean())
    within = float(np.mean([np.var(np.asarray(r.windows_ops_s) / grand, ddof=1)
                            for r in runs]))
    total = float(np.var(means / grand, ddof=1))
    between = max(0.0, total - within / WINDOWS)
    run_s = float(np.mean([r.measured_s for r in runs]))
    walls = [r.wall_s - r.measured_s for r in runs if r.wall_s is not None]
    overhead = max(0.0, float(np.median(walls))) if walls else 0.0
    return Components(len(runs), grand, between, within, run_s, overhead)


def runs_for(var_rel: float, target: float) -> int | None:
    """The least runs whose 95% t interval of the mean has relative half-width at most
    `target`, at a run-mean variance `var_rel`; None past `MOST_RUNS`."""
    if var_rel <= 0:
        return 2
    # Start where the normal quantile puts it; the t quantile only adds runs.
    n = max(2, math.ceil((1.96 ** 2) * var_rel / target ** 2))
    while n <= MOST_RUNS:
        if stats.t.ppf(0.975, n - 1) * math.sqrt(var_rel / n) <= target:
            return n
        n += 1
    return None


def plan(c: Components, target: float, lengths: Sequence[float] = LENGTHS) -> list[Option]:
    """Per run length (multiples of the first round's), the runs that reach `target` and
    their total time."""
    out = []
    for f in lengths:
        var = c.between_rel_var + c.within_rel_var / (WINDOWS * f)
        n = runs_for(var, target)
        length = c.run_s * f
        out.append(Option(length, n, None if n is None else n * (length + c.overhead_s)))
    return out


def cheapest(options: Sequence[Option]) -> Option | None:
    """The option that reaches the target in the least time, if any does."""
    ok = [o for o in options if o.total_s is not None]
    return min(ok, key=lambda o: (o.total_s, o.length_s)) if ok else None
