"""What the get/set-mix workloads share (memcache_mix, redis_mix): parameters and their
checks, key naming, and the client.

Everything random is drawn once per client (seeded, distinct per client) into plain
lists indexed by the op's sequence number, and every request is encoded once per key,
so an op is a list lookup or two and one `send` with a reply handler made once per slot
(the load generator's callback path, see `harness.loadgen`).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from harness.errors import WorkloadError
from harness.results import MISS, OK, OUTCOME_BYTES_SHIFT, outcome
from harness.services.base import Endpoint
from harness.settings import Setting, check_bounds
from harness.workloads.base import Issue, NativeOps, Pipeline, Workload, WorkloadClient

OPS = ("get", "set")
GET, SET = 0, 1
#: Length of the precomputed op pattern and key sequence; they repeat after this many ops.
#: Different lengths (the key one odd) so the (op, key) pairs repeat far less often.
OP_PATTERN_LEN = 1 << 16
KEY_SEQ_LEN = (1 << 17) + 1
#: Sets per pipelined batch in `prepare`.
PREPARE_BATCH = 1000
#: Keys of a key space: every client process encodes a get and a set of each key (about
#: 270 bytes a key, measured), so 4 M keys are about 1 GiB in each client process.
MAX_KEY_SPACE = 4_000_000
KEY_SPACE_WHY = "each client process holds ~270 bytes per key"


def key_of(prefix: bytes, i: int, key_size: int) -> bytes:
    """Key number `i`, zero-padded after `prefix` to exactly `key_size` bytes."""
    return prefix + b"%0*d" % (key_size - len(prefix), i)


def op_pattern(get_ratio: float, rng: np.random.Generator) -> list[int]:
    """Exactly round(ratio * length) gets per pattern period, in random order."""
    n_gets = round(float(get_ratio) * OP_PATTERN_LEN)
    pattern = np.full(OP_PATTERN_LEN, SET, np.int8)
    pattern[:n_gets] = GET
    rng.shuffle(pattern)
    return pattern.tolist()


def key_picks(key_space: int, rng: np.random.Generator) -> list[int]:
    """Uniform key numbers, one per op of a key-sequence period (plain ints: a list
    lookup is the cheapest index in the hot path)."""
    return rng.integers(0, key_space, KEY_SEQ_LEN).tolist()


class KeyValueMix(Workload):
    """A get/set mix over a key space that `prepare` loads; subclasses add the protocol."""

    ops = OPS
    #: Set by subclasses: what keys start with, the server's limits, its name in messages.
    key_prefix: bytes
    max_key_bytes: int
    max_value_bytes: int
    server: str
    #: The client class: its encoders and connection also serve `prepare`.
    client_class: type[MixClient]

    @staticmethod
    def mix_params(get_help: str, key_help: str, server: str, max_key_bytes: int,
                   max_value_bytes: int) -> dict[str, Setting]:
        limit = f"{server}'s limit"
        return {
            "get_ratio": Setting((float,), 0.9, get_help, low=0, high=1),
            "key_space": Setting((int,), 10000, "number of distinct keys, all loaded by prepare",
                                 low=1, high=MAX_KEY_SPACE, why=KEY_SPACE_WHY),
            "key_size_bytes": Setting((int,), 16, key_help, low=1, high=max_key_bytes,
                                      why=limit),
            "value_size_bytes": Setting((int,), 100, "length of every value", low=1,
                                        high=max_value_bytes, why=limit),
        }

    def key(self, i: int, key_size: int) -> bytes:
        return key_of(self.key_prefix, i, key_size)

    def _min_key_size(self, key_space: int) -> int:
        return len(self.key_prefix) + len(str(max(key_space - 1, 0)))

    def validate(self, params: Mapping[str, Any], grid: Mapping[str, Any]) -> list[str]:
        """Keys long enough to number the key space (each value's own range is its
        Setting's)."""
        def values(name: str) -> list[Any]:
            return [v for v in grid.get(name, [params[name]]) if isinstance(v, int)]

        spaces, sizes = values("key_space"), values("key_size_bytes")
        if spaces and sizes and min(sizes) < self._min_key_size(max(spaces)):
            return [f"key_size_bytes must be at least {self._min_key_size(max(spaces))} to "
                    f"number {max(spaces)} keys"]
        return []

    def check(self, params: Mapping[str, Any]) -> None:
        """The resolved params of one run, checked as a spec's are (prepare and client
        call it: they may be called without a spec)."""
        bounds = ((k, check_bounds(params.get(k), s)) for k, s in self.params.items())
        problems = [f"{k} {m}" for k, m in bounds if m] + self.validate(params, {})
        if problems:
            raise WorkloadError(f"{self.name}: {'; '.join(problems)}")

    def client(
        self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any], client_id: int
    ) -> WorkloadClient:
        self.check(params)
        return self.client_class(endpoints[self.requires[0]], params, client_id)

    async def prepare(self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any]) -> None:
        """Set every key, with the client's own encoders, in pipelined batches: one
        round trip per batch, not per key (the driver coalesces the writes)."""
        self.check(params)
        cls = self.client_class
        size = params["value_size_bytes"]
        tail = cls.set_tail(b"x" * size)
        keys = [self.key(i, params["key_size_bytes"]) for i in range(params["key_space"])]
        conn = await cls.open(endpoints[self.requires[0]])
        try:
            for lo in range(0, len(keys), PREPARE_BATCH):
                batch = keys[lo:lo + PREPARE_BATCH]
                futs = [conn.call(cls.set_head(k, size) + tail) for k in batch]
                for k, fut in zip(batch, futs, strict=True):
                    reply = await fut
                    if reply != cls.stored:
                        raise WorkloadError(f"{self.server} answered {reply!r} to set {k!r}")
        finally:
            conn.close()


