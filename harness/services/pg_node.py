"""One PostgreSQL instance of a replicated cluster: initdb or pg_basebackup, start, psql.

Reuses the single launcher's pieces (binary discovery, dropping root to the postgres
user with setpriv, `-c` value formatting); probes go over the node's Unix socket with
psql on the node's own host, so they work in a namespace or over SSH alike.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.errors import HostError, ServiceError
from harness.hosts import CommandResult, Host, Process
from harness.services._util import log_tail
from harness.services.postgres import (
    USER,
    Postgres,
    _conf_value,
    find_pg_binaries,
    initdb_auth,
    pg_env,
    write_pgpass,
)

STOP_TIMEOUT_S = 15.0


def cluster_binaries(host: Host, settings: Mapping[str, Any] | None = None
                     ) -> dict[str, str | None]:
    """initdb, postgres, psql and pg_basebackup, from one installation where possible
    (the `binary` setting's, if any)."""
    bins: dict[str, str | None] = dict(find_pg_binaries(host, settings))
    initdb = bins.get("initdb")
    sibling = f"{initdb.rsplit('/', 1)[0]}/pg_basebackup" if initdb else None
    bins["pg_basebackup"] = (sibling if sibling and host.exists(sibling)
                             else host.which("pg_basebackup"))
    return bins


@dataclass
class PgNode:
    """A PostgreSQL data directory and server on one host, below `workdir`."""

    host: Host
    name: str
    workdir: str
    bins: Mapping[str, str | None]
    as_user: list[str] = field(default_factory=list)
    #: The pgpass file (in `workdir`) with the cluster's password (`write_pgpass`).
    pgpass: str = ""
    port: int = 0
    proc: Process | None = None

    @classmethod
    def create(cls, host: Host, name: str, parent: str, bins: Mapping[str, str | None],
               password: str) -> PgNode:
        """A node with a fresh workdir `parent/<name>-XXXXXX` owned by the server user,
        and a pgpass file there with the cluster's `password`."""
        workdir = host.run(["mktemp", "-d", "-p", parent, f"{name}-XXXXXX"]).stdout.strip()
        node = cls(host, name, workdir, bins)
        node.as_user = Postgres._drop_root(host, workdir)
        node.pgpass = write_pgpass(host, workdir, password, node.as_user)
        return node

    @property
    def data(self) -> str:
        return f"{self.workdir}/data"

    @property
    def log_path(self) -> str:
        return f"{self.workdir}/postgres.log"

    def fail(self, message: str) -> ServiceError:
        return ServiceError(f"pg_cluster node {self.name} on {self.host.name}: {message}\n"
                            f"--- last lines of {self.log_path} ---\n"
                            f"{log_tail(self.host, self.log_path)}")

    def _run(self, what: str, argv: list[str], timeout: float = 300) -> None:
        res = self.host.run([*self.as_user, *argv], check=False, cwd=self.workdir,
                            timeout=timeout, env=pg_env(self.pgpass))
        if not res.ok:
            raise ServiceError(f"pg_cluster node {self.name} on {self.host.name}: {what} "
                               f"failed (exit {res.returncode}):\n"
                               f"{(res.stdout + res.stderr).strip()[-3000:]}")

    def initdb(self) -> None:
        try:
            self._run("initdb", [str(self.bins["initdb"]), "-D", self.data,
                                 *initdb_auth(self.pgpass), f"--username={USER}", "-E",
                                 "UTF8", "--locale=C", "--no-sync"])
        finally:
            self.host.run(["rm", "-f", "--", f"{self.pgpass}.pw"])

    def basebackup(self, source: str, port: int) -> None:
        """Clone the primary at source:port into this node's data directory (WAL streamed
        alongside, so the copy is consistent without archiving)."""
        self._run("pg_basebackup", [
            str(self.bins["pg_basebackup"]), "-h", source, "-p", str(port), "-U", USER,
            "-D", self.data, "-X", "stream", "--checkpoint=fast", "--no-sync", "-w",
            "--write-recovery-conf"])

    def start(self, conf: Mapping[str, Any], timeout_s: float = 60.0) -> Process:
        """Start postgres with `conf` as -c options; wait until it accepts connections."""
        if not self.port:
            self.port = self.host.free_port()
        full = {"port": self.port, "unix_socket_directories": self.workdir, **conf}
        argv = [*self.as_user, str(self.bins["postgres"]), "-D", self.data]
        for key, value in full.items():
            argv += ["-c", f"{key}={_conf_value(value)}"]
        self.proc = self.host.start(argv, log_path=self.log_path, cwd=self.workdir)
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.host.is_alive(self.proc):
                raise self.fail("exited before it accepted connections")
            res = self.psql("SELECT 1", "postgres")
            if res.ok:
                return self.proc
            if time.monotonic() > deadline:
                raise self.fail(f"not ready after {timeout_s:g} s: {res.stderr.strip()}")
            time.sleep(0.05)

    def psql(self, sql: str, database: str) -> CommandResult:
        return self.host.run(
            [str(self.bins["psql"]), "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1",
             "-F", "\t", "-h", self.workdir, "-p", str(self.port), "-U", USER,
             "-d", database, "-c", sql],
            check=False, timeout=60, env=pg_env(self.pgpass),
        )

    def query(self, sql: str, database: str) -> str:
        res = self.psql(sql, database)
        if not res.ok:
            raise self.fail(f"{sql!r} failed: {(res.stderr or res.stdout).strip()}")
        return res.stdout

    def alive(self) -> bool:
        return self.proc is not None and self.host.is_alive(self.proc)

    def stop(self) -> None:
        """Fast shutdown (SIGINT to the postmaster), KILL after a timeout. Idempotent."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        with contextlib.suppress(HostError):
            if self.host.signal(proc, "INT", group=False):
                deadline = time.monotonic() + STOP_TIMEOUT_S
                while self.host.is_alive(proc) and time.monotonic() < deadline:
                    time.sleep(0.05)
            self.host.stop(proc, timeout_s=2.0)  # KILLs the group if anything is left
