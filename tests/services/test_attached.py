"""Servers at an address: started by hand as a user starts them (their own users and
passwords, no default user), measured by `harness run` without the kit starting or
stopping anything there; and every way that goes wrong, in one line before the grid."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.hosts import LocalHost
from harness.results import iter_run_dirs, read_manifest
from tests.fixtures.byhand import ByHand, start_memcached, start_postgres, start_redis
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration

ACL = "user default off\nuser bench on >{pw} ~* &* +@all\n"


def _spec(tmp_path: Path, name: str, workload: str, services: str, params: str,
          grid: str = "clients.connections: [1, 4]") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nworkload: {workload}\nhosts: {{client: localhost}}\n"
                    f"services:\n{services}\nclients: {{hosts: [client], processes: 1, "
                    f"connections: 1}}\nparams: {params}\ngrid: {{{grid}}}\n"
                    "repetitions: 2\nrun: {ops: 400, warmup_ops: 20}\n")
    return path


def _no_secret(tmp_path: Path, secret: str) -> None:
    """Nothing the run or the report wrote holds `secret`."""
    for root in (tmp_path / "raw", tmp_path / "raw2", tmp_path / "report"):
        for f in (p for p in root.rglob("*") if p.is_file()):
            assert secret.encode() not in f.read_bytes(), f"password in {f}"


@pytest.fixture
def acl_redis(tmp_path: Path, by_hand: Callable[[ByHand], ByHand]) -> ByHand:
    require_service("redis", LocalHost())
    pw = "bench-acl-" + tmp_path.name[-8:]
    server = by_hand(start_redis(tmp_path, ACL.format(pw=pw)))
    server.password, server.user = pw, "bench"
    return server


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_redis_with_an_acl_user_and_no_default_user_is_measured_at_its_address(
        tmp_path: Path, acl_redis: ByHand, engine: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("BENCH_REDIS_PW", acl_redis.password)
    monkeypatch.setenv("KVBENCH_ENGINE", engine)
    spec = _spec(tmp_path, "my_redis", "redis_mix",
                 f"  kv: {{kind: redis, address: '{acl_redis.address}', "
                 "auth: {user: bench, password_env: BENCH_REDIS_PW}}",
                 "{key_space: 500}")
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert len(mans) == 4 and {m.status for m in mans} == {"complete"}
    assert {m.loadgen["engine"] for m in mans} == {engine}
    kv = mans[0].services["kv"]
    assert kv["started_by"].startswith("not the kit")
    assert kv["auth"] == "user bench, password from environment variable BENCH_REDIS_PW"
    assert kv["observed"] is False and kv["pids"] == []
    assert kv["config"]["port"] == str(acl_redis.port) and "requirepass" not in kv["config"]
    tele = mans[0].telemetry
    assert tele["unobserved"][0]["service"] == "kv"
    delta = tele["counters"]["kv"]["delta"]
    assert delta["cmdstat_get_calls"] + delta["cmdstat_set_calls"] >= 400
    # The kit started and stopped nothing: the server is still up, its data still there.
    assert acl_redis.procs[0].poll() is None
    cli_main(["report", "--raw", str(raw), "--out", str(tmp_path / "report"), "--no-pdf"])
    capsys.readouterr()
    _no_secret(tmp_path, acl_redis.password)


@pytest.mark.parametrize("case", ["wrong password", "no password", "env unset",
                                  "nothing there", "file missing"])
def test_what_goes_wrong_is_one_line_before_the_grid(
        tmp_path: Path, acl_redis: ByHand, case: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    auth = {"wrong password": "{user: bench, password_env: PW}",
            "no password": None, "env unset": "{user: bench, password_env: PW_UNSET}",
            "nothing there": "{user: bench, password_env: PW}",
            "file missing": f"{{user: bench, password_file: '{tmp_path}/nope'}}"}[case]
    address = ("127.0.0.1:1" if case == "nothing there" else acl_redis.address)
    monkeypatch.setenv("PW", "wrong" if case == "wrong password" else acl_redis.password)
    monkeypatch.delenv("PW_UNSET", raising=False)
    entry = f"{{kind: redis, address: '{address}'" + (f", auth: {auth}" if auth else "") + "}"
    spec = _spec(tmp_path, "bad", "redis_mix", f"  kv: {entry}", "{key_space: 10}")
    assert cli_main(["run", str(spec), "--out", str(tmp_path / "raw"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "services.kv" in err[0] and "Traceback" not in err[0], err
    says = {"wrong password": "check the user and the password in environment variable PW",
            "no password": "it wants a password", "env unset": "PW_UNSET is not set",
            "nothing there": "Connection refused", "file missing": "nope"}[case]
    assert says in err[0]
    assert acl_redis.password not in err[0]
    assert not (tmp_path / "raw").exists() or not list(iter_run_dirs(tmp_path / "raw"))


@pytest.mark.parametrize("entry, says", [
    ("{kind: redis, address: '127.0.0.1:6379', auth: {password: hunter2}}",
     "a password is never written in a spec"),
    ("{kind: redis, address: '127.0.0.1:6379', settings: {maxmemory: 64mb}}",
     "settings.maxmemory: a launcher's setting"),
    ("{kind: memcached, address: '127.0.0.1:6379', auth: {password_env: X}}",
     "memcached takes no password"),
    ("{kind: redis, address: '0.0.0.0:6379'}", "means every interface"),
    ("{kind: redis, address: 'somewhere'}", "is not HOST:PORT"),
    ("{kind: filestore, address: '127.0.0.1:80'}", "cannot measure a filestore"),
    ("{kind: redis, auth: {password_env: X}}", "credentials are for a server at an address"),
])
def test_an_address_entry_is_checked_before_anything_connects(
        tmp_path: Path, entry: str, says: str, capsys: pytest.CaptureFixture) -> None:
    workload = "memcache_mix" if "memcached" in entry else "redis_mix"
    spec = _spec(tmp_path, "bad", workload, f"  kv: {entry}", "{key_space: 10}",
                 grid="clients.connections: [1]")
    assert cli_main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and "hunter2" not in err


def test_a_workload_that_wipes_data_is_never_pointed_at_an_address(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec = tmp_path / "y.yaml"
    spec.write_text("name: y\nworkload: ycsb\nhosts: {client: localhost}\nservices:\n"
                    "  kv: {kind: memcached, address: '127.0.0.1:11211'}\n"
                    "clients: {hosts: [client]}\nrun: {ops: 10}\n")
    assert cli_main(["validate", str(spec)]) == 2
    assert "wipes data on its memcached (flush_all" in capsys.readouterr().err


def test_postgres_and_memcached_at_addresses_run_the_datastore_workload(
        tmp_path: Path, by_hand: Callable[[ByHand], ByHand],
        capsys: pytest.CaptureFixture) -> None:
    """A PostgreSQL of its own (scram, a user owning a database) and a memcached, both
    started by hand: the datastore workload makes its own tables there; a user who may
    not create tables is named with the privilege, before the grid."""
    require_service("postgres", LocalHost())
    require_service("memcached", LocalHost())
    pg = by_hand(start_postgres(tmp_path / "pg", "bench", "pg-pass-" + tmp_path.name[-6:],
                                "benchdb", grants="CREATE USER weak PASSWORD 'weak-pw-1';"
                                " REVOKE CREATE ON SCHEMA public FROM PUBLIC"))
    mc = by_hand(start_memcached())
    (tmp_path / "pw").write_text(pg.password + "\n")
    (tmp_path / "pw").chmod(0o600)  # as ssh, the kit refuses a file others can read
    services = (f"  db: {{kind: postgres, address: '{pg.address}', database: benchdb, "
                f"auth: {{user: bench, password_file: '{tmp_path}/pw'}}}}\n"
                f"  cache: {{kind: memcached, address: '{mc.address}'}}")
    spec = _spec(tmp_path, "my_ds", "datastore_memcache", services,
                 "{value_size_bytes: 100}", grid="op: [store_write, store_read, mem_write]")
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert {m.status for m in mans} == {"complete"} and len(mans) == 6
    db = mans[0].services["db"]
    assert db["config"]["database"] == "benchdb" and db["config"]["user"] == "bench"
    assert "server_version" in db["config"] and db["version"].split(".")[0].isdigit()
    assert mans[0].telemetry["counters"]["db"]["delta"]["xact_commit"] > 0
    (tmp_path / "weak").write_text("weak-pw-1\n")
    (tmp_path / "weak").chmod(0o600)
    spec.write_text(spec.read_text().replace("user: bench", "user: weak").replace(
        f"{tmp_path}/pw", f"{tmp_path}/weak"))
    assert cli_main(["run", str(spec), "--out", str(tmp_path / "raw2"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "user 'weak' may not create tables in schema public" in err
    assert "GRANT CREATE ON SCHEMA public TO weak" in err
    _no_secret(tmp_path, pg.password)
    assert json.dumps(mans[0].to_dict()).count("pg-pass") == 0
    assert sys.executable  # the kit's own interpreter measured; nothing started there


# --- TLS: servers started by hand with a CA of the test's own (openssl) -------------

def _ca(d: Path, name: str = "127.0.0.1") -> dict[str, Path]:
    """A CA and a server certificate for `name`, made with the openssl command line."""
    import subprocess

    d.mkdir(parents=True, exist_ok=True)
    p = {k: d / f"{k}.pem" for k in ("ca", "ca-key", "cert", "key")}
    san = f"IP:{name}" if name[0].isdigit() else f"DNS:{name}"
    run = lambda *a: subprocess.run(["openssl", *a], check=True,  # noqa: E731
                                    capture_output=True, timeout=60)
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", str(p["ca-key"]), "-out", str(p["ca"]), "-days", "2", "-subj", "/CN=test CA")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
        str(p["key"]), "-out", str(d / "req.pem"), "-subj", f"/CN={name}")
    (d / "ext.cnf").write_text(f"subjectAltName={san}\n")
    run("x509", "-req", "-in", str(d / "req.pem"), "-CA", str(p["ca"]), "-CAkey",
        str(p["ca-key"]), "-CAcreateserial", "-out", str(p["cert"]), "-days", "2",
        "-extfile", str(d / "ext.cnf"))
    for f in p.values():
        f.chmod(0o644)  # memcached and Redis may run as another user
    return p


@pytest.fixture
def tls_redis(tmp_path: Path, by_hand: Callable[[ByHand], ByHand]) -> tuple[ByHand, dict]:
    """Redis serving TLS only (no plain port), an ACL user and no default user."""
    require_service("redis", LocalHost())
    ca = _ca(tmp_path / "ca")
    pw = "tls-acl-" + tmp_path.name[-8:]
    conf = (f"{ACL.format(pw=pw)}tls-cert-file {ca['cert']}\ntls-key-file {ca['key']}\n"
            f"tls-ca-cert-file {ca['ca']}\ntls-auth-clients no\n")
    server = by_hand(start_redis(tmp_path, conf, tls_only=True))
    server.password, server.user = pw, "bench"
    return server, ca


def _tls_spec(tmp_path: Path, server: ByHand, tls: str, auth: bool = True) -> Path:
    entry = (f"{{kind: redis, address: '{server.address}', tls: {tls}"
             + (", auth: {user: bench, password_env: TLS_PW}" if auth else "") + "}")
    return _spec(tmp_path, "my_tls_redis", "redis_mix", f"  kv: {entry}",
                 "{key_space: 300}")


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_tls_only_redis_with_an_acl_user_is_measured_on_both_engines(
        tmp_path: Path, tls_redis: tuple[ByHand, dict], engine: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    server, ca = tls_redis
    monkeypatch.setenv("TLS_PW", server.password)
    monkeypatch.setenv("KVBENCH_ENGINE", engine)
    spec = _tls_spec(tmp_path, server, f"{{ca_file: '{ca['ca']}'}}")
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert {m.status for m in mans} == {"complete"} and len(mans) == 4
    assert {m.loadgen["engine"] for m in mans} == {engine}
    assert mans[0].services["kv"]["tls"] == "TLS"
    assert min(m.counts["measured"] for m in mans) == 400
    _no_secret(tmp_path, server.password)


@pytest.mark.parametrize("case, says", [
    ("plain to a TLS port", "a TLS port needs tls:"),
    ("unknown CA", "certificate is not signed by a CA the kit trusts"),
    ("name mismatch", "set tls.server_name to the name it carries"),
])
def test_tls_mistakes_are_one_line_before_the_grid(
        tmp_path: Path, tls_redis: tuple[ByHand, dict], case: str, says: str,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    server, ca = tls_redis
    monkeypatch.setenv("TLS_PW", server.password)
    other = _ca(tmp_path / "other")
    tls = {"plain to a TLS port": "false",
           "unknown CA": f"{{ca_file: '{other['ca']}'}}",
           "name mismatch": f"{{ca_file: '{ca['ca']}', server_name: elsewhere.example}}"}[case]
    spec = _tls_spec(tmp_path, server, tls)
    assert cli_main(["run", str(spec), "--out", str(tmp_path / "raw"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "services.kv" in err[0], err
    assert says in err[0] and "Traceback" not in err[0]


def test_tls_without_verification_is_said_before_the_runs_and_in_every_manifest(
        tmp_path: Path, tls_redis: tuple[ByHand, dict], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    """`tls: {verify: false}` to a server whose CA the kit is not given: the runs work,
    and a reader is told the server's identity was not checked, on stderr before
    anything runs (also in --dry-run) and in every manifest (which the report quotes)."""
    server, _ = tls_redis
    monkeypatch.setenv("TLS_PW", server.password)
    spec = _tls_spec(tmp_path, server, "{verify: false}")
    said = (f"warning: services.kv: tls.verify is false: the server's certificate is not "
            f"checked, so these runs cannot tell the server at {server.address} from anyone")
    assert cli_main(["run", str(spec), "--out", str(tmp_path / "raw"), "--dry-run"]) == 0
    assert said in capsys.readouterr().err
    assert cli_main(["validate", str(spec), "--out", str(tmp_path / "raw")]) == 0
    assert said in capsys.readouterr().err
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    assert capsys.readouterr().err.startswith(said)
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert {m.status for m in mans} == {"complete"} and len(mans) == 4
    assert {m.services["kv"]["tls"] for m in mans} == {"TLS, certificate NOT verified"}
    _no_secret(tmp_path, server.password)


def test_memcached_with_tls_started_by_hand_is_measured(
        tmp_path: Path, by_hand: Callable[[ByHand], ByHand]) -> None:
    """memcached -Z with the test's CA: measured on the native core over TLS."""
    require_service("memcached", LocalHost())
    ca = _ca(tmp_path / "ca")
    mc = by_hand(start_memcached("-Z", "-o", f"ssl_chain_cert={ca['cert']},"
                                             f"ssl_key={ca['key']}"))
    spec = _spec(tmp_path, "my_tls_mc", "memcache_mix",
                 f"  kv: {{kind: memcached, address: '{mc.address}', "
                 f"tls: {{ca_file: '{ca['ca']}'}}}}", "{key_space: 300}")
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert {m.status for m in mans} == {"complete"}
    assert {m.loadgen["engine"] for m in mans} == {"native"}


