"""The multi-machine test bed itself (tests/fixtures/machines.py): machines with their own
addresses and sshd, reached from the control machine and from each other."""

from __future__ import annotations

import os
import sys

import pytest

from harness.hosts import connect_host
from harness.netem.cleanup import find_leftovers
from tests.fixtures.machines import TestBed, machine_bed
from tests.fixtures.netns import assert_no_leftovers

BANNER_PROBE = """
import socket, sys
with socket.create_connection((sys.argv[1], 22), timeout=5) as s:
    print(s.getsockname()[0], s.recv(64).decode().strip())
"""


def test_a_machine_reaches_another_machines_sshd_by_its_address(machines: TestBed) -> None:
    srv, cli = machines["srv"], machines["cli"]
    out = srv.run([sys.executable, "-c", BANNER_PROBE, cli.address]).stdout.split()
    # From srv's own address (not via the control machine), and it is an SSH server.
    assert out[0] == srv.address
    assert out[1].startswith("SSH-2.0-OpenSSH")


def test_the_control_machine_runs_commands_on_each_machine_over_ssh(
        machines: TestBed) -> None:
    namespaces = set()
    for m in machines.machines.values():
        with connect_host(m.host_spec()) as host:
            addrs = host.run(["ip", "-o", "-4", "addr", "show"]).stdout
            # The machine sees its own address only, and sees us at the control address.
            assert f"inet {m.address}/24" in addrs
            others = [o.address for o in machines.machines.values() if o is not m]
            assert not any(f"inet {a}/" in addrs for a in others)
            conn = host.run(["sh", "-c", 'echo "$SSH_CONNECTION"']).stdout.split()
            assert conn[0] == machines.control_address and conn[2] == m.address
            namespaces.add(host.run(["readlink", "/proc/self/ns/net"]).stdout.strip())
            # The kit's Python runs there and imports this worktree's harness.
            assert host.run([host.python, "-c", "import harness"]).ok
        # And the stock OpenSSH client, with the bed's known_hosts, agrees.
        assert m.ssh(["sh", "-c", 'echo "$SSH_CONNECTION"']).stdout.split()[2] == m.address
    assert len(namespaces) == len(machines.machines)


def test_a_bed_is_removed_completely_and_is_in_use_while_alive() -> None:
    with machine_bed(["a"]) as bed:
        found = find_leftovers()
        # Another session's leftover check sees the live bed as in use, not left over;
        # owned by a keeper, so this process's own "I own nothing" checks still hold.
        assert bed.tag in found.in_use
        assert found.in_use[bed.tag] != os.getpid()
        assert_no_leftovers()
        assert not any(bed.tag in n for n in found.namespaces + found.links)
        netns = bed["a"].netns
    after = find_leftovers(force=True)
    assert not any(bed.tag in n for n in after.namespaces + after.links)
    assert not any(bed.tag in str(d) for d in after.dirs)
    assert not any(netns in p for p in after.processes.values())


def test_a_bed_is_removed_when_the_test_using_it_fails() -> None:
    tags = []
    with pytest.raises(RuntimeError, match="the test failed"), machine_bed(["a", "b"]) as bed:
        tags.append(bed.tag)
        bed["a"].run(["ip", "link", "set", "eth0", "down"])  # left broken on purpose
        raise RuntimeError("the test failed")
    after = find_leftovers(force=True)
    assert not any(tags[0] in str(x) for x in
                   [*after.namespaces, *after.links, *after.dirs, *after.processes.values()])
