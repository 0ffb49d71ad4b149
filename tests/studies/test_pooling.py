"""Every study pools runs as `harness summary` does (`harness.analysis.data.pooling`, through
`StudyBase.load`) and says what it left out; `include` (the notebooks' and the report's
parameter) adds partial runs. Each study on its own synthetic runs, plus a partial run
of a repetition never re-run and a later copy of a complete one (a concurrent run)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.analysis.data.load import Loaded
from harness.studies import STUDIES
from tests.fixtures.filestore import write_filestore_runs
from tests.fixtures.rawdata import write_datastore_memcache
from tests.studies.cluster.test_analysis import write_cluster
from tests.studies.kvstore.test_analysis import write_kv

#: study -> (writer of its runs, the experiment given the extra runs)
CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "datastore_memcache": (write_datastore_memcache, "datastore_vs_memcache"),
    "filestore": (write_filestore_runs, "filestore_memcache"),
    "cluster": (write_cluster, "cluster_modes"),
    "kvstore": (write_kv, "kv_scaling"),
}


def test_every_study_is_here() -> None:
    assert set(CASES) == set(STUDIES)


def add_partial_and_duplicate(raw: Path, experiment: str) -> tuple[str, str]:
    """Copies of the experiment's first run: a partial one of a repetition of its own and
    a complete one of the same repetition started later (and ended after it started: a
    run that ends before it starts is a damaged one, left out as such). Returns their
    run_ids."""
    first = sorted((raw / experiment).glob("*/manifest.json"))[0].parent
    made = []
    for suffix, status, rep in (("partial", "partial", 1000), ("dup", "complete", 0)):
        target = first.with_name(f"{first.name}-{suffix}")
        shutil.copytree(first, target)
        data = json.loads((target / "manifest.json").read_text())
        data.update(run_id=target.name, status=status, repetition=data["repetition"] + rep,
                    started_utc="2099-01-01T00:00:00Z", ended_utc="2099-01-01T00:01:00Z")
        (target / "manifest.json").write_text(json.dumps(data))
        made.append(target.name)
    return made[0], made[1]


def run_ids_held(study: Any) -> set[str]:
    """Every run_id in the study's tables and loaded runs (not its left-out list)."""
    found: set[str] = set()
    for name, value in vars(study).items():
        frame = value.runs if isinstance(value, Loaded) else value
        if name != "left_out" and isinstance(frame, pd.DataFrame) and "run_id" in frame:
            found |= set(frame["run_id"].astype(str))
    return found


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> tuple[Any, Path, str, str]:
    writer, experiment = CASES[request.param]
    raw = writer(tmp_path_factory.mktemp(f"raw-{request.param}"))
    partial, dup = add_partial_and_duplicate(raw, experiment)
    return STUDIES.get(request.param).module, raw, partial, dup


def test_a_study_leaves_them_out_and_says_so(case: tuple[Any, Path, str, str]) -> None:
    module, raw, partial, dup = case
    study = module.analyse(raw)
    assert study.ran
    assert dict(zip(study.left_out["run_id"], study.left_out["left_out"], strict=True)) \
        == {partial: "partial", dup: "duplicate"}
    assert not {partial, dup} & run_ids_held(study)
    assert "1 partial and 1 duplicate run left out" in study.status().data


def test_include_partial_pools_the_partial_run(case: tuple[Any, Path, str, str]) -> None:
    module, raw, partial, dup = case
    study = module.analyse(raw, include=["partial"])
    assert list(study.left_out["run_id"]) == [dup]
    assert partial in run_ids_held(study)
    text = study.status().data
    assert "1 duplicate run left out" in text and "1 partial run pooled" in text


def test_a_study_whose_runs_were_all_left_out_says_so_not_not_run(tmp_path: Path) -> None:
    from harness.studies import datastore_memcache

    raw = write_datastore_memcache(tmp_path / "raw", sets=2)
    for manifest in raw.glob("*/*/manifest.json"):
        data = json.loads(manifest.read_text())
        manifest.write_text(json.dumps({**data, "status": "partial"}))
    note = datastore_memcache.analyse(raw).status()
    assert "Not run" not in note.data and "10 partial runs left out" in note.data
    assert note.metadata  # still ends the section: there is nothing to show
    assert datastore_memcache.analyse(raw, include=["partial"]).ran


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_notebook_passes_the_reports_include_on(name: str) -> None:
    """`harness report --include partial` reaches a study only through its notebook."""
    import nbformat

    from harness import paths

    nb = nbformat.read(paths.notebooks_dir() / STUDIES.get(name).notebook, as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assert "\ninclude = []" in f"\n{params.source}"
    assert any("include=include" in c.source for c in nb.cells if c.cell_type == "code")
