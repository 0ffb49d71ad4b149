"""Can one harness client process keep up with redis-benchmark? Harness vs redis-benchmark.

Starts one local redis-server (no persistence, one I/O thread) pinned to CPU 0 through
the launcher and, in one run and alternating, drives it with the harness's timed loop
(`ClientRun`, workload `redis_mix` as a pure GET or pure SET load, uvloop, in this
process, pinned to CPU 1) and with `redis-benchmark` (pinned to CPU 1) at the same
connections C, pipeline depth P (harness: P requests in flight per connection), key
space and value size. Prints median ops/s per tool and the ratio, both tools' latency
percentiles and client CPU time per op, then a latency check (open loop at 50% of the
harness's capacity; redis-benchmark at the same rate if it has --rps, otherwise service
times at equal concurrency, C=1 closed loop), and what recording one op costs. With a
memtier_benchmark on PATH (or `--memtier PATH`; build it yourself from its public
repository, nothing here does), it runs beside them too, on its own keys (it cannot name
the harness's zero-padded ones), loaded before each of its trials so its GETs hit.

    .venv/bin/python benchmarks/loadgen_redis.py --configs 1x1,32x1,32x16 --duration 10

Traffic goes to 127.0.0.1 only. The server is stopped on exit, error and Ctrl-C.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from loadgen_memcached import (
    CLIENT_CPU,
    SERVER_CPU,
    add_pause_option,
    can_pin,
    cpu_seconds,
    harness_variants,
    memtier_totals,
    native_record_cost_ns,
    parse_pauses,
    parse_variant,
    pin_cpus,
    recorder_overhead_ns,
    variant_name,
)
from spilled import CHUNK_RECORDS, Spilled  # this script's directory is first on sys.path

from harness.hosts import LocalHost
from harness.loadgen import ClientConfig, ClientRun, native
from harness.results import MISS, OK
from harness.services import SERVICES
from harness.services.base import Endpoint

WORKLOAD = "redis_mix"
REDIS_BENCHMARK = "/usr/bin/redis-benchmark"
#: Requests of the short redis-benchmark run that sizes each timed one (-n) to --duration.
CALIBRATION_OPS = 20_000


@dataclass(frozen=True)
class Trial:
    tool: str
    connections: int
    pipeline: int
    ops_per_s: float
    #: Client CPU time (user + system) per op: less disturbed by other load than ops/s.
    cpu_us_per_op: float
    p50_us: float | None = None
    p99_us: float | None = None
    errors: int = 0
    misses: int = 0


@dataclass(frozen=True)
class OpenLoop:
    """The harness open loop at a target rate: latency from the intended start, and
    service time (reply - actual send)."""

    target_ops_s: float
    achieved_ops_s: float
    latency_p50_us: float
    latency_p99_us: float
    service_p50_us: float
    service_p99_us: float
    late_share: float  # ops sent more than 1 ms after their intended start
    lag_p50_us: float = 0.0  # send lag: actual send - intended start
    lag_p99_us: float = 0.0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", default="1x1,32x1,32x16",
                   help="comma-separated CxP: C connections, P pipelined requests per "
                        "connection (default 1x1,32x1,32x16)")
    p.add_argument("--test", choices=("get", "set"), default="get",
                   help="redis-benchmark -t get or -t set; the harness runs the same "
                        "pure load (default get)")
    p.add_argument("--duration", type=float, default=10.0,
                   help="seconds per trial (redis-benchmark: -n sized to it; default 10)")
    p.add_argument("--repeats", type=int, default=3,
                   help="trials per tool and config, alternating (default 3)")
    p.add_argument("--key-space", type=int, default=10000,
                   help="distinct keys, redis-benchmark -r (default 10000)")
    p.add_argument("--value-size", type=int, default=100,
                   help="value bytes, redis-benchmark -d (default 100)")
    p.add_argument("--bench-threads", type=int, default=1,
                   help="redis-benchmark --threads (default 1; 0 leaves the flag out)")
    p.add_argument("--latency-duration", type=float, default=None,
                   help="seconds of each latency-check trial (default: --duration)")
    p.add_argument("--no-latency-check", action="store_true", help="skip the latency check")
    p.add_argument("--open-inflight", type=int, default=16,
                   help="requests each connection may have in flight in the open-loop "
                        "check (default 16: an op due while its connection is busy is "
                        "pipelined, so the send lag is the pacer's, not a wait for a "
                        "free connection; 1 shows that wait too)")
    p.add_argument("--memtier", default=shutil.which("memtier_benchmark"),
                   help="a memtier_benchmark binary to run beside (default: the one on "
                        "PATH, if any; built by you from RedisLabs/memtier_benchmark)")
    p.add_argument("--redis-benchmark", default=REDIS_BENCHMARK,
                   help=f"redis-benchmark binary ({REDIS_BENCHMARK})")
    p.add_argument("--no-pin", action="store_true", help="do not pin server and clients")
    p.add_argument("--tls", action="store_true",
                   help="Redis serves TLS only (a throwaway CA); every tool speaks TLS to "
                        "it: the harness (its native core through OpenSSL), redis-benchmark "
                        "--tls and memtier_benchmark --tls")
    p.add_argument("--engines", default="native,python",
                   help="harness engines to run side by side (default native,python)")
    add_pause_option(p)
    args = p.parse_args(argv)
    args.pause_us = parse_pauses(p, args.pause_us)
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    args.variants = harness_variants(args.engines, args.pause_us)
    if not args.engines or set(args.engines) - set(native.ENGINES):
        p.error(f"--engines takes {', '.join(native.ENGINES)}")
    if "native" in args.engines and not native.built():
        p.error("the native core is not built (pip install -e . with a C compiler), "
                "or pass --engines python")
    try:
        args.configs = [tuple(int(x) for x in c.lower().split("x"))
                        for c in args.configs.split(",") if c.strip()]
    except ValueError:
        p.error("--configs takes CxP pairs, e.g. 1x1,32x16")
    if not args.configs or any(len(c) != 2 or min(c) < 1 for c in args.configs):
        p.error("--configs takes CxP pairs of positive integers, e.g. 1x1,32x16")
    if args.repeats < 1 or args.duration <= 0:
        p.error("--repeats and --duration must be positive")
    if args.latency_duration is None:
        args.latency_duration = args.duration
    return args


# -- the harness side --------------------------------------------------------------------

def workload_params(args: argparse.Namespace) -> dict[str, Any]:
    # 16-byte keys are redis-benchmark's `key:<12 digits>`: both tools use the same keys.
    return {"get_ratio": 1.0 if args.test == "get" else 0.0, "key_space": args.key_space,
            "key_size_bytes": 16, "value_size_bytes": args.value_size}


def _harness_run(endpoint: Endpoint, params: dict[str, Any], connections: int,
                 pipeline: int, duration_s: float, rate_ops_s: float | None = None,
                 engine: str = "native", pause_us: float = 0.0) -> tuple[Any, float, float]:
    """One client process's timed loop in this process on uvloop, every op recorded and
    written to disk as a worker does (`spilled`): (the records, wall seconds of the
    loop, CPU seconds of this process meanwhile, the spill thread's included)."""
    import uvloop

    from harness.workloads import WORKLOADS

    os.environ[native.ENV] = engine

    workload = WORKLOADS.get(WORKLOAD)
    cfg = ClientConfig(workload=WORKLOAD, params=params,
                       endpoints={"redis": endpoint.to_dict()}, client_id=0,
                       connections=connections, inflight=pipeline, duration_s=duration_s,
                       rate_ops_s=rate_ops_s, pause_us=pause_us)

    async def go() -> tuple[ClientRun, float, float]:
        # Reload the key space, so every GET hits even after redis-benchmark's SETs.
        await workload.prepare(cfg.endpoint_objects(), params)
        run = ClientRun(cfg, workload.client(cfg.endpoint_objects(), params, 0),
                        chunk_records=CHUNK_RECORDS)
        spilled = held["spilled"] = Spilled(run, workload.ops)
        await run.connect_all()
        cpu0 = cpu_seconds(resource.RUSAGE_SELF)
        await run.run()
        elapsed_s = (time.perf_counter_ns() - run.base_ns) / 1e9
        spilled.close()
        return run, elapsed_s, cpu_seconds(resource.RUSAGE_SELF) - cpu0

    held: dict[str, Spilled] = {}
    try:
        run, elapsed_s, cpu_s = uvloop.run(go())
        if run.engine != engine:
            raise SystemExit(f"asked for the {engine} engine, {run.engine} ran")
        return held["spilled"].records(), elapsed_s, cpu_s
    finally:
        if "spilled" in held:
            held["spilled"].remove()


def _pct(values_ns: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values_ns, q)) / 1e3 if values_ns.size else None


