"""Was a run steady, did runs drift, was the first run an outlier: the statistics under
`harness.analysis.checks.registry`, on plain arrays.

- `warmup`: MSER-5 (White 1997; Hoad, Robinson & Davies 2010 recommend it among warm-up
  rules) on a run's log latencies in the order the ops began: the truncation that
  minimises the standard error of the mean of what is left, searched over the first
  half. MSER always truncates something on noise alone (a third of steady runs), so the
  prefix it drops is then compared with blocks of the same length from the rest of the
  run (`Warmup.z`: how many of their standard deviations the prefix lies away): blocks
  of the run itself carry its autocorrelation, which a per-op variance would not. The
  prefix was chosen for being different, so z's null distribution is wider than a
  t's; `checks` sets its bar by simulation (`benchmarks/checks_calibration.py`). A
  burst of load in the first half of a run also makes MSER cut (just after it), with a
  normal start before it: `Warmup.front` tells the two apart.
- `trend`: Mann-Kendall, i.e. Kendall's tau between start time and per-run values
  (exact p without ties, scipy), with Sen's slope per run.
- `first_outlier`: the first run against a prediction interval from the others (t with
  n - 2 degrees of freedom, exact for normal run values).

Latencies are compared on a log scale: a warm-up multiplies latencies, and log values of
a skewed latency distribution are closer to normal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as st

#: Ops per MSER batch (MSER-5); larger runs use larger batches, at most `MAX_BATCHES`.
BATCH = 5
MAX_BATCHES = 200_000
#: Fewer measured ops than this and a run's steadiness is not judged (100 batches of
#: 5): shorter runs of an autocorrelated server (a queue at 80% load) are too short to
#: tell a warm-up from its slow swings (false alarms above 1% per run by simulation).
MIN_OPS = 500
#: Blocks of the rest a prefix is compared with, at the least (else they are shorter
#: than the prefix). 8 let a queue at 80% load fail 1.2% of steady runs, 16 0.3-0.7%.
MIN_BLOCKS = 16


@dataclass(frozen=True)
class Warmup:
    """MSER-5's truncation of one run's ops (in the order they began) and how the prefix
    it drops differs from the rest; ``ops == 0``: nothing to drop."""

    ops: int
    #: From the first op's begin to the first kept op's: the warm-up it suggests.
    seconds: float
    #: Geometric-mean latency of the prefix over that of the rest.
    ratio: float
    #: The prefix's mean log latency against blocks of the rest of its length, in their
    #: standard deviations (0 when nothing is dropped).
    z: float
    #: How many blocks of the rest z rests on.
    blocks: int
    #: Measured ops of the run judged.
    n: int
    #: The first half of the prefix's departure from the rest, as a share of the whole
    #: prefix's: ~1 for a step, above 1 for a decaying warm-up, near 0 for a burst late
    #: in the prefix after a normal start (MSER cuts after a burst wherever it falls).
    front: float = 1.0


def batch_means(x: np.ndarray, batch: int = BATCH, max_batches: int = MAX_BATCHES
                ) -> tuple[np.ndarray, int]:
    """Means of consecutive batches of `x` (the last, partial one dropped) and the batch
    size: `batch`, or larger so that there are at most `max_batches`."""
    b = max(batch, -(-x.size // max_batches))
    m = x.size // b
    rows = x[: m * b].reshape(m, b)
    if b >= 8 or x.dtype != np.float64:
        return rows.mean(axis=1), b
    # numpy's mean of fewer than 8 adds them in order: the same sums, a column at a time
    # (5x faster than its reduction over such short rows; a test holds them equal).
    sums = rows[:, 0].copy()
    for j in range(1, b):
        sums += rows[:, j]
    return sums / b, b


def mser(y: np.ndarray) -> int:
    """The MSER truncation of the batch means `y`: the d in [0, len/2] minimising
    var(y[d:]) / len(y[d:]); the last half is never dropped (the rule's usual bound: a
    minimum beyond it says the run is too short to tell)."""
    m = y.size
    if m < 4:
        return 0
    # Suffix sums give every candidate's variance in one pass.
    s1 = np.cumsum(y[::-1])[::-1]
    s2 = np.cumsum((y * y)[::-1])[::-1]
    d = np.arange(m // 2 + 1)
    k = m - d
    mean = s1[d] / k
    var = np.maximum(s2[d] / k - mean * mean, 0.0)
    return int(np.argmin(var / k))


def warmup(begin_ns: np.ndarray, latency_ns: np.ndarray) -> Warmup | None:
    """MSER-5 on one run's measured ops (any order: sorted here by begin); None with
    fewer than `MIN_OPS`."""
    n = int(latency_ns.size)
    if n < MIN_OPS:
        return None
    if bool(np.all(begin_ns[1:] >= begin_ns[:-1])):  # the kit writes runs in start order
        begin, lat = begin_ns, latency_ns
    else:
        order = np.argsort(begin_ns, kind="stable")
        begin, lat = begin_ns[order], latency_ns[order]
    logs = lat.astype(np.float64)
    np.log(np.maximum(logs, 1.0, out=logs), out=logs)  # in place: a fresh array's pages cost more
    y, b = batch_means(logs)
    d = mser(y)
    if d == 0:
        return Warmup(0, 0.0, 1.0, 0.0, 0, n)
    rest = y[d:]
    # Blocks of the rest as long as the prefix, their spread what a prefix of a steady
    # run would show; if the rest holds fewer than MIN_BLOCKS of them, shorter blocks,
    # and the prefix is then taken to vary as much as one of those (its own longer mean
    # varies less: conservative, where an independence assumption would not be).
    length = max(1, min(d, rest.size // MIN_BLOCKS))
    k = rest.size // length
    blocks = rest[: k * length].reshape(k, length).mean(axis=1)
    sd = float(blocks.std(ddof=1)) if k > 1 else 0.0
    diff = float(y[:d].mean() - rest.mean())
    se = sd * math.sqrt(1 + 1 / k)  # one block's spread, and the rest's mean's
    z = diff / se if se > 0 else (math.copysign(math.inf, diff) if diff else 0.0)
    front = float(y[: (d + 1) // 2].mean() - rest.mean()) / diff if diff else 0.0
    kept = d * b
    return Warmup(kept, float(begin[kept] - begin[0]) / 1e9, math.exp(diff), z, k, n, front)


@dataclass(frozen=True)
class Trend:
    """Mann-Kendall on per-run values in start order."""

    tau: float
    p: float
    #: Sen's slope of the log values per run: exp(slope) - 1 is the change per run.
    slope: float
    n: int

    @property
    def per_run(self) -> float:
        """The relative change per run (0.01: +1% per run)."""
        return math.expm1(self.slope)


def trend(started_s: np.ndarray, values: np.ndarray) -> Trend | None:
    """Kendall's tau of `values` (positive; compared as logs) against their start times,
    its two-sided p (exact without ties, scipy's ``method="auto"``) and Sen's slope per
    run; None for fewer than 3 runs or values that do not vary."""
    started_s, values = np.asarray(started_s, float), np.asarray(values, float)
    ok = np.isfinite(started_s) & np.isfinite(values) & (values > 0)
    started_s, values = started_s[ok], values[ok]
    if values.size < 3 or np.ptp(values) == 0 or np.ptp(started_s) == 0:
        return None
    res = st.kendalltau(started_s, values)
    logs = np.log(values[np.argsort(started_s, kind="stable")])
    slope = float(st.theilslopes(logs, np.arange(logs.size)).slope)
    return Trend(float(res.statistic), float(res.pvalue), slope, int(values.size))


@dataclass(frozen=True)
class Outlier:
    """The first run against the others: its value over their geometric mean, and the
    two-sided p of a t prediction interval (n - 2 degrees of freedom) on log values."""

    ratio: float
    t: float
    p: float
    n: int


def first_outlier(values: np.ndarray) -> Outlier | None:
    """`values` (positive) with the first run's first; None for fewer than 3 values."""
    logs = np.log(np.asarray(values, float))
    logs = logs[np.isfinite(logs)]
    if logs.size < 3:
        return None
    first, rest = logs[0], logs[1:]
    diff = float(first - rest.mean())
    sd = float(rest.std(ddof=1))
    if sd == 0:
        t = math.copysign(math.inf, diff) if diff else 0.0
        return Outlier(math.exp(diff), t, 0.0 if diff else 1.0, int(logs.size))
    t = diff / (sd * math.sqrt(1 + 1 / rest.size))
    p = float(2 * st.t.sf(abs(t), rest.size - 1))
    return Outlier(math.exp(diff), t, p, int(logs.size))
