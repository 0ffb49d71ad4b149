"""A GET/SET mix against one standalone Redis over a fixed key space (memcache_mix's twin).

`prepare` stores every key, so GETs hit unless something evicts or deletes them. Clients
pick keys uniformly at random and ops in the proportion `get_ratio` (1.0 or 0.0 give the
pure GET or SET load of `redis-benchmark -t get` / `-t set`). Keys are `key:` and the
zero-padded key number, so at the default 16 bytes they are exactly the keys
`redis-benchmark -r <key_space>` reads and writes.

Pipelining is the load generator's `inflight`: that many requests in flight on each
connection, matched to Redis's in-order replies by the driver's FIFO.

The client (`kv_mix.MixClient`) encodes every command once and offers the load
generator's callback path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.drivers import redis as resp
from harness.errors import WorkloadError
from harness.services.base import Endpoint
from harness.settings import Setting
from harness.workloads import kv_mix
from harness.workloads.base import WorkloadClient
from harness.workloads.kv_mix import (
    KeyValueMix,
)

#: redis-benchmark's key prefix (`key:__rand_int__`, the number padded to 12 digits).
KEY_PREFIX = b"key:"
#: Redis's limit for one bulk string (proto-max-bulk-len), keys and values alike.
MAX_BULK_BYTES = 512 * 1024 * 1024
#: Commands per pipelined batch in `prepare` (one write, one round trip per batch).
PREPARE_BATCH = 1000


def key_of(i: int, key_size: int) -> bytes:
    """Key number `i`, zero-padded to exactly `key_size` bytes."""
    return kv_mix.key_of(KEY_PREFIX, i, key_size)


class RedisMix(KeyValueMix):
    name = "redis_mix"
    description = "Redis GET/SET mix over a preloaded key space, uniform keys"
    requires = ("redis",)
    key_prefix = KEY_PREFIX
    max_key_bytes = MAX_BULK_BYTES
    max_value_bytes = MAX_BULK_BYTES
    server = "Redis"
    params: Mapping[str, Setting] = KeyValueMix.mix_params(
        "share of ops that are GETs", "length of every key (16: redis-benchmark's keys)")

    async def prepare(self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any]) -> None:
        self.check(params)
        ep = endpoints["redis"]
        value = b"x" * params["value_size_bytes"]
        keys = [key_of(i, params["key_size_bytes"]) for i in range(params["key_space"])]
        conn = await resp.connect(ep.host, ep.port)
        try:
            for lo in range(0, len(keys), PREPARE_BATCH):
                batch = keys[lo:lo + PREPARE_BATCH]
                futs = conn.pipeline([(b"SET", k, value) for k in batch])
                for k, fut in zip(batch, futs, strict=True):
                    reply = await fut
                    if reply != b"OK":
                        raise WorkloadError(f"redis answered {reply!r} to SET {k!r}")
        finally:
            conn.close()

    def client(
        self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any], client_id: int
    ) -> WorkloadClient:
        self.check(params)
        return RedisMixClient(endpoints["redis"], params, client_id)


class RedisMixClient(kv_mix.MixClient):
    server = "redis"
    stored = b"OK"
    native_protocol = "resp"

    def __init__(self, endpoint: Endpoint, params: Mapping[str, Any], client_id: int) -> None:
        self.endpoint = endpoint
        keys = [key_of(i, params["key_size_bytes"]) for i in range(params["key_space"])]
        rng = np.random.default_rng([0x7264, client_id])  # reproducible, distinct per client
        super().__init__(params, keys, rng)

    def get_request(self, key: bytes) -> bytes:
        return resp.encode((b"GET", key))

    def set_head(self, key: bytes, size: int) -> bytes:
        return b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n" % (len(key), key)

    def set_tail(self, value: bytes) -> bytes:
        return b"$%d\r\n%s\r\n" % (len(value), value)

    async def connect(self) -> Any:
        return await resp.connect(self.endpoint.host, self.endpoint.port)
