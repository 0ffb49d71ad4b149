"""Proxies and composed services: a `command` service in front of others (`after:`),
its configuration files written from templates that name them. Real proxies, as users
run them: twemproxy (nutcracker) over two memcached the kit starts, and pgbouncer with
transaction pooling before the kit's PostgreSQL (scram, its random password)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.hosts import LocalHost
from harness.paths import experiments_dir
from harness.results import iter_run_dirs, read_manifest
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration


def _need(binary: str) -> None:
    import os

    if shutil.which(binary) is None and not Path(f"/usr/sbin/{binary}").exists():
        if os.environ.get("CI"):
            pytest.fail(f"{binary} is not installed; .ci/run installs it")
        pytest.skip(f"{binary} is not installed (apt-get install {binary})")


def _short(spec: Path, tmp_path: Path) -> Path:
    """The example spec, two short repetitions."""
    text = spec.read_text().replace("repetitions: 5", "repetitions: 2").replace(
        "duration_s: 3, warmup_s: 0.5", "duration_s: 1, warmup_s: 0.2").replace(
        "repetitions: 2\nrun: {duration_s: 2}", "repetitions: 1\nrun: {duration_s: 1}")
    out = tmp_path / spec.name
    out.write_text(text)
    return out


def test_nutcracker_over_two_memcached_serves_the_workload_and_spreads_the_keys(
        tmp_path: Path) -> None:
    _need("nutcracker")
    require_service("memcached", LocalHost())
    spec = _short(experiments_dir() / "deployment" / "memcache_nutcracker.yaml", tmp_path)
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert {m.status for m in mans} == {"complete"} and len(mans) == 2
    for m in mans:
        assert sum(m.counts.get(s, 0) for s in ("error", "timeout")) == 0
        assert m.services["proxy"]["config"]["after"] == ["cache_a", "cache_b"]
        gets = {n: m.telemetry["counters"][n]["delta"]["cmd_get"] for n in ("cache_a",
                                                                            "cache_b")}
        # Every get reached a backend through the proxy, and both backends served.
        assert sum(gets.values()) >= m.counts["ok"] * 0.5 and min(gets.values()) > 0, gets
    # The direct baseline is the same experiment: `harness compare` pairs them.
    direct = _short(experiments_dir() / "deployment" / "memcache_direct.yaml", tmp_path)
    assert cli_main(["run", str(direct), "--out", str(tmp_path / "direct"),
                     "--no-progress", "-q"]) == 0
    assert cli_main(["compare", str(tmp_path / "direct"), str(raw),
                     "--allow-different", "servers"]) == 0


def test_pgbouncer_before_the_kits_postgres_runs_the_datastore_workload(
        tmp_path: Path) -> None:
    _need("pgbouncer")
    require_service("postgres", LocalHost())
    require_service("memcached", LocalHost())
    spec = _short(experiments_dir() / "deployment" / "datastore_pgbouncer.yaml", tmp_path)
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert {m.status for m in mans} == {"complete"}
    for m in mans:
        assert m.counts["ok"] > 0 and m.counts.get("error", 0) == 0, m.error
        assert m.services["pool"]["config"]["after"] == ["db"]
        # The pooled backends stay connected, so PostgreSQL flushes their statistics
        # late (PostgreSQL 15: at most once a second, when idle): counted, not all.
        db = m.telemetry["counters"]["db"]["delta"]
        assert db["xact_commit"] > 0 and db["waiting"] > 0
        # Those backends (each in a session of its own) are the server's CPU, not
        # "other" processes' (they were, when only the postmaster's session counted).
        [server] = [p for p in m.telemetry["processes"] if p.get("service") == "db"]
        assert server["cpu_util"] > 0.05, m.telemetry["processes"]
    # The proxy logged in with the server's password: written in its own files only.
    for f in (p for p in raw.rglob("*") if p.is_file()):
        assert b"password = " not in f.read_bytes() or b"{services.db.password}" in \
            f.read_bytes()


def test_a_template_naming_a_service_it_is_not_in_front_of_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    require_service("memcached", LocalHost())
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        "name: bad\nworkload: memcache_mix\nhosts: {server: localhost, client: localhost}\n"
        "services:\n  a: {kind: memcached, host: server}\n  b: {kind: memcached, host: server}\n"
        "  proxy: {kind: command, host: server, after: [a], settings: {protocol: memcache, "
        "provides: memcached, command: 'nutcracker -c {workdir}/x.yml', files: {x.yml: "
        "'{services.b.address}'}}}\nclients: {hosts: [client]}\nrun: {ops: 10}\n")
    code = cli_main(["run", str(spec), "--out", str(tmp_path / "raw"), "-q"])
    err = capsys.readouterr().err
    # b is not behind the proxy, so the workload would see two memcached: refused first.
    assert code == 2 and "needs exactly one 'memcached' service, found 2" in err
