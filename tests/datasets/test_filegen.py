"""File generator: deterministic by seed, the distributions have their shapes."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.datasets.filegen import FileContents, file_sizes, file_specs, generate_files


def test_same_seed_same_files_other_seed_other_sizes(tmp_path: Path) -> None:
    a = generate_files(tmp_path / "a", 20, "lognormal", 7, median_bytes=5000, sigma=1.0)
    b = generate_files(tmp_path / "b", 20, "lognormal", 7, median_bytes=5000, sigma=1.0)
    assert a == b
    for spec in a:
        data = (tmp_path / "a" / spec.name).read_bytes()
        assert len(data) == spec.size_bytes
        assert data == (tmp_path / "b" / spec.name).read_bytes()
    assert file_sizes(20, "lognormal", 8, median_bytes=5000) != [s.size_bytes for s in a]
    assert [s.name for s in a[:3]] == ["0.txt", "1.txt", "2.txt"]


def test_sizes_are_pinned_for_a_seed() -> None:
    # A regression guard: studies cite file sets by seed, so the sizes must not drift.
    assert file_sizes(3, "uniform", 1, min_bytes=0, max_bytes=1000) == [134, 848, 764]
    assert file_sizes(2, "lognormal", 1, median_bytes=20000, sigma=1.0) == [6618, 55769]


def test_fixed_sizes() -> None:
    assert file_sizes(4, "fixed", 1, size_bytes=123) == [123] * 4
    assert file_sizes(0, "fixed", 1) == []


def test_uniform_covers_its_closed_range_evenly() -> None:
    sizes = file_sizes(20000, "uniform", 3, min_bytes=10, max_bytes=19)
    assert min(sizes) == 10 and max(sizes) == 19
    counts = [sizes.count(v) for v in range(10, 20)]
    assert all(1800 < c < 2200 for c in counts), counts


def test_lognormal_has_its_median_and_sigma_and_is_clipped() -> None:
    sizes = file_sizes(20000, "lognormal", 5, median_bytes=20000, sigma=1.0,
                       max_bytes=10**9)
    logs = [math.log(s) for s in sizes]
    assert statistics.median(sizes) == pytest.approx(20000, rel=0.05)
    assert statistics.stdev(logs) == pytest.approx(1.0, rel=0.05)
    clipped = file_sizes(2000, "lognormal", 5, median_bytes=20000, sigma=2.0,
                         min_bytes=1000, max_bytes=100_000)
    assert min(clipped) == 1000 and max(clipped) == 100_000


@pytest.mark.parametrize(("dist", "params", "message"), [
    ("normal", {}, "size_dist must be one of"),
    ("uniform", {"min_bytes": 5, "max_bytes": 4}, "min_bytes <= max_bytes"),
    ("lognormal", {"median_bytes": 0}, "median_bytes > 0"),
])
def test_bad_parameters_are_refused(dist: str, params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        file_sizes(3, dist, 1, **params)


def test_contents_are_views_of_one_block_and_differ_between_files() -> None:
    specs = file_specs(50, "fixed", 1, size_bytes=64, prefix="c0-")
    contents = FileContents(specs, 1)
    bodies = {bytes(contents.content(i)) for i in range(50)}
    assert len(bodies) == 50 and all(len(b) == 64 for b in bodies)
    assert specs[0].name == "c0-0.txt"
    assert len(contents.block) < 64 + 50 + 1


def test_cli_gen_files(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "files"
    assert cli_main(["gen-files", str(out), "--count", "10", "--dist", "lognormal",
                     "--median-bytes", "2000", "--sigma", "1.0", "--seed", "1"]) == 0
    assert "wrote 10 file(s)" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{i}.txt" for i in range(10))
    sizes = [(out / f"{i}.txt").stat().st_size for i in range(10)]
    assert sizes == file_sizes(10, "lognormal", 1, median_bytes=2000, sigma=1.0)
    assert cli_main(["gen-files", str(out), "--dist", "uniform", "--min-bytes", "9",
                     "--max-bytes", "1"]) == 2
    assert "min_bytes <= max_bytes" in capsys.readouterr().err
