"""The built-in studies: each one registered unit with its specs, workloads, notebook and
legacy import, and its analysis in ``harness.studies.<name>`` on `base.StudyBase`.

Adding a study: one module or directory here, one entry below, one notebook, one spec.
Everything that must agree with the entry (the spec's ``name:``, the notebook's
parameters, ``make demo``, the manual's study table (docs/studies.md)) is read from it
or checked against it (tests/studies/test_registry.py). Importing this module loads no
analysis code, so ``harness list studies`` stays fast; `StudyInfo.module` imports it on demand.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import yaml

from harness import paths
from harness.registry import Registry


@dataclass(frozen=True)
class StudySpec:
    """One experiment spec of a study, and how the report and `make demo` use it."""

    file: str  #: under experiments/
    #: The notebook parameter that names this spec's experiment (None: not in the notebook).
    parameter: str | None
    #: Whether `make demo` runs it (a spec that needs something outside the kit does not).
    demo: bool = True
    #: ``--set`` overrides `make demo` adds when not root (network namespaces need root).
    unprivileged_set: tuple[str, ...] = ()

    def path(self, experiments_dir: Path | None = None) -> Path:
        return Path(experiments_dir or paths.experiments_dir()) / self.file

    def experiment(self, experiments_dir: Path | None = None) -> str:
        """The spec's ``name:``, the experiment directory its runs land in."""
        with self.path(experiments_dir).open(encoding="utf-8") as fh:
            return str(yaml.safe_load(fh)["name"])


@dataclass(frozen=True)
class LegacyImport:
    """A seed report's own figures that `make demo` imports (`harness import`)."""

    format: str  #: an importer name (harness import FORMAT)
    file: str  #: under examples/legacy/
    experiment: str  #: the imported experiment's name


@dataclass(frozen=True)
class StudyInfo:
    name: str
    title: str
    specs: tuple[StudySpec, ...]
    workloads: tuple[str, ...]
    notebook: str  #: under notebooks/
    legacy: LegacyImport | None = None

    @property
    def module(self) -> ModuleType:
        """The study's analysis (``analyse(raw_dir, ...)``), imported now."""
        return importlib.import_module(f"{__name__}.{self.name}")

    def notebook_parameters(self, experiments_dir: Path | None = None) -> dict[str, str]:
        """Notebook parameter -> experiment name, read from the specs (a spec file that is
        absent, as in an installed kit without experiments/, leaves the notebook's own)."""
        return {s.parameter: s.experiment(experiments_dir) for s in self.specs
                if s.parameter is not None and s.path(experiments_dir).is_file()}


STUDIES: Registry[StudyInfo] = Registry("study")
#: The generic study's notebook (`harness.studies.generic`): every experiment no entry
#: below owns, so it is no entry itself.
GENERIC_NOTEBOOK = "70-experiments.ipynb"


def _add(info: StudyInfo) -> None:
    STUDIES.add(info.name, info)


_add(StudyInfo(
    name="datastore_memcache",
    title="Datastore vs memcache (seed 001)",
    specs=(StudySpec("datastore_vs_memcache.yaml", "experiment"),),
    workloads=("datastore_memcache",),
    notebook="10-datastore-memcache.ipynb",
    legacy=LegacyImport("gae-bench", "seed001-gae-bench.txt", "seed001-datastore-memcache"),
))
_add(StudyInfo(
    name="filestore",
    title="File store: is memcache worth it? (seed 000)",
    specs=(StudySpec("filestore_memcache.yaml", "experiment"),
           # Measures an app the user starts at a URL: run by hand, read by setting
           # the notebook's `experiment`.
           StudySpec("filestore_external.yaml", None, demo=False)),
    workloads=("filestore",),
    notebook="20-filestore.ipynb",
    legacy=LegacyImport("perfctest", "seed000-perfctest.result", "seed000-filestore"),
))
_add(StudyInfo(
    name="cluster",
    title="Cluster: single node, local cluster, network cluster (seed 002)",
    specs=(StudySpec("cluster_modes.yaml", "experiment",
                     unprivileged_set=("services.db.settings.netns=false",)),),
    workloads=("cluster",),
    notebook="30-cluster.ipynb",
    legacy=LegacyImport("cluster-perf", "seed002-cluster-perf.log", "seed002-cluster"),
))
_add(StudyInfo(
    name="kvstore",
    title="KV store: servers, clients, cache strategies and scaling (seeds 003, 004)",
    specs=(StudySpec("kv_scaling.yaml", "scaling_experiment"),
           StudySpec("kv_cache.yaml", "cache_experiment"),
           StudySpec("kv_elastic.yaml", "elastic_experiment")),
    workloads=("kvstore",),
    notebook="40-kvstore.ipynb",
    legacy=LegacyImport("kv-report", "seed003-kv-report.txt", "seed003-kvstore"),
))


def for_notebook(notebook: str) -> StudyInfo | None:
    """The study whose notebook is `notebook` (a file name), if any."""
    for name in STUDIES:
        if STUDIES.get(name).notebook == notebook:
            return STUDIES.get(name)
    return None
