"""Redis, standalone: one redis-server, probed with RESP over TCP from the harness side;
its counters (INFO stats, clients and commandstats) for a run's telemetry; with
`replicas`, a primary and its replicas (`harness.services.redis_replicas`).

The server reads its settings from a redis.conf in its work directory, one directive a
line and every value quoted: a setting's value is that directive's arguments, never a new
option (`--bind 0.0.0.0` as a `save` value once was). It requires a password drawn at
random for each start (`requirepass`), which every client of the kit sends (AUTH), so no
other local user can CONFIG SET or FLUSHALL a server under measurement."""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from harness.drivers.redis import RespError, encode, parse_info
from harness.drivers.replies import (
    MAX_ENTRIES,
    MAX_REPLY_BYTES,
    Reading,
    bounded_text,
    cut_note,
    numbers_only,
    version_text,
)
from harness.drivers.respscan import ReplyScan
from harness.drivers.tls import handshake_problem
from harness.hosts import Host
from harness.hosts.endpoint import Credentials, TLSConfig, split_hostport
from harness.services import redis_replicas as replicas
from harness.services._util import (
    Launch,
    NotReady,
    ProbeError,
    tcp_request,
)
from harness.services.attached import attached, not_answering
from harness.services.base import Endpoint, RunningService, Setting
from harness.services.ownbuild import BINARY_SETTING, binary_problems
from harness.services.packages import REDIS_SERVER
from harness.services.single import SingleServer
from harness.services.tlsconf import TLS_SETTING, address_tls

POLICIES = (
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "noeviction",
)

#: Our setting name -> redis config name; CONFIG GET of these goes into the manifest.
CONFIG_NAMES = {
    "maxmemory": "maxmemory",
    "maxmemory_policy": "maxmemory-policy",
    "appendonly": "appendonly",
    "appendfsync": "appendfsync",
    "save": "save",
    "io_threads": "io-threads",
}
#: Directives the launcher sets itself: an `extra` overriding them would break the
#: endpoint or the run directory, or let others in.
RESERVED = frozenset({"bind", "port", "dir", "daemonize", "protected-mode", "unixsocket",
                      "unixsocketperm", "logfile", "pidfile", "include", "requirepass",
                      "user", "aclfile", "masterauth", "masteruser", "tls-port",
                      "replicaof", "slaveof",
                      "enable-debug-command", "enable-module-command", "loadmodule"})
#: How clients authenticate, as the manifest records it.
AUTH_MODE = "requirepass, a random password per server start"
#: An RDB snapshot rule: pairs of seconds and changes, or nothing.
_SAVE = re.compile(r"^\s*$|^\s*[0-9]{1,10}\s+[0-9]{1,10}(\s+[0-9]{1,10}\s+[0-9]{1,10})*\s*$")
_DIRECTIVE = re.compile(r"^[a-z][a-z0-9-]*$")


def extra_problems(extra: Any) -> list[str]:
    """Why an `extra` mapping of redis.conf directives cannot be passed on, if it cannot."""
    if not isinstance(extra, Mapping):
        return [f"extra must be a mapping of redis.conf directive -> value, not {extra!r}"]
    problems = []
    named = {v: k for k, v in CONFIG_NAMES.items()}
    for key, value in extra.items():
        if not isinstance(key, str) or not _DIRECTIVE.match(key):
            problems.append(f"extra: {key!r} is not a redis.conf directive name "
                            "(lower case, e.g. appendfsync or hz)")
        elif key in RESERVED:
            problems.append(f"extra: {key!r} is set by the launcher")
        elif key in named:
            problems.append(f"extra: set {key!r} as the setting {named[key]!r}, not in extra")
        elif not isinstance(value, str | int | float | bool) or (
                isinstance(value, str) and "\n" in value):
            problems.append(f"extra: {key}={value!r} must be one line of text or a number")
    return problems


