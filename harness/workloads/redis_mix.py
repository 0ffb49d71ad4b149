"""A GET/SET mix against one standalone Redis over a fixed key space (memcache_mix's twin).

`prepare` stores every key, so GETs hit unless something evicts or deletes them. Clients
pick keys uniformly at random and ops in the proportion `get_ratio` (1.0 or 0.0 give the
pure GET or SET load of `redis-benchmark -t get` / `-t set`). Keys are `key:` and the
zero-padded key number, so at the default 16 bytes they are exactly the keys
`redis-benchmark -r <key_space>` reads and writes.

Pipelining is the load generator's `inflight`: that many requests in flight on each
connection, matched to Redis's in-order replies by the driver's FIFO.

The client (`kv_mix.MixClient`) encodes every command once and offers the load
generator's callback path. With `read_from: replicas` (a grid key) the gets go to the
primary's replicas, spread over them, and the sets to the primary
(`harness.workloads.replica_reads`); a preload on a primary with replicas waits (WAIT)
until every replica has it. Against a Redis Cluster (a `redis_cluster` with `provides:
redis`) each op goes to its key's node, and `read_from: replicas` reads from the replicas
of the key's master (`harness.workloads.cluster_reads`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.drivers import redis as resp
from harness.errors import WorkloadError
from harness.services.base import Endpoint
from harness.settings import Setting
from harness.workloads import cluster_reads
from harness.workloads.cluster_reads import ClusterRouted, is_cluster
from harness.workloads.kv_mix import KeyValueMix
from harness.workloads.kv_mix import MixClient as MixClientBase
from harness.workloads.kv_mix import key_of as key_of_prefix
from harness.workloads.replica_reads import READ_FROM, ReadsFromReplicas, replicas_of

#: redis-benchmark's key prefix (`key:__rand_int__`, the number padded to 12 digits).
KEY_PREFIX = b"key:"
#: Redis's limit for one bulk string (proto-max-bulk-len), keys and values alike.
MAX_BULK_BYTES = 512 * 1024 * 1024
#: How long the preload waits for the replicas to acknowledge it (WAIT's timeout).
REPLICA_WAIT_MS = 60_000


def key_of(i: int, key_size: int) -> bytes:
    """Key number `i`, zero-padded to exactly `key_size` bytes."""
    return key_of_prefix(KEY_PREFIX, i, key_size)


class RedisMixClient(MixClientBase):
    server = "redis"
    stored = b"OK"
    native_protocol = "resp"
    key_prefix = KEY_PREFIX
    seed = 0x7264
    max_value_bytes = MAX_BULK_BYTES

    @staticmethod
    def get_request(key: bytes) -> bytes:
        return resp.encode((b"GET", key))

    @staticmethod
    def set_head(key: bytes, size: int) -> bytes:
        return b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n" % (len(key), key)

    @staticmethod
    def set_tail(value: bytes) -> bytes:
        return b"$%d\r\n%s\r\n" % (len(value), value)

    @staticmethod
    async def open(endpoint: Endpoint) -> Any:
        return await resp.connect(endpoint.host, endpoint.port, auth=endpoint.auth,
                                  tls=endpoint.tls)


class ReplicaReadsClient(ReadsFromReplicas, RedisMixClient):
    """`RedisMixClient` whose gets go to the primary's replicas."""


class ClusterMixClient(ClusterRouted, RedisMixClient):
    """`RedisMixClient` on a Redis Cluster: each op to its key's master."""


class ClusterReplicaReads(ClusterRouted, RedisMixClient):
    """`RedisMixClient` on a Redis Cluster: gets from the key's master's replicas."""

    from_replicas = True


