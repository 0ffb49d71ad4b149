"""`harness hosts check` and `harness run`'s own pre-run checks on the machines of the
test bed: each bad machine is one clear line before anything starts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cli import EXIT_FAILED_RUNS, EXIT_OK, EXIT_USAGE, main
from tests.fixtures.machines import TestBed

BASE: dict[str, Any] = {
    "name": "hc",
    "workload": "memcache_mix",
    "services": {"cache": {"kind": "memcached", "host": "server"}},
    "clients": {"hosts": ["client"], "processes": 1},
    "run": {"ops": 20},
}


def write_spec(tmp_path: Path, hosts: dict[str, Any]) -> Path:
    path = tmp_path / "hc.yaml"
    path.write_text(yaml.safe_dump({**BASE, "hosts": hosts}))
    return path


def two(bed: TestBed, **client: Any) -> dict[str, Any]:
    return {"server": bed["srv"].spec_entry(), "client": bed["cli"].spec_entry(**client)}


def check(spec: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["hosts", "check", str(spec)])
    return code, capsys.readouterr().out.splitlines()


def run_refused(spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """`harness run` stops before anything starts: usage error, nothing written."""
    raw = tmp_path / "raw"
    assert main(["run", str(spec), "--out", str(raw), "--no-progress"]) == EXIT_USAGE
    assert not raw.exists() or not any(raw.rglob("manifest.json"))
    return capsys.readouterr().err


def test_a_good_three_machine_spec_passes_every_check(
        machines: TestBed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    srv, cli = machines["srv"], machines["cli"]
    code, out = check(write_spec(tmp_path, two(machines)), capsys)
    assert code == EXIT_OK, out
    assert out == [
        f"client ({cli.target}): ok",
        f"server ({srv.target}): ok",
        # From their own addresses, as the server machine saw them too (no NAT).
        f"reach control -> server ({srv.address}, a free TCP port): ok, from "
        f"{machines.control_address}",
        f"reach client -> server ({srv.address}, a free TCP port): ok, from {cli.address}",
    ]


def test_a_client_machine_that_cannot_reach_the_server_machine(
        machines: TestBed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    srv, cli = machines["srv"], machines["cli"]
    # cli loses its route to srv only; the control machine still reaches both.
    cli.run(["ip", "route", "add", "unreachable", f"{srv.address}/32"])
    try:
        code, out = check(write_spec(tmp_path, two(machines)), capsys)
    finally:
        cli.run(["ip", "route", "del", "unreachable", f"{srv.address}/32"])
    assert code == EXIT_FAILED_RUNS
    assert (f"reach control -> server ({srv.address}, a free TCP port): ok, from "
            f"{machines.control_address}") in out
    [bad] = [line for line in out if line.startswith("reach client -> server")]
    assert "FAILED" in bad and "No route to host" in bad


def test_an_unreachable_machine(machines: TestBed, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    # An address on the bed's subnet where no machine is: connects time out.
    nobody = machines.subnet.replace(".0/24", ".250")
    hosts = two(machines)
    hosts["server"] = {**hosts["server"], "target": f"root@{nobody}:22", "address": nobody,
                       "connect_timeout_s": 2}
    spec = write_spec(tmp_path, hosts)
    code, out = check(spec, capsys)
    assert code == EXIT_FAILED_RUNS
    [line] = [line for line in out if line.startswith("server ")]
    assert line.startswith(f"server (root@{nobody}:22): unreachable: ")
    err = run_refused(spec, tmp_path, capsys)
    assert "hosts.server: cannot connect" in err and nobody in err


@pytest.mark.parametrize("known", ["unknown", "changed"])
def test_an_unknown_or_changed_host_key(known: str, machines: TestBed, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    srv, oth = machines["srv"], machines["oth"]
    known_hosts = tmp_path / "known_hosts"
    # Changed: srv's address listed with another machine's key, as after a reinstall
    # (or a man in the middle).
    known_hosts.write_text("" if known == "unknown" else f"{srv.address} {oth.host_key}\n")
    hosts = two(machines)
    hosts["server"] = {**hosts["server"], "known_hosts": str(known_hosts)}
    spec = write_spec(tmp_path, hosts)
    code, out = check(spec, capsys)
    assert code == EXIT_FAILED_RUNS
    [line] = [line for line in out if line.startswith("server ")]
    want = ("unknown SSH host key" if known == "unknown"
            else "does not match known_hosts")
    assert "unreachable" in line and want in line
    assert want in run_refused(spec, tmp_path, capsys)
    # Nothing was added to the known_hosts file on the way.
    assert known_hosts.read_text() == ("" if known == "unknown"
                                       else f"{srv.address} {oth.host_key}\n")


def test_a_client_machine_without_the_kits_python(
        machines: TestBed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A real Python 3 without the kit: this interpreter without site-packages (-S) and
    # isolated from PYTHONPATH and the working directory (-I).
    system_python = tmp_path / "python3"
    system_python.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    system_python.chmod(0o755)
    spec = write_spec(tmp_path, two(machines, python=str(system_python)))
    code, out = check(spec, capsys)
    assert code == EXIT_FAILED_RUNS
    [line] = [line for line in out if line.startswith("client ")]
    assert f"python {system_python} cannot run the kit" in line
    assert "No module named" in line
    # Its reachability is not probed with a Python that is not there.
    assert not any(line.startswith("reach client") for line in out)
    err = run_refused(spec, tmp_path, capsys)
    assert f"hosts.client: python {system_python} cannot run the kit" in err


def test_a_command_service_whose_programs_are_missing_on_its_machine(
        machines: TestBed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The server command's program and each hook's are looked up on the server machine
    (over SSH) by `hosts check` and by `run` before anything starts; `{python}` is filled
    in, and a program found there passes."""
    spec = {**BASE, "workload": "kvstore", "hosts": two(machines),
            "services": {"kv": {"kind": "command", "host": "server", "settings": {
                "command": "no-such-kvserver --port {port}",
                "setup": "/opt/nowhere/join {members}",
                "add": "{python} -c pass"}}},
            "params": {"records_per_client": 10}}
    path = tmp_path / "cmd.yaml"
    path.write_text(yaml.safe_dump(spec))
    code, out = check(path, capsys)
    assert code == EXIT_FAILED_RUNS
    [line] = [x for x in out if x.startswith("server (")]
    assert ("services.kv: no-such-kvserver (the command of this command service), "
            "/opt/nowhere/join (the setup of this command service) not found" in line)
    assert "python" not in line.split(":", 1)[1]
    err = run_refused(path, tmp_path, capsys)
    assert "services.kv: no-such-kvserver (the command of this command service)" in err
