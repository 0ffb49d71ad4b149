"""Spec validation and grid expansion (no servers needed)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.spec import config_id, expand, load_spec

ROOT = Path(__file__).resolve().parents[2]
SEED_SPEC = ROOT / "experiments" / "datastore_vs_memcache.yaml"

GOOD = """\
name: t1
workload: datastore_memcache
services:
  db: {kind: postgres}
  cache: {kind: memcached, settings: {memory_mb: 32}}
params: {value_size_bytes: 100}
grid:
  op: [store_write, mem_read_hit]
  clients.connections: [1, 2]
repetitions: 3
run: {ops: 20, warmup_ops: 5}
"""


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def problems(tmp_path: Path, text: str, **kw: object) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text), **kw)  # type: ignore[arg-type]
    return info.value.problems


def test_builtin_spec_reproduces_seed_design() -> None:
    spec = load_spec(SEED_SPEC)
    plans = expand(spec)
    assert len(plans) == 5 * 10
    assert spec.size.ops == 50
    assert {p.params["op"] for p in plans} == {
        "store_write", "store_read", "mem_write", "mem_read_hit", "mem_read_miss"}
    assert all(p.params["value_size_bytes"] == 100 for p in plans)


def test_grid_expands_deterministically_repetition_major(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GOOD))
    plans = expand(spec)
    assert len(plans) == 2 * 2 * 3
    # All four configurations once before any repeats, in grid order.
    first = [(p.params["op"], p.clients.connections) for p in plans[:4]]
    assert first == [("store_write", 1), ("store_write", 2), ("mem_read_hit", 1),
                     ("mem_read_hit", 2)]
    assert [p.repetition for p in plans] == [1] * 4 + [2] * 4 + [3] * 4
    assert [p.config_id for p in expand(load_spec(write(tmp_path, GOOD)))] == [
        p.config_id for p in plans]
    assert len({p.config_id for p in plans}) == 4
    assert plans[0].services["cache"].settings["memory_mb"] == 32
    assert plans[0].services["cache"].settings["threads"] == 1  # default filled in


def test_config_id_is_readable_and_stable() -> None:
    a = config_id({"op": "store_read", "clients.connections": 2})
    assert a.startswith("op=store_read,clients.connections=2-")
    assert a == config_id({"op": "store_read", "clients.connections": 2})
    assert a != config_id({"op": "store_read", "clients.connections": 3})


def test_unknown_field_gets_a_hint_with_file_and_line(tmp_path: Path) -> None:
    errs = problems(tmp_path, GOOD.replace("repetitions: 3", "repetitons: 3"))
    assert len(errs) == 1
    assert "spec.yaml:repetitons: unknown field (did you mean 'repetitions'?)" in errs[0]
    assert "(line 10)" in errs[0]


def test_wrong_types_name_the_field(tmp_path: Path) -> None:
    errs = problems(tmp_path, GOOD.replace("memory_mb: 32", "memory_mb: lots")
                    .replace("repetitions: 3", "repetitions: three"))
    assert any("services.cache.settings.memory_mb: expected int, got str 'lots'" in e
               for e in errs)
    assert any(":repetitions: must be an integer >= 1" in e for e in errs)
    assert len(errs) == 2  # every problem at once, not the first only


def test_bool_is_not_accepted_as_a_number(tmp_path: Path) -> None:
    errs = problems(tmp_path, GOOD.replace("value_size_bytes: 100", "value_size_bytes: true"))
    assert any("params.value_size_bytes: expected int, got bool" in e for e in errs)


def test_empty_grid_and_bad_grid_values(tmp_path: Path) -> None:
    errs = problems(tmp_path, GOOD.replace("op: [store_write, mem_read_hit]", "op: []"))
    assert any("grid.op: expected a non-empty list" in e for e in errs)
    errs = problems(tmp_path, GOOD.replace("mem_read_hit]", "mem_read_hti]"))
    assert any("grid.op.1: 'mem_read_hti' is not one of" in e for e in errs)
    errs = problems(tmp_path, GOOD.replace("clients.connections", "clients.conections"))
    assert any("grid.clients.conections: only clients.processes" in e for e in errs)
    errs = problems(tmp_path, GOOD.replace("  clients.connections: [1, 2]",
                                           "  services.cache.memroy_mb: [1, 2]"))
    assert any("unknown memcached setting (did you mean 'memory_mb'?)" in e for e in errs)


def test_unknown_workload_and_service_kind(tmp_path: Path) -> None:
    errs = problems(tmp_path, GOOD.replace("workload: datastore_memcache",
                                           "workload: datastore_memcached"))
    assert any(":workload: unknown workload 'datastore_memcached'" in e for e in errs)
    errs = problems(tmp_path, GOOD.replace("kind: postgres", "kind: postgress"))
    assert any("services.db.kind: unknown service 'postgress'" in e for e in errs)
    # ... and the workload's needs are checked against what is there.
    assert any("needs exactly one 'postgres' service, found 0" in e for e in errs)


def test_run_size_needs_exactly_one_of_ops_and_duration(tmp_path: Path) -> None:
    errs = problems(tmp_path, GOOD.replace("run: {ops: 20, warmup_ops: 5}",
                                           "run: {ops: 20, duration_s: 3}"))
    assert any(":run: give exactly one of run.ops or run.duration_s" in e for e in errs)
    errs = problems(tmp_path, GOOD.replace("run: {ops: 20, warmup_ops: 5}", "run: {ops: 0}"))
    assert any(":run.ops: must be positive" in e for e in errs)


def test_hosts_unknown_reference_and_bad_target(tmp_path: Path) -> None:
    text = GOOD.replace("name: t1", "name: t1\nhosts:\n  a: localhost\n  b: 'bad target!'")
    errs = problems(tmp_path, text)
    assert any("hosts.b.target: 'bad target!' is not" in e for e in errs)
    # services default to host 'localhost', which this spec no longer defines
    assert any("services.db.host: unknown host 'localhost'" in e for e in errs)


def test_inventory_names_resolve(tmp_path: Path) -> None:
    (tmp_path / "inv.yaml").write_text(
        "box1: {target: 'bench@10.9.9.9:2222', python: /opt/venv/bin/python}\n")
    text = GOOD.replace("name: t1", "name: t1\ninventory: inv.yaml\nhosts:\n"
                        "  localhost: localhost\n  remote: box1")
    spec = load_spec(write(tmp_path, text))
    assert spec.hosts["remote"].target == "bench@10.9.9.9:2222"
    assert spec.hosts["remote"].python == "/opt/venv/bin/python"
    assert not spec.hosts["remote"].is_local and spec.hosts["localhost"].is_local


def test_malformed_yaml_names_line_and_column(tmp_path: Path) -> None:
    errs = problems(tmp_path, "name: x\ngrid: {op: [a, b}\n")
    assert len(errs) == 1 and "spec.yaml:2:" in errs[0] and "malformed YAML" in errs[0]


def test_top_level_must_be_mapping_and_file_must_exist(tmp_path: Path) -> None:
    assert "top level" in problems(tmp_path, "- a\n- b\n")[0]
    with pytest.raises(SpecError, match="cannot read spec"):
        load_spec(tmp_path / "nope.yaml")


def test_overrides_apply_before_validation(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GOOD), {"repetitions": 1, "run.ops": 7})
    assert spec.repetitions == 1 and spec.size.ops == 7
    errs = problems(tmp_path, GOOD, overrides={"repetitions": 0})
    assert any(":repetitions: must be an integer" in e for e in errs)


def test_set_names_a_grid_key_with_dots_as_one_key(tmp_path: Path) -> None:
    """`--set grid.services.cache.memory_mb=[...]`: the grid's keys contain dots."""
    spec = load_spec(write(tmp_path, GOOD), {"grid.services.cache.memory_mb": [16, 64],
                                            "grid.clients.connections": [4]})
    assert spec.grid["services.cache.memory_mb"] == (16, 64)
    assert spec.grid["clients.connections"] == (4,)
    assert {p.services["cache"].settings["memory_mb"] for p in expand(spec)} == {16, 64}
    errs = problems(tmp_path, GOOD, overrides={"grid.services.cache.memroy_mb": [16]})
    assert any("grid.services.cache.memroy_mb: unknown memcached setting" in e for e in errs)


