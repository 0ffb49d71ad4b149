"""What the get/set-mix workloads share (memcache_mix, redis_mix): parameters and their
checks, key naming, and the client.

Everything random is drawn once per client (seeded, distinct per client) into plain
lists indexed by the op's sequence number, and every request is encoded once per key,
so an op is a list lookup or two and one `send` with a reply handler made once per slot
(the load generator's callback path, see `harness.loadgen`).
"""

from __future__ import annotations

import abc
import asyncio
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from harness.errors import HarnessError, WorkloadError
from harness.results import MISS, OK, OUTCOME_BYTES_SHIFT, outcome
from harness.services.base import Endpoint
from harness.settings import Setting, check_bounds
from harness.workloads import mix_dists, mix_preload
from harness.workloads.base import (
    Issue,
    NativeOps,
    Pipeline,
    Workload,
    WorkloadClient,
    request_table,
)

OPS = ("get", "set")
GET, SET = 0, 1
#: Length of the precomputed op pattern and key sequence; they repeat after this many ops.
#: Different lengths (the key one odd) so the (op, key) pairs repeat far less often.
OP_PATTERN_LEN = 1 << 16
KEY_SEQ_LEN = (1 << 17) + 1
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


def value_tails(sizes: np.ndarray, set_tail: Callable[[bytes], bytes]) -> list[bytes]:
    """The rest of each set request after its head, for value sizes `sizes`: one bytes
    object per distinct size, shared by the entries of that size."""
    by_size = {int(s): set_tail(b"x" * int(s)) for s in np.unique(sizes)}
    return [by_size[s] for s in sizes.tolist()]


class KeyValueMix(Workload):
    """A get/set mix over a key space that `prepare` loads; subclasses add the protocol."""

    reusable_client = True

    ops = OPS
    records_keys = True
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
        return {**KeyValueMix._own_params(get_help, key_help, limit, max_key_bytes,
                                          max_value_bytes),
                **mix_dists.dist_params(max_value_bytes, server)}

    @staticmethod
    def _own_params(get_help: str, key_help: str, limit: str, max_key_bytes: int,
                    max_value_bytes: int) -> dict[str, Setting]:
        return {
            "get_ratio": Setting((float,), 0.9, get_help, low=0, high=1),
            "key_space": Setting((int,), 10000, "number of distinct keys, all loaded by prepare",
                                 low=1, high=MAX_KEY_SPACE, why=KEY_SPACE_WHY),
            "key_size_bytes": Setting((int,), 16, key_help, low=1, high=max_key_bytes,
                                      why=limit),
            "value_size_bytes": Setting((int,), 100, "length of every value (value_dist "
                                        "fixed)", low=1, high=max_value_bytes, why=limit),
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
        out = []
        if spaces and sizes and min(sizes) < self._min_key_size(max(spaces)):
            out.append(f"key_size_bytes must be at least {self._min_key_size(max(spaces))} "
                       f"to number {max(spaces)} keys")
        # The distributions' settings together, for each grid value of the one that varies.
        for name in ("value_dist", "value_sizes", "value_size_min_bytes",
                     "value_size_max_bytes"):
            for v in grid.get(name, [params.get(name)]):
                out += [p for p in mix_dists.problems({**params, name: v}, self.max_value_bytes)
                        if p not in out]
        return out

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

    #: The parameters that decide what `prepare` stores (keys and their values' sizes).
    DATA_PARAMS = ("key_space", "key_size_bytes", "value_dist", "value_size_bytes",
                   "value_size_min_bytes", "value_size_max_bytes", "value_sizes")

    def kept_data(self, params: Mapping[str, Any]) -> str | None:
        """Every key of the key space, its value drawn from the run's sizes: runs get and
        set those keys only, sets drawing sizes from the same distribution, so they
        leave the data as they found it (the server's item count tells an eviction)."""
        return json.dumps({"workload": self.name,
                           **{k: params.get(k) for k in self.DATA_PARAMS}},
                          sort_keys=True, default=str)

    async def data_intact(self, endpoints: Mapping[str, Endpoint],
                          params: Mapping[str, Any]) -> bool:
        endpoint = endpoints[self.requires[0]]
        try:
            count = await asyncio.to_thread(self.items, endpoint)
        except (OSError, HarnessError, KeyError, ValueError, TypeError):
            return False  # no count to trust (a proxy, a server without stats): prepare
        return count == int(params["key_space"])  # servers the kit started hold only these

    @staticmethod
    def items(endpoint: Endpoint) -> int:  # how many keys the server holds (one request)
        raise NotImplementedError

    async def prepare(self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any]) -> None:
        """Set every key, with the client's own encoders, in pipelined batches: one
        round trip per batch, not per key (the driver coalesces the writes)."""
        self.check(params)
        cls = self.client_class
        keys = [self.key(i, params["key_size_bytes"]) for i in range(params["key_space"])]
        # Each key's first value drawn from the run's value sizes (seeded, the same in
        # every prepare), so gets return the sizes the spec asks for from the start.
        sizes = mix_dists.value_sizes(params, np.random.default_rng([cls.seed, 1 << 32]),
                                      len(keys), self.max_value_bytes)
        tails = value_tails(sizes, cls.set_tail)
        await self.preload(endpoints[self.requires[0]], keys, sizes, tails)

    async def preload(self, endpoint: Endpoint, keys: list[bytes], sizes: Any,
                      tails: list[bytes]) -> None:
        """Store `keys` (`mix_preload.preload`; a subclass may spread them over servers)."""
        await mix_preload.preload(self.client_class, self.server, endpoint, keys, sizes, tails)


