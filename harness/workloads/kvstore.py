"""Study of seeds 003/004: a key-value store sharded over a hash ring, PUT and GET of
e-mails, by servers, clients, cache size and strategy, and while servers come and go.

Against a `kvstore` service: Redis Cluster (`redis_cluster`, RESP with MOVED/ASK) or any
server speaking the course protocol (`command` with protocol `kvtext`). A client is a
process; it owns `records_per_client` records (global indices client*R .. client*R+R-1 of
the dataset, so clients write disjoint keys, as in the seeds). Connections of a process
share its records and its op sequence.

`mode: put_then_get` (the seeds): op `seq` touches record ``seq % R``; passes alternate,
PUT all R records, then GET them (`get_passes` times), then PUT again... With run.ops =
2 R x processes every client PUTs its share, then GETs it. `mode: mix`: each op is a PUT
with probability `put_ratio`, else a GET. GET keys (and mix keys) follow `key_dist`:
`sequential` (the PUT order), `uniform`, or `zipf` (popularity ~ 1/rank^zipf_s over a
seeded permutation of the records; skew is what lets cache strategies differ). With
`versioned`, the value of a PUT carries its seq (an e-mail trailer line ``-- v<seq>``),
so a test can tell which write a read returns. Everything is a function of the
parameters and (client, seq).

Redirected attempts (MOVED, ASK, server_not_responsible, write locks) are recorded as
extra `redirect` records, failed connections during re-routing as `error` records; the
op's own record spans the whole op, retries included.

On the course protocol the seeds' runs (`put_then_get`, `sequential` GETs, values not
`versioned`: an op sequence that repeats) run on the native core (`native_ops`): one
socket per server in each connection, each op sent to its key's server, and refusals
and lost servers followed by `KVTextRouter` the way `KVTextClient` follows them.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import math
import random
from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.datasets.emails import KEY_STYLES, Record, check_params, open_dataset
from harness.drivers import redis as resp
from harness.drivers.kvtext import (
    KVTextClient,
    KVTextError,
    Node,
    Ranges,
    key_position,
    parse_ranges,
)
from harness.errors import WorkloadError
from harness.results import ERROR, MISS, OK, outcome
from harness.services.base import Endpoint
from harness.settings import Setting, check_bounds
from harness.workloads.base import (
    NativeOps,
    NativeRouter,
    Workload,
    WorkloadClient,
    request_table,
)

OPS = ("put", "get")
PUT, GET = range(2)
BACKENDS = ("auto", "redis_cluster", "kvtext")
MODES = ("put_then_get", "mix")
KEY_DISTS = ("sequential", "uniform", "zipf")
GEN_PARAMS = ("median_bytes", "sigma", "min_bytes", "max_bytes")
_MASK = (1 << 64) - 1


def _unit(salt: int, seq: int) -> float:
    """A uniform [0, 1) number from (salt, seq) alone (splitmix64), ~1 us in Python."""
    x = (seq * 0x9E3779B97F4A7C15 + salt) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return (x ^ (x >> 31)) / 2.0**64


#: The largest generated message: e-mails, not disk images.
MAX_MESSAGE_BYTES = 64 << 20
#: Bytes of records one client process may hold: its records, and the native core's
#: request tables a second copy of them (with 32-bit offsets: under 4 GiB in any case).
MAX_CLIENT_RECORD_BYTES = 1 << 30
#: Ops of a put_then_get cycle: the native core holds its op pattern, a byte per op.
MAX_CYCLE_OPS = 1 << 26


def backend_of(endpoint: Endpoint, wanted: str) -> str:
    protocol = str(endpoint.extra.get("protocol", ""))
    if protocol not in ("redis_cluster", "kvtext"):
        raise WorkloadError(f"kvstore speaks redis_cluster or kvtext, not the service's "
                            f"protocol {protocol!r}")
    if wanted not in ("auto", protocol):
        raise WorkloadError(f"backend {wanted!r} asked for, but the service speaks {protocol}")
    return protocol


def seeds_of(endpoint: Endpoint) -> list[tuple[str, int]]:
    nodes = endpoint.extra.get("nodes") or [f"{endpoint.host}:{endpoint.port}"]
    return [(a.rpartition(":")[0].strip("[]"), int(a.rpartition(":")[2])) for a in nodes]


class KVStore(Workload):
    name = "kvstore"
    description = "PUT/GET of e-mails on a sharded KV store (Redis Cluster or course protocol)"
    ops = OPS
    requires = ("kvstore",)
    params: Mapping[str, Setting] = {
        "backend": Setting((str,), "auto", "protocol expected of the service; auto: "
                           "whatever it speaks", choices=BACKENDS),
        "records_per_client": Setting((int,), 1000, "records each client process owns",
                                      low=1, high=1_000_000, why="held in memory"),
        "mode": Setting((str,), "put_then_get", "op sequence", choices=MODES),
        "put_ratio": Setting((float,), 0.5, "mix: share of PUTs", low=0, high=1),
        "get_passes": Setting((int,), 1, "put_then_get: GET passes after each PUT pass",
                              low=1, high=1000),
        "key_dist": Setting((str,), "sequential", "keys of GETs (and of mix ops)",
                            choices=KEY_DISTS),
        # (r + 1) ** s overflows a float past ~10 for a million records.
        "zipf_s": Setting((float,), 0.99, "zipf: exponent", low=0, low_open=True, high=10),
        "versioned": Setting((bool,), False, "each PUT's value carries its seq"),
        "dataset": Setting((str,), "generated", "'generated' or a directory of e-mails "
                           "(e.g. an Enron maildir) present on every client host"),
        # Their lower bounds are checked together: datasets.emails.check_params.
        "median_bytes": Setting((int,), 2500, "generated: median message size",
                                high=MAX_MESSAGE_BYTES, why="64 MiB"),
        "sigma": Setting((float,), 1.0, "generated: sigma of log(size)", high=10,
                         why="exp(10 sigma) already spans every size"),
        "min_bytes": Setting((int,), 300, "generated: smallest message",
                             high=MAX_MESSAGE_BYTES, why="64 MiB"),
        "max_bytes": Setting((int,), 120_000, "generated: largest message",
                             high=MAX_MESSAGE_BYTES, why="64 MiB"),
        "seed": Setting((int,), 1, "seed of the dataset and of the op choices"),
        "key_style": Setting((str,), "message_id", "message_id, or hash20 for servers "
                             "with 20-byte keys", choices=KEY_STYLES),
    }

    def validate(self, params: Mapping[str, Any], grid: Mapping[str, Any]) -> list[str]:
        problems: list[str] = []
        variants = [dict(params)] + [{**params, k: v} for k, vs in grid.items()
                                     if k in self.params for v in vs]
        for p in variants:
            if all(isinstance(p.get(k), int | float) for k in GEN_PARAMS):
                problems += check_params(*(p[k] for k in GEN_PARAMS))
            problems += self._memory_problems(p)
        return sorted(set(problems))

    def _memory_problems(self, p: Mapping[str, Any]) -> list[str]:
        """What a client process would hold that no machine should: the op pattern of a
        put_then_get cycle, and generated records (by an upper bound of their mean size,
        a lognormal clipped to [min, max]). Values out of their own bounds are left to
        the spec's report of them."""
        def fine(key: str) -> bool:
            value = p.get(key)
            return (isinstance(value, int | float) and not isinstance(value, bool)
                    and check_bounds(value, self.params[key]) is None)

        out: list[str] = []
        if not fine("records_per_client"):
            return out
        n = p["records_per_client"]
        if fine("get_passes") and n * (1 + p["get_passes"]) > MAX_CYCLE_OPS:
            out.append(f"records_per_client x (1 + get_passes) = "
                       f"{n * (1 + p['get_passes']):,} ops per cycle, more than "
                       f"{MAX_CYCLE_OPS:,} (the native core holds the cycle)")
        if p.get("dataset") != "generated" or not all(fine(k) for k in GEN_PARAMS):
            return out
        median, sigma, low, high = (p[k] for k in GEN_PARAMS)
        mean = min(high, low + median * math.exp(sigma * sigma / 2))
        if n * mean > MAX_CLIENT_RECORD_BYTES:
            out.append(f"records_per_client x mean message size = about "
                       f"{n * mean / 2**30:.1f} GiB per client process, more than "
                       f"{MAX_CLIENT_RECORD_BYTES >> 30} GiB; lower records_per_client or "
                       "the message sizes")
        return out

    async def prepare(self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any]) -> None:
        ep = endpoints["kvstore"]
        if backend_of(ep, params["backend"]) != "redis_cluster":
            return  # the course protocol has no flush; keys of earlier runs stay
        if ep.extra.get("foreign"):
            return  # a cluster the kit did not start: its data is never flushed
        # Every run starts from an empty cluster, so memory limits act the same each time.
        client = resp.ClusterClient(seeds_of(ep), auth=ep.auth, tls=ep.tls)
        try:
            await client.connect_all()
            for node in set(client.slots):
                assert node is not None
                reply = await (await client.conn(node)).request("FLUSHALL")
                if isinstance(reply, resp.RespError):
                    raise WorkloadError(f"FLUSHALL on {node}: {reply}")
        finally:
            client.close()

    def client(
        self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any], client_id: int
    ) -> KVClient:
        return KVClient(endpoints["kvstore"], params, client_id)


