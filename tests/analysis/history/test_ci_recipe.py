"""The GitHub Actions recipe of docs/compare.md, run as it is written there: its steps'
commands are read from the page's YAML block and run with bash in a git repository of
scripted commits (`git rev-parse` gives the labels), against a kept tree, each step's
exit code checked.

The commits' runs: in the first test the recipe's own `harness run` step measures a real
memcached; in the second, where the series needs a known regression in the middle, each
commit's runs are written by the kit's writer (`write_history`) in place of that step,
labelled with the commit's id as the step labels them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cli.exits import (
    EXIT_NOT_JUDGEABLE,
    EXIT_PASS,
    EXIT_REGRESSION,
    EXIT_UNREADABLE,
)
from harness.hosts import LocalHost
from harness.results import iter_run_dirs, read_manifest
from tests.fixtures.rawdata import HISTORY_EXPERIMENT, write_history
from tests.fixtures.servers import require_service

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "compare.md"


def recipe() -> dict[str, dict[str, Any]]:
    """The recipe's steps that run commands: ``measure``, ``summary``, ``gate``."""
    blocks = re.findall(r"```yaml\n(.*?)```", PAGE.read_text(), re.S)
    [block] = [b for b in blocks if ".github/workflows/perf.yml" in b]
    steps = [s for s in yaml.safe_load(block)["jobs"]["perf"]["steps"] if "run" in s]
    pick = {"measure": "harness run ", "summary": "--format markdown", "gate": "--gate"}
    out = {}
    for key, marker in pick.items():
        [out[key]] = [s for s in steps if marker in s["run"]]
    return out


class Job:
    """One CI job's machine: the checkout (a git repository of scripted commits), the
    kept tree, the repository's variables, the step summary file."""

    def __init__(self, tmp: Path) -> None:
        self.repo, self.tree, self.summary = tmp / "repo", tmp / "perf" / "raw", tmp / "summary.md"
        self.variables: dict[str, str] = {}
        self.repo.mkdir()
        self.git("init", "-q")
        self.git("config", "user.email", "ci@example.invalid")
        self.git("config", "user.name", "ci")

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.repo, check=True, capture_output=True,
                              text=True).stdout.strip()

    def commit(self, change: str) -> str:
        """A scripted commit; its short id, as the recipe's `git rev-parse` gives it."""
        (self.repo / "cache.c").write_text(f"/* {change} */\n")
        self.git("add", "cache.c")
        self.git("commit", "-q", "-m", change)
        return self.git("rev-parse", "--short", "HEAD")

    def run(self, step: dict[str, Any], *, spec: Path | None = None, extra: str = ""
            ) -> subprocess.CompletedProcess[str]:
        """The step's command as the page writes it, with this machine's paths: the
        kit's own `harness`, the kept tree here, and (the writer's experiment being
        another name) `--experiment` its name unless `spec` is measured for real."""
        cmd = step["run"].replace(".venv/bin/harness", f"{sys.executable} -m harness.cli")
        cmd = cmd.replace("/srv/perf/raw", str(self.tree))
        if spec is not None:
            cmd = cmd.replace("experiments/my_cache.yaml", str(spec))
        else:
            cmd = re.sub(r"--experiment my_cache\b", f"--experiment {HISTORY_EXPERIMENT}", cmd)
        env = {**os.environ, "GITHUB_STEP_SUMMARY": str(self.summary)}
        for name, value in step.get("env", {}).items():  # ${{ vars.NAME }}, as Actions does
            env[name] = re.sub(r"\$\{\{\s*vars\.(\w+)\s*\}\}",
                               lambda m: self.variables.get(m[1], ""), str(value))
        return subprocess.run(["bash", "-e", "-c", cmd.rstrip() + extra], cwd=self.repo,
                              env=env, capture_output=True, text=True, timeout=900)


SPEC = """\
name: my_cache
workload: memcache_mix
hosts: {client: localhost}
services:
  cache: {kind: memcached, host: client}
clients: {hosts: [client], processes: 1, connections: 1}
params: {key_space: 200}
run: {ops: 300, warmup_ops: 20}
"""


