"""Removing what the kit made on a machine: only directories that carry its owner mark
with this token, and of those only what the caller names (`harness.hosts.owned`)."""

from __future__ import annotations

import os
from pathlib import Path

from harness.hosts import LocalHost
from harness.hosts.owned import (
    mark_local,
    new_token,
    prune_owned_dir,
    remove_owned_empty_dirs,
)


def _workdir(base: Path, name: str, token: str | None, files: list[str]) -> str:
    d = base / name
    d.mkdir()
    path = mark_local(str(d), token) if token else os.path.realpath(d)
    for f in files:
        Path(path, f).write_text("x")
    return path


def test_only_an_owned_directory_holding_nothing_but_its_mark_is_removed(
        tmp_path: Path) -> None:
    token = new_token()
    empty = _workdir(tmp_path, "empty", token, [])
    busy = _workdir(tmp_path, "busy", token, ["run00001-c000.npz"])
    other = _workdir(tmp_path, "other", new_token(), [])  # another run's
    bare = _workdir(tmp_path, "bare", None, [])  # no mark: not the kit's
    with LocalHost() as host:
        removed = remove_owned_empty_dirs(host, token, [empty, busy, other, bare])
    assert removed == [empty]
    assert not Path(empty).exists()
    assert all(Path(p).is_dir() for p in (busy, other, bare))
    assert Path(busy, "run00001-c000.npz").is_file()


def test_pruning_keeps_the_named_clients_files_and_the_mark(tmp_path: Path) -> None:
    token = new_token()
    files = ["run00000-c000.json", "run00000-c000.log", "run00001-c000.json",
             "run00001-c000.npz", "run00001-c000.part00000.npz", "run00010-c000.json"]
    d = _workdir(tmp_path, "w", token, files)
    with LocalHost() as host:
        assert prune_owned_dir(host, token, d, ["run00001-c000."])
        assert sorted(os.listdir(d)) == [".kvbench-owner", "run00001-c000.json",
                                         "run00001-c000.npz", "run00001-c000.part00000.npz"]
        # A client it cannot name, a directory not this run's: nothing is removed.
        assert not prune_owned_dir(host, token, d, ["run00001-c000.", ""])
        other = _workdir(tmp_path, "o", new_token(), files)
        assert not prune_owned_dir(host, token, other, ["run00001-c000."])
    assert len(os.listdir(other)) == len(files) + 1
