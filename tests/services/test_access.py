"""Who may connect to a server (harness.services.access): the exact addresses, and on the
test bed, PostgreSQL admitting the named machines and refusing any other."""

from __future__ import annotations

import os
import sys

import pytest

from harness.errors import ServiceError
from harness.hosts import LocalHost, connect_host
from harness.services import SERVICES
from harness.services.access import Access, access_for, local_source_address, source_address
from harness.services.pg_cluster import PgCluster
from harness.services.postgres import DATABASE, USER, Postgres, find_pg_binaries
from tests.fixtures.machines import Machine, TestBed


def test_access_keeps_exact_addresses_once_and_drops_loopback() -> None:
    a = Access.of(["10.0.0.7", "127.0.0.1", "10.0.0.7", "::1", "fd00::5", "10.0.0.8"])
    assert a.sources == ("10.0.0.7", "fd00::5", "10.0.0.8")


def test_pg_hba_lines_are_single_addresses_for_the_bench_database_only() -> None:
    lines = Access.of(["10.0.0.7", "fd00::5"]).hba_lines(
        "bench", "harness", replication=["10.0.0.9", "127.0.0.1"])
    entries = [line.split() for line in lines.splitlines() if not line.startswith("#")]
    assert entries == [
        ["host", "bench", "harness", "10.0.0.7/32", "scram-sha-256"],
        ["host", "bench", "harness", "fd00::5/128", "scram-sha-256"],
        ["host", "replication", "harness", "10.0.0.9/32", "scram-sha-256"],
    ]
    assert Access().hba_lines("bench", "harness") == ""


def test_bad_address_is_refused() -> None:
    with pytest.raises(ValueError):
        Access.of(["10.0.0.0/24"])  # a range is not an address


def test_source_address_on_this_machine() -> None:
    assert local_source_address("127.0.0.1") == "127.0.0.1"
    assert source_address(LocalHost(), "127.0.0.1") == "127.0.0.1"
    # A server on this machine is used from this machine only: nothing to add.
    assert access_for(LocalHost(), [LocalHost()]).sources == ()


def test_source_address_without_python_says_which_host() -> None:
    host = LocalHost("client1", python="/nonexistent/python3")
    with pytest.raises(ServiceError, match="client1: cannot tell which address"):
        source_address(host, "127.0.0.1")


def _psql_from(m: Machine, address: str, port: int, database: str = DATABASE,
               password: str = "") -> tuple[int, str]:
    psql = find_pg_binaries(LocalHost())["psql"]
    res = m.run(["env", f"PGPASSWORD={password}", psql, "-X", "-A", "-t", "-w", "-h",
                 address, "-p", str(port), "-U", USER, "-d", database, "-c", "SELECT 1"],
                check=False, timeout=30)
    return res.returncode, res.stderr


@pytest.mark.parametrize("kind", ["postgres", "pg_cluster"])
def test_postgres_on_a_machine_admits_exactly_the_given_machines(
        kind: str, machines: TestBed) -> None:
    srv, cli, oth = machines["srv"], machines["cli"], machines["oth"]
    with connect_host(srv.host_spec()) as server, connect_host(cli.host_spec()) as client:
        access = access_for(server, [client])
        assert access.sources == (machines.control_address, cli.address)
        if kind == "postgres":
            svc = Postgres().start(server, "db", {}, access=access)
        else:  # a primary and a standby on srv: replication from srv's own address
            svc = PgCluster().start(server, "db", {"mode": "local-cluster", "nodes": 2},
                                    hosts={"server": server}, access=access)
        try:
            ep = svc.endpoint
            pw = ep.auth.password
            assert ep.host == srv.address
            assert _psql_from(cli, ep.host, ep.port, password=pw)[0] == 0
            # An admitted machine without the password is refused too.
            code, err = _psql_from(cli, ep.host, ep.port, password="wrong")
            assert code != 0 and "password authentication failed" in err
            code, err = _psql_from(oth, ep.host, ep.port, password=pw)
            assert code != 0 and f'no pg_hba.conf entry for host "{oth.address}"' in err
            # Admitted for the bench database only.
            code, err = _psql_from(cli, ep.host, ep.port, "postgres", password=pw)
            assert code != 0 and "no pg_hba.conf entry" in err
            # The control machine (this process's namespace) too.
            psql = find_pg_binaries(LocalHost())["psql"]
            res = LocalHost().run([psql, "-X", "-A", "-t", "-h", ep.host, "-p", str(ep.port),
                                   "-U", USER, "-d", DATABASE, "-c", "SELECT 1"],
                                  check=False, timeout=30, env={"PGPASSWORD": pw})
            assert res.ok, res.stderr
        finally:
            svc.stop()


PING = {
    # kind -> (request, what the reply starts with)
    "memcached": (b"version\r\n", b"VERSION "),
    "redis": (b"PING\r\n", b"-NOAUTH"),  # reachable, and wants the kit's password
}
ASK = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5) as s:
        s.sendall(sys.argv[3].encode().decode("unicode_escape").encode())
        print(s.recv(64).decode(errors="replace"))
except OSError as e:
    print(type(e).__name__)
"""


@pytest.mark.parametrize("kind", sorted(PING))
def test_servers_without_address_control_listen_on_their_machines_address_only(
        kind: str, machines: TestBed) -> None:
    """memcached and Redis cannot refuse by address: they are bound to the server
    machine's address alone, reachable there from a client machine and not on any other
    address of that machine (its loopback)."""
    srv, cli = machines["srv"], machines["cli"]
    request, reply = PING[kind]
    with connect_host(srv.host_spec()) as server:
        missing = SERVICES.get(kind).missing_binaries(server)
        if missing:
            message = f"{', '.join(missing)} not installed (make setup installs it)"
            if os.environ.get("CI"):
                pytest.fail(message + "; CI installs it (.ci/run)")
            pytest.skip(message)
        svc = SERVICES.get(kind).start(server, "s", {})
        try:
            port = str(svc.endpoint.port)
            raw = request.decode().encode("unicode_escape").decode()
            got = cli.run([sys.executable, "-c", ASK, srv.address, port, raw]).stdout
            assert got.startswith(reply.decode()), got
            got = srv.run([sys.executable, "-c", ASK, "127.0.0.1", port, raw]).stdout
            assert got.strip() == "ConnectionRefusedError"
            listening = [line.split()[3] for line in srv.run(["ss", "-ltnH"]).stdout
                         .splitlines() if line.split()[3].endswith(f":{port}")]
            assert listening == [f"{srv.address}:{port}"]
        finally:
            svc.stop()
