"""The map is kept true: every path docs/ARCHITECTURE.md and the manual's Layout
(docs/contributing.md) name exists, and every module of harness/ is on the architecture
page."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
LAYOUT = ROOT / "docs" / "contributing.md"

#: A repository path: a known top directory, or a file at the top with an extension.
_PATH = re.compile(r"^(?:harness|tests|notebooks|experiments|examples|benchmarks|scripts|"
                   r"docs|report|raw_results|figures|\.ci)(?:/[\w.*<>-]*)*$|^[\w.-]+\.(?:yml|md)$")


def named_paths(text: str) -> list[str]:
    """Paths in backticks (prose and tables) that look like repository paths."""
    found = [m for m in re.findall(r"`([^`\s]+)`", text) if _PATH.match(m)]
    # A placeholder (`<name>`) or a glob names a pattern, not one path.
    return [p for p in found if not re.search(r"[<>*]", p)]


def layout_paths(page: str) -> list[str]:
    """The first word of each line of the Layout code block of docs/contributing.md."""
    section = page.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
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


def test_every_path_in_the_manuals_layout_exists() -> None:
    paths = layout_paths(LAYOUT.read_text())
    assert len(paths) > 20
    assert missing(paths) == []


def test_every_harness_module_is_on_the_architecture_page() -> None:
    named = set(named_paths(ARCHITECTURE.read_text()))
    assert [u for u in harness_units() if u not in named] == []


def test_the_layout_links_the_architecture_page() -> None:
    assert "(ARCHITECTURE.md)" in LAYOUT.read_text().split("\n## Layout\n", 1)[1]


#: What `harness/` may hold of its own (issue 31): the base modules and the names client
#: machines run with `python -m`. Everything else is in a layer's package.
OWN_MODULES = {"errors.py", "paths.py", "settings.py", "registry.py", "worker.py",
               "agent.py", "workerctl.py", "text.py"}

#: The most lines a module may have before it should be split by concern (issue 31: about
#: 400). A module over it is listed here with the reason it is one concern (none is now).
MOST_LINES = 450
LONG_MODULES: dict[str, str] = {}


def test_harness_keeps_few_modules_of_its_own() -> None:
    own = {p.name for p in (ROOT / "harness").glob("*.py") if p.name != "__init__.py"}
    assert own <= OWN_MODULES, sorted(own - OWN_MODULES)
    assert len(OWN_MODULES) <= 8


def test_modules_stay_small_or_say_why() -> None:
    long = {str(p.relative_to(ROOT)): len(p.read_text().splitlines())
            for p in (ROOT / "harness").rglob("*.py")}
    over = {p: n for p, n in long.items() if n > MOST_LINES}
    assert set(over) <= set(LONG_MODULES), {p: n for p, n in over.items()
                                            if p not in LONG_MODULES}
    # A module split below the bound leaves the list.
    assert set(LONG_MODULES) <= set(over), set(LONG_MODULES) - set(over)


@pytest.mark.parametrize("name", ["harness.workerctl", "harness.run.workerctl"])
def test_client_machine_entry_points_run_under_both_names(name: str) -> None:
    """A control machine runs `python -m harness.workerctl` (and `.worker`, `.agent`) on
    client machines that may have an older checkout: the old names keep working."""
    out = subprocess.run([sys.executable, "-m", name, "clock"], input="t\nt\n",
                         capture_output=True, text=True, check=True, cwd=ROOT, timeout=60)
    assert [int(t) > 0 for t in out.stdout.split()] == [True, True]


@pytest.mark.parametrize(("name", "args", "says"), [
    ("harness.worker", [], "usage: python -m harness.worker CONFIG.json"),
    ("harness.worker", ["no-such.json"], "no-such.json: not a client config"),
    ("harness.workerctl", [], "usage: python -m harness.workerctl"),
])
def test_client_machine_entry_points_say_what_they_need(name: str, args: list[str],
                                                       says: str) -> None:
    """Run by hand, without what the control machine passes: a line, exit 2, no traceback."""
    out = subprocess.run([sys.executable, "-m", name, *args], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert (out.returncode, out.stdout) == (2, "")
    assert says in out.stderr and "Traceback" not in out.stderr


def test_a_stale_map_is_caught(tmp_path: Path) -> None:
    """A name that moved away, and a module the page does not name, are both reported."""
    page = ARCHITECTURE.read_text().replace("`harness/hosts/base.py`", "`harness/hosts.py`")
    assert set(missing(named_paths(page))) == {"harness/hosts.py"}
    (tmp_path / "harness" / "newthing").mkdir(parents=True)
    (tmp_path / "harness" / "newthing" / "__init__.py").write_text("")
    (tmp_path / "harness" / "extra.py").write_text("")
    assert harness_units(tmp_path) == ["harness/extra.py", "harness/newthing/"]


#: Test files that stay at the top of tests/: they hold the whole kit to a rule (layout,
#: imports, packaging, security, notebooks, JupyterLab, the manual, the README) or run it
#: across the test bed's machines, or test a module at the top of harness/ (paths.py).
#: Every other test file sits
#: in the folder of the package it tests.
CROSS_CUTTING = {"test_architecture.py", "test_docs.py", "test_readme.py", "test_imports.py",
                 "test_packaging.py",
                 "test_untrusted.py", "test_security.py", "test_notebooks.py", "test_lab.py",
                 "test_explore_lab.py", "test_machine_studies.py", "test_machines.py",
                 "test_fuzz_readback.py", "test_paths.py"}
#: Folders of tests/ that are no package of harness/: fixtures, captured data, examples/.
NOT_PACKAGES = {"fixtures", "data", "examples"}


def test_tests_mirror_the_packages() -> None:
    tests = ROOT / "tests"
    assert {p.name for p in tests.glob("test_*.py")} <= CROSS_CUTTING
    folders = {p.name for p in tests.iterdir() if p.is_dir() and any(p.rglob("test_*.py"))}
    packages = {p.name for p in (ROOT / "harness").iterdir() if (p / "__init__.py").exists()}
    assert folders - NOT_PACKAGES <= packages, sorted(folders - NOT_PACKAGES - packages)


def test_every_test_file_named_anywhere_exists() -> None:
    """Docs, docstrings and the serial list name test files by path: a move leaves none
    pointing nowhere (the serial list's would silently run in parallel)."""
    from tests.conftest import SERIAL

    texts = [*ROOT.glob("*.md"), *ROOT.glob("docs/*.md"), *ROOT.glob("benchmarks/*"),
             *ROOT.glob("examples/**/*.md"), *ROOT.glob("harness/**/*.py"),
             *ROOT.glob("tests/**/*.py"), ROOT / "Makefile", ROOT / ".ci" / "run",
             ROOT / "pyproject.toml"]
    named = {m for p in texts if p.is_file()
             for m in re.findall(r"(?<![\w./-])tests/[\w/.-]+\.py", p.read_text())}
    assert len(named) > 20
    assert missing(sorted(named)) == []
    assert [s for s in SERIAL if not (ROOT / "tests" / s).exists()] == []
