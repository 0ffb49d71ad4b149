"""The seed-002 study end to end: its spec, the emulated delay showing up in the
measured inserts, and a harness killed mid-run whose leftovers `harness netem cleanup`
removes (namespaces, links, relays, servers)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.results import iter_run_dirs, read_manifest, read_ops
from harness.run.runner import Runner
from harness.spec import expand, load_spec
from tests.fixtures.netns import assert_no_leftovers, need_root
from tests.fixtures.procs import is_worker

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]
SPEC = """\
name: {name}
workload: cluster
services:
  db:
    kind: pg_cluster
    settings: {{fsync: false, nodes: 2, delay_ms: {delay}}}
params: {{objects: {n}, key_order: ascending}}
grid:
  services.db.mode: {modes}
  op: [insert]
repetitions: 1
run: {{ops: {n}, timeout_s: 5, max_consecutive_errors: 5}}
"""


def write(tmp_path: Path, name: str = "delay", delay: float = 5.0, n: int = 150,
          modes: str = "[local-cluster, network-cluster]", extra: str = "") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPEC.format(name=name, delay=delay, n=n, modes=modes) + extra)
    return path


def test_the_built_in_spec_is_the_issue_grid() -> None:
    spec = load_spec(ROOT / "experiments" / "cluster_modes.yaml")
    plans = expand(spec)
    configs = {(p.grid_point["services.db.mode"], p.grid_point["services.db.nodes"],
                p.grid_point["services.db.profile"]) for p in plans}
    assert configs == {("single", 1, "none"), ("local-cluster", 2, "none"),
                       ("local-cluster", 4, "none")} | {
        ("network-cluster", n, p) for n in (2, 4) for p in ("lan", "wifi")}
    assert len(plans) == 7 * 5 * spec.repetitions
    assert all(p.size.ops == p.params["objects"] for p in plans)


def test_spec_rules_are_checked_before_anything_runs(tmp_path: Path) -> None:
    bad = write(tmp_path, extra="exclude:\n  - {op: delete}\n  - {nodes: 2}\n"
                                "clients: {processes: 2}\n")
    with pytest.raises(SpecError) as info:
        load_spec(bad, {"run.ops": 99})
    text = "\n".join(info.value.problems)
    assert "exclude.0.op: 'delete' is not among the grid's values" in text
    assert "exclude.1.nodes: not a grid key" in text
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, extra="clients: {processes: 2}\n"), {"run.ops": 99})
    text = "\n".join(info.value.problems)
    assert "run.ops (99) must equal params objects (150)" in text
    assert "one client process, one connection" in text
    with pytest.raises(SpecError, match="mode single has exactly 1 node, not 2"):
        load_spec(write(tmp_path, modes="[single]"))
    spec = load_spec(write(tmp_path, extra="exclude:\n  - {services.db.mode: local-cluster}\n"))
    assert [p.grid_point["services.db.mode"] for p in expand(spec)] == ["network-cluster"]


def test_the_emulated_delay_is_real(tmp_path: Path) -> None:
    """network-cluster inserts take about one emulated round trip (2 x 5 ms) longer than
    local-cluster ones: each synchronous commit waits for the standby across the link."""
    need_root()
    raw = tmp_path / "raw"
    outcomes = Runner(load_spec(write(tmp_path)), raw, progress=False).run()
    assert [o.status for o in outcomes] == ["complete", "complete"]
    median_ms = {}
    for run_dir in iter_run_dirs(raw):
        man = read_manifest(run_dir)
        cfg = man.services["db"]["config"]
        ops = read_ops(run_dir).to_pandas()
        assert len(ops) == 150 and (ops["status"] == "ok").all()
        median_ms[cfg["mode"]] = ops["latency_ns"].median() / 1e6
        if cfg["mode"] == "network-cluster":
            assert cfg["emulation"] in ("netem", "relay") and cfg["link"]["rtt_ms"] == 10.0
            assert cfg["netns"] and cfg["standby_addresses"][0].startswith("10.231.")
    added = median_ms["network-cluster"] - median_ms["local-cluster"]
    print(f"insert median: local {median_ms['local-cluster']:.3f} ms, network "
          f"{median_ms['network-cluster']:.3f} ms, added {added:.3f} ms (RTT 10 ms)")
    assert 8.5 <= added <= 13.0, median_ms


def _ip(*args: str) -> str:
    return subprocess.run(["ip", *args], capture_output=True, text=True).stdout


def _tag_owned_by(pid: int) -> str:
    """`hkv-<tag>` of the state directory the process `pid` created."""
    for d in Path("/tmp").glob("hkv-*"):
        with contextlib.suppress(OSError, ValueError):
            if json.loads((d / "owner.json").read_text())["pid"] == pid:
                return "hkv-" + json.loads((d / "owner.json").read_text())["tag"]
    raise AssertionError(f"no state directory owned by {pid}")


def _hkv_processes(tag: str) -> dict[int, str]:
    """Processes whose working directory or arguments name the cluster `tag` (its state
    directory, or a relay's --tag): what a cluster run starts."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (tag in cwd or tag in argv):
            found[int(entry.name)] = argv.replace("\0", " ")[:100]
    return found


def test_cleanup_after_the_harness_is_killed_mid_run(tmp_path: Path) -> None:
    need_root()
    path = write(tmp_path, name="crash", delay=1.0, n=1_000_000, modes="[network-cluster]")
    cmd = [sys.executable, "-m", "harness.cli", "run", str(path), "--out",
           str(tmp_path / "raw"), "--no-progress"]
    # Unique per session: tmp_path names repeat across sessions, which may run at once.
    mark = f"crash-{uuid.uuid4().hex}"
    env = {**os.environ, "HARNESS_TEST_TAG": mark}
    harness = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not _worker_running(mark):
            assert harness.poll() is None, harness.communicate()
            time.sleep(0.1)
        assert _worker_running(mark), "the harness never started measuring"
        time.sleep(1.0)
        tag = _tag_owned_by(harness.pid)
        servers = _hkv_processes(tag)
        assert any("postgres" in a for a in servers.values()) and any(
            "harness.netem.relay" in a for a in servers.values()), servers
        harness.send_signal(signal.SIGKILL)
        harness.wait(10)
        assert tag in _ip("netns", "list")  # the crash left them
        res = subprocess.run([sys.executable, "-m", "harness.cli", "netem", "cleanup"],
                             capture_output=True, text=True, timeout=120)
        assert f"deleted namespace {tag}-s1" in res.stdout, res
        # Another session's live resources (a test bed, a benchmark) may be "in use";
        # this crashed run's must not be.
        assert "stopped process" in res.stdout and f"in use, left alone: {tag}" not in res.stdout
        assert _hkv_processes(tag) == {}
        for pid in servers:
            assert not Path(f"/proc/{pid}").exists() or Path(
                f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        assert tag not in _ip("-o", "link") and tag not in _ip("netns", "list")
        assert not list(Path("/tmp").glob(f"{tag}-*"))
        assert_no_leftovers()
        again = subprocess.run([sys.executable, "-m", "harness.cli", "netem", "cleanup"],
                               capture_output=True, text=True, timeout=60)
        assert tag not in again.stdout  # idempotent: nothing of ours is found twice
        # What the kill left of the run itself (its client work directory, the records
        # in flight) is `harness cleanup`'s, as the next `harness run` would do it.
        state = json.loads((tmp_path / "raw" / "crash" / ".harness" / "state.json")
                           .read_text())
        assert state["workdirs"], state
        res = subprocess.run([*cmd[:3], "cleanup", str(path), "--out", str(tmp_path / "raw")],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr + json.dumps(state)
        assert not [d for d in state["workdirs"].values() if Path(d).exists()], res.stdout
    finally:
        if harness.poll() is None:
            harness.kill()
        for pid in _tagged(mark):  # the orphaned client process, if still there
            os.kill(pid, signal.SIGKILL)


def _tagged(tag: str) -> list[int]:
    out = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if f"HARNESS_TEST_TAG={tag}".encode() in (entry / "environ").read_bytes():
                out.append(int(entry.name))
        except OSError:
            continue
    return out


def _worker_running(tag: str) -> bool:
    # A client process: `python -m harness.worker` or a fork of the agent (kvbench-worker).
    return any(is_worker(p) for p in _tagged(tag))