class MixClient(WorkloadClient):
    """One process's client of a mix: requests encoded once per key, op pattern and key
    picks drawn once; `get_seq[j]` and `set_seq[j]` (a set request up to its value,
    completed by `value_tail`) name the same key, indexed by `seq` modulo their length.
    Both drivers take encoded requests (`send` with a reply callback, `call` for a
    future), so one client serves both; a subclass says how to encode and connect."""

    #: The server's name in messages, and its reply to a successful set.
    server: str
    stored: bytes
    #: The native core's name of the protocol (see `NativeOps`).
    native_protocol: str
    #: What keys start with, and the seed that, with the client id, draws its ops.
    key_prefix: bytes
    seed: int

    def __init__(self, endpoint: Endpoint, params: Mapping[str, Any], client_id: int) -> None:
        self.endpoint = endpoint
        keys = [key_of(self.key_prefix, i, params["key_size_bytes"])
                for i in range(params["key_space"])]
        rng = np.random.default_rng([self.seed, client_id])  # reproducible, distinct per client
        self.size = params["value_size_bytes"]
        self.op_pattern: list[int] = op_pattern(params["get_ratio"], rng)
        picks = key_picks(len(keys), rng)
        # Encoded once per key; the sequences only hold references to these bytes.
        gets = [self.get_request(k) for k in keys]
        heads = [self.set_head(k, self.size) for k in keys]
        self.get_seq: list[bytes] = [gets[i] for i in picks]
        self.set_seq: list[bytes] = [heads[i] for i in picks]
        # For `native_ops`: the per-key requests and the picks, so its tables are made
        # with numpy, not by walking the sequences (the worker's time to ready).
        self._per_key = (gets, heads)
        self._picks = np.asarray(picks, np.int64)
        self.value_tail = self.set_tail(b"x" * self.size)

    # The encoders and `open` are static: `KeyValueMix.prepare` uses them without a client.
    @staticmethod
    @abc.abstractmethod
    def get_request(key: bytes) -> bytes:
        """The encoded get of `key`."""

    @staticmethod
    @abc.abstractmethod
    def set_head(key: bytes, size: int) -> bytes:
        """The encoded set of `key` up to its value."""

    @staticmethod
    @abc.abstractmethod
    def set_tail(value: bytes) -> bytes:
        """The rest of every set request: the value as the protocol frames it."""

    @staticmethod
    @abc.abstractmethod
    async def open(endpoint: Endpoint) -> Any:
        """A connection to the server at `endpoint` (a driver with `send` and `call`)."""

    async def connect(self) -> Any:
        return await self.open(self.endpoint)

    async def close(self, conn: Any) -> None:
        conn.close()

    def next_op(self, seq: int) -> int:
        return self.op_pattern[seq & (OP_PATTERN_LEN - 1)]

    def _unexpected(self, reply: Any, op: str) -> BaseException:
        if isinstance(reply, OSError):
            return reply  # the connection failed
        return WorkloadError(f"{self.server} answered {reply!r} to {op}")

    async def execute(self, conn: Any, op: int, seq: int) -> tuple[int, int]:
        if op == GET:
            value = await conn.call(self.get_seq[seq % KEY_SEQ_LEN])
            if type(value) is bytes:
                return OK, len(value)
            if value is None:
                return MISS, 0
            raise self._unexpected(value, "get")
        reply = await conn.call(self.set_seq[seq % KEY_SEQ_LEN] + self.value_tail)
        if reply != self.stored:
            raise self._unexpected(reply, "set")
        return OK, self.size

    def issuer(self, done: Callable[[int], None],
               fail: Callable[[BaseException], None]) -> Issue:
        get_seq, set_seq, tail, stored = self.get_seq, self.set_seq, self.value_tail, self.stored
        pattern = self.op_pattern
        hit, miss, set_ok = outcome(OK, 0), outcome(MISS, 0), outcome(OK, self.size)
        unexpected = self._unexpected

        def on_get(value: Any) -> None:
            if value.__class__ is bytes:
                done(hit | len(value) << OUTCOME_BYTES_SHIFT)
            elif value is None:
                done(miss)
            else:
                fail(unexpected(value, "get"))

        def on_set(reply: Any) -> None:
            if reply == stored:
                done(set_ok)
            else:
                fail(unexpected(reply, "set"))

        def issue(conn: Any, seq: int) -> int:
            if pattern[seq & (OP_PATTERN_LEN - 1)] == GET:
                conn.send(get_seq[seq % KEY_SEQ_LEN], on_get)
                return GET
            conn.send(set_seq[seq % KEY_SEQ_LEN] + tail, on_set)
            return SET

        return issue

    def pipeline(self) -> Pipeline:
        return MixPipeline(self)

    def native_ops(self) -> NativeOps:
        picks = self._picks

        def table(per_key: list[bytes]) -> tuple[bytes, bytes]:
            """Entry j is per_key[picks[j]]: the requests of `get_seq` / `set_seq`."""
            lengths = np.fromiter(map(len, per_key), np.uint32, len(per_key))
            offsets = np.zeros(len(picks) + 1, np.uint32)
            np.cumsum(lengths[picks], out=offsets[1:])
            if lengths.min() == lengths.max():  # fixed-size keys: a gather of rows
                rows = np.frombuffer(b"".join(per_key), np.uint8).reshape(len(per_key), -1)
                return rows[picks].tobytes(), offsets.tobytes()
            return b"".join([per_key[i] for i in picks.tolist()]), offsets.tobytes()

        gets, get_offsets = table(self._per_key[0])
        sets, set_offsets = table(self._per_key[1])
        return NativeOps(protocol=self.native_protocol,
                         pattern=np.asarray(self.op_pattern, np.uint8).tobytes(), get_op=GET,
                         gets=gets, get_offsets=get_offsets, sets=sets,
                         set_offsets=set_offsets, set_tail=self.value_tail,
                         set_ok_outcome=outcome(OK, self.size))


