"""Your own build: `binary:` runs the executable the spec names, as a grid key too, and
each manifest records which one ran (its path and sha256) and the version it reported."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.hosts import LocalHost
from harness.results import iter_run_dirs, read_manifest
from harness.services import SERVICES
from harness.services.postgres import find_pg_binaries
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration


def _other_build(src: str, dest: Path) -> Path:
    """A copy of `src` with bytes appended past its ELF image: it runs the same, but is
    another file (another sha256), as a build of one's own would be."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dest)
    with dest.open("ab") as f:
        f.write(b"\0kvbench-own-build\0")
    return dest


@pytest.mark.parametrize("kind, workload, name", [
    ("redis", "redis_mix", "redis-server"), ("memcached", "memcache_mix", "memcached")])
def test_two_builds_in_one_interleaved_grid_are_told_apart(
        tmp_path: Path, kind: str, workload: str, name: str) -> None:
    require_service(kind, LocalHost())
    system = shutil.which(name)
    assert system is not None
    own = _other_build(system, tmp_path / "build" / name)
    spec = tmp_path / "builds.yaml"
    spec.write_text(f"name: builds\nworkload: {workload}\n"
                    "hosts: {server: localhost, client: localhost}\n"
                    f"services:\n  kv: {{kind: {kind}, host: server}}\n"
                    "clients: {hosts: [client], processes: 1, connections: 2}\n"
                    "params: {key_space: 200}\n"
                    f"grid:\n  services.kv.binary: ['{system}', '{own}']\n"
                    "repetitions: 2\nrun: {ops: 300}\n")
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert {m.status for m in mans} == {"complete"} and len(mans) == 4
    seen = {m.grid_point["services.kv.binary"]: m.services["kv"]["config"]["binary"]
            for m in mans}
    assert seen[str(own)] == {"path": str(own), "sha256": hashlib.sha256(
        own.read_bytes()).hexdigest()}
    assert seen[system]["sha256"] == hashlib.sha256(
        Path(seen[system]["path"]).read_bytes()).hexdigest() != seen[str(own)]["sha256"]
    assert {m.services["kv"]["version"] for m in mans} == {mans[0].services["kv"]["version"]}
    # Run in grid order, interleaved: each build's two runs are not back to back.
    order = [m.grid_point["services.kv.binary"] for m in sorted(mans, key=lambda m:
                                                                  m.started_utc)]
    assert order[0] != order[1]


def test_a_postgres_of_ones_own_takes_its_tools_from_beside_it(tmp_path: Path) -> None:
    """binary: names `postgres`; initdb and psql are the ones beside it (here links to
    the system's, as an installation of one's own under another prefix would be)."""
    require_service("postgres", LocalHost())
    bins = find_pg_binaries(LocalHost())
    # Where the server's own user (postgres, under root) can reach it, as a real prefix is.
    prefix = Path(tempfile.mkdtemp(prefix="kvbench-own-pg-", dir="/tmp"))
    prefix.chmod(0o755)
    own = prefix / "bin"
    own.mkdir()
    for b in ("postgres", "initdb", "psql"):
        (own / b).symlink_to(str(bins[b]))
    try:
        svc = SERVICES.get("postgres").start(LocalHost(), "own",
                                              {"binary": str(own / "postgres")})
        try:
            assert svc.config["binary"]["path"] == str(Path(str(bins["postgres"])).resolve())
        finally:
            svc.stop()
    finally:
        shutil.rmtree(prefix)


@pytest.mark.parametrize("value, says", [
    ("relative/redis-server", "not an absolute path"),
    ("/nonexistent/redis-server", "not an executable file"),
])
def test_a_binary_that_cannot_run_is_refused_before_anything_starts(
        tmp_path: Path, value: str, says: str, capsys: pytest.CaptureFixture) -> None:
    require_service("redis", LocalHost())
    spec = tmp_path / "b.yaml"
    spec.write_text("name: b\nworkload: redis_mix\nhosts: {server: localhost, client: "
                    "localhost}\nservices:\n  kv: {kind: redis, host: server, settings: "
                    f"{{binary: '{value}'}}}}\nclients: {{hosts: [client]}}\nrun: {{ops: 10}}\n")
    code = cli_main(["run", str(spec), "--out", str(tmp_path / "raw"), "-q"])
    assert code == 2 and says in capsys.readouterr().err
