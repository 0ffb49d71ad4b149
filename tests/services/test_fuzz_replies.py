"""Property tests of what the kit reads from servers outside the timed loop (issue 48
items 3 and 7): generated replies (RESP arrays and strings for INFO and CONFIG GET,
memcached `stats` lines, PostgreSQL rows, HTTP bodies and whole HTTP answers), whole or
damaged, fed to the parsers and, over real TCP from a scripted server, to the calls
that read them. Whatever comes: no traceback, only the kit's named errors (HarnessError,
or OSError for a connection cut short); what is kept stays within its bounds in entries
and characters; and what the manifest would record is strict JSON.

Fixed budgets (`max_examples`), derandomized: the same examples in CI every time.
"""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from harness.drivers.memcache import parse_stats
from harness.drivers.redis import RespError, parse_info, parse_reply
from harness.drivers.replies import (
    MAX_ENTRIES,
    MAX_REPLY_BYTES,
    MAX_VALUE_CHARS,
    Reading,
    is_number,
    numbers_only,
)
from harness.drivers.respscan import ReplyScan
from harness.errors import HarnessError, ServiceError
from harness.hosts import LocalHost
from harness.services import SERVICES
from harness.services.external import http_get
from harness.services.filestore import app_config
from harness.services.pg_remote import settings_of, stat_row
from harness.services.redis import config_of, decoded, redis_counters, redis_identity
from tests.fixtures.hostile import bulk, scripted

BUDGET = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
WIRE = settings(BUDGET, max_examples=40)


def strict_dumps(value: Any) -> str:
    """What the manifest writer does with a record: strict JSON, or ValueError."""
    return json.dumps(value, allow_nan=False, sort_keys=True, default=str)


# --- RESP -------------------------------------------------------------------------------

def _resp(value: Any) -> bytes:
    """Any RESP2 value: bytes (bulk), str (simple), int, None (null bulk), an exception
    (error), a list (array)."""
    if isinstance(value, bytes):
        return bulk(value)
    if isinstance(value, str):
        return b"+" + value.encode() + b"\r\n"
    if isinstance(value, bool) or value is None:
        return b"$-1\r\n"
    if isinstance(value, int):
        return b":%d\r\n" % value
    if isinstance(value, Exception):
        return b"-" + str(value).encode() + b"\r\n"
    return b"*%d\r\n" % len(value) + b"".join(_resp(v) for v in value)


_WORDS = st.sampled_from(["maxmemory", "nan", "inf", "-inf", "1e309", "9" * 30, "",
                          "requirepass", "save", "3600 1", "\u00e9t\u00e9", "a:b", "x" * 1500])
_SCALAR = (st.binary(max_size=40) | _WORDS.map(str.encode)
           | st.text(alphabet=st.characters(blacklist_characters="\r\n"), max_size=20)
           | st.integers(-(2**63), 2**63 - 1) | st.none()
           | st.builds(RespError, st.text(alphabet="ABCDEFG ", max_size=10)))
_VALUE = st.recursive(_SCALAR, lambda inner: st.lists(inner, max_size=6), max_leaves=40)


@st.composite
def _damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """`data`, or `data` cut, with bytes flipped or junk put in."""
    how = draw(st.sampled_from(["whole", "whole", "cut", "flip", "junk"]))
    if how == "cut" and data:
        return data[:draw(st.integers(0, len(data) - 1))]
    if how == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        return data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
    if how == "junk":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.sampled_from(
            [b"*-5\r\n", b"$99999999999999999999999\r\n", b"*1\r\n" * 12, b":x\r\n",
             b"$3\r\nabcdefg\r\n", b"\r\n", b"?", b"\x00\xff"])) + data[at:]
    return data


def _feed(scan: ReplyScan, data: bytes, cuts: list[int]) -> bool:
    buf, done, at = bytearray(), False, 0
    for n in [*cuts, len(data)]:
        buf += data[at:at + n]
        at += n
        done = scan.feed(buf)
        if done:
            break
    return done


