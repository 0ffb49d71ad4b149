"""The DuckDB example of the manual (docs/raw-results.md), run as printed, gives
`harness summary`'s figures."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb
import numpy as np

from harness.analysis.summary_table import summary_table

README = Path(__file__).resolve().parents[2] / "docs" / "raw-results.md"


def readme_sql() -> str:
    text = README.read_text()
    section = text[text.index("## Reading raw results with other engines"):]
    return re.search(r"```sql\n(.*?)```", section, re.S).group(1)


def test_readme_duckdb_example_runs_as_printed(dsmc_raw: Path, tiny_raw: Path,
                                               tmp_path: Path, monkeypatch) -> None:
    raw = tmp_path / "raw_results"
    for src in (dsmc_raw, tiny_raw):
        shutil.copytree(src, raw, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)  # the example reads raw_results/ from where it runs
    assert_summarys(duckdb.sql(readme_sql()).df(), raw)


def assert_summarys(got, raw: Path) -> None:
    """`got` (experiment, op, runs, ops, p50_ms, p99_ms) is `harness summary`'s table of
    `raw` by experiment and op: the same rows, counts and exact percentiles."""
    ours = summary_table(raw, ["experiment", "op"])
    assert list(got["experiment"]) == list(ours["experiment"])
    assert list(got["op"]) == list(ours["op"])
    assert list(got["runs"]) == list(ours["runs"]) and list(got["ops"]) == list(ours["ops"])
    np.testing.assert_allclose(got["p50_ms"], ours["latency_p50_ms"], rtol=1e-12)
    np.testing.assert_allclose(got["p99_ms"], ours["latency_p99_ms"], rtol=1e-12)
