"""95% intervals of pooled run statistics, with the run as the unit.

The run is the unit of replication, and each run counts once (`run_scale`): mean latency
is the mean over runs of each run's mean latency; throughput the harmonic mean of the run
rates for runs of a fixed op count (each run's time per op counts once) and the arithmetic
mean for runs of a fixed duration (each run's rate counts once). Where the runs are equally
long in what the spec fixes, that is exactly total ops / total time and total latency /
total ops; where they are not, the pooled totals let the longest run decide. Chosen by
simulation (benchmarks/stats_coverage.py, `unequal`: every fifth run 10x longer, 3-10
runs, 0-20% run-to-run variation): the pooled intervals covered 0.86-0.92 wherever runs
varied; a t on Kish's effective number of runs (which keeps the pooled estimate) 0.95-1.00,
with intervals 3-6x wider at 3-5 runs, because one run then decides the estimate; equal-
weight run means 0.93-0.97 at 5 and 10 runs (0.95-0.99 at 3) with the narrowest intervals.
Runs 1-3x apart: pooled 0.92-0.95, equal-weight 0.94-0.96.

Percentiles are of all the group's ops pooled. Ops inside a run are not independent (a
run shares its server state, its neighbours' noise), so an interval that treated them as
samples would be far too narrow. Each interval here comes from the runs alone: the
delete-one-run jackknife of the log of the estimate, with Student's t on n_runs - 1
degrees of freedom, exponentiated (a positive, asymmetric interval). For percentiles the
SE is the larger of the jackknife's and the per-run percentiles' spread, and the t's
degrees of freedom count the runs the percentile rests on (`tail_runs`).

Percentiles need ops in the tail: a run of 100 ops has one op above its p99, and any
interval built on that undercovers. `quantile_interval` gives no interval unless every
run has at least `MIN_TAIL_OPS` ops beyond the percentile, and says why. The coverage of
every interval here is checked by simulation in tests/analysis/stats/test_intervals.py and in
benchmarks/stats_coverage.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtrit  # t quantiles; scipy.stats takes 3x as long to import

#: A percentile gets an interval only if every run has this many ops beyond it
#: (p99: 1000 ops per run; p99.9: 10000). Below, the jackknife undercovers in simulation.
MIN_TAIL_OPS = 10

METHOD = "jackknife over runs, t on log"
METHOD_QUANTILE = "max(jackknife, per-run spread) over runs, t on log"


@dataclass(frozen=True)
class RunInterval:
    """A pooled estimate with its CI over runs; `se_log`/`df` feed `verdict.log_ratio_test`.

    `note` says why there is no interval (NaN low/high) when there is none.
    """

    value: float
    low: float
    high: float
    n_runs: int
    se_log: float
    df: float
    method: str = METHOD
    note: str = ""
    confidence: float = 0.95

    @property
    def log_value(self) -> float:
        return math.log(self.value) if self.value > 0 else float("nan")

    def contains(self, x: float) -> bool:
        return bool(self.low <= x <= self.high)


def _no_interval(value: float, n_runs: int, note: str, confidence: float) -> RunInterval:
    nan = float("nan")
    return RunInterval(float(value), nan, nan, n_runs, nan, nan, METHOD, note, confidence)


def from_leave_one_out(
    value: float, loo: np.ndarray, *, confidence: float = 0.95, note: str = ""
) -> RunInterval:
    """Interval from the pooled estimate and its leave-one-run-out values (all > 0)."""
    loo = np.asarray(loo, dtype=float)
    r = int(loo.size)
    if r < 2:
        return _no_interval(value, r, note or "one run: no interval", confidence)
    if not (value > 0 and np.all(loo > 0)):
        return _no_interval(value, r, note or "non-positive estimate: no interval",
                            confidence)
    logs = np.log(loo)
    se = math.sqrt((r - 1) / r * float(np.sum((logs - logs.mean()) ** 2)))
    half = float(stdtrit(r - 1, 0.5 + confidence / 2)) * se
    lv = math.log(value)
    return RunInterval(float(value), math.exp(lv - half), math.exp(lv + half), r, se,
                       float(r - 1), METHOD, note, confidence)


def ratio_interval(
    num: np.ndarray, den: np.ndarray, *, confidence: float = 0.95
) -> RunInterval:
    """sum(num) / sum(den) over runs: throughput (ops, seconds) or mean latency
    (latency sum, ops)."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    keep = ~(np.isnan(num) | np.isnan(den))
    num, den = num[keep], den[keep]
    tn, td = float(num.sum()), float(den.sum())
    value = tn / td if td > 0 else float("nan")
    if num.size < 2:
        return _no_interval(value, int(num.size), "one run: no interval", confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        loo = (tn - num) / (td - den)
    return from_leave_one_out(value, loo, confidence=confidence)


def run_scale(ops: np.ndarray, wall_s: np.ndarray, fixed_duration: np.ndarray | bool
              ) -> np.ndarray:
    """Per run, the factor that makes it count once in a throughput: 1 / its wall time
    for a run of fixed duration (then sum(scale * ops) / sum(scale * wall) is the
    arithmetic mean of the rates), else 1 / its ops (the harmonic mean: each run's time per
    op counts once). 0 where the run has no ops or no time: it counts for nothing."""
    ops, wall_s = np.asarray(ops, float), np.asarray(wall_s, float)
    by = np.where(np.asarray(fixed_duration, bool), wall_s, ops)
    with np.errstate(divide="ignore"):
        return np.where(by > 0, 1.0 / np.where(by > 0, by, 1.0), 0.0)


def throughput_interval(ops: np.ndarray, wall_s: np.ndarray, fixed_duration: np.ndarray | bool,
                        *, confidence: float = 0.95) -> RunInterval:
    """Throughput over runs, each run counting once (`run_scale`), with its CI."""
    scale = run_scale(ops, wall_s, fixed_duration)
    return ratio_interval(scale * np.asarray(ops, float), scale * np.asarray(wall_s, float),
                          confidence=confidence)


def mean_interval(total: np.ndarray, ops: np.ndarray, *, confidence: float = 0.95
                  ) -> RunInterval:
    """The mean over runs of each run's mean (`total` / `ops`: e.g. its mean latency),
    each run counting once, with its CI; runs without ops are left out."""
    total, ops = np.asarray(total, float), np.asarray(ops, float)
    keep = ops > 0
    return ratio_interval(total[keep] / ops[keep], np.ones(int(keep.sum())),
                          confidence=confidence)


def ops_needed(q: float, min_tail_ops: int = MIN_TAIL_OPS) -> int:
    """Ops a run needs for the `q` percentile to get an interval (p99: 1000, p99.9: 10 000)."""
    return math.ceil(round(min_tail_ops / (1 - q), 6))


def quantile_interval(
    latency: np.ndarray, run: np.ndarray, q: float, *, confidence: float = 0.95,
    min_tail_ops: int = MIN_TAIL_OPS,
) -> RunInterval:
    """The `q` quantile (linear interpolation) of all ops pooled, with its CI over runs.

    `run` labels each op with its run (any integer codes). `analysis.loo` computes the
    same from ops sorted once; both hand their numbers to `interval_of_quantile`.
    """
    lat = np.asarray(latency, dtype=float)
    run = np.asarray(run)
    if lat.size == 0:
        return _no_interval(float("nan"), 0, "no ops", confidence)
    value = float(np.quantile(lat, q))
    labels, counts = np.unique(run, return_counts=True)
    return interval_of_quantile(
        value, counts, q,
        leave_one_out=lambda: np.array([np.quantile(lat[run != lab], q) for lab in labels]),
        per_run=lambda: np.array([np.quantile(lat[run == lab], q) for lab in labels]),
        tail_runs=lambda: tail_runs(lat, run, labels, value, q),
        median=lambda: float(np.quantile(lat, 0.5)),
        confidence=confidence, min_tail_ops=min_tail_ops)


def interval_of_quantile(
    value: float, counts: np.ndarray, q: float, *,
    leave_one_out: Callable[[], np.ndarray], per_run: Callable[[], np.ndarray],
    tail_runs: Callable[[], float], confidence: float = 0.95,
    min_tail_ops: int = MIN_TAIL_OPS, median: Callable[[], float] | None = None,
) -> RunInterval:
    """The pooled `q` percentile `value` of runs of `counts` ops, with its CI over runs:
    every decision of the method, whoever computes the numbers (numpy here, the sorted
    ops in `analysis.loo`). The numbers are asked for only when the method needs them:
    the percentile without each run, each run's own, `tail_runs`, and for q above 0.5 the
    pooled `median`, below which the interval is cut."""
    r = int(counts.size)
    if r < 2:
        return _no_interval(value, r, "one run: no interval", confidence)
    tail = counts.min() * (1 - q)
    if tail < min_tail_ops:
        need = ops_needed(q, min_tail_ops)
        return _no_interval(
            value, r,
            f"too few ops for an interval of p{q * 100:g} ({counts.min()} in a run; "
            f"needs {need})", confidence)
    jack = from_leave_one_out(value, leave_one_out(), confidence=confidence)
    runs = per_run()
    if not (value > 0 and np.all(runs > 0)) or np.isnan(jack.se_log):
        return jack
    # The jackknife alone undercovers a tail percentile (0.92 at 5 runs of 1000 ops with
    # a 20% run-to-run sd); the spread of the per-run percentiles is the other honest
    # estimate of the same SE. The larger of the two covers >= 0.93 in simulation.
    se = max(jack.se_log, float(np.log(runs).std(ddof=1)) / math.sqrt(r))
    df = tail_runs() - 1
    half = float(stdtrit(df, 0.5 + confidence / 2)) * se
    lv = math.log(value)
    low, method = math.exp(lv - half), METHOD_QUANTILE
    if q > 0.5 and median is not None and low < (m := median()):
        # A tail decided by one or two runs gets a t on ~1 df, whose low end fell below
        # the median (p99 "1.31 (0.00193-883)"): a p99 is never below the p50, and
        # cutting there excludes no truth, as cutting a time at 0 does not.
        low, method = m, f"{METHOD_QUANTILE}, cut at the median"
    return RunInterval(value, low, math.exp(lv + half), r, se, df, method, "", confidence)


def tail_runs(lat: np.ndarray, run: np.ndarray, labels: np.ndarray, value: float,
              q: float) -> float:
    """How many runs the pooled `q` percentile rests on: Kish's effective number of the
    runs' shares of the ops beyond it (above for q >= 0.5, else below), at least 2.

    A tail percentile of runs that differ is decided by the slowest runs, which hold most
    of the ops beyond it; counting every run in the t's degrees of freedom then made the
    p99.9 interval cover 0.89-0.91 at a 20% run-to-run SD (5-10 runs of 10 000 ops), with
    these 0.93-0.94. Equal runs give all of them (p50: nearly always)."""
    beyond = lat > value if q >= 0.5 else lat < value
    counts = np.array([np.count_nonzero(beyond[run == lab]) for lab in labels], float)
    if counts.sum() <= 0:
        return float(labels.size)
    w = counts / counts.sum()
    return max(2.0, float(1.0 / np.sum(w * w)))
