"""Emulated hosts and links: network namespaces on a bridge, shaped by tc netem or a relay.

A `Network` is a Linux bridge `hkv-<tag>-br` in the root namespace with address
10.231.N.1/24, and named hosts: namespaces `hkv-<tag>-<name>`, each joined to the
bridge by its own veth pair (its link) and given 10.231.N.<k>. The addresses exist only
on this machine; traffic stays between these namespaces and the root namespace.
`NamespaceHost` is a Host bound to one namespace, so servers start inside it exactly as
on any other host.

Links: `Link.delay_ms` is ONE-WAY, applied in each direction, so a round trip between a
namespace and the root namespace pays 2 x delay (jitter likewise per direction, uniform
±). Profiles are named by what ping would show: `lan` = 0.2 ms round trip, `wifi` = 3 ms
± 1 ms round trip with 0.1% loss per direction.

Emulation: the kernel's `tc qdisc ... netem` on both ends of a veth where the kernel
has it (delay, jitter, loss, rate); otherwise (`Specified qdisc kind is unknown`, as on
some CI kernels) the userspace relay (`harness.netem.relay`) in front of the service
delays and paces, with `tbf` on the veth for the rate where available. The relay cannot
drop packets; the chosen emulation and what it covered are recorded for the manifest.

Everything carries the prefix `hkv-` (namespaces, links, the state directory
/tmp/hkv-<tag>-*, the relays' `--tag`), so `harness netem cleanup`
(`harness.netem.cleanup`) finds whatever a crashed run left behind. Namespaces and tc
need root; without it `NetemError` says so, and the relay alone still works on loopback.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HostError
from harness.hosts import CommandResult, Host, Process

PREFIX = "hkv-"
SUBNET = "10.231"  # 10.231.N.0/24 per network: private, and only ever on this machine
OWNER_FILE = "owner.json"
EMULATIONS = ("auto", "netem", "relay")


class NetemError(HostError):
    """Namespaces or links could not be set up (no root, no `ip`, bad parameters)."""


@dataclass(frozen=True)
class Link:
    """One emulated link. `delay_ms` and `jitter_ms` are one-way, per direction."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    rate_mbit: float | None = None

    @property
    def rtt_ms(self) -> float:
        """The round trip the link adds (both directions' delay)."""
        return 2 * self.delay_ms

    @property
    def is_null(self) -> bool:
        return not (self.delay_ms or self.jitter_ms or self.loss_pct or self.rate_mbit)

    def problems(self) -> list[str]:
        out = []
        if self.delay_ms < 0 or self.jitter_ms < 0:
            out.append("delay_ms and jitter_ms must be >= 0")
        if self.jitter_ms > self.delay_ms:
            out.append(f"jitter_ms ({self.jitter_ms}) must not exceed delay_ms "
                       f"({self.delay_ms}): a delay cannot go negative")
        if not 0 <= self.loss_pct <= 100:
            out.append("loss_pct must be between 0 and 100")
        if self.rate_mbit is not None and self.rate_mbit <= 0:
            out.append("rate_mbit must be > 0")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rtt_ms": self.rtt_ms}

    def netem_args(self) -> list[str]:
        args = ["netem", "limit", "100000", "delay", f"{self.delay_ms}ms"]
        if self.jitter_ms:
            args.append(f"{self.jitter_ms}ms")
        if self.loss_pct:
            args += ["loss", f"{self.loss_pct}%"]
        if self.rate_mbit:
            args += ["rate", f"{self.rate_mbit}mbit"]
        return args

    def relay_args(self) -> list[str]:
        args = ["--delay-ms", str(self.delay_ms), "--jitter-ms", str(self.jitter_ms)]
        return args + (["--rate-mbit", str(self.rate_mbit)] if self.rate_mbit else [])


#: Named profiles, quoted as round trips (what ping shows); each direction gets half.
PROFILES: dict[str, Link] = {
    "none": Link(),
    "lan": Link(delay_ms=0.1),
    "wifi": Link(delay_ms=1.5, jitter_ms=0.5, loss_pct=0.1),
}