def harness_trial(endpoint: Endpoint, params: dict[str, Any], connections: int,
                  pipeline: int, duration_s: float, engine: str = "native",
                  pause_us: float = 0.0) -> Trial:
    ops, elapsed_s, cpu_s = _harness_run(endpoint, params, connections, pipeline, duration_s,
                                         engine=engine, pause_us=pause_us)
    done = (ops.status == OK) | (ops.status == MISS)
    lat = ops.latency_ns[done]
    return Trial("harness/" + variant_name(engine, False, pause_us), connections, pipeline,
                 int(done.sum()) / elapsed_s,
                 cpu_s * 1e6 / max(len(ops), 1), _pct(lat, 50), _pct(lat, 99),
                 errors=int((~done).sum()), misses=int((ops.status == MISS).sum()))


def harness_open_loop(endpoint: Endpoint, params: dict[str, Any], connections: int,
                      inflight: int, rate_ops_s: float, duration_s: float,
                      engine: str) -> OpenLoop:
    ops, elapsed_s, _ = _harness_run(endpoint, params, connections, inflight, duration_s,
                                     rate_ops_s, engine)
    done = (ops.status == OK) | (ops.status == MISS)
    lat = ops.latency_ns[done]
    service = (ops.latency_ns - (ops.start_ns - ops.intended_ns))[done]
    lag = ops.start_ns - ops.intended_ns
    return OpenLoop(rate_ops_s, int(done.sum()) / elapsed_s,
                    _pct(lat, 50) or 0.0, _pct(lat, 99) or 0.0,
                    _pct(service, 50) or 0.0, _pct(service, 99) or 0.0,
                    float((lag > 1_000_000).mean()) if lag.size else 0.0,
                    _pct(lag, 50) or 0.0, _pct(lag, 99) or 0.0)


