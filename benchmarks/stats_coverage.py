"""Coverage of every interval the kit prints, and the false-verdict rate of compare.

Simulations with a known answer (seeded): per-op latencies lognormal(0, sigma) scaled by a
lognormal(0, run_sd) run effect; each closed-loop run's wall time is its latency sum.
Prints, per setting, the share of simulated experiments whose interval covers the truth:

- throughput (total ops / total time), mean latency, p50 and p99 (pooled), as
  `harness summary` and `harness compare` print them, at 3, 5 and 10 runs (the built-in
  specs' repetition counts) of 1000 ops;
- p99.9 at 3, 5 and 10 runs of 10 000 ops (the fewest for which the datastore table
  prints its interval);
- the ratio cand/base of compare on identical distributions (coverage of 1) and the share
  of false better/worse verdicts (should be <= alpha = 0.05);
- `until` (3 runs minimum, ±5% target, max 30): the reported throughput interval after
  the old rule (stop when the 95% CI is within target), after the target is first met
  with the pessimistic spread, and after the kit's rule (that plus the confirming runs),
  with the mean number of runs each costs.

Usage: .venv/bin/python benchmarks/stats_coverage.py [--sims N]  (default 2000; ~minutes)
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import optimize
from scipy import stats as st

from harness.analysis import intervals, verdict
from harness.runner import UNTIL_CONFIRM_RUNS, until_first_met


def mixture_quantile(q: float, sigma: float, run_sd: float) -> float:
    x, w = np.polynomial.hermite_e.hermegauss(60)
    w = w / w.sum()

    def f(lx: float) -> float:
        return float((w * st.norm.cdf((lx - run_sd * x) / sigma)).sum() - q)

    return math.exp(optimize.brentq(f, -20, 20))


def experiment(rng: np.random.Generator, runs: int, ops: int, sigma: float, run_sd: float):
    lat = np.exp(rng.normal(0, sigma, (runs, ops)) + rng.normal(0, run_sd, (runs, 1)))
    label = np.repeat(np.arange(runs), ops)
    n, busy = np.full(runs, float(ops)), lat.sum(axis=1)
    return {
        "throughput": intervals.ratio_interval(n, busy),
        "mean": intervals.ratio_interval(busy, n),
        "p50": intervals.quantile_interval(lat.ravel(), label, 0.5),
        "p99": intervals.quantile_interval(lat.ravel(), label, 0.99),
    }


def coverage(sims: int, runs: int, ops: int, sigma: float, run_sd: float) -> None:
    rng = np.random.default_rng(runs * 1000 + int(run_sd * 100))
    mean = math.exp(sigma**2 / 2 + run_sd**2 / 2)
    truth = {"throughput": 1 / mean, "mean": mean,
             "p50": mixture_quantile(0.5, sigma, run_sd),
             "p99": mixture_quantile(0.99, sigma, run_sd)}
    hits = dict.fromkeys(truth, 0)
    false_calls = ratio_hits = 0
    for _ in range(sims):
        a = experiment(rng, runs, ops, sigma, run_sd)
        b = experiment(rng, runs, ops, sigma, run_sd)
        for k in truth:
            hits[k] += a[k].contains(truth[k])
        x, y = a["mean"], b["mean"]
        r = verdict.log_ratio_test(x.log_value, x.se_log, x.df, y.log_value, y.se_log, y.df)
        ratio_hits += r.low <= 1 <= r.high
        false_calls += verdict.decide(r.low, r.high, r.p, ratio=r.ratio,
                                      higher_is_better=False) in (verdict.BETTER,
                                                                  verdict.WORSE)
    cells = "  ".join(f"{k} {v / sims:.3f}" for k, v in hits.items())
    print(f"{runs:>4} {ops:>5} {sigma:>5} {run_sd:>6}  {cells}  ratio {ratio_hits / sims:.3f}"
          f"  false better/worse {false_calls / sims:.3f}")


def p999_coverage(sims: int, runs: int, run_sd: float, ops: int = 10_000,
                  sigma: float = 0.5) -> None:
    """p99.9 as the datastore table prints it: an interval once every run has 10 000 ops."""
    rng = np.random.default_rng(runs * 1000 + int(run_sd * 100) + ops)
    truth = mixture_quantile(0.999, sigma, run_sd)
    label = np.repeat(np.arange(runs), ops)
    hits = 0
    for _ in range(sims):
        lat = np.exp(rng.normal(0, sigma, (runs, ops)) + rng.normal(0, run_sd, (runs, 1)))
        hits += intervals.quantile_interval(lat.ravel(), label, 0.999).contains(truth)
    print(f"{runs:>4} {ops:>5} {sigma:>5} {run_sd:>6}  p99.9 {hits / sims:.3f}")


def until_coverage(sims: int, cv: float, pct: float = 5.0, first: int = 3,
                   most: int = 30) -> None:
    """The reported throughput interval where `until` stops, equal-duration runs (ops =
    rate x 1 s): the old rule (95% CI within target), the pessimistic spread alone (the
    target met with and without the latest run), and the kit's rule (that, then
    `UNTIL_CONFIRM_RUNS` more runs); with the mean runs each costs."""
    rng = np.random.default_rng(int(cv * 1000))
    sig = math.sqrt(math.log(1 + cv * cv))
    hits = {"old": 0, "met": 0, "kit": 0}
    runs = dict.fromkeys(hits, 0)
    for _ in range(sims):
        rates = np.exp(rng.normal(-sig**2 / 2, sig, most))  # true mean rate 1
        old = next((n for n in range(first, most + 1)
                    if st.t.ppf(0.975, n - 1) * rates[:n].std(ddof=1) / math.sqrt(n)
                    / rates[:n].mean() * 100 <= pct), most)
        # until_first_met looks at prefixes only: where the runner, one round at a
        # time, would first find the target met.
        met = until_first_met([(float(r), float(r)) for r in rates], pct)
        stops = {"old": old, "met": most if met is None else met,
                 "kit": most if met is None else min(met + UNTIL_CONFIRM_RUNS, most)}
        for key, n in stops.items():
            # The interval the report prints: total ops / total time over the runs.
            hits[key] += intervals.ratio_interval(rates[:n], np.ones(n)).contains(1.0)
            runs[key] += n
    cells = "   ".join(f"{name}: coverage {hits[k] / sims:.3f}, mean runs {runs[k] / sims:5.1f}"
                       for k, name in (("old", "old rule"), ("met", "target met"),
                                       ("kit", f"kit's rule (+{UNTIL_CONFIRM_RUNS})")))
    print(f"until cv {cv:<5} {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000)
    args = parser.parse_args()
    print("runs   ops sigma run_sd  coverage of each printed interval (nominal 0.95)")
    for runs in (3, 5, 10):
        for run_sd in (0.0, 0.05, 0.1, 0.2):
            coverage(args.sims, runs, 1000, 0.5, run_sd)
    coverage(args.sims, 5, 1000, 1.0, 0.1)
    for runs in (3, 5, 10):
        for run_sd in (0.05, 0.1, 0.2):
            p999_coverage(args.sims, runs, run_sd)
    for cv in (0.02, 0.05, 0.1, 0.2):
        until_coverage(args.sims, cv)


if __name__ == "__main__":
    main()
