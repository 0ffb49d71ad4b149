"""The bounds a spec is held to beyond its fields' own (`Setting.low`/`high`), and why.

Each bound is what a machine can hold or do, so a typo or a hostile value is refused
before anything runs instead of failing, or exhausting memory, in the middle of a run.
Checks return (field, message) pairs for `harness.spec` to name the file and line.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from harness.hosts.hostspec import HostSpec

#: Longest run, warm-up or op timeout: 30 days. Longer is a typo, and 1e12 s overflows
#: the nanosecond clock arithmetic (64-bit) of the clients later.
MAX_SECONDS = 30 * 24 * 3600
#: Records (ops + warm-up ops) of one run. A client process preallocates 32 bytes per
#: record of its share (four int64 columns, `harness.loadgen.recorder`) and the runner
#: joins every client's records in memory (~39 bytes each, then a sorted copy): 2**25
#: keeps each near 1 GiB. Longer measurements are duration runs.
MAX_RUN_RECORDS = 1 << 25
#: Open loop: below one op per 1,000 s there is no load to speak of, and a far smaller
#: rate makes the schedule's interval overflow; above 10**9 ops/s is no store on earth.
MIN_RATE_OPS_S, MAX_RATE_OPS_S = 0.001, 1e9
#: Client processes in all, and on one machine: each is a Python interpreter (~40 MB)
#: with its own event loop; 256 on one machine outnumber its cores many times over.
MAX_PROCESSES, MAX_PROCESSES_PER_MACHINE = 10_000, 256
#: Connections of one process: each a socket (a file descriptor) served by one event loop.
MAX_CONNECTIONS = 10_000
#: Connections from one machine: each takes a local port of the ephemeral range to reach a
#: server (Linux: 32768-60999, 28,232 ports).
MAX_CONNECTIONS_PER_MACHINE = 28_000
#: Requests in flight on one connection: beyond any server's pipelining and socket buffers.
MAX_INFLIGHT = 10_000
#: The closed loop's pause (clients.pause_us): past 100 ms it is think time, not batching.
MAX_PAUSE_US = 100_000
#: Errors in a row before a client stops: a billion is already "never".
MAX_CONSECUTIVE_ERRORS = 10**9
#: SSH connect timeout: a machine that has not answered within an hour is not coming.
MAX_CONNECT_TIMEOUT_S = 3600

_PORT = re.compile(r":([0-9]+)$")


def target_port_problem(target: str) -> str | None:
    """A host target's port out of 1-65535 (`user@host:0` would silently become 22)."""
    match = _PORT.search(target)
    if match and not 1 <= int(match.group(1)) <= 65535:
        return f"port {int(match.group(1))} of {target!r} is not a TCP port (1-65535)"
    return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def run_problems(run: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A run's size taken together (each field's own bounds are checked already)."""
    out = []
    ops, warm = run.get("ops"), run.get("warmup_ops")
    if _number(ops) and _number(warm) and ops + warm > MAX_RUN_RECORDS >= max(ops, warm):
        out.append(("run", f"run.ops + run.warmup_ops = {ops + warm:,} records, more than "
                           f"the {MAX_RUN_RECORDS:,} a run may hold in memory; measure "
                           "longer with run.duration_s"))
    rate, length = run.get("rate_ops_s"), [run.get("duration_s"), run.get("warmup_s")]
    if _number(rate) and all(_number(x) and math.isfinite(x) for x in [rate, *length]):
        intended = rate * sum(length)
        if intended > MAX_RUN_RECORDS and rate <= MAX_RATE_OPS_S and max(length) <= MAX_SECONDS:
            out.append(("run.rate_ops_s", f"{rate:g} ops/s for {sum(length):g} s is "
                                          f"{intended:,.0f} records, more than the "
                                          f"{MAX_RUN_RECORDS:,} a run may hold in memory"))
    return out


def machine_problems(hosts: Mapping[str, HostSpec], client_hosts: tuple[str, ...],
                     processes: int, connections: int, grid: Mapping[str, Any]
                     ) -> list[tuple[str, str]]:
    """Client processes and connections on the busiest client machine. Processes go
    round robin over `client_hosts`; host names with one target are one machine."""
    if not client_hosts:
        return []
    per: Counter[str] = Counter()
    n = len(client_hosts)
    for j, name in enumerate(client_hosts):
        spec = hosts.get(name)
        machine = "localhost" if spec is None or spec.is_local else spec.target
        per[machine] += processes // n + (j < processes % n)
    machine, most = per.most_common(1)[0]

    def field(*keys: str) -> str:
        varied = [k for k in keys if f"clients.{k}" in grid]
        return f"grid.clients.{varied[0]}" if varied else f"clients.{keys[0]}"

    out = []
    if most > MAX_PROCESSES_PER_MACHINE:
        out.append((field("processes"), f"{most} client processes on one machine "
                                        f"({machine}), more than {MAX_PROCESSES_PER_MACHINE}; "
                                        "spread them over more clients.hosts"))
    elif most * connections > MAX_CONNECTIONS_PER_MACHINE:
        out.append((field("connections", "processes"),
                    f"{most} client processes x {connections} connections = "
                    f"{most * connections:,} connections from one machine ({machine}), "
                    f"more than the {MAX_CONNECTIONS_PER_MACHINE:,} local ports it has to "
                    "reach a server; spread the processes over more clients.hosts or "
                    "lower clients.connections"))
    return out
