"""A Redis Cluster's replicas (`replicas_per_master: r`): which node replicates which
master, when they are synced, their counters, and their replication state at a run's edges.

The launcher starts masters x (1 + r) nodes and `redis-cli --cluster create
--cluster-replicas r` decides which are masters; `split_roles` reads the answer from
CLUSTER NODES. The start returns once every replica's link to its master is up with no
sync in progress and every master lists its r replicas (`wait_synced`, polling INFO
replication). Adding or removing nodes while the cluster has replicas is not supported
(`STEP_REFUSAL`): `--cluster rebalance` moves slots between masters only, and a removed
master's replicas would be left behind. A cluster at an address has its replicas from
its CLUSTER NODES (`found`). Either way the manifest's `config.replicas` lists each
replica and its master, and the counters (`replica<i>.`) and the replication state are
read from that list.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

from harness.drivers.redis import MAX_SLOT_MAP_BYTES, RespError, parse_info
from harness.drivers.redis_nodes import layout
from harness.errors import ServiceError
from harness.hosts.endpoint import Endpoint, split_hostport
from harness.services import redis_replicas
from harness.services._util import NotReady, ProbeError
from harness.services.base import Step
from harness.services.redis import redis_command
from harness.settings import Setting

#: `redis-cli --cluster create --cluster-replicas r`, r of these.
MAX_REPLICAS_PER_MASTER = 2
SETTING = Setting((int,), 0, "replicas of each master, started beside the masters and "
                  "assigned by redis-cli --cluster create --cluster-replicas", low=0,
                  high=MAX_REPLICAS_PER_MASTER, why="each a server process per master")
STEP_REFUSAL = ("replicas_per_master: add_node/remove_node are not supported on a cluster "
                "with replicas (rebalance moves masters' slots only); set "
                "replicas_per_master: 0 to scale")


def problems(settings: Mapping[str, Any]) -> list[str]:
    """Why `replicas_per_master` cannot be used with these settings (no prefix)."""
    r, masters = settings.get("replicas_per_master") or 0, settings.get("masters")
    if isinstance(r, int) and r > 0 and isinstance(masters, int) and masters < 3:
        return [f"replicas_per_master: {r} needs masters: 3 or more (redis-cli --cluster "
                f"create assigns the replicas; masters is {masters})"]
    return []


def step_problems(settings: Mapping[str, Any], steps: list[Step]
                  ) -> list[tuple[Step, str, str]]:
    """Scaling steps refused on a cluster with replicas."""
    if not settings.get("replicas_per_master"):
        return []
    return [(s, "action", STEP_REFUSAL) for s in steps
            if s.action in ("add_node", "remove_node")]


def cluster_nodes(text: str) -> list[dict[str, str]]:
    """CLUSTER NODES' lines: id, address (host:port, without the bus port), flags, and
    the master's id for a replica ('' for a master)."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        addr = parts[1].split("@", 1)[0].split(",", 1)[0]
        out.append({"id": parts[0], "address": addr, "flags": parts[2],
                    "master": "" if parts[3] == "-" else parts[3]})
    return out


def split_roles(nodes: list[Any], text: str, replicas_per_master: int
                ) -> tuple[list[Any], list[tuple[Any, Any]]]:
    """The started `nodes` (each with `node_id`) as (masters in start order, [(replica,
    its master)]) from CLUSTER NODES `text`; ServiceError unless each master has its
    replicas."""
    by_id = {n.node_id: n for n in nodes}
    lines = {e["id"]: e for e in cluster_nodes(text)}
    masters = [n for n in nodes if "master" in lines.get(n.node_id, {}).get("flags", "")]
    pairs = [(n, by_id.get(lines[n.node_id]["master"])) for n in nodes
             if n.node_id in lines and "slave" in lines[n.node_id]["flags"]]
    counts = {m.node_id: sum(1 for _, o in pairs if o is m) for m in masters}
    if len(masters) + len(pairs) != len(nodes) or None in (o for _, o in pairs) or any(
            c != replicas_per_master for c in counts.values()):
        raise ServiceError(f"redis-cli --cluster create made {len(masters)} masters and "
                           f"{len(pairs)} replicas of {len(nodes)} nodes, not "
                           f"{replicas_per_master} replicas per master")
    return masters, pairs