# -- the redis-benchmark side ------------------------------------------------------------

def has_rps(binary: str) -> bool:
    """Whether this redis-benchmark can hold a target rate (`--rps`, Redis 7.2+)."""
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    return "--rps" in out.stdout + out.stderr


def redis_benchmark(args: argparse.Namespace, port: int, connections: int, pipeline: int,
                    requests: int, pin: bool, extra: Sequence[str] = ()) -> Trial:
    argv = [args.redis_benchmark, "-h", "127.0.0.1", "-p", str(port), "-c", str(connections),
            "-P", str(pipeline), "-n", str(requests), "-t", args.test,
            "-d", str(args.value_size), "-r", str(args.key_space), "--csv", *extra,
            *(["-a", args.password] if getattr(args, "password", None) else []),
            *(["--tls", "--cacert", args.ca_file] if getattr(args, "ca_file", None) else [])]
    if args.bench_threads:
        argv += ["--threads", str(args.bench_threads)]
    if pin:
        argv = ["taskset", "-c", str(CLIENT_CPU), *argv]
    cpu0 = cpu_seconds(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, capture_output=True, text=True,
                          timeout=max(60.0, 10 * args.duration + 60))
    cpu_s = cpu_seconds(resource.RUSAGE_CHILDREN) - cpu0  # taskset execs: one process
    row = _csv_row(proc.stdout)
    if proc.returncode != 0 or row is None:
        raise RuntimeError(f"redis-benchmark failed (exit {proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return Trial("redis-benchmark", connections, pipeline, float(row["rps"]),
                 cpu_s * 1e6 / requests, float(row["p50_latency_ms"]) * 1e3,
                 float(row["p99_latency_ms"]) * 1e3)