def _directive_value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _quoted(token: str) -> str:
    """One argument as redis.conf reads it (sdssplitargs): double quotes, with
    backslashes, quotes and anything unprintable escaped."""
    out = []
    for ch in token:
        if ch in '"\\':
            out.append("\\" + ch)
        elif not ch.isprintable() or ord(ch) > 126:
            out.extend(f"\\x{b:02x}" for b in ch.encode())
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def config_text(conf: Mapping[str, Any]) -> str:
    """redis.conf text: one directive a line, each argument quoted. A list value is its
    arguments as they are (a path, a password); any other value is split on blanks, as
    Redis reads a directive's words (an empty one is one empty argument: `save ""`)."""
    lines = []
    for key, value in conf.items():
        if not _DIRECTIVE.match(key):
            raise ValueError(f"{key!r} is not a redis.conf directive name")
        args = ([str(v) for v in value] if isinstance(value, list)
                else _directive_value(value).split() or [""])
        lines.append(" ".join([key, *map(_quoted, args)]))
    return "\n".join(lines) + "\n"


def auth_command(auth: Credentials) -> list[str]:
    """AUTH [user] password."""
    return ["AUTH", *([auth.user] if auth.user else []), auth.password]


#: INFO fields a run's telemetry reports as deltas over the run (events), besides every
#: command's `cmdstat_<command>_calls`, `_usec`, `_failed_calls` and `_rejected_calls`...
COUNTERS = (
    "total_connections_received", "total_commands_processed", "total_net_input_bytes",
    "total_net_output_bytes", "rejected_connections", "expired_keys", "evicted_keys",
    "keyspace_hits", "keyspace_misses", "total_error_replies", "total_reads_processed",
    "total_writes_processed", "sync_full", "sync_partial_ok", "sync_partial_err",
)
#: ... and levels, reported as their value at the run's end.
GAUGES = ("connected_clients", "blocked_clients")
_CMDSTAT = ("_calls", "_usec", "_failed_calls", "_rejected_calls")


class RedisReplyError(ProbeError):
    """The server answered with a RESP error (`-ERR ...`)."""


class RespProblem(ProbeError):
    """The server's reply is not RESP, or larger than the bounds it is read to."""


def decoded(value: Any) -> Any:
    """The driver's reply as the probes use it: text for strings, our error for errors."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, list):
        return [decoded(v) for v in value]
    if isinstance(value, RespError):
        return RedisReplyError(str(value))
    return value


_MEMORY = re.compile(r"^[0-9]{1,20}(b|k|kb|m|mb|g|gb)?$", re.IGNORECASE)


def maxmemory_problem(value: Any) -> str | None:
    """A maxmemory Redis would refuse at start ('argument must be a memory value'); an int
    is bounded by its Setting."""
    if isinstance(value, str) and not _MEMORY.match(value):
        return f"maxmemory {value!r} is not a memory value such as '64mb' or '1gb' (0: no limit)"
    return None


class _Replies:
    """The end of `n` replies in a row (AUTH's, then the command's), each scanned as it
    arrives (`ReplyScan`); the last may be cut at `max_items`."""

    def __init__(self, n: int, max_items: int) -> None:
        self.n, self.max_items = n, max_items
        self.scans = [ReplyScan(max_items if n == 1 else 8)]

    def __call__(self, buf: bytearray) -> bool:
        while self.scans[-1].feed(buf):
            if self.scans[-1].cut or len(self.scans) == self.n:
                return True
            self.scans.append(ReplyScan(self.max_items, start=self.scans[-1].pos))
        return False


def redis_read(address: str, port: int, *args: str, auth: Credentials | None = None,
               tls: TLSConfig | None = None, max_bytes: int = MAX_REPLY_BYTES,
               max_items: int = MAX_ENTRIES) -> tuple[Any, bool]:
    """Send one command (after AUTH with `auth`): (its decoded reply, whether it was cut
    at `max_bytes` or `max_items`, what came whole before kept); RedisReplyError on
    `-ERR`, RespProblem on a reply that is not RESP. Read as it arrives (`ReplyScan`),
    then by the driver's parser (`harness.drivers.redis.parse_reply`)."""
    hello = encode(auth_command(auth)) if auth is not None else b""
    replies = _Replies(2 if hello else 1, max_items)
    try:
        got = tcp_request(address, port, hello + encode(args), replies, tls=tls,
                          max_bytes=max_bytes)
        if hello:
            if not replies.scans[0].done:
                raise RespProblem(f"the reply to AUTH is not one (more than "
                                  f"{max_bytes:,} bytes)")
            first, _ = replies.scans[0].value(got.data)
            if isinstance(first, RespError):  # the server's words never hold the password
                raise RedisReplyError(f"AUTH refused: {str(first)[:200]}")
            if len(replies.scans) < 2:
                raise RespProblem(f"no reply to {args[0]} within {max_bytes:,} bytes")
        scan = replies.scans[-1]
        reply, cut = scan.value(got.data)
    except RespError as exc:  # not RESP at all
        raise RespProblem(str(exc)) from None
    reply = decoded(reply)
    if isinstance(reply, RedisReplyError):
        raise RedisReplyError(str(reply)[:1000])
    return reply, cut or got.cut


