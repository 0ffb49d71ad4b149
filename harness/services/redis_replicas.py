"""A Redis primary's replicas: started beside it (`replicas: N`, each a redis-server
with `replicaof` the primary) or found at their addresses (beside `address:`,
`replicas: [HOST:PORT, ...]`); where clients reach them (the endpoint's `replicas`),
their counters apart from the primary's, and the replication state a run's telemetry
reads at its edges.

    services:
      kv: {kind: redis, settings: {replicas: 2}}            # the kit's: a primary and two
      cache: {kind: redis, address: "10.0.0.5:6379",        # a user's, and its replicas
              settings: {replicas: ["10.0.0.6:6379", "10.0.0.7:6379"]}}

Launched replicas run on the primary's machine, in its work directory (one stop, one
clean-up, one entry per process in the run's state file), with its password as their
`requirepass` and `masterauth`; the start waits until each one's link to the primary is
up. A replica at an address must answer with the primary's credentials (and TLS) and
share its replication ID (`master_replid`): it is a replica of that primary, synced.

The state at an edge (`state`): the primary's `master_repl_offset`, and per
replica its role, link, `slave_repl_offset`, how many bytes it is behind the primary's
offset read just before it, and its `lag` (seconds since its last acknowledgement, as
the primary lists it). The check `replica_lag` (`harness.analysis.checks.registry`)
reads these from the manifest.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.drivers.redis import parse_info
from harness.drivers.replies import Reading
from harness.errors import ServiceError
from harness.hosts import Host
from harness.hosts.endpoint import Credentials, Endpoint, TLSConfig, split_hostport
from harness.services._util import Launch, NotReady, ProbeError, resolve_checked
from harness.services.attached import AttachedService, not_answering
from harness.services.base import RunningService
from harness.services.ownbuild import binary_for, binary_record
from harness.settings import Setting

#: `harness.services.redis.redis_read`: (address, port, *command, auth=, tls=) -> (its
#: decoded reply, whether it was cut at the bounds); passed in, as that module imports
#: this one.
Read = Callable[..., tuple[Any, bool]]

#: Replicas the kit starts beside one primary, each a redis-server on its machine.
MAX_REPLICAS = 16
#: Replicas named at an address: the native core keeps a socket per server in each
#: connection, 255 at most, the primary's one of them.
MAX_REPLICA_ADDRESSES = 254
REPLICAS_SETTING = Setting(
    (int, list), 0, "replicas of the primary: N started beside it on its machine "
    "(replicaof), or, at an address, the replicas' HOST:PORT addresses", low=0,
    high=MAX_REPLICAS, why="each a redis-server on the primary's machine")
#: A replica line of the primary's INFO replication: slave0:ip=...,port=...,state=...
_REPLICA_LINE = re.compile(r"^slave[0-9]+$")
_ADDRESS = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})$")


def problems(value: Any, tls: Any) -> list[str]:
    """Why a `replicas` value cannot be used (messages without a prefix); its bounds
    as a number are its Setting's."""
    if isinstance(value, list):
        bad = [a for a in value if not isinstance(a, str) or not _ADDRESS.match(a)
               or not 0 < int(_ADDRESS.match(a).group(2)) < 65536]  # type: ignore[union-attr]
        if bad:
            return [f"replicas: {bad[0]!r} is not HOST:PORT (a list names the replicas of a "
                    "Redis at an address; the kit starts `replicas: N`)"]
        if not value or len(value) > MAX_REPLICA_ADDRESSES or len(set(value)) < len(value):
            return [f"replicas: expected 1 to {MAX_REPLICA_ADDRESSES} different addresses"]
        return []
    if isinstance(value, int) and value > 0 and tls is True:
        return ["replicas: not with tls: true yet (each start makes its own CA, and the "
                "replicas would need the primary's); measure TLS without replicas"]
    return []


def replica_addresses(endpoint: Endpoint) -> list[str]:
    """The HOST:PORT of each replica of the primary at `endpoint` (none: [])."""
    return [str(a) for a in endpoint.extra.get("replicas") or ()]


def _info(read: Read, address: str, port: int, auth: Credentials | None,
          tls: TLSConfig | None) -> Reading:
    text, cut = read(address, port, "INFO", "server", "replication", auth=auth, tls=tls)
    if not isinstance(text, str):
        raise ProbeError(f"INFO answered {type(text).__name__}, not text")
    info = parse_info(text)
    if cut:
        info.cut.insert(0, "INFO server replication cut at its bounds")
    return info


def _linked(read: Read, endpoint: Endpoint) -> None:
    """Return once the replica at `endpoint` is synced with its primary (NotReady until
    then: loading, syncing, its link not up yet)."""
    info = _info(read, endpoint.host, endpoint.port, endpoint.auth, endpoint.tls)
    if info.get("master_link_status") != "up" or info.get("master_sync_in_progress"):
        raise NotReady(f"replica link {info.get('master_link_status', '?')}")


