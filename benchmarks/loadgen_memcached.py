"""Can one harness client process keep up with a C load generator? Harness vs memcaslap.

Starts one local memcached (1 thread, pinned to CPU 0) through the launcher and, in one
run and alternating, drives it with the harness's timed loop (`ClientRun`, workload
`memcache_mix`, uvloop, in this process, pinned to CPU 1) and with `memcaslap` (pinned
to CPU 1) at the same number of connections, key size, value size and get/set mix.
Prints median ops/s per tool and the ratio, the harness's latency percentiles, and what
recording one op costs the harness (clock reads and array stores).

    .venv/bin/python benchmarks/loadgen_memcached.py --connections 1,32 --duration 10

Traffic goes to 127.0.0.1 only. The server is stopped on exit, error and Ctrl-C.
"""

from __future__ import annotations

import argparse
import math
import os
import re
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
from spilled import CHUNK_RECORDS, Spilled  # this script's directory is first on sys.path

from harness.hosts import LocalHost
from harness.loadgen import ClientConfig, ClientRun, Recorder, native
from harness.results import MISS, OK, outcome
from harness.services import SERVICES
from harness.services.base import Endpoint

SERVER_CPU, CLIENT_CPU = 0, 1
WORKLOAD = "memcache_mix"
MEMCASLAP = "/usr/bin/memcaslap"
#: memcaslap's summary line, e.g. "Run time: 5.0s Ops: 255751 TPS: 85220 Net_rate: 12.8M/s"
SUMMARY_RE = re.compile(r"Run time: ([\d.]+)s Ops: (\d+) TPS: (\d+)")


@dataclass(frozen=True)
class Trial:
    tool: str
    connections: int
    ops_per_s: float
    #: Client CPU time (user + system) per op: less disturbed by other load than ops/s.
    cpu_us_per_op: float
    #: Its user-space part: what the tool itself costs beyond the system calls.
    user_us_per_op: float = 0.0
    p50_us: float | None = None
    p99_us: float | None = None
    errors: int = 0
    misses: int = 0
    #: Live numbers on: thread CPU ms the sampler took per tick (`harness.loadgen.live`).
    live_ms_per_tick: float | None = None


def add_pause_option(p: argparse.ArgumentParser) -> None:
    """--pause-us, as this script and loadgen_redis.py take it."""
    p.add_argument("--pause-us", default="0",
                   help="comma-separated clients.pause_us values for the native engine: each "
                        "non-zero one is a row of its own, harness/native+pauseN (default 0)")


def parse_pauses(p: argparse.ArgumentParser, text: str) -> list[float]:
    """--pause-us's microseconds, sorted and distinct; a bad value is a usage error."""
    try:
        pauses = sorted({float(v) for v in text.split(",") if v.strip()})
    except ValueError:
        p.error("--pause-us takes comma-separated numbers of microseconds")
    if not pauses or min(pauses) < 0:
        p.error("--pause-us needs numbers of microseconds, 0 or more")
    return pauses


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--connections", default="1,32",
                   help="comma-separated connection counts (default 1,32)")
    # Whole seconds: memcaslap's --time takes an integer.
    p.add_argument("--duration", type=int, default=10, help="seconds per trial (default 10)")
    p.add_argument("--repeats", type=int, default=3,
                   help="trials per tool and connection count, alternating (default 3)")
    p.add_argument("--get-ratio", type=float, default=0.9, help="share of gets (default 0.9)")
    p.add_argument("--key-space", type=int, default=10000, help="distinct keys (default 10000)")
    p.add_argument("--key-size", type=int, default=16, help="key bytes (default 16)")
    p.add_argument("--value-size", type=int, default=100, help="value bytes (default 100)")
    p.add_argument("--memcaslap", default=MEMCASLAP, help=f"memcaslap binary ({MEMCASLAP})")
    p.add_argument("--no-pin", action="store_true", help="do not pin server and clients")
    p.add_argument("--live", action="store_true",
                   help="also run each engine with live numbers on (harness.loadgen.live), "
                        "alternating with them off, and compare")
    p.add_argument("--skip-memcaslap", action="store_true", help="harness trials only")
    p.add_argument("--inflight", type=int, default=1,
                   help="requests in flight per connection (pipelined) for the harness and "
                        "memtier_benchmark (default 1; memcaslap cannot: it is left out above 1)")
    p.add_argument("--memtier", default=shutil.which("memtier_benchmark"),
                   help="a memtier_benchmark binary to run beside (default: the one on PATH, "
                        "if any; built by hand from RedisLabs/memtier_benchmark)")
    add_pause_option(p)
    p.add_argument("--engines", default="native,python",
                   help="harness engines to run side by side (default native,python; "
                        "see harness.loadgen.native)")
    args = p.parse_args(argv)
    args.connections = [int(c) for c in args.connections.split(",") if c.strip()]
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if not args.engines or set(args.engines) - set(native.ENGINES):
        p.error(f"--engines takes {', '.join(native.ENGINES)}")
    if "native" in args.engines and not native.built():
        p.error("the native core is not built (pip install -e . with a C compiler), "
                "or pass --engines python")
    if not args.connections or min(args.connections) < 1:
        p.error("--connections needs positive integers")
    if args.repeats < 1 or args.duration <= 0:
        p.error("--repeats and --duration must be positive")
    if args.inflight < 1:
        p.error("--inflight must be at least 1")
    args.pause_us = parse_pauses(p, args.pause_us)
    if args.inflight > 1:
        args.skip_memcaslap = True
    if args.key_size < 16:
        p.error("--key-size must be at least 16 (memcaslap's minimum)")
    return args


