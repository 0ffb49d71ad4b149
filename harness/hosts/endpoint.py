"""Where clients reach a running service: plain data that crosses from the runner to
every client process (`harness.loadgen.config`), so it imports nothing of the kit but
`harness.text` (standard library only), where each password is registered as a secret."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.text import add_secret


@dataclass(frozen=True)
class Credentials:
    """What a client authenticates with (Redis AUTH, PostgreSQL scram). The password is
    never shown (`repr`), and crosses to client processes only in their own config file
    (in a work directory only the kit's user can read), never into a manifest."""

    user: str | None
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        add_secret(self.password)  # masked in everything this process prints or writes

    def to_dict(self) -> dict[str, Any]:
        return {"user": self.user, "password": self.password}


@dataclass(frozen=True)
class TLSConfig:
    """How clients speak TLS to a server: the CA to trust (PEM text: it crosses to client
    machines inside their config, as a file on the control machine would not), a client
    certificate and key if the server asks for one, the name to check the server's
    certificate against (None: the address), and whether to verify at all."""

    ca_pem: str | None = None
    cert_pem: str | None = None
    key_pem: str | None = field(default=None, repr=False)
    server_name: str | None = None
    verify: bool = True

    def __post_init__(self) -> None:
        if self.key_pem:
            add_secret(self.key_pem)

    def to_dict(self) -> dict[str, Any]:
        return {"ca_pem": self.ca_pem, "cert_pem": self.cert_pem, "key_pem": self.key_pem,
                "server_name": self.server_name, "verify": self.verify}

    def describe(self) -> str:
        """What the manifest records of it (no key, no certificate text)."""
        return ("TLS" + (f", name {self.server_name}" if self.server_name else "")
                + ("" if self.verify else ", certificate NOT verified")
                + (", client certificate" if self.cert_pem else ""))


@dataclass(frozen=True)
class Endpoint:
    """Where clients reach a running service. `extra` holds protocol details
    (e.g. PostgreSQL user and database), never secrets: those are `auth`."""

    kind: str
    host: str
    port: int
    extra: Mapping[str, Any] = field(default_factory=dict)
    auth: Credentials | None = field(default=None, repr=False)
    tls: TLSConfig | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "host": self.host, "port": self.port,
                "extra": dict(self.extra),
                **({"auth": self.auth.to_dict()} if self.auth is not None else {}),
                **({"tls": self.tls.to_dict()} if self.tls is not None else {})}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Endpoint:
        auth, tls = d.get("auth"), d.get("tls")
        return cls(d["kind"], d["host"], int(d["port"]), dict(d.get("extra", {})),
                   Credentials(auth.get("user"), str(auth["password"])) if auth else None,
                   TLSConfig(**tls) if tls else None)


def split_hostport(address: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets) as (host, port)."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)
