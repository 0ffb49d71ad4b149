"""`command` service: templates, readiness, hooks; against the reference server."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest

from examples.kvserver.ring import Ring
from harness.drivers.kvtext import KVTextClient
from harness.errors import ServiceError
from harness.hosts import LocalHost
from harness.services import SERVICES
from harness.services.command import CommandService, render
from tests.fixtures.servers import processes_in, tcp_listeners

pytestmark = pytest.mark.integration

ECS = "{python} -m examples.kvserver.ecs"
KVSERVER: dict[str, Any] = {
    "command": "{python} -m examples.kvserver --host {host} -p {port} -c {cache_size} "
               "-s {strategy} -d {data_dir}",
    "cwd": "{kit}", "ready": "line", "ready_send": "keyrange", "cache_size": 10,
    "strategy": "LFU", "setup": f"{ECS} init {{members}}",
    "add": f"{ECS} add {{members}} {{node}}", "remove": f"{ECS} remove {{members}} {{node}}",
}


@pytest.fixture
def host() -> Iterator[LocalHost]:
    with LocalHost() as h:
        yield h


def test_each_placeholder_value_is_one_argument_and_never_a_shell() -> None:
    values = {"data_dir": "/tmp/a dir", "v": "1; rm -rf /", "port": "5"}
    assert render("srv -d {data_dir} --x={v} -p {port} 'two words'", values) == [
        "srv", "-d", "/tmp/a dir", "--x=1; rm -rf /", "-p", "5", "two words"]
    with pytest.raises(ServiceError, match="placeholders: data_dir, port, v"):
        render("srv {nope}", values)


def test_unknown_placeholders_and_missing_command_are_refused_first(host: LocalHost) -> None:
    launcher = SERVICES.get("command")
    with pytest.raises(ServiceError, match="set `command`"):
        launcher.start(host, "kv", {})
    with pytest.raises(ServiceError, match=r"command: unknown placeholder\(s\) \['jar'\]"):
        launcher.start(host, "kv", {"command": "java -jar {jar} -p {port}"})
    with pytest.raises(ServiceError, match=r"add: unknown placeholder\(s\) \['who'\]"):
        launcher.start(host, "kv", {"command": "x {port}", "add": "ecs {who}"})


def test_a_server_that_exits_or_never_listens_is_reported(host: LocalHost) -> None:
    launcher = SERVICES.get("command")
    with pytest.raises(ServiceError, match="exited before it became ready") as err:
        launcher.start(host, "kv", {"command": "sh -c 'echo no such jar; exit 3'"})
    assert "no such jar" in str(err.value)
    with pytest.raises(ServiceError, match=r"not ready after 0\.5 s"):
        launcher.start(host, "kv", {"command": "sleep 30", "ready_timeout_s": 0.5})


def test_reference_servers_form_a_ring_and_keep_data_while_scaling(host: LocalHost) -> None:
    svc = SERVICES.get("command").start(host, "kv", {**KVSERVER, "servers": 2})
    try:
        assert isinstance(svc, CommandService)
        addrs = [s.addr for s in svc.servers]
        assert svc.endpoint.extra == {"protocol": "kvtext", "greeting": False, "nodes": addrs}
        assert "-c 10 -s LFU -d " in svc.config["argv"]
        for s in svc.servers:
            assert tcp_listeners(s.port) == {"127.0.0.1"}
            assert os.path.isdir(f"{svc.launches['localhost'].workdir}/server-{s.index}")

        async def run(fn: Any) -> Any:
            client = KVTextClient([(svc.servers[0].address, svc.servers[0].port)])
            await client.connect_all()
            try:
                return await fn(client)
            finally:
                client.close()

        async def put_all(c: KVTextClient) -> list[Any]:
            return [await c.put(b"k%d" % i, b"v%d" % i) for i in range(100)]

        async def get_all(c: KVTextClient) -> list[Any]:
            return [await c.get(b"k%d" % i) for i in range(100)]

        async def owners(c: KVTextClient) -> list[str]:
            return [":".join(map(str, c.owner(b"k%d" % i))) for i in range(100)]

        asyncio.run(run(put_all))
        ring = Ring(addrs)  # what the setup hook told the servers, as the client sees it
        assert asyncio.run(run(owners)) == [ring.owner(b"k%d" % i) for i in range(100)]
        added = svc.scale("add_node", {})
        assert added["servers"] == 3 and "pairs handed over" in added["hook_output"]
        removed = svc.scale("remove_node", {"node": 0})
        assert removed["node"] == addrs[0] and removed["servers"] == 2
        assert asyncio.run(run(get_all)) == [b"v%d" % i for i in range(100)]
        assert svc.alive()
    finally:
        svc.stop()
    workdir = svc.launches["localhost"].workdir
    assert processes_in(workdir) == [] and not os.path.exists(workdir)


def test_scaling_needs_the_hooks(host: LocalHost) -> None:
    svc = SERVICES.get("command").start(
        host, "kv", {k: v for k, v in KVSERVER.items() if k not in ("add", "remove")})
    try:
        with pytest.raises(ServiceError, match="add_node needs the `add` hook"):
            svc.scale("add_node", {})
        with pytest.raises(ServiceError, match="remove_node needs the `remove` hook"):
            svc.scale("remove_node", {})
    finally:
        svc.stop()


def test_a_setup_hook_names_the_address_of_a_service_it_is_in_front_of(tmp_path) -> None:
    """{services.NAME.address} in a `setup:` hook passed validation and then failed at
    start with KeyError('services'): the hook now has the command's names. The hook
    writes what it was given; the file holds the memcached's address."""
    import re
    import shutil

    from harness.cli import main as cli_main
    from harness.paths import experiments_dir
    from harness.results import iter_run_dirs, read_manifest
    from tests.fixtures.servers import require_service

    if shutil.which("nutcracker") is None:
        if os.environ.get("CI"):
            pytest.fail("nutcracker is not installed; .ci/run installs it")
        pytest.skip("nutcracker is not installed (apt-get install nutcracker)")
    require_service("memcached", LocalHost())
    seen = tmp_path / "seen"
    text = (experiments_dir() / "deployment" / "memcache_nutcracker.yaml").read_text()
    text = text.replace("      files:\n", "      setup: \"sh -c 'echo $0 > "
                        f"{seen}' {{services.cache_a.address}}\"\n      files:\n", 1)
    text = text.replace("repetitions: 5", "repetitions: 1").replace(
        "duration_s: 3, warmup_s: 0.5", "duration_s: 0.5, warmup_s: 0.1")
    spec = tmp_path / "hooked.yaml"
    spec.write_text(text)
    assert cli_main(["run", str(spec), "--out", str(tmp_path / "raw"), "--no-progress",
                     "-q"]) == 0
    [run] = [read_manifest(d) for d in iter_run_dirs(tmp_path / "raw")]
    assert run.status == "complete"
    assert re.fullmatch(r"127\.0\.0\.1:\d+", seen.read_text().strip()), seen.read_text()


