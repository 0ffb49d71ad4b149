"""A GET/SET mix against one standalone Redis over a fixed key space (memcache_mix's twin).

`prepare` stores every key, so GETs hit unless something evicts or deletes them. Clients
pick keys uniformly at random and ops in the proportion `get_ratio` (1.0 or 0.0 give the
pure GET or SET load of `redis-benchmark -t get` / `-t set`). Keys are `key:` and the
zero-padded key number, so at the default 16 bytes they are exactly the keys
`redis-benchmark -r <key_space>` reads and writes.

Pipelining is the load generator's `inflight`: that many requests in flight on each
connection, matched to Redis's in-order replies by the driver's FIFO.

Every command is encoded in the constructor (a GET per key, a SET's head per key and the
value's tail once), and everything random is drawn there into plain lists indexed by the
op's sequence number: the hot path is a list lookup and one `send`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.drivers import redis as resp
from harness.errors import WorkloadError
from harness.results import MISS, OK
from harness.services.base import Endpoint
from harness.settings import Setting
from harness.workloads.base import Workload, WorkloadClient

OPS = ("get", "set")
GET, SET = 0, 1
#: redis-benchmark's key prefix (`key:__rand_int__`, the number padded to 12 digits).
KEY_PREFIX = b"key:"
#: Redis's limit for one bulk string (proto-max-bulk-len), keys and values alike.
MAX_BULK_BYTES = 512 * 1024 * 1024
#: Length of the precomputed op pattern and key sequence; they repeat after this many ops.
#: Different lengths (the key one odd) so the (op, key) pairs repeat far less often.
OP_PATTERN_LEN = 1 << 16
KEY_SEQ_LEN = (1 << 17) + 1
#: Commands per pipelined batch in `prepare` (one write, one round trip per batch).
PREPARE_BATCH = 1000


def key_of(i: int, key_size: int) -> bytes:
    """Key number `i`, zero-padded to exactly `key_size` bytes."""
    return KEY_PREFIX + b"%0*d" % (key_size - len(KEY_PREFIX), i)


def _min_key_size(key_space: int) -> int:
    return len(KEY_PREFIX) + len(str(max(key_space - 1, 0)))


class RedisMix(Workload):
    name = "redis_mix"
    description = "Redis GET/SET mix over a preloaded key space, uniform keys"
    ops = OPS
    requires = ("redis",)
    params: Mapping[str, Setting] = {
        "get_ratio": Setting((float,), 0.9, "share of ops that are GETs"),
        "key_space": Setting((int,), 10000, "number of distinct keys, all loaded by prepare"),
        "key_size_bytes": Setting((int,), 16,
                                  "length of every key (16: redis-benchmark's keys)"),
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
        if any(s > MAX_BULK_BYTES for s in sizes):
            problems.append(f"key_size_bytes must be at most {MAX_BULK_BYTES} (Redis's limit)")
        if spaces and sizes and min(sizes) < _min_key_size(max(spaces)):
            problems.append(f"key_size_bytes must be at least {_min_key_size(max(spaces))} "
                            f"to number {max(spaces)} keys")
        if any(not 1 <= s <= MAX_BULK_BYTES for s in values("value_size_bytes")):
            problems.append(f"value_size_bytes must be between 1 and {MAX_BULK_BYTES}")
        return problems

    def _check(self, params: Mapping[str, Any]) -> None:
        problems = self.validate(params, {})
        if problems:
            raise WorkloadError(f"{self.name}: {'; '.join(problems)}")

    async def prepare(self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any]) -> None:
        self._check(params)
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
        self._check(params)
        return RedisMixClient(endpoints["redis"], params, client_id)


class RedisMixClient(WorkloadClient):
    """One process's client. `op_pattern`, `get_seq` and `set_seq` are indexed by `seq`
    modulo their length; `get_seq[j]` and `set_seq[j]` name the same key."""

    def __init__(self, endpoint: Endpoint, params: Mapping[str, Any], client_id: int) -> None:
        self.endpoint = endpoint
        size = params["value_size_bytes"]
        keys = [key_of(i, params["key_size_bytes"]) for i in range(params["key_space"])]
        rng = np.random.default_rng([0x7264, client_id])  # reproducible, distinct per client
        # Exactly round(ratio * len) GETs per pattern period, in random order.
        n_gets = round(float(params["get_ratio"]) * OP_PATTERN_LEN)
        pattern = np.full(OP_PATTERN_LEN, SET, np.int8)
        pattern[:n_gets] = GET
        rng.shuffle(pattern)
        self.op_pattern: list[int] = pattern.tolist()
        # Encoded once per key; the sequences only hold references to these bytes.
        gets = [resp.encode((b"GET", k)) for k in keys]
        set_heads = [b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n" % (len(k), k) for k in keys]
        self.value_tail = b"$%d\r\n%s\r\n" % (size, b"x" * size)
        picks = rng.integers(0, len(keys), KEY_SEQ_LEN).tolist()
        self.get_seq: list[bytes] = [gets[i] for i in picks]
        self.set_seq: list[bytes] = [set_heads[i] for i in picks]
        self._set_result = (OK, size)
        self._miss_result = (MISS, 0)

    async def connect(self) -> Any:
        return await resp.connect(self.endpoint.host, self.endpoint.port)

    async def close(self, conn: Any) -> None:
        conn.close()

    def next_op(self, seq: int) -> int:
        return self.op_pattern[seq & (OP_PATTERN_LEN - 1)]

    async def execute(self, conn: Any, op: int, seq: int) -> tuple[int, int]:
        if op == GET:
            value = await conn.send(self.get_seq[seq % KEY_SEQ_LEN])
            if type(value) is bytes:
                return OK, len(value)
            if value is None:
                return self._miss_result
            raise WorkloadError(f"redis answered {value!r} to GET")
        reply = await conn.send(self.set_seq[seq % KEY_SEQ_LEN] + self.value_tail)
        if reply != b"OK":
            raise WorkloadError(f"redis answered {reply!r} to SET")
        return self._set_result