def _norm(value: Any) -> Any:
    """A reply as comparable data: an error reply by its words."""
    if isinstance(value, Exception):
        return ("error", str(value))
    if isinstance(value, list):
        return [_norm(v) for v in value]
    return value.encode() if isinstance(value, str) else value


@BUDGET
@given(value=_VALUE, max_items=st.integers(1, 300), data=st.data(),
       cuts=st.lists(st.integers(1, 64), max_size=20))
def test_a_resp_reply_is_read_whole_cut_at_its_bound_or_refused_in_words(
        value: Any, max_items: int, data: st.DataObject, cuts: list[int]) -> None:
    raw = _resp(value)
    sent = data.draw(_damaged(raw))
    scan = ReplyScan(max_items=max_items)
    try:
        done = _feed(scan, sent, cuts)  # not done: the reading stopped where bytes ended
        got, cut = scan.value(sent)
    except RespError as exc:  # a HarnessError with words, never another exception
        assert isinstance(exc, HarnessError) and str(exc)
        return
    assert scan.items <= max_items + 1
    if done and not scan.cut:
        assert not cut and _norm(got) == _norm(parse_reply(sent)[0])
        if sent == raw:
            assert _norm(got) == _norm(value)  # read back as it was sent
    if isinstance(got, list):
        assert len(got) <= max_items
    # What CONFIG GET's record would be: bounded, strict JSON.
    record = config_of(decoded(got), cut)
    assert len(record) <= max_items // 2 + 2
    assert all(len(k) <= MAX_VALUE_CHARS for k in record)
    strict_dumps(record)


_INFO_LINE = st.one_of(
    st.builds(lambda n, v: f"{n}:{v}", st.sampled_from(
        ["keyspace_hits", "keyspace_misses", "total_commands_processed", "connected_clients",
         "redis_version", "x" * 2000, "", "#", "cmdstat_get"]),
        st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                  _WORDS, st.text(max_size=30))),
    st.builds(lambda n, v: f"cmdstat_{n}:calls={v},usec={v},usec_per_call={v}",
              st.text(alphabet="abcdefgh|", max_size=8),
              st.one_of(st.integers(), st.sampled_from(["nan", "inf", "1e400", "-0"]))),
    st.sampled_from(["# Server", "", "\x00", "no colon", ":::", "a=b,c=d"]),
    st.text(max_size=60))


@BUDGET
@given(lines=st.lists(_INFO_LINE, max_size=80), max_entries=st.integers(1, 200))
def test_info_is_bounded_and_its_counters_are_numbers(lines: list[str],
                                                      max_entries: int) -> None:
    info = parse_info("\r\n".join(lines), max_entries)
    _bounded(info, max_entries)
    counters = numbers_only(info, "INFO")
    assert all(is_number(v) for v in counters.values())
    assert set(counters) <= set(info)


def _bounded(reading: Reading, max_entries: int) -> None:
    assert len(reading) <= max_entries
    for k, v in reading.items():
        assert len(k) <= 2 * MAX_VALUE_CHARS + 1  # a cmdstat name and its field
        assert is_number(v) or (isinstance(v, str) and len(v) <= MAX_VALUE_CHARS)
    strict_dumps({**reading, "truncated": reading.cut})


_STAT_LINE = st.one_of(
    st.builds(lambda n, v: f"STAT {n} {v}", st.sampled_from(
        ["get_hits", "get_misses", "cmd_get", "rusage_user", "version", "x" * 1500, ""]),
        st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                  _WORDS, st.text(max_size=20))),
    st.sampled_from(["END", "ERROR", "STAT", "STAT a", "STAT  b c", "\x00"]),
    st.text(max_size=40))


@BUDGET
@given(lines=st.lists(_STAT_LINE, max_size=80), max_entries=st.integers(1, 200),
       tail=st.binary(max_size=20))