def assign(svc: Any, replicas_per_master: int, timeout_s: float) -> None:
    """Split the started `svc.nodes` into masters (`svc.nodes`, in start order) and
    `svc.replicas` (replica, its master) once the first node's CLUSTER NODES shows every
    replica's master (polled: roles reach it by gossip)."""
    deadline = time.monotonic() + timeout_s
    first = svc.nodes[0]
    while True:
        text = str(redis_command(first.address, first.port, "CLUSTER", "NODES",
                                 auth=svc.auth))
        try:
            svc.nodes, svc.replicas = split_roles(svc.nodes, text, replicas_per_master)
            return
        except ServiceError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def wait_synced(pairs: list[tuple[Any, Any]], auth: Any, read: Callable[..., Any],
                timeout_s: float, name: str) -> None:
    """Until every replica's link to its master is up with no sync in progress, and each
    master counts its replicas connected (INFO replication, polled)."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        try:
            for replica, _ in pairs:
                info = _info(read, replica.address, replica.port, auth, None)
                if info.get("master_link_status") != "up" or \
                        info.get("master_sync_in_progress") not in (0, "0"):
                    raise NotReady(f"replica {replica.addr}: link "
                                   f"{info.get('master_link_status')}, sync in progress "
                                   f"{info.get('master_sync_in_progress')}")
            for master in {id(m): m for _, m in pairs}.values():
                want = sum(1 for _, m in pairs if m is master)
                got = _info(read, master.address, master.port, auth, None)
                if got.get("connected_slaves") != want:
                    raise NotReady(f"master {master.addr}: {got.get('connected_slaves')} "
                                   f"of {want} replicas connected")
            return
        except (OSError, NotReady, ProbeError) as exc:
            last = str(exc)
        if time.monotonic() > deadline:
            raise ServiceError(f"redis_cluster {name!r}: replicas not in sync after "
                               f"{timeout_s:g} s: {last}")
        time.sleep(0.1)


def _info(read: Callable[..., Any], host: str, port: int, auth: Any, tls: Any
          ) -> dict[str, Any]:
    reply, _ = read(host, port, "INFO", "replication", auth=auth, tls=tls)
    if not isinstance(reply, str):
        raise ProbeError(f"INFO answered {type(reply).__name__}, not text")
    return dict(parse_info(reply))


def record(pairs: list[tuple[Any, Any]]) -> list[dict[str, str]]:
    """The manifest's entry: each replica, its host and the master it replicates."""
    return [{"address": r.addr, "host": r.host.name, "id": r.node_id, "master": m.addr}
            for r, m in pairs]


def found(address: str, port: int, auth: Any, tls: Any, read: Callable[..., Any]
          ) -> list[dict[str, str]]:
    """A cluster at an address: each replica its CLUSTER NODES names and its master
    ([] where it answers no layout: the slot map already said it is a cluster)."""
    try:
        text, cut = read(address, port, "CLUSTER", "NODES", auth=auth, tls=tls,
                         max_bytes=MAX_SLOT_MAP_BYTES)
        found = layout(text, address) if isinstance(text, str) and not cut else None
    except (OSError, ProbeError, RespError):
        found = None
    if found is None:
        return []
    return [{"address": r, "master": m} for m, reps in zip(found.masters, found.replicas,
                                                             strict=True) for r in reps]


def replica_addresses(svc: Any) -> list[tuple[str, str]]:
    """(replica, its master) as the manifest's `config.replicas` lists them."""
    listed = (getattr(svc, "config", None) or {}).get("replicas") or []
    return [(str(r["address"]), str(r["master"])) for r in listed
            if isinstance(r, Mapping) and "address" in r and "master" in r]


def counters(svc: Any, total: dict[str, float], read: Callable[..., Mapping[str, float]]
             ) -> dict[str, float]:
    """`total` (the masters') with each replica's counters as `replica<i>.<name>` (i: its
    place in `config.replicas`), each read with `read(host, port, auth, tls)`."""
    ep = svc.endpoint
    for i, (replica, _) in enumerate(replica_addresses(svc)):
        got = read(*split_hostport(replica), ep.auth, ep.tls)
        total.update((f"replica{i}.{k}", v) for k, v in got.items())
    return total


def state(svc: Any, read: Callable[..., Any]) -> dict[str, Any] | None:
    """Each master's replication state with its replicas (`redis_replicas.state`), as
    `shards`; None without replicas."""
    pairs = replica_addresses(svc)
    if not pairs:
        return None
    ep = svc.endpoint
    shards = []
    for master in dict.fromkeys(m for _, m in pairs):
        host, port = split_hostport(master)
        one = SimpleNamespace(endpoint=Endpoint(ep.kind, host, port, {
            "replicas": [r for r, m in pairs if m == master]}, ep.auth, ep.tls))
        got = redis_replicas.state(one, read)
        if got is not None:
            shards.append(got)
    return {"shards": shards}
