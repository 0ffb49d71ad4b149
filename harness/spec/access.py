"""A service entry's way in: a server at an address the kit does not start, the
credentials it takes (where the password comes from, never the password), its database.

    services:
      cache: {kind: redis, address: "10.0.0.5:6380", host: db1,
              auth: {user: bench, password_env: REDIS_PASSWORD}}
      db: {kind: postgres, address: "db.example:5432", database: bench,
           auth: {user: bench, password_file: ~/.kvbench/pg}}

Checked here, before anything connects; the password is read when the run starts
(`harness.services.access_creds`).
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.spec.model import AuthSpec
from harness.text import printable

#: The fields of a service entry.
SERVICE_FIELDS = ("kind", "host", "settings", "address", "auth", "database", "tls",
                  "after")
AUTH_FIELDS = ("user", "password_env", "password_file")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DATABASE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$-]{0,62}$")
_ADDRESS = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})$")

Bad = Callable[[str, str], None]


#: What servers and proxies read as "every interface" besides the unspecified addresses
#: (redis `bind *`, pgbouncer `listen_addr = *`, haproxy `*:port`, `INADDR_ANY`).
_WILDCARDS = {"*", "any", "inaddr_any", "in6addr_any", "all"}


def listen_problem(address: str) -> str | None:
    """Why servers must not listen at `address`: an unspecified one (0.0.0.0, ::, and
    every other spelling of them: IPv4-mapped, IPv4-compatible, 6to4, inet_aton's "0x0"
    and octal, full-width digits) or a wildcard binds every interface of the machine,
    which the kit promises never to do; a multicast address is no machine's; an address
    not in ASCII is refused (what a resolver makes of it is not what a reader sees)."""
    raw = address.strip().strip("[]")
    text = unicodedata.normalize("NFKC", raw)
    shown = repr(printable(address))
    if not text:
        return "an empty address; give the machine's address on the clients' network"
    ip = _address_of(text)
    embedded = _embedded(ip) if ip is not None else []
    if text.lower() in _WILDCARDS or any(a.is_unspecified for a in embedded):
        return (f"{shown} means every interface; servers bind the one address they are "
                "measured on: give the machine's address on the clients' network")
    if text != raw or not text.isascii():
        return (f"{shown} is not written in ASCII; give the machine's address (digits, "
                "letters, '.', ':', '-')")
    if any(a.is_multicast for a in embedded):
        return f"{shown} is a multicast address, not a machine's"
    return None


def _embedded(ip: ipaddress.IPv4Address | ipaddress.IPv6Address
              ) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """`ip` and the IPv4 addresses it carries (mapped, compatible, 6to4)."""
    out: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        out += [a for a in (ip.ipv4_mapped, ip.sixtofour) if a is not None]
        if int(ip) >> 32 == 0:  # IPv4-compatible (::a.b.c.d): deprecated, still parsed
            out.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return out


def _address_of(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """`text` as the resolver reads an address literal (inet_aton's forms too: "0",
    "0x0", octal), or None for a name."""
    try:
        return ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None


def service_after(where: str, sdef: Mapping[str, Any], kind: str, earlier: list[str],
                  bad: Bad) -> tuple[str, ...]:
    """The services an entry's `after:` names: earlier entries of the spec (they start
    first), for a `command` service (a proxy, whose templates name them)."""
    after = sdef.get("after")
    if after is None:
        return ()
    if kind != "command":
        bad(f"{where}.after", "only a command service (a proxy) is put in front of others")
        return ()
    if not isinstance(after, list) or not after or not all(isinstance(a, str)
                                                           for a in after):
        bad(f"{where}.after", "expected a list of service names")
        return ()
    for name in after:
        if name not in earlier:
            bad(f"{where}.after", f"{name!r} is not a service listed before this one "
                                  f"(earlier: {earlier}); the services it names start first")
            return ()
    if len(set(after)) != len(after):
        bad(f"{where}.after", "names a service twice")
        return ()
    return tuple(after)


def service_access(where: str, sdef: Mapping[str, Any], kind: str, service: Any,
                   bad: Bad) -> dict[str, Any]:
    """The ServiceSpec fields `address`, `auth`, `database` and `observed` of one entry,
    each problem reported as `bad(field, message)`."""
    out: dict[str, Any] = {"observed": "host" in sdef}
    address = sdef.get("address")
    if address is not None:
        m = _ADDRESS.match(address) if isinstance(address, str) else None
        if m is None or not 0 < int(m.group(2)) < 65536:
            bad(f"{where}.address", f"{address!r} is not HOST:PORT (an IPv6 host in "
                                    "brackets: [fd00::5]:6379)")
        elif not getattr(service, "attachable", False):
            bad(f"{where}.address", f"the kit cannot measure a {kind} it does not start; "
                                    "at an address: memcached, redis, redis_cluster, "
                                    "postgres (an HTTP app: kind external with url)")
        elif problem := listen_problem(m.group(1)):
            bad(f"{where}.address", problem)
        else:
            out["address"] = address
    auth = sdef.get("auth")
    if auth is not None:
        parsed = _auth(f"{where}.auth", auth, bad)
        if address is None:
            bad(f"{where}.auth", "credentials are for a server at an address; a server the "
                                 "kit starts takes a random password of its own")
        elif kind not in ("redis", "redis_cluster", "postgres"):
            bad(f"{where}.auth", f"{kind} takes no password in the protocol the kit speaks "
                                 "to it; keep its network private")
        elif parsed is not None:
            out["auth"] = parsed
    database = sdef.get("database")
    if database is not None:
        if kind != "postgres" or address is None:
            bad(f"{where}.database", "names the database of a postgres at an address")
        elif not isinstance(database, str) or not _DATABASE.match(database):
            bad(f"{where}.database", f"{database!r} is not a database name (letters, "
                                     "digits, _ $ -, starting with a letter or _)")
        else:
            out["database"] = database
    tls = sdef.get("tls", (sdef.get("settings") or {}).get("tls") if isinstance(
        sdef.get("settings"), Mapping) else None)
    if tls is not None:
        from harness.services.tlsconf import tls_problems

        for problem in tls_problems(tls, address is not None or kind == "external"):
            field, _, message = problem.partition(": ")
            bad(f"{where}.{field}", message)
    return out


def _auth(where: str, auth: Any, bad: Bad) -> AuthSpec | None:
    if not isinstance(auth, Mapping):
        bad(where, "expected {user, password_env | password_file}")
        return None
    for k in auth:
        if k not in AUTH_FIELDS:
            bad(f"{where}.{k}", "unknown field" + (
                "; a password is never written in a spec: name an environment variable "
                "(password_env) or a file (password_file) that holds it"
                if str(k) == "password" else f" (fields: {', '.join(AUTH_FIELDS)})"))
            return None
    user, env, path = (auth.get(k) for k in AUTH_FIELDS)
    if user is not None and (not isinstance(user, str) or not user or any(
            c.isspace() for c in user)):
        bad(f"{where}.user", f"{user!r} is not a user name")
        return None
    if (env is None) == (path is None):
        bad(where, "give exactly one of password_env (an environment variable's name) "
                   "or password_file (a file holding the password)")
        return None
    if env is not None and (not isinstance(env, str) or not _ENV_NAME.match(env)):
        # Not quoted: what is given here instead of a name is most often the password.
        bad(f"{where}.password_env", "expected the name of an environment variable that "
                                     "holds the password (letters, digits and _, not "
                                     "starting with a digit); what was given is not one, "
                                     "and is not shown in case it is the password itself")
        return None
    if path is not None and (not isinstance(path, str) or not path):
        bad(f"{where}.password_file", "expected a file path")
        return None
    return AuthSpec(user, env, os.path.expanduser(path) if path else None)


def backends(services: Mapping[str, Any]) -> set[str]:
    """The services some other one names in `after:` (they serve it, not the workload)."""
    return {name for s in services.values() for name in getattr(s, "after", ())}


def unverified_tls(services: Mapping[str, Any], grid: Mapping[str, Sequence[Any]]
                   ) -> list[str]:
    """The services some run reaches over TLS without checking the server's certificate
    (``tls: {verify: false}``, in the entry or among its grid key's values): whoever
    answers at that address is taken for the server, and nothing tells them apart."""
    out = []
    for name, svc in services.items():
        values = [svc.settings.get("tls"), *grid.get(f"services.{name}.tls", ())]
        if any(isinstance(v, Mapping) and v.get("verify") is False for v in values):
            out.append(name)
    return out


def unverified_tls_line(name: str, service: Any) -> str:
    """The warning `harness run` prints of such a service, before anything runs."""
    where = f"at {service.address}" if service.address else f"on {service.host}"
    return (f"warning: services.{name}: tls.verify is false: the server's certificate is "
            f"not checked, so these runs cannot tell the server {where} from anyone else "
            "answering there; its manifests and the report say 'certificate NOT verified'")


#: Where `harness run --metrics PORT` listens when no address is given.
METRICS_DEFAULT_HOST = "127.0.0.1"


def metrics_listen(text: str) -> tuple[str, int]:
    """`PORT`, `ADDR:PORT` or `[IPv6]:PORT` of the live /metrics endpoint (`harness run
    --metrics`, a spec's `export: {prometheus: ...}`) as (address, port); a bare port
    listens on loopback only. ValueError saying why: the address is checked as servers'
    are (`listen_problem`): every interface is never bound, an address is spelled out."""
    raw = str(text).strip()
    if raw.isdigit():
        host, port = METRICS_DEFAULT_HOST, int(raw)
    else:
        m = _ADDRESS.match(raw)
        if m is None:
            raise ValueError(f"{printable(raw)!r} is not PORT or ADDRESS:PORT (e.g. 9464 "
                             "or 127.0.0.1:9464; [::1]:9464 for IPv6)")
        host, port = m.group(1).strip("[]"), int(m.group(2))
        problem = listen_problem(host)
        if problem is not None:
            raise ValueError(f"{problem.split(';')[0]}; the endpoint binds one address: "
                             "give 127.0.0.1 (this machine only) or the address your "
                             "Prometheus scrapes it at")
    if not 0 < port < 65536:
        raise ValueError(f"port {port} is not between 1 and 65535")
    return host, port
