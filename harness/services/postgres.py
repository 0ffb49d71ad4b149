"""PostgreSQL: a throwaway cluster (initdb) in a workdir, one postmaster per instance.

Probes run `psql` on the server's host over the Unix socket in the workdir. Who may
connect: only who knows the password, drawn at random for each start (scram-sha-256 on
the socket, on loopback and on TCP; no trust rule, so another local user cannot connect
as the superuser). The kit's psql reads it from a pgpass file in the work directory
(readable by the server's user only); clients get it in their endpoint (`Credentials`),
never in a manifest or a log. Besides the server's own machine, the control machine and
the spec's client machines are added to pg_hba.conf by their exact addresses (`access`,
see `harness.services.access`), for user `harness` and database `bench` only; any other
machine is refused ("no pg_hba.conf entry").

Its counters (telemetry) are `pg_stat_database`'s row of `bench`, read by psql over the
socket from the `postgres` database (so the reading's own transactions count elsewhere).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from harness.errors import ServiceError
from harness.hosts import CommandResult, Host
from harness.hosts.endpoint import Credentials, TLSConfig
from harness.services import pg_remote
from harness.services._util import (
    DEFAULT_READY_TIMEOUT_S,
    Launch,
    NotReady,
    host_is_root,
    resolve_checked,
)
from harness.services.access import Access
from harness.services.base import Endpoint, RunningService, Service, Setting
from harness.services.ownbuild import (
    BINARY_SETTING,
    binary_for,
    binary_missing,
    binary_problems,
    binary_record,
)
from harness.services.packages import POSTGRESQL
from harness.services.tlsconf import TLS_SETTING, server_files

USER = "harness"
DATABASE = "bench"
#: The system user that runs initdb and postgres when the host user is root.
SYSTEM_USER = "postgres"
PG_BINARIES = ("initdb", "postgres", "psql")
#: PostgreSQL's MAX_BACKENDS (2**18 - 1): it refuses a higher max_connections.
PG_MAX_BACKENDS = 262_143
#: A memory setting: a number (of 8 kB blocks for shared_buffers) and a unit, whose names
#: are case-sensitive; shared_buffers is at least 16 blocks.
_MEMORY = re.compile(r"^([0-9]{1,15}(?:\.[0-9]{1,6})?)\s*(B|kB|MB|GB|TB)?$")
_UNIT_BYTES = {"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def shared_buffers_problem(value: str) -> str | None:
    """A shared_buffers PostgreSQL would refuse at start."""
    match = _MEMORY.match(value)
    if not match:
        return f"shared_buffers {value!r} is not a size such as '128MB' or '1GB'"
    size = float(match[1]) * _UNIT_BYTES.get(match[2] or "", 8 << 10)
    if size < 128 << 10:
        return f"shared_buffers {value!r} must be at least 128kB (PostgreSQL's minimum)"
    return None

#: Settings the launcher owns: overriding them in `extra` would break the endpoint or let
#: others in. PostgreSQL compares parameter names without case (`_check_extra` too).
RESERVED = frozenset({"listen_addresses", "port", "unix_socket_directories",
                      "unix_socket_permissions", "unix_socket_group", "hba_file",
                      "ident_file", "password_encryption", "config_file", "data_directory",
                      "ssl", "krb_server_keyfile", "shared_preload_libraries",
                      "local_preload_libraries", "session_preload_libraries",
                      "dynamic_library_path", "archive_command", "restore_command",
                      "archive_library"})
#: How clients authenticate, as the manifest records it.
AUTH_MODE = "scram-sha-256, a random password per server start"
#: Our named settings, which go to postgres as `-c name=value`.
NAMED = ("synchronous_commit", "fsync", "shared_buffers", "max_connections")
_GUC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
#: pg_stat_database columns that are levels, not counts (reported at a run's end).
GAUGES = ("numbackends",)
#: How long a reading waits for the client backends of `bench` to have exited: a
#: backend adds its transactions to pg_stat_database as it exits (PostgreSQL 15 holds
#: them back up to a second while it lives), and is listed until then.
QUIET_WAIT_S = 2.0
_QUIET = (
    "DO $$ BEGIN FOR i IN 1..{n} LOOP PERFORM pg_stat_clear_snapshot(); "
    "EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = '{db}' AND "
    "backend_type = 'client backend'); PERFORM pg_sleep(0.01); END LOOP; END $$"
)
_STAT_DATABASE = (
    "SELECT json_build_object('row', row_to_json(d), 'waiting', (SELECT count(*) FROM "
    "pg_stat_activity WHERE datname = '{db}' AND backend_type = 'client backend')) "
    "FROM pg_stat_database d WHERE datname = '{db}'"
)


def new_password() -> str:
    """A server's password: random, per start, never written where results go."""
    return secrets.token_urlsafe(24)