def redis_command(address: str, port: int, *args: str,
                  auth: Credentials | None = None, tls: TLSConfig | None = None) -> Any:
    """Send one command (after AUTH with `auth`) and return its decoded reply;
    RedisReplyError on `-ERR`, RespProblem on a reply past `redis_read`'s bounds."""
    reply, cut = redis_read(address, port, *args, auth=auth, tls=tls)
    if cut:
        raise RespProblem(f"the reply to {' '.join(args[:2])} is larger than "
                          f"{MAX_REPLY_BYTES:,} bytes or {MAX_ENTRIES:,} items")
    return reply


def redis_ping(address: str, port: int, auth: Credentials | None = None,
               tls: TLSConfig | None = None) -> None:
    """PONG, or NotReady (e.g. `-LOADING` while a dataset is read back)."""
    try:
        reply = redis_command(address, port, "PING", auth=auth, tls=tls)
    except RedisReplyError as exc:
        raise NotReady(str(exc)) from None
    if reply != "PONG":
        raise NotReady(f"unexpected reply to PING: {reply!r}")


def redis_version(address: str, port: int, auth: Credentials | None = None,
                  tls: TLSConfig | None = None) -> str:
    """`redis_version` of INFO server (its first `MAX_VERSION_CHARS` characters, said
    so where it was longer)."""
    info, _ = redis_read(address, port, "INFO", "server", auth=auth, tls=tls)
    if not isinstance(info, str):
        raise NotReady(f"INFO server answered {type(info).__name__}, not text")
    for line in info.splitlines():
        if line.startswith("redis_version:"):
            return version_text(line.split(":", 1)[1].strip())
    raise NotReady("INFO server has no redis_version")


def redis_counters(address: str, port: int, auth: Credentials | None = None,
                   tls: TLSConfig | None = None) -> Reading:
    """`COUNTERS`, `GAUGES` and every command's call counts from one INFO call (its own
    call counts under `cmdstat_info_calls` in the next reading, as Redis counts a
    command once it is done), within the bounds of `harness.drivers.replies`: a reply
    cut, or a counter that is not a finite number, is said in the reading's `cut`."""
    text, cut = redis_read(address, port, "INFO", "stats", "clients", "commandstats",
                           auth=auth, tls=tls)
    if not isinstance(text, str):
        raise RespProblem(f"INFO answered {type(text).__name__}, not text")
    info = parse_info(text)
    if cut:
        info.cut.insert(0, f"INFO larger than {MAX_REPLY_BYTES:,} bytes: read to there")
    return numbers_only(info.keep(k for k in info if k in COUNTERS or k in GAUGES or (
        k.startswith("cmdstat_") and k.endswith(_CMDSTAT))), "INFO")


#: CONFIG GET * answers with these too: never recorded, whatever the server's own are.
_SECRET_CONFIG = re.compile(r"pass|secret|auth|key-file", re.IGNORECASE)


