"""Replicated PostgreSQL: a primary and k synchronous standbys (streaming replication).

Modes (`mode`, with `nodes` = primary + standbys):

- `single`: the primary alone (nodes = 1).
- `local-cluster`: the standbys on the service's host, over loopback, no emulation.
- `network-cluster`: each standby on its own host. By default a network namespace on the
  service's host behind an emulated link (`profile` or `delay_ms`/`jitter_ms`/`loss_pct`/
  `rate_mbit`, see `harness.netem`); with `standby_hosts`, real machines from the spec
  (the network is then real and nothing is emulated); with `netns: false`, standbys on
  loopback behind the relay only (no root needed).

The primary always runs on the service's host and clients reach it at its address (127.0.0.1
for localhost). Replication traffic crosses the emulated link, so a synchronous commit
pays its round trip. Commit waits for `sync_standbys` (default: all) standbys as
`synchronous_standby_names = '<quorum> k (s1, ...)'` with `synchronous_commit` on /
remote_write / remote_apply. The primary trusts (pg_hba) loopback, the control machine
and the spec's client machines (`access`) and, for replication, the standbys, each by
its exact address, never a network range; standbys serve no clients. Before `start` returns,
pg_stat_replication must show every standby streaming with the expected sync_state, and
a committed probe row must be visible on every standby.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.errors import HarnessError, ServiceError
from harness.hosts import Host, Process
from harness.hosts.endpoint import Credentials
from harness.netem import (
    EMULATIONS,
    PROFILES,
    Link,
    Network,
    make_link,
    make_state_dir,
    netem_supported,
    new_tag,
    require_root,
    start_relay,
)
from harness.services._util import host_is_root, resolve_checked
from harness.services.access import Access
from harness.services.base import Endpoint, RunningService, Service, Setting
from harness.services.ownbuild import BINARY_SETTING, binary_problems, binary_record
from harness.services.packages import POSTGRESQL
from harness.services.pg_node import PgNode, cluster_binaries
from harness.services.postgres import (
    AUTH_MODE,
    DATABASE,
    GAUGES,
    PG_MAX_BACKENDS,
    USER,
    allow_hba,
    extra_problems,
    new_password,
    shared_buffers_problem,
    stat_database,
)

MODES = ("single", "local-cluster", "network-cluster")
MAX_NODES = 9
VERIFY_TIMEOUT_S = 60.0
_NUM = (int, float, type(None))


@dataclass
class ClusterService(RunningService):
    """The running cluster; `stop()` removes nodes, relays, namespaces and directories."""

    nodes: list[PgNode] = field(default_factory=list)
    relays: list[tuple[Host, Process]] = field(default_factory=list)
    network: Network | None = None
    state_dirs: list[tuple[Host, str]] = field(default_factory=list)

    def info(self) -> dict[str, Any]:
        out = super().info()
        out["nodes"] = [{"name": n.name, "host": n.host.name, "address": n.host.address,
                         "port": n.port, "pid": n.proc.pid if n.proc else None}
                        for n in self.nodes]
        return out

    def alive(self) -> bool:
        return (all(n.alive() for n in self.nodes)
                and all(h.is_alive(p) for h, p in self.relays))

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        # Standbys first: a primary shuts down faster with no walsenders to drain.
        for node in reversed(self.nodes):
            node.stop()
        for h, p in self.relays:
            with contextlib.suppress(HarnessError):
                h.stop(p, timeout_s=5.0)
        if self.network is not None:
            self.network.close()
        for h, d in self.state_dirs:
            h.remove_tree(d)


class PgCluster(Service):
    kind = "pg_cluster"
    binaries = ("initdb", "postgres", "psql", "pg_basebackup")
    packages = (POSTGRESQL,)
    needs_hosts = True
    gauges = (*GAUGES, "waiting")
    needs_access = True
    settings: Mapping[str, Setting] = {
        "mode": Setting((str,), "single", "single | local-cluster | network-cluster",
                        choices=MODES),
        "nodes": Setting((int, type(None)), None,
                         "nodes including the primary (default: 1 single, 2 clusters)",
                         low=1, high=MAX_NODES),
        "synchronous_commit": Setting((str,), "on", "what a commit waits for on standbys",
                                      choices=("on", "remote_write", "remote_apply")),
        "quorum": Setting((str,), "ANY", "ANY k (quorum) or FIRST k (priority) standbys",
                          choices=("ANY", "FIRST")),
        "sync_standbys": Setting((int, type(None)), None,
                                 "k, the standbys a commit waits for (default: all)",
                                 low=1, high=MAX_NODES - 1),
        "profile": Setting((str,), "none", "network profile of each standby's link "
                           "(round trip: lan 0.2 ms, wifi 3 ± 1 ms, 0.1% loss)",
                           choices=tuple(PROFILES)),
        # A minute one way, a terabit: past any network a cluster is measured on.
        "delay_ms": Setting(_NUM, None, "one-way delay per direction (overrides profile)",
                            low=0, high=60_000, why="a minute"),
        "jitter_ms": Setting(_NUM, None, "uniform ± jitter per direction (overrides)",
                             low=0, high=60_000, why="a minute"),
        "loss_pct": Setting(_NUM, None, "packet loss per direction, netem only (overrides)",
                            low=0, high=100),
        "rate_mbit": Setting(_NUM, None, "link rate (overrides profile)", low=0,
                             low_open=True, high=1_000_000, why="1 Tbit/s"),
        "emulation": Setting((str,), "auto", "auto (netem if the kernel has it, else "
                             "relay) | netem | relay", choices=EMULATIONS),
        "netns": Setting((bool,), True, "standbys in network namespaces (root); false: "
                         "on loopback behind the relay"),
        "standby_hosts": Setting((list,), [], "spec host names for the standbys (real "
                                 "machines, network-cluster); replaces emulation"),
        "primary_address": Setting((str, type(None)), None, "address standbys on "
                                   "standby_hosts use to reach the primary"),
        "fsync": Setting((bool,), True, "fsync WAL and data files on every node"),
        "shared_buffers": Setting((str,), "128MB", "per node"),
        "max_connections": Setting((int,), 100, "per node", low=1, high=PG_MAX_BACKENDS,
                                   why="PostgreSQL's own maximum"),
        "extra": Setting((dict,), {}, "more parameters for every node, name -> value"),
        "binary": BINARY_SETTING,
    }

    def provides(self, settings: Mapping[str, Any]) -> str:
        return "postgres"  # clients see a PostgreSQL server: the primary

    def missing_binaries(self, host: Host, settings: Mapping[str, Any] | None = None
                         ) -> list[str]:
        missing = [b for b, p in cluster_binaries(host, settings).items() if p is None]
        if host_is_root(host) and host.which("setpriv") is None:
            missing.append("setpriv")
        return missing

    def validate(self, settings: Mapping[str, Any], *, name: str = "",
                 behind: Sequence[str] = ()) -> list[str]:
        """Cross-setting problems, as messages (checked before anything starts)."""
        s = self.resolve(settings)
        mode, nodes, hosts = s["mode"], s["nodes"], s["standby_hosts"]
        out = []
        if mode == "single" and nodes not in (None, 1):
            out.append(f"mode single has exactly 1 node, not {nodes}")
        if mode != "single" and nodes is not None and not 2 <= nodes <= MAX_NODES:
            out.append(f"mode {mode} needs nodes between 2 and {MAX_NODES}, not {nodes}")
        k = self.standbys(s)
        if s["sync_standbys"] is not None and k and not 1 <= s["sync_standbys"] <= k:
            out.append(f"sync_standbys must be between 1 and {k} (the standbys)")
        link_given = s["profile"] != "none" or any(
            s[x] is not None for x in ("delay_ms", "jitter_ms", "loss_pct", "rate_mbit"))
        if hosts and mode == "network-cluster":  # the other modes ignore them
            if len(hosts) < k:
                out.append(f"{k} standbys need {k} standby_hosts, got {len(hosts)}")
            if link_given:
                out.append("standby_hosts are real machines: the network is real; drop "
                           "profile/delay_ms/jitter_ms/loss_pct/rate_mbit")
        try:
            out += self.link(s).problems()
        except HarnessError as exc:
            out.append(str(exc))
        if s["emulation"] == "netem" and not s["netns"]:
            out.append("emulation netem needs netns: true (netem on loopback would delay "
                       "the clients too)")
        if s["emulation"] == "relay" and (s["loss_pct"] or 0) > 0:
            out.append("the relay cannot drop packets: loss_pct needs emulation netem/auto")
        buffers = shared_buffers_problem(s["shared_buffers"])
        out += binary_problems(s["binary"]) + extra_problems(s["extra"])
        return [*out, buffers] if buffers else out

    @staticmethod
    def standbys(s: Mapping[str, Any]) -> int:
        if s["mode"] == "single":
            return 0
        return (s["nodes"] or 2) - 1

    @staticmethod
    def link(s: Mapping[str, Any]) -> Link:
        return make_link(s["profile"], s["delay_ms"], s["jitter_ms"], s["loss_pct"],
                         s["rate_mbit"])

    def extra_hosts(self, settings: Mapping[str, Any]) -> list[str]:
        return list(self.resolve(settings)["standby_hosts"])

    def counters(self, svc: RunningService) -> dict[str, float] | None:
        """The primary's `pg_stat_database` row of the clients' database."""
        nodes = getattr(svc, "nodes", [])
        if not nodes:
            return None
        primary = nodes[0]
        return stat_database(primary.host, str(primary.bins["psql"]), primary.workdir,
                             primary.port, pgpass=primary.pgpass)

    def start(self, host: Host, name: str, settings: Mapping[str, Any],
              hosts: Mapping[str, Host] | None = None, access: Access | None = None
              ) -> RunningService:
        s = resolve_checked(self, settings)
        problems = self.validate(s)
        if problems:
            raise ServiceError(f"pg_cluster {name!r}: " + "; ".join(problems))
        k = self.standbys(s)
        missing = [b for b, p in cluster_binaries(host, s).items()
                   if p is None and (k or b != "pg_basebackup")]
        if missing:
            raise ServiceError(f"pg_cluster on {host.name}: {', '.join(missing)} not found "
                               "(Debian: apt-get install postgresql)")
        tag = new_tag()
        svc = ClusterService(name=name, kind=self.kind, host=host, endpoint=Endpoint(
            "postgres", host.address, 0, {"user": USER, "database": DATABASE}),
            version="", config={}, processes=[])
        try:
            state = make_state_dir(host, tag)
            svc.state_dirs.append((host, state))
            svc.workdir = state
            _Builder(self, svc, host, s, k, tag, state, hosts or {},
                     access or Access()).build()
        except BaseException:
            svc.stop()
            raise
        return svc


class _Builder:
    """One `start`: decides where standbys live and how they reach the primary."""

    def __init__(self, service: PgCluster, svc: ClusterService, host: Host,
                 s: Mapping[str, Any], k: int, tag: str, state: str,
                 hosts: Mapping[str, Host], access: Access) -> None:
        self.service, self.svc, self.host, self.s, self.k = service, svc, host, s, k
        self.tag, self.state, self.hosts, self.access = tag, state, hosts, access
        self.link = PgCluster.link(s) if s["mode"] == "network-cluster" else Link()
        self.emulation, self.rate_by = "none", ""

    def node_conf(self, listen: str) -> dict[str, Any]:
        s = self.s
        return {"listen_addresses": listen, "fsync": s["fsync"],
                "shared_buffers": s["shared_buffers"],
                "max_connections": s["max_connections"], **s["extra"]}

    def build(self) -> None:
        s, host, svc, k = self.s, self.host, self.svc, self.k
        real = bool(s["standby_hosts"]) and s["mode"] == "network-cluster"
        emulated = s["mode"] == "network-cluster" and not real
        # Where each standby runs, and the address the primary must trust it from.
        places: list[tuple[Host, str]] = []  # each standby's host and parent directory
        trust: list[str] = []
        listen = [host.address]
        if s["mode"] == "local-cluster" or (emulated and not s["netns"]):
            places = [(host, self.state)] * k
            if k and s["mode"] == "local-cluster":  # they connect to the host's address
                trust = [_ipv4(host.address)]
        elif emulated:
            require_root(host)
            svc.network = Network(host, self.tag)
            members = [svc.network.add(f"s{i}") for i in range(1, k + 1)]
            places = [(m.host, self.state) for m in members]
            self.emulation = self.choose(members[0].veth if members else "")
            for m in members:
                self.rate_by = svc.network.shape(m, self.link,
                                                 netem=self.emulation == "netem") or ""
            if self.emulation != "relay":
                listen.append(svc.network.address)
                trust = [m.address for m in members]
        elif real:
            for hname in s["standby_hosts"][:k]:
                h = self.hosts.get(hname)
                if h is None:
                    raise ServiceError(f"pg_cluster: standby host {hname!r} is not connected")
                d = make_state_dir(h, self.tag)
                svc.state_dirs.append((h, d))
                places.append((h, d))
                trust.append(_ipv4(h.address))
            if s["primary_address"] and s["primary_address"] not in listen:
                listen.append(s["primary_address"])
        if emulated and not s["netns"] and not self.link.is_null:
            self.emulation = "relay"
        if self.emulation == "relay" and not self.rate_by and self.link.rate_mbit:
            self.rate_by = "relay"

        bins = cluster_binaries(host, s)
        password = new_password()  # every node's: standbys are copies of the primary
        primary = PgNode.create(host, "primary", self.state, bins, password)
        svc.nodes.append(primary)
        primary.initdb()
        allow_hba(host, primary.data, self.access, tuple(trust))
        primary.start({**self.node_conf(",".join(listen)),
                       "synchronous_commit": s["synchronous_commit"],
                       "wal_level": "replica", "max_wal_senders": max(10, 2 * k + 2)})
        svc.processes.append(primary.proc)  # type: ignore[arg-type]
        primary.query(f"CREATE DATABASE {DATABASE}", "postgres")
        svc.endpoint = Endpoint("postgres", host.address, primary.port,
                                {"user": USER, "database": DATABASE},
                                Credentials(USER, password))
        svc.version = primary.query("SHOW server_version", DATABASE).strip()

        names = [f"s{i}" for i in range(1, k + 1)]
        for name, (h, parent) in zip(names, places, strict=True):
            addr, port = self.upstream(h, primary, name)
            node = PgNode.create(h, name, parent, bins if h is host else cluster_binaries(h, s),
                                 password)
            svc.nodes.append(node)
            node.basebackup(addr, port)
            node.start({**self.node_conf(h.address), "hot_standby": True,
                        "primary_conninfo": f"host={addr} port={port} user={USER} "
                                            f"passfile={node.pgpass} "
                                            f"application_name={name}"})
            svc.processes.append(node.proc)  # type: ignore[arg-type]
        sync_names = ""
        if k:
            n_sync = s["sync_standbys"] or k
            sync_names = f"{s['quorum']} {n_sync} ({', '.join(names)})"
            primary.query(f"ALTER SYSTEM SET synchronous_standby_names = '{sync_names}'",
                          DATABASE)
            primary.query("SELECT pg_reload_conf()", DATABASE)
        replication = self.verify(primary, names) if k else []
        svc.config = self.config(primary, sync_names, replication, real)

    def choose(self, dev: str) -> str:
        """netem, relay or none for the namespace links."""
        if self.link.is_null:
            return "none"
        wanted = self.s["emulation"]
        has_netem = bool(dev) and netem_supported(self.host, dev)
        if wanted == "netem" and not has_netem:
            raise ServiceError("pg_cluster: emulation netem requested, but this kernel has "
                               "no netem qdisc ('Specified qdisc kind is unknown'); use "
                               "emulation: auto or relay")
        return "netem" if wanted != "relay" and has_netem else "relay"

    def upstream(self, h: Host, primary: PgNode, name: str) -> tuple[str, int]:
        """Where standby `name` on `h` connects for replication (a relay if emulated)."""
        s, net = self.s, self.svc.network
        if s["mode"] == "local-cluster":
            return self.host.address, primary.port
        if s["standby_hosts"]:
            return s["primary_address"] or self.host.address, primary.port
        addr = net.address if net is not None else self.host.address
        if self.emulation != "relay":
            return addr, primary.port
        link = self.link if self.rate_by == "relay" else Link(
            self.link.delay_ms, self.link.jitter_ms)
        proc, port = start_relay(self.host, listen=addr, target=(self.host.address,
                                 primary.port), link=link, tag=self.tag,
                                 log_path=f"{self.state}/relay-{name}.log", cwd=self.state)
        self.svc.relays.append((self.host, proc))
        self.svc.processes.append(proc)
        return addr, port

    def verify(self, primary: PgNode, names: list[str]) -> list[dict[str, Any]]:
        """Every standby streaming with the expected sync_state; a probe row committed on
        the primary visible on every standby."""
        s, k = self.s, len(names)
        n_sync = s["sync_standbys"] or k
        expect = {n: "quorum" if s["quorum"] == "ANY" else
                  ("sync" if i < n_sync else "potential") for i, n in enumerate(names)}
        sql = ("SELECT application_name, state, sync_state, coalesce(host(client_addr), "
               "'local') FROM pg_stat_replication ORDER BY application_name")
        deadline = time.monotonic() + VERIFY_TIMEOUT_S
        while True:
            rows = [r.split("\t") for r in primary.query(sql, DATABASE).splitlines() if r]
            got = {r[0]: (r[1], r[2]) for r in rows}
            if all(got.get(n) == ("streaming", expect[n]) for n in names):
                break
            if time.monotonic() > deadline:
                raise primary.fail(f"replication not as configured after "
                                   f"{VERIFY_TIMEOUT_S:g} s: expected {expect} streaming, "
                                   f"pg_stat_replication shows {got}")
            time.sleep(0.1)
        primary.query("CREATE TABLE hkv_probe (x int); INSERT INTO hkv_probe VALUES (1)",
                      DATABASE)
        for node in self.svc.nodes[1:]:
            while node.query("SELECT count(*) FROM pg_class WHERE relname = 'hkv_probe'",
                             DATABASE).strip() != "1":
                if time.monotonic() > deadline:
                    raise node.fail("the probe row committed on the primary never arrived")
                time.sleep(0.05)
        primary.query("DROP TABLE hkv_probe", DATABASE)
        # Informational: PostgreSQL shows NULL once a standby has been idle a while.
        lag = ("SELECT application_name, extract(epoch FROM flush_lag) * 1000 "
               "FROM pg_stat_replication")
        lags = dict(r.split("\t") for r in primary.query(lag, DATABASE).splitlines() if r)
        return [{"name": r[0], "state": r[1], "sync_state": r[2], "client_addr": r[3],
                 "flush_lag_ms": float(lags[r[0]]) if lags.get(r[0]) else None}
                for r in rows]

    def config(self, primary: PgNode, sync_names: str, replication: list[dict[str, Any]],
               real: bool) -> dict[str, Any]:
        s, net = self.s, self.svc.network
        shown = ("synchronous_commit", "fsync", "shared_buffers", "max_connections")
        q = "SELECT n, current_setting(n) FROM unnest(ARRAY[{}]) AS n".format(
            ", ".join(f"'{n}'" for n in shown))
        settings = dict(r.split("\t", 1) for r in primary.query(q, DATABASE).splitlines()
                        if "\t" in r)
        emulated = s["mode"] == "network-cluster" and not real
        return {
            **settings,
            "mode": s["mode"], "nodes": self.k + 1, "standbys": self.k,
            "synchronous_standby_names": sync_names, "quorum": s["quorum"],
            "network": "real" if real else ("emulated" if emulated else "loopback"),
            "netns": bool(net), "profile": s["profile"] if emulated else "none",
            "link": self.link.to_dict() if emulated else Link().to_dict(),
            "emulation": self.emulation, "rate_by": self.rate_by,
            "loss_applied": self.emulation == "netem" and self.link.loss_pct > 0,
            "subnet": f"{net.address}/24" if net else None,
            "standby_addresses": [n.host.address for n in self.svc.nodes[1:]],
            "replication": replication,
            "admitted": self.access.cidrs(),  # besides loopback; standbys: replication only
            "auth": AUTH_MODE,
            "binary": binary_record(primary.host, str(primary.bins["postgres"])),
        }


def _ipv4(address: str) -> str:
    """The IPv4 address of a host name (pg_hba trusts exact addresses only)."""
    try:
        return socket.getaddrinfo(address, None, socket.AF_INET)[0][4][0]
    except OSError as exc:
        raise ServiceError(f"pg_cluster: cannot resolve standby host {address!r}: {exc}"
                           ) from exc