@dataclass
class ReplicatedRedis(RunningService):
    """A primary and the replicas the kit started beside it, in its work directory."""

    #: Each replica's endpoint, version and configuration, in the order they started.
    replicas: list[RunningService] = field(default_factory=list)

    def info(self) -> dict[str, Any]:
        out = super().info()
        out["replicas"] = [{"address": f"{r.endpoint.host}:{r.endpoint.port}",
                            "version": r.version, "config": r.config,
                            "pids": [p.pid for p in r.processes]} for r in self.replicas]
        return out


@dataclass(frozen=True)
class _Dir:
    """Where `Redis.argv` writes a server's redis.conf and data (a `Launch`'s fields)."""

    host: Host
    workdir: str


def start(redis: Any, host: Host, name: str, settings: Mapping[str, Any], read: Read
          ) -> RunningService:
    """The primary (`redis`: the `Redis` launcher), then `replicas` replicas of it on
    the same machine, each started once the one before it is synced; the whole set
    undone if any fails."""
    s = resolve_checked(redis, settings)
    if isinstance(s["replicas"], list):
        raise ServiceError(f"redis {name!r}: replicas lists addresses for a Redis at an "
                           "address; the kit starts `replicas: N`")
    with Launch(host, redis.kind, name) as launch:
        primary = _start_one(redis, launch, s, "redis", None, read)
        replicas = [_start_one(redis, launch, s, f"replica-{i}", primary, read)
                    for i in range(int(s["replicas"]))]
        endpoint = dataclasses.replace(primary.endpoint, extra={
            **primary.endpoint.extra,
            "replicas": [f"{r.endpoint.host}:{r.endpoint.port}" for r in replicas]})
        config = {**primary.config, "replicas": len(replicas)}
        return ReplicatedRedis(
            name=name, kind=redis.kind, host=host, endpoint=endpoint,
            version=primary.version, config=config, processes=list(launch.processes),
            workdir=launch.workdir, replicas=replicas)


def _start_one(redis: Any, launch: Launch, s: Mapping[str, Any], what: str,
               primary: RunningService | None, read: Read) -> RunningService:
    """One redis-server in its own directory of the launch's: the primary (None), or a
    replica of `primary` with its password."""
    host = launch.host
    workdir = f"{launch.workdir}/{what}"
    host.run(["mkdir", "-p", workdir])
    endpoint = Endpoint(kind=redis.kind, host=host.address, port=host.free_port(),
                        auth=primary.endpoint.auth if primary else redis.credentials())
    conf = dict(s)
    if primary is not None:  # in its redis.conf only: `describe` below is given `s`
        ep = primary.endpoint
        conf["extra"] = {**s["extra"], "replicaof": [ep.host, str(ep.port)],
                         **({"masterauth": [ep.auth.password]} if ep.auth else {})}
    argv = redis.argv(host, _Dir(host, workdir), endpoint, conf)
    argv[0] = binary_for(s, host, argv[0])
    launch.log_path = f"{workdir}/redis.log"  # `fail` shows this one's log
    proc = host.start(argv, log_path=launch.log_path, cwd=workdir)
    launch.processes.append(proc)

    def ready() -> None:
        redis.probe(endpoint)
        if primary is not None:
            _linked(read, endpoint)

    launch.wait_until_ready(proc, ready, timeout_s=redis.ready_timeout_s)
    version, config = redis.describe(endpoint, s)
    config["binary"] = binary_record(host, argv[0])
    return RunningService(name=what, kind=redis.kind, host=host, endpoint=endpoint,
                          version=version, config=config, processes=[proc])


def attach(spec: Any, svc: AttachedService, creds: Credentials | None,
           tls: TLSConfig | None, read: Read) -> AttachedService:
    """The primary at `spec.address` with the replicas its `replicas` setting lists:
    each answers with the primary's credentials and TLS, is a replica, and shares the
    primary's replication ID; ServiceError in one line naming the one that does not."""
    listed = spec.settings.get("replicas") or []
    if not isinstance(listed, list):
        raise ServiceError(f"services.{spec.name}.settings.replicas: at an address, list "
                           "the replicas' HOST:PORT addresses (the kit starts none there)")
    if not listed:
        return svc
    ep = svc.endpoint
    try:
        replid = _info(read, ep.host, ep.port, creds, tls).get("master_replid")
    except (OSError, ProbeError) as exc:
        raise not_answering(spec, "no answer to INFO replication", exc,
                            "the user needs INFO") from None
    found = []
    for address in listed:
        host, port = split_hostport(address)
        try:
            info = _info(read, host, port, creds, tls)
        except (OSError, ProbeError) as exc:
            raise ServiceError(f"services.{spec.name}.settings.replicas: {address}: no "
                               f"answer ({exc}); check the address, and that it takes the "
                               "primary's user and password (and TLS)") from None
        if info.get("role") != "slave":
            raise ServiceError(f"services.{spec.name}.settings.replicas: {address} is no "
                               f"replica (role: {info.get('role', '?')}); list the "
                               "primary's replicas there")
        if info.get("master_replid") != replid:
            raise ServiceError(
                f"services.{spec.name}.settings.replicas: {address} is not a synced "
                f"replica of {spec.address} (link {info.get('master_link_status', '?')}, "
                "another replication ID): name the primary's own replicas, once synced")
        found.append({"address": address, "master": f"{info.get('master_host')}:"
                                                    f"{info.get('master_port')}"})
    svc.endpoint = dataclasses.replace(ep, extra={**ep.extra, "replicas": list(listed)})
    svc.config = {**svc.config, "replicas": found}
    return svc


