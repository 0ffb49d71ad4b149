"""PostgreSQL behind a pooler or a proxy, as users run them: pgbouncer (Debian's 1.18) in
session, transaction and statement pooling, pgpool-II and HAProxy, started by hand with
Debian's defaults in front of a PostgreSQL of their own (scram) and measured at their
address; and the kit's examples that start pgbouncer and pgpool-II themselves. Every
workload on PostgreSQL runs without a failed op in every mode: the kit finds what is
between and speaks unnamed statements there (named ones were on another backend, or
another client's: 45% of the issue's ops failed in transaction pooling)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cli import main as cli_main
from harness.hosts import LocalHost
from harness.paths import experiments_dir
from harness.results import iter_run_dirs, read_manifest
from tests.fixtures.byhand import (
    ByHand,
    start_haproxy,
    start_memcached,
    start_pgbouncer,
    start_pgpool,
    start_postgres,
    stop,
)
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration

DEPLOYMENT = experiments_dir() / "deployment"
#: What sits between, per case: how it is started, and the pooling the kit finds there.
CASES: dict[str, tuple[str | None, str]] = {
    "direct": (None, ""),
    "pgbouncer_session": ("session", "session"),
    # Over PostgreSQL's Unix socket, as Debian's `host=/var/run/postgresql`: the server
    # says its end of the connection is no address at all.
    "pgbouncer_transaction": ("transaction", "transaction"),
    "pgbouncer_statement": ("statement", "statement"),
    "pgpool": ("pgpool", "session"),
    "haproxy": ("haproxy", "session"),
}


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Any]]:
    """One PostgreSQL (scram; user bench owning benchdb) and one memcached, by hand. Its
    directory (and Unix socket) is outside pytest's, which every pytest session resets to
    mode 700: pgbouncer, dropped from root to `nobody`, connects to the socket."""
    require_service("postgres", LocalHost())
    require_service("memcached", LocalHost())
    base = Path(tempfile.mkdtemp(prefix="kvbench-poolers-"))
    base.chmod(0o711)
    started: list[ByHand] = []
    try:
        started.append(start_postgres(base / "pg", "bench", "pool-pass-" + base.name[-6:],
                                      "benchdb"))
        (base / "pg").chmod(0o711)  # the socket's directory: others may reach the socket
        started.append(start_memcached())
        yield {"pg": started[0], "cache": started[1], "dir": base / "pg"}
    finally:
        for s in started:
            stop(s)
        shutil.rmtree(base, ignore_errors=True)


def _between(case: str, d: Path, pg: ByHand, pg_dir: Path) -> ByHand:
    how = CASES[case][0]
    if how is None:
        return pg
    if how == "pgpool":
        return start_pgpool(d, pg)
    if how == "haproxy":
        return start_haproxy(d, pg)
    return start_pgbouncer(d, pg, "benchdb", how,
                           unix_socket=pg_dir if how == "transaction" else None)


def _address_spec(tmp_path: Path, address: str, cache: str, settings: str = "") -> Path:
    """The issue's experiment: the datastore workload's ops at the address, 16
    connections from two processes, the memcache ops after them (their prepare, too,
    goes through the pooler)."""
    spec = tmp_path / "at_pooler.yaml"
    spec.write_text(
        "name: at_pooler\nworkload: datastore_memcache\nhosts: {client: localhost}\n"
        f"services:\n  db: {{kind: postgres, address: '{address}', database: benchdb, "
        f"auth: {{user: bench, password_env: POOL_PW}}{settings}}}\n"
        f"  cache: {{kind: memcached, address: '{cache}'}}\n"
        "clients: {hosts: [client], processes: 2, connections: 8}\n"
        "params: {value_size_bytes: 100}\ngrid: {op: [store_write, store_read, mem_write]}\n"
        "repetitions: 1\nrun: {ops: 300, warmup_ops: 20}\n")
    return spec


def _failed_ops(man: Any) -> int:
    return sum(man.counts.get(s, 0) for s in ("error", "timeout"))


@pytest.mark.parametrize("case", list(CASES))
def test_the_datastore_workload_at_a_poolers_address_runs_without_errors(
        case: str, tmp_path: Path, servers: dict[str, Any],
        by_hand: Callable[[ByHand], ByHand], monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing to set: the kit asks the server where its end of the connection is,
    finds the pooler or proxy (or nothing) and its pooling, records them, and speaks
    unnamed statements through it."""
    pg = servers["pg"]
    front = _between(case, tmp_path / "front", pg, servers["dir"])
    if front is not pg:  # the module's PostgreSQL is stopped with the module
        by_hand(front)
    monkeypatch.setenv("POOL_PW", pg.password)
    spec = _address_spec(tmp_path, front.address, servers["cache"].address)
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert len(mans) == 3 and {m.status for m in mans} == {"complete"}, [m.error for m in mans]
    for m in mans:
        assert _failed_ops(m) == 0 and m.counts["ok"] == 300, (m.grid_point, m.counts)
    config = mans[0].services["db"]["config"]
    if case == "direct":
        assert config["between"] == (f"nothing: PostgreSQL's end of the connection is "
                                     f"{pg.address}, the address the kit dialed")
        assert config["statements"] == "named: nothing is between"
        assert "pooling" not in config
        return
    end = "a Unix socket" if case == "pgbouncer_transaction" else pg.address
    assert config["between"] == (f"a pooler or proxy: the kit dialed {front.address}, "
                                 f"PostgreSQL's end of the connection is {end}")
    assert config["pooling"].split(":")[0] == CASES[case][1], config["pooling"]
    assert config["statements"] == "unnamed: a pooler or proxy is between"
    assert pg.password not in json.dumps(mans[0].to_dict())


