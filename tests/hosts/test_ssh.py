"""SSHHost against a real OpenSSH server on 127.0.0.1 (tests/fixtures/sshd.py)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.errors import CommandError, HostError, HostKeyError
from harness.hosts import HostSpec, connect_host, free_port
from harness.hosts.ssh import SSHHost
from harness.hosts.sshconnect import parse_target
from tests.fixtures.sshd import SSHServer, keygen
from tests.hosts.test_base import live_group_members, proc_state, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def remote(sshd: SSHServer) -> Iterator[SSHHost]:
    with SSHHost.connect(sshd.host_spec()) as host:
        yield host


def fingerprint(public_key: str, tmp_path: Path) -> str:
    """The SHA256 fingerprint of `type base64`, as OpenSSH prints it."""
    pub = tmp_path / f"{uuid.uuid4().hex}.pub"
    pub.write_text(public_key + "\n")
    out = subprocess.run(["ssh-keygen", "-l", "-f", str(pub)], check=True, capture_output=True,
                         text=True, timeout=30).stdout
    return out.split()[1]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("alice@db1:2222", ("alice", "db1", 2222)),
        ("alice@db1", ("alice", "db1", None)),
        ("db1:2222", (None, "db1", 2222)),
        ("db1", (None, "db1", None)),
        ("bob@[::1]:22", ("bob", "::1", 22)),
    ],
)
def test_parse_target(target: str, expected: tuple[str | None, str, int | None]) -> None:
    assert parse_target(target) == expected


@pytest.mark.parametrize("target", ["db1:port", "alice@", ""])
def test_parse_target_rejects_nonsense(target: str) -> None:
    with pytest.raises(HostError, match="bad SSH target"):
        parse_target(target)


def test_connect_host_opens_an_ssh_host(sshd: SSHServer) -> None:
    with connect_host(sshd.host_spec("box", address="10.9.8.7")) as host:
        assert isinstance(host, SSHHost)
        assert (host.name, host.address, host.python) == ("box", "10.9.8.7", sys.executable)
        assert host.run(["id", "-un"]).stdout.strip() == sshd.user
    with SSHHost.connect(HostSpec("bare", target=sshd.target, known_hosts=sshd.known_hosts,
                                  identity_file=sshd.identity_file)) as host:
        assert (host.address, host.python) == ("127.0.0.1", "python3")


def test_run_stdout_stderr_exit_code(remote: SSHHost) -> None:
    res = remote.run(["sh", "-c", "echo out; echo err >&2; exit 7"], check=False)
    assert (res.returncode, res.stdout, res.stderr) == (7, "out\n", "err\n")
    assert remote.run(["echo", "hi"]).stdout == "hi\n"


def test_check_raises_command_error(remote: SSHHost) -> None:
    with pytest.raises(CommandError, match="remote: command failed with exit 1: false"):
        remote.run(["false"])


def test_hostile_arguments_are_passed_literally(remote: SSHHost) -> None:
    marker = f"/tmp/pwned-{uuid.uuid4().hex}"
    for arg in [f"; touch {marker}", f"$(touch {marker})", f"`touch {marker}`", "`id`",
                "a b", "it's", "\\", "$HOME", "*", "\n"]:
        assert remote.run(["printf", "%s", arg]).stdout == arg
    assert not os.path.exists(marker)


def test_env_cwd_and_input(remote: SSHHost, tmp_path: Path) -> None:
    res = remote.run(["sh", "-c", 'echo "$A|$B"; pwd; cat'], env={"A": "x y", "B": "$(id)"},
                     cwd=str(tmp_path), input="from stdin")
    assert res.stdout == f"x y|$(id)\n{tmp_path}\nfrom stdin"
    with pytest.raises(ValueError, match="environment variable"):
        remote.run(["true"], env={"A=B": "x"})


def test_timeout_leaves_the_connection_usable(remote: SSHHost) -> None:
    message = "remote: command timed out after 0.3s: sleep 20"
    with pytest.raises(HostError, match=re.escape(message)):
        remote.run(["sleep", "20"], timeout=0.3)
    assert remote.run(["echo", "still here"]).stdout == "still here\n"


def test_start_stop_kills_the_whole_group(remote: SSHHost, tmp_path: Path) -> None:
    proc = remote.start(["sh", "-c", "sleep 60 & sleep 60"], log_path=str(tmp_path / "p.log"))
    try:
        pgid = remote.run(["ps", "-o", "pgid=", "-p", str(proc.pid)]).stdout.strip()
        assert int(pgid) == proc.pid
        assert remote.is_alive(proc)
        assert wait_until(lambda: len(live_group_members(remote, proc.pid)) == 3)
    finally:
        remote.stop(proc, timeout_s=5)
    assert not remote.is_alive(proc)
    assert wait_until(lambda: live_group_members(remote, proc.pid) == [])


def test_signal_stop_cont(remote: SSHHost, tmp_path: Path) -> None:
    proc = remote.start(["sleep", "60"], log_path=str(tmp_path / "s.log"))
    try:
        assert remote.signal(proc, "STOP")
        assert wait_until(lambda: proc_state(remote, proc.pid).startswith("T"))
        assert remote.signal(proc, "CONT")
        assert wait_until(lambda: proc_state(remote, proc.pid).startswith("S"))
    finally:
        remote.stop(proc, timeout_s=5)


def test_put_get_binary(remote: SSHHost, tmp_path: Path) -> None:
    data = os.urandom(1_500_000)
    (tmp_path / "a.bin").write_bytes(data)
    remote.put(tmp_path / "a.bin", str(tmp_path / "remote.bin"))
    remote.get(str(tmp_path / "remote.bin"), tmp_path / "b.bin")
    assert (tmp_path / "b.bin").read_bytes() == data
    with pytest.raises(HostError, match="cannot copy"):
        remote.get(str(tmp_path / "absent"), tmp_path / "c.bin")
    assert not (tmp_path / "c.bin").exists()


def test_mkdtemp_which_free_port(remote: SSHHost) -> None:
    d = remote.mkdtemp()
    try:
        assert os.path.isdir(d)
    finally:
        remote.remove_tree(d)
    assert remote.which("sh") is not None
    assert remote.which("no-such-command-3b1f") is None
    free_port_remote = remote.free_port()
    assert 0 < free_port_remote < 65536


def test_unknown_host_key_is_refused(sshd: SSHServer, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    with pytest.raises(HostKeyError) as info:
        SSHHost.connect(sshd.host_spec(known_hosts=str(known)))
    message = str(info.value)
    assert fingerprint(sshd.host_key, tmp_path) in message
    assert f"127.0.0.1:{sshd.port}" in message and "ssh-ed25519" in message
    assert f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> {known}" in message
    assert "accept_new_host_key: true" in message
    assert known.read_text() == ""


def test_changed_host_key_is_refused_even_when_accepting_new(
    sshd: SSHServer, tmp_path: Path
) -> None:
    other = keygen(tmp_path / "other_key")
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {other}\n")
    with pytest.raises(HostKeyError, match="man-in-the-middle") as info:
        SSHHost.connect(sshd.host_spec(known_hosts=str(known), accept_new_host_key=True))
    assert fingerprint(sshd.host_key, tmp_path) in str(info.value)
    assert fingerprint(other, tmp_path) in str(info.value)
    assert known.read_text() == f"[127.0.0.1]:{sshd.port} {other}\n"


@pytest.mark.parametrize("initial", ["empty", "other host, no final newline", "missing"])
def test_accept_new_host_key_records_it(sshd: SSHServer, tmp_path: Path, initial: str) -> None:
    known = tmp_path / "dir" / "known_hosts"
    if initial != "missing":
        known.parent.mkdir()
        other = f"example.org {keygen(tmp_path / 'other')}" if initial != "empty" else ""
        known.write_text(other)
    spec = sshd.host_spec(known_hosts=str(known), accept_new_host_key=True)
    with SSHHost.connect(spec) as host:
        assert host.run(["true"]).ok
    line = f"[127.0.0.1]:{sshd.port} {sshd.host_key}\n"
    assert known.read_text() == (f"{other}\n" if initial.startswith("other") else "") + line
    if initial == "missing":
        assert stat.S_IMODE(known.stat().st_mode) == 0o600
    # Now known: connecting without accept_new_host_key works and adds nothing.
    with SSHHost.connect(sshd.host_spec(known_hosts=str(known))) as host:
        assert host.run(["true"]).ok
    assert known.read_text().count(line) == 1


def test_ssh_config_alias(sshd: SSHServer, tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host mybox\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.identity_file}\n  UserKnownHostsFile {sshd.known_hosts}\n"
    )
    with SSHHost.connect(HostSpec(name="x", target="mybox", ssh_config=str(config))) as host:
        assert host.address == "127.0.0.1"
        assert host.target == f"{sshd.user}@127.0.0.1:{sshd.port}"
        assert host.run(["id", "-un"]).stdout.strip() == sshd.user


def test_connection_refused_names_the_target(tmp_path: Path) -> None:
    target = f"nobody@127.0.0.1:{free_port()}"
    with pytest.raises(HostError, match="connection refused") as info:
        SSHHost.connect(HostSpec("down", target=target, connect_timeout_s=5,
                                 known_hosts=str(tmp_path / "kh")))
    assert target in str(info.value)
    assert not isinstance(info.value, HostKeyError)


def test_unauthorised_key_is_an_auth_error(sshd: SSHServer, tmp_path: Path) -> None:
    keygen(tmp_path / "stranger")
    with pytest.raises(HostError, match="authentication failed") as info:
        SSHHost.connect(sshd.host_spec(identity_file=str(tmp_path / "stranger")))
    assert sshd.target in str(info.value)
    assert "PRIVATE KEY" not in str(info.value)


def test_missing_identity_file(sshd: SSHServer, tmp_path: Path) -> None:
    with pytest.raises(HostError, match=r"identity_file .* does not exist"):
        SSHHost.connect(sshd.host_spec(identity_file=str(tmp_path / "absent")))


def test_closed_host_raises_host_error(sshd: SSHServer) -> None:
    host = SSHHost.connect(sshd.host_spec())
    host.close()
    with pytest.raises(HostError, match="closed"):
        host.run(["true"])


def test_clock_offset_of_a_host_on_this_machine_is_zero_within_its_uncertainty(sshd) -> None:
    """The loopback sshd shares this machine's clock: a biased estimate (e.g. one
    remote command timed end to end, skewed by shell start-up) would be ~0.1 s off."""
    from harness.hosts import connect_host

    with connect_host(sshd.host_spec()) as host:
        offset, uncertainty = host.clock_offset_ns()
    assert 0 < uncertainty < 20_000_000
    assert abs(offset) <= uncertainty + 1_000_000


# -- a machine without SFTP (tests/fixtures/sshd_variants.py) --------------------------

def test_put_get_binary_without_sftp(sshd_no_sftp, tmp_path: Path) -> None:
    data = bytes(range(256)) * 4000 + b"\r\n\x00tail"  # every byte value, CR LF, NUL
    (tmp_path / "a.bin").write_bytes(data)
    with SSHHost.connect(sshd_no_sftp.server.host_spec()) as host:
        host.put(tmp_path / "a.bin", str(tmp_path / "remote.bin"))
        host.get(str(tmp_path / "remote.bin"), tmp_path / "b.bin")
        assert host._no_sftp  # the fallback was taken, not SFTP
        (tmp_path / "empty").write_bytes(b"")
        host.get(str(tmp_path / "empty"), tmp_path / "empty.copy")
        with pytest.raises(HostError, match="No such file"):
            host.get(str(tmp_path / "absent"), tmp_path / "c.bin")
    assert (tmp_path / "remote.bin").read_bytes() == data == (tmp_path / "b.bin").read_bytes()
    assert (tmp_path / "empty.copy").read_bytes() == b""
    assert not (tmp_path / "c.bin").exists()


def test_get_without_sftp_cut_midway_leaves_no_partial_copy(sshd_no_sftp,
                                                            tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(400 << 20)  # sparse: cheap to make, slow enough to copy over SSH
    with SSHHost.connect(sshd_no_sftp.server.host_spec(connect_timeout_s=2)) as host:
        host.run(["true"])
        timer = threading.Timer(0.5, sshd_no_sftp.stop)
        timer.start()
        try:
            with pytest.raises(HostError, match="cannot copy"):
                host.get(str(big), tmp_path / "copy.bin")
        finally:
            timer.join()
    assert not (tmp_path / "copy.bin").exists()
