"""Reads from a Redis primary's replicas (`read_from: replicas`): the GETs of a mix go to
the replicas, spread over them, and the SETs to the primary, on both engines.

Each connection of the run is a connection to the primary and one to each replica
(`ReplicaConn`); op `seq`'s entry of the client's period (`seq % period`, the entry that
names its key) reads from replica `entry % N`, so N replicas share the reads evenly
whatever the key distribution, and every client and engine sends the same op to the
same replica. The native core keeps those sockets in each of its connections and routes
by the same rule (`NativeOps.router`, `writes_to`: the primary); what it cannot settle
(a replica lost mid-run) is done the awaited way on the router's own connections and
recorded as the Python path records it, an error where the replica is down.

A replica is read as a client of `redis-cli -h replica` or of a client library's
read-from-replica mode reads it: what it has applied so far, which may be behind the
primary (the run's telemetry says by how much, and the check `replica_lag` names a
replica that fell behind).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from harness.drivers import redis as resp
from harness.errors import WorkloadError
from harness.hosts.endpoint import Endpoint, split_hostport
from harness.workloads.base import Issue, NativeOps, NativeRouter, Pipeline
from harness.workloads.kv_mix import GET, OP_PATTERN_LEN, MixClient

READ_FROM = ("primary", "replicas")


def replicas_of(endpoint: Endpoint) -> list[tuple[str, int]]:
    """The (host, port) of each replica the endpoint lists (none: [])."""
    return [split_hostport(str(a)) for a in endpoint.extra.get("replicas") or ()]


class ReplicaConn:
    """One connection of the run: to the primary (sets) and to each replica (gets)."""

    def __init__(self, primary: resp.RespConnection, replicas: list[resp.RespConnection]
                 ) -> None:
        self.primary = primary
        self.replicas = replicas

    @property
    def closed(self) -> bool:
        return self.primary.closed or any(r.closed for r in self.replicas)

    def close(self) -> None:
        for conn in (self.primary, *self.replicas):
            conn.close()


async def open_replica_conn(endpoint: Endpoint) -> ReplicaConn:
    """Connections to the primary and to every replica, each authenticated; all or none."""
    opens = [resp.connect(endpoint.host, endpoint.port, auth=endpoint.auth, tls=endpoint.tls),
             *(resp.connect(h, p, auth=endpoint.auth, tls=endpoint.tls)
               for h, p in replicas_of(endpoint))]
    got = await asyncio.gather(*opens, return_exceptions=True)
    failed = next((g for g in got if isinstance(g, BaseException)), None)
    if failed is not None:
        for g in got:
            if not isinstance(g, BaseException):
                g.close()
        raise failed
    return ReplicaConn(got[0], list(got[1:]))


class ReadsFromReplicas(MixClient):
    """A RESP mix client (`redis_mix.RedisMixClient`, after this in the bases) whose gets
    go to the replicas (see the module)."""

    def __init__(self, endpoint: Endpoint, params: Mapping[str, Any], client_id: int) -> None:
        super().__init__(endpoint, params, client_id)
        self.readers = len(replicas_of(endpoint))
        if not self.readers:
            raise WorkloadError("read_from: replicas, but the Redis lists no replicas (set "
                                "its `replicas` setting)")

    def reader(self, seq: int) -> int:
        """The replica op `seq` reads from (its index among the endpoint's)."""
        return seq % self.period % self.readers

    async def connect(self) -> Any:
        return await open_replica_conn(self.endpoint)

    async def execute(self, conn: Any, op: int, seq: int) -> tuple[int, int]:
        return await super().execute(
            conn.replicas[self.reader(seq)] if op == GET else conn.primary, op, seq)

    def issuer(self, done: Callable[[int], None],
               fail: Callable[[BaseException], None]) -> Issue:
        issue_on = super().issuer(done, fail)
        pattern, period, n = self.op_pattern, self.period, self.readers

        def issue(conn: Any, seq: int) -> int:
            if pattern[seq & (OP_PATTERN_LEN - 1)] == GET:
                return issue_on(conn.replicas[seq % period % n], seq)
            return issue_on(conn.primary, seq)

        return issue

    def pipeline(self) -> Pipeline | None:
        return None  # a batch is one connection's: the callback chains route per op

    def native_ops(self) -> NativeOps:
        return dataclasses.replace(super().native_ops(), router=ReplicaRouter(self),
                                   writes_to=0)


class ReplicaRouter(NativeRouter):
    """The native core's sockets of a `ReplicaConn`: the primary's first (every set),
    then each replica's (the gets of its entries)."""

    def __init__(self, client: ReadsFromReplicas) -> None:
        self.client = client
        ep = client.endpoint
        self.servers = [(ep.host, ep.port), *replicas_of(ep)]
        self.own: ReplicaConn | None = None
        self._opening = asyncio.Lock()

    def adopt(self, conn: Any) -> None:
        """Nothing to learn: the servers are fixed."""

    def routes(self) -> bytes:
        entries = np.arange(self.client.period, dtype=np.int64)
        return (entries % self.client.readers + 1).astype(np.uint8).tobytes()

    async def sockets(self, conn: Any) -> list[Any | None]:
        return [None if c.closed else c for c in (conn.primary, *conn.replicas)]

    async def learn(self, refusal: bytes | None) -> None:
        """A server was lost: the op is retried the awaited way, on fresh connections."""
        async with self._opening:
            if self.own is not None and self.own.closed:
                self.own.close()
                self.own = None

    async def execute(self, op: int, seq: int) -> tuple[int, int]:
        async with self._opening:
            if self.own is None:
                self.own = await open_replica_conn(self.client.endpoint)
            conn = self.own
        return await self.client.execute(conn, op, seq)

    def close(self) -> None:
        if self.own is not None:
            with contextlib.suppress(Exception):
                self.own.close()
            self.own = None
