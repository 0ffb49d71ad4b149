"""The study registry agrees with everything that names a study's experiments: the
specs' ``name:``, the notebooks' parameters, the manual's study table
(docs/studies.md), `make demo` and
the report's injected parameters. Renaming any one of them alone fails here."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

from harness import paths
from harness.importers import IMPORTERS
from harness.report import discover_notebooks
from harness.report.build import _study_parameters
from harness.studies import GENERIC_NOTEBOOK, STUDIES, StudyInfo
from harness.studies.base import StudyBase
from harness.workloads import WORKLOADS

INFOS = [STUDIES.get(name) for name in STUDIES]
IDS = [info.name for info in INFOS]
SPEC_PATH = re.compile(r"`experiments/([\w.-]+\.yaml)`")


def _notebook_defaults(info: StudyInfo) -> dict[str, object]:
    """The notebook's parameters cell, evaluated literally: name -> default."""
    nb = nbformat.read(paths.notebooks_dir() / info.notebook, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    out = {}
    for node in ast.parse(cell.source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


@pytest.mark.parametrize("info", INFOS, ids=IDS)
def test_notebook_parameters_default_to_the_specs_names(info: StudyInfo):
    defaults = _notebook_defaults(info)
    for param, experiment in info.notebook_parameters().items():
        assert defaults.get(param) == experiment, (
            f"{info.notebook}: parameter {param} = {defaults.get(param)!r}, but the spec "
            f"that feeds it is named {experiment!r}")


@pytest.mark.parametrize("info", INFOS, ids=IDS)
def test_specs_run_the_studys_workloads(info: StudyInfo):
    assert set(info.workloads) <= set(WORKLOADS.names())
    for spec in info.specs:
        data = yaml.safe_load(spec.path().read_text())
        assert data["workload"] in info.workloads, f"{spec.file}: workload {data['workload']}"


@pytest.mark.parametrize("info", INFOS, ids=IDS)
def test_analysis_is_on_the_base_class(info: StudyInfo):
    module = info.module
    assert issubclass(module.Study, StudyBase) and module.Study.name == info.name
    assert callable(module.analyse)


@pytest.mark.parametrize("info", INFOS, ids=IDS)
def test_legacy_import_exists(info: StudyInfo):
    if info.legacy is None:
        pytest.skip("no legacy import")
    assert info.legacy.format in IMPORTERS
    assert (paths.project_root() / "examples" / "legacy" / info.legacy.file).is_file()


def tracked_specs(root: Path) -> list[str] | None:
    """The specs directly in `root`/experiments/ that git tracks: the kit's own. A
    user's spec saved there and not added (the README once said to save one there) is
    theirs, not the kit's. None outside a git checkout (a downloaded archive)."""
    git = shutil.which("git")
    if git is None:
        return None
    res = subprocess.run([git, "-C", str(root), "ls-files", "-z", "--", "experiments/"],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        return None
    return sorted(Path(f).name for f in res.stdout.split("\0")
                  if f.endswith(".yaml") and Path(f).parent == Path("experiments"))


def spec_problems(root: Path, registered: list[str], tracked: list[str] | None) -> list[str]:
    """What is wrong between the specs the studies register (file names in
    `root`/experiments/) and the specs git tracks there (None: not known)."""
    out = [f"experiments/{s}: registered by {registered.count(s)} studies"
           for s in sorted(set(registered)) if registered.count(s) > 1]
    out += [f"experiments/{s}: registered, but not there" for s in sorted(set(registered))
            if not (root / "experiments" / s).is_file()]
    out += [f"experiments/{s}: the repository tracks it, but no study registers it"
            for s in tracked or () if s not in registered]
    return out


def test_every_spec_the_repository_tracks_is_registered_once():
    """Every spec a study registers is in experiments/, once; every spec git tracks there
    belongs to a study. Specs of the user's own, in experiments/ or anywhere else, are
    none of the kit's business: `make test` passes after the README is followed."""
    specs = [s.file for info in INFOS for s in info.specs]
    tracked = tracked_specs(paths.project_root())
    assert spec_problems(paths.project_root(), specs, tracked) == []
    if tracked is None:
        if os.environ.get("CI"):
            pytest.fail("not a git checkout under CI: the specs the kit tracks are unknown")
        pytest.skip("not a git checkout: which specs in experiments/ are the kit's (every "
                    "one a study's) is git's to say; the registered ones are all there")
    assert tracked, "git lists no spec in experiments/"


def test_a_users_own_spec_passes_and_a_tracked_unregistered_one_fails(tmp_path: Path):
    """In a copy of experiments/ under git: the user's own spec (untracked) beside the
    kit's is no problem; the same spec once tracked is one, and so is a registered spec
    that is gone."""
    if shutil.which("git") is None:
        if os.environ.get("CI"):
            pytest.fail("git is missing under CI")
        pytest.skip("git is not installed: the kit's specs are those git tracks")
    specs = [s.file for info in INFOS for s in info.specs]
    (tmp_path / "experiments").mkdir()
    for spec in specs:  # the kit's (whatever else a user keeps in this checkout's)
        shutil.copy(paths.experiments_dir() / spec, tmp_path / "experiments" / spec)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "experiments"], check=True)
    assert tracked_specs(tmp_path) == sorted(specs)
    mine = tmp_path / "experiments" / "my_redis.yaml"
    mine.write_text((tmp_path / "experiments" / specs[0]).read_text())
    (tmp_path / "my-experiments").mkdir()
    (tmp_path / "my-experiments" / "value_sizes.yaml").write_text(mine.read_text())
    assert spec_problems(tmp_path, specs, tracked_specs(tmp_path)) == []
    subprocess.run(["git", "-C", str(tmp_path), "add", "experiments/my_redis.yaml"],
                   check=True)
    assert spec_problems(tmp_path, specs, tracked_specs(tmp_path)) == [
        "experiments/my_redis.yaml: the repository tracks it, but no study registers it"]
    (tmp_path / "experiments" / specs[0]).unlink()
    assert spec_problems(tmp_path, specs, None) == [
        f"experiments/{specs[0]}: registered, but not there"]
    assert spec_problems(tmp_path, [*specs, specs[1]], None)[0] == (
        f"experiments/{specs[1]}: registered by 2 studies")


def test_every_study_notebook_is_registered_once():
    notebooks = [info.notebook for info in INFOS]
    assert len(set(notebooks)) == len(notebooks)
    on_disk = {p.name for p in discover_notebooks(paths.notebooks_dir())}
    assert set(notebooks) <= on_disk
    assert GENERIC_NOTEBOOK in on_disk and GENERIC_NOTEBOOK not in notebooks
    generic = (paths.notebooks_dir() / GENERIC_NOTEBOOK).read_text()
    assert "from harness.studies import generic" in generic
    for name in on_disk - set(notebooks) - {GENERIC_NOTEBOOK}:  # the others are no study's
        assert "harness.studies" not in (paths.notebooks_dir() / name).read_text()


def test_readme_study_table_has_one_row_per_study():
    readme = (paths.project_root() / "docs" / "studies.md").read_text()
    section = readme.split("## Built-in studies", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`") and cells[0] != "study":
            rows[cells[0].strip("`")] = cells
    assert sorted(rows) == sorted(IDS)
    for info in INFOS:
        _, specs, notebook, _, _ = rows[info.name]
        assert sorted(SPEC_PATH.findall(specs)) == sorted(s.file for s in info.specs)
        assert notebook == f"`{Path(info.notebook).stem}`"


def test_report_injects_the_specs_names(tmp_path: Path):
    for info in INFOS:
        assert _study_parameters(paths.notebooks_dir() / info.notebook) == \
            info.notebook_parameters()
    assert _study_parameters(paths.notebooks_dir() / "00-overview.ipynb") == {}
    # A renamed spec renames what the notebook is told to read.
    info = STUDIES.get("datastore_memcache")
    shutil.copytree(paths.experiments_dir(), tmp_path, dirs_exist_ok=True)
    spec = tmp_path / info.specs[0].file
    spec.write_text(spec.read_text().replace("name: datastore_vs_memcache",
                                              "name: renamed_study"))
    assert info.notebook_parameters(tmp_path) == {"experiment": "renamed_study"}


def test_make_demo_runs_what_the_registry_lists():
    makefile = (paths.project_root() / "Makefile").read_text()
    assert not re.search(r"experiments/\w+\.yaml", makefile), "a spec named in the Makefile"
    out = subprocess.run([sys.executable, "-m", "harness.cli", "list", "--demo"],
                         capture_output=True, text=True, check=True).stdout
    listed = [line.split()[0] for line in out.splitlines()]
    assert listed == [s.file for info in sorted(INFOS, key=lambda i: i.notebook)
                      for s in info.specs if s.demo]
    assert "filestore_external.yaml" not in listed
    legacy = subprocess.run([sys.executable, "-m", "harness.cli", "list", "--legacy"],
                            capture_output=True, text=True, check=True).stdout
    assert sorted(legacy.split()[2::3]) == sorted(i.legacy.experiment for i in INFOS
                                                   if i.legacy)


def test_make_demo_without_root_gets_the_unprivileged_options(monkeypatch, capsys):
    from harness.cli import main

    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert main(["list", "--demo"]) == 0
    lines = dict(line.split(" ", 1) if " " in line else (line, "")
                 for line in capsys.readouterr().out.splitlines())
    cluster = STUDIES.get("cluster").specs[0]
    assert lines[cluster.file] == " ".join(f"--set {s}" for s in cluster.unprivileged_set)
    assert lines["datastore_vs_memcache.yaml"] == ""
