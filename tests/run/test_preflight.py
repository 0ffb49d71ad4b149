"""What a spec asks of its machines (harness.run.preflight), derived from the spec alone; the
checks against real machines are in tests/run/test_hosts_check.py."""

from __future__ import annotations

from pathlib import Path

from harness.run.preflight import (
    Reach,
    loopback_problems,
    server_hosts,
    sources,
    translation_problem,
)
from harness.spec import Spec, load_spec

HOSTS = """\
hosts:
  a: root@10.9.0.1:22
  b: root@10.9.0.2:22
  c: root@10.9.0.3:22
  d: {target: root@10.9.0.4:22, address: 10.9.0.44}
  here: localhost
"""


def spec(tmp_path: Path, body: str) -> Spec:
    path = tmp_path / "s.yaml"
    path.write_text("name: s\n" + HOSTS + body)
    return load_spec(path)


def test_an_app_reaches_its_memcached_and_clients_reach_both(tmp_path: Path) -> None:
    s = spec(tmp_path, """\
workload: filestore
services:
  cache: {kind: memcached, host: a}
  app: {kind: filestore, host: b}
clients: {hosts: [c]}
run: {ops: 10}
""")
    assert server_hosts(s) == {"a": ["cache"], "b": ["app"]}
    assert sources(s) == {"a": ["c", "b"], "b": ["c"]}


def test_standbys_reach_the_primary_and_it_them(tmp_path: Path) -> None:
    s = spec(tmp_path, """\
workload: cluster
services:
  db:
    kind: pg_cluster
    host: a
    settings: {mode: network-cluster, nodes: 3, standby_hosts: [b, d]}
clients: {hosts: [c]}
params: {objects: 10}
run: {ops: 10}
""")
    assert server_hosts(s) == {"a": ["db"], "b": ["db"], "d": ["db"]}
    assert sources(s) == {"a": ["c", "b", "d"], "b": ["c", "a", "d"], "d": ["c", "a", "b"]}


def test_a_loopback_server_with_clients_elsewhere(tmp_path: Path) -> None:
    body = """\
workload: memcache_mix
services:
  cache: {kind: memcached, host: here}
clients: {hosts: [%s]}
run: {ops: 10}
"""
    [problem] = loopback_problems(spec(tmp_path, body % "a, here"))
    assert problem.startswith("services.cache: runs on host 'here' at a loopback address")
    assert "client host(s) a are other machines" in problem
    assert loopback_problems(spec(tmp_path, body % "here")) == []


def test_a_machine_behind_address_translation_would_be_refused_by_postgres() -> None:
    direct = Reach("client", "server", "10.9.0.1", 5000, None, "10.9.0.3", "10.9.0.3")
    natted = Reach("client", "server", "10.9.0.1", 5000, None, "192.168.1.5", "10.9.0.254")
    assert translation_problem(direct, ["services.db"]) is None
    assert translation_problem(natted, []) is None  # memcached, Redis: any address
    problem = translation_problem(natted, ["services.db"])
    assert problem is not None
    assert problem.startswith("server sees client as 10.9.0.254, but client connects from "
                              "192.168.1.5 (address translation?)")
