"""Building the native core (setup.py): with a compiler it is built; without one the
install goes on, says in one line that the pure-Python path is used, and builds nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("setup.py", "pyproject.toml", "README.md", "harness/loadgen/_native.c",
           *(str(p.relative_to(ROOT)) for p in (ROOT / "harness/loadgen/native_core").iterdir()))


def _build(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    for rel in SOURCES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    return subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def test_without_a_compiler_the_build_falls_back_in_one_line(tmp_path: Path) -> None:
    proc = _build(tmp_path, CC="/bin/false")
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "kvbench:" in line]
    assert said == [said[0]] and "pure-Python path is used" in said[0]
    assert not list((tmp_path / "harness" / "loadgen").glob("_native*.so"))


def test_with_a_compiler_the_core_is_built_and_loads(tmp_path: Path) -> None:
    if shutil.which(os.environ.get("CC", "gcc")) is None and not os.environ.get("CI"):
        pytest.skip("no C compiler on this machine")
    proc = _build(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "pure-Python" not in proc.stderr
    [lib] = (tmp_path / "harness" / "loadgen").glob("_native*.so")
    probe = ("import importlib.util as u, sys; s = u.spec_from_file_location("
             f"'harness.loadgen._native', {str(lib)!r}); m = u.module_from_spec(s); "
             "s.loader.exec_module(m); print(m.Engine.__name__, m.EV_DONE)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.split() == ["Engine", "1"]
