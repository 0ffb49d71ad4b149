"""The native core's reply parser against the Python drivers', on replies captured from
real memcached and Redis servers: the same replies, of the same kinds and sizes, from
every prefix of the stream (a reply cut anywhere is incomplete, never misread)."""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest

from harness.drivers.memcache import MemcacheProtocol
from harness.drivers.redis import RespConnection, encode
from harness.loadgen import native
from harness.services.base import RunningService
from harness.services.redis import auth_command

pytestmark = pytest.mark.integration

if native.built():
    from harness.loadgen import _native
elif os.environ.get("CI"):
    raise RuntimeError("the native load-generator core is not built under CI")
else:
    pytest.skip("the native load-generator core is not built", allow_module_level=True)


def _capture(service: RunningService, payload: bytes, parser: Any, count: int) -> bytes:
    """Send `payload` (count requests) in one write; the raw bytes of all the replies."""
    data = b""
    with socket.create_connection((service.endpoint.host, service.endpoint.port), 5) as s:
        if service.endpoint.auth is not None:  # the kit's Redis takes its password first
            s.sendall(encode(auth_command(service.endpoint.auth)))
            assert s.recv(64) == b"+OK\r\n"
        s.sendall(payload)
        while True:
            replies: list[Any] = []
            pos = parser._parse(data, replies.append, count)
            if len(replies) == count and pos == len(data):
                return data
            data += s.recv(65536)


def _kinds(replies: list[Any], stored: bytes) -> list[tuple[int, int]]:
    """The Python driver's replies as the core's (kind, size)."""
    out = []
    for r in replies:
        if r is None:
            out.append((_native.R_MISS, 0))
        elif r == stored:
            out.append((_native.R_STORED, 0))
        elif type(r) is bytes and r.startswith(b"v"):  # every value here starts with v
            out.append((_native.R_VALUE, len(r)))
        else:
            out.append((_native.R_OTHER, 0))
    return out


def _agree(proto: int, parser: Any, data: bytes, stored: bytes) -> None:
    for cut in range(len(data) + 1):
        replies: list[Any] = []
        pos = parser._parse(data[:cut], replies.append, 1 << 30)
        got, consumed = _native.parse_replies(proto, data[:cut])
        assert got == _kinds(replies, stored), cut
        assert consumed == pos, cut


def test_memcached_replies_parse_alike(memcached_server: RunningService) -> None:
    value = b"v" * 100
    tricky = b"v\r\nEND\r\n" * 3  # a value that looks like replies
    requests = [b"set k1 0 0 100\r\n" + value + b"\r\n", b"get k1\r\n", b"get nope\r\n",
                b"set k2 5 0 %d\r\n" % len(tricky) + tricky + b"\r\n", b"get k2\r\n",
                b"delete nope\r\n", b"bogus\r\n", b"get k1\r\n"]
    data = _capture(memcached_server, b"".join(requests), MemcacheProtocol(), len(requests))
    got, consumed = _native.parse_replies(_native.MEMCACHE, data)
    assert consumed == len(data)
    assert [k for k, _ in got] == [_native.R_STORED, _native.R_VALUE, _native.R_MISS,
                                   _native.R_STORED, _native.R_VALUE, _native.R_OTHER,
                                   _native.R_OTHER, _native.R_VALUE]
    assert [s for k, s in got if k == _native.R_VALUE] == [100, len(tricky), 100]
    _agree(_native.MEMCACHE, MemcacheProtocol(), data, b"STORED")


def test_redis_replies_parse_alike(redis_server: RunningService) -> None:
    tricky = b"v\r\n$3\r\nabc\r\n+OK\r\n"
    requests = [encode((b"SET", b"k1", b"v" * 100)), encode((b"GET", b"k1")),
                encode((b"GET", b"nope")), encode((b"SET", b"k2", tricky)),
                encode((b"GET", b"k2")), encode((b"INCR", b"n")), encode((b"BOGUS",)),
                encode((b"GET", b"k1"))]
    data = _capture(redis_server, b"".join(requests), RespConnection(), len(requests))
    got, consumed = _native.parse_replies(_native.RESP, data)
    assert consumed == len(data)
    assert [k for k, _ in got] == [_native.R_STORED, _native.R_VALUE, _native.R_MISS,
                                   _native.R_STORED, _native.R_VALUE, _native.R_OTHER,
                                   _native.R_OTHER, _native.R_VALUE]
    assert [s for k, s in got if k == _native.R_VALUE] == [100, len(tricky), 100]
    _agree(_native.RESP, RespConnection(), data, b"OK")
