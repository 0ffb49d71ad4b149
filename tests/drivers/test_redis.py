"""RESP parsing and cluster slot hashing (the cluster client runs against real clusters
in tests/services/test_redis_cluster.py and tests/studies/kvstore/test_elastic.py)."""

from __future__ import annotations

import pytest

from harness.drivers.redis import Incomplete, RespError, encode, key_slot, parse_reply


def test_key_slot_matches_redis() -> None:
    assert key_slot(b"123456789") == 12739  # CRC16/XMODEM check value 0x31C3
    assert key_slot(b"foo") == 12182 and key_slot(b"bar") == 5061
    assert key_slot(b"{user1000}.following") == key_slot(b"user1000")
    assert key_slot(b"foo{}{bar}") == key_slot(b"foo{}{bar}")  # empty tag: whole key


def test_replies_parse_by_type() -> None:
    data = b"+OK\r\n-MOVED 3999 127.0.0.1:6381\r\n:42\r\n$5\r\nhe\r\no\r\n$-1\r\n" \
           b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n"
    pos, values = 0, []
    while pos < len(data):
        value, pos = parse_reply(data, pos)
        values.append(value)
    assert values[0] == b"OK" and values[2] == 42 and values[3] == b"he\r\no"
    assert isinstance(values[1], RespError) and str(values[1]).startswith("MOVED 3999")
    assert values[4] is None and values[5] == [b"a", [1]]
    with pytest.raises(Incomplete):
        parse_reply(b"$10\r\nshort\r\n", 0)


def test_commands_encode_as_bulk_arrays() -> None:
    assert encode(["SET", b"k", 5]) == b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n5\r\n"
