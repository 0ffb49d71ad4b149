"""Hostile input to the spec loader (issue 24): every input bounded before it is parsed,
every value checked before anything runs, each problem one `file:field: message (line N)`
line (exit 2 from the CLI, no traceback)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from harness.cli import main as cli_main
from harness.errors import SpecError
from harness.services import SERVICES
from harness.settings import Setting
from harness.spec import CLIENT_FIELDS, RUN_FIELDS, UNTIL_FIELDS, load_spec
from harness.spec import files as specfile
from harness.spec.files import MAX_INT_CHARS, MAX_SET_BYTES, MAX_SPEC_BYTES
from harness.workloads import WORKLOADS

BASE = """\
name: t
workload: memcache_mix
services:
  cache: {kind: memcached}
"""


def problems_of(path: Path, overrides: dict | None = None) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(path, overrides)
    return info.value.problems


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- 1. sizes, read before parsing --------------------------------------------------------

def test_a_spec_over_the_limit_is_refused_by_its_size_at_once(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("w") as fh:  # 50 MB of valid YAML: parsing it took minutes and GBs
        fh.write(BASE + "description: |\n")
        line = "  " + "x" * 98 + "\n"
        fh.write(line * (50_000_000 // len(line)))
    t0 = time.monotonic()
    found = problems_of(path)
    assert time.monotonic() - t0 < 1
    assert found == [f"{path}: cannot read spec ({path.stat().st_size:,} bytes, more than "
                     f"the {MAX_SPEC_BYTES:,} bytes a spec may have)"]


def test_a_spec_just_within_the_limit_is_read(tmp_path: Path) -> None:
    text = BASE + "run: {ops: 10}\ndescription: '"
    n = MAX_SPEC_BYTES - len(text) - 2
    path = write(tmp_path, text + "x" * n + "'\n")
    assert path.stat().st_size == MAX_SPEC_BYTES
    assert load_spec(path).description == "x" * n


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_spec_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        path = tmp_path / "pipe.yaml"
        os.mkfifo(path)  # opening it for reading would wait for a writer forever
        what = "a named pipe (FIFO)"
    elif kind == "device":
        path, what = Path("/dev/zero"), "a character device"
    else:
        path, what = tmp_path, "a directory"
    t0 = time.monotonic()
    assert problems_of(path) == [f"{path}: cannot read spec (it is {what}, not a "
                                 "regular file)"]
    assert time.monotonic() - t0 < 1


@pytest.mark.parametrize("target", ["/dev/zero", "pipe", "big.yaml", "missing.yaml"])
def test_an_inventory_is_bounded_too(tmp_path: Path, target: str) -> None:
    """`inventory: /dev/zero` grew `harness validate` to 22 GB before the kernel killed it."""
    if target == "pipe":
        os.mkfifo(tmp_path / "pipe")
    if target == "big.yaml":
        (tmp_path / target).write_text("a: localhost\n" * (MAX_SPEC_BYTES // 10))
    path = write(tmp_path, BASE + f"inventory: {target}\nrun: {{ops: 10}}\n")
    t0 = time.monotonic()
    found = problems_of(path)
    assert time.monotonic() - t0 < 1
    inv = (tmp_path / target).resolve()
    reason = {"/dev/zero": "it is a character device, not a regular file",
              "pipe": "it is a named pipe (FIFO), not a regular file",
              "big.yaml": f"{inv.stat().st_size if inv.exists() else 0:,} bytes, more "
                          f"than the {MAX_SPEC_BYTES:,} bytes an inventory may have",
              "missing.yaml": "No such file or directory"}[target]
    assert found == [f"{path}:inventory: cannot read inventory {inv}: {reason} (line 5)"]


def test_a_set_value_over_the_limit_is_refused(capsys: pytest.CaptureFixture) -> None:
    spec = Path(__file__).resolve().parents[2] / "experiments/datastore_vs_memcache.yaml"
    value = "x" * (MAX_SET_BYTES + 1)
    assert cli_main(["validate", str(spec), "--set", f"description={value}"]) == 2
    assert capsys.readouterr().err == (
        f"error: --set description: {MAX_SET_BYTES + 1:,} bytes, more than the "
        f"{MAX_SET_BYTES:,} bytes a --set value may have\n")
    assert cli_main(["validate", str(spec), "--set", f"description={value[1:]}"]) == 0


# -- 2. integers too long to convert, and other scalars Python cannot make --------------

def test_an_integer_of_5000_digits_is_named_not_a_value_error(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + f"run: {{ops: {'9' * 5000}}}\n")
    assert problems_of(path) == [
        f"{path}:run.ops: a number {5000:,} characters long; no setting takes one longer "
        f"than {MAX_INT_CHARS} (line 5)"]


@pytest.mark.parametrize(("value", "field"), [
    ("1" + ":0" * 3000, "run.ops"),  # YAML 1.1 base 60: slow to build, then 6,000 digits
    ("0x" + "f" * 4000, "run.ops"),  # converts, but prints as 4,817 digits
])
def test_other_long_integer_forms_are_refused_too(tmp_path: Path, value: str, field: str
                                                  ) -> None:
    path = write(tmp_path, BASE + f"run: {{ops: {value}}}\n")
    [found] = problems_of(path)
    assert found.startswith(f"{path}:{field}: a number {len(value):,} characters long")


@pytest.mark.parametrize("scalar", ["2001-02-30", "0x_", "0b_"])
def test_a_scalar_python_cannot_make_is_a_spec_error(tmp_path: Path, scalar: str) -> None:
    path = write(tmp_path, BASE + f"description: {scalar}\nrun: {{ops: 10}}\n")
    [found] = problems_of(path)
    assert found.startswith(f"{path}:5:14: cannot read {scalar!r}: ")


# -- 3. --set values that are not YAML -----------------------------------------------------

SEED = Path(__file__).resolve().parents[2] / "experiments/datastore_vs_memcache.yaml"


def test_a_set_value_that_is_not_yaml_is_a_usage_error(capsys: pytest.CaptureFixture
                                                       ) -> None:
    assert cli_main(["validate", str(SEED), "--set", "clients.processes=[unclosed"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --set clients.processes: malformed YAML: ")
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_set_value_is_bounded_like_a_spec(capsys: pytest.CaptureFixture) -> None:
    bomb = "x"
    for level in range(6):  # 10**6 values once the aliases are expanded
        bomb = "[" + ", ".join([f"&a{level} {bomb}"] + [f"*a{level}"] * 9) + "]"
    assert cli_main(["validate", str(SEED), "--set", f"params.x={bomb}"]) == 2
    assert "once YAML aliases are expanded" in capsys.readouterr().err
    assert cli_main(["validate", str(SEED), "--set", "repetitions=" + "9" * 5000]) == 2
    assert capsys.readouterr().err.startswith(
        "error: --set repetitions: a number 5,000 characters long")


# -- 4. duplicate keys ---------------------------------------------------------------------

def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nname: u\nworkload: memcache_mix\n"
                           "services:\n  cache:\n    kind: memcached\n"
                           "    settings: {threads: 1, threads: 2}\n"
                           "run: {ops: 10}\nrun: {ops: 20}\n")
    assert problems_of(path) == [
        f"{path}:name: given twice, on lines 1 and 2; YAML would keep only the last (line 2)",
        f"{path}:services.cache.settings.threads: given twice, on lines 7 and 7; YAML "
        "would keep only the last (line 7)",
        f"{path}:run: given twice, on lines 8 and 9; YAML would keep only the last (line 9)"]


def test_keys_equal_as_values_are_duplicates_and_merges_are_not(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "run: {ops: 10}\ngrid: {key_space: [1], 'key_space': [2]}\n")
    assert [p.split(": ", 1)[1] for p in problems_of(path)] == [
        "given twice, on lines 6 and 6; YAML would keep only the last (line 6)"]
    merged = write(tmp_path, BASE + "run: {ops: 10}\nhosts:\n"
                                    "  localhost: &h {target: localhost, python: python3}\n"
                                    "  other: {<<: *h, python: /usr/bin/python3}\n")
    assert load_spec(merged).hosts["other"].python == "/usr/bin/python3"


def test_a_key_given_twice_in_the_inventory_names_the_inventory(tmp_path: Path) -> None:
    inv = write(tmp_path, "box: localhost\nother: localhost\nbox: 'u@h:2222'\n", "inv.yaml")
    path = write(tmp_path, BASE + "inventory: inv.yaml\nhosts: {localhost: box}\n"
                                  "run: {ops: 10}\n")
    assert problems_of(path) == [
        f"{inv}:box: given twice, on lines 1 and 3; YAML would keep only the last (line 3)"]


def test_an_inventory_name_that_is_no_file_name_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + 'inventory: "inv\\0.yaml"\nrun: {ops: 10}\n')
    assert problems_of(path) == [f"{path}:inventory: expected the file name of an inventory "
                                 "(host name -> target) (line 5)"]


# -- 5. ranges, with the field named -------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("clients: {hosts: []}\nrun: {ops: 10}\n",  # was ZeroDivisionError when clients start
     ["clients.hosts: must name at least one host (processes are spread over them) (line 5)"]),
    ("run: {duration_s: 1.0e+12}\n",  # was OverflowError in the clients
     ["run.duration_s: must be at most 2,592,000 (30 days) (line 5)"]),
    ("run: {duration_s: 10, warmup_s: 2592001, timeout_s: 1.0e+100}\n",
     ["run.warmup_s: must be at most 2,592,000 (30 days) (line 5)",
      "run.timeout_s: must be at most 2,592,000 (30 days) (line 5)"]),
    ("clients: {connections: 10001, inflight: 10001}\nrun: {ops: 10}\n",
     ["clients.connections: must be at most 10,000 (sockets of one event loop) (line 5)",
      "clients.inflight: must be at most 10,000 (beyond any server's pipelining) (line 5)"]),
    ("clients: {processes: 20, connections: 2000}\nrun: {ops: 100}\n",
     ["clients.connections: 20 client processes x 2000 connections = 40,000 connections "
      "from one machine (localhost), more than the 28,000 local ports it has to reach a "
      "server; spread the processes over more clients.hosts or lower clients.connections "
      "(line 5)"]),
    ("clients: {processes: 257}\nrun: {ops: 1000}\n",
     ["clients.processes: 257 client processes on one machine (localhost), more than 256; "
      "spread them over more clients.hosts (line 5)"]),
    ("run: {ops: 33554433}\n",
     ["run.ops: must be at most 33,554,432 (records a run may hold in memory; measure "
      "longer with run.duration_s) (line 5)"]),
    ("run: {ops: 33554432, warmup_ops: 1}\n",
     ["run: run.ops + run.warmup_ops = 33,554,433 records, more than the 33,554,432 a run "
      "may hold in memory; measure longer with run.duration_s (line 5)"]),
    ("run: {duration_s: 600, rate_ops_s: 100000}\n",
     ["run.rate_ops_s: 100000 ops/s for 600 s is 60,000,000 records, more than the "
      "33,554,432 a run may hold in memory (line 5)"]),
    ("run: {duration_s: 10, rate_ops_s: 1.0e-300, seed: -1, max_consecutive_errors: "
     "1000000000000}\n",
     ["run.rate_ops_s: must be at least 0.001 (line 5)",
      "run.seed: must be 0 or more (line 5)",
      "run.max_consecutive_errors: must be at most 1,000,000,000 (line 5)"]),
    ("repetitions: 1000000\nrun: {ops: 10}\n",
     ["repetitions: must be at most 100,000 (the most runs a spec may have) (line 5)"]),
    ("run: {ops: 10}\nuntil: {ci_within_pct: 5, max_repetitions: 1000000}\n",
     ["until.max_repetitions: must be at most 100,000 (the most runs a spec may have) "
      "(line 6)"]),
    ("grid: {value_size_bytes: [1, 2]}\nrun: {ops: 10}\n"
     "until: {ci_within_pct: 5, max_repetitions: 60000}\n",
     ["grid: 2 configurations x 60000 until.max_repetitions = 120,000 runs, more than "
      "100,000; narrow the grid or split the experiment (line 5)"]),
])
def test_run_and_client_ranges(tmp_path: Path, text: str, expected: list[str]) -> None:
    path = write(tmp_path, BASE + text)
    assert problems_of(path) == [f"{path}:{e}" for e in expected]


@pytest.mark.parametrize(("target", "port"), [
    ("u@h:0", 0),  # was silently port 22
    ("u@h:99999", 99999),  # was "connection refused" at run time
    ("[::1]:65536", 65536),
])
def test_host_ports_are_tcp_ports(tmp_path: Path, target: str, port: int) -> None:
    path = write(tmp_path, BASE + f"hosts: {{localhost: localhost, box: '{target}'}}\n"
                                  "run: {ops: 10}\n")
    assert problems_of(path) == [f"{path}:hosts.box.target: port {port} of {target!r} is not "
                                 "a TCP port (1-65535) (line 5)"]


def test_an_inventory_target_port_is_checked_as_well(tmp_path: Path) -> None:
    write(tmp_path, "box: {target: 'u@h:0', connect_timeout_s: 0}\n", "inv.yaml")
    path = write(tmp_path, BASE + "inventory: inv.yaml\nhosts: {localhost: localhost, "
                                  "b: box}\nrun: {ops: 10}\n")
    assert problems_of(path) == [
        f"{path}:hosts.b.target: port 0 of 'u@h:0' is not a TCP port (1-65535) (line 6)",
        f"{path}:hosts.b.connect_timeout_s: must be more than 0 and at most 3,600 s (line 6)"]


def test_two_host_names_of_one_machine_share_its_ports(tmp_path: Path) -> None:
    """45 processes over 3 names: 15 each, 30 on this machine (`localhost` and `local`)."""
    path = write(tmp_path, BASE + "hosts: {localhost: localhost, also: local, far: 'u@far'}\n"
                 "clients: {hosts: [localhost, also, far], processes: 45, connections: 1000}\n"
                 "run: {ops: 100}\n")
    assert problems_of(path) == [
        f"{path}:clients.connections: 30 client processes x 1000 connections = 30,000 "
        "connections from one machine (localhost), more than the 28,000 local ports it has "
        "to reach a server; spread the processes over more clients.hosts or lower "
        "clients.connections (line 6)"]


def test_a_timeline_at_nan_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "run: {duration_s: 10}\n"
                                  "timeline: [{at_s: .nan, action: x, service: cache}]\n")
    assert (f"{path}:timeline.0.at_s: required: seconds (>= 0) from the start of the clients "
            "(line 6)") in problems_of(path)


def test_a_service_setting_out_of_range_is_refused_plain_or_in_the_grid(tmp_path: Path
                                                                        ) -> None:
    """memcached ran with `-m -1` as 18446744073708503040 bytes."""
    path = write(tmp_path, "name: t\nworkload: memcache_mix\nservices:\n  cache:\n"
                           "    kind: memcached\n    settings: {memory_mb: -1}\n"
                           "grid: {services.cache.threads: [1, 0, 100000]}\n"
                           "run: {ops: 10}\n")
    assert problems_of(path) == [
        f"{path}:services.cache.settings.memory_mb: must be at least 1 (line 6)",
        f"{path}:grid.services.cache.threads.1: must be at least 1 (line 7)",
        f"{path}:grid.services.cache.threads.2: must be at most 256 (far more than any "
        "machine's cores; memcached warns above 64) (line 7)"]


def _numeric(schema: dict) -> list[tuple[str, Setting]]:
    return [(k, s) for k, s in schema.items() if {int, float} & set(s.types)]


#: Numbers without Setting bounds, and why: a seed is any integer random.Random takes;
#: `harness.spec` checks the other two itself (a share of ops, a percentage).
UNBOUNDED = {"seed", "fail_if_error_rate_above", "ci_within_pct"}


def test_every_number_of_every_schema_has_bounds() -> None:
    """The promise of issue 24: no service setting, workload parameter or run/clients
    field takes any number at all (`UNBOUNDED` says which may, and why)."""
    schemas = {f"service {n}": SERVICES.get(n).settings for n in SERVICES}
    schemas |= {f"workload {n}": WORKLOADS.get(n).params for n in WORKLOADS}
    schemas |= {"run": RUN_FIELDS, "clients": CLIENT_FIELDS, "until": UNTIL_FIELDS}
    missing = [f"{where}: {key}" for where, schema in schemas.items()
               for key, s in _numeric(dict(schema))
               if s.low is None and s.high is None and key not in UNBOUNDED]
    assert missing == []


@pytest.mark.parametrize("kind", sorted(SERVICES))
def test_each_service_setting_bound_is_enforced_by_the_spec(tmp_path: Path, kind: str
                                                            ) -> None:
    """Just past each bound of each numeric setting: refused, naming that setting."""
    for key, setting in _numeric(dict(SERVICES.get(kind).settings)):
        for value, edge in _past_bounds(setting):
            path = write(tmp_path, BASE + f"  other: {{kind: {kind}, settings: "
                                          f"{{{key}: {value}}}}}\nrun: {{ops: 10}}\n")
            found = problems_of(path)
            assert any(p.startswith(f"{path}:services.other.settings.{key}: must be {edge}")
                       for p in found), (key, value, found)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_each_workload_parameter_bound_is_enforced_plain_and_in_the_grid(
        tmp_path: Path, name: str) -> None:
    for key, setting in _numeric(dict(WORKLOADS.get(name).params)):
        for value, edge in _past_bounds(setting):
            path = write(tmp_path, f"name: t\nworkload: {name}\nparams: {{{key}: {value}}}\n"
                                   f"grid: {{{key}: [{value}]}}\nrun: {{ops: 10}}\n")
            found = problems_of(path)
            for where in (f"params.{key}", f"grid.{key}.0"):
                assert any(p.startswith(f"{path}:{where}: must be {edge}") for p in found), (
                    where, value, found)


def _past_bounds(setting: Setting) -> list[tuple[str, str]]:
    """(YAML value just past a bound, start of the message about it)."""
    float_ok = float in setting.types
    out = []
    if setting.low is not None:
        below = setting.low if setting.low_open else (
            setting.low - (0.5 if float_ok else 1))
        out.append((repr(below) if float_ok else str(int(below)), ""))
    if setting.high is not None:
        above = setting.high * 1.5 if float_ok else int(setting.high) + 1
        out.append((repr(float(above)) if float_ok else str(above), "at most"))
    return out


def test_a_key_space_a_client_cannot_hold_is_refused(tmp_path: Path) -> None:
    """key_space: 10**12 was a MemoryError in prepare."""
    path = write(tmp_path, BASE + "params: {key_space: 1000000000000}\n"
                                  "grid: {key_space: [10, 4000001]}\nrun: {ops: 10}\n")
    why = "(each client process holds ~270 bytes per key)"
    assert problems_of(path) == [
        f"{path}:params.key_space: must be at most 4,000,000 {why} (line 5)",
        f"{path}:grid.key_space.1: must be at most 4,000,000 {why} (line 6)"]


@pytest.mark.parametrize(("params", "message"), [
    ("{records_per_client: 1000000, get_passes: 100, dataset: /data/maildir}",
     "records_per_client x (1 + get_passes) = 101,000,000 ops per cycle, more than "
     "67,108,864 (the native core holds the cycle)"),
    ("{records_per_client: 500000, median_bytes: 100000}",
     "records_per_client x mean message size = about 55.9 GiB per client process, more "
     "than 1 GiB; lower records_per_client or the message sizes"),
])
def test_kvstore_records_a_client_cannot_hold_are_refused(tmp_path: Path, params: str,
                                                          message: str) -> None:
    path = write(tmp_path, "name: t\nworkload: kvstore\nservices:\n"
                           "  kv: {kind: redis_cluster}\n"
                           f"params: {params}\nrun: {{ops: 10}}\n")
    assert problems_of(path) == [f"{path}:params: {message} (line 5)"]


def test_overrides_given_as_python_values_are_bounded_too(tmp_path: Path) -> None:
    """`load_spec(path, overrides)` takes values that never were YAML: an int of 5,000
    digits cannot even be printed in a message (ValueError), a deep list would recurse."""
    path = write(tmp_path, BASE + "run: {ops: 10}\n")
    assert problems_of(path, {"run.ops": 10**5000}) == [
        "--set run.ops: a number about 5,001 digits long; no setting takes one longer "
        f"than {MAX_INT_CHARS}"]
    deep: list = []
    deep.append(deep)  # a cycle is only ever too deep
    assert problems_of(path, {"grid.op": deep}) == [
        "--set grid.op: nested more than 40 levels deep"]


def test_a_long_key_or_value_is_clipped_in_the_message(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + f"run: {{ops: 10}}\n? {'k' * 500_000}\n: 1\n"
                                  f"clients: {{hosts: [{'h' * 400_000}]}}\n")
    found = problems_of(path)
    assert [len(p) < 1500 for p in found] == [True, True]
    assert found[0].startswith(f"{path}:{'k' * 200}... (499,800 more): unknown field")


# -- `harness validate` says ok only when every bound holds --------------------------------

@pytest.mark.parametrize(("text", "args"), [
    ("run: {ops: " + "9" * 5000 + "}\n", []),
    ("run: {ops: 10}\nrun: {ops: 20}\n", []),
    ("clients: {hosts: []}\nrun: {ops: 10}\n", []),
    ("run: {duration_s: 1.0e+12}\n", []),
    ("params: {key_space: 1000000000000}\nrun: {ops: 10}\n", []),
    ("hosts: {localhost: localhost, b: 'u@h:0'}\nrun: {ops: 10}\n", []),
    ("inventory: /dev/zero\nrun: {ops: 10}\n", []),
    ("run: {ops: 10}\n", ["--set", "clients.processes=[unclosed"]),
    ("run: {ops: 10}\n", ["--set", "services.cache.settings.memory_mb=-1"]),
    ("run: {ops: 10}\n", ["--set", "grid={services.cache.memory_mb: [64, 0]}"]),
])
def test_validate_says_ok_only_when_every_bound_holds(
        tmp_path: Path, capsys: pytest.CaptureFixture, text: str, args: list[str]) -> None:
    path = write(tmp_path, BASE + text)
    assert cli_main(["validate", str(path), *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ") and "Traceback" not in err
    good = write(tmp_path, BASE + "run: {ops: 10}\n", "good.yaml")
    assert cli_main(["validate", str(good)]) == 0
    assert capsys.readouterr().out == f"{good}: ok (1 runs)\n"


def test_a_problem_with_a_set_value_names_the_set_not_a_line_of_the_file(
        tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "run: {ops: 10}\n")
    assert problems_of(path, {"grid": {"services.cache.memory_mb": [64, 0]},
                              "run.ops": 0}) == [
        f"{path}:grid.services.cache.memory_mb.1: must be at least 1 (--set grid)",
        f"{path}:run.ops: must be positive (--set run.ops)"]


@pytest.mark.parametrize("text", ["\x1fnull\n", "name: \x00\n", "a: 1\na: 2\n",
                                  "a: " + "9" * 200 + "\n", "a: 2001-02-30\n", "[" * 100])
def test_without_libyaml_the_pure_python_parser_refuses_alike(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """PyYAML built without libyaml parses in Python, whose reader checks characters as
    the loader is made (a ReaderError escaped that way once)."""
    pure = type("Pure", (yaml.SafeLoader,),
                {"yaml_constructors": specfile._Loader.yaml_constructors})
    monkeypatch.setattr(specfile, "_Loader", pure)
    path = write(tmp_path, text)
    assert all(p.startswith(str(path)) for p in problems_of(path))


def test_a_flood_of_problems_is_shown_once(tmp_path: Path) -> None:
    path = write(tmp_path, "run:\n" + "  ops: 1\n" * 61)
    found = problems_of(path)
    assert len(found) == 51 and found[-1] == f"{path}: ... and 10 more problems like these"
