"""Where things live. Every default path in the kit comes from here."""

from __future__ import annotations

import os
from pathlib import Path

#: The checkout the package was installed from (editable install) or the CWD otherwise.
_PKG_ROOT = Path(__file__).resolve().parent.parent


def project_root() -> Path:
    """The project checkout: $HARNESS_ROOT, else the directory above the package."""
    env = os.environ.get("HARNESS_ROOT")
    return Path(env).resolve() if env else _PKG_ROOT


def raw_results_dir() -> Path:
    return project_root() / "raw_results"


def experiments_dir() -> Path:
    return project_root() / "experiments"


def notebooks_dir() -> Path:
    return project_root() / "notebooks"


def figures_dir() -> Path:
    return project_root() / "figures"


def report_dir() -> Path:
    return project_root() / "report"
