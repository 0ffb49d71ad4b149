"""What a spec's machines must offer, checked before anything starts.

`harness hosts check SPEC` runs all of it; `harness run` runs the cheap part (connect,
binaries, the kit on client machines) before its first server starts. Each problem is
one line naming the host and what to do.

- Every machine: SSH from the control machine with its host key in known_hosts (an
  unknown or changed key is refused), and a Python 3 (`python`, default python3): the
  launchers pick free ports and probe with it.
- Server machines (a service's `host`, and hosts named in its settings): the service's
  binaries.
- Client machines: the kit's Python, importing `harness` (the same version as here) and
  uvloop.
- The network: servers listen on free ports of their machine's `address`, so the control
  machine (probes, prepare) and every client machine must reach each server machine's
  address on any TCP port. `reach` proves it with a listener on an ephemeral port of the
  server machine and a connect from each of them.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from harness import __version__
from harness.errors import HarnessError, HostError
from harness.hosts import Host, HostSpec, connect_host
from harness.services import SERVICES
from harness.spec import Spec

#: Prints the kit's version; fails without harness or uvloop.
KIT_PROBE = "import harness, uvloop; print(harness.__version__)"
#: Listens on argv[1] (a free port), prints it, accepts connections until argv[2] s pass.
LISTENER = (
    "import socket, sys, time\n"
    "s = socket.create_server((sys.argv[1], 0))\n"
    "print('port', s.getsockname()[1], flush=True)\n"
    "end = time.monotonic() + float(sys.argv[2])\n"
    "while time.monotonic() < end:\n"
    "    s.settimeout(max(0.01, end - time.monotonic()))\n"
    "    try:\n"
    "        c, a = s.accept()\n"
    "    except OSError:\n"
    "        break\n"
    "    print('from', a[0], flush=True)\n"
    "    c.close()\n"
)
#: Connects to argv[1]:argv[2] within argv[3] s; prints the address it connected from
#: (exit 0), or exits 1 saying why.
CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), "
    "timeout=float(sys.argv[3]))\n"
    "except OSError as e:\n"
    "    sys.exit(f'{type(e).__name__}: {e}')\n"
    "print(c.getsockname()[0])\n"
    "c.close()\n"
)
CONNECT_TIMEOUT_S = 5.0
LISTEN_START_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Reach:
    """One connect attempt: from a machine (`control` for this one) to a server machine.
    `from_address` is where the machine connected from, `seen_as` the peer address the
    server machine saw; they differ only behind address translation (NAT)."""

    source: str
    server: str
    address: str
    port: int
    problem: str | None
    from_address: str | None = None
    seen_as: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


def translation_problem(r: Reach, services: list[str]) -> str | None:
    """When `services` on the server machine admit by address (PostgreSQL) and the server
    sees the machine at another address than it connects from, it would be refused."""
    if not r.ok or r.seen_as is None or r.seen_as == r.from_address or not services:
        return None
    return (f"{r.server} sees {r.source} as {r.seen_as}, but {r.source} connects from "
            f"{r.from_address} (address translation?): {', '.join(services)} would admit "
            f"{r.from_address} only and refuse it; connect without NAT")


def server_hosts(spec: Spec) -> dict[str, list[str]]:
    """Spec host name -> the services running there (a service spread over hosts counts
    on each)."""
    out: dict[str, list[str]] = {}
    for sname, svc in spec.services.items():
        for h in [svc.host, *SERVICES.get(svc.kind).extra_hosts(svc.settings)]:
            out.setdefault(h, [])
            if sname not in out[h]:
                out[h].append(sname)
    return out


def admitting_services(spec: Spec) -> dict[str, list[str]]:
    """Spec host name -> its services that admit clients by address (PostgreSQL)."""
    out: dict[str, list[str]] = {}
    for sname, svc in spec.services.items():
        if SERVICES.get(svc.kind).needs_access:
            out.setdefault(svc.host, []).append(f"services.{sname}")
    return out


def used_hosts(spec: Spec) -> list[str]:
    return sorted(set(server_hosts(spec)) | set(spec.clients.hosts))


def binary_problems(spec: Spec, name: str, host: Host) -> list[str]:
    """Binaries the services on spec host `name` need and `host` lacks."""
    out = []
    for sname in server_hosts(spec).get(name, []):
        svc = spec.services[sname]
        missing = SERVICES.get(svc.kind).missing_binaries(host, svc.settings)
        if missing:
            out.append(f"services.{sname}: {', '.join(missing)} not found; install "
                       "there (Debian: see docs/servers.md) or use environment.yml")
    return out


def kit_problems(host: Host) -> list[str]:
    """Whether `host.python` runs the kit (same version as here) and uvloop."""
    res = host.run([host.python, "-c", KIT_PROBE], check=False, timeout=60)
    if not res.ok:
        detail = (res.stderr or res.stdout).strip().splitlines()
        why = detail[-1] if detail else f"exit {res.returncode}"
        return [f"python {host.python} cannot run the kit ({why}); install this checkout "
                "there (pip install <checkout>, docs/hosts.md) and "
                "set the host's `python`"]
    version = res.stdout.strip()
    if version != __version__:
        return [f"python {host.python} has kit version {version}, this machine "
                f"{__version__}; install the same checkout on both"]
    return []


def python_problems(host: Host) -> list[str]:
    res = host.run([host.python, "-c", "import sys; print(sys.version_info[0])"],
                   check=False, timeout=60)
    if not res.ok or res.stdout.strip() != "3":
        return [f"python {host.python} does not run (needed to pick ports and probe); "
                "set the host's `python` to a Python 3"]
    return []


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address in ("localhost", "local")


def _target_host(spec: HostSpec) -> str:
    if spec.address:
        return spec.address
    if spec.is_local:
        return "127.0.0.1"
    from harness.hosts.sshconnect import parse_target  # paramiko only when SSH is in use

    return parse_target(spec.target)[1]


def loopback_problems(spec: Spec) -> list[str]:
    """A server on a loopback address (localhost) with clients on other machines: they
    would connect to their own loopback. Clear before anything connects."""
    out = []
    for sname, hname in ((s, svc.host) for s, svc in spec.services.items()
                         if svc.address is None):  # at an address: the user's to reach
        if not _is_loopback(_target_host(spec.hosts[hname])):
            continue
        far = [c for c in spec.clients.hosts if not _is_loopback(_target_host(spec.hosts[c]))]
        if far:
            out.append(f"services.{sname}: runs on host {hname!r} at a loopback address, "
                       f"but client host(s) {', '.join(far)} are other machines and would "
                       f"connect to their own loopback; give host {hname!r} a target with "
                       "its network address (and `address:` if it differs)")
    return out


@dataclass(frozen=True)
class Listener:
    host: Host
    port: int
    log: str

    def seen(self) -> list[str]:
        """The peer addresses of the connections accepted so far, in order."""
        text = self.host.run(["cat", self.log], check=False).stdout
        return [line.split()[1] for line in text.splitlines() if line.startswith("from ")]


@contextlib.contextmanager
def listener(host: Host, timeout_s: float) -> Iterator[Listener]:
    """A TCP listener on `host.address`, a free port, for `timeout_s`."""
    tmp = host.mkdtemp(prefix="harness-check-")
    log = f"{tmp}/listen.log"
    proc = host.start([host.python, "-c", LISTENER, host.address, str(timeout_s)],
                      log_path=log)
    try:
        deadline = time.monotonic() + LISTEN_START_TIMEOUT_S
        while True:
            text = host.run(["cat", log], check=False).stdout
            if text.startswith("port "):
                yield Listener(host, int(text.split()[1]), log)
                return
            if not host.is_alive(proc) or time.monotonic() > deadline:
                raise HostError(f"{host.name}: cannot listen on {host.address} for the "
                                f"reachability check: {text.strip()[-500:]}")
            time.sleep(0.05)
    finally:
        with contextlib.suppress(HarnessError):
            host.stop(proc, timeout_s=2.0)
        host.remove_tree(tmp)


def _connect_here(address: str, port: int) -> tuple[str | None, str | None]:
    """(problem, the address this machine connected from)."""
    try:
        with socket.create_connection((address, port), timeout=CONNECT_TIMEOUT_S) as c:
            return None, str(c.getsockname()[0])
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}", None


def sources(spec: Spec) -> dict[str, list[str]]:
    """Server host -> the spec hosts that connect to it: every client host, the other
    hosts of a service spread over several (standbys to their primary, cluster nodes to
    each other), and a service's host to the hosts of the services it is given as peers
    (an app to its memcached)."""
    out: dict[str, list[str]] = {h: list(dict.fromkeys(spec.clients.hosts))
                                 for h in server_hosts(spec)}

    def add(to: str, source: str) -> None:
        if source != to and source not in out[to]:
            out[to].append(source)

    earlier: list[str] = []
    for svc in spec.services.values():
        launcher = SERVICES.get(svc.kind)
        spread = [svc.host, *launcher.extra_hosts(svc.settings)]
        for a in spread:
            for b in spread:
                add(a, b)
        if launcher.needs_peers:  # peers: the services listed before it
            for h in earlier:
                add(h, svc.host)
        earlier.append(svc.host)
    return out


def reach(spec: Spec, hosts: Mapping[str, Host], skip: frozenset[str] = frozenset()
          ) -> list[Reach]:
    """From this machine and each machine that connects to a server machine, to that
    machine's address on a free port. Hosts in `skip` (no usable Python) are left out."""
    out = []
    for sname, srcs in sorted(sources(spec).items()):
        if sname not in hosts or sname in skip:
            continue
        server = hosts[sname]
        clients = [c for c in srcs if c in hosts and c not in skip]
        budget = CONNECT_TIMEOUT_S * (len(clients) + 2) + 10
        with listener(server, budget) as lis:
            port = lis.port
            tried = [Reach("control", sname, server.address, port,
                           *_connect_here(server.address, port))]
            for cname in clients:
                c = hosts[cname]
                res = c.run([c.python, "-c", CONNECT, server.address, str(port),
                             str(CONNECT_TIMEOUT_S)], check=False,
                            timeout=CONNECT_TIMEOUT_S + 30)
                problem = None if res.ok else (res.stderr or res.stdout).strip()[-300:] or (
                    f"exit {res.returncode}")
                tried.append(Reach(cname, sname, server.address, port, problem,
                                   res.stdout.strip() if res.ok else None))
            # One accepted connection per successful connect, in the same order (each
            # connect finished before the next began).
            seen = iter(lis.seen())
            out += [replace(r, seen_as=next(seen, None)) if r.ok else r for r in tried]
    return out


def connect_all(spec: Spec, names: list[str]) -> tuple[dict[str, Host], dict[str, str]]:
    """Open each named host; (connected hosts, name -> why it could not be opened)."""
    hosts: dict[str, Host] = {}
    failed: dict[str, str] = {}
    for name in names:
        try:
            hosts[name] = connect_host(spec.hosts[name])
        except HostError as exc:
            failed[name] = str(exc)
    return hosts, failed


def host_problems(spec: Spec, name: str, host: Host) -> list[str]:
    """Everything `harness hosts check` asks of one connected machine."""
    out = binary_problems(spec, name, host)
    if name in spec.clients.hosts:
        out += kit_problems(host)
    elif name in server_hosts(spec):
        out += python_problems(host)
    return out
