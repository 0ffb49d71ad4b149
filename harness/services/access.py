"""Who connects to a server, and from which exact address.

A server on a spec host is reached by two kinds of machine: the **control machine** (where
`harness` runs: the workload's prepare and baseline steps, probes) and the spec's
**client machines** (the load). Servers that can admit by address (PostgreSQL's
pg_hba.conf) admit exactly these, each as a single address (/32, or /128 for IPv6),
never a range, and each must still give the server's password (scram-sha-256).

The address a machine connects *from* is the one its kernel picks to reach the server's
address; it is asked on that machine (a UDP `connect`, which sends nothing), so a
machine with several interfaces is admitted by the one it really uses. Behind NAT the
server would see another address: run the control machine and the clients on the
servers' network (docs/hosts.md, "Running on real machines").
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from harness.errors import ServiceError
from harness.hosts import Host

#: Prints the source address this machine uses towards argv[1] (nothing is sent).
SOURCE_PROBE = (
    "import socket,sys\n"
    "a = socket.getaddrinfo(sys.argv[1], 9, 0, socket.SOCK_DGRAM)[0]\n"
    "s = socket.socket(a[0], socket.SOCK_DGRAM)\n"
    "s.connect(a[4])\n"
    "print(s.getsockname()[0])\n"
)


def local_source_address(target: str) -> str:
    """The address this (the control) machine connects from to reach `target`."""
    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(target, 9, 0, socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(sockaddr)
            return str(s.getsockname()[0])
    except OSError as exc:
        raise ServiceError(f"this machine has no route to {target!r}: {exc}") from exc


def source_address(host: Host, target: str) -> str:
    """The address `host` connects from to reach `target` (asked on `host`)."""
    res = host.run([host.python, "-c", SOURCE_PROBE, target], check=False, timeout=30)
    out = res.stdout.strip()
    if not res.ok or not out:
        raise ServiceError(
            f"{host.name}: cannot tell which address it reaches {target} from (ran "
            f"{host.python} -c ...; exit {res.returncode}): "
            f"{(res.stderr or res.stdout).strip()[-500:]}")
    return out


@dataclass(frozen=True)
class Access:
    """The exact addresses a server admits besides loopback."""

    sources: tuple[str, ...] = ()

    @classmethod
    def of(cls, addresses: Iterable[str]) -> Access:
        """Deduplicated, loopback dropped (initdb admits it already), order kept."""
        out: list[str] = []
        for a in addresses:
            ip = ipaddress.ip_address(a)
            if not ip.is_loopback and str(ip) not in out:
                out.append(str(ip))
        return cls(tuple(out))

    @staticmethod
    def cidr(address: str) -> str:
        ip = ipaddress.ip_address(address)
        return f"{ip}/{ip.max_prefixlen}"

    def cidrs(self) -> list[str]:
        """What the manifest records: the admitted addresses, each a single-host CIDR."""
        return [self.cidr(a) for a in self.sources]

    def hba_lines(self, database: str, user: str, *, replication: Iterable[str] = ()
                  ) -> str:
        """pg_hba.conf lines: `database` for `user` from each source, and replication
        from each of `replication` (standbys), every one an exact address."""
        lines = [f"host {database} {user} {self.cidr(a)} scram-sha-256\n"
                 for a in self.sources]
        lines += [f"host replication {user} {self.cidr(a)} scram-sha-256\n"
                  for a in Access.of(replication).sources]
        if not lines:
            return ""
        return ("# harness: the control machine, the spec's client machines and the "
                "standbys; exact addresses only\n" + "".join(lines))


def access_for(server: Host, clients: Iterable[Host]) -> Access:
    """Who reaches a server on `server`: this control machine and each client host."""
    addresses = [local_source_address(server.address)]
    addresses += [source_address(c, server.address) for c in clients]
    return Access.of(addresses)