def test_a_name_too_long_for_a_directory_is_refused(tmp_path: Path) -> None:
    # The same rule as `harness import --experiment` (harness.paths.name_problem).
    found = problems(tmp_path, GOOD.replace("name: t1", "name: " + "n" * 101))
    assert [p.split(":", 1)[1] for p in found] == [
        "name: required: at most 100 characters (it names a directory), not 101 (line 1)"]
    assert load_spec(write(tmp_path, GOOD.replace("name: t1", "name: " + "n" * 100)))


def test_recorded_spec_keeps_no_credentials() -> None:
    """What every manifest keeps of the spec: no identity file, known_hosts or ssh_config
    path, and a password in a URL masked; everything else as written."""
    from harness.spec import recorded_spec

    raw = {"name": "x", "hosts": {"db": {"target": "bench@10.0.0.2", "python": "/usr/bin/python3",
                                         "identity_file": "/home/u/.ssh/id_ed25519",
                                         "known_hosts": "/k", "ssh_config": "/c"}},
           "services": {"pg": {"url": "postgresql://bench:hunter2@10.0.0.2:5432/db"}},
           "grid": {"size": [1, 2]}}
    rec = recorded_spec(raw)
    assert rec["hosts"] == {"db": {"target": "bench@10.0.0.2", "python": "/usr/bin/python3"}}
    assert rec["services"]["pg"]["url"] == "postgresql://bench:***@10.0.0.2:5432/db"
    assert rec["grid"] == {"size": [1, 2]} and "hunter2" not in str(rec)
    assert raw["hosts"]["db"]["identity_file"]  # the spec itself is untouched


