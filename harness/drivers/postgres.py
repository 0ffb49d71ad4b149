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
        # A pooler in between (pgbouncer's transaction mode) hands each statement to any
        # server connection: prepared statements would not be found there.
        statement_cache_size=int(endpoint.extra.get("statement_cache", 256)),
    )