def test_where_the_kit_cannot_tell_one_line_names_the_setting(
        tmp_path: Path, by_hand: Callable[[ByHand], ByHand],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """A server that does not say where its end of the connection is (its owner took
    inet_server_addr() from the public): one line before the grid names `statements`;
    set, the run goes ahead and the manifest says what was set and why."""
    require_service("postgres", LocalHost())
    require_service("memcached", LocalHost())
    pg = by_hand(start_postgres(tmp_path / "pg", "bench", "mute-pass-" + tmp_path.name[-6:],
                                "benchdb", grants="REVOKE EXECUTE ON FUNCTION "
                                "inet_server_addr() FROM PUBLIC"))
    front = by_hand(start_pgbouncer(tmp_path / "bouncer", pg, "benchdb", "transaction"))
    cache = by_hand(start_memcached())
    monkeypatch.setenv("POOL_PW", pg.password)
    spec = _address_spec(tmp_path, front.address, cache.address)
    assert cli_main(["run", str(spec), "--out", str(tmp_path / "raw"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    [line] = [e for e in err if "services.db" in e]
    assert line.startswith(f"error: {spec}:services.db at {front.address}: could not "
                           "tell whether a pooler or proxy sits between the kit and "
                           "PostgreSQL (")
    assert "permission denied for function inet_server_addr" in line
    assert line.endswith("set settings: {statements: unnamed} where a pooler or proxy is "
                         "between (pgbouncer, pgpool-II, HAProxy), {statements: named} "
                         "where none is")
    spec = _address_spec(tmp_path, front.address, cache.address,
                         ", settings: {statements: unnamed}")
    raw = tmp_path / "raw2"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert {m.status for m in mans} == {"complete"} and not sum(map(_failed_ops, mans))
    config = mans[0].services["db"]["config"]
    assert config["statements"] == "unnamed: set in the spec (statements: unnamed)"
    assert config["between"].startswith("not known (InsufficientPrivilegeError: ")
    # The setting decides: named statements through transaction pooling fail, as in the
    # issue (another client's statement of the same name, or none on this backend).
    spec = _address_spec(tmp_path, front.address, cache.address,
                         ", settings: {statements: named}")
    raw = tmp_path / "raw3"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 1
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert mans[0].services["db"]["config"]["statements"] == (
        "named: set in the spec (statements: named)")
    assert sum(map(_failed_ops, mans)) > 0 or any(m.status == "failed" for m in mans)


# --- poolers the kit starts (experiments/deployment/) --------------------------------

def _example(name: str, tmp_path: Path, **changes: Any) -> Path:
    """The example spec, one repetition of short runs, with `changes` (top-level
    fields: a workload of its own and its params, say) applied."""
    data = yaml.safe_load((DEPLOYMENT / name).read_text())
    data.update({"repetitions": 1, "run": {"duration_s": 1}, **changes})
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _run_all(spec: Path, raw: Path) -> list[Any]:
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert mans and {m.status for m in mans} == {"complete"}, [m.error for m in mans]
    for m in mans:
        assert _failed_ops(m) == 0 and m.counts["ok"] > 0, (m.grid_point, m.counts, m.error)
    return mans


def _pooling(man: Any) -> str:
    vars_ = man.grid_point.get("services.pool.vars")
    return vars_["mode"] if vars_ else "session"  # pgpool: a backend per session


def _needs(*binaries: str) -> None:
    for b in binaries:
        if shutil.which(b) is None and not Path(f"/usr/sbin/{b}").exists():
            if os.environ.get("CI"):
                pytest.fail(f"{b} is not installed; .ci/run installs it")
            pytest.skip(f"{b} is not installed (apt-get install {b})")


#: The kit's examples of a pooler or proxy before PostgreSQL, and the program each needs.
EXAMPLES = {"datastore_pgbouncer.yaml": "pgbouncer", "datastore_pgpool.yaml": "pgpool",
            "datastore_haproxy.yaml": "haproxy"}


@pytest.mark.parametrize("example", list(EXAMPLES))
def test_the_kits_poolers_run_the_datastore_example(example: str, tmp_path: Path) -> None:
    _needs(EXAMPLES[example])
    require_service("postgres", LocalHost())
    require_service("memcached", LocalHost())
    mans = _run_all(_example(example, tmp_path), tmp_path / "raw")
    assert len(mans) == {"datastore_pgbouncer.yaml": 6}.get(example, 2)
    for m in mans:
        config = m.services["pool"]["config"]
        assert config["statements"] == "unnamed: a pooler or proxy the kit started is between"
        assert config["pooling"].split(":")[0] == _pooling(m), config["pooling"]
        assert config["between"].startswith("a pooler or proxy: the kit dialed ")


#: The other workloads on PostgreSQL, through the same poolers: the cluster workload's
#: five ops (one connection, as the seed's loop) and YCSB's A, E (scans, inserts) and F
#: (read-modify-write), loaded with COPY through the pooler.
WORKLOADS: dict[str, dict[str, Any]] = {
    "cluster": {"workload": "cluster", "params": {"objects": 1000},
                "clients": {"hosts": ["client"], "processes": 1, "connections": 1},
                "run": {"ops": 1000},
                "grid": {"op": ["insert", "hash_search", "tree_search", "sequential",
                                "search_delete"]}},
    "ycsb": {"workload": "ycsb", "params": {"record_count": 500},
             "clients": {"hosts": ["client"], "processes": 2, "connections": 4},
             "run": {"ops": 1000, "warmup_ops": 50},
             "grid": {"workload": ["a", "e", "f"]}},
}


@pytest.mark.parametrize("example", list(EXAMPLES))
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_the_cluster_and_ycsb_workloads_run_through_the_kits_poolers(
        example: str, workload: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Every op of both in every pooling mode, but the cluster workload's sequential
    scan in statement pooling: its cursor lives in a transaction, which statement
    pooling refuses; that run fails at once with one line saying so."""
    _needs(EXAMPLES[example])
    require_service("postgres", LocalHost())
    data = dict(WORKLOADS[workload])
    services = yaml.safe_load((DEPLOYMENT / example).read_text())["services"]
    services.pop("cache")  # neither workload uses memcached
    grid = dict(data.pop("grid"))
    if "pgbouncer" in example:
        grid["services.pool.vars"] = yaml.safe_load(
            (DEPLOYMENT / example).read_text())["grid"]["services.pool.vars"]
    exclude = ([{"op": "sequential", "services.pool.vars": {"mode": "statement",
                                                            "pool_size": 20}}]
               if workload == "cluster" and "pgbouncer" in example else [])
    spec = _example(example, tmp_path, services=services, grid=grid, exclude=exclude,
                    **data)
    mans = _run_all(spec, tmp_path / "raw")
    modes = {_pooling(m) for m in mans}
    assert modes == ({"session", "transaction", "statement"} if "pgbouncer" in example
                     else {"session"})
    assert len(mans) == len(list(_points(grid, exclude)))
    if not exclude:
        return
    text = yaml.safe_load(spec.read_text())
    text.update(grid={"op": ["sequential"],
                      "services.pool.vars": [exclude[0]["services.pool.vars"]]}, exclude=[])
    spec.write_text(yaml.safe_dump(text, sort_keys=False))
    capsys.readouterr()
    assert cli_main(["run", str(spec), "--out", str(tmp_path / "raw2"), "-q"]) == 1
    [man] = [read_manifest(d) for d in iter_run_dirs(tmp_path / "raw2")]
    assert man.status == "failed" and man.error == (
        "WorkloadError: op sequential reads through a cursor, which lives in a "
        "transaction, and the pooler between refuses transaction blocks (statement "
        "pooling): measure it directly or through transaction or session pooling")


def _points(grid: dict[str, list[Any]], exclude: list[dict[str, Any]]) -> Iterator[dict]:
    import itertools

    keys = list(grid)
    for combo in itertools.product(*grid.values()):
        point = dict(zip(keys, combo, strict=True))
        if not any(all(point[k] == v for k, v in ex.items()) for ex in exclude):
            yield point


def test_the_pooling_cost_pair_compares_the_same_postgresql_direct_and_pooled(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """experiments/deployment/pooling_cost_*.yaml: one experiment (the same name, the
    same workload and clients), straight to PostgreSQL and through pgbouncer's
    transaction pooling; `harness compare` gives each metric a verdict."""
    _needs("pgbouncer")
    require_service("postgres", LocalHost())
    require_service("memcached", LocalHost())
    short = {"repetitions": 2, "run": {"duration_s": 1, "warmup_s": 0.2},
             "grid": {"op": ["store_read"]}}
    direct = _example("pooling_cost_direct.yaml", tmp_path, **short)
    pooled = _example("pooling_cost_pgbouncer.yaml", tmp_path, **short)
    a, b = (yaml.safe_load(p.read_text()) for p in (direct, pooled))
    assert a["name"] == b["name"] == "pooling_cost"
    assert {k: v for k, v in a.items() if k not in ("services", "description")} == {
        k: v for k, v in b.items() if k not in ("services", "description")}
    assert b["services"]["db"] == a["services"]["db"] and "pool_mode = transaction" in (
        b["services"]["pool"]["settings"]["files"]["pgbouncer.ini"])
    for spec, out in ((direct, "direct"), (pooled, "pooled")):
        mans = _run_all(spec, tmp_path / out)
        assert sum(m.counts["ok"] for m in mans) > 0 and len(mans) == 2
        db = mans[0].services.get("pool", mans[0].services["db"])["config"]
        assert db["statements"].startswith("unnamed" if out == "pooled" else "named")
    capsys.readouterr()
    # The servers differ (the pooler is the point): compare says so only when told.
    assert cli_main(["compare", str(tmp_path / "direct"), str(tmp_path / "pooled")]) == 2
    assert "servers: " in capsys.readouterr().err
    assert cli_main(["compare", str(tmp_path / "direct"), str(tmp_path / "pooled"),
                     "--format", "json", "--allow-different", "servers"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["metric"] for r in rows} >= {"throughput"}
    assert all(r["verdict"] for r in rows)