def counters(svc: RunningService, read: Callable[..., Reading]) -> Reading:
    """The primary's counters with each replica's beside them, as `replica<i>.<name>`
    (i: its place in the endpoint's `replicas`), each read with `read(host, port, auth,
    tls)` (`redis.redis_counters`). A replica that does not answer is said in the
    reading's notes, its counters left out."""
    ep = svc.endpoint
    out = read(ep.host, ep.port, ep.auth, ep.tls)
    for i, address in enumerate(replica_addresses(ep)):
        host, port = split_hostport(address)
        try:
            got = read(host, port, ep.auth, ep.tls)
        except (OSError, ProbeError) as exc:
            out.cut.append(f"replica {address}: counters not read ({exc})")
            continue
        out.update((f"replica{i}.{k}", v) for k, v in got.items())
        out.cut += [f"replica {address}: {c}" for c in got.cut]
    return out


def _listed(info: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The replicas the primary's INFO replication lists (`slaveN:ip=..,port=..,...`):
    ip and state as text, port, offset and lag as ints (None where not one)."""
    out = []
    for name, value in info.items():
        if _REPLICA_LINE.match(name) and isinstance(value, str):
            fields = dict(item.partition("=")[::2] for item in value.split(","))
            entry: dict[str, Any] = {k: fields.get(k, "") for k in ("ip", "state")}
            entry.update((k, _int(fields.get(k, ""))) for k in ("port", "offset", "lag"))
            out.append(entry)
    return out


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _match(listed: list[dict[str, Any]], host: str, ports: list[Any]) -> dict[str, Any] | None:
    """The primary's line of the replica at `host` and the first of `ports` (the one
    dialed, then the one it says it listens on: a proxy's or a NAT's differs): by
    address, or by port alone where one line has it."""
    for port in ports:
        exact = [e for e in listed if e.get("ip") == host and e.get("port") == port]
        by_port = [e for e in listed if e.get("port") == port]
        if len(exact) == 1 or len(by_port) == 1:
            return (exact or by_port)[0]
    return None


def state(svc: RunningService, read: Read) -> dict[str, Any] | None:
    """The primary's replication offset and each replica's, now (None: no replicas).
    The primary is read first, so a replica's `behind_bytes` never counts what the
    primary took after its own reading; a replica that does not answer is `link: not
    answering` with the error. Each carries the `run_id` of the server that answered: an
    address whose two readings differ reached two servers (one restarted, or a proxy
    spreading connections over several)."""
    ep = svc.endpoint
    addresses = replica_addresses(ep)
    if not addresses:
        return None
    primary = _info(read, ep.host, ep.port, ep.auth, ep.tls)
    offset, own = primary.get("master_repl_offset"), None
    listed = _listed(primary)
    replicas = []
    for address in addresses:
        host, port = split_hostport(address)
        entry: dict[str, Any] = {"address": address}
        try:
            info = _info(read, host, port, ep.auth, ep.tls)
        except (OSError, ProbeError) as exc:
            entry.update(link="not answering", error=f"{type(exc).__name__}: {exc}"[:200])
        else:
            got, own = info.get("slave_repl_offset"), info.get("tcp_port")
            entry.update(role=info.get("role"), link=info.get("master_link_status", "none"),
                         offset=got, run_id=info.get("run_id"))
            if isinstance(got, int) and isinstance(offset, int):
                entry["behind_bytes"] = max(0, offset - got)
        line = _match(listed, host, [port, own])
        if line is not None:
            entry.update(state=line.get("state"), lag_s=line.get("lag"))
        replicas.append(entry)
    return {"primary": f"{ep.host}:{ep.port}", "run_id": primary.get("run_id"),
            "offset": offset, "connected_replicas": primary.get("connected_slaves"),
            "replicas": replicas}

