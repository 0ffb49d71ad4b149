"""The notebooks: committed clean, one parameters cell, no logic, and they execute."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from harness import paths
from harness.report import discover_notebooks, execute_notebook, venv_kernel
from harness.studies import for_notebook

NOTEBOOKS = discover_notebooks(paths.notebooks_dir())
IDS = [nb.stem for nb in NOTEBOOKS]
#: Notebooks users open in JupyterLab that the report does not execute (their widgets
#: need a live kernel), held to the same rules; executed in tests/analysis/explore/test_explore.py
#: and in a browser by tests/test_explore_lab.py.
INTERACTIVE = [paths.notebooks_dir() / "explore.ipynb"]
ALL, ALL_IDS = [*NOTEBOOKS, *INTERACTIVE], [*IDS, *(nb.stem for nb in INTERACTIVE)]
# Logic belongs in harness.analysis: a notebook's code cells hold calls and assignments.
LOGIC = re.compile(r"^\s*(def|class|for|while|if|with|try|lambda)\b|\blambda\b", re.M)


def test_the_expected_notebooks_exist():
    assert {"00-overview", "01-methodology", "10-datastore-memcache"} <= set(IDS)
    assert all(nb.exists() and nb not in NOTEBOOKS for nb in INTERACTIVE)


@pytest.mark.parametrize("path", ALL, ids=ALL_IDS)
def test_committed_without_outputs(path: Path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name}: a code cell has outputs"
            assert cell.execution_count is None, f"{path.name}: execution count left in"


@pytest.mark.parametrize("path", ALL, ids=ALL_IDS)
def test_exactly_one_parameters_cell_and_no_logic(path: Path):
    nb = nbformat.read(path, as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and tagged[0].cell_type == "code"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not LOGIC.search(cell.source), f"{path.name}: logic in\n{cell.source}"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")


def _outputs_text(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    texts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out.output_type != "error", f"{path.name}: {out.get('evalue')}"
            for value in out.get("data", {}).values():
                texts.append(value if isinstance(value, str) else str(value))
    return "\n".join(texts)


@pytest.fixture(scope="module")
def kernel():
    with venv_kernel() as name:
        yield name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_executes_on_fixture_data(path: Path, dsmc_raw: Path, tmp_path: Path, kernel: str):
    out = tmp_path / path.name
    params = {"raw_results": str(dsmc_raw), "figures_dir": str(tmp_path / "figures")}
    assert execute_notebook(path, out, params, kernel) is None
    text = _outputs_text(out)
    study = for_notebook(path.name)
    # The fixture holds the datastore study's runs only; the other studies' notebooks
    # say "Not run" here and are executed on their own data under tests/studies/.
    assert ("Not run" in text) == (study is not None and study.name != "datastore_memcache")
    if path.stem == "10-datastore-memcache":
        assert "faster than datastore reads" in text
        assert "Memcache hits and memcache misses show no significant difference" in text \
            or "Memcache hits vs memcache misses is inconclusive" in text
        assert "image/png" in out.read_text()
        assert (tmp_path / "figures" / "datastore-vs-memcache-ecdf.svg").exists()


def test_study_notebook_says_not_run_without_data(empty_raw: Path, tmp_path: Path,
                                                  kernel: str):
    path = paths.notebooks_dir() / "10-datastore-memcache.ipynb"
    out = tmp_path / path.name
    params = {"raw_results": str(empty_raw), "figures_dir": str(tmp_path / "figures")}
    assert execute_notebook(path, out, params, kernel) is None
    assert "Not run" in _outputs_text(out)