def test_memcached_stats_are_bounded_and_their_counters_numbers(
        lines: list[str], max_entries: int, tail: bytes) -> None:
    stats = parse_stats("\r\n".join(lines).encode() + tail, max_entries)
    _bounded(stats, max_entries)
    assert all(is_number(v) for v in numbers_only(stats, "stats").values())


_JSON_TEXT = st.one_of(
    st.recursive(st.none() | st.booleans() | st.integers(-(2**80), 2**80)
                 | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=10),
                 lambda inner: st.lists(inner, max_size=4)
                 | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                 max_leaves=20).map(json.dumps),
    st.sampled_from(['{"config": {"a": NaN}}', '{"config": [1]}', "[" * 5000, "9" * 5000,
                     '{"numbackends": 1e999}', '{"x": Infinity, "datid": 3}', ""]),
    st.text(max_size=40))


@BUDGET
@given(text=_JSON_TEXT)
def test_json_from_a_server_is_a_strict_record_or_a_named_error(text: str) -> None:
    config = app_config(text.encode())
    assert isinstance(config, dict)
    strict_dumps(config)
    try:
        row = stat_row(text, "pg_stat_database")
    except HarnessError as exc:
        assert str(exc).startswith("pg_stat_database: ")
        return
    assert all(is_number(v) and math.isfinite(v) for v in row.values())
    assert "datid" not in row and len(row) <= MAX_ENTRIES
    strict_dumps(row)


@BUDGET
@given(rows=st.lists(st.one_of(
    st.tuples(st.sampled_from(["shared_buffers", "password_encryption", "x" * 2000, ""]),
              st.one_of(st.text(max_size=30), st.sampled_from(["nan", "y" * 3000]))),
    st.tuples(st.text(max_size=5)), st.tuples(st.integers(), st.none(), st.floats())),
    max_size=60))
def test_postgresql_settings_are_a_bounded_strict_record(rows: list[tuple[Any, ...]]) -> None:
    config = settings_of(rows)
    assert len(config) <= min(len(rows), MAX_ENTRIES) + 1
    assert not any("password" in k for k in config)
    assert all(isinstance(v, str) and len(v) <= MAX_VALUE_CHARS for k, v in config.items()
               if k != "truncated")
    assert len(config.get("truncated", "")) <= 2000
    strict_dumps(config)


# --- over the wire --------------------------------------------------------------------

def _spec(address: str) -> Any:
    from types import SimpleNamespace
    return SimpleNamespace(name="kv", address=address, auth=None, settings={},
                           observed=False)


@WIRE
@given(info=_VALUE, config=_VALUE, data=st.data())
def test_a_redis_at_an_address_saying_anything(info: Any, config: Any,
                                               data: st.DataObject) -> None:
    """Its identity (PING, INFO server, CONFIG GET *) is a bounded strict record or a
    ServiceError in one line; its counters (INFO) bounded numbers or a named error."""
    lines = data.draw(st.lists(_INFO_LINE, max_size=30))
    info_bytes = data.draw(_damaged(bulk(("redis_version:7\r\n" + "\r\n".join(
        lines)).encode())) | st.just(_resp(info)))
    config_bytes = data.draw(_damaged(_resp(config)))

    def answer(words: list[bytes]) -> bytes:
        name = words[0].upper()
        return (b"+PONG\r\n" if name == b"PING" else info_bytes if name == b"INFO"
                else config_bytes)

    with scripted(answer, close_after=True) as front:
        address, port = "127.0.0.1", front.port
        try:
            version, record = redis_identity(_spec(front.address), address, port, None)
        except ServiceError as exc:
            assert str(exc).startswith(f"services.kv at {front.address}: ")
            event("identity: ServiceError")
        else:
            event("identity: recorded" + (", cut" if "truncated" in record else ""))
            assert isinstance(version, str) and len(version) <= 140
            assert len(record) <= MAX_ENTRIES // 2 + 2
            strict_dumps(record)
        try:
            counters = redis_counters(address, port)
        except (HarnessError, OSError) as exc:
            event(f"counters: {type(exc).__name__}")
            return
        event("counters: read" + (", with notes" if counters.cut else ""))
        assert len(counters) <= MAX_ENTRIES
        assert all(is_number(v) for v in counters.values())


