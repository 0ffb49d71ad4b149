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

from harness.drivers import redis as resp
from harness.services.base import Endpoint
from harness.settings import Setting
from harness.workloads.kv_mix import KeyValueMix
from harness.workloads.kv_mix import MixClient as MixClientBase
from harness.workloads.kv_mix import key_of as key_of_prefix

#: redis-benchmark's key prefix (`key:__rand_int__`, the number padded to 12 digits).
KEY_PREFIX = b"key:"
#: Redis's limit for one bulk string (proto-max-bulk-len), keys and values alike.
MAX_BULK_BYTES = 512 * 1024 * 1024


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


class RedisMix(KeyValueMix):
    name = "redis_mix"
    description = "Redis GET/SET mix over a preloaded key space, drawn keys and sizes"
    requires = ("redis",)
    key_prefix = KEY_PREFIX
    max_key_bytes = MAX_BULK_BYTES
    max_value_bytes = MAX_BULK_BYTES
    server = "Redis"
    client_class = RedisMixClient
    params: Mapping[str, Setting] = KeyValueMix.mix_params(
        "share of ops that are GETs", "length of every key (16: redis-benchmark's keys)",
        "Redis", MAX_BULK_BYTES, MAX_BULK_BYTES)

    @staticmethod
    def items(endpoint: Endpoint) -> int:
        from harness.services.redis import redis_command

        return int(redis_command(endpoint.host, endpoint.port, "DBSIZE", auth=endpoint.auth,
                                 tls=endpoint.tls))
