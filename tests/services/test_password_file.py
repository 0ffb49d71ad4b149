"""A password file another user could read or change is refused, as ssh refuses such a
key and libpq warns of such a .pgpass (issue 48 item 6); `harness validate` says the
same line `harness run` stops on, before anything runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.services.attached import read_password_file


def _spec(tmp_path: Path, pw: Path) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nworkload: redis_mix\nhosts: {client: localhost}\n"
                    "services:\n  kv: {kind: redis, address: '127.0.0.1:1', "
                    f"auth: {{user: bench, password_file: '{pw}'}}}}\n"
                    "clients: {hosts: [client], processes: 1, connections: 1}\n"
                    "params: {key_space: 10}\nrun: {ops: 10}\n")
    return path


@pytest.mark.parametrize(("mode", "ok"), [(0o600, True), (0o400, True), (0o640, False),
                                          (0o644, False), (0o666, False), (0o602, False)])
def test_only_a_file_of_mode_600_or_stricter_is_read(tmp_path: Path, mode: int,
                                                     ok: bool) -> None:
    pw = tmp_path / "pw"
    pw.write_text("s3cret-pw\nsecond line ignored\n")
    pw.chmod(mode)
    value, problem = read_password_file(pw)
    if ok:
        assert (value, problem) == ("s3cret-pw", None)
    else:
        assert value == "" and problem is not None
        assert f"(mode {mode:04o}); run `chmod 600 {pw}`" in problem
        assert "s3cret" not in problem


def test_a_fifo_another_users_file_and_a_missing_file_are_each_one_line(
        tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    assert read_password_file(fifo)[1] == f"password file {fifo} is not a regular file"
    assert "No such file" in str(read_password_file(tmp_path / "none")[1])
    if os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root (CI runs as root)")
    theirs = tmp_path / "theirs"
    theirs.write_text("pw")
    theirs.chmod(0o600)
    os.chown(theirs, 65534, 65534)  # nobody
    assert "belongs to another user (uid 65534)" in str(read_password_file(theirs)[1])


def test_validate_says_what_run_would(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    pw = tmp_path / "pw"
    pw.write_text("s3cret-pw\n")
    pw.chmod(0o644)
    spec = _spec(tmp_path, pw)
    assert cli_main(["validate", str(spec), "--out", str(tmp_path / "raw")]) == 2
    validate_err = capsys.readouterr().err
    assert cli_main(["run", str(spec), "--out", str(tmp_path / "raw"), "-q"]) == 2
    run_err = capsys.readouterr().err
    line = f"services.kv.auth: password file {pw} can be read or changed by others"
    assert line in validate_err and line in run_err, (validate_err, run_err)
    assert "s3cret" not in validate_err + run_err
    pw.chmod(0o600)
    assert cli_main(["validate", str(spec), "--out", str(tmp_path / "raw")]) == 0