def make_link(profile: str, delay_ms: float | None = None, jitter_ms: float | None = None,
              loss_pct: float | None = None, rate_mbit: float | None = None) -> Link:
    """The profile's link with any explicitly given value replacing the profile's."""
    if profile not in PROFILES:
        raise NetemError(f"unknown network profile {profile!r} (known: {', '.join(PROFILES)})")
    base = PROFILES[profile]
    return Link(
        delay_ms=base.delay_ms if delay_ms is None else float(delay_ms),
        jitter_ms=base.jitter_ms if jitter_ms is None else float(jitter_ms),
        loss_pct=base.loss_pct if loss_pct is None else float(loss_pct),
        rate_mbit=base.rate_mbit if rate_mbit is None else float(rate_mbit),
    )


def is_root(host: Host) -> bool:
    return host.run(["id", "-u"], check=False).stdout.strip() == "0"


def require_root(host: Host, what: str = "network namespaces") -> None:
    if not is_root(host):
        raise NetemError(
            f"{host.name}: {what} need root (CAP_NET_ADMIN); run as root, or emulate the "
            "links with the relay alone on loopback (pg_cluster: netns: false)")
    if host.which("ip") is None:
        raise NetemError(f"{host.name}: `ip` not found (Debian: apt-get install iproute2)")


def new_tag() -> str:
    return secrets.token_hex(3)


def proc_start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat: with the pid, it identifies a process across pid reuse."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def make_state_dir(host: Host, tag: str) -> str:
    """/tmp/hkv-<tag>-XXXXXX on `host`, owned by this process (for cleanup's liveness
    check) and traversable by the postgres user that runs servers below it."""
    # Built under another name and renamed: cleanup never sees it without its owner.
    tmp = host.mkdtemp(prefix=f".new-{PREFIX}")
    host.run(["chmod", "711", tmp])
    owner = {"pid": os.getpid(), "start": proc_start_time(os.getpid()), "tag": tag}
    host.write_text(f"{tmp}/{OWNER_FILE}", json.dumps(owner, allow_nan=False))
    parent, name = tmp.rsplit("/", 1)
    path = f"{parent}/{PREFIX}{tag}-{name.rsplit('-', 1)[1]}"
    host.run(["mv", "-T", tmp, path])
    return path


def ip(host: Host, *args: str, check: bool = True) -> CommandResult:
    res = host.run(["ip", *args], check=False)
    if check and not res.ok:
        raise NetemError(f"{host.name}: ip {' '.join(args)}: "
                         f"{(res.stderr or res.stdout).strip()}")
    return res


def netem_supported(host: Host, dev: str) -> bool:
    """Whether this kernel has the netem qdisc, tried on `dev` (then removed)."""
    res = host.run(["tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", "1ms"],
                   check=False)
    if res.ok:
        host.run(["tc", "qdisc", "del", "dev", dev, "root"], check=False)
    return res.ok


def free_subnet(host: Host) -> int:
    """A third octet N such that no interface on `host` has an address in 10.231.N/24."""
    used = {int(m) for m in re.findall(rf"inet {re.escape(SUBNET)}\.(\d+)\.",
                                       ip(host, "-o", "-4", "addr", "show").stdout)}
    free = [n for n in range(1, 255) if n not in used]
    if not free:
        raise NetemError(f"{host.name}: every 10.231.N.0/24 is in use; run harness netem "
                         "cleanup")
    return secrets.choice(free)  # random: two harnesses starting at once rarely collide


