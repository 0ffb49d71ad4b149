"""YCSB's data models on the three servers the `ycsb` workload drives, one `Store` each,
as YCSB's own bindings keep a record (`usertable`: a key and fields field0..fieldN-1).

- Redis (YCSB's redis binding): a hash per record (HMSET of its fields), and a sorted set
  `_indices` holding every key scored by Java's String.hashCode of the key; a scan is
  ZRANGEBYSCORE from the start key's score, LIMIT count, then one read per key found.
- memcached (YCSB's memcached binding): the record as one JSON object of its fields under
  `usertable-<key>`; insert is `add`, update `replace` with the fields written (so, as in
  YCSB, a one-field update leaves a one-field record); no scans.
- PostgreSQL (YCSB's JDBC binding): table usertable (YCSB_KEY VARCHAR PRIMARY KEY,
  FIELD0..FIELDn TEXT); reads SELECT *, scans `WHERE YCSB_KEY >= $1 ORDER BY YCSB_KEY
  LIMIT n`.

Each op returns (status, bytes): a record that is not there is a miss; an answer that is
no answer (an error reply) raises, so the load generator records an error. Values are
ASCII without `"` or `\\` (`ycsb.ValuePool`), so memcached's JSON needs no escaping.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from harness.drivers import memcache
from harness.drivers import postgres as pg
from harness.drivers import redis as resp
from harness.errors import WorkloadError
from harness.results import ERROR, MISS, OK
from harness.services.base import Endpoint
from harness.workloads.ycsb_gen import java_string_hash, java_string_hashes

TABLE = "usertable"
INDEX_KEY = b"_indices"
#: Members of `_indices` deleted per round trip when `reset` removes an earlier load.
RESET_BATCH = 10_000

#: A record to load or insert: its key and every field's value, in field order.
Record = tuple[str, Sequence[str]]
#: The fields an update writes: field index -> value.
Values = Mapping[int, str]


class Store(abc.ABC):
    """One server kind's data model: the load, and the five ops' server calls."""

    kind: str
    #: Whether the data model can scan (YCSB's memcached binding cannot).
    scans: bool = True

    def __init__(self, field_count: int) -> None:
        self.fields = [f"field{i}" for i in range(field_count)]

    @abc.abstractmethod
    async def open(self, endpoint: Endpoint) -> Any:
        """A connection to the server at `endpoint`."""

    @abc.abstractmethod
    async def close(self, conn: Any) -> None:
        """Close a connection from `open`."""

    @abc.abstractmethod
    async def reset(self, conn: Any) -> None:
        """Remove what an earlier load and run left, so the load writes exactly its
        records (a run's inserts would otherwise stay, and collide with the next's)."""

    @abc.abstractmethod
    async def load(self, conn: Any, records: Sequence[Record]) -> None:
        """Write a batch of records (YCSB's load phase); raise if any was not stored."""

    @abc.abstractmethod
    async def read(self, conn: Any, key: str, field: int | None) -> tuple[int, int]:
        """Read a record: every field (None) or one."""

    @abc.abstractmethod
    async def update(self, conn: Any, key: str, values: Values) -> tuple[int, int]:
        """Write some fields of a record."""

    @abc.abstractmethod
    async def insert(self, conn: Any, record: Record) -> tuple[int, int]:
        """Write a new record."""

    async def scan(self, conn: Any, key: str, count: int,
                   field: int | None) -> tuple[int, int]:
        """Read up to `count` records in key order from `key`."""
        raise WorkloadError(f"{self.kind} has no scans")

    def native_protocol(self, read_all_fields: bool) -> str | None:
        """The native core's protocol for reads and updates (`read_request`,
        `update_request`); None: this store runs on the Python path only."""
        return None

    def read_request(self, key: str, field: int | None) -> bytes:
        """`read`'s request, encoded (stores with a `native_protocol`)."""
        raise NotImplementedError

    def update_request(self, key: str, values: Values) -> tuple[bytes, int]:
        """`update`'s request, encoded, and the bytes it writes (as `update` counts)."""
        raise NotImplementedError


def _unexpected(server: str, reply: Any, what: str) -> WorkloadError:
    return WorkloadError(f"{server} answered {reply!r} to {what}")


class RedisStore(Store):
    kind = "redis"

    async def open(self, endpoint: Endpoint) -> Any:
        return await resp.connect(endpoint.host, endpoint.port, auth=endpoint.auth,
                                  tls=endpoint.tls)

    async def close(self, conn: Any) -> None:
        conn.close()

    async def reset(self, conn: Any) -> None:
        # Exactly YCSB's records: every key the index lists, then the index itself.
        while True:
            keys = await conn.request(b"ZRANGE", INDEX_KEY, 0, RESET_BATCH - 1)
            if not isinstance(keys, list):
                raise _unexpected("redis", keys, "ZRANGE _indices")
            if not keys:
                return
            for reply in [await f for f in conn.pipeline(
                    [(b"DEL", *keys), (b"ZREM", INDEX_KEY, *keys)])]:
                if not isinstance(reply, int):
                    raise _unexpected("redis", reply, "DEL/ZREM of loaded records")

    def __init__(self, field_count: int) -> None:
        super().__init__(field_count)
        self._heads = [resp.encode([f])[4:] for f in self.fields]  # "$6\r\nfield0\r\n"

    def _hmset(self, key: str, values: Mapping[int, str] | Sequence[str]) -> bytes:
        """HMSET of the fields, encoded here: the load's hot loop (values are ASCII, so
        a string's length is its size in bytes)."""
        pairs = values.items() if isinstance(values, Mapping) else enumerate(values)
        heads = self._heads
        out = [b""]
        for i, value in pairs:
            out += (heads[i], b"$%d\r\n" % len(value), value.encode(), b"\r\n")
        out[0] = b"*%d\r\n$5\r\nHMSET\r\n$%d\r\n%s\r\n" % (
            len(out) // 2 + 2, len(key), key.encode())
        return b"".join(out)

    async def load(self, conn: Any, records: Sequence[Record]) -> None:
        keys = [key for key, _ in records]
        futs = []
        for (key, values), score in zip(records, java_string_hashes(keys), strict=True):
            futs += (conn.call(self._hmset(key, values)),
                     conn.call(resp.encode((b"ZADD", INDEX_KEY, score, key))))
        pairs = iter(futs)
        for key, hmset, zadd in zip(keys, pairs, pairs, strict=True):
            replies = (await hmset, await zadd)
            if replies[0] != b"OK" or not isinstance(replies[1], int):
                raise _unexpected("redis", replies, f"HMSET/ZADD of {key}")

    def native_protocol(self, read_all_fields: bool) -> str | None:
        # HGETALL's array counts its values only (every second element): resp_hash.
        return "resp_hash" if read_all_fields else "resp"

    def read_request(self, key: str, field: int | None) -> bytes:
        if field is None:
            return resp.encode((b"HGETALL", key.encode()))
        return resp.encode((b"HMGET", key.encode(), self.fields[field].encode()))

    def update_request(self, key: str, values: Values) -> tuple[bytes, int]:
        return self._hmset(key, values), sum(map(len, values.values()))

    async def _read(self, conn: Any, key: bytes, field: int | None) -> tuple[int, int]:
        if field is None:
            reply = await conn.request(b"HGETALL", key)
            if not isinstance(reply, list):
                raise _unexpected("redis", reply, "HGETALL")
            return (OK, sum(map(len, reply[1::2]))) if reply else (MISS, 0)
        reply = await conn.request(b"HMGET", key, self.fields[field])
        if not isinstance(reply, list):
            raise _unexpected("redis", reply, "HMGET")
        return (OK, len(reply[0])) if reply[0] is not None else (MISS, 0)

    async def read(self, conn: Any, key: str, field: int | None) -> tuple[int, int]:
        return await self._read(conn, key.encode(), field)

    async def update(self, conn: Any, key: str, values: Values) -> tuple[int, int]:
        request, size = self.update_request(key, values)
        reply = await conn.call(request)
        if reply != b"OK":
            raise _unexpected("redis", reply, "HMSET")
        return OK, size

    async def insert(self, conn: Any, record: Record) -> tuple[int, int]:
        key, values = record
        # As the binding: the hash first, then its index entry, one round trip each.
        reply = await conn.call(self._hmset(key, values))
        if reply != b"OK":
            raise _unexpected("redis", reply, "HMSET")
        reply = await conn.request(b"ZADD", INDEX_KEY, java_string_hash(key), key)
        if not isinstance(reply, int):
            raise _unexpected("redis", reply, "ZADD")
        return OK, sum(map(len, values))

    async def scan(self, conn: Any, key: str, count: int,
                   field: int | None) -> tuple[int, int]:
        keys = await conn.request(b"ZRANGEBYSCORE", INDEX_KEY, java_string_hash(key), b"+inf",
                                  b"LIMIT", 0, count)
        if not isinstance(keys, list):
            raise _unexpected("redis", keys, "ZRANGEBYSCORE")
        total = 0
        for k in keys:  # one read per key, in turn, as the binding does
            total += (await self._read(conn, k, field))[1]
        return OK, total


class MemcachedStore(Store):
    kind = "memcached"
    scans = False

    def __init__(self, field_count: int) -> None:
        super().__init__(field_count)
        self._names = [b'"%s":"' % f.encode() for f in self.fields]

    @staticmethod
    def item_key(key: str) -> bytes:
        """YCSB's createQualifiedKey: `<table>-<key>`."""
        return f"{TABLE}-{key}".encode()

    def document(self, values: Mapping[int, str] | Sequence[str]) -> bytes:
        """The record as YCSB's binding serialises it: a JSON object of the fields."""
        pairs = values.items() if isinstance(values, Mapping) else enumerate(values)
        return b"{" + b'",'.join(self._names[i] + v.encode() for i, v in pairs) + b'"}'

    @staticmethod
    def _store(verb: bytes, key: str, doc: bytes) -> bytes:
        return b"%s %s 0 0 %d\r\n%s\r\n" % (verb, MemcachedStore.item_key(key), len(doc), doc)

    async def open(self, endpoint: Endpoint) -> Any:
        return await memcache.connect(endpoint.host, endpoint.port, tls=endpoint.tls)

    async def close(self, conn: Any) -> None:
        conn.close()

    async def reset(self, conn: Any) -> None:
        # memcached cannot list keys: a fresh load starts from an empty server.
        reply = await conn.call(b"flush_all\r\n")
        if reply != b"OK":
            raise _unexpected("memcached", reply, "flush_all")

    async def load(self, conn: Any, records: Sequence[Record]) -> None:
        futs = [conn.call(self._store(b"add", key, self.document(values)))
                for key, values in records]
        for (key, _), fut in zip(records, futs, strict=True):
            if (reply := await fut) != b"STORED":
                raise _unexpected("memcached", reply, f"add {key}")

    def native_protocol(self, read_all_fields: bool) -> str | None:
        return "memcache"

    def read_request(self, key: str, field: int | None) -> bytes:
        return memcache.get_request(self.item_key(key))

    def update_request(self, key: str, values: Values) -> tuple[bytes, int]:
        doc = self.document(values)
        return self._store(b"replace", key, doc), len(doc)

    async def read(self, conn: Any, key: str, field: int | None) -> tuple[int, int]:
        # One value holds every field: a one-field read gets the whole document too.
        value = await conn.call(self.read_request(key, field))
        if value is None:
            return MISS, 0
        if type(value) is not bytes:
            raise _unexpected("memcached", value, "get")
        return OK, len(value)

    async def update(self, conn: Any, key: str, values: Values) -> tuple[int, int]:
        request, size = self.update_request(key, values)
        reply = await conn.call(request)
        if reply == b"NOT_STORED":  # no such record
            return MISS, 0
        if reply != b"STORED":
            raise _unexpected("memcached", reply, "replace")
        return OK, size

    async def insert(self, conn: Any, record: Record) -> tuple[int, int]:
        key, values = record
        doc = self.document(values)
        reply = await conn.call(self._store(b"add", key, doc))
        if reply == b"NOT_STORED":  # the key exists: YCSB's insert fails
            return ERROR, 0
        if reply != b"STORED":
            raise _unexpected("memcached", reply, "add")
        return OK, len(doc)


class PostgresStore(Store):
    kind = "postgres"

    def __init__(self, field_count: int) -> None:
        super().__init__(field_count)
        columns = ", ".join(f"FIELD{i}" for i in range(field_count))
        marks = ", ".join(f"${i + 2}" for i in range(field_count))
        self.create = (f"CREATE TABLE {TABLE} (YCSB_KEY VARCHAR PRIMARY KEY, "
                       + ", ".join(f"FIELD{i} TEXT" for i in range(field_count)) + ")")
        self.insert_sql = f"INSERT INTO {TABLE} (YCSB_KEY, {columns}) VALUES ($1, {marks})"
        self.read_sql = f"SELECT * FROM {TABLE} WHERE YCSB_KEY = $1"
        self.scan_sql = f"SELECT * FROM {TABLE} WHERE YCSB_KEY >= $1 ORDER BY YCSB_KEY LIMIT $2"
        self.update_all = (f"UPDATE {TABLE} SET " + ", ".join(
            f"FIELD{i} = ${i + 1}" for i in range(field_count))
            + f" WHERE YCSB_KEY = ${field_count + 1}")
        self.update_one = [f"UPDATE {TABLE} SET FIELD{i} = $1 WHERE YCSB_KEY = $2"
                           for i in range(field_count)]
        self.columns = ["ycsb_key", *(f"field{i}" for i in range(field_count))]

    async def open(self, endpoint: Endpoint) -> Any:
        return await pg.connect(endpoint)

    async def close(self, conn: Any) -> None:
        await conn.close(timeout=2)

    async def reset(self, conn: Any) -> None:
        # What YCSB's create_table.sql does before a load.
        await conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        await conn.execute(self.create)

    async def load(self, conn: Any, records: Sequence[Record]) -> None:
        # COPY: the load is preparation, not a measured phase of the run.
        await conn.copy_records_to_table(TABLE, records=[(k, *v) for k, v in records],
                                         columns=self.columns)

    @staticmethod
    def _row_bytes(row: Any) -> int:
        return sum(len(v) for v in list(row.values())[1:] if v is not None)

    async def read(self, conn: Any, key: str, field: int | None) -> tuple[int, int]:
        row = await conn.fetchrow(self.read_sql, key)  # SELECT *, as the JDBC binding
        return (OK, self._row_bytes(row)) if row is not None else (MISS, 0)

    async def update(self, conn: Any, key: str, values: Values) -> tuple[int, int]:
        if len(values) == len(self.fields):
            status = await conn.execute(self.update_all, *(values[i] for i in
                                                           range(len(self.fields))), key)
        else:
            [(i, value)] = values.items()
            status = await conn.execute(self.update_one[i], value, key)
        return (OK, sum(map(len, values.values()))) if status == "UPDATE 1" else (MISS, 0)

    async def insert(self, conn: Any, record: Record) -> tuple[int, int]:
        key, values = record
        try:
            await conn.execute(self.insert_sql, key, *values)
        except asyncpg.UniqueViolationError:  # the key exists: YCSB's insert fails
            return ERROR, 0
        return OK, sum(map(len, values))

    async def scan(self, conn: Any, key: str, count: int,
                   field: int | None) -> tuple[int, int]:
        rows = await conn.fetch(self.scan_sql, key, count)
        return OK, sum(self._row_bytes(r) for r in rows)


STORES: dict[str, type[Store]] = {s.kind: s for s in (RedisStore, MemcachedStore,
                                                       PostgresStore)}