def write_pgpass(host: Host, workdir: str, password: str, as_user: list[str]) -> str:
    """A pgpass file in `workdir` (mode 0600, the server user's when it runs as another)
    for the kit's psql and pg_basebackup, and a standby's primary_conninfo; its path."""
    path = f"{workdir}/pgpass"
    # The pgpass line, and the password alone for initdb's --pwfile (removed after it).
    script = ('umask 077; read -r pw; printf "*:*:*:%s:%s\\n" "$2" "$pw" > "$1"; '
              'printf "%s\\n" "$pw" > "$1.pw"')
    host.run(["sh", "-c", script, "sh", path, USER], input=f"{password}\n")
    owner = [a.split("=", 1)[1] for a in as_user if a.startswith(("--reuid=", "--regid="))]
    if len(owner) == 2:
        host.run(["chown", ":".join(owner), path, f"{path}.pw"])
    return path


def pg_env(pgpass: str) -> dict[str, str]:
    """The environment of the kit's psql: the password from `pgpass`, a short timeout."""
    return {"PGPASSFILE": pgpass, "PGCONNECT_TIMEOUT": "5"}


def stat_database(host: Host, psql: str, socket_dir: str, port: int,
                  database: str = DATABASE, pgpass: str = "") -> dict[str, float]:
    """`pg_stat_database`'s numbers for `database` once its client backends have gone
    (up to `QUIET_WAIT_S`; any still connected then are counted in `waiting`), read with
    `psql` on the server's host, connected to the `postgres` database."""
    res = host.run(
        [psql, "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-h", socket_dir,
         "-p", str(port), "-U", USER, "-d", "postgres",
         "-c", _QUIET.format(n=int(QUIET_WAIT_S / 0.01), db=database),
         "-c", _STAT_DATABASE.format(db=database)],
        timeout=10 + QUIET_WAIT_S, env=pg_env(pgpass or f"{socket_dir}/pgpass"))
    data = json.loads(res.stdout.strip().splitlines()[-1])
    row = {k: v for k, v in data["row"].items() if k != "datid"
           and isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {**row, "waiting": data["waiting"]}


def find_pg_binaries(host: Host, settings: Mapping[str, Any] | None = None
                     ) -> dict[str, str | None]:
    """Paths of initdb, postgres and psql on `host`, all from one installation if possible.

    The `binary` setting's directory first (your own build: initdb and psql beside its
    postgres); then PATH (conda, Homebrew, source builds); otherwise Debian/Ubuntu's
    newest /usr/lib/postgresql/<major>/bin, which is deliberately not on PATH there.
    """
    own = binary_for(settings or {}, host, "")
    if own:
        bindir = own.rsplit("/", 1)[0]
        return {b: (f"{bindir}/{b}" if binary_missing(host, f"{bindir}/{b}") is None
                    else None) for b in PG_BINARIES}
    found = {b: host.which(b) for b in PG_BINARIES}
    if found["initdb"] and found["postgres"]:
        return found
    script = (
        'for d in /usr/lib/postgresql/*/bin; do '
        '[ -x "$d/initdb" ] && [ -x "$d/postgres" ] && echo "$d"; done; true'
    )
    dirs = host.run(["sh", "-c", script], check=False).stdout.split()
    if not dirs:
        return found
    bindir = max(dirs, key=_major_version)
    psql = f"{bindir}/psql"
    return {
        "initdb": f"{bindir}/initdb",
        "postgres": f"{bindir}/postgres",
        "psql": psql if host.exists(psql) else found["psql"],
    }


def _major_version(bindir: str) -> tuple[int, ...]:
    # /usr/lib/postgresql/9.6/bin -> (9, 6); /usr/lib/postgresql/15/bin -> (15,)
    ver = bindir.rstrip("/").split("/")[-2]
    return tuple(int(p) for p in ver.split(".") if p.isdigit())


def initdb_auth(pgpass: str) -> list[str]:
    """initdb's options for scram-sha-256 everywhere (socket, loopback, TCP), the
    superuser's password from the file `write_pgpass` left beside the pgpass file (never
    in an argv, where `ps` would show it)."""
    return ["--auth=scram-sha-256", f"--pwfile={pgpass}.pw"]


def _conf_value(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def extra_problems(extra: Mapping[str, Any]) -> list[str]:
    """Why each of `extra`'s PostgreSQL settings cannot be passed (the launcher's own,
    whatever their case, and names or values that are not a setting's)."""
    out = []
    for key, value in extra.items():
        if not isinstance(key, str) or not _GUC_NAME.match(key):
            out.append(f"postgres: extra setting name {key!r} is not a parameter name")
        elif key.lower() in RESERVED:  # as PostgreSQL compares them
            out.append(f"postgres: extra setting {key!r} is set by the launcher")
        elif key.lower() in NAMED:
            out.append(f"postgres: set {key!r} as its own setting, not in extra")
        elif not isinstance(value, (str, int, float, bool)):
            out.append(f"postgres: extra setting {key}={value!r} must be a scalar")
    return out


def _check_extra(extra: Mapping[str, Any]) -> None:
    problems = extra_problems(extra)
    if problems:
        raise ServiceError(problems[0])


def allow_hba(host: Host, data: str, access: Access, replication: tuple[str, ...] = ()
              ) -> None:
    """Append the exact-address entries of `access` (and replication from the standbys at
    `replication`) to the data directory's pg_hba.conf, before the server starts."""
    lines = access.hba_lines(DATABASE, USER, replication=replication)
    if lines:
        host.run(["sh", "-c", 'cat >> "$1"', "sh", f"{data}/pg_hba.conf"], input=lines)


class Postgres(Service):
    kind = "postgres"
    binaries = PG_BINARIES
    packages = (POSTGRESQL,)
    needs_access = True
    gauges = (*GAUGES, "waiting")
    settings: Mapping[str, Setting] = {
        "synchronous_commit": Setting(
            (str,), "on", "Wait for WAL flush before COMMIT returns.",
            choices=("on", "off", "local", "remote_write", "remote_apply"),
        ),
        "fsync": Setting((bool,), True, "fsync WAL and data files (off risks corruption)."),
        "shared_buffers": Setting((str,), "128MB", "Shared buffer cache size, e.g. '1GB'."),
        "max_connections": Setting((int,), 100, "Maximum concurrent connections.", low=1,
                                   high=PG_MAX_BACKENDS, why="PostgreSQL's own maximum"),
        "extra": Setting((dict,), {}, "More parameters, name -> value, passed as -c."),
        "tls": TLS_SETTING,
        "binary": BINARY_SETTING,
        "statements": Setting((str,), "auto", "Prepared statements of the workloads: named "
                              "(each parsed once per connection), unnamed (parsed with each "
                              "execution: what a pooler between passes); auto: named on the "
                              "kit's server, unnamed where one at an address is found behind "
                              "a pooler or proxy.", choices=pg_remote.STATEMENTS),
    }

    def __init__(self, ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S) -> None:
        self.ready_timeout_s = ready_timeout_s

    def validate(self, settings: Mapping[str, Any], *, name: str = "",
                 behind: Sequence[str] = ()) -> list[str]:
        s = self.resolve(settings)
        problem = shared_buffers_problem(s["shared_buffers"])
        return (([problem] if problem else []) + binary_problems(s["binary"])
                + extra_problems(s["extra"]))

    def missing_binaries(self, host: Host, settings: Mapping[str, Any] | None = None
                         ) -> list[str]:
        missing = [b for b, path in find_pg_binaries(host, settings).items() if path is None]
        if host_is_root(host) and host.which("setpriv") is None:
            missing.append("setpriv")
        return missing

    def start(self, host: Host, name: str, settings: Mapping[str, Any],
              access: Access | None = None) -> RunningService:
        """`access`: the machines besides the server's own that may connect (none when
        only this machine uses the server, as in a local run)."""
        s = resolve_checked(self, settings)
        _check_extra(s["extra"])
        bins = find_pg_binaries(host, s)
        missing = [b for b, path in bins.items() if path is None]
        if missing:
            raise ServiceError(
                f"postgres on {host.name}: {', '.join(missing)} not found on PATH or in "
                "/usr/lib/postgresql/*/bin (Debian: apt-get install postgresql)"
            )
        with Launch(host, self.kind, name) as launch:
            workdir, data = launch.workdir, f"{launch.workdir}/data"
            as_user = self._drop_root(host, workdir)
            password = new_password()
            pgpass = write_pgpass(host, workdir, password, as_user)
            initdb = host.run(
                [*as_user, str(bins["initdb"]), "-D", data, *initdb_auth(pgpass),
                 f"--username={USER}", "-E", "UTF8", "--locale=C", "--no-sync"],
                check=False, cwd=workdir, timeout=300,
            )
            host.run(["rm", "-f", "--", f"{pgpass}.pw"])
            if not initdb.ok:
                raise ServiceError(
                    f"{launch.what}: initdb failed (exit {initdb.returncode}):\n"
                    f"{(initdb.stdout + initdb.stderr).strip()[-3000:]}"
                )
            allow_hba(host, data, access or Access())
            port = host.free_port()
            conf = {
                "listen_addresses": host.address,
                "port": port,
                "unix_socket_directories": workdir,
                **{k: s[k] for k in NAMED},
                **s["extra"],
            }
            tls = self._tls(host, workdir, data, as_user, conf) if s["tls"] else None
            argv = [*as_user, str(bins["postgres"]), "-D", data]
            for key, value in conf.items():
                argv += ["-c", f"{key}={_conf_value(value)}"]
            proc = launch.start(argv)

            def psql(database: str, sql: str) -> CommandResult:
                return host.run(
                    [str(bins["psql"]), "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1",
                     "-F", "\t", "-h", workdir, "-p", str(port), "-U", USER,
                     "-d", database, "-c", sql],
                    check=False, timeout=30, env=pg_env(pgpass),
                )

            def ready() -> None:
                res = psql("postgres", "SELECT 1")
                if not res.ok:
                    raise NotReady(res.stderr.strip() or f"psql exit {res.returncode}")

            launch.wait_until_ready(proc, ready, timeout_s=self.ready_timeout_s)
            self._check(launch, psql("postgres", f"CREATE DATABASE {DATABASE}"))
            version = self._check(launch, psql(DATABASE, "SHOW server_version")).strip()
            names = [*NAMED, *s["extra"]]
            query = "SELECT n, current_setting(n) FROM unnest(ARRAY[{}]) AS n".format(
                ", ".join(f"'{n}'" for n in names)  # names are checked against _GUC_NAME
            )
            rows = self._check(launch, psql(DATABASE, query)).splitlines()
            config = dict(row.split("\t", 1) for row in rows if "\t" in row)
            config["admitted"] = (access or Access()).cidrs()  # besides loopback
            config["listen_addresses"] = host.address
            config["binary"] = binary_record(host, str(bins["postgres"]))
            config["auth"] = AUTH_MODE
            unnamed = s["statements"] == "unnamed"
            config["statements"] = ("named: the kit's own server, nothing between"
                                    if s["statements"] == "auto" else
                                    f"{s['statements']}: set in the spec")
            if tls is not None:
                config["tls"] = tls.describe() + " only (hostnossl rejected)"
            endpoint = Endpoint(
                kind=self.kind, host=host.address, port=port,
                extra={"user": USER, "database": DATABASE,
                       **({"statement_cache": 0} if unnamed else {})},
                auth=Credentials(USER, password), tls=tls,
            )
            svc = launch.running(endpoint, version, config)
            svc.internal["psql"] = str(bins["psql"])
            svc.internal["pgpass"] = pgpass
            return svc

    attachable = True
    address_settings = ("tls", "statements")

    def attach(self, host: Host, spec: Any, creds: Any) -> RunningService:
        return pg_remote.attach(host, spec, creds)

    def counters(self, svc: RunningService) -> dict[str, float]:
        if "psql" not in svc.internal:  # a server at an address: over its protocol
            return pg_remote.counters(svc.endpoint)
        return stat_database(svc.host, svc.internal["psql"], str(svc.workdir),
                             svc.endpoint.port, pgpass=svc.internal["pgpass"])

    @staticmethod
    def _tls(host: Host, workdir: str, data: str, as_user: list[str], conf: dict[str, Any]
             ) -> TLSConfig:
        """TLS only over TCP: a throwaway CA's certificate (its key the server user's,
        0600, as PostgreSQL insists), `ssl` on, and every TCP connection without TLS
        rejected first in pg_hba.conf (the kit's psql uses the socket)."""
        tls, cert, key = server_files(host, workdir, [host.address])
        owner = [a.split("=", 1)[1] for a in as_user if a.startswith(("--reuid=", "--regid="))]
        if len(owner) == 2:
            host.run(["chown", ":".join(owner), cert, key])
        host.run(["sed", "-i", "1i hostnossl all all all reject", f"{data}/pg_hba.conf"])
        conf.update(ssl="on", ssl_cert_file=cert, ssl_key_file=key)
        return tls

    @staticmethod
    def _drop_root(host: Host, workdir: str) -> list[str]:
        """The argv prefix that runs initdb/postgres as SYSTEM_USER when we are root.

        setpriv, not runuser: runuser stays as a parent and SIGKILLs the server 2 s after
        a TERM, cutting shutdown short; setpriv execs, so our pid is the postmaster.
        """
        if not host_is_root(host):
            return []
        uid = host.run(["id", "-u", SYSTEM_USER], check=False)
        if not uid.ok:
            raise ServiceError(
                f"postgres on {host.name}: running as root, and PostgreSQL refuses to run as "
                f"root, but there is no {SYSTEM_USER!r} system user to run it as; create "
                f"one (useradd --system {SYSTEM_USER}) or connect as a non-root user"
            )
        if host.which("setpriv") is None:
            raise ServiceError(
                f"postgres on {host.name}: running as root needs setpriv to drop to "
                f"{SYSTEM_USER!r} (apt-get install util-linux)"
            )
        ids = f"{uid.stdout.strip()}:{host.run(['id', '-g', SYSTEM_USER]).stdout.strip()}"
        host.run(["chown", "-R", ids, workdir])
        uid_s, gid_s = ids.split(":")
        return ["setpriv", f"--reuid={uid_s}", f"--regid={gid_s}", "--init-groups", "--"]

    @staticmethod
    def _check(launch: Launch, res: CommandResult) -> str:
        if not res.ok:
            raise launch.fail(
                f"{res.argv[-1]!r} failed: {(res.stderr or res.stdout).strip()}"
            )
        return res.stdout
