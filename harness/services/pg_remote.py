"""A PostgreSQL at an address, asked over its own protocol from the control machine
(asyncpg, as the workloads connect): who it is (`SHOW server_version`, `SHOW ALL`) and,
at each run's edges, the `pg_stat_database` row of the database the spec names.

The launched server is read with psql on its own machine over its socket instead
(`harness.services.postgres.stat_database`); here there may be no shell on that machine.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import asyncpg

from harness.drivers.replies import (
    MAX_ENTRIES,
    MAX_REPLY_BYTES,
    MAX_VALUE_CHARS,
    MAX_VERSION_CHARS,
    Reading,
    bounded_text,
    cut_note,
    json_value,
    numbers_only,
    version_text,
)
from harness.drivers.tls import client_context, handshake_problem
from harness.hosts import Host
from harness.hosts.endpoint import Credentials, Endpoint, split_hostport
from harness.services._util import ProbeError
from harness.services.attached import AttachedService, attached, not_answering
from harness.services.tlsconf import address_tls

#: Who a server at an address is asked as, when the spec names no user.
DEFAULT_USER = "postgres"
#: Settings never recorded, whatever the server holds in them.
_SECRET = re.compile(r"pass|secret", re.IGNORECASE)
_STAT = ("SELECT row_to_json(d)::text FROM pg_stat_database d WHERE datname = "
         "current_database()")
#: Who it is, asked within the bounds of `harness.drivers.replies` (one row more than
#: kept, so a server with more says so).
_VERSION = f"SELECT left(current_setting('server_version'), {MAX_VERSION_CHARS + 1})"
_SETTINGS = (f"SELECT name, left(setting, {MAX_VALUE_CHARS + 1}) FROM pg_settings "
             f"ORDER BY name LIMIT {MAX_ENTRIES + 1}")


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
        version, settings, can = fetch(endpoint, _VERSION, _SETTINGS,
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
    config = settings_of(settings)
    config["user"], config["database"] = user, database
    return attached(host, spec, "postgres", "postgres", version_of(version), config, creds,
                    {"user": user, "database": database}, tls)


def version_of(rows: list[Any]) -> str:
    """The server's version as the manifest records it (`version_text`'s bound)."""
    first = rows[0] if rows else ()
    return version_text(str(first[0]) if len(first) else "unknown")


def settings_of(rows: list[Any]) -> dict[str, Any]:
    """pg_settings' names and values as the manifest records them: secrets left out,
    within the bounds of `harness.drivers.replies` (the query asks for no more, but the
    server answers what it likes), and `truncated` saying what was cut."""
    cut: list[str] = []
    if len(rows) > MAX_ENTRIES:
        cut.append(f"pg_settings holds more than {MAX_ENTRIES:,} rows: the first "
                   f"{MAX_ENTRIES:,} kept")
    config: dict[str, Any] = {}
    for row in rows[:MAX_ENTRIES]:
        if len(row) != 2:
            cut.append("pg_settings answered rows that are not (name, setting): left out")
            continue
        name = bounded_text(str(row[0]), "a setting's name", cut)
        if not _SECRET.search(name):
            config[name] = bounded_text(str(row[1]), f"setting {name}", cut)
    if (note := cut_note(cut)) is not None:
        config["truncated"] = note
    return config


def counters(endpoint: Endpoint) -> Reading:
    """`pg_stat_database`'s numbers for the endpoint's database, read now: a row of at
    most `MAX_REPLY_BYTES`, a value that is not a finite number said in the reading's
    `cut`."""
    [[(row,)]] = fetch(endpoint, _STAT)
    return stat_row(row, "pg_stat_database")


def stat_row(row: Any, what: str) -> Reading:
    """A statistics row given as JSON text (`row_to_json`), its numbers only (`datid` is
    an id, not a count); ProbeError where it is not a JSON object of at most
    `MAX_REPLY_BYTES`. NaN and Infinity stay text (`numbers_only` names them)."""
    if not isinstance(row, str) or len(row) > MAX_REPLY_BYTES:
        raise ProbeError(f"{what}: not a row of at most {MAX_REPLY_BYTES:,} bytes of JSON")
    try:
        data = json_value(row)
    except (ValueError, RecursionError) as exc:
        raise ProbeError(f"{what}: not JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise ProbeError(f"{what}: not a JSON object")
    return numbers_only(Reading((str(k), v) for k, v in list(data.items())[:MAX_ENTRIES]
                                if k != "datid"), what)
