"""Security, end to end: hostile values reach remote programs literally, credentials
stay out of everything the harness writes, and servers never listen on all interfaces."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import paths
from harness.hosts import LocalHost
from harness.hosts.ssh import SSHHost
from harness.report import build_report
from harness.results import iter_run_dirs, read_manifest, read_ops, verify_run
from harness.run.runner import Runner
from harness.services import SERVICES
from harness.spec import load_spec
from tests.fixtures.servers import require_service
from tests.fixtures.sshd import SSHServer
from tests.services.test_command import KVSERVER

pytestmark = pytest.mark.integration


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A string that would run commands if any shell saw it unquoted: `; rm -rf ~/X`
    (X a canary directory in $HOME that must survive), `$(touch M1)`, backticks, a
    pipe, a background `&`, quotes and a backslash."""
    canary = Path.home() / f".harness-canary-{uuid.uuid4().hex[:8]}"
    canary.mkdir()
    markers = [Path(f"/tmp/pwned-{uuid.uuid4().hex[:8]}-{i}") for i in range(4)]
    text = (f"; rm -rf ~/{canary.name}; $(touch {markers[0]}) `touch {markers[1]}` "
            f"| touch {markers[2]} & touch {markers[3]} '\" \\ *")
    try:
        yield {"text": text, "canary": canary, "markers": markers}
    finally:
        shutil.rmtree(canary, ignore_errors=True)
        for m in markers:
            m.unlink(missing_ok=True)


