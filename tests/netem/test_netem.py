"""harness.netem, the relay and cleanup: real namespaces, veths, relays and sockets."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.hosts import LocalHost
from harness.netem import (
    PROFILES,
    Link,
    NamespaceHost,
    NetemError,
    Network,
    make_link,
    make_state_dir,
    netem_supported,
    new_tag,
    start_relay,
)
from harness.netem.cleanup import cleanup, find_leftovers
from tests.fixtures.netns import (
    assert_no_leftovers,
    connect,
    echo_server,  # noqa: F401 - fixture
    need_root,
    root,  # noqa: F401 - fixture
    round_trips_ms,
)

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True, scope="module")
def _nothing_left_behind() -> Iterator[None]:
    yield
    if os.geteuid() == 0:
        assert_no_leftovers()


@pytest.fixture
def host() -> Iterator[LocalHost]:
    with LocalHost() as h:
        yield h


@pytest.fixture
def state(host: LocalHost) -> Iterator[str]:
    path = make_state_dir(host, new_tag())
    yield path
    host.remove_tree(path)


@pytest.fixture
def relay(host: LocalHost, state: str, echo_server: int):  # noqa: F811 - fixture use
    """`relay(link)` -> port of a relay on loopback in front of the echo server."""
    procs = []

    def start(link: Link) -> int:
        proc, port = start_relay(host, listen="127.0.0.1", target=("127.0.0.1", echo_server),
                                 link=link, tag="000000", log_path=f"{state}/relay.log",
                                 cwd=state)
        procs.append(proc)
        return port

    yield start
    for p in procs:
        host.stop(p)


# -- links and profiles ------------------------------------------------------------

def test_profiles_are_round_trips_split_over_both_directions() -> None:
    assert PROFILES["lan"].rtt_ms == pytest.approx(0.2)
    assert PROFILES["wifi"].rtt_ms == pytest.approx(3.0)
    assert PROFILES["wifi"].jitter_ms == pytest.approx(0.5)  # ± 1 ms on the round trip
    assert PROFILES["wifi"].loss_pct == pytest.approx(0.1)
    assert make_link("wifi", delay_ms=5).delay_ms == 5
    assert make_link("wifi", delay_ms=5).jitter_ms == 0.5
    assert Link(1, 2).problems() and Link(-1).problems() and Link(1, rate_mbit=0).problems()
    assert Link(2, 1, 0.5, 100).netem_args() == [
        "netem", "limit", "100000", "delay", "2ms", "1ms", "loss", "0.5%", "rate", "100mbit"]
    with pytest.raises(NetemError, match="unknown network profile"):
        make_link("dialup")


# -- the relay (loopback only: no root needed) -------------------------------------------

def test_relay_adds_the_configured_delay_each_way(relay, echo_server: int) -> None:  # noqa: F811
    with connect(echo_server) as direct:
        base = statistics.median(round_trips_ms(direct, 30))
    with connect(relay(Link(delay_ms=5.0))) as via:
        rtts = round_trips_ms(via, 40)
    added = statistics.median(rtts) - base
    assert 10.0 <= added <= 12.0, (added, rtts)  # 2 x 5 ms, plus the relay's own hops
    assert min(rtts) >= 10.0


def test_relay_jitter_spreads_but_never_reorders(relay) -> None:
    port = relay(Link(delay_ms=3.0, jitter_ms=2.0))
    with connect(port) as sock:
        rtts = round_trips_ms(sock, 60)
        assert min(rtts) >= 2.0 and max(rtts) <= 10.0 + 5.0
        assert statistics.pstdev(rtts) > 0.3  # uniform ± 2 ms each way
        # Many small writes in flight at once: the byte stream must come back in order.
        payload = b"".join(b"%08d" % i for i in range(20_000))
        received = bytearray()

        def reader() -> None:
            while len(received) < len(payload):
                received.extend(sock.recv(65536))

        t = threading.Thread(target=reader)
        t.start()
        for i in range(0, len(payload), 80):
            sock.sendall(payload[i:i + 80])
        t.join(30)
    assert bytes(received) == payload


def test_relay_paces_to_the_rate(relay) -> None:
    port = relay(Link(rate_mbit=8.0))  # 1 MB/s each way
    data = b"r" * 500_000
    with connect(port) as sock:
        t0 = time.perf_counter()
        threading.Thread(target=sock.sendall, args=(data,), daemon=True).start()
        got = 0
        while got < len(data):
            got += len(sock.recv(65536))
        elapsed = time.perf_counter() - t0
    assert 0.45 <= elapsed <= 0.8, elapsed  # 0.5 s at 1 MB/s (both directions pipelined)


def test_relay_survives_a_closed_target_and_reports_it(host: LocalHost, state: str) -> None:
    from harness.hosts import free_port

    port = free_port()  # nothing listens there
    proc, rport = start_relay(host, listen="127.0.0.1", target=("127.0.0.1", port),
                              link=Link(1.0), tag="000000", log_path=f"{state}/r.log")
    try:
        with connect(rport) as sock:
            assert sock.recv(10) == b""  # the relay closes us when the target refuses
        assert host.is_alive(proc)
        assert "failed" in Path(f"{state}/r.log").read_text()
    finally:
        host.stop(proc)


# -- namespaces -----------------------------------------------------------------------

@pytest.fixture
def network(root: None, host: LocalHost) -> Iterator[Network]:  # noqa: F811
    net = Network(host, new_tag())
    yield net
    net.close()


def test_namespace_host_runs_starts_and_stops_inside_its_namespace(
        network: Network, host: LocalHost, state: str) -> None:
    m = network.add("a")
    ns = m.host
    assert isinstance(ns, NamespaceHost) and ns.address == m.address
    addrs = ns.run(["ip", "-4", "-o", "addr", "show"]).stdout
    assert m.address in addrs and network.address not in addrs
    assert ns.run(["sh", "-c", "exit 3"], check=False).returncode == 3
    assert ns.run(["no-such-command-hkv"], check=False).returncode == 127
    assert ns.run(["cat"], input="stdin ok").stdout == "stdin ok"
    assert ns.run(["pwd"], cwd=state).stdout.strip() == state
    assert ns.which("sh") and ns.exists(state)
    port = ns.free_port()
    proc = ns.start([sys.executable, "-c", f"import socket,time; s=socket.create_server(("
                     f"'{m.address}', {port})); c,_=s.accept(); c.sendall(b'from-ns'); "
                     "time.sleep(60)"], log_path=f"{state}/srv.log")
    deadline = time.monotonic() + 10
    while True:
        try:
            sock = connect(port, m.address)  # from the root namespace, over the bridge
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    with sock:
        assert sock.recv(10) == b"from-ns"
    netns_pids = host.run(["ip", "netns", "pids", m.netns]).stdout.split()
    assert str(proc.pid) in netns_pids  # the pid is the server's, inside the namespace
    assert ns.is_alive(proc)
    ns.stop(proc)
    assert not ns.is_alive(proc)


def test_network_close_removes_namespaces_links_and_bridge(host: LocalHost) -> None:
    need_root()
    net = Network(host, new_tag())
    members = [net.add("a"), net.add("b")]
    # Two namespaces on one bridge reach each other, too.
    res = members[0].host.run([sys.executable, "-c", "import socket; socket.create_connection"
                               f"(('{members[1].address}', 9), timeout=2)"], check=False)
    assert "refused" in res.stderr  # an answer (RST), not a timeout: the path exists
    net.close()
    net.close()  # idempotent
    links = host.run(["ip", "-o", "link", "show"]).stdout
    assert f"hkv-{net.tag}" not in links
    assert f"hkv-{net.tag}" not in host.run(["ip", "netns", "list"]).stdout


def test_tbf_or_netem_shape_the_veth(network: Network, host: LocalHost) -> None:
    m = network.add("a")
    if netem_supported(host, m.veth):
        assert network.shape(m, Link(1.0, rate_mbit=50), netem=True) == "netem"
        assert "netem" in host.run(["tc", "qdisc", "show", "dev", m.veth]).stdout
    else:
        assert network.shape(m, Link(1.0, rate_mbit=50), netem=False) == "tbf"
        assert "tbf" in m.host.run(["tc", "qdisc", "show", "dev", "eth0"]).stdout


def test_without_root_namespaces_say_so_and_the_relay_still_works(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        with pytest.raises(NetemError, match="need root"):
            Network(LocalHost(), new_tag())
        return
    code = ("from harness.hosts import LocalHost; from harness.netem import Network, "
            "NetemError\ntry:\n    Network(LocalHost(), 'abcdef')\nexcept NetemError as e:"
            "\n    print(e)")
    res = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                          sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert "need root" in res.stdout and "relay" in res.stdout, res


# -- cleanup --------------------------------------------------------------------------

def test_cleanup_removes_orphans_keeps_live_owners_and_is_idempotent(
        host: LocalHost, capsys: pytest.CaptureFixture) -> None:
    need_root()
    live = make_state_dir(host, new_tag())  # owned by this (running) test process
    orphan_tag = new_tag()
    orphan = make_state_dir(host, orphan_tag)
    Path(orphan, "owner.json").write_text(json.dumps({"pid": 999_999_999, "start": "0"}))
    net = Network(host, orphan_tag)
    m = net.add("a")
    sleeper = m.host.start(["sleep", "300"], log_path=f"{orphan}/sleep.log")
    relay, _ = start_relay(host, listen="127.0.0.1", target=("127.0.0.1", 9), link=Link(1),
                           tag=orphan_tag, log_path=f"{orphan}/relay.log")
    try:
        found = find_leftovers()
        assert live.rsplit("-", 1)[0].split("hkv-")[1] in found.in_use
        assert {sleeper.pid, relay.pid} <= set(found.processes)
        assert cli_main(["netem", "cleanup"]) == 1  # something was in use and left alone
        out = capsys.readouterr().out
        assert f"deleted namespace {m.netns}" in out and "in use, left alone" in out
        assert f"stopped process {sleeper.pid}" in out and f"stopped process {relay.pid}" in out
        assert not Path(orphan).exists() and Path(live).exists()
        assert not host.is_alive(sleeper) and not host.is_alive(relay)
        assert f"hkv-{orphan_tag}" not in host.run(["ip", "-o", "link"]).stdout
        cleanup(say=lambda _m: None)
        assert find_leftovers().empty()  # idempotent: nothing more to find
    finally:
        net.close()
        host.remove_tree(live)
        host.remove_tree(orphan)


def test_a_cleanup_of_another_temp_directory_leaves_a_live_test_bed(tmp_path: Path) -> None:
    """`netem cleanup` given another temp directory (as a test gives it its own) still
    sees the sessions that live in the system's: a running machine bed keeps its
    namespace and its sshd answers (before, that cleanup took both, and whatever test
    was using the bed at the time lost its SSH connections)."""
    import socket

    from tests.fixtures.machines import machine_bed

    need_root()
    with machine_bed(["a"]) as bed:
        machine = bed["a"]
        lines: list[str] = []
        cleanup(tmp_dir=str(tmp_path), say=lines.append)
        assert machine.netns in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                               text=True).stdout, lines
        with socket.create_connection((machine.address, 22), timeout=10) as s:
            s.settimeout(10)
            assert s.recv(64).startswith(b"SSH-2.0"), lines