def memtier(args: argparse.Namespace, port: int, connections: int, pipeline: int,
            pin: bool) -> Trial:
    """memtier_benchmark, one thread, `connections` clients x `pipeline`, for --duration
    seconds of the same test over its own keys (loaded by `memtier_load`: memtier cannot
    name the harness's zero-padded keys), values --value-size bytes."""
    ratio = "0:1" if args.test == "get" else "1:0"
    argv = [args.memtier, "-s", "127.0.0.1", "-p", str(port), "--protocol=redis", "-t", "1",
            "-c", str(connections), f"--pipeline={pipeline}", f"--ratio={ratio}",
            "--key-pattern=R:R", "--key-minimum=1", f"--key-maximum={args.key_space}",
            "-d", str(args.value_size), f"--test-time={max(1, round(args.duration))}",
            "--hide-histogram", "--print-percentiles=50,99", *_memtier_auth(args)]
    if pin:
        argv = ["taskset", "-c", str(CLIENT_CPU), *argv]
    cpu0 = cpu_seconds(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, capture_output=True, text=True,
                          timeout=max(60.0, 10 * args.duration + 60))
    cpu_s = cpu_seconds(resource.RUSAGE_CHILDREN) - cpu0
    ops_s, misses_s, p50_us, p99_us = memtier_totals(proc)
    ops = ops_s * max(1, round(args.duration))
    return Trial("memtier", connections, pipeline, ops_s, cpu_s * 1e6 / ops, p50_us, p99_us,
                 misses=round(misses_s * max(1, round(args.duration))))


def memtier_load(args: argparse.Namespace, port: int) -> None:
    """Every memtier key, once, with --value-size bytes (so its gets hit, as ours do)."""
    subprocess.run([args.memtier, "-s", "127.0.0.1", "-p", str(port), "--protocol=redis",
                    "-t", "1", "-c", "1", "--ratio=1:0", "--key-pattern=P:P",
                    "--key-minimum=1", f"--key-maximum={args.key_space}",
                    "-d", str(args.value_size), f"--requests={args.key_space}",
                    "--hide-histogram", *_memtier_auth(args)], capture_output=True,
                   check=True, timeout=300)


def _memtier_auth(args: argparse.Namespace) -> list[str]:
    """The kit's Redis requires its random password: the peer tools send it too (on
    their command line, as they only can; a throwaway password on loopback); and with
    --tls, TLS with the server's CA."""
    password = getattr(args, "password", None)
    ca = getattr(args, "ca_file", None)
    return ([f"--authenticate={password}"] if password else []) + (
        ["--tls", f"--cacert={ca}"] if ca else [])


def _csv_row(stdout: str) -> dict[str, str] | None:
    """The one test's row of `--csv` output: test, rps, avg/min/p50/p95/p99/max (ms)."""
    rows = [r for r in csv.DictReader(io.StringIO(stdout)) if r.get("rps")]
    return rows[-1] if rows else None


def bench_requests(args: argparse.Namespace, port: int, connections: int, pipeline: int,
                   pin: bool) -> int:
    """-n for about --duration seconds, from a short run at the same C and P."""
    calib = redis_benchmark(args, port, connections, pipeline,
                            max(CALIBRATION_OPS, 100 * connections * pipeline), pin)
    return max(1000, int(calib.ops_per_s * args.duration))


# -- orchestration -----------------------------------------------------------------------

def _med(ts: Sequence[Any], attr: str) -> float | None:
    vals = [getattr(t, attr) for t in ts if getattr(t, attr) is not None]
    return statistics.median(vals) if vals else None


