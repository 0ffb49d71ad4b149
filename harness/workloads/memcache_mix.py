"""A generic memcached get/set mix over a fixed key space (memaslap's workload).

`prepare` stores every key, so gets hit unless the server evicts. Clients pick keys
uniformly at random and ops in the proportion `get_ratio`. The client (`kv_mix.MixClient`)
encodes every request once and offers the load generator's callback path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.drivers import memcache
from harness.services.base import Endpoint
from harness.settings import Setting
from harness.workloads.kv_mix import KeyValueMix
from harness.workloads.kv_mix import MixClient as MixClientBase
from harness.workloads.kv_mix import key_of as key_of_prefix

KEY_PREFIX = b"k"
MAX_KEY_BYTES = 250  # memcached's key limit
MAX_VALUE_BYTES = 1_000_000  # below memcached's default 1 MiB item limit


def key_of(i: int, key_size: int) -> bytes:
    """Key number `i`, zero-padded to exactly `key_size` bytes."""
    return key_of_prefix(KEY_PREFIX, i, key_size)


class MixClient(MixClientBase):
    server = "memcached"
    stored = b"STORED"
    native_protocol = "memcache"
    key_prefix = KEY_PREFIX
    seed = 0x6D6D
    max_value_bytes = MAX_VALUE_BYTES

    @staticmethod
    def get_request(key: bytes) -> bytes:
        return memcache.get_request(key)

    @staticmethod
    def set_head(key: bytes, size: int) -> bytes:
        return memcache.set_head(key, size)

    @staticmethod
    def set_tail(value: bytes) -> bytes:
        return value + b"\r\n"

    @staticmethod
    async def open(endpoint: Endpoint) -> Any:
        return await memcache.connect(endpoint.host, endpoint.port, tls=endpoint.tls)


class MemcacheMix(KeyValueMix):
    name = "memcache_mix"
    description = "memcached get/set mix over a preloaded key space, drawn keys and sizes"
    requires = ("memcached",)
    key_prefix = KEY_PREFIX
    max_key_bytes = MAX_KEY_BYTES
    max_value_bytes = MAX_VALUE_BYTES
    server = "memcached"
    client_class = MixClient
    params: Mapping[str, Setting] = KeyValueMix.mix_params(
        "share of ops that are gets (memaslap: 0.9)", "length of every key", "memcached",
        MAX_KEY_BYTES, MAX_VALUE_BYTES)

    @staticmethod
    def items(endpoint: Endpoint) -> int:
        from harness.services.memcached import memcached_stats

        return int(memcached_stats(endpoint.host, endpoint.port, tls=endpoint.tls)
                   ["curr_items"])
