"""A Redis primary with replicas (`harness.services.redis_replicas`): started by the kit
(`replicas: N`) and synced before it is handed out, stopped with it; found at their
addresses beside a primary started by hand (its password, `replicaof`), each asked who
it is before the grid; and the runs' telemetry: each replica's counters apart, and the
replication offsets, links and lag at the run's edges."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.hosts import LocalHost
from harness.results import iter_run_dirs, read_manifest
from harness.services import SERVICES
from harness.services.redis import redis_command
from tests.fixtures.byhand import ByHand, start_redis
from tests.fixtures.servers import StartServer, require_service

pytestmark = pytest.mark.integration


def _cmd(address: str, password: str, *args: str) -> object:
    from harness.hosts.endpoint import Credentials, split_hostport

    host, port = split_hostport(address)
    return redis_command(host, port, *args, auth=Credentials(None, password))


def test_a_primary_starts_with_its_replicas_synced_and_stops_with_them(
        start_server: StartServer, local_host: LocalHost) -> None:
    svc = start_server("redis", replicas=2)
    ep = svc.endpoint
    replicas = ep.extra["replicas"]
    assert len(replicas) == 2 and f"{ep.host}:{ep.port}" not in replicas
    for address in replicas:  # each synced before the start returned
        info = str(_cmd(address, ep.auth.password, "INFO", "replication"))
        assert "role:slave" in info and "master_link_status:up" in info
        assert f"master_port:{ep.port}" in info
    # A write on the primary reaches both (WAIT: acknowledged by 2), and they refuse one.
    assert _cmd(f"{ep.host}:{ep.port}", ep.auth.password, "SET", "k", "v") == "OK"
    assert _cmd(f"{ep.host}:{ep.port}", ep.auth.password, "WAIT", "2", "60000") == 2
    assert [_cmd(a, ep.auth.password, "GET", "k") for a in replicas] == ["v", "v"]
    with pytest.raises(Exception, match="READONLY"):
        _cmd(replicas[0], ep.auth.password, "SET", "k", "w")
    info = svc.info()
    assert [r["address"] for r in info["replicas"]] == replicas
    assert info["config"]["replicas"] == 2 and len(info["pids"]) == 3
    assert all("masterauth" not in r["config"] for r in info["replicas"])
    redis = SERVICES.get("redis")
    state = redis.replication(svc)
    assert state is not None and state["connected_replicas"] == 2
    assert [(r["address"], r["link"], r["behind_bytes"]) for r in state["replicas"]] == [
        (a, "up", 0) for a in replicas]
    counters = redis.counters(svc)
    assert counters["replica0.cmdstat_set_calls"] == counters["cmdstat_set_calls"] == 1
    assert counters["replica1.connected_clients"] >= 1
    delta = redis.counter_delta(counters, {**counters, "replica1.connected_clients": 7})
    assert delta["replica1.connected_clients"] == 7  # a member's gauge is a gauge
    procs = list(svc.processes)
    svc.stop()
    assert not any(local_host.is_alive(p) for p in procs)
    assert not Path(str(svc.workdir)).exists()


def test_replicas_with_tls_or_a_list_of_addresses_are_refused_at_a_launch(
        start_server: StartServer) -> None:
    redis = SERVICES.get("redis")
    assert "not with tls: true yet" in redis.validate({"replicas": 1, "tls": True})[0]
    assert "'nope' is not HOST:PORT" in redis.validate({"replicas": ["nope"]})[0]
    require_service("redis", LocalHost())
    with pytest.raises(Exception, match="replicas lists addresses for a Redis at an address"):
        start_server("redis", replicas=["127.0.0.1:6379"])


PW = "repl-pw-1"


def _synced(replica: ByHand) -> None:
    """Wait until a replica started by hand has synced with its primary (an event: its
    link up, asked again until it says so)."""
    import time

    deadline = time.monotonic() + 60
    while "master_link_status:up" not in str(_cmd(replica.address, PW, "INFO",
                                                  "replication")):
        assert time.monotonic() < deadline, "the replica did not sync within 60 s"
        time.sleep(0.05)


@pytest.fixture
def by_hand_set(tmp_path: Path, by_hand: Callable[[ByHand], ByHand]) -> dict[str, ByHand]:
    """A primary and two replicas, started by hand as a user starts them: their own
    redis.conf, a password (requirepass, masterauth), `replicaof` the primary."""
    require_service("redis", LocalHost())
    primary = by_hand(start_redis(tmp_path, f"requirepass {PW}\n"))
    out = {"primary": primary}
    for i in range(2):
        d = tmp_path / f"r{i}"
        d.mkdir()
        out[f"r{i}"] = by_hand(start_redis(d, f"requirepass {PW}\nmasterauth {PW}\n"
                                              f"replicaof 127.0.0.1 {primary.port}\n"))
        _synced(out[f"r{i}"])
    return out


def _spec(tmp_path: Path, kv: str, grid: str = "read_from: [primary, replicas]") -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text("name: mine\nworkload: redis_mix\nhosts: {client: localhost}\n"
                    f"services:\n  kv: {kv}\nclients: {{hosts: [client], processes: 1, "
                    "connections: 4}\nparams: {key_space: 500, get_ratio: 0.8}\n"
                    f"grid: {{{grid}}}\nrepetitions: 1\nrun: {{ops: 3000, warmup_ops: 100}}\n")
    return path


@pytest.mark.parametrize("engine", ["native", "python"])
def test_replicas_at_their_addresses_take_the_reads_of_read_from_replicas(
        tmp_path: Path, by_hand_set: dict[str, ByHand], engine: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVBENCH_ENGINE", engine)
    monkeypatch.setenv("RPW", PW)
    p, r0, r1 = by_hand_set["primary"], by_hand_set["r0"], by_hand_set["r1"]
    spec = _spec(tmp_path, f"{{kind: redis, address: '{p.address}', auth: {{password_env: "
                           f"RPW}}, settings: {{replicas: ['{r0.address}', '{r1.address}']}}}}")
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = {m.grid_point["read_from"]: m for m in map(read_manifest, iter_run_dirs(raw))}
    assert set(mans) == {"primary", "replicas"}
    for where, m in mans.items():
        assert m.status == "complete" and m.loadgen["engine"] == engine
        assert m.counts["error"] == m.counts["timeout"] == m.counts["miss"] == 0, m.counts
        delta = m.telemetry["counters"]["kv"]["delta"]
        gets = [delta.get(f"{k}cmdstat_get_calls", 0) for k in ("", "replica0.", "replica1.")]
        sets = [delta.get(f"{k}cmdstat_set_calls", 0) for k in ("", "replica0.", "replica1.")]
        # The sets on the primary, applied by both replicas; the gets where asked.
        assert sets[0] > 0 and sets[1] == sets[2] == sets[0], sets
        if where == "primary":
            assert gets[0] >= 0.7 * m.counts["total"] and gets[1:] == [0, 0], gets
        else:  # spread over both, evenly (each entry of the period reads from one)
            assert gets[0] == 0 and min(gets[1:]) > 0.4 * sum(gets[1:]), gets
        repl = m.telemetry["replication"]["kv"]
        assert [r["address"] for r in repl["end"]["replicas"]] == [r0.address, r1.address]
        assert repl["end"]["offset"] > repl["start"]["offset"]
        assert all(r["link"] == "up" for r in repl["end"]["replicas"])
        # One server each at both edges, and its lag as the primary lists it.
        assert [r["run_id"] for r in repl["start"]["replicas"]] == [
            r["run_id"] for r in repl["end"]["replicas"]]
        assert all(isinstance(r["lag_s"], int) for r in repl["end"]["replicas"])
    kv = mans["replicas"].services["kv"]
    assert [r["address"] for r in kv["config"]["replicas"]] == [r0.address, r1.address]
    assert all(proc.poll() is None for s in by_hand_set.values() for proc in s.procs)


@pytest.mark.parametrize("case", ["a primary", "nothing there", "another primary's",
                                  "a number"])
def test_a_replica_address_that_is_none_is_one_line_before_the_grid(
        tmp_path: Path, by_hand_set: dict[str, ByHand], by_hand: Callable[[ByHand], ByHand],
        case: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("RPW", PW)
    p = by_hand_set["primary"]
    listed = {"a primary": f"['{p.address}']", "nothing there": "['127.0.0.1:1']",
              "a number": "2"}.get(case)
    if case == "another primary's":  # synced, but with a primary of its own
        for d in (tmp_path / "o", tmp_path / "o2"):
            d.mkdir()
        other = by_hand(start_redis(tmp_path / "o", f"requirepass {PW}\n"))
        stray = by_hand(start_redis(tmp_path / "o2", f"requirepass {PW}\nmasterauth {PW}\n"
                                                     f"replicaof 127.0.0.1 {other.port}\n"))
        _synced(stray)
        listed = f"['{stray.address}']"
    spec = _spec(tmp_path, f"{{kind: redis, address: '{p.address}', auth: {{password_env: "
                           f"RPW}}, settings: {{replicas: {listed}}}}}", grid="read_from: "
                                                                          "[replicas]")
    assert cli_main(["run", str(spec), "--out", str(tmp_path / "raw"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "services.kv" in err[0] and "Traceback" not in err[0], err
    says = {"a primary": "is no replica (role: master)", "nothing there": "no answer",
            "another primary's": "is not a synced replica of",
            "a number": "at an address, list the replicas' HOST:PORT"}[case]
    assert says in err[0] and PW not in err[0]


def test_read_from_replicas_without_replicas_is_refused_by_validate(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec = _spec(tmp_path, "{kind: redis, host: client}")
    assert cli_main(["validate", str(spec)]) == 2
    assert "read_from: replicas needs a redis service with replicas" in (
        capsys.readouterr().err)


def test_a_replica_lost_mid_run_is_named_by_the_check(
        tmp_path: Path, by_hand_set: dict[str, ByHand], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    """The primary's reads and writes go on; replica r1 is killed once the run's preload
    is on the replicas (the primary's WAIT is counted): at the run's end its link is
    not answering, and `harness summary` names it."""
    import threading
    import time

    monkeypatch.setenv("RPW", PW)
    p, r0, r1 = by_hand_set["primary"], by_hand_set["r0"], by_hand_set["r1"]
    spec = _spec(tmp_path, f"{{kind: redis, address: '{p.address}', auth: {{password_env: "
                           f"RPW}}, settings: {{replicas: ['{r0.address}', '{r1.address}']}}}}",
                 grid="read_from: [primary]")
    spec.write_text(spec.read_text().replace("run: {ops: 3000, warmup_ops: 100}",
                                             "run: {duration_s: 3, warmup_s: 0.2}"))

    def kill_after_the_preload() -> None:
        deadline = time.monotonic() + 120
        while "cmdstat_wait:" not in str(_cmd(p.address, PW, "INFO", "commandstats")):
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)
        os.killpg(r1.procs[0].pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_after_the_preload)
    killer.start()
    raw = tmp_path / "raw"
    try:
        code = cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"])
    finally:
        killer.join()
    assert code == 0
    [m] = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert m.status == "complete" and m.counts["error"] == 0
    end = m.telemetry["replication"]["kv"]["end"]["replicas"]
    assert end[0]["link"] == "up" and end[1]["link"] == "not answering", end
    capsys.readouterr()
    assert cli_main(["summary", str(raw)]) == 0
    out = capsys.readouterr().out
    assert f"kv replica {r1.address} in the run: its link was not answering at the run's " \
           "end" in out, out

