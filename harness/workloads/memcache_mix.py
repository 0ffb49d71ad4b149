"""A generic memcached get/set mix over a fixed key space (memaslap's workload).

`prepare` stores every key, so gets hit unless the server evicts. Clients pick keys
uniformly at random and ops in the proportion `get_ratio`. The client (`kv_mix.MixClient`)
encodes every request once and offers the load generator's callback path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.drivers import memcache
from harness.errors import WorkloadError
from harness.services.base import Endpoint
from harness.settings import Setting
from harness.workloads import kv_mix
from harness.workloads.base import WorkloadClient
from harness.workloads.kv_mix import (
    KeyValueMix,
)

KEY_PREFIX = b"k"
MAX_KEY_BYTES = 250  # memcached's key limit
MAX_VALUE_BYTES = 1_000_000  # below memcached's default 1 MiB item limit
#: Sets kept in flight by `prepare` (pipelined on one connection).
PREPARE_INFLIGHT = 64


def key_of(i: int, key_size: int) -> bytes:
    """Key number `i`, zero-padded to exactly `key_size` bytes."""
    return kv_mix.key_of(KEY_PREFIX, i, key_size)


class MemcacheMix(KeyValueMix):
    name = "memcache_mix"
    description = "memcached get/set mix over a preloaded key space, uniform keys"
    requires = ("memcached",)
    key_prefix = KEY_PREFIX
    max_key_bytes = MAX_KEY_BYTES
    max_value_bytes = MAX_VALUE_BYTES
    server = "memcached"
    params: Mapping[str, Setting] = KeyValueMix.mix_params(
        "share of ops that are gets (memaslap: 0.9)", "length of every key")

    async def prepare(self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any]) -> None:
        self.check(params)
        ep = endpoints["memcached"]
        value = b"x" * params["value_size_bytes"]
        keys = [key_of(i, params["key_size_bytes"]) for i in range(params["key_space"])]
        mc = await memcache.connect(ep.host, ep.port)
        try:
            # Pipelined batches: a round trip per batch, not per key.
            for lo in range(0, len(keys), PREPARE_INFLIGHT):
                batch = keys[lo:lo + PREPARE_INFLIGHT]
                replies = await asyncio.gather(*(mc.set(k, value) for k in batch))
                for k, reply in zip(batch, replies, strict=True):
                    if reply != b"STORED":
                        raise WorkloadError(f"memcached answered {reply!r} to set {k!r}")
        finally:
            mc.close()

    def client(
        self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any], client_id: int
    ) -> WorkloadClient:
        self.check(params)
        return MixClient(endpoints["memcached"], params, client_id)


class MixClient(kv_mix.MixClient):
    server = "memcached"
    stored = b"STORED"
    native_protocol = "memcache"

    def __init__(self, endpoint: Endpoint, params: Mapping[str, Any], client_id: int) -> None:
        self.endpoint = endpoint
        keys = [key_of(i, params["key_size_bytes"]) for i in range(params["key_space"])]
        rng = np.random.default_rng([0x6D6D, client_id])  # reproducible, distinct per client
        super().__init__(params, keys, rng)

    def get_request(self, key: bytes) -> bytes:
        return memcache.get_request(key)

    def set_head(self, key: bytes, size: int) -> bytes:
        return memcache.set_head(key, size)

    def set_tail(self, value: bytes) -> bytes:
        return value + b"\r\n"

    async def connect(self) -> Any:
        return await memcache.connect(self.endpoint.host, self.endpoint.port)
