"""`until: decided` against a known truth: the sequential test of
`harness.analysis.stats.sequential`, simulated over whole grids (issue 52 item 2).

A grid is a base configuration and `--configs` - 1 others, each compared with the base
(one family, Bonferroni: each comparison at alpha / m). Per-run throughput is lognormal:
each configuration's true mean times exp(N(0, noise)) run to run (noise 2, 5, 10%). Every
comparison of a grid shares the effect under study (none, +-5%, +-10%; the signs
alternate). The looks are those the runner takes: 3 runs a side first, then one more a
side per look, at most `--max-runs`; each comparison stops at its first decided look
(`sequential.replay`). Printed per setting:

1. the share of grids with any false better/worse: under no difference, any at all
   (must be <= 5%); with an effect, any in the wrong direction;
2. interval coverage at the stop: the share of comparisons whose repeated CI at their
   stop covers the true ratio, and the share of grids where every one does;
3. runs per side to the stop, median (undecided comparisons count max-runs), against the
   runs per side of the fixed design that reaches the same power: Welch's t at the same
   alpha / m with the same runs for every comparison (with an effect: the power to say
   better/worse in the right direction, from the noncentral t), or the fixed 1 - alpha/m
   interval within +-margin (no difference: simulated), at the fewest runs that reach the
   sequential design's share decided (at most 0.99).
   That fixed design knows the true effect (an oracle); beside it, the fixed design a
   user would plan not knowing it: the runs that detect a difference as large as the
   margin with 80% power at the same alpha / m.

Usage: .venv/bin/python benchmarks/sequential_decide.py [--grids N] [--configs M]
       [--max-runs N] [--margin 0.05] [--seed S]
(default 1000 grids of 4 configurations per setting; about a minute on 2 cores)
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import stats as st

from harness.analysis.stats import sequential

FIRST = 3
ALPHA = 0.05
#: A sequential design that decides every simulated comparison is matched by the fixed
#: design at this power (power 1 itself no fixed design reaches).
POWER_CAP = 0.99
#: The fixed design a user plans without knowing the effect: enough runs to detect a
#: difference the size of the margin with this power.
PLANNED_POWER = 0.8


def simulate(noise: float, effect: float, *, grids: int, configs: int, max_runs: int,
             margin: float, rng: np.random.Generator) -> dict[str, float]:
    """One setting's figures over `grids` simulated grids."""
    m = configs - 1
    alpha = sequential.family_alpha(ALPHA, m)
    any_false, all_cover, covers, stops, right = 0, 0, [], [], 0
    for _ in range(grids):
        base = np.exp(rng.normal(0, noise, max_runs))
        grid_false, grid_cover = False, True
        for j in range(m):
            true = 1 + effect * (1 if j % 2 == 0 else -1)
            cand = true * np.exp(rng.normal(0, noise, max_runs))
            last = sequential.replay(base, cand, first=FIRST, max_n=max_runs,
                                     alpha=alpha, margin=margin)[-1]
            ok = last.low <= true <= last.high
            covers.append(ok)
            grid_cover &= ok
            stops.append(last.n_cand)
            said = {sequential.BETTER: 1, sequential.WORSE: -1}.get(last.state, 0)
            if said and (effect == 0 or said != (1 if true > 1 else -1)):
                grid_false = True
            if effect == 0:
                right += last.state == sequential.EQUIVALENT
            else:
                right += said == (1 if true > 1 else -1)
        any_false += grid_false
        all_cover += grid_cover
    power = right / (grids * m)
    return {"false": any_false / grids, "cover": float(np.mean(covers)),
            "grid_cover": all_cover / grids, "median": float(np.median(stops)),
            "power": power,
            "fixed": fixed_runs(noise, effect, alpha, margin, power, rng),
            "planned": fixed_runs(noise, margin, alpha, margin, PLANNED_POWER, rng)}


def fixed_runs(noise: float, effect: float, alpha: float, margin: float, power: float,
               rng: np.random.Generator, most: int = 400) -> float:
    """Fewest runs a side of a fixed design at `alpha` with at least `power`."""
    if power <= 0:
        return math.nan
    power = min(power, POWER_CAP)
    for n in range(2, most + 1):
        if fixed_power(noise, effect, alpha, margin, n, rng) >= power:
            return float(n)
    return math.inf


def fixed_power(noise: float, effect: float, alpha: float, margin: float, n: int,
                rng: np.random.Generator, sims: int = 4000) -> float:
    """Power of the fixed design at n runs a side (the log ratio of means is close to the
    mean log ratio at these spreads: the noncentral t of the logs)."""
    df = 2 * n - 2
    crit = st.t.isf(alpha / 2, df)
    if effect != 0:
        nc = math.log1p(effect) / (noise * math.sqrt(2 / n))
        return float(st.nct.sf(crit, df, nc))
    a = rng.normal(0, noise, (sims, n))
    b = rng.normal(0, noise, (sims, n))
    d = b.mean(1) - a.mean(1)
    se = np.sqrt(a.var(1, ddof=1) / n + b.var(1, ddof=1) / n)
    tol = math.log1p(margin)
    return float(np.mean((d - crit * se >= -tol) & (d + crit * se <= tol)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grids", type=int, default=1000)
    ap.add_argument("--configs", type=int, default=4)
    ap.add_argument("--max-runs", type=int, default=20)
    ap.add_argument("--margin", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=52)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"{args.grids} grids of {args.configs} configurations per row "
          f"({args.configs - 1} comparisons, Bonferroni alpha {ALPHA}/{args.configs - 1}); "
          f"looks at {FIRST}..{args.max_runs} runs a side; margin ±{args.margin:.0%}")
    print(f"{'noise':>5} {'effect':>6} | {'false':>6} | {'cover':>6} {'grid':>6} | "
          f"{'decided':>7} {'seq med':>7} {'fixed':>6} {'ratio':>6} | {'planned':>7} "
          f"{'ratio':>6}")
    for noise in (0.02, 0.05, 0.10):
        for effect in (0.0, 0.05, 0.10):
            r = simulate(noise, effect, grids=args.grids, configs=args.configs,
                         max_runs=args.max_runs, margin=args.margin, rng=rng)
            ratio = r["median"] / r["fixed"] if r["fixed"] > 0 else math.nan
            versus = r["median"] / r["planned"]
            print(f"{noise:>5.0%} {effect:>+6.0%} | {r['false']:>6.3f} | "
                  f"{r['cover']:>6.3f} {r['grid_cover']:>6.3f} | {r['power']:>7.3f} "
                  f"{r['median']:>7.1f} {r['fixed']:>6.0f} {ratio:>6.2f} | "
                  f"{r['planned']:>7.0f} {versus:>6.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
