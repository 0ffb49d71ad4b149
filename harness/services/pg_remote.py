"""A PostgreSQL at an address, asked over its own protocol from the control machine
(asyncpg, as the workloads connect): who it is (`SHOW server_version`, `SHOW ALL`), what
sits between the kit and it (`between`), and, at each run's edges, the
`pg_stat_database` row of the database the spec names.

What sits between: the server says where *its* end of the kit's connection is
(`inet_server_addr()`, `inet_server_port()`; NULL over a Unix socket, as a pooler on the
server's machine often connects). An end other than the address the kit dialed (its name
resolved) means a pooler or a TCP proxy in between (pgbouncer, pgpool-II, HAProxy, a
cloud's proxy), and the workloads use unnamed statements there (asyncpg's
`statement_cache_size=0`: parsed with each execution, in the same transaction): a named
one prepared on one backend is not on the next (pgbouncer's transaction and statement
pooling hand each transaction to any backend) or is there already (another client's, of
the same name). Which pooling: two connections open at once, the second asking which
backend serves it (the first's: transactions share backends), and a transaction block
tried (refused: statement pooling). Every query here is unnamed too.

The launched server is read with psql on its own machine over its socket instead
(`harness.services.postgres.stat_database`); here there may be no shell on that machine.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from dataclasses import dataclass
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
from harness.errors import ServiceError
from harness.hosts import Host
from harness.hosts.endpoint import Credentials, Endpoint, split_hostport
from harness.services._util import ProbeError
from harness.services.attached import AttachedService, attached, not_answering
from harness.services.tlsconf import address_tls
from harness.text import printable

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
#: The server's end of the connection and the backend serving it.
_SERVER_END = "SELECT host(inet_server_addr()), inet_server_port(), pg_backend_pid()"
#: `statements`: what a spec may set (a postgres service's setting).
STATEMENTS = ("auto", "named", "unnamed")
#: What the manifest keeps of a message a pooler sent.
_MESSAGE_CHARS = 200


async def _connect(endpoint: Endpoint) -> asyncpg.Connection:
    """A connection of unnamed statements only: it works behind any pooler."""
    auth = endpoint.auth
    return await asyncpg.connect(host=endpoint.host, port=endpoint.port,
                                 user=endpoint.extra.get("user"),
                                 database=endpoint.extra.get("database"),
                                 password=auth.password if auth else None, timeout=10,
                                 ssl=client_context(endpoint.tls) if endpoint.tls else None,
                                 statement_cache_size=0)


async def _fetch(endpoint: Endpoint, *sql: str) -> list[list[Any]]:
    conn = await _connect(endpoint)
    try:
        return [[tuple(r) for r in await conn.fetch(q)] for q in sql]
    finally:
        await conn.close()


def fetch(endpoint: Endpoint, *sql: str) -> list[list[Any]]:
    """Rows of each query on one connection (a thread's own event loop)."""
    return asyncio.run(_fetch(endpoint, *sql))


@dataclass(frozen=True)
class Between:
    """What sits between the kit and a PostgreSQL, as the server and the pooler answered."""

    #: Whether the server's end of the connection is not the address the kit dialed.
    found: bool
    #: What was found, in words (the manifest's `between`).
    what: str
    #: session, transaction or statement: the pooling of what is between (None: nothing).
    pooling: str | None = None
    #: Why that pooling, in words.
    why: str = ""


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    ip = ipaddress.ip_address(text.split("%", 1)[0])  # no IPv6 zone
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def dialed(host: str, port: int) -> set[tuple[Any, int]]:
    """Every (address, port) the kit may reach by dialing `host`:`port` (a name resolved
    as the driver resolves it)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return {(_ip(str(info[4][0])), port) for info in infos}


def server_end(addr: str | None, port: int | None, dialed_to: set[tuple[Any, int]]
               ) -> tuple[bool, str]:
    """(whether the server's end of a connection, `addr`:`port` as it reported them,
    is one of the addresses the kit dialed; that end in words)."""
    if addr is None or port is None:
        return False, "a Unix socket"
    try:
        ip = _ip(addr)
    except ValueError:
        return False, printable(addr)[:_MESSAGE_CHARS]
    end = f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"
    return (ip, port) in dialed_to, end


async def _between(endpoint: Endpoint) -> Between:
    where = (f"[{endpoint.host}]:{endpoint.port}" if ":" in endpoint.host
             else f"{endpoint.host}:{endpoint.port}")
    first = await _connect(endpoint)
    try:
        addr, port, pid = await first.fetchrow(_SERVER_END)
        direct, end = server_end(addr, port, dialed(endpoint.host, endpoint.port))
        if direct:
            return Between(False, f"nothing: PostgreSQL's end of the connection is {end}, "
                                  "the address the kit dialed")
        what = (f"a pooler or proxy: the kit dialed {where}, PostgreSQL's end of the "
                f"connection is {end}")
        # The first stays open (a session pooler keeps its backend for it) while a
        # second asks which backend serves it, then tries a transaction block.
        second = await _connect(endpoint)
        try:
            other = await second.fetchval("SELECT pg_backend_pid()")
            refused = await _transaction_refused(second)
        finally:
            await second.close(timeout=2)
    finally:
        await first.close(timeout=2)
    if refused is not None:
        return Between(True, what, "statement", f"a transaction block was refused ({refused})")
    if other == pid:
        return Between(True, what, "transaction",
                       f"two connections open at once ran on one backend (pid {pid})")
    return Between(True, what, "session", "each connection kept a backend of its own "
                   "(session pooling, or a TCP proxy)")


async def _transaction_refused(conn: asyncpg.Connection) -> str | None:
    """Why a transaction block failed on `conn` (which may be closed after it), or None."""
    try:
        async with conn.transaction():
            await conn.execute("SELECT 1")
    except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        return printable(" ".join(str(exc).split()))[:_MESSAGE_CHARS]
    return None


def between(endpoint: Endpoint) -> Between:
    """What sits between the kit and the PostgreSQL at `endpoint` (see the module doc)."""
    return asyncio.run(_between(endpoint))


def statements(endpoint: Endpoint, setting: str, *, started: bool = False,
               strict: bool = True) -> tuple[dict[str, Any], dict[str, str]]:
    """The endpoint's `extra` (`statement_cache`: 0 for unnamed statements, `pooling`)
    and what the manifest's config records (`between`, `pooling`, `statements`) for the
    PostgreSQL at `endpoint`, with `statements: setting` (auto, named, unnamed).
    `started`: what is at `endpoint` is a pooler or proxy the kit started in front of
    PostgreSQL (unnamed, whatever is found). Where `auto` must decide and the server did
    not say: ProbeError if `strict`, else unnamed (they work behind any pooler)."""
    try:
        found: Between | None = between(endpoint)
        problem = ""
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
        found = None
        problem = f"{type(exc).__name__}: {printable(' '.join(str(exc).split()))}"
        if strict and setting == "auto" and not started:
            raise ProbeError(f"could not tell whether a pooler or proxy sits between the "
                             f"kit and PostgreSQL ({problem[:_MESSAGE_CHARS]})") from None
    config = {"between": found.what if found else f"not known ({problem[:_MESSAGE_CHARS]})"}
    extra: dict[str, Any] = {}
    if found is not None and found.pooling is not None:
        config["pooling"] = f"{found.pooling}: {found.why}"
        extra["pooling"] = found.pooling
    if started:
        unnamed, why = True, "a pooler or proxy the kit started is between"
    elif setting != "auto":
        unnamed, why = setting == "unnamed", f"set in the spec (statements: {setting})"
    elif found is None:
        unnamed, why = True, "what is between is not known; unnamed work behind any pooler"
    else:
        unnamed = found.found
        why = "a pooler or proxy is between" if unnamed else "nothing is between"
    config["statements"] = f"{'unnamed' if unnamed else 'named'}: {why}"
    if unnamed:
        extra["statement_cache"] = 0
    return extra, config


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
    try:  # named statements, or unnamed ones where a pooler or proxy is between
        extra, found = statements(endpoint, str(spec.settings.get("statements", "auto")))
    except ProbeError as exc:
        raise ServiceError(f"services.{spec.name} at {spec.address}: {exc}; set settings: "
                           "{statements: unnamed} where a pooler or proxy is between "
                           "(pgbouncer, pgpool-II, HAProxy), {statements: named} where "
                           "none is") from None
    config = settings_of(settings)
    config.update(user=user, database=database, **found)
    return attached(host, spec, "postgres", "postgres", version_of(version), config, creds,
                    {"user": user, "database": database, **extra}, tls)


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
