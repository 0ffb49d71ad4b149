"""A get/set mix on a Redis Cluster (`redis_mix` against a `redis_cluster` that provides
`redis`): each op to the node its key's slot says, and with `read_from: replicas` each
get to a replica of that slot's master, in READONLY mode.

The layout (masters, slots, replicas) is read once per client from CLUSTER NODES
(`harness.drivers.redis_nodes`) when it first connects; op `seq`'s entry of the period
(`seq % period`, which names its key) sets on the key's master and gets from it, or
from its replica `entry % r` (r: that master's replicas), so the replicas of a master
share its reads and every connection sends the same op to the same node. Each
connection of the run holds a connection to every master, and with `replicas` to every
replica, each of which was sent READONLY once. Runs on a cluster take the Python path
(`native_ops` is None: the core's router sends every set to one server), and follow no
redirection: a MOVED or ASK is an error, so scale a cluster with the `kvstore` workload.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from harness.drivers import redis as resp
from harness.drivers.redis import RespError
from harness.drivers.redis_nodes import Layout, layout
from harness.errors import WorkloadError
from harness.hosts.endpoint import Endpoint, split_hostport
from harness.workloads.base import Issue, NativeOps, Pipeline
from harness.workloads.kv_mix import GET, OP_PATTERN_LEN, MixClient, key_of


def is_cluster(endpoint: Endpoint) -> bool:
    return endpoint.extra.get("protocol") == "redis_cluster"


async def read_layout(endpoint: Endpoint) -> Layout:
    """The cluster's layout from the first of its nodes that answers CLUSTER NODES."""
    seeds = [str(a) for a in endpoint.extra.get("nodes") or ()] or [
        f"{endpoint.host}:{endpoint.port}"]
    last: BaseException | None = None
    for seed in seeds:
        host, port = split_hostport(seed)
        try:
            conn = await resp.connect(host, port, auth=endpoint.auth, tls=endpoint.tls)
        except OSError as exc:
            last = exc
            continue
        try:
            text = await conn.request("CLUSTER", "NODES")
        finally:
            conn.close()
        if isinstance(text, bytes | str):
            try:
                found = layout(text.decode() if isinstance(text, bytes) else text, host)
            except (RespError, UnicodeDecodeError) as exc:
                last = exc
                continue
            if -1 not in found.owner:
                return found
            last = WorkloadError(f"{seed}: CLUSTER NODES does not name every slot's master")
        else:
            last = WorkloadError(f"{seed}: CLUSTER NODES answered {text!r}")
    raise WorkloadError(f"no node of the cluster gave its layout: {last}")


def endpoint_at(endpoint: Endpoint, address: str) -> Endpoint:
    host, port = split_hostport(address)
    return dataclasses.replace(endpoint, host=host, port=port, extra={})


def shares(found: Layout, keys: list[bytes]) -> list[list[int]]:
    """The indices of `keys` each master owns."""
    out: list[list[int]] = [[] for _ in found.masters]
    for i, k in enumerate(keys):
        out[found.owner[resp.key_slot(k)]].append(i)
    return out


class ClusterConn:
    """One connection of the run: one per master, then (replicas) one per replica."""

    def __init__(self, conns: list[resp.RespConnection]) -> None:
        self.conns = conns

    @property
    def closed(self) -> bool:
        return any(c.closed for c in self.conns)

    def close(self) -> None:
        for c in self.conns:
            c.close()