class MixClient(WorkloadClient):
    """One process's client of a mix: requests encoded once per key, op pattern and key
    picks drawn once; `get_seq[j]` and `set_seq[j]` (a set request up to its value,
    completed by `tail_seq[j]`) name the same key, indexed by `seq` modulo `period`.
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

    #: The server's largest value (`KeyValueMix.max_value_bytes`).
    max_value_bytes: int

    def __init__(self, endpoint: Endpoint, params: Mapping[str, Any], client_id: int) -> None:
        self.endpoint = endpoint
        keys = [key_of(self.key_prefix, i, params["key_size_bytes"])
                for i in range(params["key_space"])]
        rng = np.random.default_rng([self.seed, client_id])  # reproducible, distinct per client
        self.op_pattern: list[int] = op_pattern(params["get_ratio"], rng)
        #: Picks repeat after `period` ops (`mix_dists.pick_period`).
        self.period = mix_dists.pick_period(params, len(keys), KEY_SEQ_LEN)
        picks = mix_dists.key_picks(params, len(keys), rng, self.period)
        fixed = params.get("value_dist", "fixed") == "fixed"
        sizes = mix_dists.value_sizes(params, rng, 1 if fixed else self.period,
                                      self.max_value_bytes)
        #: The value size of each entry's set (one entry: every set's).
        self.sizes: list[int] = sizes.tolist()
        self.size = int(sizes[0]) if fixed else -1
        # Encoded once per key (heads once per key and size); the sequences only hold
        # references to these bytes, and are made when the Python engine first asks
        # (`get_seq`): the native core takes the per-key requests and the picks, and a
        # period's lists of references cost a worker ~0.1 s before it is ready.
        gets = [self.get_request(k) for k in keys]
        if fixed:
            heads = [self.set_head(k, self.size) for k in keys]
            self.value_tail = self.set_tail(b"x" * self.size)
        else:
            self.__dict__["set_seq"] = [
                self.set_head(keys[i], s) for i, s in zip(picks.tolist(), self.sizes,
                                                           strict=True)]
            self.__dict__["tail_seq"] = value_tails(sizes, self.set_tail)
            heads = self.set_seq
        # For `native_ops`: the per-key requests and the picks, so its tables are made
        # with numpy, not by walking the sequences (the worker's time to ready).
        self._per_key = (gets, heads)
        self._picks = picks.astype(np.int64)

    @functools.cached_property
    def get_seq(self) -> list[bytes]:
        """The get of each entry of the period (references to the per-key requests)."""
        gets = self._per_key[0]
        return [gets[i] for i in self._picks.tolist()]

    @functools.cached_property
    def set_seq(self) -> list[bytes]:
        """The set of each entry, up to its value (fixed sizes; else made at init)."""
        heads = self._per_key[1]
        return [heads[i] for i in self._picks.tolist()]

    @functools.cached_property
    def tail_seq(self) -> list[bytes]:
        """The value and framing after each entry's set head (fixed sizes)."""
        return [self.value_tail] * self.period

    def set_size(self, seq: int) -> int:
        """The value size of set `seq`."""
        return self.size if self.size >= 0 else self.sizes[seq % self.period]

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

    def keynums(self, seqs: np.ndarray) -> np.ndarray:
        """Op `seq`'s key is pick `seq % period` (gets and sets alike)."""
        return self._picks[np.asarray(seqs, np.int64) % self.period]

    def _unexpected(self, reply: Any, op: str) -> BaseException:
        if isinstance(reply, OSError):
            return reply  # the connection failed
        return WorkloadError(f"{self.server} answered {reply!r} to {op}")

    async def execute(self, conn: Any, op: int, seq: int) -> tuple[int, int]:
        j = seq % self.period
        if op == GET:
            value = await conn.call(self.get_seq[j])
            if type(value) is bytes:
                return OK, len(value)
            if value is None:
                return MISS, 0
            raise self._unexpected(value, "get")
        reply = await conn.call(self.set_seq[j] + self.tail_seq[j])
        if reply != self.stored:
            raise self._unexpected(reply, "set")
        return OK, self.set_size(seq)

    def issuer(self, done: Callable[[int], None],
               fail: Callable[[BaseException], None]) -> Issue:
        get_seq, set_seq, tails, stored = self.get_seq, self.set_seq, self.tail_seq, self.stored
        pattern, period = self.op_pattern, self.period
        hit, miss = outcome(OK, 0), outcome(MISS, 0)
        unexpected = self._unexpected
        sized = self.size < 0
        set_ok = outcome(OK, max(self.size, 0))
        # Sets of several sizes: a done per size, so the reply handler stays one call.
        set_oks = {s: outcome(OK, s) for s in set(self.sizes)} if sized else {}

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

        def sized_on_set(code: int) -> Callable[[Any], None]:
            def on_sized_set(reply: Any) -> None:
                if reply == stored:
                    done(code)
                else:
                    fail(unexpected(reply, "set"))
            return on_sized_set

        by_size = {s: sized_on_set(code) for s, code in set_oks.items()}
        on_sets = [by_size[s] for s in self.sizes] if sized else []

        def issue(conn: Any, seq: int) -> int:
            j = seq % period
            if pattern[seq & (OP_PATTERN_LEN - 1)] == GET:
                conn.send(get_seq[j], on_get)
                return GET
            conn.send(set_seq[j] + tails[j], on_sets[j] if sized else on_set)
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
        pattern = np.asarray(self.op_pattern, np.uint8).tobytes()
        if self.size >= 0:
            sets, set_offsets = table(self._per_key[1])
            return NativeOps(protocol=self.native_protocol, pattern=pattern, get_op=GET,
                             gets=gets, get_offsets=get_offsets, sets=sets,
                             set_offsets=set_offsets, set_tail=self.value_tail,
                             set_ok_outcome=outcome(OK, self.size))
        # Sizes per entry: each entry is its request up to the value (the head and, as
        # RESP's "$<size>", any of the tail before it); the core's tail is the largest
        # value and the framing after a value, of which it sends each set's size + framing.
        largest = max(self.sizes)
        full = self.set_tail(b"x" * largest)
        framing = len(full) - (full.rindex(b"x") + 1)
        sets, set_offsets = request_table(
            [head + tail[:len(tail) - size - framing] for head, tail, size
             in zip(self.set_seq, self.tail_seq, self.sizes, strict=True)])
        tail = b"x" * largest + full[len(full) - framing:]
        return NativeOps(protocol=self.native_protocol, pattern=pattern, get_op=GET,
                         gets=gets, get_offsets=get_offsets, sets=sets,
                         set_offsets=set_offsets, set_tail=tail,
                         set_ok_outcome=outcome(OK, 0),
                         set_sizes=np.asarray(self.sizes, np.uint32).tobytes(),
                         set_tail_framing_bytes=framing)


