"""HAProxy in TCP mode before Redis, as users run it: Debian's haproxy.cfg (its global and
defaults sections) with a `listen` section of mode tcp, started by hand and measured at
its address on both engines; the kit's example that starts HAProxy itself before the
Redis it starts (`experiments/deployment/redis_haproxy.yaml`), against the same mix on
the Redis directly; and HAProxy before the two replicas of a primary, listed as the
replicas' address (a reader endpoint): the reads spread over both, the check says the
kit's readings of that address came from two servers."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.hosts import LocalHost, free_port
from harness.hosts.endpoint import Credentials, split_hostport
from harness.paths import experiments_dir
from harness.results import iter_run_dirs, read_manifest
from harness.services.redis import redis_command
from tests.fixtures.byhand import ByHand, start_redis
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration

PW = "hap-redis-pw"
DEBIAN_CFG = Path("/etc/haproxy/haproxy.cfg")


def _haproxy() -> str:
    path = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy")
                                       .exists() else None)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("haproxy is not installed; .ci/run installs it")
        pytest.skip("haproxy is not installed (apt-get install haproxy)")
    return path


def debian_haproxy(d: Path, backends: list[str]) -> ByHand:
    """HAProxy with Debian's /etc/haproxy/haproxy.cfg (its `global` and `defaults`:
    mode http, 5 s/50 s timeouts ...) and a `listen` section of our own in mode tcp,
    round robin over `backends`, on a loopback port; in the foreground (-db: Debian's
    init script daemonises it). Its `stats socket` is the system HAProxy's, and left out;
    so are `chroot`, `user` and `group` where the test is not root."""
    path = _haproxy()
    d.mkdir(parents=True, exist_ok=True)
    base = DEBIAN_CFG.read_text() if DEBIAN_CFG.is_file() else "defaults\n\tmode http\n"
    drop = re.compile(r"^\s*(stats socket" + ("" if os.geteuid() == 0 else
                                              r"|chroot|user|group") + r")\b")
    port = free_port("127.0.0.1")
    servers = "".join(f"\tserver r{i} {b}\n" for i, b in enumerate(backends))
    (d / "haproxy.cfg").write_text(
        "".join(line for line in base.splitlines(keepends=True) if not drop.match(line))
        + f"\nlisten redis\n\tbind 127.0.0.1:{port}\n\tmode tcp\n\toption tcplog\n"
          f"\tbalance roundrobin\n{servers}")
    with open(d / "haproxy.log", "wb") as log:
        proc = subprocess.Popen([path, "-db", "-f", str(d / "haproxy.cfg")], stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while True:  # listening: a connection is accepted
        try:
            redis_command("127.0.0.1", port, "PING", auth=Credentials(None, PW))
            break
        except OSError:
            assert proc.poll() is None, (d / "haproxy.log").read_text()
            assert time.monotonic() < deadline, "HAProxy did not listen within 30 s"
            time.sleep(0.05)
    return ByHand(f"127.0.0.1:{port}", PW, procs=[proc])


def _cmd(address: str, *args: str) -> object:
    host, port = split_hostport(address)
    return redis_command(host, port, *args, auth=Credentials(None, PW))


def _gets(address: str) -> int:
    stats = str(_cmd(address, "INFO", "commandstats"))
    m = re.search(r"cmdstat_get:calls=([0-9]+)", stats)
    return int(m.group(1)) if m else 0


def _spec(tmp_path: Path, kv: str, grid: str = "") -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text("name: through\nworkload: redis_mix\nhosts: {client: localhost}\n"
                    f"services:\n  kv: {kv}\nclients: {{hosts: [client], processes: 1, "
                    "connections: 4}\nparams: {key_space: 500, get_ratio: 0.9}\n"
                    + (f"grid: {{{grid}}}\n" if grid else "")
                    + "repetitions: 2\nrun: {ops: 3000, warmup_ops: 100}\n")
    return path


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_redis_behind_debians_haproxy_is_measured_at_its_address_without_errors(
        tmp_path: Path, by_hand: Callable[[ByHand], ByHand], engine: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    require_service("redis", LocalHost())
    redis = by_hand(start_redis(tmp_path, f"requirepass {PW}\n"))
    proxy = by_hand(debian_haproxy(tmp_path / "haproxy", [redis.address]))
    monkeypatch.setenv("KVBENCH_ENGINE", engine)
    monkeypatch.setenv("HPW", PW)
    spec = _spec(tmp_path, f"{{kind: redis, address: '{proxy.address}', "
                           "auth: {password_env: HPW}}")
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert len(mans) == 2
    for m in mans:
        assert m.status == "complete" and m.loadgen["engine"] == engine
        assert m.counts["error"] == m.counts["timeout"] == 0 and m.counts["ok"] > 0
        # The counters read through HAProxy are the Redis's: every op reached it.
        d = m.telemetry["counters"]["kv"]["delta"]
        assert d["cmdstat_get_calls"] + d["cmdstat_set_calls"] >= m.counts["total"]
        assert m.services["kv"]["config"]["port"] == str(redis.port)  # who answered
    assert _gets(redis.address) >= sum(m.counts["ok"] for m in mans) * 0.8


def test_the_kits_haproxy_before_the_kits_redis_against_the_redis_directly(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The examples, shortened: both complete without a failed op; HAProxy's CPU is in
    the telemetry beside the Redis's; `harness compare` pairs the two trees."""
    _haproxy()
    require_service("redis", LocalHost())
    trees = {}
    for name in ("redis_direct", "redis_haproxy"):
        text = (experiments_dir() / "deployment" / f"{name}.yaml").read_text().replace(
            "repetitions: 5", "repetitions: 2").replace(
            "run: {duration_s: 3, warmup_s: 0.5}", "run: {ops: 3000, warmup_ops: 100}")
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(text)
        trees[name] = tmp_path / name
        assert cli_main(["run", str(spec), "--out", str(trees[name]), "--no-progress",
                         "-q"]) == 0
        for m in map(read_manifest, iter_run_dirs(trees[name])):
            assert m.status == "complete" and m.counts["error"] == m.counts["timeout"] == 0
            names = {p.get("service"): p["name"] for p in m.telemetry["processes"]
                     if p["role"] == "server"}
            if name == "redis_haproxy":
                assert names.get("proxy") == "haproxy" and "kv" in names, names
                assert m.services["proxy"]["config"]["after"] == ["kv"]
            d = m.telemetry["counters"]["kv"]["delta"]
            assert d["cmdstat_get_calls"] + d["cmdstat_set_calls"] >= m.counts["total"]
    capsys.readouterr()
    assert cli_main(["compare", str(trees["redis_direct"]), str(trees["redis_haproxy"]),
                     "--allow-different", "servers"]) == 0
    assert "throughput" in capsys.readouterr().out