def test_hostile_values_reach_the_remote_programs_literally_and_nothing_leaks(
        sshd: SSHServer, tmp_path: Path, hostile: dict[str, Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The file-store app and its client on the loopback SSH host, with a hostile
    Python path (every remote command starts with it) and a hostile storage_dir (passed
    in the app's environment). Then: no manifest, service or worker log, or report HTML
    holds the SSH key or the path of the identity file."""
    bad = hostile["text"]
    py_dir = Path(f"{tmp_path}/{bad}")
    py_dir.mkdir(parents=True)
    python = py_dir / "python"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    storage = f"{tmp_path}/files {bad}"
    spec_data = {
        "name": "hostile", "workload": "filestore",
        "hosts": {"box": {"target": sshd.target, "python": str(python),
                          "known_hosts": sshd.known_hosts,
                          "identity_file": sshd.identity_file}},
        "services": {"app": {"kind": "filestore", "host": "box",
                             "settings": {"storage_dir": storage, "memcache": False}}},
        "clients": {"hosts": ["box"], "processes": 1},
        "params": {"op": "insert", "memcache": False, "files": 20, "size_dist": "fixed",
                   "size_bytes": 100, "rtt_probes": 2},
        "run": {"ops": 20, "timeout_s": 5},
    }
    spec_path = tmp_path / "hostile.yaml"
    spec_path.write_text(yaml.safe_dump(spec_data))
    # Keep what the harness writes on the remote host (service and worker logs, configs)
    # before it removes its directories there.
    kept = tmp_path / "kept"
    remove_tree = SSHHost.remove_tree

    def keep_then_remove(self: SSHHost, path: str) -> None:
        if os.path.isdir(path):
            shutil.copytree(path, kept / f"{len(list(kept.glob('*'))) if kept.exists() else 0}",
                            symlinks=True)
        remove_tree(self, path)

    monkeypatch.setattr(SSHHost, "remove_tree", keep_then_remove)
    raw = tmp_path / "raw"
    [outcome] = Runner(load_spec(spec_path), raw, progress=False).run()
    assert outcome.status == "complete", outcome.error

    # Passed literally: the storage directory of that exact name holds the files,
    # and no command hidden in the values ran.
    stored = sorted(p.name for p in Path(storage, "files").iterdir())
    assert stored == sorted(f"c0-{i}.txt" for i in range(20))
    assert hostile["canary"].is_dir()
    assert not [m for m in hostile["markers"] if m.exists()]
    [run_dir] = iter_run_dirs(raw)
    man = verify_run(run_dir)
    assert man.services["app"]["config"]["storage_dir"] == storage
    assert len(read_ops(run_dir)) == 20

    # Nothing about credentials in what the harness wrote.
    report = build_report(raw, tmp_path / "report", pdf=False, progress=False,
                          notebooks_dir=_one_notebook(tmp_path), figures_dir=tmp_path / "fig")
    written = [p for p in [*raw.rglob("*"), *kept.rglob("*"), report["html"]] if p.is_file()]
    logs = [p for p in written if p.suffix == ".log"]
    assert any("uvicorn" in p.read_text(errors="replace").lower() for p in logs), logs
    assert any(p.name.endswith(".json") and "workload" in p.read_text() for p in written)
    key = Path(sshd.identity_file).read_text()
    secrets = [sshd.identity_file, Path(sshd.identity_file).name,
               *(line for line in key.splitlines() if len(line) > 20)]
    assert "PRIVATE KEY" in key and len(secrets) > 3
    for path in written:
        text = path.read_bytes().decode("utf-8", "replace")
        for secret in secrets:
            assert secret not in text, f"{secret[:30]}... found in {path}"
        assert "PRIVATE KEY" not in text, path
    assert read_manifest(run_dir).hosts["box"]["harness_host"] == "box"


def _one_notebook(tmp_path: Path) -> Path:
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    shutil.copy(paths.notebooks_dir() / "00-overview.ipynb", nbs)
    return nbs


# -- listeners ---------------------------------------------------------------------------

def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[1])


def _descends_from(pid: int, ancestor: int) -> bool:
    with contextlib.suppress(OSError, ValueError, IndexError):
        while pid > 1:
            if pid == ancestor:
                return True
            pid = _ppid(pid)
    return False


def my_listeners() -> dict[int, str]:
    """inode -> 'address:port' of every listening TCP socket held by a process started
    (directly or not) by this test process: servers of other test runs are not counted."""
    listening: dict[int, str] = {}
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(table).read_text().splitlines()[1:]:
                f = line.split()
                if f[3] == "0A":
                    addr, port = f[1].rsplit(":", 1)
                    listening[int(f[9])] = f"{_addr(addr, v6)}:{int(port, 16)}"
    me, found = os.getpid(), {}
    for proc in Path("/proc").glob("[0-9]*"):
        if not _descends_from(int(proc.name), me):
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    link = os.readlink(fd)
                    if link.startswith("socket:[") and int(link[8:-1]) in listening:
                        found[int(link[8:-1])] = listening[int(link[8:-1])]
    return found


def _addr(hexaddr: str, v6: bool) -> str:
    import ipaddress

    raw = bytes.fromhex(hexaddr)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return f"[{ipaddress.IPv6Address(words)}]" if v6 else str(ipaddress.IPv4Address(words))


#: How to start each kind cheaply on localhost; a kind missing here fails the test.
CHEAP: dict[str, dict[str, Any]] = {
    "memcached": {},
    "redis": {},
    "postgres": {"fsync": False},
    "filestore": {"memcache": False},
    "redis_cluster": {"masters": 2},
    "pg_cluster": {"mode": "local-cluster", "nodes": 2, "fsync": False},
    "command": {**KVSERVER, "servers": 2},
}
NOT_STARTED = {"external": "starts nothing: it names a server started by someone else"}
NEEDS = {"redis_cluster": "redis", "pg_cluster": "postgres", "postgres": "postgres",
         "redis": "redis", "memcached": "memcached"}


def test_every_service_kind_is_covered() -> None:
    assert set(CHEAP) | set(NOT_STARTED) == set(SERVICES), "list a new kind in CHEAP"


@pytest.mark.parametrize("kind", sorted(CHEAP))
def test_servers_listen_on_the_host_address_never_on_all_interfaces(kind: str) -> None:
    host = LocalHost()
    if kind in NEEDS:
        require_service(NEEDS[kind], host)
    before = my_listeners()
    launcher = SERVICES.get(kind)
    kwargs: dict[str, Any] = {"hosts": {"localhost": host}} if launcher.needs_hosts else {}
    svc = launcher.start(host, f"sec-{kind}", CHEAP[kind], **kwargs)
    try:
        new = {i: a for i, a in my_listeners().items() if i not in before}
    finally:
        svc.stop()
    assert new, f"{kind}: no listening socket found"
    assert all(a.startswith("127.0.0.1:") for a in new.values()), (kind, new)
    assert svc.endpoint.host == "127.0.0.1"
