"""Fixtures for the importer tests: the seed documents, exactly as they are, and helpers.

The seeds live beside the repository (``<repo>/../shared/seeds``), in a checkout and in
CI alike. Without them the seed tests skip, except under CI, where that is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.summary import summary_table
from harness.importers import ImportOptions, import_file, write_import

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO.parent / "shared" / "seeds"
DATA = REPO / "tests" / "data" / "importers"

SEED_FILES = {
    "000": "000_7b5c234d2542c401.txt",
    "001": "001_d557312a82865043.txt",
    "002": "002_4475bf54ea1cda02.txt",
    "003": "003_f2f640157be000bd.txt",
}


@pytest.fixture(scope="session")
def seed() -> Callable[[str], Path]:
    """`seed("001")` -> path of that seed document (skips when the seeds are absent)."""

    def path(number: str) -> Path:
        p = SEEDS / SEED_FILES[number]
        if not p.is_file():
            msg = f"seed document {p} not found (expected the shared/ folder beside the repo)"
            if os.environ.get("CI"):
                pytest.fail(msg)
            pytest.skip(msg)
        return p

    return path


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
