"""`harness validate` says what `harness run` will say (issue 50 item 4): each refusal a
launcher makes of its settings before it starts anything (PostgreSQL's own settings in
`extra`, a command service's templates and the names they use, files, a password on a
command line, password files) is made by validate, with the same line, and by run
before anything starts. Each case below is one of those refusals in the code."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main as cli_main

HEAD = "name: v\nhosts: {server: localhost, client: localhost}\n"
CLIENTS = "clients: {hosts: [client], processes: 1, connections: 1}\nrun: {ops: 10}\n"


def _pg(extra: str, kind: str = "postgres") -> str:
    return (HEAD + "workload: datastore_memcache\nservices:\n"
            f"  db: {{kind: {kind}, host: server, settings: {{extra: {extra}}}}}\n"
            "  cache: {kind: memcached, host: server}\n" + CLIENTS)


def _proxy(settings: str) -> str:
    return (HEAD + "workload: memcache_mix\nservices:\n"
            "  cache: {kind: memcached, host: server}\n"
            "  proxy:\n    kind: command\n    host: server\n    after: [cache]\n"
            f"    settings: {{protocol: memcache, provides: memcached, {settings}}}\n"
            + CLIENTS)


CASES = {
    "postgres listen_addresses": (_pg("{listen_addresses: '*'}"),
                                  "extra setting 'listen_addresses' is set by the launcher"),
    "postgres LISTEN_ADDRESSES": (_pg("{LISTEN_ADDRESSES: '*'}"),
                                  "extra setting 'LISTEN_ADDRESSES' is set by the launcher"),
    "postgres Port": (_pg("{Port: 1}"), "extra setting 'Port' is set by the launcher"),
    "postgres named": (_pg("{shared_buffers: 64MB}"),
                       "set 'shared_buffers' as its own setting, not in extra"),
    "postgres name": (_pg("{'bad name': 1}"), "'bad name' is not a parameter name"),
    "postgres scalar": (_pg("{work_mem: [1]}"), "must be a scalar"),
    "cluster hba_file": (_pg("{hba_file: /tmp/x}", kind="pg_cluster"),
                         "extra setting 'hba_file' is set by the launcher"),
    "hook password": (_proxy("command: 'nutcracker -a {host} -s {port2}', "
                             "setup: 'echo {services.cache.password}'"),
                      "would put a password on a command line"),
    "command password": (_proxy("command: 'x --pw {services.cache.password}'"),
                         "would put a password on a command line"),
    "unknown placeholder": (_proxy("command: 'x {nope}'"), "unknown placeholder(s) ['nope']"),
    "service not behind": (_proxy("command: 'x {services.other.address}'"),
                           "names no service it is in front of"),
    "field of no service": (_proxy("command: 'x {services.cache.secret}'"),
                            "names no service it is in front of"),
    "file name": (_proxy("command: 'x', files: {'../etc': 'y'}"),
                  "files: '../etc' is not a file name"),
    "no command": (_proxy("ready: tcp"), "set `command`, the server's command line"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_refuses_what_run_refuses_with_the_same_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    text, said = CASES[case]
    spec = tmp_path / "v.yaml"
    spec.write_text(text)
    out = tmp_path / "raw"
    validated = cli_main(["validate", str(spec), "--out", str(out)])
    v = capsys.readouterr()
    ran = cli_main(["run", str(spec), "--out", str(out), "-q", "--no-progress"])
    r = capsys.readouterr()
    assert validated == ran == 2, (validated, ran, v.err, r.err)
    assert said in v.err and said in r.err, (v.err, r.err)
    lines = lambda err: sorted(ln for ln in err.splitlines() if ln.startswith("error: "))  # noqa: E731
    assert lines(v.err) == lines(r.err)
    assert not out.exists() or not any(out.rglob("manifest.json"))  # nothing ran


def test_a_hook_may_name_the_address_of_a_service_it_is_in_front_of(tmp_path: Path) -> None:
    """{services.NAME.address} in a setup hook validated and then failed at start with
    KeyError('services'): hooks are rendered with the same names as the command."""
    from harness.spec import load_spec

    spec = tmp_path / "v.yaml"
    spec.write_text(_proxy("command: 'x {host}', setup: 'echo {services.cache.address}'"))
    load_spec(spec)  # no refusal; tests/services/test_command.py starts such a hook
