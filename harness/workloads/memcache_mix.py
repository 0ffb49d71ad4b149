"""A generic memcached get/set mix over a fixed key space (memaslap's workload).

`prepare` stores every key, so gets hit unless the server evicts. Clients pick keys
uniformly at random and ops in the proportion `get_ratio`. Everything random is drawn in
the constructor (a per-client seeded RNG) into plain lists indexed by the op's sequence
number: the hot path is two list lookups and one request, so one Python process can keep
up with C load generators.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.drivers import memcache
from harness.errors import WorkloadError
from harness.results import MISS, OK
from harness.services.base import Endpoint
from harness.settings import Setting
from harness.workloads.base import Workload, WorkloadClient

OPS = ("get", "set")
GET, SET = 0, 1
KEY_PREFIX = b"k"
MAX_KEY_BYTES = 250  # memcached's key limit
MAX_VALUE_BYTES = 1_000_000  # below memcached's default 1 MiB item limit
#: Length of the precomputed op pattern and key sequence; they repeat after this many ops.
#: Different lengths (the key one odd) so the (op, key) pairs repeat far less often.
OP_PATTERN_LEN = 1 << 16
KEY_SEQ_LEN = (1 << 17) + 1
#: Sets kept in flight by `prepare` (pipelined on one connection).
PREPARE_INFLIGHT = 64


def key_of(i: int, key_size: int) -> bytes:
    """Key number `i`, zero-padded to exactly `key_size` bytes."""
    return KEY_PREFIX + b"%0*d" % (key_size - len(KEY_PREFIX), i)


def _min_key_size(key_space: int) -> int:
    return len(KEY_PREFIX) + len(str(max(key_space - 1, 0)))


class MemcacheMix(Workload):
    name = "memcache_mix"
    description = "memcached get/set mix over a preloaded key space, uniform keys"
    ops = OPS
    requires = ("memcached",)
    params: Mapping[str, Setting] = {
        "get_ratio": Setting((float,), 0.9, "share of ops that are gets (memaslap: 0.9)"),
        "key_space": Setting((int,), 10000, "number of distinct keys, all loaded by prepare"),
        "key_size_bytes": Setting((int,), 16, "length of every key"),
        "value_size_bytes": Setting((int,), 100, "length of every value"),
    }

    def validate(self, params: Mapping[str, Any], grid: Mapping[str, Any]) -> list[str]:
        def values(name: str) -> list[Any]:
            return [v for v in grid.get(name, [params[name]]) if isinstance(v, (int, float))]

        problems = []
        if any(not 0.0 <= r <= 1.0 for r in values("get_ratio")):
            problems.append("get_ratio must be between 0 and 1")
        spaces = values("key_space")
        if any(n < 1 for n in spaces):
            problems.append("key_space must be at least 1")
        sizes = values("key_size_bytes")
        if any(s > MAX_KEY_BYTES for s in sizes):
            problems.append(f"key_size_bytes must be at most {MAX_KEY_BYTES} (memcached's limit)")
        if spaces and sizes and min(sizes) < _min_key_size(max(spaces)):
            problems.append(f"key_size_bytes must be at least {_min_key_size(max(spaces))} "
                            f"to number {max(spaces)} keys")
        if any(not 1 <= s <= MAX_VALUE_BYTES for s in values("value_size_bytes")):
            problems.append(f"value_size_bytes must be between 1 and {MAX_VALUE_BYTES}")
        return problems

    async def prepare(self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any]) -> None:
        self._check(params)
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

    def _check(self, params: Mapping[str, Any]) -> None:
        problems = self.validate(params, {})
        if problems:
            raise WorkloadError(f"{self.name}: {'; '.join(problems)}")

    def client(
        self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any], client_id: int
    ) -> WorkloadClient:
        self._check(params)
        return MixClient(endpoints["memcached"], params, client_id)


class MixClient(WorkloadClient):
    """One process's client. `op_pattern` and `key_seq` are indexed by `seq` modulo length."""

    def __init__(self, endpoint: Endpoint, params: Mapping[str, Any], client_id: int) -> None:
        self.endpoint = endpoint
        size = params["value_size_bytes"]
        self.value = b"x" * size
        keys = [key_of(i, params["key_size_bytes"]) for i in range(params["key_space"])]
        rng = np.random.default_rng([0x6D6D, client_id])  # reproducible, distinct per client
        # Exactly round(ratio * len) gets per pattern period, in random order.
        n_gets = round(float(params["get_ratio"]) * OP_PATTERN_LEN)
        pattern = np.full(OP_PATTERN_LEN, SET, np.int8)
        pattern[:n_gets] = GET
        rng.shuffle(pattern)
        self.op_pattern: list[int] = pattern.tolist()
        # Keys as list items (not numpy scalars): a list lookup is the cheapest index.
        self.key_seq: list[bytes] = [keys[i] for i in
                                     rng.integers(0, len(keys), KEY_SEQ_LEN).tolist()]
        self._set_result = (OK, size)
        self._miss_result = (MISS, 0)

    async def connect(self) -> Any:
        return await memcache.connect(self.endpoint.host, self.endpoint.port)

    async def close(self, conn: Any) -> None:
        conn.close()

    def next_op(self, seq: int) -> int:
        return self.op_pattern[seq & (OP_PATTERN_LEN - 1)]

    async def execute(self, conn: Any, op: int, seq: int) -> tuple[int, int]:
        key = self.key_seq[seq % KEY_SEQ_LEN]
        if op == GET:
            value = await conn.get(key)
            return self._miss_result if value is None else (OK, len(value))
        reply = await conn.set(key, self.value)
        if reply != b"STORED":
            raise WorkloadError(f"memcached answered {reply!r} to set")
        return self._set_result