SWEEP = """\
name: sweep
workload: memcache_mix
services: {cache: {kind: memcached}}
grid:
  run.rate_ops_s: %s
repetitions: 2
run: {duration_s: 2, warmup_s: 0.5}
"""


@pytest.mark.parametrize(("sweep", "values"), [
    ("[1000, 2500]", [1000, 2500]),
    ("{from: 1000, to: 64000, factor: 2}", [1000, 2000, 4000, 8000, 16000, 32000, 64000]),
    ("{from: 1000, to: 10000, step: 1500}", [1000, 2500, 4000, 5500, 7000, 8500, 10000]),
    ("{from: 1000, to: 100000, steps: 5}", [1000, 3162, 10000, 31620, 100000]),
    ("{from: 1000, to: 2000, steps: 5, spacing: linear}", [1000, 1250, 1500, 1750, 2000]),
])
def test_an_offered_load_sweep_is_a_grid_of_rates(tmp_path: Path, sweep: str,
                                                  values: list[int]) -> None:
    """`run.rate_ops_s` varies like any grid key (a list or a sweep shorthand); each
    plan is open loop at its own rate, configurations interleaved."""
    spec = load_spec(write(tmp_path, SWEEP % sweep))
    assert list(spec.grid["run.rate_ops_s"]) == values
    plans = expand(spec)
    assert len(plans) == 2 * len(values)
    assert [p.size.rate_ops_s for p in plans[:len(values)]] == values
    assert all(p.size.open_loop and p.size.duration_s == 2 for p in plans)
    assert spec.size.rate_ops_s is None  # the spec's own run block is untouched


@pytest.mark.parametrize(("sweep", "said"), [
    ("{from: 1000, to: 2000}", "grid.run.rate_ops_s: a sweep needs numbers"),
    ("{from: 2000, to: 1000, factor: 2}", "`from` (2000) must be below `to` (1000)"),
    ("{from: 1000, to: 2000, factor: 1}", "grid.run.rate_ops_s.factor: must be a number above 1"),
    ("{from: 1, to: 1000000000, step: 1}", "more than 1,000"),
    ("{from: 1000, to: 2000, factor: 2, spacing: linear}", "goes with `steps` only"),
    ("{from: 1000, to: 2000, by: 2}", "unknown sweep field(s) ['by']"),
    ("[1000, 60000000]", "grid.run.rate_ops_s.1: "),
])
def test_a_bad_sweep_is_named(tmp_path: Path, sweep: str, said: str) -> None:
    found = problems(tmp_path, SWEEP % sweep)
    assert any(said in p for p in found), found


