"""Building the C extensions (setup.py): the load generator's native core, and the
summary's radix sort and ops split. With a compiler all are built; without one the
install goes on, says in one line each what is used instead, and builds nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("setup.py", "pyproject.toml", "README.md", "harness/loadgen/_native.c",
           "harness/analysis/stats/_radix.c", "harness/analysis/data/_opsplit.c",
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
    assert len(said) == 3, said
    assert "pure-Python path is used" in said[0] and "numpy's sort is used" in said[1]
    assert "ops split (numpy's is used)" in said[2]
    assert not list(tmp_path.rglob("*.so"))


def _load(lib: Path, name: str, then: str) -> str:
    probe = ("import importlib.util as u, sys; s = u.spec_from_file_location("
             f"{name!r}, {str(lib)!r}); m = u.module_from_spec(s); "
             f"s.loader.exec_module(m); {then}")
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=60).stdout


def test_with_a_compiler_all_are_built_and_load(tmp_path: Path) -> None:
    if shutil.which(os.environ.get("CC", "gcc")) is None and not os.environ.get("CI"):
        pytest.skip("no C compiler on this machine")
    proc = _build(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "kvbench:" not in proc.stderr
    [lib] = (tmp_path / "harness" / "loadgen").glob("_native*.so")
    out = _load(lib, "harness.loadgen._native", "print(m.Engine.__name__, m.EV_DONE)")
    assert out.split() == ["Engine", "1"]
    [lib] = (tmp_path / "harness" / "analysis" / "stats").glob("_radix*.so")
    out = _load(lib, "harness.analysis.stats._radix",
                "import array; a = array.array('I', [3, 1, 2]); b = array.array('I', [0] * 3); "
                "print(list((a, b)[m.sort_u32(a, b)]))")
    assert out.strip() == "[1, 2, 3]"
    [lib] = (tmp_path / "harness" / "analysis" / "data").glob("_opsplit*.so")
    out = _load(lib, "harness.analysis.data._opsplit",
                "import array; q = array.array; lat = q('q', [5, 6, 7]); out = q('q', [0] * 3); "
                "stats = q('q', [0] * 14); m.split(q('b', [1, 0, 1]), bytes(3), bytes(3), "
                "bytes(1), lat, lat, out, q('q', [0] * 3), stats); print(list(out))")
    assert out.strip() == "[6, 5, 7]"
