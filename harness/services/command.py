"""`command`: any server, started from a command template on the spec's hosts.

For servers the harness has no launcher for, such as a course project's KV server:

    command: "java -jar server.jar -p {port} -c {cache_size} -s {strategy} -d {data_dir}"

The template is split with shlex first and each word formatted afterwards, so every
placeholder's value stays ONE argument (a path with spaces included) and no shell is
involved. Placeholders: {host} (the address to listen on), {port} (a free port),
{port2} (another, for a stats or admin listener),
{index} (0, 1, ... per server), {data_dir} (an empty directory per server), {workdir},
{cache_size}, {strategy}, {name}, {python} (the host's interpreter that imports the
harness), {kit} (the directory holding that harness package: the checkout, for an
editable install), and any name under `vars`. `servers` copies are started, spread
round robin over `hosts`, each with its own log, and each must pass the `ready` probe:
`tcp` (it accepts a connection) or `line` (it answers a line, after `ready_send` if set).

A proxy in front of other services (nutcracker over memcached, pgbouncer before
PostgreSQL): `after: [OTHER, ...]` in the spec starts those first and stops them after
it, and they serve it, not the workload; its templates, and the `files` written into its
work directory before each server starts (`files: {NAME: TEMPLATE}`), may name them:
{services.OTHER.address} (host:port of its first endpoint), .host, .port, .endpoints
(every node, host:port,...), and for the proxy's own configuration .user, .password and
.database (a kit's server's random password: the proxy must log in to it). With
`protocol: memcache | redis | postgres | http` and `provides:` a kind, workloads use the
proxy as they would that server; a postgres or redis proxy takes the user, database and
password of the service behind it of that kind, as its clients log in with them; behind a
postgres one they speak unnamed statements, and the manifest records what the proxy is
in front of and its pooling (`harness.services.pg_remote.statements`). Literal braces in
a template are doubled: {{ and }}.

Membership hooks (ECS-like commands run on the service's host, same placeholders plus
{members}, the servers before the change as `host:port,...`, and {node}):
`setup` once all servers are ready; `add` after a server was started by the timeline
action `add_node`; `remove` before the server is stopped by `remove_node`. The reference
server's ECS (examples/kvserver/ecs.py) is such a hook.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import socket
import string
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

from harness.errors import HostError, ServiceError
from harness.hosts import Host, Process
from harness.services import pg_remote
from harness.services._util import (
    DEFAULT_READY_TIMEOUT_S,
    Launch,
    NotReady,
    ProbeError,
    resolve_checked,
)
from harness.services.base import (
    NODE_ACTION_ARGS,
    Endpoint,
    RunningService,
    Service,
    Setting,
    Step,
    check_node_steps,
)

HOOK_TIMEOUT_S = 600.0
#: What workloads may speak to a command service.
PROTOCOLS = ("kvtext", "memcache", "redis", "postgres", "http")
_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
#: What a template may read of a service it is in front of: {services.NAME.FIELD}.
SERVICE_FIELDS = ("address", "host", "port", "endpoints", "user", "password", "database")
_KIT = "import harness, os; print(os.path.dirname(os.path.dirname(harness.__file__)))"
BASE_FIELDS = ("host", "port", "port2", "index", "data_dir", "workdir", "cache_size",
               "strategy", "name", "python", "kit")
HOOK_FIELDS = ("members", "node", "workdir", "name", "python", "kit", "cache_size",
               "strategy")


def template_fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def render(template: str, values: Mapping[str, Any]) -> list[str]:
    """shlex-split `template`, then format each word: a value is never split."""
    try:
        return [word.format_map(values) for word in shlex.split(template)]
    except (KeyError, IndexError, ValueError) as exc:
        raise ServiceError(f"command template {template!r}: {exc!r}; placeholders: "
                           f"{', '.join(sorted(values))}") from None


def behind_values(behind: Mapping[str, RunningService]) -> SimpleNamespace:
    """{services.NAME.address} and its siblings, for the templates of a proxy."""
    out = SimpleNamespace()
    for name, svc in behind.items():
        ep = svc.endpoint
        nodes = ep.extra.get("nodes") or [f"{ep.host}:{ep.port}"]
        setattr(out, name, SimpleNamespace(
            address=f"{ep.host}:{ep.port}", host=ep.host, port=ep.port,
            endpoints=",".join(nodes), user=ep.extra.get("user") or (
                ep.auth.user if ep.auth else "") or "",
            password=ep.auth.password if ep.auth else "",
            database=ep.extra.get("database", "")))
    return out


def inherited_login(protocol: str, behind: Mapping[str, RunningService]
                    ) -> tuple[dict[str, Any], Any]:
    """A postgres or redis proxy's clients log in as to the server behind it: its user
    and database (endpoint extra) and its credentials."""
    kind = {"postgres": "postgres", "redis": "redis"}.get(protocol)
    for svc in behind.values():
        if kind is not None and svc.endpoint.kind == kind:
            extra = {k: svc.endpoint.extra[k] for k in ("user", "database")
                     if k in svc.endpoint.extra}
            if kind == "postgres":  # a pooler may run each statement on another backend
                extra["statement_cache"] = 0
            return extra, svc.endpoint.auth
    return {}, None


#: Bytes a readiness probe reads before it calls the answer no line.
PROBE_BYTES = 64 << 10


def probe(address: str, port: int, kind: str, send: str, timeout_s: float = 2.0) -> None:
    with socket.create_connection((address, port), timeout=timeout_s) as sock:
        if kind == "tcp":
            return
        if send:
            sock.sendall(send.encode() + b"\r\n")
        got = 0
        while True:  # a line: its end looked for in each new chunk, at most PROBE_BYTES
            chunk = sock.recv(4096)
            if not chunk:
                raise NotReady(f"{address}:{port} closed the connection without a line")
            if b"\n" in chunk:
                return
            got += len(chunk)
            if got > PROBE_BYTES:
                raise NotReady(f"{address}:{port} answered {got:,} bytes without a line end")


@dataclass
class Server:
    index: int
    host: Host
    address: str
    port: int
    process: Process

    @property
    def addr(self) -> str:
        return f"{self.address}:{self.port}"


@dataclass
class CommandService(RunningService):
    servers: list[Server] = field(default_factory=list)
    launches: dict[str, Launch] = field(default_factory=dict)
    hosts: dict[str, Host] = field(default_factory=dict)
    launcher: Command | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)
    started: int = 0
    last_host: str = ""
    #: The services it is in front of (`after:`), by name.
    behind: dict[str, RunningService] = field(default_factory=dict)

    def info(self) -> dict[str, Any]:
        out = super().info()
        out["servers"] = [{"host": s.host.name, "address": s.addr} for s in self.servers]
        out["pids"] = [s.process.pid for s in self.servers]
        return out

    def alive(self) -> bool:
        return all(s.host.is_alive(s.process) for s in self.servers)

    def server_processes(self) -> list[Process]:
        return [s.process for s in self.servers]

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for launch in self.launches.values():
            for proc in reversed(launch.processes):
                with contextlib.suppress(HostError):
                    launch.host.stop(proc)
            launch.host.remove_tree(launch.workdir)

    def hook(self, which: str, node: str) -> tuple[float, str]:
        """Run the `which` hook on the service's host; (seconds, last output line)."""
        template = self.settings[which]
        values = {**self.values, "members": ",".join(s.addr for s in self.servers),
                  "node": node, "services": behind_values(self.behind)}
        t0 = time.monotonic()
        res = self.host.run(render(template, values), cwd=self.values["cwd"],
                            timeout=HOOK_TIMEOUT_S)
        lines = res.stdout.strip().splitlines()
        return time.monotonic() - t0, lines[-1] if lines else ""

    def scale(self, action: str, args: Mapping[str, Any]) -> dict[str, Any]:
        assert self.launcher is not None
        if action == "add_node":
            if not self.settings["add"]:
                raise ServiceError(f"command {self.name!r}: add_node needs the `add` hook")
            t0 = time.monotonic()
            server = self.launcher.start_server(self, args.get("host"))
            start_s = time.monotonic() - t0
            hook_s, said = self.hook("add", server.addr)
            self.servers.append(server)
            return {"node": server.addr, "servers": len(self.servers), "start_node_s": start_s,
                    "handover_s": hook_s, "hook_output": said}
        if action == "remove_node":
            if not self.settings["remove"]:
                raise ServiceError(f"command {self.name!r}: remove_node needs the `remove` "
                                   "hook")
            if len(self.servers) < 2:
                raise ServiceError(f"command {self.name!r}: cannot remove the last server")
            server = self.servers[int(args.get("node", -1))]
            hook_s, said = self.hook("remove", server.addr)
            self.servers.remove(server)
            t0 = time.monotonic()
            server.host.stop(server.process)
            return {"node": server.addr, "servers": len(self.servers), "handover_s": hook_s,
                    "stop_s": time.monotonic() - t0, "hook_output": said}
        return super().scale(action, args)


