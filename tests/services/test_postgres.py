"""PostgreSQL launcher against a real PostgreSQL, queried over TCP with asyncpg."""

from __future__ import annotations

import asyncio
import os
import pwd
import re
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from harness.errors import ServiceError
from harness.services import RunningService
from tests.fixtures.servers import (
    StartServer,
)

pytestmark = pytest.mark.integration


async def _query(svc: RunningService, *sql: str) -> list[Any]:
    ep = svc.endpoint
    conn = await asyncpg.connect(
        host=ep.host, port=ep.port, user=ep.extra["user"], database=ep.extra["database"],
        password=ep.auth.password)
    try:
        return [await conn.fetch(q) for q in sql]
    finally:
        await conn.close()


def query(svc: RunningService, *sql: str) -> list[Any]:
    return asyncio.run(_query(svc, *sql))


def test_insert_then_select(postgres_server: RunningService) -> None:
    *_, rows = query(
        postgres_server,
        "CREATE TABLE kv (k text PRIMARY KEY, v bytea)",
        "INSERT INTO kv VALUES ('a', 'hello'::bytea), ('b', 'world'::bytea)",
        "SELECT k, v FROM kv ORDER BY k",
    )
    assert [(r["k"], r["v"]) for r in rows] == [("a", b"hello"), ("b", b"world")]
    assert postgres_server.endpoint.extra == {"user": "harness", "database": "bench"}


def test_version_is_recorded(postgres_server: RunningService) -> None:
    [rows] = query(postgres_server, "SHOW server_version")
    assert rows[0][0] == postgres_server.version
    assert re.match(r"^\d+(\.\d+)+", postgres_server.version)


def test_settings_are_applied(start_server: StartServer) -> None:
    svc = start_server(
        "postgres", synchronous_commit="off", fsync=False, shared_buffers="32MB",
        max_connections=20, extra={"work_mem": "8MB", "jit": False},
    )
    names = ["synchronous_commit", "fsync", "shared_buffers", "max_connections", "work_mem", "jit"]
    shown = {n: rows[0][0] for n, rows in zip(names, query(svc, *(f"SHOW {n}" for n in names)),
                                                strict=True)}
    assert shown == {
        "synchronous_commit": "off", "fsync": "off", "shared_buffers": "32MB",
        "max_connections": "20", "work_mem": "8MB", "jit": "off",
    }
    # A server used from this machine only admits no other address (pg_hba: loopback).
    binary = svc.config.pop("binary")
    assert binary["path"].endswith("/postgres") and len(binary["sha256"]) == 64
    assert svc.config == {**shown, "admitted": [], "listen_addresses": "127.0.0.1",
                          "auth": "scram-sha-256, a random password per server start",
                          "statements": "named: the kit's own server, nothing between"}


async def _named_after_a_query(svc: RunningService) -> int:
    """Named statements the workloads' driver left on its connection after a query."""
    from harness.drivers import postgres as pg

    conn = await pg.connect(svc.endpoint)
    try:
        assert await conn.fetchval("SELECT $1::int + 1", 1) == 2
        return await conn.fetchval("SELECT count(*) FROM pg_prepared_statements")
    finally:
        await conn.close()


@pytest.mark.parametrize("statements", ["auto", "unnamed"])
def test_statements_named_by_default_unnamed_when_set(start_server: StartServer,
                                                      statements: str) -> None:
    """The kit's own server: named statements (cached per connection), or with
    `statements: unnamed` none at all, as behind a pooler; the manifest says which."""
    svc = start_server("postgres", statements=statements)
    named = asyncio.run(_named_after_a_query(svc))
    if statements == "auto":
        assert named >= 1 and "statement_cache" not in svc.endpoint.extra
        assert svc.config["statements"] == "named: the kit's own server, nothing between"
    else:
        assert named == 0 and svc.endpoint.extra["statement_cache"] == 0
        assert svc.config["statements"] == "unnamed: set in the spec"




def test_never_runs_as_root(postgres_server: RunningService) -> None:
    [proc] = postgres_server.processes
    status = Path(f"/proc/{proc.pid}/status").read_text()
    uid = int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))  # type: ignore[union-attr]
    assert uid != 0
    if os.geteuid() == 0:
        assert uid == pwd.getpwnam("postgres").pw_uid






@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"port": 5}, "set by the launcher"),
        ({"fsync": "off"}, "as its own setting"),
        ({"work mem": "1MB"}, "not a parameter name"),
        ({"work_mem": ["1MB"]}, "must be a scalar"),
    ],
)
def test_bad_extra_is_refused_before_starting(
    start_server: StartServer, extra: dict[str, Any], match: str
) -> None:
    with pytest.raises(ServiceError, match=match):
        start_server("postgres", extra=extra)


def test_two_instances_at_once(start_server: StartServer) -> None:
    a = start_server("postgres", name="a")
    b = start_server("postgres", name="b", synchronous_commit="off")
    assert a.endpoint.port != b.endpoint.port
    assert query(a, "SHOW synchronous_commit")[0][0][0] == "on"
    assert query(b, "SHOW synchronous_commit")[0][0][0] == "off"


@pytest.mark.parametrize(("kind", "value", "problem"), [
    ("postgres", "128MB", None), ("postgres", "1GB", None), ("pg_cluster", "16384", None),
    ("postgres", "1 GB", None),
    ("postgres", "lots", "shared_buffers 'lots' is not a size such as '128MB' or '1GB'"),
    ("pg_cluster", "128mb", "shared_buffers '128mb' is not a size such as '128MB' or '1GB'"),
    ("postgres", "64kB", "shared_buffers '64kB' must be at least 128kB (PostgreSQL's "
                         "minimum)"),
])
def test_validate_says_which_shared_buffers_postgres_would_refuse(
        kind: str, value: str, problem: str | None) -> None:
    from harness.services import SERVICES

    problems = SERVICES.get(kind).validate({"shared_buffers": value})
    assert [p for p in problems if "shared_buffers" in p] == ([problem] if problem else [])
