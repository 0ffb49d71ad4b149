"""The servers' counter replies, read by the drivers' parsers: a memcached `stats` and a
Redis `INFO stats clients commandstats`, captured from the servers the tests run
(tests/data/drivers/), and the difference a run's telemetry takes of two readings."""

from __future__ import annotations

from pathlib import Path

from harness.drivers.memcache import parse_stats
from harness.drivers.redis import parse_info, parse_reply
from harness.services import SERVICES

DATA = Path(__file__).resolve().parent.parent / "data" / "drivers"


def test_memcached_stats_reply() -> None:
    stats = parse_stats((DATA / "memcached-1.6.18-stats.txt").read_bytes())
    # Captured after one set, a get that hit and one that missed.
    assert stats["cmd_get"] == 2 and stats["get_hits"] == 1 and stats["get_misses"] == 1
    assert stats["cmd_set"] == 1 and stats["curr_connections"] == 1
    assert stats["version"] == "1.6.18" and stats["libevent"] == "2.1.12-stable"
    assert stats["rusage_system"] == 0.004255 and isinstance(stats["rusage_user"], float)
    assert parse_stats(b"ERROR\r\n") == {}


def test_redis_info_reply_with_commandstats() -> None:
    text, _ = parse_reply((DATA / "redis-7.0.15-info-stats-clients-commandstats.resp")
                          .read_bytes())
    info = parse_info(text.decode())
    # Captured after one SET, a GET that hit and one that missed (and the probes).
    assert info["cmdstat_get_calls"] == 2 and info["cmdstat_set_calls"] == 1
    assert info["keyspace_hits"] == 1 and info["keyspace_misses"] == 1
    assert info["cmdstat_get_usec_per_call"] == 1.0 and info["connected_clients"] == 1
    assert info["cmdstat_config|get_calls"] == 7
    assert not any(k.startswith("#") for k in info)


def test_a_counter_is_a_difference_and_a_gauge_its_end_value() -> None:
    memcached = SERVICES.get("memcached")
    start = {"cmd_get": 10, "curr_connections": 5, "rusage_user": 0.1}
    end = {"cmd_get": 25, "curr_connections": 1, "rusage_user": 0.4, "evictions": 3}
    assert memcached.counter_delta(start, end) == {
        "cmd_get": 15, "curr_connections": 1, "rusage_user": 0.3, "evictions": 3}
