"""The summary of findings, the report's first chapter (page 3 once; now on the title
page, after the contents), answers every question in the tree (issue 51 item 1): the
README's own experiment (a grid of value sizes), an experiment of one
configuration ("how fast is my Redis?") and a comparison of two trees, all measured for
real, each with its question and its answer; read back from the PDF with pdftotext."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.hosts import LocalHost
from harness.paths import notebooks_dir, project_root
from harness.report import build_report
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration

MY_REDIS = """\
name: my_redis
description: How fast is my Redis, with 4 connections and a 90/10 get/set mix?
workload: redis_mix
hosts: {server: localhost, client: localhost}
services:
  kv: {kind: redis, host: server}
clients: {hosts: [client], processes: 1, connections: 4}
params: {key_space: 1000}
repetitions: 3
run: {ops: 3000, warmup_ops: 300}
"""


def _readme_spec(tmp_path: Path) -> Path:
    """The README's first experiment as the README gives it, at a test's scale."""
    text = (project_root() / "README.md").read_text()
    block = re.search(r"```yaml\n(name: value_sizes\n.*?)```", text, re.S)
    assert block is not None, "the README's first experiment"
    spec = tmp_path / "value_sizes.yaml"
    spec.write_text(block.group(1).replace("repetitions: 5", "repetitions: 3").replace(
        "run: {duration_s: 2, warmup_s: 0.5}", "run: {ops: 3000, warmup_ops: 300}"))
    return spec


def _page_text(pdf: Path, page: int) -> str:
    return subprocess.run(["pdftotext", "-layout", "-f", str(page), "-l", str(page),
                           str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout


def test_the_summary_answers_the_readme_experiment_one_configuration_and_a_compare(
        tmp_path: Path) -> None:
    require_service("memcached", LocalHost())
    require_service("redis", LocalHost())
    if shutil.which("pdftotext") is None:
        pytest.fail("pdftotext is missing: make setup installs poppler-utils")
    raw = tmp_path / "raw"
    (tmp_path / "my_redis.yaml").write_text(MY_REDIS)
    for spec in (_readme_spec(tmp_path), tmp_path / "my_redis.yaml"):
        assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) in (0, 1)
    cand = tmp_path / "cand"
    assert cli_main(["run", str(_readme_spec(tmp_path)), "--out", str(cand), "--no-progress",
                     "-q"]) in (0, 1)
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    for name in ("00-overview.ipynb", "60-compare.ipynb", "70-experiments.ipynb"):
        shutil.copy(notebooks_dir() / name, nbs)
    built = build_report(raw, tmp_path / "report", pdf=True, notebooks_dir=nbs,
                         figures_dir=tmp_path / "figures", progress=False,
                         parameters={"compare_base": str(raw), "compare_cand": str(cand)})
    assert built.failures == []
    # The summary follows the contents on the first page and may go on over the next
    # (three experiments, each with its figures and qualifications, and the comparison);
    # nothing comes before it but the title and the contents.
    text = " ".join((_page_text(built["pdf"], 1) + _page_text(built["pdf"], 2)).split())
    start = text.find("Summary of findings Per experiment, the question it asked")
    assert start > 0 and "Setup and overview" not in text[:start].split("Contents")[0], text
    text = text[start:]
    # The README's grid: its question, its comparisons, and a verdict or what it would take.
    assert "Asked: does a 4 KiB value cost memcached more than a 100-byte one?" in text
    assert re.search(r"Experiment value_sizes ?: \d+ comparisons, \d+ decided", text), text
    assert ("decided" in text.split("value_sizes", 1)[1]
            and ("per configuration would decide" in text or "against value_size_bytes=100"
                 in text)), text
    # One configuration: the question, and its figures with intervals (or the honest
    # "too few runs to bound").
    assert "Asked: How fast is my Redis, with 4 connections and a 90/10 get/set mix?" in text
    redis = text.split("my_redis", 1)[1]
    assert "one configuration" in redis
    assert re.search(r"throughput [\d,.]+ ops/s (\[[\d,.]+, [\d,.]+\]|\(too few runs)",
                     redis), redis
    assert re.search(r"p99 latency [\d.]+ ms", redis) and "failed ops" in redis
    # The comparison: its question and its rows pooled per metric.
    assert re.search(r"Asked: Did \S+cand change throughput or latency against \S+raw\?",
                     text.replace("/ ", "/")), text
    assert re.search(r"throughput ratio, geometric mean over \d+ rows? [\d.]+×", text), text
