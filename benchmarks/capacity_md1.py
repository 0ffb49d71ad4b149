"""The capacity search against a known answer, and on a real memcached.

1. examples/queueserver.py (one FIFO worker, fixed service time S) under Poisson
   arrivals is an M/D/1 queue. `harness run --search "p99 < 10S"` on it is compared with
   theory: the rate at which the M/D/1 sojourn time's p99 reaches 10 S (Lindley's
   recursion, 400,000 arrivals per rate), for the nominal S and for the S the server
   really takes (1 / its closed-loop maximum: the protocol and the Python event loop add
   to the service), and each step's measured p99 with its 95% interval beside theory's.
2. memcached (1 thread): the search at each SLO of `--mc-slo` (p99 < 1 ms and < 200 us)
   beside the closed-loop maximum of the same server, with every step.
3. With `--mutilate PATH` (a mutilate you built yourself from its public repository;
   nothing here builds it): `mutilate --search 99:X` at the same SLOs on a memcached
   started the same way (1 thread, 16 connections, 16-byte keys, 100-byte values, 10%
   sets, 10,000 keys, Poisson arrivals, steps as long as ours), side by side.

    .venv/bin/python benchmarks/capacity_md1.py [--service-ms 2] [--reps 3]
        [--duration 3] [--skip-queue] [--skip-memcached] [--mutilate PATH]

Prints tables; takes about 5 minutes on 2 cores, 15 with memcached. Loopback only.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.run import capacity  # noqa: E402

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def mutilate_search(binary: str, slo_us: float, duration: float) -> dict:
    """`mutilate --search 99:slo_us` on a fresh 1-thread memcached; its steps and result.

    mutilate (mutilate.cc) first runs at full speed (each connection one request at a
    time): if that run's p99 of gets is under the SLO it stops there; otherwise it
    bisects the rate between 1 and the peak to 2%, then lowers it 2% at a time while the
    p99 is over, and prints the last step's statistics."""
    port = free_port()
    server = subprocess.Popen([shutil.which("memcached") or "memcached", "-u", "nobody",
                               "-l", "127.0.0.1", "-p", str(port), "-t", "1"])
    try:
        time.sleep(0.5)
        common = [binary, "-s", f"127.0.0.1:{port}", "-T", "1", "-c", "16", "-K", "16",
                  "-V", "100", "-u", "0.1", "-r", "10000"]
        subprocess.run([*common, "--loadonly"], check=True, capture_output=True)
        out = subprocess.run([*common, "--noload", "-t", f"{duration:g}",
                              "--search", f"99:{slo_us:g}"],
                             check=True, capture_output=True, text=True)
    finally:
        server.terminate()
        server.wait(10)
    text = out.stdout + out.stderr
    steps = [(float(q), float(n)) for q, n in
             re.findall(r"cur_qps = (\d+), get_qps = [\d.]+, nth = ([\d.]+)", text)]
    peak = re.search(r"peak qps = (\d+), nth = ([\d.]+)", text)
    total = re.search(r"Total QPS = ([\d.]+)", text)
    p99 = re.search(r"^read\s+(?:[\d.]+\s+){7}([\d.]+)", text, re.M)
    return {"peak_qps": float(peak.group(1)) if peak else None,
            "peak_p99_us": float(peak.group(2)) if peak else None,
            "steps": steps, "qps": float(total.group(1)) if total else None,
            "p99_us": float(p99.group(1)) if p99 else None}


def print_steps(doc: dict) -> None:
    print("\n| offered ops/s | achieved | p99 ms [95% CI] | met |")
    print("|---|---|---|---|")
    for st in doc["steps"][1:]:
        lo, hi = st["p99_ci"]
        print(f"| {st['rate_ops_s']:,} | {st['achieved_ops_s']:,.0f} | "
              f"{fmt(st['p99_ms'])} [{fmt(lo)}, {fmt(hi)}] | {st['met']} |")


def fmt(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.3g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--service-ms", type=float, default=2.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--resolution", type=float, default=0.05)
    ap.add_argument("--skip-queue", action="store_true")
    ap.add_argument("--skip-memcached", action="store_true")
    ap.add_argument("--mc-slo", type=lambda t: [float(x) for x in t.split(",")],
                    default=[1000.0, 200.0], help="memcached SLOs, p99 under these us")
    ap.add_argument("--mutilate", help="a mutilate binary to run beside (not built here)")
    args = ap.parse_args()
    s = args.service_ms
    limit = 10 * s
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_queue:
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
        results = []
        for slo_us in args.mc_slo:
            print(f"\n2. memcached, 1 thread, SLO p99 < {slo_us:g} us, {args.reps} runs of "
                  f"{args.duration:g} s per step")
            doc = search(MEMCACHED.format(reps=args.reps, duration=args.duration),
                         f"p99 < {slo_us:g}us", Path(tmp) / f"m{slo_us:g}", args.resolution)
            print_steps(doc)
            cap = doc["capacity_ops_s"]
            print(f"\nclosed-loop maximum {doc['closed_loop_max_ops_s']:,.0f} ops/s; capacity "
                  f"at p99 < {slo_us:g} us {fmt(cap)} ops/s (95% CI {fmt(doc['ci_low'])}-"
                  f"{fmt(doc['ci_high'])}); {doc['stopped']}")
            mut = None
            if args.mutilate:
                mut = mutilate_search(args.mutilate, slo_us, args.duration)
                print(f"\n3. mutilate --search 99:{slo_us:g}: peak {fmt(mut['peak_qps'])} "
                      f"ops/s (p99 {fmt(mut['peak_p99_us'])} us), steps (rate, p99 us) "
                      f"{[(int(q), round(n)) for q, n in mut['steps']]}; "
                      f"result {fmt(mut['qps'])} ops/s at p99 {fmt(mut['p99_us'])} us")
            results.append((slo_us, doc, mut))
        print("\n| SLO | kit closed-loop max | kit capacity [95% CI] | mutilate peak "
              "(its p99) | mutilate result (its p99) |")
        print("|---|---|---|---|---|")
        for slo_us, doc, mut in results:
            m = mut or {}
            print(f"| p99 < {slo_us:g} us | {doc['closed_loop_max_ops_s']:,.0f} | "
                  f"{fmt(doc['capacity_ops_s'])} [{fmt(doc['ci_low'])}, {fmt(doc['ci_high'])}]"
                  f" | {fmt(m.get('peak_qps'))} ({fmt(m.get('peak_p99_us'))} us) | "
                  f"{fmt(m.get('qps'))} ({fmt(m.get('p99_us'))} us) |")

if __name__ == "__main__":
    main()