def test_only_the_rate_of_run_can_vary(tmp_path: Path) -> None:
    found = problems(tmp_path, SWEEP.replace("run.rate_ops_s: %s", "run.duration_s: [1, 2]"))
    assert any("grid.run.duration_s: only run.rate_ops_s can vary" in p for p in found), found


PAUSED = """\
name: paused
workload: memcache_mix
services: {cache: {kind: memcached}}
clients: {connections: 4, inflight: 16%s}
%s
run: {duration_s: 2%s}
"""


def test_a_pause_may_be_set_or_varied_in_a_closed_loop(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, PAUSED % (", pause_us: 200", "", "")))
    assert spec.clients.pause_us == 200.0
    assert [p.clients.pause_us for p in expand(spec)] == [200.0]
    varied = load_spec(write(tmp_path, PAUSED % ("", "grid: {clients.pause_us: [0, 200]}", "")))
    assert sorted(p.clients.pause_us for p in expand(varied)) == [0, 200]
    assert load_spec(write(tmp_path, PAUSED % ("", "", ""))).clients.pause_us == 0


@pytest.mark.parametrize(("clients", "grid", "run", "said"), [
    (", pause_us: 200", "", ", rate_ops_s: 1000", "clients.pause_us: only a closed loop"),
    ("", "grid: {clients.pause_us: [0, 50]}", ", rate_ops_s: 1000",
     "grid.clients.pause_us: only a closed loop"),
    (", pause_us: 200", "grid: {run.rate_ops_s: [1000, 2000]}", "",
     "clients.pause_us: only a closed loop"),
    (", pause_us: 200", "search: {slo: \"p99 < 1ms\"}", "",
     "clients.pause_us: a capacity search"),
    (", pause_us: -1", "", "", "clients.pause_us"),
    (", pause_us: 200000", "", "", "clients.pause_us"),
])
def test_a_pause_where_it_cannot_apply_is_named(tmp_path: Path, clients: str, grid: str,
                                                run: str, said: str) -> None:
    found = problems(tmp_path, PAUSED % (clients, grid, run))
    assert any(said in p for p in found), found


def test_labels_are_text_and_the_command_line_adds_or_replaces_them(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GOOD + "labels: {commit: abc, suite: nightly}\n"),
                     labels={"commit": "def"})
    assert spec.labels == {"commit": "def", "suite": "nightly"}
    said = problems(tmp_path, GOOD + "labels: {version: 7.2, bad key: x}\n")
    assert any("labels" in p and "must be text" in p and "quote it" in p for p in said)
    assert any("plain name" in p for p in said)
    assert load_spec(write(tmp_path, GOOD)).labels == {}


def test_a_password_given_where_its_variables_name_goes_is_not_echoed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--set services.kv.auth.password_env=<the password itself>`, a slip in a CI
    script: refused, and the value is not printed (CI logs keep what is printed)."""
    from harness.cli import main as cli_main

    path = tmp_path / "s.yaml"
    path.write_text("name: s\nworkload: redis_mix\nservices:\n  kv: {kind: redis, address: "
                    "'127.0.0.1:6379', auth: {user: bench, password_env: PW}}\nrun: {ops: 10}\n")
    secret = "Hunter-2!x9"
    for argv in (["run", str(path), "--dry-run"], ["validate", str(path)]):
        code = cli_main([*argv, "--out", str(tmp_path / "raw"),
                         "--set", f"services.kv.auth.password_env={secret}"])
        out, err = capsys.readouterr()
        assert code == 2
        assert "services.kv.auth.password_env: expected the name of an environment" in err
        assert "not shown in case it is the password" in err
        assert secret not in out + err
