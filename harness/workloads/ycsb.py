"""YCSB's core workloads A-F (CoreWorkload) against Redis, memcached or PostgreSQL.

`params: {workload: a|b|c|d|e|f}` takes the proportions and distributions of YCSB's
`workloads/workload{a..f}` files; every property is a param of its own (YCSB's name with
underscores: `readproportion` is `read_proportion`) and overrides the preset when set.
Ops: read, update, insert, scan, read_modify_write. `prepare` is YCSB's load phase:
it empties what an earlier load left, writes records 0 .. record_count - 1 (keys
`user` + fnvhash64(keynum), or + keynum with insert_order ordered, each with
field_count random fields) and times it (the manifest's `extra.baseline.load`).
Which server is whichever one of the three the spec has (`requires_one_of`); the data
model is YCSB's binding's for it (`harness.workloads.ycsb_stores`). The presets, params
and their checks are `harness.workloads.ycsb_props`.

A client process is one YCSB client: its own op chooser, key chooser and insert counter
(the generators are `harness.workloads.ycsb_gen`). Process i's run-phase inserts take
keynums record_count + i * 2^32 + k (k = 0, 1, ...), its own share of the key space, so
no two processes insert the same key; each reads, updates and scans the loaded records
and its own inserts (`latest` is skewed to its own most recent ones). Ops, keys drawn
before inserts count, field choices and value offsets are drawn a chunk of ops at a time
(numpy, seeded by `seed`, the client and the chunk: reproducible); the keynum of a
`latest` op and the redraw of a zipfian key not inserted yet are settled per op from the
insert counter's acknowledged value, as YCSB's AcknowledgedCounterGenerator has it.

Engines: a run of reads and updates only (workloads A, B, C, or any proportions without
inserts, scans and read-modify-writes) against Redis or memcached with uniform, zipfian
or hotspot keys runs on the native core: its ops are tables of `NATIVE_CHUNKS` chunks
(65,536 ops), after which the sequence repeats, on both engines alike (`periodic`).
Everything else runs on the Python path (awaited ops): a read-modify-write and a Redis
scan are several round trips, as in YCSB's bindings, and inserts and `latest` keys
depend on the run so far.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.errors import WorkloadError
from harness.results import OK, outcome
from harness.services.base import Endpoint
from harness.settings import Setting, check_value
from harness.workloads.base import NativeOps, Workload, WorkloadClient, request_table
from harness.workloads.ycsb_gen import (
    AcknowledgedCounter,
    KeyChooser,
    Zipfian,
    discrete_values,
    fnvhash64_array,
    key_name,
)
from harness.workloads.ycsb_props import (
    INSERT,
    KINDS,
    OPS,
    PARAMS,
    READ,
    SCAN,
    UPDATE,
    Props,
    problems,
)
from harness.workloads.ycsb_stores import STORES, Record, Store

#: Keynums of one process's run-phase inserts (its share: see the module's doc).
INSERT_SHARE = 1 << 32
#: Ops drawn at once, and chunks kept (a late op of an older chunk redraws it).
CHUNK = 4096
KEEP_CHUNKS = 4
#: Chunks of a periodic client's op sequence (the native core's tables).
NATIVE_CHUNKS = 16
#: Request distributions whose keys do not depend on the run so far.
_FIXED_KEYS = ("uniform", "zipfian", "hotspot")
#: Characters of random text per client that values are cut from.
POOL_CHARS = 1 << 20
#: Offset between a record's fields in the text, so they differ.
FIELD_STRIDE = 7919
#: Records per round trip in the load.
LOAD_BATCH = 1000
#: Printable ASCII as YCSB's RandomByteIterator, without `"` and `\\` (JSON escapes).
_ALPHABET = np.array([c for c in range(32, 127) if c not in (34, 92)], np.uint8)


class ValuePool:
    """Random field values (printable ASCII, as YCSB's RandomByteIterator) cut from one
    random text at given offsets: a value costs a slice, not a draw per byte."""

    def __init__(self, rng: np.random.Generator, max_length: int) -> None:
        idx = rng.integers(0, len(_ALPHABET), POOL_CHARS + max_length)
        self.text = _ALPHABET[idx].tobytes().decode("ascii")

    def value(self, offset: int, length: int) -> str:
        return self.text[offset:offset + length]

    def record(self, offset: int, lengths: list[int]) -> list[str]:
        text = self.text
        out = []
        for k, n in enumerate(lengths):
            o = (offset + k * FIELD_STRIDE) % POOL_CHARS
            out.append(text[o:o + n])
        return out


class FieldLengths:
    """CoreWorkload's field length generator: constant, uniform or zipfian over
    1 .. field_length (YCSB's minfieldlength 1)."""

    def __init__(self, p: Props) -> None:
        self.dist, self.n, self.fields = p.field_length_distribution, p.field_length, \
            p.field_count
        self.zipfian = Zipfian.between(1, self.n) if self.dist == "zipfian" else None

    def draw(self, rng: np.random.Generator, records: int) -> list[list[int]]:
        shape = (records, self.fields)
        if self.dist == "constant":
            return [[self.n] * self.fields] * records
        if self.dist == "uniform":
            return rng.integers(1, self.n + 1, shape).tolist()
        assert self.zipfian is not None
        return self.zipfian.values(rng.random(shape)).tolist()


@dataclass(frozen=True)
class Chunk:
    """The draws of CHUNK consecutive ops (lists: the cheapest per-op lookup)."""

    ops: list[int]
    keys: list[Any]
    fields: list[int]  # a one-field read's, update's (and a read-modify-write's read)
    write_fields: list[int]  # a read-modify-write's update
    offsets: list[int]
    scan_lengths: list[int]
    lengths: list[list[int]]


class YcsbClient(WorkloadClient):
    """One process's YCSB client (see the module's doc)."""

    def __init__(self, p: Props, store: Store, endpoint: Endpoint, client_id: int) -> None:
        self.p, self.store, self.endpoint, self.client_id = p, store, endpoint, client_id
        self.chooser = KeyChooser(
            p.request_distribution, p.record_count, p.expected_new_keys, p.zipfian_constant,
            p.hotspot_data_fraction, p.hotspot_opn_fraction,
            redraw_rng=np.random.default_rng([p.seed, client_id, 1 << 40]))
        self.counter = AcknowledgedCounter(p.record_count)
        self.pool = ValuePool(np.random.default_rng([p.seed, client_id, 1 << 41]),
                              p.field_length)
        self.lengths = FieldLengths(p)
        self.weights = np.array(p.proportions)
        self.scan_zipfian = (Zipfian.between(1, p.max_scan_length)
                             if p.scan_length_distribution == "zipfian" else None)
        self._chunks: dict[int, Chunk] = {}
        #: seq -> the keynum its op touched, with `run.record_keys` (`log_keys`): a
        #: latest-distribution read's and an insert's depend on the run so far.
        self._keylog: dict[int, int] | None = None
        #: Reads and updates only, keys fixed by their draws, on a store the core speaks:
        #: the op sequence repeats after NATIVE_CHUNKS chunks, on both engines.
        rates = dict(zip(OPS, p.proportions, strict=True))
        self.periodic = (store.native_protocol(p.read_all_fields) is not None
                         and p.request_distribution in _FIXED_KEYS
                         and not any(rates[op] for op in OPS if op not in ("read", "update")))
        self._table: tuple[list[int], list[bytes], list[bytes], list[int]] | None = None
        self._keys: list[int] | None = None

    def _draw(self, index: int) -> Chunk:
        p, n = self.p, CHUNK
        rng = np.random.default_rng([p.seed, self.client_id, index])
        ops = discrete_values(self.weights, rng.random(n))
        if self.scan_zipfian is not None:
            scans = self.scan_zipfian.values(rng.random(n))
        else:
            scans = rng.integers(1, p.max_scan_length + 1, n)
        return Chunk(ops.tolist(), self.chooser.draws(rng, n).tolist(),
                     rng.integers(0, p.field_count, n).tolist(),
                     rng.integers(0, p.field_count, n).tolist(),
                     rng.integers(0, POOL_CHARS, n).tolist(), scans.tolist(),
                     self.lengths.draw(rng, n))

    def _chunk(self, seq: int) -> tuple[Chunk, int]:
        index, j = divmod(seq, CHUNK)
        if self.periodic:
            index %= NATIVE_CHUNKS
        chunk = self._chunks.get(index)
        if chunk is None:
            chunk = self._chunks[index] = self._draw(index)
            if len(self._chunks) > KEEP_CHUNKS:
                del self._chunks[min(k for k in self._chunks if k != index)]
        return chunk, j

    def global_keynum(self, keynum: int) -> int:
        """A keynum as this process counts it -> the one naming its key (an own insert's
        is in this process's share)."""
        rc = self.p.record_count
        return rc + self.client_id * INSERT_SHARE + (keynum - rc) if keynum >= rc else keynum

    def key(self, keynum: int) -> str:
        """The key of a keynum as this process knows it: an own insert's in its share."""
        return key_name(self.global_keynum(keynum), self.p.ordered)

    def log_keys(self) -> None:
        # A periodic client's keys follow from the seq (`_period_keys`): nothing to log.
        if not self.periodic:
            self._keylog = {}

    def _period_keys(self) -> list[int]:
        """A periodic client's keynum of each op of its sequence, settled once in seq
        order: a zipfian draw past the loaded records is redrawn from a generator whose
        state would otherwise depend on the order ops ran in."""
        if self._keys is None:
            last = self.counter.last
            self._keys = [self.chooser.keynum(k, last) for index in range(NATIVE_CHUNKS)
                          for k in self._draw(index).keys]
        return self._keys

    def _period(self) -> tuple[list[int], list[bytes], list[bytes], list[int]]:
        """A periodic client's whole sequence: per op its code, read request (b"" for an
        update), update request (b"" for a read) and the bytes the update writes, as
        `execute` would send them (its keys: `_period_keys`)."""
        if self._table is None:
            p, store = self.p, self.store
            ops, gets, sets, sizes = [], [], [], []
            keys = self._period_keys()
            for index in range(NATIVE_CHUNKS):
                chunk = self._draw(index)
                for j in range(CHUNK):
                    key = self.key(keys[index * CHUNK + j])
                    ops.append(chunk.ops[j])
                    if chunk.ops[j] == READ:
                        field = None if p.read_all_fields else chunk.fields[j]
                        gets.append(store.read_request(key, field))
                        sets.append(b"")
                        sizes.append(0)
                    else:
                        request, size = store.update_request(
                            key, self._values(chunk, j, chunk.fields[j]))
                        gets.append(b"")
                        sets.append(request)
                        sizes.append(size)
            self._table = (ops, gets, sets, sizes)
        return self._table

    def native_ops(self) -> NativeOps | None:
        """A periodic client's sequence as the core's tables (see the module's doc)."""
        if not self.periodic:
            return None
        ops, gets, sets, sizes = self._period()
        get_table, get_offsets = request_table(gets)
        set_table, set_offsets = request_table(sets)
        return NativeOps(protocol=self.store.native_protocol(self.p.read_all_fields),
                         pattern=np.asarray(ops, np.uint8).tobytes(), get_op=READ,
                         gets=get_table, get_offsets=get_offsets, sets=set_table,
                         set_offsets=set_offsets, set_tail=b"", set_ok_outcome=outcome(OK, 0),
                         set_sizes=np.asarray(sizes, np.uint32).tobytes())

    def keynums(self, seqs: np.ndarray) -> np.ndarray:
        """The keynum (`global_keynum`, YCSB's before hashing) of each op; -1 where the
        op failed before it chose one; a scan's is its start key's. A periodic client's
        follow from the seq (the native core keeps no log)."""
        if self.periodic:
            keys = np.asarray(self._period_keys(), np.int64)
            return keys[np.asarray(seqs, np.int64) % len(keys)]
        # Each op is recorded once, and a spilling worker asks for each chunk's keys once
        # (`loadgen.spill`): taken out of the log, so it does not grow with the run.
        log = self._keylog or {}
        return np.fromiter((log.pop(s, -1) for s in np.asarray(seqs).tolist()), np.int64,
                           len(seqs))

    async def connect(self) -> Any:
        return await self.store.open(self.endpoint)

    async def close(self, conn: Any) -> None:
        await self.store.close(conn)

    def next_op(self, seq: int) -> int:
        chunk, j = self._chunk(seq)
        return chunk.ops[j]

    def _values(self, chunk: Chunk, j: int, field: int) -> dict[int, str]:
        lengths, offset = chunk.lengths[j], chunk.offsets[j]
        if self.p.write_all_fields:
            return dict(enumerate(self.pool.record(offset, lengths)))
        return {field: self.pool.value(offset, lengths[field])}

    async def execute(self, conn: Any, op: int, seq: int) -> tuple[int, int]:
        chunk, j = self._chunk(seq)
        store = self.store
        if op == INSERT:
            keynum = self.counter.next()
            if self._keylog is not None:
                self._keylog[seq] = self.global_keynum(keynum)
            if keynum - self.p.record_count >= INSERT_SHARE:
                raise WorkloadError(f"client {self.client_id} inserted its share of "
                                    f"{INSERT_SHARE:,} keys")
            try:
                record = (self.key(keynum), self.pool.record(chunk.offsets[j],
                                                             chunk.lengths[j]))
                return await store.insert(conn, record)
            finally:  # as YCSB: acknowledged whether or not it was stored
                self.counter.acknowledge(keynum)
        if self.periodic:
            keynum = self._period_keys()[seq % (CHUNK * NATIVE_CHUNKS)]
        else:
            keynum = self.chooser.keynum(chunk.keys[j], self.counter.last)
        if self._keylog is not None:
            self._keylog[seq] = self.global_keynum(keynum)
        key = self.key(keynum)
        field = None if self.p.read_all_fields else chunk.fields[j]
        if op == READ:
            return await store.read(conn, key, field)
        if op == SCAN:
            return await store.scan(conn, key, chunk.scan_lengths[j], field)
        if op == UPDATE:
            return await store.update(conn, key, self._values(chunk, j, chunk.fields[j]))
        status, got = await store.read(conn, key, field)
        written, put = await store.update(conn, key,
                                          self._values(chunk, j, chunk.write_fields[j]))
        return (status if status != OK else written), got + put


class Ycsb(Workload):
    records_keys = True
    name = "ycsb"
    description = ("YCSB core workloads A-F (presets, every property a param) against "
                   "Redis, memcached or PostgreSQL with YCSB's data models")
    ops = OPS
    requires = ()
    requires_one_of = KINDS
    clears: Mapping[str, str] = {
        "memcached": "flush_all before the load (memcached cannot list keys)",
        "postgres": "DROP TABLE IF EXISTS usertable before the load"}
    params: Mapping[str, Setting] = PARAMS

    def __init__(self) -> None:
        #: The last load's timing, from `prepare` to the `baseline` of the same run.
        self._loaded: dict[str, Any] | None = None

    def check_plan(self, plan: Any) -> list[str]:
        from harness.services import SERVICES

        kinds = [SERVICES.get(s.kind).provides(s.settings) for s in plan.services.values()]
        kind = next((k for k in kinds if k in KINDS), None)
        return problems(plan.params, kind, plan.clients.inflight)

    def _check(self, endpoints: Mapping[str, Endpoint],
               params: Mapping[str, Any]) -> tuple[Props, str]:
        """The run's properties and server kind, checked as a spec's are (prepare and
        client may be called without a spec)."""
        kinds = [k for k in KINDS if k in endpoints]
        if len(kinds) != 1:
            raise WorkloadError(f"ycsb: needs exactly one of {', '.join(KINDS)}; "
                                f"got {', '.join(endpoints) or 'none'}")
        found = [m for k, s in self.params.items()
                 for m in check_value(f"params.{k}", params.get(k, s.default), s)]
        found = found or problems(params, kinds[0])
        if found:
            raise WorkloadError(f"ycsb: {'; '.join(found)}")
        return Props.of(params), kinds[0]

    def client(self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any],
               client_id: int) -> WorkloadClient:
        p, kind = self._check(endpoints, params)
        return YcsbClient(p, STORES[kind](p.field_count), endpoints[kind], client_id)

    async def prepare(self, endpoints: Mapping[str, Endpoint],
                      params: Mapping[str, Any]) -> None:
        """YCSB's load: records 0 .. record_count - 1 with every field, batched."""
        p, kind = self._check(endpoints, params)
        store = STORES[kind](p.field_count)
        rng = np.random.default_rng([p.seed, 1 << 42])
        pool, lengths = ValuePool(rng, p.field_length), FieldLengths(p)
        self._loaded = None
        conn = await store.open(endpoints[kind])
        try:
            began = time.perf_counter()
            await store.reset(conn)
            for lo in range(0, p.record_count, LOAD_BATCH):
                keynums = np.arange(lo, min(lo + LOAD_BATCH, p.record_count))
                names = (keynums if p.ordered else fnvhash64_array(keynums)).tolist()
                offsets = rng.integers(0, POOL_CHARS, len(names)).tolist()
                records: list[Record] = [
                    (f"user{n}", pool.record(o, ls)) for n, o, ls in
                    zip(names, offsets, lengths.draw(rng, len(names)), strict=True)]
                await store.load(conn, records)
            seconds = time.perf_counter() - began
        finally:
            await store.close(conn)
        self._loaded = {"store": kind, "records": p.record_count, "seconds": seconds,
                        "records_per_s": p.record_count / seconds if seconds > 0 else None}

    async def baseline(self, endpoints: Mapping[str, Endpoint],
                       params: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The load's timing (YCSB's load phase, measured as one step)."""
        loaded, self._loaded = self._loaded, None
        return {"load": loaded} if loaded else None
