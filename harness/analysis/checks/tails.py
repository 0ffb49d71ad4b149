"""Heavy tails: when a group's latencies have so heavy a tail that the mean's interval
cannot be trusted, say so and lead with the percentiles.

A mean over runs assumes the per-op latencies have a finite variance. Latencies whose tail
falls like a power law x^-alpha with alpha below 2 do not (Pareto with alpha 1.5: the
mean and throughput intervals covered 0.82-0.90, always with the truth above the
interval, in the issue's simulation), and a few ops decide the mean. `heavy_tail` asks
Hill's estimator of the tail index:

    alpha_hat = k / sum_{i=1..k} ln(x_(i) / x_(k+1))

over the k largest latencies x_(1) >= ... >= x_(k) above x_(k+1), with k = round(sqrt(n))
(it grows with n, so the bias of a tail that is not quite a power law shrinks, and is a
small share of the ops, so the estimate is of the tail). The check fires when alpha_hat
< 2, from at least `MIN_OPS` latencies (below, the estimate is too noisy: at 500 ops
lognormal(0, 1) latencies fired in 13% of samples).

Measured by seeded simulation (`benchmarks/stats_coverage.py --only heavy`, 1,000 samples
of 1,000 ops, 100 of 10,000, 50 of 100,000), share of samples on which it fires:

    ops                     1,000   10,000   100,000
    lognormal(0, 0.5)       0.000    0.000     0.000   (false alarms)
    lognormal(0, 1.0)       0.047    0.000     0.000   (false alarms)
    lognormal(0, 1.5)       0.82     0.60      0.02
    Pareto(1.5)             0.92     1.000     1.000   (power)
    Pareto(2.5)             0.09     0.01      0.000

A lognormal of sigma 1.5 (p99 / p50 = 33: a tail as heavy as a power law's over the range
one sees) fires in most samples of up to 10,000 ops: its mean is then as fragile, and the
warning fair. On the shared 2-core demo machine it fires for most cluster groups (p99 /
p50 of 20-60: a few ops stalled by other processes) and for the kv_scaling groups.

`harness summary` computes it for every row (`summary_table.CHECKS_COLUMN`) and the study
notebooks open a section with `section_note` where it fires; `heavy_tail_check` is the
entry of a ``checks`` list that other checks can sit beside.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from harness.analysis.data.formats import settled

if TYPE_CHECKING:  # only for the signature: importing load here would pull in pandas
    from harness.analysis.data.load import Loaded

#: Fewer latencies than this: no estimate (the check does not fire).
MIN_OPS = 1000
#: The tail index below which the variance is infinite, and the mean's interval unreliable.
ALPHA_LIMIT = 2.0
#: The check's name in a ``checks`` list (`harness summary --format json`).
NAME = "heavy_tail"


@dataclass(frozen=True)
class HeavyTail:
    """`heavy_tail`'s answer, with what it rests on."""

    fires: bool
    alpha_hat: float
    k: int
    n: int

    @property
    def detail(self) -> str:
        if math.isnan(self.alpha_hat):
            return f"{self.n:,} latencies: too few for a tail index (needs {MIN_OPS:,})"
        what = (f"Hill tail index {settled(self.alpha_hat):.2f} from the top {self.k:,} of "
                f"{self.n:,} latencies (k = √n)")
        if self.fires:
            return (f"{what}: below {ALPHA_LIMIT:g}, a tail so heavy that a few ops decide "
                    "the mean, and the mean's (and throughput's) interval is unreliable; "
                    "read the percentiles")
        return f"{what}: not below {ALPHA_LIMIT:g}"

    def as_dict(self) -> dict[str, object]:
        """The check as an entry of a ``checks`` list (see `heavy_tail_check`)."""
        return {"check": NAME, "status": "warn" if self.fires else "ok",
                "detail": self.detail,
                "tail_index": None if math.isnan(self.alpha_hat) else self.alpha_hat,
                "k": self.k, "ops": self.n}


def hill(latencies: np.ndarray, k: int) -> float:
    """Hill's estimate of the tail index from the `k` largest of `latencies` (> 0)."""
    x = np.asarray(latencies, dtype=np.float64)
    if not 0 < k < x.size:
        raise ValueError(f"k must be between 1 and {x.size - 1}, not {k}")
    # The k + 1 largest, in order: the sum below is then taken in one order whichever
    # order they came in (a run's sorted top or a partition), so every path to them
    # gives the same index to the last bit (sorting √n values costs next to nothing).
    top = np.sort(-np.partition(-x, k)[: k + 1])
    threshold = float(top[0])
    if threshold <= 0:
        return float("nan")
    logs = np.log(top) - math.log(threshold)
    total = float(logs.sum())  # the threshold itself adds 0
    return float(k / total) if total > 0 else float("inf")


def tail_k(n: int) -> int:
    """The number of largest latencies Hill's estimate uses out of `n`: round(√n)."""
    return round(math.sqrt(n))


def check(latencies_ns: np.ndarray) -> HeavyTail:
    """`heavy_tail` with everything it rests on (k, n)."""
    x = np.asarray(latencies_ns, dtype=np.float64)
    x = x[np.isfinite(x) & (x > 0)]
    n = int(x.size)
    if n < MIN_OPS:
        return HeavyTail(False, float("nan"), 0, n)
    k = tail_k(n)
    alpha = hill(x, k)
    return HeavyTail(bool(alpha < ALPHA_LIMIT), alpha, k, n)