class KVClient(WorkloadClient):
    records_attempts = True

    def __init__(self, endpoint: Endpoint, params: Mapping[str, Any], client_id: int) -> None:
        self.endpoint = endpoint
        self.backend = backend_of(endpoint, params["backend"])
        self.greeting = bool(endpoint.extra.get("greeting", False))
        self.n = params["records_per_client"]
        self.mix = params["mode"] == "mix"
        self.cycle = self.n * (1 + params["get_passes"])
        self.put_ratio = params["put_ratio"]
        self.versioned = params["versioned"]
        self.salt = (params["seed"] * 1_000_003 + client_id) & _MASK
        gen = {k: params[k] for k in GEN_PARAMS} if params["dataset"] == "generated" else {}
        total = (client_id + 1) * self.n
        try:
            ds = open_dataset(params["dataset"], total, seed=params["seed"],
                              key_style=params["key_style"], **gen)
        except ValueError as exc:
            raise WorkloadError(f"dataset: {exc}") from None
        first = client_id * self.n
        self.records: list[Record] = [ds.record(first + i) for i in range(self.n)]
        self.dist = params["key_dist"]
        if self.dist == "zipf":
            weights = [1.0 / (r + 1) ** params["zipf_s"] for r in range(self.n)]
            self.cdf = list(itertools.accumulate(weights))
            self.perm = list(range(self.n))
            random.Random(self.salt).shuffle(self.perm)

    def next_op(self, seq: int) -> int:
        if self.mix:
            return PUT if _unit(self.salt ^ 0xA5A5, seq) < self.put_ratio else GET
        return PUT if seq % self.cycle < self.n else GET

    def index(self, op: int, seq: int) -> int:
        """The record op `seq` touches."""
        if self.dist == "sequential" or (op == PUT and not self.mix):
            return seq % self.n
        u = _unit(self.salt, seq)
        if self.dist == "uniform":
            return min(int(u * self.n), self.n - 1)
        rank = bisect.bisect_left(self.cdf, u * self.cdf[-1])
        return self.perm[min(rank, self.n - 1)]

    def value(self, index: int, seq: int) -> bytes:
        """What PUT `seq` of record `index` writes."""
        value = self.records[index].value
        return value + b"\\n-- v%d" % seq if self.versioned else value

    def native_ops(self) -> NativeOps | None:
        """The seeds' runs on the course protocol as tables: PUT of every record, then
        GET passes, in record order, so op `seq` is entry `seq % R` of a cycle."""
        if (self.backend != "kvtext" or self.mix or self.dist != "sequential"
                or self.versioned or len(seeds_of(self.endpoint)) > 255):
            return None
        keys = [r.key for r in self.records]
        if any(b" " in k or b"\n" in k for k in keys):
            return None  # not one line per request: the Python client says why

        gets, get_offsets = request_table([b"get " + k + b"\r\n" for k in keys])
        sets, set_offsets = request_table([b"put " + r.key + b" " + r.value
                                           for r in self.records])
        sizes = np.fromiter((len(r.value) for r in self.records), np.uint32, self.n)
        pattern = bytes([PUT]) * self.n + bytes([GET]) * (self.cycle - self.n)
        return NativeOps(protocol="kvtext", pattern=pattern, get_op=GET, gets=gets,
                         get_offsets=get_offsets, sets=sets, set_offsets=set_offsets,
                         set_tail=b"\r\n", set_ok_outcome=outcome(OK, 0),
                         set_sizes=sizes.tobytes(), router=KVTextRouter(self, keys))

    async def connect(self) -> Any:
        if self.backend == "redis_cluster":
            conn: Any = resp.ClusterClient(seeds_of(self.endpoint), auth=self.endpoint.auth,
                                           tls=self.endpoint.tls)
        else:
            conn = KVTextClient(seeds_of(self.endpoint), greeting=self.greeting)
        try:
            await conn.connect_all()
        except BaseException:
            conn.close()
            raise
        return conn

    async def close(self, conn: Any) -> None:
        conn.close()

    async def execute(self, conn: Any, op: int, seq: int) -> tuple[int, int]:
        i = self.index(op, seq)
        key = self.records[i].key
        record = self.record_attempt
        on_attempt = None if record is None else (
            lambda t0, t1, status: record(op, seq, t0, t1, status))
        if op == PUT:
            value = self.value(i, seq)
            if self.backend == "redis_cluster":
                reply = await conn.execute(key, "SET", key, value, on_attempt=on_attempt)
                ok = reply == b"OK"
            else:
                reply = await conn.put(key, value, on_attempt)
                ok = reply.startswith((b"put_success", b"put_update"))
            return (OK, len(value)) if ok else (ERROR, 0)
        if self.backend == "redis_cluster":
            found = await conn.execute(key, "GET", key, on_attempt=on_attempt)
            if isinstance(found, resp.RespError):
                return ERROR, 0
        else:
            found = await conn.get(key, on_attempt)
        return (MISS, 0) if found is None else (OK, len(found))


