"""The looks of `until: decided`, seen in the experiment's section (issue 52 item 5): a
real memcached grid whose second configuration is far slower, run with `until:
decided`, then the experiments notebook: it says how the rounds ended and by which
method, and draws each comparison's interval look by look; a decided.json that lies
leaves the part out in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.hosts import LocalHost
from harness.paths import notebooks_dir
from harness.report import build_report
from harness.results.decided import DECIDED_FILE
from harness.studies.generic import looks
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration

SPEC = """\
name: stop_me
description: does a 1 ms pause between ops cost throughput?
workload: memcache_mix
hosts: {server: localhost, client: localhost}
services:
  cache: {kind: memcached, host: server}
clients: {hosts: [client], processes: 1, connections: 1}
params: {key_space: 1000}
grid: {clients.pause_us: [0, 1000]}
repetitions: 3
run: {ops: 300}
until: {decided: true, max_repetitions: 8}
"""


def test_the_looks_are_said_and_drawn_in_the_experiments_section(tmp_path: Path) -> None:
    require_service("memcached", LocalHost())
    spec = tmp_path / "stop_me.yaml"
    spec.write_text(SPEC)
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    data = json.loads((raw / "stop_me" / DECIDED_FILE).read_text())
    assert data["comparisons"][0]["state"] == "worse"
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    shutil.copy(notebooks_dir() / "70-experiments.ipynb", nbs)
    built = build_report(raw, tmp_path / "report", pdf=False, notebooks_dir=nbs,
                         figures_dir=tmp_path / "figures", progress=False)
    assert built.failures == []
    html = built["html"].read_text()
    assert "Stopped when answered" in html and "O&#x27;Brien-Fleming" in html.replace(
        "O'Brien", "O&#x27;Brien")
    assert "1 worse" in html and "Bonferroni over the comparisons" in html
    assert (tmp_path / "figures" / "stop-me-looks.png").exists()


def test_a_decided_file_that_lies_is_left_out_in_one_line(tmp_path: Path) -> None:
    exp = tmp_path / "raw" / "mine"
    exp.mkdir(parents=True)
    assert looks.parts(tmp_path / "raw", "mine", None) is None  # none: no part
    (exp / DECIDED_FILE).write_text(json.dumps({"version": 1, "comparisons": [
        {"configuration": "<b>x</b>", "looks": "not a list"}]}))
    [part] = looks.parts(tmp_path / "raw", "mine", None)
    assert "is not one `until: decided` wrote" in part.data