class NamespaceHost(Host):
    """A Host bound to a network namespace: argv runs under `ip netns exec <ns>`.

    Files, users and processes are the parent host's (only the network differs), so
    processes are tracked and stopped by the parent; `address` is the namespace's IP.
    """

    def __init__(self, parent: Host, netns: str, address: str) -> None:
        self.parent = parent
        self.netns = netns
        self.name = netns
        self.address = address
        self.python = parent.python

    @property  # type: ignore[override]
    def owner(self) -> str | None:
        """The parent's: a namespace's processes and files are the parent host's."""
        return self.parent.owner

    def _wrap(self, argv: Sequence[str]) -> list[str]:
        # Through `sh -c 'exec ...'`: a missing command exits 127 and a non-executable
        # one 126, as on every other host (`ip netns exec` says 1 for both); exec keeps
        # the pid, so a started server's pid and process group are its own.
        return ["ip", "netns", "exec", self.netns, "sh", "-c", 'exec "$0" "$@"',
                *map(str, argv)]

    def _run(self, argv: tuple[str, ...], *, timeout: float | None,
             env: Mapping[str, str] | None, cwd: str | None,
             input: str | None) -> CommandResult:
        res = self.parent.run(self._wrap(argv), check=False, timeout=timeout, env=env,
                              cwd=cwd, input=input)
        # Report the command as given, not the wrapper, so errors read as on any host.
        return CommandResult(argv, res.returncode, res.stdout, res.stderr, res.duration_s)

    def _start(self, argv: tuple[str, ...], *, log_path: str,
               env: Mapping[str, str] | None, cwd: str | None) -> Process:
        # `ip netns exec` execs the command, so the pid (and process group) is the server's.
        # Named by the parent, whose process it is: the state file lists it there with
        # its start time, so a clean-up after a kill can prove it and stop it (a
        # namespace's name is no host the clean-up can reach once the run is gone).
        proc = self.parent.start(self._wrap(argv), log_path=log_path, env=env, cwd=cwd)
        return Process(self.parent.name, proc.pid, argv, log_path)

    def _as_parent(self, proc: Process) -> Process:
        return Process(self.parent.name, proc.pid, proc.argv, proc.log_path)

    def is_alive(self, proc: Process) -> bool:
        return self.parent.is_alive(self._as_parent(proc))

    def signal(self, proc: Process, sig: str = "TERM", *, group: bool = True) -> bool:
        return self.parent.signal(self._as_parent(proc), sig, group=group)

    def stop(self, proc: Process, *, timeout_s: float = 10.0) -> None:
        self.parent.stop(self._as_parent(proc), timeout_s=timeout_s)

    def put(self, local: Path | str, remote: str) -> None:
        self.parent.put(local, remote)

    def get(self, remote: str, local: Path | str) -> None:
        self.parent.get(remote, local)

    def close(self) -> None:
        pass


@dataclass
class Member:
    """One namespace on the bridge, with its link's shaping."""

    name: str
    netns: str
    veth: str
    address: str
    host: NamespaceHost
    shaped: list[str] = field(default_factory=list)


