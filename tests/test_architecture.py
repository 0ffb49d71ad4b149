"""The map is kept true: every path docs/ARCHITECTURE.md and the README's Layout name
exists, and every module of harness/ is on the architecture page."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
README = ROOT / "README.md"

#: A repository path: a known top directory, or a file at the top with an extension.
_PATH = re.compile(r"^(?:harness|tests|notebooks|experiments|examples|benchmarks|scripts|"
                   r"docs|report|raw_results|figures|\.ci)(?:/[\w.*<>-]*)*$|^[\w.-]+\.(?:yml|md)$")


def named_paths(text: str) -> list[str]:
    """Paths in backticks (prose and tables) that look like repository paths."""
    found = [m for m in re.findall(r"`([^`\s]+)`", text) if _PATH.match(m)]
    # A placeholder (`<name>`) or a glob names a pattern, not one path.
    return [p for p in found if not re.search(r"[<>*]", p)]


def layout_paths(readme: str) -> list[str]:
    """The first word of each line of the README's Layout code block."""
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    return [line.split()[0] for line in block.splitlines() if line.strip()]


def missing(paths: list[str], root: Path = ROOT) -> list[str]:
    return [p for p in paths if not (root / p.rstrip("/")).exists()]


def harness_units(root: Path = ROOT) -> list[str]:
    """Every top-level module and package of harness/, as `harness/x.py` or `harness/x/`."""
    units = []
    for path in sorted((root / "harness").iterdir()):
        if path.name.startswith(("_", ".")):
            continue
        if path.is_dir() and (path / "__init__.py").exists():
            units.append(f"harness/{path.name}/")
        elif path.suffix == ".py":
            units.append(f"harness/{path.name}")
    return units


def test_every_path_the_architecture_page_names_exists() -> None:
    paths = named_paths(ARCHITECTURE.read_text())
    assert len(paths) > 40  # the page names the modules, not a handful of examples
    assert missing(paths) == []


def test_every_path_in_the_readme_layout_exists() -> None:
    paths = layout_paths(README.read_text())
    assert len(paths) > 20
    assert missing(paths) == []


def test_every_harness_module_is_on_the_architecture_page() -> None:
    named = set(named_paths(ARCHITECTURE.read_text()))
    assert [u for u in harness_units() if u not in named] == []


def test_the_readme_links_the_architecture_page() -> None:
    assert "docs/ARCHITECTURE.md" in README.read_text().split("\n## Layout\n", 1)[1]


def test_a_stale_map_is_caught(tmp_path: Path) -> None:
    """A name that moved away, and a module the page does not name, are both reported."""
    page = ARCHITECTURE.read_text().replace("`harness/hosts/base.py`", "`harness/hosts.py`")
    assert missing(named_paths(page)) == ["harness/hosts.py"]
    (tmp_path / "harness" / "newthing").mkdir(parents=True)
    (tmp_path / "harness" / "newthing" / "__init__.py").write_text("")
    (tmp_path / "harness" / "extra.py").write_text("")
    assert harness_units(tmp_path) == ["harness/extra.py", "harness/newthing/"]