class Command(Service):
    kind = "command"
    binaries = ()
    needs_hosts = True
    actions = ("add_node", "remove_node")
    action_args = NODE_ACTION_ARGS
    settings: Mapping[str, Setting] = {
        "command": Setting((str, type(None)), None, "server command template (see docs)"),
        "servers": Setting((int,), 1, "servers started at the beginning", low=1, high=1000,
                           why="each a server process with its own port"),
        "hosts": Setting((list, type(None)), None,
                         "spec host names to spread servers over; default: the service's"),
        "ready": Setting((str,), "tcp", "readiness probe", choices=("tcp", "line")),
        "ready_send": Setting((str,), "", "line probe: text sent before reading a line"),
        "ready_timeout_s": Setting((int, float), DEFAULT_READY_TIMEOUT_S,
                                   "how long a server may take to become ready", low=0,
                                   low_open=True, high=86_400, why="a day"),
        "protocol": Setting((str,), "kvtext", "protocol the workload speaks to it",
                            choices=PROTOCOLS),
        "files": Setting((dict,), {}, "files written into its work directory before each "
                         "server starts, name -> template (a proxy's configuration)"),
        "provides": Setting((str,), "kvstore", "the service kind workloads find it under"),
        "greeting": Setting((bool,), False, "servers send a line on connect (skipped)"),
        "cache_size": Setting((int, type(None)), None, "{cache_size}", low=0),
        "strategy": Setting((str, type(None)), None, "{strategy}, e.g. FIFO, LRU, LFU"),
        "cwd": Setting((str,), "{workdir}", "working directory of servers and hooks"),
        "vars": Setting((dict,), {}, "more template values, name -> value"),
        "setup": Setting((str, type(None)), None, "hook run once all servers are ready"),
        "add": Setting((str, type(None)), None, "hook run after add_node started a server"),
        "remove": Setting((str, type(None)), None, "hook run before remove_node stops one"),
    }

    def provides(self, settings: Mapping[str, Any]) -> str:
        return str(settings.get("provides") or "kvstore")

    def missing_binaries(self, host: Host, settings: Mapping[str, Any] | None = None
                         ) -> list[str]:
        """The program of the server command and of each hook, where it can be known
        before the run: a name looked up on PATH, an absolute path that must be
        executable, or `{python}`/`{kit}` filled in; a word naming the run's own
        directories (`{workdir}`, a relative path) is only known at start."""
        s = self.resolve(settings or {})
        missing = []
        values: dict[str, str] = {str(k): str(v) for k, v in s["vars"].items()}
        values["python"] = host.python
        for key in ("command", "setup", "add", "remove"):
            template = s[key]
            if not template:
                continue
            try:
                word = shlex.split(template)[0]
            except (ValueError, IndexError):
                continue  # `validate` reports a template that does not split
            if "kit" in template_fields(word):
                values.setdefault("kit", host.run([host.python, "-c", _KIT],
                                                  check=False).stdout.strip())
            try:
                program = word.format_map(values)
            except (KeyError, ValueError, IndexError):
                continue
            if "/" not in program:
                found = host.which(program) is not None
            elif program.startswith("/"):
                found = host.run(["test", "-x", program], check=False).ok
            else:
                continue
            if not found:
                missing.append(f"{program} (the {key} of this command service)")
        return missing

    def validate(self, settings: Mapping[str, Any], *, name: str = "",
                 behind: Sequence[str] = ()) -> list[str]:
        """`_check`'s refusal: what `start` would stop on, said before anything starts."""
        try:
            self._check(name or "?", self.resolve(settings), set(behind))
        except ServiceError as exc:
            return [str(exc)]
        return []

    def check_steps(self, name: str, host: str, settings: Mapping[str, Any],
                    steps: list[Step]) -> list[tuple[Step, str, str]]:
        return check_node_steps(name, settings["servers"], list(settings["hosts"] or [host]),
                                steps)

    def _check(self, name: str, s: Mapping[str, Any], behind: set[str] = frozenset()
               ) -> None:
        if not s["command"]:
            raise ServiceError(f"command {name!r}: set `command`, the server's command line")
        if s["servers"] < 1:
            raise ServiceError(f"command {name!r}: servers must be at least 1")
        known = set(BASE_FIELDS) | set(s["vars"]) | {"services"}
        templates = [("command", s["command"], known), ("cwd", s["cwd"], known),
                     *((k, s[k], known | set(HOOK_FIELDS)) for k in ("setup", "add", "remove")),
                     *((f"files.{f}", t, known) for f, t in s["files"].items())]
        for fname in s["files"]:
            if not isinstance(fname, str) or not _FILE_NAME.match(fname):
                raise ServiceError(f"command {name!r}: files: {fname!r} is not a file name")
        for key, template, allowed in templates:
            if not isinstance(template, str | type(None)):
                raise ServiceError(f"command {name!r}: {key}: expected a template string")
            fields = template_fields(template or "")
            unknown = sorted({f.split(".")[0] for f in fields} - allowed)
            if unknown:
                raise ServiceError(f"command {name!r}: {key}: unknown placeholder(s) "
                                   f"{unknown}; known: {sorted(allowed)}")
            for field_ in fields:
                base, *rest = field_.split(".")
                if base == "services" and (len(rest) != 2 or rest[0] not in behind
                                           or rest[1] not in SERVICE_FIELDS):
                    raise ServiceError(
                        f"command {name!r}: {key}: {{{field_}}} names no service it is in "
                        f"front of (after: {sorted(behind)}) or no field of one "
                        f"({', '.join(SERVICE_FIELDS)})")
                if base == "services" and rest[1] == "password" and key[:6] != "files.":
                    raise ServiceError(  # a command line is any local user's to read (ps)
                        f"command {name!r}: {key}: {{{field_}}} would put a password on a "
                        "command line, which every user of the machine can read; name it "
                        "in a files: template (mode 600) and point the command at that file")

    def start(self, host: Host, name: str, settings: Mapping[str, Any], *,
              hosts: Mapping[str, Host] | None = None,
              behind: Mapping[str, RunningService] | None = None) -> RunningService:
        s = resolve_checked(self, settings)
        self._check(name, s, set(behind or {}))
        known = {host.name: host, **(hosts or {})}
        missing = [h for h in s["hosts"] or [] if h not in known]
        if missing:
            raise ServiceError(f"command {name!r}: hosts {missing} are not connected")
        launch = Launch(host, self.kind, name)
        svc = CommandService(
            name=name, kind=self.kind, host=host,
            endpoint=Endpoint(self.provides(s), host.address, 0), version="unknown",
            config={}, processes=[], workdir=None, launches={host.name: launch},
            hosts=dict(known), launcher=self, settings=s)
        try:
            svc.values = self._values(svc, host, launch)
            svc.behind = dict(behind or {})
            for _ in range(s["servers"]):
                svc.servers.append(self.start_server(svc, None))
            setup_s = svc.hook("setup", "")[0] if s["setup"] else 0.0
        except BaseException as exc:
            error = None
            if isinstance(exc, (HostError, OSError, ProbeError)):
                error = svc.launches[svc.last_host or host.name].fail(f"could not start: {exc}")
            svc.stop()
            if error is not None:
                raise error from exc
            raise
        first = svc.servers[0]
        svc.config = {k: s[k] for k in ("command", "servers", "ready", "protocol",
                                        "cache_size", "strategy", "setup", "add", "remove")}
        svc.config.update(argv=shlex.join(first.process.argv), setup_s=setup_s)
        svc.version = first.process.argv[0].rsplit("/", 1)[-1]  # its program, at least
        inherited = inherited_login(s["protocol"], svc.behind)
        svc.config.update(after=list(svc.behind), files=sorted(s["files"]))
        svc.endpoint = Endpoint(self.provides(s), first.address, first.port, {
            "protocol": s["protocol"], "greeting": s["greeting"],
            "nodes": [x.addr for x in svc.servers], **inherited[0]}, inherited[1])
        if s["protocol"] == "postgres":  # what is between, and its pooling: recorded
            extra, found = pg_remote.statements(svc.endpoint, "auto", strict=False,
                                                started=bool(inherited[0]))
            svc.endpoint = replace(svc.endpoint, extra={**svc.endpoint.extra, **extra})
            svc.config.update(found)
        return svc

    def _values(self, svc: CommandService, host: Host, launch: Launch) -> dict[str, str]:
        s = svc.settings
        values = {str(k): str(v) for k, v in s["vars"].items()}
        values.update(workdir=launch.workdir, name=svc.name, python=host.python,
                      cache_size="" if s["cache_size"] is None else str(s["cache_size"]),
                      strategy=s["strategy"] or "")
        uses_kit = any("kit" in template_fields(s[k] or "")
                       for k in ("command", "cwd", "setup", "add", "remove"))
        values["kit"] = host.run([host.python, "-c", _KIT]).stdout.strip() if uses_kit else ""
        values["cwd"] = s["cwd"].format_map(values)
        return values

    def start_server(self, svc: CommandService, host_name: str | None) -> Server:
        """Start one more server (round robin over `hosts`) and wait until it is ready."""
        s = svc.settings
        names = s["hosts"] or [svc.host.name]
        index = svc.started
        svc.started += 1
        host = svc.hosts[host_name or names[index % len(names)]]
        launch = svc.launches.get(host.name)
        if launch is None:
            launch = svc.launches[host.name] = Launch(host, self.kind, svc.name)
        port = host.free_port()
        port2 = host.free_port()  # a second one: a stats or admin listener
        data_dir = f"{launch.workdir}/server-{index}"
        host.run(["mkdir", "-p", data_dir])
        values: dict[str, Any] = {
            **svc.values, "host": host.address, "port": str(port), "port2": str(port2),
            "index": str(index),
            "data_dir": data_dir, "workdir": launch.workdir,
            "services": behind_values(svc.behind)}
        for fname, template in s["files"].items():  # a proxy's configuration, first
            try:
                text = template.format_map(values)
            except (KeyError, AttributeError, IndexError, ValueError) as exc:
                raise ServiceError(f"command {svc.name!r}: files.{fname}: {exc!r}") from None
            host.run(["sh", "-c", 'umask 077; cat > "$1"', "sh", f"{launch.workdir}/{fname}"],
                     input=text)
        launch.log_path = f"{launch.workdir}/server-{index}.log"  # fail() shows this one
        svc.last_host = host.name
        proc = host.start(render(s["command"], values), log_path=launch.log_path,
                          cwd=s["cwd"].format_map(values))
        launch.processes.append(proc)
        launch.wait_until_ready(
            proc, lambda: probe(host.address, port, s["ready"], s["ready_send"]),
            timeout_s=float(s["ready_timeout_s"]))
        return Server(index, host, host.address, port, proc)
