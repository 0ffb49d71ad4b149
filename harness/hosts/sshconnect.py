"""Where an SSH target is and how a client reaches it (paramiko): the OpenSSH client
config (HostName, Port, User, IdentityFile, UserKnownHostsFile), known_hosts, and
unknown host keys refused unless the spec says `accept_new_host_key`."""

from __future__ import annotations

import binascii
import getpass
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paramiko

from harness.errors import HostError, HostKeyError
from harness.hosts.hostspec import HostSpec


def parse_target(target: str) -> tuple[str | None, str, int | None]:
    """`user@host:port`, `user@host`, `host:port`, `[v6]:port` or `host` -> (user, host, port)."""
    user, _, hostport = target.rpartition("@")
    host, port = hostport, None
    if hostport.startswith("[") and "]" in hostport:
        host, _, rest = hostport[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
    elif hostport.count(":") == 1:
        host, port = hostport.split(":")
    if not host or (port is not None and not port.isdigit()):
        raise HostError(f"bad SSH target {target!r}: use user@host:port, host or an ssh alias")
    return user or None, host, int(port) if port else None


def _expand(path: str) -> Path:
    return Path(os.path.expanduser(path))


@dataclass(frozen=True)
class Endpoint:
    """Where and as whom to connect, after applying the ssh config to a spec's target."""

    host: str
    port: int
    user: str
    key_files: tuple[Path, ...]
    #: Host keys are looked up in all of these; a newly accepted key goes into the first.
    known_hosts: tuple[Path, ...]


def resolve(spec: HostSpec) -> Endpoint:
    """Apply the ssh config (spec.ssh_config, else ~/.ssh/config if present) to spec.target."""
    user, alias, port = parse_target(spec.target)
    config_path = _expand(spec.ssh_config or "~/.ssh/config")
    config: dict[str, Any] = {}
    if spec.ssh_config or config_path.exists():
        try:
            config = paramiko.SSHConfig.from_path(str(config_path)).lookup(alias)
        except (OSError, paramiko.SSHException) as exc:
            raise HostError(f"{spec.name}: cannot read ssh config {config_path}: {exc}") from exc
    keys = [_expand(f) for f in config.get("identityfile", [])]
    if spec.identity_file:
        if not _expand(spec.identity_file).is_file():
            raise HostError(f"{spec.name}: identity_file {spec.identity_file} does not exist")
        keys.insert(0, _expand(spec.identity_file))
    known = [spec.known_hosts] if spec.known_hosts else (
        str(config.get("userknownhostsfile", "")).split() or ["~/.ssh/known_hosts"])
    return Endpoint(
        host=str(config.get("hostname", alias)),
        port=port or int(config.get("port", 22)),
        user=user or str(config.get("user") or getpass.getuser()),
        key_files=tuple(k for k in keys if k.is_file()),
        known_hosts=tuple(_expand(k) for k in known),
    )


class _KnownHostsPolicy(paramiko.MissingHostKeyPolicy):
    """Called by paramiko only for keys absent from known_hosts; a key that differs from
    the known one never gets here (paramiko raises BadHostKeyException instead)."""

    def __init__(self, spec: HostSpec, endpoint: Endpoint) -> None:
        self.spec, self.ep = spec, endpoint

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        ep, path = self.ep, self.ep.known_hosts[0]
        if not self.spec.accept_new_host_key:
            raise HostKeyError(
                f"{self.spec.name}: unknown SSH host key for {ep.host}:{ep.port} "
                f"({key.get_name()} {key.fingerprint}), not in {path}. If that fingerprint "
                f"is right, add the key with `ssh-keyscan -p {ep.port} {ep.host} >> {path}`, "
                f"or set `accept_new_host_key: true` for host {self.spec.name!r} in the spec."
            )
        existing = path.read_bytes() if path.exists() else b""
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a") as f:
            sep = "\n" if existing and not existing.endswith(b"\n") else ""
            f.write(f"{sep}{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)


def open_client(spec: HostSpec, ep: Endpoint) -> paramiko.SSHClient:
    """A connected paramiko client for `ep` with the host key verified; HostKeyError or
    HostError with an actionable message otherwise."""
    known_name = ep.host if ep.port == 22 else f"[{ep.host}]:{ep.port}"
    where = f"{spec.name} ({ep.user}@{ep.host}:{ep.port}, target {spec.target!r})"
    client = paramiko.SSHClient()
    revoked: list[paramiko.PKey] = []
    try:
        for path in ep.known_hosts:
            if path.exists():
                revoked += load_known_hosts(client.get_host_keys(), path)
        client.set_missing_host_key_policy(_KnownHostsPolicy(spec, ep))
        t = spec.connect_timeout_s
        client.connect(
            ep.host, ep.port, username=ep.user, key_filename=[str(k) for k in ep.key_files],
            allow_agent=True, look_for_keys=True, timeout=t, banner_timeout=t, auth_timeout=t,
        )
    except HostKeyError:
        client.close()
        raise
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise HostKeyError(
            f"{where}: SSH host key for {ep.host}:{ep.port} does not match known_hosts "
            f"({ep.known_hosts[0]}): server offered {exc.key.get_name()} "
            f"{exc.key.fingerprint}, expected {exc.expected_key.get_name()} "
            f"{exc.expected_key.fingerprint}. Refusing to connect: possible "
            "man-in-the-middle attack. If the host was reinstalled, remove the old key "
            f"with `ssh-keygen -R '{known_name}' -f {ep.known_hosts[0]}` and add the "
            "new one after checking its fingerprint."
        ) from None
    except (paramiko.SSHException, OSError, EOFError, ValueError) as exc:
        client.close()
        raise HostError(f"{where}: {connect_failure(exc, spec.connect_timeout_s)}") from exc
    transport = client.get_transport()
    if transport is not None:
        key = transport.get_remote_server_key()
        if any(r == key for r in revoked):
            client.close()
            raise HostKeyError(f"{where}: the SSH host key {key.get_name()} "
                               f"{key.fingerprint} is marked @revoked in known_hosts; "
                               "refusing to use it")
        transport.set_keepalive(30)  # long runs must not be cut by idle NAT timeouts
    return client


def load_known_hosts(keys: paramiko.HostKeys, path: Path) -> list[paramiko.PKey]:
    """Add `path`'s host keys to `keys` as OpenSSH reads the file: `@revoked` keys are
    returned (a host offering one is refused), `@cert-authority` lines and lines that
    are no host key are skipped (paramiko's own loader raises on them)."""
    revoked: list[paramiko.PKey] = []
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return revoked
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("@cert-authority"):
            continue
        marker = line.startswith("@revoked")
        try:
            entry = paramiko.hostkeys.HostKeyEntry.from_line(
                line.removeprefix("@revoked").strip() if marker else line)
        except (paramiko.SSHException, paramiko.hostkeys.InvalidHostKey, ValueError,
                IndexError, binascii.Error):
            continue  # as OpenSSH does with a line it cannot read
        if entry is None:
            continue
        if marker:
            revoked.append(entry.key)
        else:
            for name in entry.hostnames:
                keys.add(name, entry.key.get_name(), entry.key)
    return revoked


def connect_failure(exc: BaseException, timeout: float) -> str:
    """An actionable sentence for why connecting failed (never echoes secrets)."""
    if isinstance(exc, paramiko.AuthenticationException):
        return (f"authentication failed ({exc}); load your key into ssh-agent, or set "
                "identity_file in the host spec or IdentityFile in the ssh config")
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host name ({exc.strerror}); check the target or HostName"
    if isinstance(exc, TimeoutError):
        return f"timed out after {timeout}s; is the host up and the port open to you?"
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        refused = all(isinstance(e, ConnectionRefusedError) for e in exc.errors.values())
        why = "connection refused" if refused else str(exc)
        return f"{why}; is sshd running there, and is the port right?"
    if isinstance(exc, paramiko.SSHException):
        return f"SSH handshake failed ({exc}); is that port an SSH server?"
    return f"cannot connect: {exc}"