def _listening_sockets(pids: list[int]) -> set[str]:
    """`addr:port` of every TCP socket the processes `pids` listen on (from /proc)."""
    inodes: set[str] = set()
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        for fd in os.listdir(fd_dir):
            with contextlib.suppress(OSError):
                target = os.readlink(f"{fd_dir}/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.read().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                    addr, port = fields[1].split(":")
                    found.add(f"{_addr(addr)}:{int(port, 16)}")
    return found


def _addr(hex_addr: str) -> str:
    import ipaddress

    raw = bytes.fromhex(hex_addr)
    # /proc prints each 32-bit word in host (little-endian) order.
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def test_the_proxy_example_binds_every_listener_to_the_address_it_is_given(
        host: LocalHost) -> None:
    """experiments/deployment/memcache_nutcracker.yaml's proxy, started as the spec says:
    nutcracker listens on the pool's port and on a stats port (0.0.0.0:22222 unless told
    otherwise); both must be on the address the kit gives ({host}), none on every
    interface."""
    import shutil

    import yaml

    from harness.paths import experiments_dir

    if shutil.which("nutcracker") is None:
        if os.environ.get("CI"):
            pytest.fail("nutcracker is not installed; .ci/run installs it")
        pytest.skip("nutcracker is not installed (apt-get install nutcracker)")
    spec = yaml.safe_load((experiments_dir() / "deployment" / "memcache_nutcracker.yaml")
                          .read_text())
    settings = spec["services"]["proxy"]["settings"]
    launcher = SERVICES.get("memcached")
    backends = {n: launcher.start(host, n, {}) for n in ("cache_a", "cache_b")}
    try:
        svc = SERVICES.get("command").start(host, "proxy", settings, behind=backends)
        try:
            listening = _listening_sockets(processes_in(svc.launches["localhost"].workdir))
            assert len(listening) == 2, listening  # the pool, and the stats listener
            assert {a.rsplit(":", 1)[0] for a in listening} == {host.address}, listening
        finally:
            svc.stop()
    finally:
        for b in backends.values():
            b.stop()


def test_the_manual_names_every_template_name() -> None:
    """Each placeholder a command service's templates may use is in the manual
    (`{port2}` was only in the code)."""
    from harness.paths import project_root
    from harness.services.command import BASE_FIELDS, HOOK_FIELDS, SERVICE_FIELDS

    manual = "".join(p.read_text() for p in (project_root() / "docs").glob("*.md"))
    missing = [f"{{{f}}}" for f in {*BASE_FIELDS, *HOOK_FIELDS} if f"{{{f}}}" not in manual]
    missing += [f".{f}" for f in SERVICE_FIELDS if f"`.{f}`" not in manual
                and f"{{services.OTHER.{f}}}" not in manual]
    assert missing == []