def redis_identity(spec: Any, address: str, port: int, creds: Credentials | None,
                   tls: TLSConfig | None = None) -> tuple[str, dict[str, Any]]:
    """A Redis at an address: it answers (with `creds`), its version, and its effective
    configuration (`CONFIG GET *`, passwords left out; what an ACL user may not read is
    said so). ServiceError in one line naming what failed and what to fix."""
    try:
        redis_command(address, port, "PING", auth=creds, tls=tls)
        version = redis_version(address, port, creds, tls)
    except RedisReplyError as exc:
        said = str(exc)
        fix = ("it wants a password: give auth: {password_env: VAR} (and user: for an ACL "
               "user)" if "NOAUTH" in said else
               f"check the user and the password in {spec.auth.source()}"
               if spec.auth is not None and ("WRONGPASS" in said or "AUTH" in said)
               else "the user may lack a permission the kit needs (PING, INFO)"
               if "NOPERM" in said else "check the address and that Redis listens there")
        raise not_answering(spec, "Redis refused", exc, fix) from None
    except (OSError, NotReady, ProbeError) as exc:
        raise not_answering(spec, "no Redis answer", exc, handshake_problem(exc) or (
            "check the address and that Redis listens there" + (
                "" if tls else ", in plain text (a TLS port needs tls:)"))) from None
    try:
        reply, cut = redis_read(address, port, "CONFIG", "GET", "*", auth=creds, tls=tls)
    except RedisReplyError as exc:  # an ACL user without CONFIG
        return version, {"config_get": f"not permitted for this user: {str(exc)[:200]}"}
    except (OSError, ProbeError) as exc:
        raise not_answering(spec, "no answer to CONFIG GET *", exc,
                            "check that Redis listens there") from None
    return version, config_of(reply, cut)


def config_of(reply: Any, cut: bool) -> dict[str, Any]:
    """CONFIG GET's names and values as the manifest records them: passwords left out,
    within the bounds of `harness.drivers.replies`, and `truncated` saying what was cut
    (a reply larger than the bounds, a name or value too long, not names and values)."""
    if not isinstance(reply, list):
        return {"config_get": "not read", "truncated": f"CONFIG GET * answered "
                f"{type(reply).__name__}, not a list of names and values"}
    notes = [f"CONFIG GET * larger than {MAX_REPLY_BYTES:,} bytes or {MAX_ENTRIES:,} "
             f"entries: the first {len(reply) // 2:,} settings kept"] if cut else []
    config: dict[str, Any] = {}
    for k, v in zip(reply[0::2], reply[1::2], strict=False):
        name = bounded_text(str(k), "a setting's name", notes)
        if _SECRET_CONFIG.search(name):
            continue
        config[name] = bounded_text(v if isinstance(v, str) else str(v), f"setting {name}",
                                    notes)
    if (note := cut_note(notes)) is not None:
        config["truncated"] = note
    return config


def redis_config(address: str, port: int, names: list[str],
                 auth: Credentials | None = None, tls: TLSConfig | None = None
                 ) -> dict[str, str]:
    """CONFIG GET each name (one per call: multi-name GET needs Redis 7)."""
    out: dict[str, str] = {}
    for name in names:
        reply = redis_command(address, port, "CONFIG", "GET", name, auth=auth, tls=tls)
        out.update(zip(reply[0::2], reply[1::2], strict=False))
    return out