def _cell(v: float | None, fmt: str) -> str:
    return "" if v is None else format(v, fmt)


def print_table(trials: list[Trial], configs: list[tuple[int, int]], repeats: int,
                engines: list[str]) -> None:
    def pick(tool: str, c: int, p: int) -> list[Trial]:
        return [t for t in trials if (t.tool, t.connections, t.pipeline) == (tool, c, p)]

    tools = [f"harness/{e}" for e in engines]
    print(f"\nmedians of {repeats} trial(s) per row; ratio = harness median / "
          "redis-benchmark median")
    print(f"{'conns':>5} {'P':>3}  {'tool':<24} {'ops/s':>10}  {'ratio':>5}  "
          f"{'CPU us/op':>9}  {'p50 us':>8}  {'p99 us':>8}  {'misses':>6}  {'errors':>6}")
    for c, p in configs:
        r = pick("redis-benchmark", c, p)
        r_ops = _med(r, "ops_per_s")
        for tool in (*tools, "redis-benchmark", "memtier"):
            ts = pick(tool, c, p)
            if not ts:
                continue
            t_ops = _med(ts, "ops_per_s")
            ratio = t_ops / r_ops if tool != "redis-benchmark" and t_ops and r_ops else None
            print(f"{c:>5} {p:>3}  {tool:<24} {_cell(t_ops, ',.0f'):>10}  "
                  f"{_cell(ratio, '.2f'):>5}  {_cell(_med(ts, 'cpu_us_per_op'), '.2f'):>9}  "
                  f"{_cell(_med(ts, 'p50_us'), '.1f'):>8}  {_cell(_med(ts, 'p99_us'), '.1f'):>8}"
                  f"  {sum(t.misses for t in ts):>6}  {sum(t.errors for t in ts):>6}")
        # Trials of one repeat ran back to back: their ratio is less exposed to drift.
        for tool in tools:
            paired = [a.ops_per_s / b.ops_per_s for a, b in zip(pick(tool, c, p), r,
                                                                  strict=False)]
            if paired:
                print(f"{'':>11}{tool} per-repeat ratios: "
                      f"{', '.join(f'{x:.2f}' for x in paired)}")
            m = pick("memtier", c, p)
            if m:
                ratios = [a.ops_per_s / b.ops_per_s for a, b in zip(pick(tool, c, p), m,
                                                                      strict=False)]
                cpu = [a.cpu_us_per_op / b.cpu_us_per_op for a, b in zip(pick(tool, c, p), m,
                                                                         strict=False)]
                print(f"{'':>11}{tool} / memtier: ops/s median "
                      f"{statistics.median(ratios):.2f} (per repeat "
                      f"{', '.join(f'{x:.2f}' for x in ratios)}), CPU per op median "
                      f"{statistics.median(cpu):.2f}")


