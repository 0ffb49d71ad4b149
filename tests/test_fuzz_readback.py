"""Fuzzing as a habit (issue 48 item 7): what the kit reads back, mutated where it
matters (each leaf of a real manifest and of a real state file, with every kind of
JSON value including NaN, infinities, huge and negative numbers, paths and control
characters), gets no traceback from the readers and the gates, and a state file gets
nothing outside the kit's own trees removed or signalled by `harness cleanup`.

Fixed budgets and derandomized examples: CI runs the same examples every time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from harness.cli import main as cli_main
from harness.errors import ResultsError
from harness.hosts.owned import new_token
from harness.results import read_manifest
from harness.run.inflight import STATE_DIR, STATE_FILE, STATE_VERSION
from tests.fixtures.rawdata import HISTORY_EXPERIMENT, write_history

#: Values a forger or a bit flip puts into a leaf.
_LEAF = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
         | st.floats(allow_nan=True, allow_infinity=True)
         | st.sampled_from([0, -1, 1e300, -0.0, 2**63, "NaN", "", "../..", "/etc/passwd",
                            "\x1b[2J", "a" * 5000, "2026-13-45T99:99:99", "complete",
                            "failed", "partial"])
         | st.text(max_size=12))
_VALUE = st.recursive(_LEAF, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                      max_leaves=6)


def _leaves(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside `data` (mappings and lists), containers included."""
    out = [path]
    if isinstance(data, dict):
        for k, v in data.items():
            out += _leaves(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _leaves(v, (*path, i))
    return out


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        data = data[key]
    return data


def _set(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    data[path[0]] = _set(data[path[0]], path[1:], value)
    return data


def _no_traceback(text: str) -> None:
    """In-process, an exception that is not the kit's would fail the test by itself; a
    traceback printed by a subprocess or a thread would not."""
    assert "Traceback" not in text, text[-3000:]


# --- manifests -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six points of one configuration, two runs each (a labelled history)."""
    return write_history(tmp_path_factory.mktemp("fuzz") / "raw", [1.0] * 6, reps=2,
                         ops=300)


@pytest.fixture(scope="module")
def manifest_paths(tree: Path) -> list[tuple[Any, ...]]:
    run_dir = sorted((tree / HISTORY_EXPERIMENT).iterdir())[0]
    return [p for p in _leaves(json.loads((run_dir / "manifest.json").read_text())) if p]


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_manifest_is_read_or_skipped_by_every_reader(
        tree: Path, manifest_paths: list[tuple[Any, ...]], data: st.DataObject,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = data.draw(st.sampled_from(manifest_paths), label="path")
    value = data.draw(_VALUE, label="value")
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw"
        shutil.copytree(tree, raw)
        run_dir = sorted((raw / HISTORY_EXPERIMENT).iterdir())[3]
        man = json.loads((run_dir / "manifest.json").read_text())
        (run_dir / "manifest.json").write_text(json.dumps(_set(man, path, value)))
        try:
            read_manifest(run_dir)
        except ResultsError as exc:
            assert "\n" not in str(exc).strip(), str(exc)
        capsys.readouterr()
        assert cli_main(["summary", str(raw)]) == 0
        gate = cli_main(["history", str(raw), "--by", "commit", "--gate", "--no-progress"])
        # A manifest's words never make a regression: the ops did not change.
        assert gate in (0, 2), gate
        out = capsys.readouterr()
        _no_traceback(out.out + out.err)


# --- state files -----------------------------------------------------------------------
@pytest.fixture
def bystanders(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """What a forged state file would point cleanup at: a directory outside every tree
    (unmarked, and one marked by another run) with a file, a link to it, and a process
    of the user's (no owner token) in a session of its own."""
    base = Path(tempfile.mkdtemp(prefix="kv-bystander-"))
    plain, marked = base / "plain", base / "marked"
    for d in (plain, marked):
        d.mkdir()
        (d / "precious").write_text("keep")
    (marked / ".kvbench-owner").write_text(new_token())
    (base / "link").symlink_to(plain)
    env = {k: v for k, v in os.environ.items() if k != "KVBENCH_OWNER"}
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True, env=env)
    try:
        yield {"base": base, "dirs": [plain, marked], "proc": proc}
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(base, ignore_errors=True)


def _ticks(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


SPEC = """\
name: fuzzed
workload: memcache_mix
hosts: {server: localhost, client: localhost}
services:
  cache: {kind: memcached, host: server}
clients: {hosts: [client], processes: 1, connections: 1}
params: {key_space: 100}
run: {ops: 100}
"""


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_state_file_gets_nothing_outside_removed_or_signalled(
        tmp_path: Path, bystanders: dict[str, Any], data: st.DataObject,
        capsys: pytest.CaptureFixture[str]) -> None:
    base, proc = bystanders["base"], bystanders["proc"]
    aimed = [str(p) for p in bystanders["dirs"]] + [str(base / "link"),
                                                    f"{base}/plain/../plain",
                                                    f"{base}/plain/precious"]
    state = {"version": STATE_VERSION, "pid": 999_999_999, "machine": os.uname().nodename,
             "started_utc": "", "spec": "fuzzed", "owner": new_token(),
             "boots": {"server": Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
                       "client": Path("/proc/sys/kernel/random/boot_id").read_text().strip()},
             "servers": [{"service": "cache", "kind": "memcached", "host": "server",
                          "pid": proc.pid, "started_ticks": _ticks(proc.pid),
                          "workdir": aimed[0]}],
             "workdirs": {"client": aimed[1]}, "scratch": [aimed[2]],
             "runs": [{"run_id": "r1", "label": "l", "manifest": {}, "reason": "killed",
                       "final": False,
                       "workers": [{"host": "client", "client": 0, "pid": proc.pid,
                                    "started_ticks": _ticks(proc.pid),
                                    "files": {"out": aimed[4], "cfg": aimed[3]}}]}]}
    paths = [p for p in _leaves(state) if p]
    for _ in range(data.draw(st.integers(1, 2), label="mutations")):
        path = data.draw(st.sampled_from(paths), label="path")
        # Mostly what a forger would write, of the type the kit writes there (a wrong
        # type refuses the whole state, tested above): paths at the bystanders, their pid
        # and start time, tokens; so that most examples reach the removals and signals.
        here = _get(state, path)
        forged = (st.sampled_from(aimed) | st.sampled_from([new_token(), "0" * 32, ""])
                  | st.text(max_size=8) if isinstance(here, str)
                  else st.sampled_from([proc.pid, _ticks(proc.pid), 1, 0, -1, 2**62])
                  if isinstance(here, int) and not isinstance(here, bool) else _VALUE)
        value = data.draw(st.one_of(forged, forged, forged, _VALUE), label="value")
        try:
            state = _set(state, path, value)
        except (KeyError, IndexError, TypeError):
            continue  # a container replaced by a scalar earlier
        paths = [p for p in _leaves(state) if p]
    with tempfile.TemporaryDirectory(dir=tmp_path) as tmp:
        spec = Path(tmp) / "fuzzed.yaml"
        spec.write_text(SPEC)
        raw = Path(tmp) / "raw"
        (raw / "fuzzed" / STATE_DIR).mkdir(parents=True)
        (raw / "fuzzed" / STATE_DIR / STATE_FILE).write_text(json.dumps(state))
        capsys.readouterr()
        code = cli_main(["cleanup", str(spec), "--out", str(raw)])
        out = capsys.readouterr()
    _no_traceback(out.out + out.err)
    said = (out.out + out.err).strip().splitlines() or ["nothing"]
    event("cleanup acted on the state" if "left alone" in out.out + out.err
          else f"refused: {said[-1].rpartition(': ')[2][:60]}")
    assert code in (0, 1, 2), code
    for d in bystanders["dirs"]:
        assert (d / "precious").read_text() == "keep", out
    assert proc.poll() is None, "a process the kit cannot prove its own was signalled"
