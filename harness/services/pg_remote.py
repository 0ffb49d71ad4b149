"""A PostgreSQL at an address, asked over its own protocol from the control machine
(asyncpg, as the workloads connect): who it is (`SHOW server_version`, `SHOW ALL`) and,
at each run's edges, the `pg_stat_database` row of the database the spec names.

The launched server is read with psql on its own machine over its socket instead
(`harness.services.postgres.stat_database`); here there may be no shell on that machine.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import asyncpg

from harness.drivers.tls import client_context, handshake_problem
from harness.hosts import Host
from harness.hosts.endpoint import Credentials, Endpoint, split_hostport
from harness.services.attached import AttachedService, attached, not_answering
from harness.services.tlsconf import address_tls

#: Who a server at an address is asked as, when the spec names no user.
DEFAULT_USER = "postgres"
#: Settings never recorded, whatever the server holds in them.
_SECRET = re.compile(r"pass|secret", re.IGNORECASE)
_STAT = ("SELECT row_to_json(d)::text FROM pg_stat_database d WHERE datname = "
         "current_database()")


async def _fetch(endpoint: Endpoint, *sql: str) -> list[list[Any]]:
    auth = endpoint.auth
    conn = await asyncpg.connect(host=endpoint.host, port=endpoint.port,
                                 user=endpoint.extra.get("user"),
                                 database=endpoint.extra.get("database"),
                                 password=auth.password if auth else None, timeout=10,
                                 ssl=client_context(endpoint.tls) if endpoint.tls else None)
    try:
        return [[tuple(r) for r in await conn.fetch(q)] for q in sql]
    finally:
        await conn.close()


def fetch(endpoint: Endpoint, *sql: str) -> list[list[Any]]:
    """Rows of each query on one connection (a thread's own event loop)."""
    return asyncio.run(_fetch(endpoint, *sql))


def attach(host: Host, spec: Any, creds: Credentials | None) -> AttachedService:
    """The PostgreSQL at `spec.address`, as the spec's user into its database."""
    address, port = split_hostport(spec.address)
    user = (creds.user if creds else None) or DEFAULT_USER
    database = spec.database or user
    tls = address_tls(spec)
    endpoint = Endpoint("postgres", address, port, {"user": user, "database": database},
                        creds, tls)
    try:
        version, settings, can = fetch(endpoint, "SHOW server_version",
                                       "SELECT name, setting FROM pg_settings ORDER BY name",
                                       "SELECT has_schema_privilege('public', 'CREATE')")
    except asyncpg.InvalidPasswordError as exc:
        fix = (f"check the password in {spec.auth.source()}" if spec.auth
               else "it wants a password: give auth: {user: ..., password_env: VAR}")
        raise not_answering(spec, f"refused user {user!r}", exc, fix) from None
    except asyncpg.InvalidCatalogNameError as exc:
        raise not_answering(spec, f"no database {database!r}", exc,
                            "name an existing one in database:") from None
    except (asyncpg.PostgresError, OSError, TimeoutError, asyncpg.InterfaceError) as exc:
        raise not_answering(spec, "no PostgreSQL answer", exc, handshake_problem(exc) or (
            "check the address, pg_hba.conf for this machine (hostssl needs tls:), and "
            "the user")) from None
    if not can[0][0]:  # every workload of the kit's makes its own tables
        raise not_answering(spec, f"user {user!r} may not create tables in schema public "
                            f"of {database!r}", PermissionError("CREATE on schema public"),
                            f"GRANT CREATE ON SCHEMA public TO {user}, or name a database "
                            "the user owns (the workloads create their own tables there)")
    config: dict[str, Any] = {name: value for name, value in settings
                              if not _SECRET.search(name)}
    config["user"], config["database"] = user, database
    return attached(host, spec, "postgres", "postgres", str(version[0][0]), config, creds,
                    {"user": user, "database": database}, tls)


def counters(endpoint: Endpoint) -> dict[str, float]:
    """`pg_stat_database`'s numbers for the endpoint's database, read now."""
    [[(row,)]] = fetch(endpoint, _STAT)
    data = json.loads(row)
    return {k: v for k, v in data.items() if k != "datid"
            and isinstance(v, (int, float)) and not isinstance(v, bool)}