class ClusterRouted(MixClient):
    """A RESP mix client (`redis_mix.RedisMixClient`, after this in the bases) that
    routes by slot, reads from replicas where `from_replicas` (see the module)."""

    from_replicas = False

    def __init__(self, endpoint: Endpoint, params: Mapping[str, Any], client_id: int) -> None:
        super().__init__(endpoint, params, client_id)
        self.layout: Layout | None = None
        self.servers: list[str] = []
        #: Per entry of the period, the server (index in `servers`) of its get and of its
        #: set: filled in place once the layout is read, so an `issuer` made before sees it.
        self.get_to: list[int] = []
        self.set_to: list[int] = []
        self._key_size = int(params["key_size_bytes"])

    def route(self, found: Layout) -> None:
        """Per entry of the period, the server its get and its set go to."""
        alone = [m for m, r in zip(found.masters, found.replicas, strict=True) if not r]
        if alone and self.from_replicas:
            raise WorkloadError(f"read_from: replicas, but the cluster's masters {alone} "
                                "have no replicas (set replicas_per_master)")
        self.servers = list(found.masters)
        first: list[int] = []
        for reps in found.replicas:
            first.append(len(self.servers))
            self.servers += reps if self.from_replicas else []
        # The slot of each key the period picks (each key once: CRC16 in Python).
        keys, entry_key = np.unique(self._picks, return_inverse=True)
        slots = np.fromiter((resp.key_slot(key_of(self.key_prefix, k, self._key_size))
                             for k in keys.tolist()), np.int64, len(keys))
        owner = np.asarray(found.owner, np.int64)[slots][entry_key.reshape(-1)]
        gets = owner
        if self.from_replicas:
            counts = np.asarray([len(r) for r in found.replicas], np.int64)
            entries = np.arange(self.period, dtype=np.int64)
            gets = np.asarray(first, np.int64)[owner] + entries % counts[owner]
        self.set_to[:] = owner.tolist()
        self.get_to[:] = gets.tolist()
        self.layout = found

    async def connect(self) -> Any:
        if self.layout is None:
            self.route(await read_layout(self.endpoint))
        n_masters = len(self.layout.masters) if self.layout else 0
        conns: list[resp.RespConnection] = []
        try:
            for i, address in enumerate(self.servers):
                host, port = split_hostport(address)
                conns.append(await resp.connect(host, port, auth=self.endpoint.auth,
                                                tls=self.endpoint.tls))
                if i >= n_masters:  # a replica: reads of the slots of its master
                    reply = await conns[-1].request("READONLY")
                    if reply != b"OK":
                        raise WorkloadError(f"replica {address} answered {reply!r} to "
                                            "READONLY")
        except BaseException:
            for c in conns:
                c.close()
            raise
        return ClusterConn(conns)

    async def execute(self, conn: Any, op: int, seq: int) -> tuple[int, int]:
        j = seq % self.period
        to = self.get_to[j] if op == GET else self.set_to[j]
        return await super().execute(conn.conns[to], op, seq)

    def issuer(self, done: Callable[[int], None],
               fail: Callable[[BaseException], None]) -> Issue:
        issue_on = super().issuer(done, fail)
        pattern, period = self.op_pattern, self.period
        get_to, set_to = self.get_to, self.set_to

        def issue(conn: Any, seq: int) -> int:
            j = seq % period
            if pattern[seq & (OP_PATTERN_LEN - 1)] == GET:
                return issue_on(conn.conns[get_to[j]], seq)
            return issue_on(conn.conns[set_to[j]], seq)

        return issue

    def pipeline(self) -> Pipeline | None:
        return None  # a batch is one connection's: the callback chains route per op

    def native_ops(self) -> NativeOps | None:  # type: ignore[override]
        return None


async def replicas_have_it(endpoint: Endpoint, found: Layout, timeout_ms: int) -> None:
    """Return once each master's replicas acknowledged what it holds (PUBLISH, then WAIT,
    as `redis_mix.RedisMix.replicas_have_it` does on one primary)."""
    async def one(master: str, n: int) -> None:
        host, port = split_hostport(master)
        conn = await resp.connect(host, port, auth=endpoint.auth, tls=endpoint.tls)
        acked = await resp.replicas_acknowledged(conn, n, timeout_ms)
        if not isinstance(acked, int) or acked < n:
            raise WorkloadError(f"only {acked!r} of master {master}'s {n} replicas "
                                f"acknowledged the preload within {timeout_ms / 1000:g} s")

    await asyncio.gather(*(one(m, len(r)) for m, r in zip(found.masters, found.replicas,
                                                          strict=True) if r))


def items(endpoint: Endpoint) -> int:
    """Keys the cluster's masters hold (DBSIZE of each)."""
    from harness.services.redis import redis_command

    found = asyncio.run(read_layout(endpoint))
    return sum(int(redis_command(*split_hostport(m), "DBSIZE", auth=endpoint.auth,
                                 tls=endpoint.tls)) for m in found.masters)