class KVTextRouter(NativeRouter):
    """The native core's routing over the course protocol's ring (see `NativeRouter`):
    the servers are the service's nodes; a server that joins later has no socket, so
    its keys' ops take the slow path, done by a `KVTextClient` of its own."""

    def __init__(self, client: KVClient, keys: list[bytes]) -> None:
        self.client = client
        self.servers: list[Node] = seeds_of(client.endpoint)
        self.index = {node: i for i, node in enumerate(self.servers)}
        self.positions = [key_position(k) for k in keys]
        self.ranges: Ranges = [(0, (1 << 128) - 1, self.servers[0])]
        self.adopted = False
        self.slow: KVTextClient | None = None
        self._opening = asyncio.Lock()

    def adopt(self, conn: Any) -> None:
        if not self.adopted:
            self.ranges, self.adopted = list(conn.ranges), True

    def _known(self) -> Ranges:
        return self.slow.ranges if self.slow is not None else self.ranges

    def routes(self) -> bytes:
        ranges = self._known()
        out = bytearray(len(self.positions))
        for i, pos in enumerate(self.positions):
            node = None
            for first, last, owner in ranges:
                if (first <= pos <= last) if first <= last else (pos >= first or pos <= last):
                    node = owner
                    break
            out[i] = self.index.get(node, 255) if node is not None else 255
        return bytes(out)

    async def sockets(self, conn: Any) -> list[Any | None]:
        self.adopt(conn)
        out: list[Any | None] = []
        for node in self.servers:
            c = conn.conns.get(node)
            if c is not None and not c.closed and self.client.greeting and c._skip:
                await c.request(b"keyrange")  # the greeting is read here, not by the core
            out.append(None if c is None or c.closed else c)
        return out

    async def _open(self) -> KVTextClient:
        async with self._opening:
            if self.slow is None:
                slow = KVTextClient(self.servers, greeting=self.client.greeting)
                slow.ranges = list(self.ranges)
                self.slow = slow
            return self.slow

    async def learn(self, refusal: bytes | None) -> None:
        slow = await self._open()
        if refusal is not None and refusal.startswith(b"server_not_responsible"):
            ranges = refusal[len(b"server_not_responsible"):].strip()
            if ranges:
                slow.ranges = parse_ranges(ranges)
                return
        elif refusal is not None:  # server_write_lock, server_stopped: wait, then again
            await asyncio.sleep(0.001)
            return
        with contextlib.suppress(OSError, KVTextError):
            await slow.refresh()

    async def execute(self, op: int, seq: int) -> tuple[int, int]:
        return await self.client.execute(await self._open(), op, seq)

    def close(self) -> None:
        if self.slow is not None:
            self.slow.close()
