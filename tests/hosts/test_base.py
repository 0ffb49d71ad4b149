"""LocalHost and SSHHost must behave the same: one set of tests runs against both.

The SSH variant talks to the real sshd from tests/fixtures/sshd.py on 127.0.0.1.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.errors import CommandError, HostError
from harness.hosts import Host, LocalHost, Process

pytestmark = pytest.mark.integration

#: Arguments a shell would mangle or execute if they were not quoted one by one.
HOSTILE = [
    "; touch {marker}",
    "$(touch {marker})",
    "`touch {marker}`",
    "| touch {marker}",
    "&& touch {marker} &&",
    "`id`",
    "a b",
    "  leading and trailing  ",
    "it's",
    'say "hi"',
    "back\\slash",
    "$HOME",
    "${{PATH}}",
    "~",
    "*",
    "line\nbreak",
    "tab\there",
    "",
    "-n",
    "--",
    "é ☃ 日本",
]


def wait_until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll `predicate` until it is true or `timeout_s` passes; its last value."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def live_group_members(host: Host, pgid: int) -> list[tuple[int, str]]:
    """(pid, state) of every process in group `pgid` on `host`, zombies excluded."""
    out = host.run(["ps", "-e", "-o", "pid=,pgid=,stat="]).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    return [(int(p), st) for p, g, st in rows if int(g) == pgid and not st.startswith("Z")]


def proc_state(host: Host, pid: int) -> str:
    return host.run(["ps", "-o", "stat=", "-p", str(pid)], check=False).stdout.strip()


@pytest.fixture(params=["local", "ssh"], scope="module")
def host(request: pytest.FixtureRequest) -> Iterator[Host]:
    if request.param == "local":
        with LocalHost() as local:
            yield local
        return
    from harness.hosts.ssh import SSHHost

    sshd = request.getfixturevalue("sshd")
    with SSHHost.connect(sshd.host_spec()) as remote:
        yield remote


@pytest.fixture
def workdir(host: Host) -> Iterator[str]:
    path = host.mkdtemp("harness-test-")
    yield path
    host.remove_tree(path)


@pytest.fixture
def started(host: Host) -> Iterator[list[Process]]:
    """Processes a test starts; any still running at teardown are killed."""
    procs: list[Process] = []
    yield procs
    for proc in procs:
        host.stop(proc, timeout_s=2)


# -- run ------------------------------------------------------------------------------
@pytest.mark.parametrize("timeout", [None, 30.0])
def test_run_returns_stdout_stderr_and_exit_code(host: Host, timeout: float | None) -> None:
    res = host.run(["sh", "-c", "echo out; echo err >&2; exit 3"], check=False, timeout=timeout)
    assert (res.returncode, res.stdout, res.stderr, res.ok) == (3, "out\n", "err\n", False)
    assert res.argv == ("sh", "-c", "echo out; echo err >&2; exit 3")
    assert res.duration_s >= 0


def test_run_check_raises_command_error_with_the_result(host: Host) -> None:
    with pytest.raises(CommandError, match="exit 4") as info:
        host.run(["sh", "-c", "echo boom >&2; exit 4"])
    assert info.value.result.returncode == 4
    assert "boom" in str(info.value)


def test_run_missing_command_is_127(host: Host) -> None:
    res = host.run(["no-such-command-3b1f"], check=False)
    assert res.returncode == 127
    assert "no-such-command-3b1f" in res.stderr


def test_run_non_executable_file_is_126(host: Host, workdir: str) -> None:
    host.write_text(f"{workdir}/script", "#!/bin/sh\necho ran\n")  # no exec bit
    res = host.run([f"{workdir}/script"], check=False)
    assert (res.returncode, res.stdout) == (126, "")
    assert "ermission denied" in res.stderr


def test_run_output_bytes_are_kept_and_bad_utf8_replaced(host: Host) -> None:
    res = host.run(["printf", "a\\r\\nb\\377é"])
    assert res.stdout == "a\r\nb\ufffdé"


def test_run_passes_hostile_arguments_literally(host: Host, workdir: str) -> None:
    marker = f"{workdir}/pwned-{uuid.uuid4().hex}"
    args = [a.format(marker=marker) for a in HOSTILE]  # `{{`, `}}` in HOSTILE are braces
    res = host.run(["printf", "%s\\0", *args])
    assert res.stdout.split("\0")[:-1] == args
    assert not host.exists(marker)


def test_run_env_and_cwd(host: Host, workdir: str) -> None:
    cwd = f"{workdir}/with space $(x)"
    host.run(["mkdir", cwd])
    value = "a b; $(touch x) 'q' \"d\""
    res = host.run(["sh", "-c", 'printf %s "$HARNESS_V"; echo; pwd'], env={"HARNESS_V": value},
                   cwd=cwd)
    assert res.stdout == f"{value}\n{cwd}\n"
    assert host.run(["ls", "-A", cwd]).stdout == ""


def test_run_missing_cwd_is_reported_as_such(host: Host, workdir: str) -> None:
    res = host.run(["true"], cwd=f"{workdir}/absent", check=False)
    assert not res.ok
    assert f"{workdir}/absent" in res.stderr


def test_run_feeds_input_on_stdin(host: Host) -> None:
    assert host.run(["cat"], input="hello\nwörld").stdout == "hello\nwörld"
    assert host.run(["cat"]).stdout == ""  # no input: stdin is empty, not inherited


def test_run_large_input_and_output_on_both_streams(host: Host) -> None:
    # Megabytes each way: more than an SSH window, so a serial reader would hang.
    data = "x" * 3_000_000
    script = "cat >&2; head -c 3000000 /dev/zero | tr '\\0' y"
    res = host.run(["sh", "-c", script], input=data, timeout=30)
    assert res.stderr == data
    assert res.stdout == "y" * 3_000_000


def test_run_input_ignored_by_the_command(host: Host) -> None:
    assert host.run(["true"], input="z" * 4_000_000, timeout=60).ok


def test_run_timeout_raises_host_error_and_kills_the_command(host: Host) -> None:
    duration = f"{30 + uuid.uuid4().int % 1000 / 1000:.3f}"  # finds our sleep in ps
    t0 = time.monotonic()
    with pytest.raises(HostError, match="timed out"):
        host.run(["sleep", duration], timeout=0.5)
    assert time.monotonic() - t0 < 10
    ps = ["pgrep", "-f", f"^sleep {duration}$"]
    assert wait_until(lambda: host.run(ps, check=False).stdout == "")


# -- start / stop ---------------------------------------------------------------------
def test_start_runs_in_its_own_group_and_stop_kills_the_group(
    host: Host, workdir: str, started: list[Process]
) -> None:
    log = f"{workdir}/logs/deep/proc.log"
    proc = host.start(["sh", "-c", "sleep 60 & echo started; sleep 60; wait"], log_path=log)
    started.append(proc)
    assert proc.host == host.name and proc.log_path == log
    assert int(host.run(["ps", "-o", "pgid=", "-p", str(proc.pid)]).stdout) == proc.pid
    assert host.is_alive(proc)
    assert wait_until(lambda: len(live_group_members(host, proc.pid)) == 3)
    assert wait_until(lambda: host.read_text(log) == "started\n")
    host.stop(proc, timeout_s=5)
    assert not host.is_alive(proc)
    assert wait_until(lambda: live_group_members(host, proc.pid) == [])


def test_start_env_cwd_and_log_appending(host: Host, workdir: str) -> None:
    log = f"{workdir}/out.log"
    host.write_text(log, "before\n")
    proc = host.start(["sh", "-c", 'echo "$HARNESS_V"; pwd; echo err >&2; cat'], log_path=log,
                      env={"HARNESS_V": "it's $(v)"}, cwd="/")
    assert wait_until(lambda: not host.is_alive(proc))
    # stdin is /dev/null, so `cat` ends at once; stderr goes to the same log.
    assert host.read_text(log) == "before\nit's $(v)\n/\nerr\n"


def test_start_passes_hostile_arguments_and_log_path_literally(host: Host, workdir: str) -> None:
    marker = f"{workdir}/pwned-{uuid.uuid4().hex}"
    args = [a.format(marker=marker) for a in HOSTILE]
    log = f"{workdir}/it's a $(log) dir/out log"
    proc = host.start(["printf", "%s\\0", *args], log_path=log, env={"V": "`id`"})
    assert wait_until(lambda: not host.is_alive(proc))
    assert host.read_text(log).split("\0")[:-1] == args
    assert not host.exists(marker)


def test_start_missing_command_raises(host: Host, workdir: str) -> None:
    with pytest.raises(HostError, match="no-such-command-3b1f"):
        host.start(["no-such-command-3b1f"], log_path=f"{workdir}/x.log")


def test_signal_stop_and_continue(host: Host, workdir: str, started: list[Process]) -> None:
    proc = host.start(["sleep", "60"], log_path=f"{workdir}/sleep.log")
    started.append(proc)
    assert host.signal(proc, "STOP")
    assert wait_until(lambda: proc_state(host, proc.pid).startswith("T"))
    assert host.signal(proc, "CONT")
    assert wait_until(lambda: proc_state(host, proc.pid).startswith("S"))
    host.signal(proc, "STOP")
    host.stop(proc, timeout_s=5)  # a stopped process must still be stoppable
    assert not host.is_alive(proc)


def test_is_alive_false_once_the_process_exits(host: Host, workdir: str) -> None:
    proc = host.start(["true"], log_path=f"{workdir}/true.log")
    assert wait_until(lambda: not host.is_alive(proc), timeout_s=5)


def test_a_zombie_is_not_alive(host: Host, workdir: str, started: list[Process]) -> None:
    # The parent lives on without reaping its exited child, which stays a zombie.
    code = "import os, time\nif os.fork() == 0: os._exit(0)\ntime.sleep(60)"
    parent = host.start([host.python, "-c", code], log_path=f"{workdir}/zombie.log")
    started.append(parent)

    def child() -> list[str]:  # [pid, state] once forked
        ps = ["ps", "-o", "pid=,stat=", "--ppid", str(parent.pid)]
        return host.run(ps, check=False).stdout.split()

    assert wait_until(lambda: child()[1:2] in (["Z"], ["Z+"]))
    assert not host.is_alive(Process(host.name, int(child()[0]), ("python",), ""))
    assert host.is_alive(parent)
    assert host.is_alive(Process(host.name, 1, ("init",), ""))  # not ours, yet alive


# -- files ----------------------------------------------------------------------------
def test_put_get_round_trip_binary(host: Host, workdir: str, tmp_path: Path) -> None:
    data = bytes(range(256)) * 1000 + os.urandom(100_000)
    src, back = tmp_path / "src.bin", tmp_path / "back.bin"
    src.write_bytes(data)
    host.put(src, f"{workdir}/remote.bin")
    assert host.run(["wc", "-c", f"{workdir}/remote.bin"]).stdout.split()[0] == str(len(data))
    host.get(f"{workdir}/remote.bin", back)
    assert back.read_bytes() == data


def test_put_get_errors_are_host_errors(host: Host, workdir: str, tmp_path: Path) -> None:
    with pytest.raises(HostError):
        host.get(f"{workdir}/absent", tmp_path / "x")
    with pytest.raises(HostError):
        host.put(tmp_path / "absent", f"{workdir}/x")
    (tmp_path / "f").write_text("f")
    with pytest.raises(HostError):
        host.put(tmp_path / "f", f"{workdir}/no/such/dir/f")


def test_read_write_text(host: Host, workdir: str) -> None:
    path = f"{workdir}/it's a file.txt"
    host.write_text(path, "one\ntwo é\n")
    assert host.read_text(path) == "one\ntwo é\n"
    host.write_text(path, "short")
    assert host.read_text(path) == "short"
    with pytest.raises(CommandError):
        host.read_text(f"{workdir}/absent")


def test_exists_and_remove_tree(host: Host, workdir: str) -> None:
    tree = f"{workdir}/tree"
    host.run(["mkdir", "-p", f"{tree}/a/b"])
    host.write_text(f"{tree}/a/b/f", "x")
    assert host.exists(f"{tree}/a/b/f") and host.exists(tree)
    assert not host.exists(f"{workdir}/absent")
    host.remove_tree(tree)
    assert not host.exists(tree)
    assert host.exists(workdir)
    host.remove_tree(tree)  # removing what is gone is fine


def test_mkdtemp_which_free_port(host: Host) -> None:
    first, second = host.mkdtemp(), host.mkdtemp()
    try:
        assert first != second and host.exists(first) and host.exists(second)
        assert Path(first).name.startswith("harness-")
    finally:
        host.remove_tree(first)
        host.remove_tree(second)
    sh = host.which("sh")
    assert sh is not None and host.exists(sh)
    assert host.which("no-such-command-3b1f") is None
    port = host.free_port()
    assert 0 < port < 65536