@WIRE
@given(lines=st.lists(_STAT_LINE, max_size=60), data=st.data())
def test_a_memcached_at_an_address_saying_anything(lines: list[str],
                                                   data: st.DataObject) -> None:
    reply = data.draw(_damaged(("\r\n".join(lines) + "\r\nEND\r\n").encode()))
    version = data.draw(st.sampled_from([b"VERSION 1.6.18\r\n", b"VERSION \r\n", b"ERROR\r\n",
                                         b"VERSION " + b"9" * 300 + b"\r\n", b"garbage"]))

    def answer(words: list[bytes]) -> bytes:
        return version if words[:1] == [b"version"] else reply

    with scripted(answer, "text", close_after=True) as front:
        try:
            svc = SERVICES.get("memcached").attach(LocalHost(), _spec(front.address), None)
        except ServiceError as exc:
            assert str(exc).startswith(f"services.kv at {front.address}: ")
            event("attach: ServiceError")
            return
        event("attach: recorded")
        assert len(svc.config) <= MAX_ENTRIES + 1
        strict_dumps(svc.info())
        try:
            counters = SERVICES.get("memcached").counters(svc)
        except (HarnessError, OSError):
            return
        assert all(is_number(v) for v in counters.values())


_HTTP = st.one_of(
    st.builds(lambda status, headers, body: status + headers + b"\r\n" + body,
              st.sampled_from([b"HTTP/1.1 200 OK\r\n", b"HTTP/1.0 404 Nope\r\n",
                               b"HTTP/1.1 999 \r\n", b"HTTP/9 200 OK\r\n", b"ICY 200 OK\r\n",
                               b"HTTP/1.1 abc OK\r\n", b"\r\n"]),
              st.lists(st.sampled_from([b"Server: x\r\n", b"Content-Length: 5\r\n",
                                        b"Content-Length: -1\r\n",
                                        b"Content-Length: 99999999999\r\n",
                                        b"Transfer-Encoding: chunked\r\n", b"X: " + b"y" * 70_000
                                        + b"\r\n", b"no colon\r\n"]), max_size=5).map(b"".join),
              st.binary(max_size=200) | st.sampled_from([b"5\r\nhello\r\n0\r\n\r\n",
                                                         b"zz\r\n", b"ffffffffff\r\n"])),
    st.binary(max_size=100))


@WIRE
@given(reply=_HTTP)
def test_an_http_server_saying_anything(reply: bytes) -> None:
    with scripted(lambda w: reply if w[:1] == [b"GET"] else None, "text",
                  close_after=True) as front:
        try:
            status, headers, body = http_get("127.0.0.1", front.port, "/stats")
        except (HarnessError, OSError) as exc:
            event(f"http: {type(exc).__name__}")
            return
        event("http: answered")
    assert isinstance(status, int) and len(body) <= MAX_REPLY_BYTES + 1
    assert len(headers) <= 100
    strict_dumps(app_config(body))


def test_a_config_of_three_times_the_bound_is_kept_to_it() -> None:
    """The same call on a reply the kit used to keep whole (12,288 entries)."""
    config = _resp([b"k%d" % i for i in range(3 * MAX_ENTRIES)])
    with scripted(lambda w: b"+PONG\r\n" if w[0] == b"PING" else (
            bulk(b"redis_version:7\r\n") if w[0] == b"INFO" else config),
            close_after=True) as front:
        _, record = redis_identity(_spec(front.address), "127.0.0.1", front.port, None)
    assert len(record) == MAX_ENTRIES // 2 and "truncated" in record
