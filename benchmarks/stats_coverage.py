"""Coverage of every interval the kit prints, and the false-verdict rate of compare.

Simulations with a known answer (seeded): per-op latencies lognormal(0, sigma) scaled by a
lognormal(0, run_sd) run effect; each closed-loop run's wall time is its latency sum.
Prints, per setting, the share of simulated experiments whose interval covers the truth:

- throughput and mean latency (each run counting once), p50 and p99 (pooled), as
  `harness summary` and `harness compare` print them, at 3, 5 and 10 runs (the built-in
  specs' repetition counts) of 1000 ops;
- `unequal`: runs of unequal length (one run in five 10x longer; lengths spread 1-3x), the
  mean and throughput intervals three ways: pooled totals with t on runs - 1 df (the kit
  before), pooled totals with t on Kish's effective number of runs - 1 (floor 1), and each
  run counting once (the kit: `intervals.run_scale`), with the mean log-width of each.
  Each run counting once covers 0.93-0.97 at 5 and 10 runs (0.95-0.99 at 3) with the
  narrowest intervals; Kish's df keep the pooled estimate but cover up to 1.000 with
  intervals 3-6x wider at 3-5 runs, because one 10x run then decides the pooled estimate:
  that is why the kit counts runs once;
- `heavy`: Pareto(1.5) latencies, where the mean's interval undercovers, and the
  `heavy_tail` check's false-alarm rate (lognormal) and power (Pareto) at 1,000-100,000
  ops;
- `family`: 70-row compares (40 rows without an effect, 20 at 1.5x, 10 at 3x) at 3, 5 and
  10 runs a side, judged by Holm with 95% intervals (before), Benjamini-Hochberg with
  FCR-adjusted intervals (the kit) and Bonferroni (--gate familywise): power, false
  discovery and coverage-statement rates, rows whose verdict disagrees with their interval;
- p99.9 at 3, 5 and 10 runs of 10 000 ops (the fewest for which the datastore table
  prints its interval);
- the ratio cand/base of compare on identical distributions (coverage of 1) and the share
  of false better/worse verdicts (should be <= alpha = 0.05);
- `until` (3 runs minimum, ±5% target, max 30): the reported throughput interval after
  the old rule (stop when the 95% CI is within target), after the target is first met
  with the pessimistic spread, and after the kit's rule (that plus the confirming runs),
  with the mean number of runs each costs.

Usage: .venv/bin/python benchmarks/stats_coverage.py [--sims N] [--only SECTION ...]
(default 2000 simulated experiments per row; ~minutes; sections: standard, p999, until,
unequal, heavy, family)
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import optimize
from scipy import stats as st
from scipy.special import stdtrit

from harness.analysis.checks import tails
from harness.analysis.sections import methodology
from harness.analysis.stats import intervals, verdict
from harness.run.until import UNTIL_CONFIRM_RUNS, until_first_met


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
        "throughput": intervals.throughput_interval(n, busy, False),
        "mean": intervals.mean_interval(busy, n),
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


def _kish(num: np.ndarray, den: np.ndarray) -> tuple[float, float]:
    """The pooled interval with t on Kish's effective number of runs - 1 (floor 1)."""
    iv = intervals.ratio_interval(num, den)
    w = den / den.sum()
    df = max(1.0, 1.0 / float(np.sum(w * w)) - 1)
    half = float(stdtrit(df, 0.975)) * iv.se_log
    return math.exp(iv.log_value - half), math.exp(iv.log_value + half)


def unequal_coverage(sims: int, runs: int, pattern: str, run_sd: float, sigma: float = 0.5,
                     ops: int = 500) -> None:
    """Runs of unequal length (`pattern` 10x: every fifth run 10x longer; 3x: lengths
    1-3x), closed loop: the mean and throughput intervals, pooled (before), pooled with
    Kish's df, and each run counting once (the kit)."""
    rng = np.random.default_rng(runs * 100 + int(run_sd * 100) + (7 if pattern == "3x" else 0))
    if pattern == "10x":
        n = np.array([10 * ops if i % 5 == 0 else ops for i in range(runs)], float)
    else:
        n = np.round(np.linspace(1, 3, runs) * ops)
    truth = math.exp(sigma**2 / 2 + run_sd**2 / 2)
    hits = {k: [0, 0] for k in ("pooled", "kish", "kit")}
    width = dict.fromkeys(hits, 0.0)
    for _ in range(sims):
        busy = np.array([rng.lognormal(0, sigma, int(k)).sum() for k in n]) * \
            rng.lognormal(0, run_sd, runs)
        cells = {
            "pooled": [(intervals.ratio_interval(busy, n).low,
                        intervals.ratio_interval(busy, n).high),
                       (intervals.ratio_interval(n, busy).low,
                        intervals.ratio_interval(n, busy).high)],
            "kish": [_kish(busy, n), _kish(n, busy)],
            "kit": [(intervals.mean_interval(busy, n).low, intervals.mean_interval(busy, n).high),
                    (intervals.throughput_interval(n, busy, False).low,
                     intervals.throughput_interval(n, busy, False).high)],
        }
        for k, ((ml, mh), (tl, th)) in cells.items():
            hits[k][0] += ml <= truth <= mh
            hits[k][1] += tl <= 1 / truth <= th
            width[k] += math.log(mh / ml)
    row = "  ".join(f"{k}: mean {v[0] / sims:.3f} tput {v[1] / sims:.3f} w {width[k] / sims:.3f}"
                    for k, v in hits.items())
    print(f"{runs:>4} {pattern:>4} {run_sd:>6}  {row}")


