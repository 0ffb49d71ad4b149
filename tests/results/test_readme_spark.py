"""The Spark example of the manual (docs/raw-results.md), run as printed on PySpark in
local mode, gives
`harness summary`'s per-op counts and exact p50/p99: the tree is readable past one
machine without the kit. Marked `spark` (a JVM starts: `pytest -m spark` runs it
alone); CI installs PySpark and Debian's JRE, so there it never skips."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.results.test_readme_sql import assert_summarys

README = Path(__file__).resolve().parents[2] / "docs" / "raw-results.md"
pytestmark = [pytest.mark.spark, pytest.mark.integration]


def readme_spark() -> str:
    text = README.read_text()
    section = text[text.index("## Reading raw results with other engines"):]
    return re.search(r"same in Spark.*?```python\n(.*?)```", section, re.S).group(1)


def _require_spark() -> None:
    missing = []
    try:
        import pyspark  # noqa: F401
    except ImportError:
        missing.append("pyspark (pip install -e '.[dev]')")
    if not shutil.which("java"):
        missing.append("java (apt-get install default-jre-headless)")
    if missing:
        why = "needs " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


def test_readme_spark_example_runs_as_printed(dsmc_raw: Path, tiny_raw: Path,
                                              tmp_path: Path, monkeypatch) -> None:
    _require_spark()
    raw = tmp_path / "raw_results"
    for src in (dsmc_raw, tiny_raw):
        shutil.copytree(src, raw, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)  # the example reads raw_results/ from where it runs
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    code = readme_spark()
    # As printed, but the table kept instead of shown, on one local core.
    assert code.count(".show())") == 1 and code.count("(ops.where(") == 1
    code = code.replace(".show())", ".toPandas())").replace("(ops.where(",
                                                             "result = (ops.where(")
    code = code.replace("SparkSession.builder.getOrCreate()",
                        "SparkSession.builder.master('local[1]')"
                        ".config('spark.ui.enabled', 'false').getOrCreate()")
    scope: dict = {}
    try:
        exec(compile(code, "docs/raw-results.md (Spark example)", "exec"), scope)
    finally:
        if "spark" in scope:
            scope["spark"].stop()
    assert_summarys(scope["result"], raw)
