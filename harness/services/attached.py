"""A server the kit did not start, found at an address (`address:` in a service entry).

The kit starts and stops nothing there: `attach` asks the server who it is (version,
effective configuration) exactly as a launcher does after a start, and its counters are
read at each run's edges as for a launched server. The user's password comes from the
environment variable or file the spec names (`credentials`), read when the run starts.

Its CPU is observed only where the spec names the machine it runs on (`host:` a spec
host): the process listening on the port there is found with `ss`; otherwise the manifest
says the server's CPU was not observed, and the checks that would need it say so.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ServiceError
from harness.hosts import Host, Process
from harness.hosts.endpoint import Credentials, Endpoint, TLSConfig, split_hostport
from harness.services.base import RunningService

#: How much of a password file is read (a password, not a document).
MAX_PASSWORD_BYTES = 4096
_PID = re.compile(r"pid=([0-9]+)")


def credentials(name: str, auth: Any) -> Credentials | None:
    """The password `auth` (a spec's `AuthSpec`) names, read now; ServiceError naming
    the service and the source (never the value) when it is not there."""
    if auth is None:
        return None
    where = f"services.{name}.auth"
    if auth.password_env is not None:
        value = os.environ.get(auth.password_env)
        if not value:
            raise ServiceError(f"{where}: environment variable {auth.password_env} is not "
                               "set (or empty); export it with the server's password")
    else:
        value, problem = read_password_file(Path(str(auth.password_file)))
        if problem is not None:
            raise ServiceError(f"{where}: {problem}")
    return Credentials(auth.user, value)


def credential_problems(services: Mapping[str, Any]) -> list[str]:
    """What `credentials` would refuse for each service of a spec, one line each: the
    same lines `harness validate` prints that `harness run` would stop on."""
    problems = []
    for name, sdef in services.items():
        try:
            credentials(name, getattr(sdef, "auth", None))
        except ServiceError as exc:
            problems.append(str(exc))
    return problems


def read_password_file(path: Path) -> tuple[str, str | None]:
    """(the password in the file `path`, None), or ("", why it cannot be used) naming the
    file, never its contents. As ssh does of a key and libpq of .pgpass, a file another
    user could read or change is refused: a regular file of this user (or root), mode
    600 or stricter."""
    try:
        # O_NONBLOCK: a FIFO named as the file must not hang the start.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return "", f"password file {path}: {exc.strerror or exc}"
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "", f"password file {path} is not a regular file"
        if st.st_uid not in (os.geteuid(), 0):
            return "", (f"password file {path} belongs to another user (uid {st.st_uid}); "
                        "use a file of your own, mode 600")
        if st.st_mode & 0o077:
            return "", (f"password file {path} can be read or changed by others (mode "
                        f"{stat.S_IMODE(st.st_mode):04o}); run `chmod 600 {path}`, as ssh "
                        "asks of a key")
        data = f.read(MAX_PASSWORD_BYTES + 1)
    if len(data) > MAX_PASSWORD_BYTES:
        return "", f"password file {path} is longer than {MAX_PASSWORD_BYTES} bytes: not a password"
    value = data.decode(errors="replace").splitlines()[0] if data.strip() else ""
    if not value:
        return "", f"password file {path} is empty"
    return value, None


@dataclass
class AttachedService(RunningService):
    """A server at an address: stopping it stops nothing; its processes are the one
    listening on its port on the observed machine, if any."""

    #: Whether its server process was found (its CPU is in the telemetry).
    observed: bool = False
    #: Whether the spec named the machine it runs on (`host:`).
    observed_host: bool = False
    auth_source: str | None = None

    def info(self) -> dict[str, Any]:
        out = super().info()
        out["started_by"] = "not the kit: measured at an address"
        out["observed"] = self.observed
        if self.endpoint.tls is not None:
            out["tls"] = self.endpoint.tls.describe()
        if self.auth_source is not None:
            user = self.endpoint.auth.user if self.endpoint.auth else None
            out["auth"] = (f"user {user}, " if user else "") + f"password from {self.auth_source}"
        return out

    def alive(self) -> bool:
        return True  # the kit cannot tell; a dead server shows as errors in the records

    def stop(self) -> None:
        self._stopped = True  # never the kit's to stop


def listening_pid(host: Host, port: int) -> int | None:
    """The pid of the process listening on `port` on `host` (None where `ss` cannot
    say: not installed, or another user's process without privileges)."""
    res = host.run(["ss", "-ltnpH", f"sport = :{port}"], check=False, timeout=30)
    m = _PID.search(res.stdout) if res.ok else None
    return int(m.group(1)) if m else None


def attached(host: Host, spec: Any, kind: str, endpoint_kind: str,
             version: str, config: dict[str, Any], creds: Credentials | None,
             extra: dict[str, Any] | None = None, tls: TLSConfig | None = None
             ) -> AttachedService:
    """The RunningService of a server at `spec.address` (`spec`: the spec's
    `ServiceSpec`; `host`: the spec host named, or the control machine when none is)."""
    address, port = split_hostport(str(spec.address))
    processes: list[Process] = []
    if spec.observed:
        pid = listening_pid(host, port)
        if pid is not None:
            processes.append(Process(host.name, pid, (), ""))
    return AttachedService(
        name=spec.name, kind=kind, host=host,
        # `foreign`: a workload never wipes what it finds there (`Workload.clears`).
        endpoint=Endpoint(endpoint_kind, address, port, {**(extra or {}), "foreign": True},
                          creds, tls),
        version=version, config=config, processes=processes, observed=bool(processes),
        observed_host=bool(spec.observed),
        auth_source=spec.auth.source() if spec.auth else None)


def not_answering(spec: Any, what: str, exc: BaseException, fix: str) -> ServiceError:
    """One line naming the service, what failed and what to fix."""
    return ServiceError(f"services.{spec.name} at {spec.address}: {what} ({exc}); {fix}")
