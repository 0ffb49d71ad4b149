"""`harness explain`: do its intervals cover, how many of its findings are false, and
what it finds, on factorial experiments with known quantile effects.

Simulated (seeded) like real runs: each run's ops are lognormal (median 0.1 ms, sigma
0.3), the whole run scaled by a run effect (lognormal, sd `run_sd`: run-to-run
variation), and four factors of two levels:

- A shifts every quantile: x1.3;
- B only fattens the tail: 2% of the ops x3 (their share varying by run, sd 30%):
  p99 up by ~1.5x, p50 barely (+1%);
- C does nothing;
- D multiplies by 1.2 only together with A (an interaction A:D, and half of it in D's
  main effect averaged over A).

The truth of each term is the difference of the runs' expected log quantiles (200 runs of
100 000 ops per configuration, the same draws for each, computed once), averaged over the
other factors as `explain` averages. Printed per setting
(full 2^4 grid or the resolution-IV half, 3 or 5 runs per configuration, `--sims`
experiments each): the coverage of each term's 95% interval at p50 and p99 (goal 0.93-
0.97), that of the printed FCR-adjusted interval, the false-discovery rate among the
null terms' findings (C, A:B, A:C, B:C, B:D, C:D), and the power for the real ones.

Usage: .venv/bin/python benchmarks/explain_coverage.py [--sims 500] [--ops 5000]
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

import numpy as np
import pandas as pd
from scipy.special import stdtrit

from harness.analysis.explain.analysis import explain_table
from harness.analysis.explain.data import RunTable
from harness.spec.design import fractional

FACTORS = {"A": (0, 1), "B": (0, 1), "C": (0, 1), "D": (0, 1)}
QS = (0.5, 0.99)
NULL = {"C=1", "A=1:B=1", "A=1:C=1", "B=1:C=1", "B=1:D=1", "C=1:D=1"}
SIGMA, TAIL_SHARE, TAIL_X = 0.3, 0.02, 3.0


def _ops(rng: np.random.Generator, n: int, a: int, b: int, d: int, run: float,
         tail_share: float) -> np.ndarray:
    scale = 0.1 * run * (1.3 if a else 1.0) * (1.2 if a and d else 1.0)
    lat = rng.lognormal(math.log(scale), SIGMA, n)
    if b:
        lat[rng.random(n) < tail_share] *= TAIL_X
    return lat


def truth() -> dict[tuple[float, str], float]:
    """Each term's true log effect at each quantile, averaged over the others: what the
    runs estimate, each run's log quantile in expectation (its tail share varies by
    run, so this is the mean over runs, not the quantile at the mean share). The same
    draws serve every configuration (common random numbers), so a shift is exact."""
    rng = np.random.default_rng(12345)
    draws = [(rng.normal(0, SIGMA, 100_000), rng.random(100_000),
              TAIL_SHARE * rng.lognormal(0, 0.3)) for _ in range(200)]
    pop = {}
    for a, b, d in itertools.product((0, 1), repeat=3):
        scale = 0.1 * (1.3 if a else 1.0) * (1.2 if a and d else 1.0)
        logs = {q: [] for q in QS}
        for z, u, share in draws:
            lat = scale * np.exp(z)
            if b:
                lat = np.where(u < share, lat * TAIL_X, lat)
            for q in QS:
                logs[q].append(math.log(float(np.quantile(lat, q))))
        pop[(a, b, d)] = {q: float(np.mean(v)) for q, v in logs.items()}

    def mu(q: float, p: dict[str, int]) -> float:
        return pop[(p["A"], p["B"], p["D"])][q]  # C does nothing

    out = {}
    names = list(FACTORS)
    for q in QS:
        for f in names:
            others = [g for g in names if g != f]
            vals = [mu(q, {**dict(zip(others, c, strict=True)), f: 1})
                    - mu(q, {**dict(zip(others, c, strict=True)), f: 0})
                    for c in itertools.product((0, 1), repeat=3)]
            out[(q, f"{f}=1")] = float(np.mean(vals))
        for f, g in itertools.combinations(names, 2):
            others = [h for h in names if h not in (f, g)]
            vals = []
            for c in itertools.product((0, 1), repeat=2):
                at = dict(zip(others, c, strict=True))
                vals.append(mu(q, {**at, f: 1, g: 1}) - mu(q, {**at, f: 1, g: 0})
                            - mu(q, {**at, f: 0, g: 1}) + mu(q, {**at, f: 0, g: 0}))
            out[(q, f"{f}=1:{g}=1")] = float(np.mean(vals))
    return out


def simulate(rng: np.random.Generator, points: list[dict[str, int]], reps: int, ops: int,
             run_sd: float) -> RunTable:
    rows, quant = [], {q: [] for q in QS}
    for r in range(reps):
        for pt in points:
            run = rng.lognormal(0, run_sd)
            share = TAIL_SHARE * rng.lognormal(0, 0.3)
            lat = _ops(rng, ops, pt["A"], pt["B"], pt["D"], run, share)
            cid = "".join(str(pt[f]) for f in FACTORS)
            rows.append({"run_id": f"{cid}-{r}", "config_id": cid, **pt})
            for q in QS:
                quant[q].append(float(np.quantile(lat, q)))
    return RunTable(pd.DataFrame(rows), {q: pd.Series(v) for q, v in quant.items()},
                    pd.DataFrame(index=range(len(rows))), FACTORS, [], [])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=500)
    ap.add_argument("--ops", type=int, default=5000)
    ap.add_argument("--run-sd", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    t0 = time.perf_counter()
    true = truth()
    print("truth (ratios): " + ", ".join(
        f"p{q * 100:g} {t}={math.exp(v):.3f}" for (q, t), v in true.items()
        if abs(v) > 1e-3))
    full = [dict(zip(FACTORS, c, strict=True)) for c in itertools.product((0, 1), repeat=4)]
    half = fractional(list(FACTORS), [FACTORS[f] for f in FACTORS], 4).points()
    print(f"{args.sims} experiments per row, {args.ops} ops per run, run-to-run sd "
          f"{args.run_sd:.0%}; coverage of the 95% interval (printed FCR interval)")
    for name, points in (("full 2^4", full), ("half 2^(4-1) IV", half)):
        for reps in (3, 5):
            rng = np.random.default_rng(args.seed + reps)
            cover: dict[tuple[float, str], list[bool]] = {}
            cover_fcr: dict[tuple[float, str], list[bool]] = {}
            false = found = 0
            fdp = []
            power: dict[tuple[float, str], list[bool]] = {}
            for _ in range(args.sims):
                e = explain_table(simulate(rng, points, reps, args.ops, args.run_sd))
                v = r = 0
                for t in e.terms:
                    key = (t.quantile, t.term)
                    # An aliased column carries its aliases' effects too.
                    tv = true[key] + sum(true[(t.quantile, a)] for a in t.aliased_with)
                    lg = math.log(t.effect_ratio)
                    half95 = float(stdtrit(t.df, 0.975)) * abs(lg - math.log(t.ci_low)) / \
                        float(stdtrit(t.df, 0.5 + t.ci_level / 2))
                    cover.setdefault(key, []).append(abs(lg - tv) <= half95)
                    cover_fcr.setdefault(key, []).append(
                        math.log(t.ci_low) <= tv <= math.log(t.ci_high))
                    null = t.term in NULL and all(a in NULL for a in t.aliased_with)
                    if t.significant:
                        r += 1
                        v += null
                    if not null:
                        power.setdefault(key, []).append(t.significant)
                fdp.append(v / r if r else 0.0)
                false += v
                found += r
            worst = min(np.mean(c) for c in cover.values())
            best = max(np.mean(c) for c in cover.values())
            print(f"\n{name}, {reps} runs per configuration ({len(points) * reps} runs): "
                  f"95% coverage over all terms {worst:.3f}-{best:.3f}; FDR "
                  f"{np.mean(fdp):.3f} ({false} false of {found} findings)")
            for q in QS:
                cells = [(t, np.mean(c), np.mean(cover_fcr[(qq, t)]))
                         for (qq, t), c in cover.items() if qq == q]
                print(f"  p{q * 100:g}: " + "; ".join(
                    f"{t} {c:.3f} ({cf:.3f})" for t, c, cf in cells))
                pw = [(t, np.mean(p)) for (qq, t), p in power.items() if qq == q]
                print(f"  p{q * 100:g} power: " + ", ".join(f"{t} {p:.2f}" for t, p in pw))
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
