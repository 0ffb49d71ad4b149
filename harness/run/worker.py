"""Entry point of one client process: ``python -m harness.worker CONFIG.json``.

Started by the runner on a client host (locally or over SSH). It connects, creates the
`ready` file, waits for the `go` file (which holds the common start time, Unix ns),
runs, and writes its records (`.npz`) and a status JSON. SIGTERM stops it early; what
was measured so far is still written. Records are spilled to part files in chunks while
it runs (`loadgen.spill`); the records file holds the last ones, the status lists the
parts.

Its status also says what CPU it used from the common start until its loop ended
(getrusage: every thread, the native core's too, to the microsecond) and how long that
was: the client entries of the run's telemetry (`harness.run.telemetry`). /proc could not
tell: the process has exited by the time the machine is read at the run's end.

It stops by itself when no harness is left to collect it: its `alive` file, touched
each second by the agent that watches it, is older than `ORPHAN_BEFORE_GO_S` before the
start (it exits without measuring) or `ORPHAN_AFTER_GO_S` after (longer than the
control machine spends reconnecting a dropped SSH link: it stops and saves its records).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import resource
import signal
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from harness.loadgen import ClientConfig, ClientRun
from harness.loadgen.live import Sampler
from harness.loadgen.recorder import CHUNK_RECORDS
from harness.loadgen.spill import Spiller
from harness.results import OpsArrays
from harness.run.workerctl import sha256_of
from harness.text import finite_data

GO_WAIT_S = 300.0
ORPHAN_BEFORE_GO_S = 10.0
#: More than `clients.RECONNECT_DEADLINE_S` (120 s), so a link that comes back in time
#: finds its workers still measuring.
ORPHAN_AFTER_GO_S = 150.0


#: Clients built before a fork, by what they were built from (`prebuild`): the agent
#: builds each once per grid and every worker it forks takes a copy-on-write copy, so a
#: run's worker is ready without encoding its requests again (~20-90 ms a run for a
#: get/set mix). Only workloads whose clients are plain data until connected
#: (`Workload.reusable_client`); the least recently used go first.
_BUILT: OrderedDict[str, Any] = OrderedDict()
MAX_BUILT = 8
#: ... and no more than the agent holding this much (a client of a large key space is
#: hundreds of MB of encoded requests): past it the oldest go, down to the newest one.
MAX_BUILT_RSS_BYTES = 1 << 30


def _rss_bytes() -> int:
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf(
            "SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _build_key(cfg: ClientConfig) -> str:
    return json.dumps([cfg.workload, cfg.params, cfg.endpoints, cfg.client_id],
                      sort_keys=True, default=str)


def prebuild(cfg: ClientConfig) -> bool:
    """Build `cfg`'s client here (the agent, before it forks the worker) if its workload
    allows; whether one is now ready for the worker to take."""
    from harness.loadgen.native import prebuild_native
    from harness.workloads import WORKLOADS

    workload = WORKLOADS.get(cfg.workload)
    if not workload.reusable_client:
        return False
    key = _build_key(cfg)
    if key not in _BUILT:
        client = workload.client(cfg.endpoint_objects(), cfg.params, cfg.client_id)
        prebuild_native(client)  # the native core's tables too, cached on the client
        _BUILT[key] = client
        while len(_BUILT) > MAX_BUILT or (len(_BUILT) > 1
                                          and _rss_bytes() > MAX_BUILT_RSS_BYTES):
            _BUILT.popitem(last=False)
            gc.collect()  # so the next look at the RSS sees what the pop gave back
    _BUILT.move_to_end(key)
    return True


def _client(cfg: ClientConfig, workload: Any) -> tuple[Any, bool]:
    """The client prebuilt for `cfg` (a fork's own copy), else a new one; which."""
    built = _BUILT.get(_build_key(cfg)) if _BUILT else None
    return (built, True) if built is not None else (workload.client(
        cfg.endpoint_objects(), cfg.params, cfg.client_id), False)


def _unwatched_s(path: str | None) -> float:
    """Seconds since the agent last touched `path`; 0 without one (an older agent)."""
    if not path:
        return 0.0
    try:
        return max(0.0, time.time() - os.stat(path).st_mtime)
    except OSError:
        return 0.0


class _Watchdog:
    """Once a second: stop the run when the alive file went stale."""

    def __init__(self, run: ClientRun, path: str | None) -> None:
        self.run, self.path = run, path
        self.fired: str | None = None
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        if self.path:
            self._handle = asyncio.get_running_loop().call_later(1.0, self._check)

    def _check(self) -> None:
        age = _unwatched_s(self.path)
        if age > ORPHAN_AFTER_GO_S:
            self.fired = (f"stopped by itself: no agent has watched it for {age:.0f} s "
                          "(the harness that started it is gone)")
            self.run.stop()
            return
        self.start()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()


def _cpu_s() -> tuple[float, float]:
    """(user, system) CPU seconds of this process so far, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def _cpu_used(before: tuple[float, float], start_at_ns: int) -> dict[str, Any]:
    """CPU since `before` and wall time since the common start (this machine's clock,
    on which the go file gave it), with the process's peak RSS (ru_maxrss, KiB)."""
    user, system = _cpu_s()
    return {"user_s": round(user - before[0], 6), "sys_s": round(system - before[1], 6),
            "ran_s": (time.time_ns() - start_at_ns) / 1e9,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def _write_json(path: str, data: dict[str, Any]) -> None:
    """`data` as strict JSON: a float that is not finite (a rate over no time) as null."""
    tmp = f"{path}.tmp"
    Path(tmp).write_text(json.dumps(finite_data(data), allow_nan=False))
    os.replace(tmp, path)


async def _main(cfg: ClientConfig, began: float) -> dict[str, Any]:
    from harness.workloads import WORKLOADS

    workload = WORKLOADS.get(cfg.workload)
    client, prebuilt = _client(cfg, workload)
    made = time.monotonic()
    run = ClientRun(cfg, client, chunk_records=cfg.chunk_records or CHUNK_RECORDS)
    # Full chunks of records go to disk as the run goes: memory stays flat.
    spiller = Spiller(run, cfg.files["out"], workload.ops, cfg.files.get("parts"))
    run.rec.sink = spiller.sink
    loop = asyncio.get_running_loop()

    loop.add_signal_handler(signal.SIGTERM, run.stop)
    loop.add_signal_handler(signal.SIGINT, run.stop)
    prepared = time.monotonic()
    await run.connect_all()
    Path(cfg.files["ready"]).write_text(str(os.getpid()))
    # Where its time to ready went (the manifest's workers list): what a run costs
    # beyond what it measures (benchmarks/turnaround.py).
    startup = {"prebuilt": prebuilt, "client_ms": round(1000 * (made - began), 1),
               "engine_ms": round(1000 * (prepared - made), 1),
               "connect_ms": round(1000 * (time.monotonic() - prepared), 1)}
    deadline = time.monotonic() + GO_WAIT_S
    go = Path(cfg.files["go"])
    alive = cfg.files.get("alive")
    while not go.exists():
        if run.stopping or time.monotonic() > deadline:
            return _finish(run, spiller, workload.ops, 0, "stopped",
                           "never got the go signal")
        if _unwatched_s(alive) > ORPHAN_BEFORE_GO_S:
            return _finish(run, spiller, workload.ops, 0, "stopped", "never got the go "
                           "signal: the harness that started it is gone")
        await asyncio.sleep(0.002)
    start_at_ns = int(go.read_text())
    delay = (start_at_ns - time.time_ns()) / 1e9
    if delay > 0.002:
        await asyncio.sleep(delay - 0.002)
    # The loop's timers are ms-grained and may wake a little early: never start before
    # the common start (a negative offset would put op 0 before time zero). The rest is
    # slept, not spun: many workers spinning on few cores would delay each other's start.
    while (left_ns := start_at_ns - time.time_ns()) > 0:
        time.sleep(left_ns / 1e9)
    # Align records of all processes on the common start (same clock on one host; hosts'
    # clock offsets are estimated by the runner).
    lag_ns = time.time_ns() - start_at_ns
    spiller.offset_ns = lag_ns
    cpu0 = _cpu_s()
    error: str | None = None
    # Live numbers (`harness run` without --quiet): a timer reading the records, none per op.
    sampler = Sampler(run, cfg.files["live"]) if cfg.files.get("live") else None
    if sampler is not None:
        sampler.start()
    watchdog = _Watchdog(run, alive)
    watchdog.start()
    try:
        await run.run()
    except Exception as exc:  # noqa: BLE001 - keep the records, report the error
        error = f"{type(exc).__name__}: {exc}"
    cpu = _cpu_used(cpu0, start_at_ns)  # the loop's end: before records are written
    watchdog.stop()
    if sampler is not None:
        sampler.stop()
    state = "aborted" if run.aborted or error else ("stopped" if run.stopping else "complete")
    return {**_finish(run, spiller, workload.ops, lag_ns, state, error or watchdog.fired or (
        run.last_error if run.aborted else None), cpu), "startup": startup}


def _finish(run: ClientRun, spiller: Spiller, ops: tuple[str, ...], lag_ns: int, state: str,
            error: str | None, cpu: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write the records not yet spilled to the records file, and say what is where."""
    parts = spiller.close()
    # A chunk that could not be written is still in memory: it goes into the records
    # file with the rest (ahead of them, in record order).
    left = [run.arrays(ops, lag_ns, c) for c in spiller.unwritten()]
    arrays = run.arrays(ops, lag_ns)
    if left:
        arrays = OpsArrays.concat([*left, arrays], ops)
    arrays.save_npz(Path(run.cfg.files["out"]))
    unsent, unsent_warmup = run.unsent_counts()
    return {
        # Checked against the harness's copy before the file here is removed.
        "out": sha256_of(run.cfg.files["out"]),
        # Chunks written while it ran, in record order, before `out` (`loadgen.spill`).
        **({"parts": parts} if parts else {}),
        **({"spill_errors": spiller.errors} if spiller.errors else {}),
        "state": state,
        "error": error,
        "last_error": run.last_error,
        # The first message of each kind of failure and how often (`loadgen.errtally`).
        "errors": run.errors.as_list(),
        "records": len(arrays) + sum(int(p["records"]) for p in parts),
        # Open loop: ops intended before the end and never sent (the runner sums them).
        "unsent": unsent,
        "unsent_warmup": unsent_warmup,
        "engine": run.engine,
        "start_lag_ns": lag_ns,
        "pid": os.getpid(),
        **({"cpu": cpu} if cpu is not None else {}),
    }


def load_config(path: str) -> ClientConfig:
    return ClientConfig(**json.loads(Path(path).read_text()))


def main(argv: list[str] | None = None) -> int:
    began = time.monotonic()
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m harness.worker CONFIG.json (the client config a run "
              "writes; `harness run` starts workers itself)", file=sys.stderr)
        return 2
    try:
        cfg = load_config(argv[0])
    except (OSError, ValueError, TypeError) as exc:
        print(f"error: {argv[0]}: not a client config ({type(exc).__name__}: {exc})",
              file=sys.stderr)
        return 2
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # uvloop is a dependency; plain asyncio still measures correctly
        runner = asyncio.run
    try:
        status = runner(_main(cfg, began))
    except Exception as exc:  # noqa: BLE001 - the runner reads the status file, not a traceback
        status = {"state": "failed", "error": f"{type(exc).__name__}: {exc}", "records": 0}
    _write_json(cfg.files["status"], status)
    print(json.dumps(finite_data(status), allow_nan=False), flush=True)
    return 0 if status["state"] != "failed" else 1


if __name__ == "__main__":
    sys.exit(main())