class Redis(SingleServer):
    kind = "redis"
    binaries = ("redis-server",)
    packages = (REDIS_SERVER,)
    gauges = GAUGES
    settings: Mapping[str, Setting] = {
        "maxmemory": Setting(
            (str, int), "0", "Memory limit, e.g. '64mb'; '0' means unlimited.", low=0
        ),
        "maxmemory_policy": Setting(
            (str,), "noeviction", "What to evict at maxmemory.", choices=POLICIES
        ),
        "appendonly": Setting((bool,), False, "Write the append-only file."),
        "appendfsync": Setting((str,), "everysec", "When the append-only file is fsynced.",
                               choices=("always", "everysec", "no")),
        "save": Setting(
            (str,), "", "RDB snapshot rule, e.g. '3600 1'; '' takes no snapshots."
        ),
        "io_threads": Setting((int,), 1, "I/O threads (1 = main thread only).", low=1,
                              high=128, why="Redis's own maximum"),
        "extra": Setting((dict,), {}, "More redis.conf directives, name -> value, written "
                         "to its redis.conf and recorded as the server reports them"),
        "tls": TLS_SETTING,
        "binary": BINARY_SETTING,
        "replicas": replicas.REPLICAS_SETTING,
    }

    def validate(self, settings: Mapping[str, Any], *, name: str = "",
                 behind: Sequence[str] = ()) -> list[str]:
        s = self.resolve(settings)
        problem = maxmemory_problem(s["maxmemory"])
        save = ([] if _SAVE.match(s["save"]) else
                [f"save {s['save']!r} is not an RDB rule such as '3600 1' or '3600 1 300 "
                 "100' (pairs of seconds and changes; '' takes no snapshots)"])
        return (([problem] if problem else []) + save + extra_problems(s["extra"])
                + binary_problems(s["binary"]) + replicas.problems(s["replicas"], s["tls"]))

    attachable = True
    address_settings = ("tls", "replicas")

    def credentials(self) -> Credentials:
        return Credentials(None, secrets.token_urlsafe(24))

    def attach(self, host: Host, spec: Any, creds: Any) -> RunningService:
        address, port = split_hostport(spec.address)
        tls = address_tls(spec)
        version, config = redis_identity(spec, address, port, creds, tls)
        return replicas.attach(spec, attached(host, spec, self.kind, self.kind, version,
                                              config, creds, tls=tls), creds, tls, redis_read)

    def start(self, host: Host, name: str, settings: Mapping[str, Any]) -> RunningService:
        """One redis-server; with `replicas`, a primary and its replicas."""
        if settings.get("replicas"):
            return replicas.start(self, host, name, settings, redis_read)
        return super().start(host, name, settings)

    def argv(self, host: Host, launch: Launch, endpoint: Endpoint, s: Mapping[str, Any]
             ) -> list[str]:
        tls = {"port": 0, "tls-port": endpoint.port, "tls-auth-clients": "no",
               **dict(zip(("tls-cert-file", "tls-key-file"),
                          ([p] for p in self.tls_paths(launch)), strict=True))
               } if endpoint.tls else {"port": endpoint.port}
        conf = {
            "bind": host.address,
            **tls,
            "dir": [launch.workdir],
            "daemonize": "no",
            "protected-mode": "yes",
            "maxmemory": s["maxmemory"],
            "maxmemory-policy": s["maxmemory_policy"],
            "appendonly": s["appendonly"],
            "appendfsync": s["appendfsync"],
            "save": s["save"],
            "io-threads": s["io_threads"],
            **s["extra"],
            **({"requirepass": [endpoint.auth.password]} if endpoint.auth else {}),
        }
        path = f"{launch.workdir}/redis.conf"
        launch.host.run(["sh", "-c", 'umask 077; cat > "$1"', "sh", path],
                        input=config_text(conf))
        return ["redis-server", path]

    def probe(self, endpoint: Endpoint) -> None:
        redis_ping(endpoint.host, endpoint.port, endpoint.auth, endpoint.tls)

    def describe(self, endpoint: Endpoint, s: Mapping[str, Any]
                 ) -> tuple[str, dict[str, Any]]:
        # The extra directives too: the manifest records what the server runs with.
        names = [*CONFIG_NAMES.values(), "bind", "port", "protected-mode", *s["extra"]]
        host, port, auth, tls = endpoint.host, endpoint.port, endpoint.auth, endpoint.tls
        config: dict[str, Any] = redis_config(host, port, [*names, *(
            ["tls-port", "tls-auth-clients"] if tls else [])], auth, tls)
        config["auth"] = AUTH_MODE
        if tls is not None:
            config["tls"] = tls.describe()
        return redis_version(host, port, auth, tls), config

    def counters(self, svc: RunningService) -> dict[str, float]:
        """The primary's `redis_counters`, and each replica's as `replica<i>.<name>`."""
        return replicas.counters(svc, redis_counters)

    def replication(self, svc: RunningService) -> dict[str, Any] | None:
        return replicas.state(svc, redis_read)
