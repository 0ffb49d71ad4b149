"""How precisely the open loop sends on schedule: lag = actual send - intended start.

Runs the datastore_memcache workload (mem_read_hit) open loop against a local memcached
at several rates and prints percentiles of the lag and the achieved rate. A precise
loop keeps the median lag well under the event loop's ~1 ms timer grain.

    .venv/bin/python benchmarks/open_loop_lag.py [--rates 1000,5000,20000] [--seconds 3]
"""

from __future__ import annotations

import argparse

import numpy as np

from harness.drivers import memcache
from harness.hosts import LocalHost
from harness.loadgen import ClientConfig, ClientRun
from harness.services import SERVICES
from harness.workloads import WORKLOADS
from harness.workloads.datastore_memcache import HIT_KEY


async def measure(endpoint: dict, rate: float, seconds: float) -> tuple[np.ndarray, float]:
    wl = WORKLOADS.get("datastore_memcache")
    cfg = ClientConfig(workload=wl.name, params={"op": "mem_read_hit", "value_size_bytes": 100},
                       endpoints={"memcached": endpoint, "postgres": endpoint}, client_id=0,
                       connections=4, duration_s=seconds, rate_ops_s=rate, timeout_s=None)
    mc = await memcache.connect(endpoint["host"], endpoint["port"])
    await mc.set(HIT_KEY, b"x" * 100)
    mc.close()
    run = ClientRun(cfg, wl.client(cfg.endpoint_objects(), cfg.params, 0))
    await run.connect_all()
    await run.run()
    ops = run.rec.to_arrays(wl.ops, 0, 0)
    return ops.start_ns - ops.intended_ns, len(ops) / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rates", default="1000,5000,20000")
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    import uvloop

    with LocalHost() as host:
        svc = SERVICES.get("memcached").start(host, "lag", {})
        try:
            print(f"{'target ops/s':>12} {'achieved':>10} {'lag p50 us':>11} "
                  f"{'p90 us':>8} {'p99 us':>8} {'max us':>9}")
            for rate in (float(r) for r in args.rates.split(",")):
                lag, achieved = uvloop.run(measure(svc.endpoint.to_dict(), rate, args.seconds))
                p = np.percentile(lag, [50, 90, 99]) / 1e3
                print(f"{rate:12,.0f} {achieved:10,.0f} {p[0]:11.1f} {p[1]:8.1f} {p[2]:8.1f} "
                      f"{lag.max() / 1e3:9.1f}")
        finally:
            svc.stop()


if __name__ == "__main__":
    main()