def latency_check(args: argparse.Namespace, endpoint: Endpoint, params: dict[str, Any],
                  trials: list[Trial], pin: bool, log: Callable[[str], None]) -> list[str]:
    """Open loop at half the harness's closed-loop capacity at C=32, and the comparison
    with redis-benchmark: at the same rate if it has --rps, else at equal concurrency."""
    c = 32
    lines: list[str] = []
    runs: list[OpenLoop] = []
    for engine in args.engines:
        tool = f"harness/{engine}"
        cap_trials = [t for t in trials if (t.tool, t.connections, t.pipeline) == (tool, c, 1)]
        if not cap_trials:  # C=32 P=1 was not in --configs: measure it now
            cap_trials = [harness_trial(endpoint, params, c, 1, args.latency_duration, engine)]
        capacity = statistics.median(t.ops_per_s for t in cap_trials)
        rate = 0.5 * capacity
        lines.append(f"\nlatency check, {tool}: closed-loop capacity at C={c} P=1: "
                     f"{capacity:,.0f} ops/s; open loop at 50% = {rate:,.0f} ops/s, "
                     f"{args.open_inflight} in flight per connection at most")
        runs = []
        for rep in range(args.repeats):
            ol = harness_open_loop(endpoint, params, c, args.open_inflight, rate,
                                   args.latency_duration, engine)
            runs.append(ol)
            log(f"  repeat {rep + 1}  {tool} open loop {rate:,.0f} ops/s: achieved "
                f"{ol.achieved_ops_s:,.0f}, latency p50 {ol.latency_p50_us:.1f} us, "
                f"send lag p99 {ol.lag_p99_us:.1f} us")
        lines.append(f"  {tool} open loop (median of {len(runs)}): achieved "
                     f"{_med(runs, 'achieved_ops_s'):,.0f} ops/s; latency from intended start "
                     f"p50 {_med(runs, 'latency_p50_us'):.1f} us, p99 "
                     f"{_med(runs, 'latency_p99_us'):.1f} us; service time p50 "
                     f"{_med(runs, 'service_p50_us'):.1f} us, p99 "
                     f"{_med(runs, 'service_p99_us'):.1f} us")
        lines.append(f"    send lag (send - intended) p50 {_med(runs, 'lag_p50_us'):.1f} us, "
                     f"p99 {_med(runs, 'lag_p99_us'):.1f} us (per repeat: "
                     f"{', '.join(f'{r.lag_p99_us:.1f}' for r in runs)}); sent >1 ms late: "
                     f"{100 * (_med(runs, 'late_share') or 0):.2f}%")
        if engine == args.engines[0]:
            first_runs, first_rate = runs, rate
    runs, rate = first_runs, first_rate
    if has_rps(args.redis_benchmark):
        total = max(1, round(rate))  # --rps limits the total rate of all connections
        rb = [redis_benchmark(args, endpoint.port, c, 1, int(rate * args.latency_duration),
                              pin, ["--rps", str(total)]) for _ in range(args.repeats)]
        lines.append(f"  redis-benchmark --rps {total} (median of {len(rb)}): "
                     f"{_med(rb, 'ops_per_s'):,.0f} ops/s; p50 {_med(rb, 'p50_us'):.1f} us, "
                     f"p99 {_med(rb, 'p99_us'):.1f} us")
        lines += _ratios(_med(runs, "latency_p50_us"), _med(runs, "latency_p99_us"),
                         _med(rb, "p50_us"), _med(rb, "p99_us"), "harness open loop")
        return lines
    # No --rps (before Redis 7.2): service times at equal concurrency, one connection and
    # one request at a time, where neither tool's queueing is in the figures.
    lines.append("  this redis-benchmark has no --rps: comparing service times at equal "
                 "concurrency (C=1, P=1, closed loop) instead")
    h1 = [t for t in trials
          if (t.tool, t.connections, t.pipeline) == (f"harness/{args.engines[0]}", 1, 1)]
    r1 = [t for t in trials if (t.tool, t.connections, t.pipeline) == ("redis-benchmark", 1, 1)]
    if not h1 or not r1:
        n = bench_requests(args, endpoint.port, 1, 1, pin)
        for _ in range(args.repeats):
            h1.append(harness_trial(endpoint, params, 1, 1, args.latency_duration,
                                    args.engines[0]))
            r1.append(redis_benchmark(args, endpoint.port, 1, 1, n, pin))
    for tool, ts in ((f"harness/{args.engines[0]}", h1), ("redis-benchmark", r1)):
        lines.append(f"  {tool:<24} C=1 closed loop (median of {len(ts)}): "
                     f"{_med(ts, 'ops_per_s'):,.0f} ops/s; p50 {_med(ts, 'p50_us'):.1f} us, "
                     f"p99 {_med(ts, 'p99_us'):.1f} us")
    lines += _ratios(_med(h1, "p50_us"), _med(h1, "p99_us"), _med(r1, "p50_us"),
                     _med(r1, "p99_us"), "harness C=1")
    return lines


