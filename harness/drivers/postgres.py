"""PostgreSQL access for workloads: asyncpg, the fastest asyncio driver available.

The harness's own servers take a random password per start, which the endpoint carries
(`Credentials`); for a server given by URL, asyncpg reads PGPASSWORD/.pgpass itself.
"""

from __future__ import annotations

import asyncpg

from harness.drivers.tls import client_context
from harness.services.base import Endpoint


async def connect(endpoint: Endpoint, timeout_s: float = 10.0) -> asyncpg.Connection:
    return await asyncpg.connect(
        host=endpoint.host,
        port=endpoint.port,
        user=endpoint.extra.get("user", "postgres"),
        database=endpoint.extra.get("database", "postgres"),
        password=endpoint.auth.password if endpoint.auth is not None else None,
        ssl=client_context(endpoint.tls) if endpoint.tls is not None else None,
        timeout=timeout_s,
        # A pooler in between (pgbouncer's transaction mode) hands each transaction to
        # any server connection: a named statement would not be found there, or would be
        # another client's. 0: unnamed statements, parsed with each execution.
        statement_cache_size=int(endpoint.extra.get("statement_cache", 256)),
    )


def named_statements(endpoint: Endpoint) -> bool:
    """Whether connections to `endpoint` may prepare named statements (nothing between
    the kit and PostgreSQL that hands transactions to other backends)."""
    return int(endpoint.extra.get("statement_cache", 256)) != 0