# -- the harness side --------------------------------------------------------------------

def workload_params(args: argparse.Namespace) -> dict[str, Any]:
    return {"get_ratio": args.get_ratio, "key_space": args.key_space,
            "key_size_bytes": args.key_size, "value_size_bytes": args.value_size}


def harness_trial(endpoint: Endpoint, params: dict[str, Any], connections: int,
                  duration_s: float, engine: str = "native", live: bool = False,
                  inflight: int = 1, pause_us: float = 0.0) -> Trial:
    """One client process's timed loop, in this process on uvloop, every op recorded and
    written to disk as a worker does (`spilled`), on `engine` ("native" or "python", as
    KVBENCH_ENGINE selects it); with `live`, the worker's once-a-second sampler runs
    beside it as under `harness run`; `pause_us` is clients.pause_us."""
    import uvloop

    from harness.loadgen.live import Sampler
    from harness.workloads import WORKLOADS

    os.environ[native.ENV] = engine

    workload = WORKLOADS.get(WORKLOAD)
    cfg = ClientConfig(workload=WORKLOAD, params=params,
                       endpoints={"memcached": endpoint.to_dict()}, client_id=0,
                       connections=connections, inflight=inflight, duration_s=duration_s,
                       pause_us=pause_us)

    async def go() -> tuple[ClientRun, float, float]:
        # Reload the key space, in case anything evicted some of it.
        await workload.prepare(cfg.endpoint_objects(), params)
        run = ClientRun(cfg, workload.client(cfg.endpoint_objects(), params, 0),
                        chunk_records=CHUNK_RECORDS)
        spilled = held["spilled"] = Spilled(run, workload.ops)
        await run.connect_all()
        cpu0, user0 = cpu_seconds(resource.RUSAGE_SELF), user_seconds(resource.RUSAGE_SELF)
        sampler = None
        if live:
            sampler = Sampler(run, str(Path(tempfile.gettempdir()) / f"bench-{os.getpid()}.live"))
            sampler.start()
        await run.run()
        elapsed_s = (time.perf_counter_ns() - run.base_ns) / 1e9
        spilled.close()
        if sampler is not None:
            sampler.stop()
            os.unlink(sampler.path)
            tick_ms[0] = sampler.cpu_ns / 1e6 / max(sampler.k, 1)
        cpu_s = cpu_seconds(resource.RUSAGE_SELF) - cpu0
        user[0] = user_seconds(resource.RUSAGE_SELF) - user0
        return run, elapsed_s, cpu_s

    user, tick_ms = [0.0], [0.0]
    held: dict[str, Spilled] = {}
    try:
        run, elapsed_s, cpu_s = uvloop.run(go())
        if run.engine != engine:
            raise SystemExit(f"asked for the {engine} engine, {run.engine} ran")
        ops = held["spilled"].records()
    finally:
        if "spilled" in held:
            held["spilled"].remove()
    done = (ops.status == OK) | (ops.status == MISS)
    lat_us = ops.latency_ns[done] / 1e3
    return Trial(
        "harness/" + variant_name(engine, live, pause_us), connections, int(done.sum()) / elapsed_s,
        cpu_s * 1e6 / max(len(ops), 1), user[0] * 1e6 / max(len(ops), 1),
        float(np.percentile(lat_us, 50)) if lat_us.size else None,
        float(np.percentile(lat_us, 99)) if lat_us.size else None,
        errors=int((~done).sum()), misses=int((ops.status == MISS).sum()),
        live_ms_per_tick=tick_ms[0] if live else None,
    )