class Network:
    """A bridge with namespaces hanging off it; `close()` removes all of it."""

    def __init__(self, host: Host, tag: str) -> None:
        require_root(host)
        self.host = host
        self.tag = tag
        self.bridge = f"{PREFIX}{tag}-br"
        self.members: list[Member] = []
        self.octet = free_subnet(host)
        self.address = f"{SUBNET}.{self.octet}.1"
        ip(host, "link", "add", self.bridge, "type", "bridge")
        try:
            ip(host, "addr", "add", f"{self.address}/24", "dev", self.bridge)
            ip(host, "link", "set", self.bridge, "up")
        except NetemError:
            self.close()
            raise

    def add(self, name: str) -> Member:
        """A new namespace `hkv-<tag>-<name>` joined to the bridge by its own veth."""
        if not re.fullmatch(r"[a-z0-9]{1,4}", name):
            raise NetemError(f"namespace short name {name!r}: 1-4 of [a-z0-9] (15-char "
                             "interface names)")
        k = len(self.members) + 2
        netns, veth, peer = (f"{PREFIX}{self.tag}-{name}", f"{PREFIX}{self.tag}-v{k}",
                             f"{PREFIX}{self.tag}-p{k}")
        address = f"{SUBNET}.{self.octet}.{k}"
        h = self.host
        ip(h, "netns", "add", netns)
        member = Member(name, netns, veth, address, NamespaceHost(h, netns, address))
        self.members.append(member)
        ip(h, "link", "add", veth, "type", "veth", "peer", "name", peer)
        ip(h, "link", "set", veth, "master", self.bridge)
        ip(h, "link", "set", veth, "up")
        ip(h, "link", "set", peer, "netns", netns)
        for args in (("link", "set", peer, "name", "eth0"),
                     ("addr", "add", f"{address}/24", "dev", "eth0"),
                     ("link", "set", "eth0", "up"), ("link", "set", "lo", "up")):
            ip(h, "-n", netns, *args)
        return member

    def shape(self, member: Member, link: Link, *, netem: bool) -> str:
        """Apply `link` to both ends of the member's veth. With `netem`, everything;
        otherwise only the rate (tbf), the relay doing the rest. Returns what shaped the
        rate: 'netem', 'tbf' or '' (nothing, or left to the relay)."""
        if link.is_null:
            return ""
        ends = [(), ("-n", member.netns)]
        devs = [member.veth, "eth0"]
        if netem:
            for ns, dev in zip(ends, devs, strict=True):
                self._tc(ns, "qdisc", "add", "dev", dev, "root", *link.netem_args())
            member.shaped.append("netem")
            return "netem" if link.rate_mbit else ""
        if not link.rate_mbit:
            return ""
        rate_bytes = link.rate_mbit * 1e6 / 8
        burst = max(3200, int(rate_bytes / 100))  # 10 ms worth, at least two MTUs
        for ns, dev in zip(ends, devs, strict=True):
            res = self._tc(ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                           f"{link.rate_mbit}mbit", "burst", str(burst), "latency", "1s",
                           check=False)
            if not res.ok:
                return ""  # no tbf either: the relay paces
        member.shaped.append("tbf")
        return "tbf"

    def _tc(self, ns: tuple[str, ...], *args: str, check: bool = True) -> CommandResult:
        argv = ["ip", "netns", "exec", ns[1], "tc", *args] if ns else ["tc", *args]
        res = self.host.run(argv, check=False)
        if check and not res.ok:
            raise NetemError(f"{self.host.name}: tc {' '.join(args)}: "
                             f"{(res.stderr or res.stdout).strip()}")
        return res

    def close(self) -> None:
        """Delete the namespaces (their veths go with them) and the bridge. Idempotent."""
        for m in reversed(self.members):
            # Processes still inside keep a namespace alive after `del`: kill them first.
            pids = ip(self.host, "netns", "pids", m.netns, check=False).stdout.split()
            if pids:
                self.host.run(["kill", "-KILL", *pids], check=False)
            ip(self.host, "netns", "del", m.netns, check=False)
            ip(self.host, "link", "del", m.veth, check=False)
        self.members.clear()
        ip(self.host, "link", "del", self.bridge, check=False)


def start_relay(host: Host, *, listen: str, target: tuple[str, int], link: Link, tag: str,
                log_path: str, cwd: str | None = None, timeout_s: float = 15.0
                ) -> tuple[Process, int]:
    """Start `python -m harness.netem.relay` on `host` accepting on `listen` (a port the
    kernel picks) and relaying to `target`; return the process and its port."""
    from harness.netem.relay import READY_LINE

    argv = [host.python, "-m", "harness.netem.relay", "--listen", f"{listen}:0",
            "--target", f"{target[0]}:{target[1]}", *link.relay_args(),
            "--tag", f"{PREFIX}{tag}"]
    proc = host.start(argv, log_path=log_path, cwd=cwd)
    deadline = time.monotonic() + timeout_s
    while True:
        text = host.run(["cat", log_path], check=False).stdout
        if READY_LINE in text:
            port = int(text.split(READY_LINE, 1)[1].split()[0].rsplit(":", 1)[1])
            return proc, port
        if not host.is_alive(proc) or time.monotonic() > deadline:
            host.stop(proc)
            raise NetemError(f"{host.name}: relay to {target[0]}:{target[1]} did not start:"
                             f"\n{text.strip()[-2000:]}")
        time.sleep(0.05)
