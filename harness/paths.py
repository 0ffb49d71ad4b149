"""Where things live. Every default path in the kit comes from here."""

from __future__ import annotations

import os
import re
from pathlib import Path

#: The checkout the package was installed from (editable install) or the CWD otherwise.
_PKG_ROOT = Path(__file__).resolve().parent.parent


#: A plain name: one directory under raw_results/ (an experiment), so no separator, no
#: leading dot, nothing a shell or another OS reads differently.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: Well under the 255 bytes a file system allows for one name, and readable in a table.
MAX_NAME_CHARS = 100


def name_problem(name: object) -> str | None:
    """Why `name` cannot name an experiment's directory, or None if it can (the one rule
    for a spec's ``name`` and ``harness import --experiment``)."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        return ("letters, digits, '_', '-', '.', starting with a letter or digit (it names "
                "a directory)")
    if len(name) > MAX_NAME_CHARS:
        return f"at most {MAX_NAME_CHARS} characters (it names a directory), not {len(name)}"
    return None


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