class RedisMix(KeyValueMix):
    name = "redis_mix"
    description = "Redis GET/SET mix over a preloaded key space, drawn keys and sizes"
    requires = ("redis",)
    key_prefix = KEY_PREFIX
    max_key_bytes = MAX_BULK_BYTES
    max_value_bytes = MAX_BULK_BYTES
    server = "Redis"
    client_class = RedisMixClient
    params: Mapping[str, Setting] = {
        **KeyValueMix.mix_params(
            "share of ops that are GETs", "length of every key (16: redis-benchmark's keys)",
            "Redis", MAX_BULK_BYTES, MAX_BULK_BYTES),
        "read_from": Setting((str,), "primary", "where GETs go: the primary, or its replicas "
                             "(spread over them; SETs go to the primary)", choices=READ_FROM),
    }

    def check_plan(self, plan: Any) -> list[str]:
        """`read_from: replicas` needs a Redis with replicas (the workload's own, not a
        proxy's backend: a proxy decides where its reads go)."""
        if plan.params.get("read_from") != "replicas":
            return []
        behind = {n for s in plan.services.values() for n in getattr(s, "after", ())}
        mine = [s for n, s in plan.services.items() if n not in behind]
        if any(s.kind == "redis" and s.settings.get("replicas") for s in mine):
            return []
        if any(s.kind == "redis_cluster" for s in mine):
            if any(s.settings.get("replicas_per_master") or s.address for s in mine):
                return []  # (at an address: its layout says, when a client connects)
            return ["read_from: replicas needs a redis_cluster service with replicas "
                    "(settings: {replicas_per_master: N})"]
        return ["read_from: replicas needs a redis service with replicas (settings: "
                "{replicas: N}, or at an address the replicas' addresses); a proxy in front "
                "decides where reads go itself"]

    def client(self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any],
               client_id: int) -> RedisMixClient:
        self.check(params)
        ep, replicas = endpoints[self.requires[0]], params.get("read_from") == "replicas"
        cls: type[RedisMixClient] = ReplicaReadsClient if replicas else RedisMixClient
        if is_cluster(ep):
            cls = ClusterReplicaReads if replicas else ClusterMixClient
        return cls(ep, params, client_id)

    async def preload(self, endpoint: Endpoint, keys: list[bytes], sizes: Any,
                      tails: list[bytes]) -> None:
        """On a cluster, each master's keys on it, then on its replicas."""
        if not is_cluster(endpoint):
            return await super().preload(endpoint, keys, sizes, tails)
        found = await cluster_reads.read_layout(endpoint)
        for master, mine in zip(found.masters, cluster_reads.shares(found, keys),
                                strict=True):
            await super().preload(cluster_reads.endpoint_at(endpoint, master),
                                  [keys[i] for i in mine], sizes[mine], [tails[i] for i in mine])
        await cluster_reads.replicas_have_it(endpoint, found, REPLICA_WAIT_MS)

    async def prepare(self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any]) -> None:
        await super().prepare(endpoints, params)
        await self.replicas_have_it(endpoints[self.requires[0]])

    @staticmethod
    async def replicas_have_it(endpoint: Endpoint) -> None:
        """Return once every replica has what the primary holds: a PUBLISH on the kit's
        channel (Redis propagates it to its replicas, and it changes no key), then WAIT
        on that connection, which returns once the replicas acknowledged it and so
        everything before it, the preload's sets too."""
        n = len(replicas_of(endpoint))
        if not n:
            return
        acked = await resp.replicas_acknowledged(await RedisMixClient.open(endpoint), n,
                                                 REPLICA_WAIT_MS)
        if not isinstance(acked, int) or acked < n:
            raise WorkloadError(f"only {acked!r} of the {n} replicas acknowledged the preload "
                                f"within {REPLICA_WAIT_MS / 1000:g} s; look at their links "
                                "(INFO replication)")

    @staticmethod
    def items(endpoint: Endpoint) -> int:
        if is_cluster(endpoint):
            return cluster_reads.items(endpoint)
        from harness.services.redis import redis_command

        return int(redis_command(endpoint.host, endpoint.port, "DBSIZE", auth=endpoint.auth,
                                 tls=endpoint.tls))
