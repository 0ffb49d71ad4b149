"""What every launcher of a real server owes, checked the same way for each kind:
it listens on its host's address only, stop() leaves no process, port or directory, and
a server that refuses its settings is reported with its own log and cleaned up."""

from __future__ import annotations

import os
import socket

import pytest

from harness.errors import ServiceError
from tests.fixtures.servers import StartServer, processes_in, tcp_listeners, workdir_from_error

pytestmark = pytest.mark.integration

KINDS = ("memcached", "redis", "postgres")

#: Settings each server itself refuses at start, and what its log then says.
REFUSED = {
    # memcached refuses items larger than half its memory: it exits at once.
    "memcached": ({"memory_mb": 8, "item_size_max": "8m"},
                  "Cannot set item size limit higher than 1/2 of memory max"),
    "redis": ({"maxmemory": "lots"}, "argument must be a memory value"),
    "postgres": ({"shared_buffers": "nonsense"},
                 'invalid value for parameter "shared_buffers"'),
}


@pytest.mark.parametrize("kind", KINDS)
def test_listens_only_on_host_address(start_server: StartServer, kind: str) -> None:
    svc = start_server(kind)
    assert svc.endpoint.host == "127.0.0.1"
    assert tcp_listeners(svc.endpoint.port) == {"127.0.0.1"}


@pytest.mark.parametrize("kind", KINDS)
def test_stop_leaves_nothing(start_server: StartServer, kind: str) -> None:
    svc = start_server(kind)
    assert svc.alive()
    svc.stop()
    assert not svc.alive()
    assert not svc.host.exists(str(svc.workdir))
    assert processes_in(str(svc.workdir)) == []
    assert tcp_listeners(svc.endpoint.port) == set()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((svc.endpoint.host, svc.endpoint.port), timeout=2).close()
    svc.stop()  # a second stop is harmless


@pytest.mark.parametrize("kind", KINDS)
def test_failed_start_reports_log_and_cleans_up(start_server: StartServer, kind: str) -> None:
    settings, said = REFUSED[kind]
    with pytest.raises(ServiceError) as err:
        start_server(kind, **settings)
    message = str(err.value)
    assert said in message
    workdir = workdir_from_error(message, kind)
    assert processes_in(workdir) == []
    assert not os.path.exists(workdir)