class MixPipeline(Pipeline):
    """`MixClient`'s batches: one write of encoded requests, replies judged in a loop."""

    def __init__(self, client: MixClient) -> None:
        self.client = client
        self.hit, self.miss = outcome(OK, 0) | GET, outcome(MISS, 0) | GET
        self.set_ok = outcome(OK, client.size) | SET

    def send(self, conn: Any, seqs: range) -> None:
        c = self.client
        pattern, get_seq, set_seq, tail = c.op_pattern, c.get_seq, c.set_seq, c.value_tail
        conn.send_batch(b"".join([
            get_seq[s % KEY_SEQ_LEN] if pattern[s & (OP_PATTERN_LEN - 1)] == GET
            else set_seq[s % KEY_SEQ_LEN] + tail for s in seqs]), len(seqs))

    def outcomes(self, replies: list[Any], seqs: list[int]) -> list[int | BaseException]:
        c = self.client
        pattern, stored, unexpected = c.op_pattern, c.stored, c._unexpected
        hit, miss, set_ok = self.hit, self.miss, self.set_ok
        out: list[int | BaseException] = []
        add = out.append
        for value, s in zip(replies, seqs, strict=True):
            if pattern[s & (OP_PATTERN_LEN - 1)] == GET:
                if value.__class__ is bytes:
                    add(hit | len(value) << OUTCOME_BYTES_SHIFT)
                elif value is None:
                    add(miss)
                else:
                    add(unexpected(value, "get"))
            else:
                add(set_ok if value == stored else unexpected(value, "set"))
        return out
