"""The imported-results notebook and its analysis module, on the seeds' figures as imported
(the in-repo files, and the seed documents where present)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis.sections import imported
from harness.importers import import_file, write_import
from harness.report import execute_notebook, render_notebook, venv_kernel
from tests.importers.conftest import DATA, REPO

NOTEBOOK = REPO / "notebooks" / "50-imported.ipynb"


@pytest.fixture(scope="module")
def imported_raw(tmp_path_factory: pytest.TempPathFactory, seed) -> Path:
    raw = tmp_path_factory.mktemp("raw") / "imported"
    for fmt, number in (("perfctest", "000"), ("gae-bench", "001"), ("cluster-perf", "002"),
                        ("kv-report", "003")):
        write_import(import_file(fmt, seed(number)), raw, f"seed{number}")
    write_import(import_file("memtier-json", DATA / "memtier-2.0-sample.json"), raw, "mt")
    return raw.parent


def _text(obj: object) -> str:
    return getattr(obj, "data", "") or ""


def test_sections_recompute_the_seed_tables(imported_raw: Path) -> None:
    imp = imported.analyse(imported_raw)
    assert "from 5 files" in _text(imp.status())
    gae = _text(imp.gae_bench())
    assert "17.9 (17.1–18.8)" in gae and "8.68×" in gae  # mean with CI, ratio as printed
    assert "about 3× faster" in gae and "Welch" in gae
    assert ">5.62<" in _text(imp.cluster_perf()) and "network/local" in _text(
        imp.cluster_perf())
    kv = _text(imp.kv_report())
    assert ">3.38<" in kv and ">2.98<" in kv and "no test" in kv
    perfctest = _text(imp.perfctest())  # one run per experiment: a mean, no interval
    assert ">493<" in perfctest and "so no interval" in perfctest
    assert ">0.409<" in _text(imp.tool_outputs())


def test_nothing_imported(tmp_path: Path) -> None:
    imp = imported.analyse(tmp_path)
    assert "No imported results" in _text(imp.status())
    assert imp.gae_bench() is None and imp.sources_table() is None


@pytest.mark.skipif(not NOTEBOOK.exists(), reason="notebook missing")
def test_notebook_executes_and_renders(imported_raw: Path, tmp_path: Path, seed) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with venv_kernel() as kernel:
        out = tmp_path / "with.ipynb"
        assert execute_notebook(NOTEBOOK, out, {"raw_results": str(imported_raw)}, kernel) \
            is None
        section = render_notebook(out, 5)
        bare = tmp_path / "without.ipynb"
        assert execute_notebook(NOTEBOOK, bare, {"raw_results": str(empty)}, kernel) is None
        without = render_notebook(bare, 5)
    assert section.title == "Imported results" and not section.not_run and not section.omit
    assert seed("001").name in section.body
    assert any("Datastore vs memcache" in t for _, t in section.subsections)
    # Nothing imported: the optional section is left out of the report altogether.
    assert without.omit and not without.failed


def test_committed_without_outputs() -> None:
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
