"""False-alarm rate and power of every measurement check (`harness.analysis.checks.registry`).

Seeded simulations with a known answer, fed to the checks' own functions as groups of
runs (`runfacts.RunData`: a manifest and the group's ops), so what is measured is the
rule the kit applies, thresholds included:

- not_steady: per-op latencies of steady runs (lognormal with log-SD 0.3 and 1.0;
  autocorrelated, AR(1) on log latency with phi 0.5 and 0.9; spiky, 0.2% of ops 20x;
  a burst of another process's load, x2 for a tenth of the run after a steady start;
  an open-loop M/M/1 queue at 80% load, started in its stationary state) at 500 to
  100,000 ops per run: the share of runs failing and of groups of 5, 10 and 20 runs
  failing (the false-alarm rate; at most 5% per group is the bar). Power: the issue's
  warm-up (x3 decaying over the first 30 ops), a longer one (x2 decaying over the first
  10% of ops) and a stalled server (the queue starting 500 service times behind);
- trend: per-run mean latencies with a lognormal run-to-run SD of 2% and 5%, in start
  order; no drift (false alarms), 1% and 3% per run (the issue's), and a step of +20%
  halfway (a hog started in the middle of a grid), at 5 and 10 runs;
- cold_first_run: the same runs; the first x1.0 (false alarms), x1.2 and x1.5 (the
  issue's), at 3, 5 and 10 runs;
- target_not_met: open loop, fixed and Poisson arrivals, 100 to 100,000 intended ops,
  the clients keeping up (false alarms) or able to send 97% and 90% of them;
- client_saturated and machine_busy: thresholds on telemetry; their error is /proc's
  10 ms tick (other_cpu over windows of 0.5-3 s) and the window's edges (cpu_util,
  +-0.05 as tests/run/test_telemetry.py measured): steady runs well below the bar (client
  at 50-85% of a CPU, others at 0-0.15 CPUs) against a client at 95-100% and a CPU hog
  of 0.5-1 CPU.

Usage: .venv/bin/python benchmarks/checks_calibration.py [--sims N]  (default 2000;
a few minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import numpy as np
from scipy.signal import lfilter

from harness.analysis.checks import registry as checks
from harness.analysis.checks.runfacts import RunData, RunOps
from harness.analysis.stats import stationarity
from harness.results import new_manifest

Series = Callable[[np.random.Generator, int], np.ndarray]  # log latencies, in order


def run_data(i: int, *, ops: RunOps | None = None, loadgen: dict | None = None,
             counts: dict | None = None, telemetry: dict | None = None,
             started_s: float = 1.7e9) -> RunData:
    m = new_manifest(run_id=f"r{i}", experiment="sim", workload="sim", repetition=i + 1,
                     grid_point={}, started_utc=datetime.fromtimestamp(
                         started_s + 60 * i, UTC).isoformat(),
                     loadgen=loadgen or {"mode": "closed"}, counts=counts or {},
                     telemetry=telemetry or {})
    return RunData(m.run_id, m, ops)


def ops_of(logs: np.ndarray, gap_ns: float = 100_000.0) -> RunOps:
    """A run's facts from its log latencies (ns scale: 100 us median), ops begun every
    `gap_ns` (closed loop at a steady rate: the order is what MSER reads)."""
    lat = np.exp(logs + math.log(1e5)).astype(np.int64)
    begin = (np.arange(lat.size) * gap_ns).astype(np.int64)
    return RunOps(int(lat.size), float(lat.mean()) / 1e6,
                  float(begin[-1] + lat[-1]) / 1e9, stationarity.warmup(begin, lat))


# -- steady per-op series ---------------------------------------------------------------

def lognormal(sigma: float) -> Series:
    return lambda rng, n: rng.normal(0, sigma, n)


def ar1(phi: float, sigma: float) -> Series:
    def f(rng: np.random.Generator, n: int) -> np.ndarray:
        e = rng.normal(0, sigma * math.sqrt(1 - phi * phi), n)
        return lfilter([1], [1, -phi], e, zi=[phi * rng.normal(0, sigma)])[0]
    return f


def spiky(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.normal(0, 0.3, n)
    x[rng.random(n) < 0.002] += math.log(20)
    return x


def queue(rho: float, backlog: float = -1.0) -> Series:
    """Sojourn times of an M/M/1 queue (service mean 1) in arrival order, by Lindley's
    recursion; `backlog` < 0: started in the stationary state, else that far behind."""
    def f(rng: np.random.Generator, n: int) -> np.ndarray:
        s = rng.exponential(1.0, n)
        a = rng.exponential(1 / rho, n)
        w0 = backlog if backlog >= 0 else (
            rng.exponential(1 / (1 - rho)) if rng.random() < rho else 0.0)
        w = np.empty(n)
        cur = w0
        for i in range(n):  # the recursion is sequential; n is at most 1e5
            w[i] = cur
            cur = max(0.0, cur + s[i] - a[i])
        return np.log(w + s)
    return f


def burst(rng: np.random.Generator, n: int) -> np.ndarray:
    """Another process's load: latency x2 for a tenth of the run, starting anywhere
    from a tenth to four fifths of the way in (the start itself steady)."""
    x = rng.normal(0, 0.3, n)
    at = int(rng.uniform(0.1, 0.8) * n)
    x[at:at + n // 10] += math.log(2)
    return x


NULLS: dict[str, Series] = {
    "lognormal 0.3": lognormal(0.3),
    "lognormal 1.0": lognormal(1.0),
    "AR(1) 0.5": ar1(0.5, 0.3),
    "AR(1) 0.9": ar1(0.9, 0.3),
    "spiky": spiky,
    "burst of load, x2": burst,
    "M/M/1 80%": queue(0.8),
}


def warm_linear(base: Series, factor: float, ops: int) -> Series:
    def f(rng: np.random.Generator, n: int) -> np.ndarray:
        x = base(rng, n)
        i = np.arange(min(ops, n))
        x[: i.size] += np.log(1 + (factor - 1) * (1 - i / ops))
        return x
    return f


def warm_exp(base: Series, factor: float, share: float) -> Series:
    def f(rng: np.random.Generator, n: int) -> np.ndarray:
        x = base(rng, n)
        tau = share * n / 3  # down to ~5% of the excess at `share` of the run
        x += np.log(1 + (factor - 1) * np.exp(-np.arange(n) / tau))
        return x
    return f


PATTERNS: dict[str, Series] = {
    "x3 over 30 ops, lognormal 0.3": warm_linear(lognormal(0.3), 3, 30),
    "x3 over 30 ops, lognormal 0.5": warm_linear(lognormal(0.5), 3, 30),
    "x3 over 30 ops, M/M/1 50%": warm_linear(queue(0.5), 3, 30),
    "x2 over 10% of ops, lognormal 0.5": warm_exp(lognormal(0.5), 2, 0.1),
    "stall (500 services behind), M/M/1 50%": queue(0.5, backlog=500.0),
}


def steady_rates(series: Series, n: int, sims: int, seed: int,
                 sizes: Sequence[int] = (5, 10, 20)) -> tuple[float, dict[int, float]]:
    """(share of runs failing not_steady alone, {group size: share of groups failing})."""
    rng = np.random.default_rng(seed)
    runs = [run_data(i, ops=ops_of(series(rng, n))) for i in range(sims)]
    alone = np.mean([checks.not_steady([r]) is not None for r in runs])
    groups = {k: float(np.mean([checks.not_steady(runs[j:j + k]) is not None
                                for j in range(0, sims - k + 1, k)])) for k in sizes}
    return float(alone), groups


def section_not_steady(sims: int) -> None:
    print("## not_steady: false alarms on steady runs (share of runs; of groups of "
          "5 / 10 / 20 runs)\n")
    print("| latencies | ops per run | runs | groups of 5 | of 10 | of 20 |")
    print("|---|---|---|---|---|---|")
    for i, (name, series) in enumerate(NULLS.items()):
        for n in (500, 1000, 10_000, 100_000):
            s = sims if n <= 10_000 else max(200, sims // 10)
            if name.startswith("M/M/1") and n == 100_000:
                s = max(100, sims // 20)
            alone, groups = steady_rates(series, n, s, seed=100 * i + n % 97)
            print(f"| {name} | {n:,} | {alone:.4f} ({s}) | {groups[5]:.3f} | "
                  f"{groups[10]:.3f} | {groups[20]:.3f} |", flush=True)
    print("\n## not_steady: power (share of runs detected; of groups of 5)\n")
    print("| pattern | ops per run | runs | groups of 5 |")
    print("|---|---|---|---|")
    for i, (name, series) in enumerate(PATTERNS.items()):
        for n in (1000, 3000, 10_000):
            s = max(200, sims // 4)
            alone, groups = steady_rates(series, n, s, seed=7000 + 10 * i + n % 89,
                                         sizes=(5,))
            print(f"| {name} | {n:,} | {alone:.3f} | {groups[5]:.3f} |", flush=True)


# -- order: trend and cold first run ---------------------------------------------------

def order_groups(rng: np.random.Generator, k: int, run_sd: float,
                 effect: Callable[[np.ndarray], np.ndarray]) -> list[RunData]:
    means = np.exp(rng.normal(0, run_sd, k)) * effect(np.arange(k))
    return [run_data(i, ops=RunOps(1000, float(m), 1.0, None)) for i, m in enumerate(means)]


def order_rate(check: checks.CheckFunc, k: int, run_sd: float,
               effect: Callable[[np.ndarray], np.ndarray], sims: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    return float(np.mean([check(order_groups(rng, k, run_sd, effect)) is not None
                          for _ in range(sims)]))


def section_order(sims: int) -> None:
    print("\n## trend: share of groups flagged (per-run mean latencies in start order)\n")
    print("| runs | run-to-run SD | no drift | +1% per run | +3% per run | +20% step halfway |")
    print("|---|---|---|---|---|---|")
    effects = {
        "none": lambda i: np.ones(i.size),
        "1%": lambda i: 1.01 ** i,
        "3%": lambda i: 1.03 ** i,
        "step": lambda i: np.where(i >= i.size // 2, 1.2, 1.0),
    }
    for k in (5, 10):
        for sd in (0.02, 0.05):
            cells = [order_rate(checks.trend, k, sd, e, sims, seed=k * 31 + j)
                     for j, e in enumerate(effects.values())]
            print(f"| {k} | {sd:.0%} | " + " | ".join(f"{c:.3f}" for c in cells) + " |",
                  flush=True)
    print("\n## cold_first_run: share of groups flagged\n")
    print("| runs | run-to-run SD | first x1.0 | first x1.2 | first x1.5 |")
    print("|---|---|---|---|---|")
    for k in (3, 5, 10):
        for sd in (0.02, 0.05):
            cells = [order_rate(checks.cold_first_run, k, sd,
                                lambda i, f=f: np.where(i == 0, f, 1.0), sims,
                                seed=k * 53 + int(f * 10)) for f in (1.0, 1.2, 1.5)]
            print(f"| {k} | {sd:.0%} | " + " | ".join(f"{c:.3f}" for c in cells) + " |",
                  flush=True)


# -- open loop: target not met ---------------------------------------------------------

def open_run(rng: np.random.Generator, i: int, arrival: str, intended: int, capacity: float
             ) -> RunData:
    """An open-loop run of `intended` ops at 1000 ops/s whose clients can send a share
    `capacity` of them on time; the rest are left unsent (the kit counts them)."""
    target, duration = 1000.0, intended / 1000.0
    n_int = int(rng.poisson(intended)) if arrival == "poisson" else intended
    sent = min(n_int, int(n_int * capacity))
    unsent = n_int - sent
    # The achieved rate as the runner computes it: sent ops over their span (intended
    # starts, plus the last op's 1 ms latency).
    achieved = sent / (duration + 0.001)
    lag = 0.05 if unsent == 0 else 50.0 * (1 - capacity) * duration * 1000
    return run_data(i, loadgen={"mode": "open", "arrival": arrival,
                                "target_rate_ops_s": target, "achieved_rate_ops_s": achieved,
                                "send_lag_p99_ms": lag},
                    counts={"measured": sent, "unsent": unsent, "total": sent})


def section_target(sims: int) -> None:
    print("\n## target_not_met: share of runs flagged\n")
    print("| arrivals | intended ops | clients keep up | can send 97% | can send 90% |")
    print("|---|---|---|---|---|")
    for arrival in ("fixed", "poisson"):
        for intended in (100, 1000, 10_000, 100_000):
            rng = np.random.default_rng(intended + len(arrival))
            cells = [np.mean([checks.target_not_met([open_run(rng, 0, arrival, intended, c)])
                              is not None for _ in range(sims)]) for c in (1.0, 0.97, 0.9)]
            print(f"| {arrival} | {intended:,} | " + " | ".join(f"{c:.3f}" for c in cells)
                  + " |", flush=True)


# -- telemetry thresholds --------------------------------------------------------------

def telemetry_run(rng: np.random.Generator, client_util: float, other_cpu: float
                  ) -> RunData:
    """A run whose client used `client_util` of a CPU and others `other_cpu` CPUs, as
    the kit measures them: cpu_util within +-0.05 of the truth (the window's edges),
    other_cpu in 10 ms ticks over a 0.5-3 s window (each tick a sample)."""
    window = rng.uniform(0.5, 3.0)
    ticks = rng.poisson(other_cpu * window * 100)
    measured_other = ticks / 100 / window
    util = min(1.0, max(0.0, client_util + rng.uniform(-0.05, 0.05)))
    return run_data(0, telemetry={
        "window_s": window,
        "processes": [{"role": "client", "cpu_util": util}],
        "hosts": [{"host": "client", "cpus": 2, "other_cpu": measured_other,
                   "steal_util": 0.0}]})


def section_telemetry(sims: int) -> None:
    print("\n## client_saturated and machine_busy: share of runs flagged\n")
    print("| client's true CPU | others' true CPUs | client_saturated | machine_busy |")
    print("|---|---|---|---|")
    rng = np.random.default_rng(5)
    for util, other in ((0.5, 0.0), (0.85, 0.05), (0.85, 0.15), (0.95, 0.5), (1.0, 1.0)):
        runs = [telemetry_run(rng, util, other) for _ in range(sims)]
        sat = np.mean([checks.client_saturated([r]) is not None for r in runs])
        busy = np.mean([checks.machine_busy([r]) is not None for r in runs])
        print(f"| {util:.2f} | {other:.2f} | {sat:.3f} | {busy:.3f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=2000, help="simulated runs or groups per row")
    ap.add_argument("--only", choices=("steady", "order", "target", "telemetry"))
    args = ap.parse_args()
    sections = {"steady": section_not_steady, "order": section_order,
                "target": section_target, "telemetry": section_telemetry}
    for name, fn in sections.items():
        if args.only in (None, name):
            fn(args.sims)


if __name__ == "__main__":
    main()