class MixPipeline(Pipeline):
    """`MixClient`'s batches: one write of encoded requests, replies judged in a loop."""

    def __init__(self, client: MixClient) -> None:
        self.client = client
        self.hit, self.miss = outcome(OK, 0) | GET, outcome(MISS, 0) | GET
        self.set_ok = outcome(OK, max(client.size, 0)) | SET

    def send(self, conn: Any, seqs: range) -> None:
        c = self.client
        pattern, get_seq, set_seq, tails = c.op_pattern, c.get_seq, c.set_seq, c.tail_seq
        period = c.period
        conn.send_batch(b"".join([
            get_seq[s % period] if pattern[s & (OP_PATTERN_LEN - 1)] == GET
            else set_seq[s % period] + tails[s % period] for s in seqs]), len(seqs))

    def outcomes(self, replies: list[Any], seqs: list[int]) -> list[int | BaseException]:
        c = self.client
        pattern, stored, unexpected = c.op_pattern, c.stored, c._unexpected
        hit, miss, set_ok = self.hit, self.miss, self.set_ok
        sized, period = (c.sizes if c.size < 0 else None), c.period
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
            elif value != stored:
                add(unexpected(value, "set"))
            else:
                add(set_ok if sized is None else set_ok | sized[s % period] << OUTCOME_BYTES_SHIFT)
        return out