# -- the memcaslap side ------------------------------------------------------------------

def user_seconds(who: int) -> float:
    return resource.getrusage(who).ru_utime


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def memcaslap_config(args: argparse.Namespace) -> str:
    """memcaslap's --cfg_cmd file: key and value length ranges, then cmd proportions."""
    return (f"key\n{args.key_size} {args.key_size} 1\n"
            f"value\n{args.value_size} {args.value_size} 1\n"
            f"cmd\n0 {1 - args.get_ratio:.3f}\n1 {args.get_ratio:.3f}\n")


def memcaslap_window_k(key_space: int, connections: int) -> int:
    return max(1, round(key_space / connections / 1024))


def memcaslap_trial(args: argparse.Namespace, port: int, cfg_path: str,
                    connections: int, pin: bool) -> Trial:
    # memcaslap keeps a window of keys per connection, in units of 1024 (its minimum);
    # this makes its total key space about the harness's.
    window_k = memcaslap_window_k(args.key_space, connections)
    argv = [args.memcaslap, f"--servers=127.0.0.1:{port}", "--threads=1",
            f"--concurrency={connections}", f"--time={args.duration}s",
            f"--cfg_cmd={cfg_path}", f"--win_size={window_k}k"]
    if pin:
        argv = ["taskset", "-c", str(CLIENT_CPU), *argv]
    # run() kills memcaslap if we are interrupted while it runs.
    cpu0, user0 = cpu_seconds(resource.RUSAGE_CHILDREN), user_seconds(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=args.duration + 60)
    cpu_s = cpu_seconds(resource.RUSAGE_CHILDREN) - cpu0  # taskset execs memcaslap: one process
    user_s = user_seconds(resource.RUSAGE_CHILDREN) - user0
    match = SUMMARY_RE.search(proc.stdout)
    if proc.returncode != 0 or match is None:
        raise RuntimeError(f"memcaslap failed (exit {proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    misses = re.search(r"get_misses: (\d+)", proc.stdout)
    ops, run_s = int(match.group(2)), float(match.group(1))
    return Trial("memcaslap", connections, ops / run_s, cpu_s * 1e6 / max(ops, 1),
                 user_s * 1e6 / max(ops, 1),
                 misses=int(misses.group(1)) if misses else 0)


# -- the memtier_benchmark side -----------------------------------------------------------

def memtier_argv(args: argparse.Namespace, port: int) -> list[str]:
    """What both memtier runs share: one thread, memcached's text protocol, keys
    1..--key-space with a prefix that makes the longest --key-size bytes, values
    --value-size bytes."""
    prefix = "k" * max(1, args.key_size - len(str(args.key_space)))
    return [args.memtier, "-s", "127.0.0.1", "-p", str(port), "--protocol=memcache_text",
            "-t", "1", f"--key-prefix={prefix}", "--key-minimum=1",
            f"--key-maximum={args.key_space}", "-d", str(args.value_size), "--hide-histogram"]


def memtier_ratio(get_ratio: float) -> str:
    """memtier's --ratio (sets:gets, integers) for a share of gets, in tenths."""
    gets = round(get_ratio * 10)
    sets = 10 - gets
    div = math.gcd(sets, gets) or 1
    return f"{sets // div}:{gets // div}"


def memtier_load(args: argparse.Namespace, port: int) -> None:
    """Every memtier key, once (so its gets hit, as the harness's do after `prepare`)."""
    subprocess.run([*memtier_argv(args, port), "-c", "1", "--ratio=1:0", "--key-pattern=P:P",
                    f"--requests={args.key_space}"], capture_output=True, check=True,
                   timeout=300)


def memtier_trial(args: argparse.Namespace, port: int, connections: int, pin: bool) -> Trial:
    """memtier_benchmark at C connections x --inflight (`--pipeline`), the same mix,
    random keys, for --duration seconds."""
    argv = [*memtier_argv(args, port), "-c", str(connections), f"--pipeline={args.inflight}",
            f"--ratio={memtier_ratio(args.get_ratio)}", "--key-pattern=R:R",
            f"--test-time={args.duration}", "--print-percentiles=50,99"]
    if pin:
        argv = ["taskset", "-c", str(CLIENT_CPU), *argv]
    cpu0, user0 = cpu_seconds(resource.RUSAGE_CHILDREN), user_seconds(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=args.duration + 60)
    cpu_s = cpu_seconds(resource.RUSAGE_CHILDREN) - cpu0
    user_s = user_seconds(resource.RUSAGE_CHILDREN) - user0
    ops_s, misses_s, p50_us, p99_us = memtier_totals(proc)
    ops = ops_s * args.duration
    return Trial("memtier", connections, ops_s, cpu_s * 1e6 / ops, user_s * 1e6 / ops,
                 p50_us, p99_us, misses=round(misses_s * args.duration))


def memtier_totals(proc: subprocess.CompletedProcess) -> tuple[float, float, float, float]:
    """ops/s, misses/s, p50 and p99 (us) from memtier_benchmark's last Totals line."""
    totals = [line.split() for line in proc.stdout.splitlines() if line.startswith("Totals")]
    if proc.returncode != 0 or not totals:
        raise RuntimeError(f"memtier_benchmark failed (exit {proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    # Totals  ops/s  hits/s  misses/s  avg-ms  p50-ms  p99-ms  KB/s
    row = totals[-1]
    return float(row[1]), float(row[3]), float(row[5]) * 1e3, float(row[6]) * 1e3


# -- what recording costs ----------------------------------------------------------------

def recorder_overhead_ns(iterations: int = 200_000, repeats: int = 15) -> float:
    """ns per op that the load generator spends timing and recording an op: the two
    clock reads (before the send, at the reply) and the record block of the reply
    handler (`done` in `loadgen.fastpaths._fast_chain`) as written there: the index, four stores
    through the Recorder's memoryviews (start, end, outcome, seq) and the packing of the
    outcome. Minus an
    empty loop of the same length; timed in thread CPU time, so other processes on the
    CPU do not count; the least of `repeats` runs."""
    rec = Recorder(iterations)
    clock, cpu_clock = time.perf_counter_ns, time.thread_time_ns
    code, tag = outcome(OK, 100), 1

    def recorded() -> int:
        start_v, end_v, outcome_v, _, seq_v = rec.views
        t = cpu_clock()
        for seq in range(iterations):
            t0 = clock()
            t1 = clock()
            i = rec.n
            rec.n = i + 1
            try:
                start_v[i] = t0
            except (IndexError, ValueError):
                i = rec.room(i)
                start_v, end_v, outcome_v, _, seq_v = rec.views
                start_v[i] = t0
            end_v[i] = t1
            outcome_v[i] = code | tag
            seq_v[i] = seq
        return cpu_clock() - t

    def empty() -> int:
        t = cpu_clock()
        for _ in range(iterations):
            pass
        return cpu_clock() - t

    best: list[float] = []
    for fn in (recorded, empty):
        runs = []
        for _ in range(repeats):
            rec.n = 0
            runs.append(fn())
        best.append(min(runs) / iterations)
    return best[0] - best[1]


def native_record_cost_ns(iterations: int = 1_000_000, repeats: int = 15) -> float:
    """The same for the native core: two clock reads and its `record` (the C function
    the loop calls), minus an empty loop, the least of `repeats` runs."""
    from harness.loadgen import _native

    return _native.record_cost_ns(iterations, repeats)


# -- orchestration -----------------------------------------------------------------------

def pin_cpus(pid: int, cpu: int) -> None:
    # -a: every thread (memcached serves from its worker threads, not the main one)
    subprocess.run(["taskset", "-a", "-pc", str(cpu), str(pid)], check=True, capture_output=True)


def can_pin() -> bool:
    cpus = os.sched_getaffinity(0)
    return {SERVER_CPU, CLIENT_CPU} <= cpus and shutil.which("taskset") is not None


def print_table(trials: list[Trial], connections: list[int], repeats: int,
                engines: list[str], inflight: int = 1) -> None:
    def pick(tool: str, c: int) -> list[Trial]:
        return [t for t in trials if t.tool == tool and t.connections == c]

    def med(ts: list[Trial], attr: str) -> float | None:
        vals = [getattr(t, attr) for t in ts if getattr(t, attr) is not None]
        return statistics.median(vals) if vals else None

    def cell(v: float | None, fmt: str) -> str:
        return "" if v is None else format(v, fmt)

    tools = [f"harness/{e}" for e in engines]
    print(f"\nmedians of {repeats} trial(s) per row, {inflight} in flight per connection; "
          "ratio = harness median / memcaslap median")
    print(f"{'conns':>5}  {'tool':<24} {'ops/s':>9}  {'ratio':>5}  {'CPU us/op':>9}  "
          f"{'user us':>7}  {'p50 us':>7}  {'p99 us':>7}  {'misses':>6}  {'errors':>6}")
    for c in connections:
        m = pick("memcaslap", c)
        m_ops = med(m, "ops_per_s")
        for tool in (*tools, "memcaslap", "memtier"):
            ts = pick(tool, c)
            if not ts:
                continue
            t_ops = med(ts, "ops_per_s")
            ratio = t_ops / m_ops if tool != "memcaslap" and t_ops and m_ops else None
            print(f"{c:>5}  {tool:<24} {cell(t_ops, ',.0f'):>9}  "
                  f"{cell(ratio, '.2f'):>5}  {cell(med(ts, 'cpu_us_per_op'), '.1f'):>9}  "
                  f"{cell(med(ts, 'user_us_per_op'), '.2f'):>7}  "
                  f"{cell(med(ts, 'p50_us'), '.1f'):>7}  {cell(med(ts, 'p99_us'), '.1f'):>7}  "
                  f"{sum(t.misses for t in ts):>6}  {sum(t.errors for t in ts):>6}")
        # Trials of one repeat ran back to back: their ratio is less exposed to drift.
        for tool in tools:
            paired = [a.ops_per_s / b.ops_per_s for a, b in zip(pick(tool, c), m, strict=False)]
            cpu = [a.cpu_us_per_op / b.cpu_us_per_op
                   for a, b in zip(pick(tool, c), m, strict=False)]
            if paired:
                print(f"{'':>5}  {tool} per-repeat ratios: ops/s "
                      f"{', '.join(f'{r:.2f}' for r in paired)}; CPU per op "
                      f"{', '.join(f'{r:.2f}' for r in cpu)}")
            mt = pick("memtier", c)
            ours = pick(tool, c)
            if mt and ours:
                ops_r = [a.ops_per_s / b.ops_per_s for a, b in zip(ours, mt, strict=False)]
                cpu_r = [a.cpu_us_per_op / b.cpu_us_per_op
                         for a, b in zip(ours, mt, strict=False)]
                print(f"{'':>5}  {tool} / memtier: ops/s median "
                      f"{statistics.median(ops_r):.2f} (per repeat "
                      f"{', '.join(f'{r:.2f}' for r in ops_r)}), CPU per op median "
                      f"{statistics.median(cpu_r):.2f} (per repeat "
                      f"{', '.join(f'{r:.2f}' for r in cpu_r)})")


def variant_name(engine: str, live: bool = False, pause_us: float = 0.0) -> str:
    """A harness row's name: the engine, +pauseN (clients.pause_us), +live."""
    return engine + (f"+pause{pause_us:g}" if pause_us else "") + ("+live" if live else "")


def parse_variant(name: str) -> tuple[str, bool, float]:
    """(engine, live, pause_us) of a `variant_name`."""
    engine, *tags = name.split("+")
    pause = [float(t.removeprefix("pause")) for t in tags if t.startswith("pause")]
    return engine, "live" in tags, pause[0] if pause else 0.0


def harness_variants(engines: Sequence[str], pauses: Sequence[float],
                     live: bool = False) -> list[str]:
    """The harness rows: each engine (the native one at each pause), and with `live` each
    with live numbers on."""
    return [variant_name(e, on, p) for e in engines
            for p in (pauses if e == "native" else (0.0,))
            for on in ((False, True) if live else (False,))]


def variants(args: argparse.Namespace) -> list[str]:
    """This script's harness rows (--engines, --pause-us, --live)."""
    return harness_variants(args.engines, args.pause_us, args.live)


def print_live(trials: list[Trial], connections: list[int], repeats: int,
               engines: list[str]) -> None:
    """Live numbers on vs off, per engine: medians side by side, their ratio, and the
    per-repeat ratios (the two ran back to back)."""
    print(f"\nlive numbers on vs off: medians of {repeats} trial(s); ratio = on / off")
    print(f"{'conns':>5}  {'engine':<7} {'ops/s off':>10} {'ops/s on':>10} {'ratio':>6}  "
          f"{'CPU us/op off':>13} {'on':>6} {'ratio':>6}  {'sampler ms/tick':>15}")
    for c in connections:
        for e in engines:
            off = [t for t in trials if t.tool == f"harness/{e}" and t.connections == c]
            on = [t for t in trials if t.tool == f"harness/{e}+live" and t.connections == c]
            if not off or not on:
                continue
            ops_off = statistics.median(t.ops_per_s for t in off)
            ops_on = statistics.median(t.ops_per_s for t in on)
            cpu_off = statistics.median(t.cpu_us_per_op for t in off)
            cpu_on = statistics.median(t.cpu_us_per_op for t in on)
            tick = statistics.median(t.live_ms_per_tick or 0.0 for t in on)
            print(f"{c:>5}  {e:<7} {ops_off:>10,.0f} {ops_on:>10,.0f} {ops_on / ops_off:>6.3f}  "
                  f"{cpu_off:>13.2f} {cpu_on:>6.2f} {cpu_on / cpu_off:>6.3f}  {tick:>15.2f}")
            pairs = list(zip(on, off, strict=False))
            ops_r = ", ".join(f"{a.ops_per_s / b.ops_per_s:.3f}" for a, b in pairs)
            cpu_r = ", ".join(f"{a.cpu_us_per_op / b.cpu_us_per_op:.3f}" for a, b in pairs)
            print(f"{'':>5}  {e:<7} per-repeat ratios: ops/s {ops_r}; CPU per op {cpu_r}")


def run_benchmark(args: argparse.Namespace, log: Callable[[str], None]) -> list[Trial]:
    pin = not args.no_pin and can_pin()
    if not args.no_pin and not pin:
        log(f"warning: CPUs {SERVER_CPU} and {CLIENT_CPU} not both available (or no "
            "taskset): running unpinned")
    if not args.skip_memcaslap and shutil.which(args.memcaslap) is None:
        raise SystemExit(f"{args.memcaslap} not found: apt-get install libmemcached-tools")
    params = workload_params(args)
    trials: list[Trial] = []
    tmp = tempfile.mkdtemp(prefix="loadgen-bench-")
    svc = None
    try:
        cfg_path = str(Path(tmp) / "memcaslap.cfg")
        Path(cfg_path).write_text(memcaslap_config(args))
        with LocalHost() as host:
            # Room for both tools' keys, so neither sees evictions.
            svc = SERVICES.get("memcached").start(host, "bench-memcached",
                                                  {"threads": 1, "memory_mb": 1024})
            if pin:
                pin_cpus(svc.processes[0].pid, SERVER_CPU)
                os.sched_setaffinity(0, {CLIENT_CPU})
            log(f"memcached {svc.version} on 127.0.0.1:{svc.endpoint.port}"
                f"{f' (CPU {SERVER_CPU}; clients on CPU {CLIENT_CPU})' if pin else ''}")
            for rep in range(args.repeats):
                for c in args.connections:
                    # Alternate the order so neither tool always runs second.
                    tools = [f"harness/{e}" for e in variants(args)]
                    if not args.skip_memcaslap:
                        tools.append("memcaslap")
                    if args.memtier:
                        tools.append("memtier")
                    order = tools if rep % 2 == 0 else tools[::-1]
                    for tool in order:
                        if tool == "memcaslap":
                            t = memcaslap_trial(args, svc.endpoint.port, cfg_path, c, pin)
                        elif tool == "memtier":
                            memtier_load(args, svc.endpoint.port)
                            t = memtier_trial(args, svc.endpoint.port, c, pin)
                        else:
                            engine, live, pause = parse_variant(tool.split("/")[1])
                            t = harness_trial(svc.endpoint, params, c, args.duration,
                                              engine, live=live, inflight=args.inflight,
                                              pause_us=pause)
                        trials.append(t)
                        log(f"  repeat {rep + 1}  conns {c:>3}  {tool:<24} "
                            f"{t.ops_per_s:>10,.0f} ops/s")
    finally:
        if svc is not None:
            svc.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return trials


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # unwinds through the same cleanup as Ctrl-C

    signal.signal(signal.SIGTERM, on_term)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        trials = run_benchmark(args, log)
    except KeyboardInterrupt:
        log("interrupted: server stopped")
        return 130
    print_table(trials, args.connections, args.repeats, variants(args), args.inflight)
    if args.live:
        print_live(trials, args.connections, args.repeats, args.engines)
    overhead = recorder_overhead_ns()
    print("\nrecorder overhead per op (2 clock reads + the record block), thread CPU time:")
    print(f"  python: {overhead:.0f} ns")
    if native.built():
        print(f"  native: {native_record_cost_ns():.0f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