def test_a_redis_cluster_at_an_address_is_followed_from_one_seed_node(
        tmp_path: Path, by_hand: Callable[[ByHand], ByHand],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Three cluster-enabled nodes started and joined by hand (redis-cli --cluster
    create), a password on each: the kit is given one node; it reads the slots, sends
    each op to its key's master, reads every master's counters, and flushes nothing."""
    import shutil
    import subprocess

    from harness.services.redis_cluster import free_port_pair

    require_service("redis_cluster", LocalHost())
    pw = "cluster-pw-" + tmp_path.name[-6:]
    nodes = []
    for i in range(3):
        d = tmp_path / f"n{i}"
        d.mkdir()
        nodes.append(by_hand(start_redis(
            d, f"cluster-enabled yes\nrequirepass {pw}\nmasterauth {pw}\n"
               "cluster-config-file nodes.conf\n", port=free_port_pair(LocalHost()))))
    subprocess.run([shutil.which("redis-cli") or "redis-cli", "--cluster", "create",
                    *(n.address for n in nodes), "--cluster-yes"], check=True,
                   capture_output=True, timeout=60, env={"REDISCLI_AUTH": pw, "PATH": "/usr/bin"})
    monkeypatch.setenv("CLUSTER_PW", pw)
    spec = _spec(tmp_path, "my_cluster", "kvstore",
                 f"  kv: {{kind: redis_cluster, address: '{nodes[1].address}', "
                 "auth: {password_env: CLUSTER_PW}}",
                 "{records_per_client: 300, backend: redis_cluster}",
                 grid="clients.connections: [2]")
    raw = tmp_path / "raw"
    import time

    for _ in range(100):  # until every node says the cluster is up
        states = [subprocess.run(["redis-cli", "-p", str(n.port), "cluster", "info"],
                                 capture_output=True, text=True, timeout=10,
                                 env={"REDISCLI_AUTH": pw, "PATH": "/usr/bin"}).stdout
                  for n in nodes]
        if all("cluster_state:ok" in st for st in states):
            break
        time.sleep(0.1)
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert {m.status for m in mans} == {"complete"}
    kv = mans[0].services["kv"]
    assert kv["config"]["masters"] == 3 and kv["started_by"].startswith("not the kit")
    delta = mans[0].telemetry["counters"]["kv"]["delta"]
    assert delta.get("cmdstat_flushall_calls", 0) == 0  # never flushed: not the kit's
    assert delta["cmdstat_set_calls"] + delta.get("cmdstat_get_calls", 0) > 0
    assert all(n.procs[0].poll() is None for n in nodes)
