"""How precisely the open loop sends on schedule: lag = actual send - intended start.

Runs `memcache_mix` (90% gets over a loaded key space) open loop against a local
memcached at several rates, on each load-generator engine (native core and Python paths,
alternating), and prints percentiles of the lag and the achieved rate. The rates are
far below capacity, so an op never waits for a free connection: the lag is the pacer's
(and the scheduler's) alone; the last row is the floor, how late a bare 1 ms sleep wakes
on the same CPU. Server on CPU 0 and the client on CPU 1 when both exist.

    .venv/bin/python benchmarks/open_loop_lag.py [--rates 1000,5000,20000] [--seconds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os

import numpy as np

from harness.hosts import LocalHost
from harness.loadgen import ClientConfig, ClientRun, native
from harness.services import SERVICES
from harness.workloads import WORKLOADS

PARAMS = {"get_ratio": 0.9, "key_space": 1000, "key_size_bytes": 16, "value_size_bytes": 100}


async def measure(endpoint: dict, rate: float, seconds: float,
                  engine: str) -> tuple[np.ndarray, float]:
    os.environ[native.ENV] = engine
    wl = WORKLOADS.get("memcache_mix")
    cfg = ClientConfig(workload=wl.name, params=PARAMS, endpoints={"memcached": endpoint},
                       client_id=0, connections=4, inflight=4, duration_s=seconds,
                       rate_ops_s=rate, timeout_s=None)
    await wl.prepare(cfg.endpoint_objects(), PARAMS)
    run = ClientRun(cfg, wl.client(cfg.endpoint_objects(), cfg.params, 0))
    await run.connect_all()
    await run.run()
    if run.engine != engine:
        raise SystemExit(f"asked for the {engine} engine, {run.engine} ran")
    ops = run.rec.to_arrays(wl.ops, 0, 0)
    return ops.start_ns - ops.intended_ns, len(ops) / seconds


def wakeup_floor_us(n: int = 2000) -> np.ndarray:
    """The floor any pacer on this CPU meets: how late a bare 1 ms sleep wakes (timer
    slack 1 ns, as the native core sets it), percentiles 50/90/99 and the max, in us."""
    import ctypes
    import time

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK
    late = []
    for _ in range(n):
        target = time.perf_counter_ns() + 1_000_000
        time.sleep(0.001)
        late.append(time.perf_counter_ns() - target)
    arr = np.array(late) / 1e3
    return np.append(np.percentile(arr, [50, 90, 99]), arr.max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rates", default="1000,5000,20000")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--engines", default="native,python" if native.built() else "python")
    args = ap.parse_args()
    import uvloop

    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    with LocalHost() as host:
        svc = SERVICES.get("memcached").start(host, "lag", {"threads": 1})
        try:
            if {0, 1} <= os.sched_getaffinity(0):
                os.sched_setaffinity(svc.processes[0].pid, {0})
                os.sched_setaffinity(0, {1})
            print(f"{'engine':<7} {'target ops/s':>12} {'achieved':>10} {'lag p50 us':>11} "
                  f"{'p90 us':>8} {'p99 us':>8} {'max us':>9}")
            for rate in (float(r) for r in args.rates.split(",")):
                for engine in engines:
                    lag, achieved = uvloop.run(measure(svc.endpoint.to_dict(), rate,
                                                       args.seconds, engine))
                    p = np.percentile(lag, [50, 90, 99]) / 1e3
                    print(f"{engine:<7} {rate:12,.0f} {achieved:10,.0f} {p[0]:11.1f} "
                          f"{p[1]:8.1f} {p[2]:8.1f} {lag.max() / 1e3:9.1f}", flush=True)
            f = wakeup_floor_us()
            print(f"{'sleep':<7} {'(floor)':>12} {'':>10} {f[0]:11.1f} {f[1]:8.1f} {f[2]:8.1f} "
                  f"{f[3]:9.1f}   <- a bare 1 ms sleep's lateness on this CPU")
        finally:
            svc.stop()


if __name__ == "__main__":
    main()