def _ratios(h50: float | None, h99: float | None, r50: float | None, r99: float | None,
            what: str) -> list[str]:
    if not (h50 and h99 and r50 and r99):
        return ["  (no ratio: a percentile is missing)"]
    return [f"  ratio {what} / redis-benchmark: p50 {h50 / r50:.2f}, p99 {h99 / r99:.2f}"]


def run_benchmark(args: argparse.Namespace,
                  log: Callable[[str], None]) -> tuple[list[Trial], list[str]]:
    pin = not args.no_pin and can_pin()
    if not args.no_pin and not pin:
        log(f"warning: CPUs {SERVER_CPU} and {CLIENT_CPU} not both available (or no "
            "taskset): running unpinned")
    if shutil.which(args.redis_benchmark) is None:
        raise SystemExit(f"{args.redis_benchmark} not found: apt-get install redis-tools")
    params = workload_params(args)
    trials: list[Trial] = []
    latency: list[str] = []
    svc = None
    try:
        with LocalHost() as host:
            svc = SERVICES.get("redis").start(host, "bench-redis", {
                "save": "", "appendonly": False, "io_threads": 1, "tls": args.tls})
            if svc.endpoint.tls is not None:  # the peer tools read the CA from a file
                fd, args.ca_file = tempfile.mkstemp(prefix="bench-ca-", suffix=".pem")
                os.close(fd)
                Path(args.ca_file).write_text(str(svc.endpoint.tls.ca_pem))
            if pin:
                pin_cpus(svc.processes[0].pid, SERVER_CPU)
                os.sched_setaffinity(0, {CLIENT_CPU})
            args.password = svc.endpoint.auth.password if svc.endpoint.auth else None
            log(f"redis {svc.version} on 127.0.0.1:{svc.endpoint.port}"
                f"{' (TLS only)' if args.tls else ''}"
                f"{f' (CPU {SERVER_CPU}; clients on CPU {CLIENT_CPU})' if pin else ''}")
            # redis-benchmark stops after -n requests: size -n to --duration per config.
            requests = {}
            for c, p in args.configs:
                requests[c, p] = bench_requests(args, svc.endpoint.port, c, p, pin)
                log(f"  redis-benchmark -c {c} -P {p}: -n {requests[c, p]:,}")
            for rep in range(args.repeats):
                for c, p in args.configs:
                    # Alternate the order so neither tool always runs second.
                    tools = [*(f"harness/{v}" for v in args.variants), "redis-benchmark",
                             *(("memtier",) if args.memtier else ())]
                    order = tools if rep % 2 == 0 else tools[::-1]
                    for tool in order:
                        if tool == "memtier":
                            memtier_load(args, svc.endpoint.port)
                            t = memtier(args, svc.endpoint.port, c, p, pin)
                        elif tool != "redis-benchmark":
                            engine, _, pause = parse_variant(tool.split("/")[1])
                            t = harness_trial(svc.endpoint, params, c, p, args.duration,
                                              engine, pause)
                        else:
                            t = redis_benchmark(args, svc.endpoint.port, c, p,
                                                requests[c, p], pin)
                        trials.append(t)
                        log(f"  repeat {rep + 1}  C {c:>3} P {p:>2}  {tool:<24} "
                            f"{t.ops_per_s:>11,.0f} ops/s  {t.cpu_us_per_op:6.2f} CPU us/op")
            if not args.no_latency_check:
                latency = latency_check(args, svc.endpoint, params, trials, pin, log)
    finally:
        if svc is not None:
            svc.stop()
    return trials, latency


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # unwinds through the same cleanup as Ctrl-C

    signal.signal(signal.SIGTERM, on_term)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        trials, latency = run_benchmark(args, log)
    except KeyboardInterrupt:
        log("interrupted: server stopped")
        return 130
    print_table(trials, args.configs, args.repeats, args.variants)
    for line in latency:
        print(line)
    print("\nrecorder overhead per op (2 clock reads + the record block), thread CPU time:")
    print(f"  python: {recorder_overhead_ns():.0f} ns")
    if native.built():
        print(f"  native: {native_record_cost_ns():.0f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