def check_top(top: np.ndarray, n: int) -> HeavyTail:
    """`check` from only the ``tail_k(n) + 1`` largest of `n` positive latencies (any
    order): for callers that hold them sorted per run (`loo.RunSorted.top`) and need not
    gather all n. The same answer as `check` on all n."""
    if n < MIN_OPS:
        return HeavyTail(False, float("nan"), 0, n)
    k = tail_k(n)
    alpha = hill(np.asarray(top, dtype=np.float64), k)
    return HeavyTail(bool(alpha < ALPHA_LIMIT), alpha, k, n)


def heavy_tail_check(latencies: np.ndarray) -> dict[str, object]:
    """The ``heavy_tail`` check of one group's latencies (any unit: the index is
    scale-free) as an entry of a ``checks`` list, so that other checks can sit beside it:

    ``check``       ``"heavy_tail"``
    ``status``      ``"warn"`` when Hill's tail index from the top √n latencies is below 2
                    (the mean's and throughput's intervals are unreliable: read the
                    percentiles), else ``"ok"`` (also with fewer than `MIN_OPS`
                    latencies, where no index is estimated)
    ``detail``      one sentence: the index, what it rests on, what it means
    ``tail_index``  Hill's estimate (None with too few latencies)
    ``k``, ``ops``  the largest latencies it used, and of how many
    """
    return check(latencies).as_dict()


def heavy_tail(latencies_ns: np.ndarray) -> tuple[bool, float, str]:
    """(fires, alpha_hat, detail) for one group's latencies (any unit: the index is
    scale-free): fires when Hill's tail index (top √n) is below 2, from at least
    `MIN_OPS` latencies; NaN alpha_hat with fewer."""
    c = check(latencies_ns)
    return c.fires, c.alpha_hat, c.detail


@dataclass(frozen=True)
class GroupTail:
    """A group's check, and the percentiles a reader should read instead of its mean."""

    check: HeavyTail
    p50_ms: float
    p99_ms: float


#: `group_checks`'s answer: per group key (a tuple of the `by` values), its check.
GroupChecks = dict[tuple[object, ...], GroupTail]
#: Words a group key for the reader (``("get", 4)`` -> ``"GET, 4 servers"``).
Label = Callable[[tuple[object, ...]], str]


def group_checks(loaded: Loaded, by: Sequence[str]) -> GroupChecks:
    """`check` of every group of `by` (run-level columns, or ``op``/``client``) over its
    measured ops (no warm-up, no redirect) held in `loaded` (for a sample, the ops drawn:
    the tail index is a property of the distribution, which a sample estimates), with the
    group's p50 and p99 (ms)."""
    from harness.analysis.data.summary import measured_ops

    ops = measured_ops(loaded.ops)
    by = list(by)
    ops_keys = [c for c in by if c in ops.columns]
    run_keys = [c for c in by if c not in ops_keys]
    frame = ops[["run_id", "latency_ns", *ops_keys]]
    if run_keys:  # the run's columns beside each op (run ids as strings on both sides)
        runs = loaded.runs[["run_id", *run_keys]]
        frame = frame.assign(run_id=frame["run_id"].astype(str)).merge(
            runs.assign(run_id=runs["run_id"].astype(str)), on="run_id", how="inner")
    out: dict[tuple[object, ...], GroupTail] = {}
    if not len(frame):
        return out
    for key, g in frame.groupby(by, sort=True, observed=True):
        lat = g["latency_ns"].to_numpy(np.float64)
        key = key if isinstance(key, tuple) else (key,)
        p50, p99 = np.quantile(lat, [0.5, 0.99]) / 1e6
        out[key] = GroupTail(check(lat), float(p50), float(p99))
    return out


def section_note(checks: GroupChecks, label: Label = lambda k: " ".join(map(str, k)),
                 ) -> str | None:
    """The note that opens a section where `heavy_tail` fires for some group: why its
    mean and throughput intervals are unreliable, then a table of the groups' percentiles
    (what to read instead), their tail index and the ops it rests on. None when it fires
    for none."""
    fired = [(k, t) for k, t in checks.items() if t.check.fires]
    if not fired:
        return None
    alphas = [settled(t.check.alpha_hat) for _, t in fired]
    span = (f"{alphas[0]:.2f}" if len(alphas) == 1
            else f"{min(alphas):.2f}–{max(alphas):.2f}")
    head = (f"**Heavy tails: read the percentiles.** In {len(fired)} of {len(checks)} groups "
            f"the latencies' tail falls like a power law with an index below "
            f"{ALPHA_LIMIT:g} (Hill's estimate from the top √n latencies: {span}): a few "
            "ops decide a mean there, so the mean latency, the throughput and their "
            "intervals, and the comparisons of means, are unreliable for these groups; "
            "their percentiles are not:")
    rows = [f"| {label(k)} | {settled(t.p50_ms):.3g} | {settled(t.p99_ms):.3g} | "
            f"{settled(t.check.alpha_hat):.2f} | {t.check.n:,} |" for k, t in fired]
    return "\n".join([head, "", "| group | p50 [ms] | p99 [ms] | tail index | latencies |",
                      "|---|---|---|---|---|", *rows])
