"""Redis Cluster: N masters (each with r replicas) spread over the spec's hosts, and scaling.

Each master is a redis-server in cluster mode on a free port of its host, with its own
directory and log under the host's workdir. Three or more masters are joined with
`redis-cli --cluster create`; redis-cli refuses fewer than three, so one or two masters
get their slots (CLUSTER ADDSLOTS) and meet (CLUSTER MEET) directly. The cache settings
are each master's `maxmemory` and `maxmemory-policy`. With `replicas_per_master: r`
(three masters or more) the cluster has r replicas per master, started and stopped with
it (`harness.services.redis_cluster_replicas`: which replicates which, in the manifest).

Timeline actions (run while clients run, see the spec's `timeline`):
* `add_node` (args: `host`, a spec host name): start a master, `redis-cli --cluster
  add-node`, then `--cluster rebalance --cluster-use-empty-masters` moves slots to it;
* `remove_node` (args: `node`, index into the current masters, default -1): rebalance
  with the node's weight 0 (its slots, and keys, move to the others), `--cluster
  del-node`, and the process is stopped.
Each returns the durations of its phases and the slots moved, for the manifest.

Every node requires the cluster's password, drawn at random for each start
(`requirepass`, and `masterauth` for the nodes among themselves); the kit's probes,
redis-cli (through REDISCLI_AUTH, never an argv) and clients send it.

Its counters (telemetry) are the masters' INFO counters summed; a node added or removed
during a run counts from 0 or is missing from the end, so with a timeline that changes
the masters they describe the masters at each edge, not every command of the run.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.drivers.redis import MAX_SLOT_MAP_BYTES, MAX_SLOT_MAP_ITEMS, RespError, slot_ranges
from harness.errors import HostError, ServiceError
from harness.hosts import Host, Process
from harness.hosts.endpoint import Credentials, TLSConfig, split_hostport
from harness.services import redis_cluster_replicas as cluster_replicas
from harness.services._util import (
    DEFAULT_READY_TIMEOUT_S,
    Launch,
    NotReady,
    ProbeError,
    resolve_checked,
)
from harness.services.attached import attached, not_answering
from harness.services.base import (
    NODE_ACTION_ARGS,
    Endpoint,
    RunningService,
    Service,
    Setting,
    Step,
    check_node_steps,
)
from harness.services.ownbuild import (
    BINARY_SETTING,
    binary_for,
    binary_missing,
    binary_problems,
    binary_record,
)
from harness.services.packages import REDIS_SERVER, REDIS_TOOLS
from harness.services.portpair import free_port_pair
from harness.services.redis import (
    AUTH_MODE,
    GAUGES,
    POLICIES,
    RedisReplyError,
    RespProblem,
    config_text,
    maxmemory_problem,
    redis_command,
    redis_config,
    redis_counters,
    redis_identity,
    redis_ping,
    redis_read,
    redis_version,
)
from harness.services.tlsconf import address_tls

SLOTS = 16384
CLI_TIMEOUT_S = 600.0
_MOVING = re.compile(r"Moving (\d+) slots from")


def cli(host: Host, auth: Credentials | None, *args: str) -> str:
    """redis-cli on `host`, the password in its environment (REDISCLI_AUTH), not argv."""
    env = {"REDISCLI_AUTH": auth.password} if auth is not None else None
    return host.run(["redis-cli", *args], timeout=CLI_TIMEOUT_S, env=env).stdout


@dataclass
class Node:
    host: Host
    address: str
    port: int
    process: Process
    node_id: str = ""

    @property
    def addr(self) -> str:
        return f"{self.address}:{self.port}"


def cluster_info(address: str, port: int, auth: Credentials | None = None
                 ) -> dict[str, str]:
    text = str(redis_command(address, port, "CLUSTER", "INFO", auth=auth))
    return dict(line.split(":", 1) for line in text.split() if ":" in line)


def slot_owners(address: str, port: int, auth: Credentials | None = None,
                tls: TLSConfig | None = None) -> list[tuple[int, int, str]]:
    """(first slot, last slot, master address) as this node sees them, sorted;
    RespProblem where the reply is larger than a slot map or not one (`slot_ranges`)."""
    reply, cut = redis_read(address, port, "CLUSTER", "SLOTS", auth=auth, tls=tls,
                            max_bytes=MAX_SLOT_MAP_BYTES, max_items=MAX_SLOT_MAP_ITEMS)
    if cut:
        raise RespProblem(f"CLUSTER SLOTS answered more than {MAX_SLOT_MAP_BYTES:,} bytes "
                          f"or {MAX_SLOT_MAP_ITEMS:,} items: not a slot map")
    try:
        ranges = slot_ranges(reply)
    except RespError as exc:
        raise RespProblem(str(exc)) from None
    return sorted((a, b, f"{host or address}:{p}") for a, b, (host, p) in ranges)


@dataclass
class RedisClusterService(RunningService):
    """A running cluster; `nodes` are the current masters, in the order they joined."""

    nodes: list[Node] = field(default_factory=list)
    #: Each replica with the master it replicates (`replicas_per_master`).
    replicas: list[tuple[Node, Node]] = field(default_factory=list)
    launches: dict[str, Launch] = field(default_factory=dict)
    hosts: dict[str, Host] = field(default_factory=dict)
    launcher: RedisCluster | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    _next_host: int = 0
    last_host: str = ""
    #: The cluster's password (`endpoint.auth` once it runs).
    auth: Credentials | None = field(default=None, repr=False)

    def info(self) -> dict[str, Any]:
        out = super().info()
        out["nodes"] = [{"host": n.host.name, "address": n.addr, "id": n.node_id}
                        for n in self.nodes]
        out["pids"] = [n.process.pid for n in self.all_nodes()]
        if self.replicas:
            out["replicas"] = cluster_replicas.record(self.replicas)
        return out

    def all_nodes(self) -> list[Node]:
        return [*self.nodes, *(r for r, _ in self.replicas)]

    def alive(self) -> bool:
        return all(n.host.is_alive(n.process) for n in self.all_nodes())

    def server_processes(self) -> list[Process]:
        return [n.process for n in self.all_nodes()]

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for launch in self.launches.values():  # every node ever started, removed ones too
            for proc in reversed(launch.processes):
                with contextlib.suppress(HostError):
                    launch.host.stop(proc)
            launch.host.remove_tree(launch.workdir)

    def scale(self, action: str, args: Mapping[str, Any]) -> dict[str, Any]:
        assert self.launcher is not None
        if action == "add_node":
            return self._add(args)
        if action == "remove_node":
            return self._remove(args)
        return super().scale(action, args)

    def _cli(self, *args: str) -> str:
        return cli(self.host, self.auth, *args)

    def _add(self, args: Mapping[str, Any]) -> dict[str, Any]:
        assert self.launcher is not None
        names = self.settings["hosts"] or [self.host.name]
        hname = args.get("host") or names[self._next_host % len(names)]
        self._next_host += 1
        if hname not in self.hosts:
            raise ServiceError(f"redis_cluster {self.name!r}: add_node: unknown host {hname!r}")
        t0 = time.monotonic()
        node = self.launcher.start_node(self, self.hosts[hname])
        t1 = time.monotonic()
        seed = self.nodes[0]
        self._cli("--cluster", "add-node", node.addr, seed.addr)
        self.nodes.append(node)
        self.launcher.wait_agreed(self, len(self.nodes))
        t2 = time.monotonic()
        out = self._cli("--cluster", "rebalance", seed.addr, "--cluster-use-empty-masters")
        self.launcher.wait_agreed(self, len(self.nodes))
        t3 = time.monotonic()
        return {"node": node.addr, "masters": len(self.nodes),
                "slots_moved": sum(int(m) for m in _MOVING.findall(out)),
                "start_node_s": t1 - t0, "join_s": t2 - t1, "rebalance_s": t3 - t2}

    def _remove(self, args: Mapping[str, Any]) -> dict[str, Any]:
        assert self.launcher is not None
        if len(self.nodes) < 2:
            raise ServiceError(f"redis_cluster {self.name!r}: cannot remove the last master")
        index = int(args.get("node", -1))
        node = self.nodes[index]
        other = next(n for n in self.nodes if n is not node)
        t0 = time.monotonic()
        out = self._cli("--cluster", "rebalance", other.addr,
                        "--cluster-weight", f"{node.node_id}=0")
        self.launcher.wait_agreed(self, len(self.nodes))
        t1 = time.monotonic()
        self._cli("--cluster", "del-node", other.addr, node.node_id)
        self.nodes.remove(node)
        self.launcher.wait_agreed(self, len(self.nodes))
        node.host.stop(node.process)
        t2 = time.monotonic()
        return {"node": node.addr, "masters": len(self.nodes),
                "slots_moved": sum(int(m) for m in _MOVING.findall(out)),
                "reshard_s": t1 - t0, "del_node_s": t2 - t1}


class RedisCluster(Service):
    kind = "redis_cluster"
    binaries = ("redis-server", "redis-cli")
    packages = (REDIS_SERVER, REDIS_TOOLS)
    needs_hosts = True
    actions = ("add_node", "remove_node")
    action_args = NODE_ACTION_ARGS
    gauges = GAUGES
    settings: Mapping[str, Setting] = {
        "masters": Setting((int,), 3, "master nodes at the start", low=1,
                           high=1000, why="each a server process; Redis Cluster's "
                                          "documented size"),
        "replicas_per_master": cluster_replicas.SETTING,
        "maxmemory": Setting((str, int), "0",
                             "each master's memory limit, the cache size, e.g. '64mb'; "
                             "'0' means unlimited", low=0),
        "policy": Setting((str,), "noeviction", "maxmemory-policy: what to evict at "
                          "maxmemory", choices=POLICIES),
        "hosts": Setting((list, type(None)), None,
                         "spec host names to spread the masters over (round robin); "
                         "default: the service's host"),
        "node_timeout_ms": Setting((int,), 5000, "cluster-node-timeout", low=1,
                                   high=86_400_000, why="a day"),
        "provides": Setting((str,), "kvstore", "the kind workloads find it under"),
        "binary": BINARY_SETTING,
    }

    def missing_binaries(self, host: Host, settings: Mapping[str, Any] | None = None
                         ) -> list[str]:
        """redis-server (the `binary` setting's, or on PATH) and redis-cli."""
        server = binary_missing(host, binary_for(settings or {}, host, "redis-server"))
        return [m for m in (server, None if host.which("redis-cli") else "redis-cli") if m]

    def __init__(self, ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S) -> None:
        self.ready_timeout_s = ready_timeout_s

    def provides(self, settings: Mapping[str, Any]) -> str:
        return str(settings.get("provides") or "kvstore")

    def validate(self, settings: Mapping[str, Any], *, name: str = "",
                 behind: Sequence[str] = ()) -> list[str]:
        s = self.resolve(settings)
        problem = maxmemory_problem(s["maxmemory"])
        return (([problem] if problem else []) + binary_problems(s["binary"])
                + cluster_replicas.problems(s))

    def check_steps(self, name: str, host: str, settings: Mapping[str, Any],
                    steps: list[Step]) -> list[tuple[Step, str, str]]:
        return (check_node_steps(name, settings["masters"], list(settings["hosts"] or [host]),
                                 steps) + cluster_replicas.step_problems(settings, steps))

    def start(self, host: Host, name: str, settings: Mapping[str, Any], *,
              hosts: Mapping[str, Host] | None = None) -> RunningService:
        s = resolve_checked(self, settings)
        if s["masters"] < 1:
            raise ServiceError(f"redis_cluster {name!r}: masters must be at least 1")
        known = {host.name: host, **(hosts or {})}
        names = s["hosts"] or [host.name]
        missing = [h for h in names if h not in known]
        if missing:
            raise ServiceError(f"redis_cluster {name!r}: hosts {missing} are not connected "
                               f"(known: {sorted(known)})")
        launch = Launch(host, self.kind, name)
        r = s["replicas_per_master"]
        svc = RedisClusterService(
            name=name, kind=self.kind, host=host,
            endpoint=Endpoint(self.provides(s), host.address, 0), version="", config={},
            processes=[], workdir=None, launches={host.name: launch}, hosts=dict(known),
            launcher=self, settings=s, _next_host=s["masters"] * (1 + r),
            auth=Credentials(None, secrets.token_urlsafe(24)))
        try:
            for i in range(s["masters"] * (1 + r)):
                svc.nodes.append(self.start_node(svc, known[names[i % len(names)]]))
            self._create(svc)
            self.wait_agreed(svc, len(svc.nodes))
            if r:
                cluster_replicas.assign(svc, r, self.ready_timeout_s)
                cluster_replicas.wait_synced(svc.replicas, svc.auth, redis_read,
                                             self.ready_timeout_s, name)
            first = svc.nodes[0]
            svc.version = redis_version(first.address, first.port, svc.auth)
            svc.config = {**redis_config(first.address, first.port,
                                         ["maxmemory", "maxmemory-policy", "appendonly",
                                          "save", "cluster-node-timeout", "bind",
                                          "protected-mode"], svc.auth),
                          "masters": s["masters"], "hosts": names, "auth": AUTH_MODE,
                          "replicas_per_master": r,
                          "replicas": cluster_replicas.record(svc.replicas),
                          "binary": binary_record(host, binary_for(s, host, "redis-server"))}
        except BaseException as exc:
            # Read the failing node's log before cleanup removes it, then stop every node
            # on every host (one Launch per host).
            error = None
            if isinstance(exc, (HostError, OSError, ProbeError)):
                error = svc.launches[svc.last_host].fail(f"could not start: {exc}")
            svc.stop()
            if error is not None:
                raise error from exc
            raise
        svc.endpoint = Endpoint(self.provides(s), first.address, first.port, {
            "protocol": "redis_cluster", "nodes": [n.addr for n in svc.nodes]}, svc.auth)
        return svc

    attachable = True
    address_settings = ("provides", "tls")

    def attach(self, host: Host, spec: Any, creds: Any) -> RunningService:
        """A cluster at an address (`spec.address` is any node): the masters from its
        slot map, each asked as after a start."""
        address, port = split_hostport(spec.address)
        tls = address_tls(spec)
        version, config = redis_identity(spec, address, port, creds, tls)
        try:
            owners = slot_owners(address, port, creds, tls)
        except (OSError, RedisReplyError, ProbeError) as exc:
            raise not_answering(spec, "no cluster slot map", exc,
                                "is it a Redis Cluster node (cluster-enabled yes)? For a "
                                "standalone Redis use kind redis") from None
        nodes = sorted({o for _, _, o in owners})
        replicas = cluster_replicas.found(address, port, creds, tls, redis_read)
        return attached(host, spec, self.kind, self.provides(spec.settings), version,
                        {**config, "masters": len(nodes), "replicas": replicas}, creds,
                        {"protocol": "redis_cluster", "nodes": nodes}, tls)

    def counters(self, svc: RunningService) -> dict[str, float]:
        """Every master's `redis_counters`, summed (see the module's note on scaling)."""
        total: dict[str, float] = {}
        nodes = [(n.address, n.port) for n in getattr(svc, "nodes", [])] or [
            split_hostport(a) for a in svc.endpoint.extra.get("nodes", [])]
        for address, port in nodes:
            for k, v in redis_counters(address, port, svc.endpoint.auth,
                                       svc.endpoint.tls).items():
                total[k] = total.get(k, 0) + v
        return cluster_replicas.counters(svc, total, redis_counters)

    def replication(self, svc: RunningService) -> dict[str, Any] | None:
        """Each master's replicas against it (`redis_cluster_replicas.state`)."""
        return cluster_replicas.state(svc, redis_read)

    def start_node(self, svc: RedisClusterService, host: Host) -> Node:
        """Start one cluster-mode redis-server on `host` and wait until it answers."""
        launch = svc.launches.get(host.name)
        if launch is None:
            launch = svc.launches[host.name] = Launch(host, self.kind, svc.name)
        s = svc.settings
        port = free_port_pair(host)
        ndir = f"{launch.workdir}/node-{port}"
        host.run(["mkdir", "-p", ndir])
        conf = {
            "bind": host.address, "port": port, "dir": [ndir], "daemonize": "no",
            "protected-mode": "yes", "cluster-enabled": "yes",
            "cluster-config-file": "nodes.conf",
            "cluster-node-timeout": s["node_timeout_ms"], "maxmemory": s["maxmemory"],
            "maxmemory-policy": s["policy"], "appendonly": "no", "save": "",
            **({"requirepass": [svc.auth.password], "masterauth": [svc.auth.password]}
               if svc.auth else {}),
        }
        host.run(["sh", "-c", 'umask 077; cat > "$1"', "sh", f"{ndir}.conf"],
                 input=config_text(conf))
        argv = [binary_for(s, host, "redis-server"), f"{ndir}.conf"]
        # One log per node; `fail()` shows the tail of the node being started.
        launch.log_path = f"{ndir}.log"
        svc.last_host = host.name
        proc = launch.start(argv)
        node = Node(host, host.address, port, proc)
        launch.wait_until_ready(proc, lambda: redis_ping(host.address, port, svc.auth),
                                timeout_s=self.ready_timeout_s)
        node.node_id = str(redis_command(host.address, port, "CLUSTER", "MYID",
                                         auth=svc.auth))
        return node

    def _create(self, svc: RedisClusterService) -> None:
        nodes = svc.nodes
        auth = svc.auth
        if len(nodes) >= 3:
            cli(svc.host, auth, "--cluster", "create", *(n.addr for n in nodes),
                "--cluster-replicas", str(svc.settings["replicas_per_master"]),
                "--cluster-yes")
            return
        for i, n in enumerate(nodes):
            slots = range(i * SLOTS // len(nodes), (i + 1) * SLOTS // len(nodes))
            redis_command(n.address, n.port, "CLUSTER", "ADDSLOTS", *map(str, slots),
                          auth=auth)
            redis_command(n.address, n.port, "CLUSTER", "SET-CONFIG-EPOCH", str(i + 1),
                          auth=auth)
        for n in nodes[1:]:
            redis_command(nodes[0].address, nodes[0].port, "CLUSTER", "MEET", n.address,
                          str(n.port), auth=auth)

    def wait_agreed(self, svc: RedisClusterService, count: int) -> None:
        """Until every node knows `count` nodes, is `ok`, and all see one slot map."""
        deadline = time.monotonic() + self.ready_timeout_s
        last = ""
        while True:
            try:
                maps = []
                for n in svc.nodes:
                    info = cluster_info(n.address, n.port, svc.auth)
                    if info.get("cluster_state") != "ok" or \
                            int(info.get("cluster_known_nodes", 0)) != count:
                        raise NotReady(f"{n.addr}: {info.get('cluster_state')}, knows "
                                       f"{info.get('cluster_known_nodes')} of {count} nodes")
                    maps.append(slot_owners(n.address, n.port, svc.auth))
                if all(m == maps[0] for m in maps) and \
                        sum(b - a + 1 for a, b, _ in maps[0]) == SLOTS:
                    return
                last = "nodes disagree about the slot map"
            except (OSError, NotReady, RedisReplyError) as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                raise ServiceError(f"redis_cluster {svc.name!r}: not consistent after "
                                   f"{self.ready_timeout_s:g} s: {last}")
            time.sleep(0.1)
