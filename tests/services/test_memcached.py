"""memcached launcher against a real memcached."""

from __future__ import annotations

import os
import socket

import pytest

from harness.errors import ServiceError
from harness.hosts import LocalHost
from harness.services import RunningService
from harness.services._util import Launch, NotReady
from harness.services.memcached import Memcached, memcached_stats_settings
from tests.fixtures.servers import (
    StartServer,
)

pytestmark = pytest.mark.integration


def _request(svc: RunningService, payload: bytes, end: bytes) -> bytes:
    with socket.create_connection((svc.endpoint.host, svc.endpoint.port), timeout=5) as s:
        s.sendall(payload)
        reply = b""
        while not reply.endswith(end):
            chunk = s.recv(4096)
            assert chunk, f"connection closed after {reply!r}"
            reply += chunk
        return reply


def test_set_then_get(memcached_server: RunningService) -> None:
    assert _request(memcached_server, b"set k 0 0 5\r\nhello\r\n", b"\r\n") == b"STORED\r\n"
    got = _request(memcached_server, b"get k\r\n", b"END\r\n")
    assert got == b"VALUE k 0 5\r\nhello\r\nEND\r\n"
    assert memcached_server.endpoint.kind == "memcached"


def test_version_is_recorded(memcached_server: RunningService) -> None:
    reply = _request(memcached_server, b"version\r\n", b"\r\n").decode()
    assert reply == f"VERSION {memcached_server.version}\r\n"
    assert memcached_server.version[0].isdigit() and "." in memcached_server.version


def test_settings_are_applied(start_server: StartServer) -> None:
    svc = start_server(
        "memcached", memory_mb=32, threads=2, max_connections=100, item_size_max="2m"
    )
    stats = memcached_stats_settings(svc.endpoint.host, svc.endpoint.port)
    assert stats["maxbytes"] == 32 * 1024 * 1024
    assert stats["num_threads"] == 2
    assert stats["maxconns"] == 100
    assert stats["item_size_max"] == 2 * 1024 * 1024
    assert stats["udpport"] == 0
    assert svc.config["maxbytes"] == stats["maxbytes"]
    assert svc.info()["config"]["num_threads"] == 2








def test_unknown_or_mistyped_settings_are_refused(start_server: StartServer) -> None:
    with pytest.raises(ServiceError, match="unknown setting"):
        start_server("memcached", memory=64)
    with pytest.raises(ServiceError, match="memory_mb"):
        start_server("memcached", memory_mb="64")
    with pytest.raises(ServiceError, match="threads"):
        start_server("memcached", threads=True)


def test_two_instances_at_once(start_server: StartServer) -> None:
    a = start_server("memcached", name="a")
    b = start_server("memcached", name="b")
    assert a.endpoint.port != b.endpoint.port
    assert a.workdir != b.workdir
    _request(a, b"set k 0 0 1\r\na\r\n", b"\r\n")
    _request(b, b"set k 0 0 1\r\nb\r\n", b"\r\n")
    assert b"\r\na\r\n" in _request(a, b"get k\r\n", b"END\r\n")
    assert b"\r\nb\r\n" in _request(b, b"get k\r\n", b"END\r\n")


def test_ready_deadline_stops_what_was_started(local_host: LocalHost) -> None:
    # The deadline path every launcher shares: a process that never answers.
    def never() -> None:
        raise NotReady("still waiting")

    expected = r"not ready after 0.3 s \(last probe: still waiting\)"
    with (
        pytest.raises(ServiceError, match=expected),
        Launch(local_host, "memcached", "deadline") as launch,
    ):
        proc = launch.start(["sleep", "60"])
        launch.wait_until_ready(proc, never, timeout_s=0.3)
    assert not local_host.is_alive(proc)
    assert not os.path.exists(launch.workdir)


def test_start_refuses_a_setting_out_of_its_bounds() -> None:
    """Started directly (tests, notebooks), not only through a spec: `-m -1` would run
    memcached with 18446744073708503040 bytes."""
    with pytest.raises(ServiceError, match=r"memcached: memory_mb must be at least 1, not -1"):
        Memcached().start(LocalHost(), "cache", {"memory_mb": -1})


@pytest.mark.parametrize(("settings", "problem"), [
    ({"item_size_max": "2m"}, None),
    ({"item_size_max": "1x"}, "item_size_max '1x' is not a size such as '512k' or '2m'"),
    ({"item_size_max": "1k"}, "item_size_max '1k' must be from 512k to 1024m"),
    ({"item_size_max": "600k"}, "item_size_max '600k' must be a multiple of 512k (memcached's "
                                "slab chunk)"),
    ({"item_size_max": "2m", "memory_mb": 2}, "item_size_max '2m' may be at most half of "
                                              "memory_mb (2 MiB)"),
])
def test_validate_says_what_memcached_would_refuse_at_start(settings: dict,
                                                            problem: str | None) -> None:
    """Each was memcached's own refusal when the run started (checked against 1.6)."""
    assert Memcached().validate(settings) == ([problem] if problem else [])
