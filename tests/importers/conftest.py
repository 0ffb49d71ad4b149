"""Fixtures for the importer tests: the seed reports' figures, and helpers.

The figures of the seed reports travel with the repository, in the layouts the importers
read (``examples/legacy/``, what `make demo` imports): every seed test runs on them. Where
the seed documents themselves are beside the checkout (``<repo>/../shared/seeds``), the
same tests also run on them, as extra cases; nothing needs them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.summary_table import summary_table
from harness.importers import ImportOptions, import_file, write_import

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO.parent / "shared" / "seeds"
DATA = REPO / "tests" / "data" / "importers"
LEGACY = REPO / "examples" / "legacy"

SEED_FILES = {
    "000": "000_7b5c234d2542c401.txt",
    "001": "001_d557312a82865043.txt",
    "002": "002_4475bf54ea1cda02.txt",
    "003": "003_f2f640157be000bd.txt",
}


#: The seed reports' figures in the repository, in the importers' layouts.
LEGACY_FILES = {
    "000": "seed000-perfctest.result",
    "001": "seed001-gae-bench.txt",
    "002": "seed002-cluster-perf.log",
    "003": "seed003-kv-report.txt",
}
#: Where each seed test runs: always the in-repo files, and the documents if present.
SOURCES = ["legacy", *(["seed"] if all((SEEDS / f).is_file() for f in SEED_FILES.values())
                        else [])]


class SeedPath:
    """`seed("001")` -> that report's file; `seed.source` says which kind it is."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __call__(self, number: str) -> Path:
        if self.source == "seed":
            return SEEDS / SEED_FILES[number]
        return LEGACY / LEGACY_FILES[number]


@pytest.fixture(scope="session", params=SOURCES)
def seed(request: pytest.FixtureRequest) -> Callable[[str], Path]:
    return SeedPath(request.param)


def write_variant(tmp_path: Path, name: str, text: str) -> Path:
    """A small hand-made variant file in tmp_path."""
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def import_and_summarise(
    fmt: str, path: Path, raw: Path, by: list[str] | None = None,
    options: ImportOptions | None = None, experiment: str = "imp",
) -> pd.DataFrame:
    """Import `path` into `raw/experiment` and return `harness summary` of it."""
    write_import(import_file(fmt, path, options), raw, experiment)
    return summary_table(raw, by, experiments=[experiment])