@pytest.mark.parametrize("engine", ["native", "python"])
def test_haproxy_before_two_replicas_takes_the_reads_spread_over_both(
        tmp_path: Path, by_hand: Callable[[ByHand], ByHand], engine: str,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """A primary and two replicas by hand, HAProxy (Debian's defaults, round robin) before
    the replicas, listed as the replicas' one address: the GETs reach both replicas
    through it, the SETs the primary, nothing fails; the kit's readings of that address
    at a run's two edges came from two servers, and the check says so instead of
    calling them one replica's."""
    require_service("redis", LocalHost())
    primary = by_hand(start_redis(tmp_path, f"requirepass {PW}\n"))
    replicas = []
    for i in range(2):
        d = tmp_path / f"r{i}"
        d.mkdir()
        replicas.append(by_hand(start_redis(d, f"requirepass {PW}\nmasterauth {PW}\n"
                                               f"replicaof 127.0.0.1 {primary.port}\n")))
    deadline = time.monotonic() + 60
    while not all("master_link_status:up" in str(_cmd(r.address, "INFO", "replication"))
                  for r in replicas):  # synced: an event, asked for until it is said
        assert time.monotonic() < deadline, "the replicas did not sync within 60 s"
        time.sleep(0.05)
    proxy = by_hand(debian_haproxy(tmp_path / "haproxy", [r.address for r in replicas]))
    before = [_gets(r.address) for r in replicas]
    monkeypatch.setenv("KVBENCH_ENGINE", engine)
    monkeypatch.setenv("HPW", PW)
    spec = _spec(tmp_path, f"{{kind: redis, address: '{primary.address}', auth: "
                           f"{{password_env: HPW}}, settings: {{replicas: "
                           f"['{proxy.address}']}}}}", grid="read_from: [replicas]")
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    for m in mans:
        assert m.status == "complete" and m.counts["error"] == m.counts["timeout"] == 0
        assert m.counts["miss"] == 0  # the preload was on both before the first read
        assert m.telemetry["counters"]["kv"]["delta"].get("cmdstat_get_calls", 0) == 0
    gets = [_gets(r.address) - b for r, b in zip(replicas, before, strict=True)]
    total = sum(m.counts["total"] for m in mans)
    assert sum(gets) >= 0.8 * total and min(gets) > 0.3 * sum(gets), gets
    # Round robin: the start's reading and the end's reached one replica each, two
    # connections and the clients' four apart.
    capsys.readouterr()
    assert cli_main(["summary", str(raw)]) == 0
    said = capsys.readouterr()
    assert (f"kv replica {proxy.address} in 2 of 2 runs: it answered from two servers"
            in said.out + said.err)