def heavy_coverage(sims: int, runs: int, ops: int = 1000, alpha: float = 1.5) -> None:
    """Pareto(`alpha`) latencies, no run-to-run variation: the mean and throughput
    intervals, and how often `heavy_tail` fires on the group's pooled latencies."""
    rng = np.random.default_rng(runs + ops)
    truth = alpha / (alpha - 1)  # Pareto(xm = 1)
    hits = [0, 0]
    fired = 0
    n = np.full(runs, float(ops))
    for _ in range(sims):
        lat = (1 - rng.random((runs, ops))) ** (-1 / alpha)
        busy = lat.sum(axis=1)
        hits[0] += intervals.mean_interval(busy, n).contains(truth)
        hits[1] += intervals.throughput_interval(n, busy, False).contains(1 / truth)
        fired += tails.heavy_tail(lat.ravel())[0]
    print(f"{runs:>4} {ops:>6} Pareto({alpha:g})  mean {hits[0] / sims:.3f}  throughput "
          f"{hits[1] / sims:.3f}  heavy_tail fires {fired / sims:.3f}")


def heavy_tail_rates(sims: int) -> None:
    """Share of samples on which `heavy_tail` fires: false alarms on lognormal latencies,
    power on Pareto(1.5), at group sizes of 1,000-100,000 ops."""
    rng = np.random.default_rng(11)
    dists = {"lognormal(0, 0.5)": lambda n: rng.lognormal(0, 0.5, n),
             "lognormal(0, 1.0)": lambda n: rng.lognormal(0, 1.0, n),
             "lognormal(0, 1.5)": lambda n: rng.lognormal(0, 1.5, n),
             "Pareto(1.5)": lambda n: (1 - rng.random(n)) ** (-1 / 1.5),
             "Pareto(2.5)": lambda n: (1 - rng.random(n)) ** (-1 / 2.5)}
    sizes = (1000, 10_000, 100_000)
    print("heavy_tail fires on  " + "  ".join(f"{n:>8,}" for n in sizes) + "  ops")
    for name, draw in dists.items():
        rates = [sum(tails.heavy_tail(draw(n))[0] for _ in range(max(sims // (n // 1000), 50)))
                 / max(sims // (n // 1000), 50) for n in sizes]
        print(f"{name:<20}" + "  ".join(f"{r:>8.3f}" for r in rates))


def family(sims: int, runs: int) -> None:
    """`methodology.family_simulation` at `runs` runs a side for every row."""
    rows = ((40, 1.0, runs), (20, 1.5, runs), (10, 3.0, runs))
    t = methodology.family_simulation(rows, sims=sims, seed=runs)
    bad = next(c for c in t.columns if c.startswith("rows disagreeing"))
    for _, r in t.iterrows():
        name = r["procedure"].split(",")[0]  # Holm (before), Benjamini-Hochberg, Bonferroni
        print(f"{runs:>4}  {name:<18}  level {r['mean level printed']:.4f}  "
              f"found 1.5x {r['found at 1.5x']:.3f} 3x {r['found at 3x']:.3f}  "
              f"FDR {r['false discovery rate']:.3f}  "
              f"FCR {r['false coverage-statement rate']:.3f}  "
              f"coverage {r['coverage of every interval']:.3f}  "
              f"FWER {r['familywise error rate']:.3f}  disagreeing {r[bad]} of {70 * sims:,}")


SECTIONS = ("standard", "p999", "until", "unequal", "heavy", "family")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000)
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    args = parser.parse_args()
    if "standard" in args.only:
        print("runs   ops sigma run_sd  coverage of each printed interval (nominal 0.95)")
        for runs in (3, 5, 10):
            for run_sd in (0.0, 0.05, 0.1, 0.2):
                coverage(args.sims, runs, 1000, 0.5, run_sd)
        coverage(args.sims, 5, 1000, 1.0, 0.1)
    if "p999" in args.only:
        for runs in (3, 5, 10):
            for run_sd in (0.05, 0.1, 0.2):
                p999_coverage(args.sims, runs, run_sd)
    if "until" in args.only:
        for cv in (0.02, 0.05, 0.1, 0.2):
            until_coverage(args.sims, cv)
    if "unequal" in args.only:
        print("runs  len run_sd  coverage of mean and throughput (nominal 0.95), mean log-width")
        for pattern in ("10x", "3x"):
            for runs in (3, 5, 10):
                for run_sd in (0.0, 0.05, 0.1, 0.2):
                    unequal_coverage(args.sims, runs, pattern, run_sd)
    if "heavy" in args.only:
        for runs in (3, 5, 10):
            heavy_coverage(args.sims, runs)
        heavy_tail_rates(args.sims)
    if "family" in args.only:
        print("runs  procedure (70-row compares: 40 null, 20 at 1.5x, 10 at 3x)")
        for runs in (3, 5, 10):
            family(max(args.sims // 10, 20), runs)


if __name__ == "__main__":
    main()
