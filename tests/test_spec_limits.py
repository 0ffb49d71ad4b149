"""Hostile input to the spec loader (issue 24): every input bounded before it is parsed,
every value checked before anything runs, each problem one `file:field: message (line N)`
line (exit 2 from the CLI, no traceback)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.errors import SpecError
from harness.spec import load_spec
from harness.specfile import MAX_SET_BYTES, MAX_SPEC_BYTES

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
    spec = Path(__file__).resolve().parent.parent / "experiments/datastore_vs_memcache.yaml"
    value = "x" * (MAX_SET_BYTES + 1)
    assert cli_main(["validate", str(spec), "--set", f"description={value}"]) == 2
    assert capsys.readouterr().err == (
        f"error: --set description: {MAX_SET_BYTES + 1:,} bytes, more than the "
        f"{MAX_SET_BYTES:,} bytes a --set value may have\n")
    assert cli_main(["validate", str(spec), "--set", f"description={value[1:]}"]) == 0
