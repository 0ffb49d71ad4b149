"""The capacity search against a known answer, and on a real memcached.

1. examples/queueserver.py (one FIFO worker, fixed service time S) under Poisson
   arrivals is an M/D/1 queue. `harness run --search "p99 < 10S"` on it is compared with
   theory: the rate at which the M/D/1 sojourn time's p99 reaches 10 S (Lindley's
   recursion, 400,000 arrivals per rate), for the nominal S and for the S the server
   really takes (1 / its closed-loop maximum: the protocol and the Python event loop add
   to the service), and each step's measured p99 with its 95% interval beside theory's.
2. memcached (1 thread): the search at p99 < 1 ms beside the closed-loop maximum of
   the same server.

    .venv/bin/python benchmarks/capacity_md1.py [--service-ms 2] [--reps 3]
        [--duration 3] [--skip-memcached]

Prints tables; takes about 5 minutes on 2 cores. Loopback only.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import capacity  # noqa: E402

QUEUE = """\
name: md1
workload: memcache_mix
hosts: {{server: localhost, client: localhost}}
services:
  cache:
    kind: command
    host: server
    settings:
      command: "{{python}} {{kit}}/examples/queueserver.py --port {{port}} --service-ms {s}"
      provides: memcached
      ready: tcp
clients: {{hosts: [client], processes: 1, connections: 8}}
params: {{key_space: 20}}
repetitions: {reps}
run: {{duration_s: {duration}, warmup_s: 1, timeout_s: 10, arrival: poisson}}
"""
MEMCACHED = """\
name: mc_capacity
workload: memcache_mix
hosts: {{server: localhost, client: localhost}}
services:
  cache: {{kind: memcached, host: server, settings: {{threads: 1}}}}
clients: {{hosts: [client], processes: 1, connections: 16}}
params: {{key_space: 10000}}
repetitions: {reps}
run: {{duration_s: {duration}, warmup_s: 1, timeout_s: 10, arrival: poisson}}
"""


def md1_p99_ms(rate: float, service_ms: float, n: int = 400_000, seed: int = 11) -> float:
    """p99 of the M/D/1 sojourn time (wait + service) at `rate`/s, by Lindley's
    recursion W' = max(0, W + S - A) over `n` Poisson arrivals."""
    if rate * service_ms / 1e3 >= 1:
        return math.inf
    gaps = np.random.default_rng(seed).exponential(1e3 / rate, n)
    w = np.empty(n)
    cur = 0.0
    for i in range(n):
        cur = max(0.0, cur - gaps[i]) if i else 0.0
        w[i] = cur
        cur += service_ms
    return float(np.quantile(w + service_ms, 0.99))


def md1_capacity(service_ms: float, limit_ms: float) -> float:
    lo, hi = 1.0, 1e3 / service_ms
    for _ in range(25):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if md1_p99_ms(mid, service_ms, 100_000) < limit_ms else (lo, mid)
    return lo


def search(text: str, slo: str, out: Path, resolution: float) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    spec = out / "spec.yaml"
    spec.write_text(text)
    settings = capacity.settings_from(None, slo, resolution)
    capacity.run_search(spec, {}, out / "raw", settings,
                        runner_kw={"progress": False, "live": False},
                        say=lambda m: print("  " + m, flush=True))
    name = text.split("\n", 1)[0].split(": ")[1]
    return json.loads((out / "raw" / name / "search.json").read_text())


def fmt(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.3g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--service-ms", type=float, default=2.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--resolution", type=float, default=0.05)
    ap.add_argument("--skip-memcached", action="store_true")
    args = ap.parse_args()
    s = args.service_ms
    limit = 10 * s
    with tempfile.TemporaryDirectory() as tmp:
        print(f"1. queueserver, S = {s:g} ms, SLO p99 < {limit:g} ms, {args.reps} runs of "
              f"{args.duration:g} s per step")
        doc = search(QUEUE.format(s=s, reps=args.reps, duration=args.duration),
                     f"p99 < {limit:g}ms", Path(tmp) / "q", args.resolution)
        s_eff = 1e3 / doc["closed_loop_max_ops_s"]
        theory = md1_capacity(s, limit)
        theory_eff = md1_capacity(s_eff, limit)
        print(f"\n| offered ops/s | achieved | p99 ms [95% CI] | M/D/1 p99 (S={s:g}) | "
              f"M/D/1 p99 (S={s_eff:.3g}) | met |")
        print("|---|---|---|---|---|---|")
        inside = total = 0
        for st in doc["steps"][1:]:
            lo, hi = st["p99_ci"]
            t_nom = md1_p99_ms(st["achieved_ops_s"], s)
            t_eff = md1_p99_ms(st["achieved_ops_s"], s_eff)
            if lo is not None and hi is not None and math.isfinite(t_eff):
                total += 1
                inside += lo <= t_eff <= hi
            print(f"| {st['rate_ops_s']:,} | {st['achieved_ops_s']:,.0f} | "
                  f"{fmt(st['p99_ms'])} [{fmt(lo)}, {fmt(hi)}] | {fmt(t_nom)} | {fmt(t_eff)} | "
                  f"{st['met']} |")
        cap = doc["capacity_ops_s"]
        print(f"\ncapacity found {fmt(cap)} ops/s (95% CI {fmt(doc['ci_low'])}-"
              f"{fmt(doc['ci_high'])}); M/D/1 theory {theory:,.0f} ops/s at S = {s:g} ms "
              f"(found/theory {cap / theory:.3f}), {theory_eff:,.0f} ops/s at the measured "
              f"S = {s_eff:.3g} ms (found/theory {cap / theory_eff:.3f}); theory's p99 (at "
              f"the measured S) inside the step's interval in {inside} of {total} steps "
              "with an interval")
        if args.skip_memcached:
            return
        print(f"\n2. memcached, 1 thread, SLO p99 < 1 ms, {args.reps} runs of "
              f"{args.duration:g} s per step")
        doc = search(MEMCACHED.format(reps=args.reps, duration=args.duration), "p99 < 1ms",
                     Path(tmp) / "m", args.resolution)
        cap = doc["capacity_ops_s"]
        print(f"\nclosed-loop maximum {doc['closed_loop_max_ops_s']:,.0f} ops/s; capacity at "
              f"p99 < 1 ms {fmt(cap)} ops/s (95% CI {fmt(doc['ci_low'])}-"
              f"{fmt(doc['ci_high'])}); {doc['stopped']}")


if __name__ == "__main__":
    main()