@pytest.mark.integration
def test_the_recipe_measures_a_real_server_into_the_kept_tree(tmp_path: Path) -> None:
    require_service("memcached", LocalHost())
    steps, job = recipe(), Job(tmp_path)
    spec = tmp_path / "my_cache.yaml"
    spec.write_text(SPEC)
    sha = job.commit("first")
    done = job.run(steps["measure"], spec=spec)
    assert done.returncode == EXIT_PASS, done.stderr
    mans = [read_manifest(d) for d in iter_run_dirs(job.tree)]
    assert len(mans) == 3 and {m.labels["commit"] for m in mans} == {sha}
    summary = job.run(steps["summary"], spec=spec)
    assert summary.returncode == EXIT_PASS, summary.stderr
    assert "over 1 point(s), points by label commit" in job.summary.read_text()
    gate = job.run(steps["gate"], spec=spec)
    assert gate.returncode == EXIT_PASS, gate.stderr
    assert gate.stdout.strip().splitlines()[-1].startswith("gate: pass")


def _last(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout.strip().splitlines()[-1]


def test_the_recipe_fails_from_a_regressions_first_commit_until_it_is_accepted(
        tmp_path: Path) -> None:
    steps, job = recipe(), Job(tmp_path)
    shas: list[str] = []
    gates: list[tuple[int, str]] = []

    def push(change: str, factor: float, reps: int = 3, summary: bool = False
             ) -> subprocess.CompletedProcess[str]:
        """A commit lands: its runs into the kept tree, then the recipe's steps (the
        summary step, which prints what the gate judges, at the commits `summary` says:
        each is a process reading the whole tree)."""
        shas.append(job.commit(change))
        write_history(job.tree, [factor], reps=reps, commits=[shas[-1]],
                      start_minute=3 * len(shas), seed=10 + len(shas))
        if summary:
            done = job.run(steps["summary"])
            assert done.returncode == EXIT_PASS, done.stderr
        gate = job.run(steps["gate"])
        assert gate.returncode in (EXIT_PASS, EXIT_REGRESSION), gate.stderr
        gates.append((gate.returncode, _last(gate)))
        return gate

    push("first", 1.0, summary=True)
    assert "over 1 point(s), points by label commit: no change point" in \
        job.summary.read_text()
    job.variables["PERF_ACCEPTED"] = shas[0]  # the team accepts where it starts
    for i in range(3):
        push(f"refactor {i}", 1.0)
    assert gates == [(EXIT_PASS, "gate: pass: no worse level began in the newest 3 "
                                 "point(s)")] + [(EXIT_PASS, "gate: pass: no worse level "
                                                  f"began after {shas[0]}")] * 3
    for i in range(3):  # latencies 25% up from here
        push(f"slower {i}", 1.25, summary=i == 2)
    codes = [code for code, _ in gates[4:]]
    # The first commit the history can show it on fails, and every one after it.
    assert codes in ([EXIT_REGRESSION] * 3, [EXIT_PASS] + [EXIT_REGRESSION] * 2), gates
    line = gates[-1][1]
    assert line.startswith("gate: FAIL: 3 of 3 series x metrics lie in a worse level that "
                           f"began after {shas[0]}")
    assert line.endswith(f"from {shas[4]}")  # where it began
    assert "| worse |" in job.summary.read_text()  # the job's summary shows the changes
    # Accepted: the variable names the commit the failure names.
    job.variables["PERF_ACCEPTED"] = line.rsplit(" ", 1)[1]
    assert push("slower, accepted", 1.25).returncode == EXIT_PASS
    assert gates[-1][1].startswith(f"gate: pass: no worse level began after {shas[4]}")
    # One run of the next commit (its other two left out, say), worse again: too few to
    # judge. The recipe's gate passes and says so; --strict exits 3.
    done = push("slower still", 1.5, reps=1)
    assert done.returncode == EXIT_PASS
    assert _last(done).startswith("gate: not yet judgeable") and "2 more run(s)" in \
        _last(done)
    assert job.run(steps["gate"], extra=" --strict").returncode == EXIT_NOT_JUDGEABLE
    # A damaged manifest planted in the tree: never read as a regression.
    manifest = next(d for d in iter_run_dirs(job.tree) if d.name.startswith(shas[1])) / \
        "manifest.json"
    doc = json.loads(manifest.read_text())
    manifest.write_text(manifest.read_text().replace(
        f'"measured": {doc["counts"]["measured"]}', '"measured": NaN'))
    damaged = job.run(steps["gate"])
    assert "Traceback" not in damaged.stderr
    if damaged.returncode == EXIT_UNREADABLE:  # refused in one line
        assert damaged.stderr.startswith(f"error: {job.tree}: could not be read") and \
            damaged.stderr.count("\n") == 1
    else:  # or left out as a damaged run, said, and the rest judged as before
        assert damaged.returncode == EXIT_PASS, damaged.stderr
        assert manifest.parent.name in damaged.stdout + damaged.stderr
