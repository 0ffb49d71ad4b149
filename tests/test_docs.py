"""The manual is kept true: `mkdocs build --strict` passes (no broken link or anchor), the
command reference is generated from the parser and holds every subcommand and option, and
no page (nor the README) names a path, a `harness` command or option, or a `make` target
that does not exist."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import reference
from tests.test_architecture import missing, named_paths

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]

#: Paths a page names that do not exist in a checkout, and why that is right (the README's
#: first experiment, my-experiments/value_sizes.yaml, is the reader's to save: a folder
#: of theirs, not one of the repository's, so not a path checked here).
NOT_IN_A_CHECKOUT: dict[str, str] = {}


def code_lines(text: str) -> list[str]:
    """Every line of a fenced block, and every inline code span of the prose."""
    out, fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if fence:
            out.append(line)
        else:
            out += re.findall(r"`([^`]+)`", line)
    return out


def commands_named(text: str) -> list[tuple[str, list[str]]]:
    """(subcommand words, options) of each `harness ...` invocation in code: the words
    after `harness` while they are subcommand-like, then the --options up to the end of
    the command (a pipe, `;` or `&&`; comments are left out first)."""
    found = []
    for line in code_lines(text):
        line = re.split(r"(?:^|\s)#\s", line)[0]  # a comment (shell, YAML) is prose
        for m in re.finditer(r"(?:^|[\s($])harness ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)?)(.*)",
                             line):
            words, rest = m.group(1), re.split(r"\||;|&&", m.group(2))[0]
            found.append((words, re.findall(r"(?:^|\s)(--?[a-zA-Z][\w-]*)", rest)))
    return found


def problems(text: str, commands: dict[str, set[str]], targets: set[str]) -> list[str]:
    out = []
    for words, options in commands_named(text):
        first, *second = words.split()
        if first not in commands:
            out.append(f"no command `harness {first}`")
            continue
        name = f"{first} {second[0]}" if second and f"{first} {second[0]}" in commands \
            else first
        out += [f"`harness {name}` has no option {o}" for o in options
                if o not in commands[name]]
    for line in code_lines(text):
        out += [f"no make target {t}" for t in re.findall(r"\bmake ([a-z][a-z-]*)", line)
                if t not in targets]
    return out


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.M))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_path_command_option_and_target_a_page_names_exists(page: Path) -> None:
    text = page.read_text()
    assert [p for p in missing(named_paths(text)) if p not in NOT_IN_A_CHECKOUT
            and not _generated(p)] == []
    assert problems(text, reference.commands(), make_targets()) == []


def _generated(path: str) -> bool:
    """A path git ignores is an output the kit writes (report/report.pdf): named, not kept."""
    return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT,
                          check=False).returncode == 0


def test_the_checks_catch_what_does_not_exist() -> None:
    """Each kind of name is checked: a wrong command, option, target or path is found."""
    commands, targets = reference.commands(), make_targets()
    assert problems("`harness summary --by op`", commands, targets) == []
    assert problems("`harness summarise raw`", commands, targets) == [
        "no command `harness summarise`"]
    assert problems("```sh\nharness hosts check SPEC --verbose  # a comment --x\n```",
                    commands, targets) == ["`harness hosts check` has no option --verbose"]
    assert problems("run `make docs` or `make manual`", commands, targets) == [
        "no make target manual"]
    assert missing(named_paths("see `harness/cli/nothing.py` and `harness/cli/parser.py`")
                   ) == ["harness/cli/nothing.py"]


def test_the_command_reference_holds_every_command_and_option() -> None:
    text = reference.markdown()
    for name, options in reference.commands().items():
        heading = re.search(rf"^#+ `harness {name}`$", text, re.M)
        assert heading, name
        section = re.split(r"^#+ `", text[heading.end():], maxsplit=1, flags=re.M)[0]
        for option in options - {"-h", "--help"}:
            assert f"`{option}`" in section, (name, option)
    assert reference.MARKER in (ROOT / "docs" / "cli.md").read_text()


def test_every_page_is_in_the_nav_and_the_site_builds_strictly(tmp_path: Path) -> None:
    """mkdocs --strict fails on a broken link or anchor, and on a page left out of the nav;
    the built reference page holds what the parser says."""
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.importorskip("mkdocs", reason="mkdocs is a dev dependency: make setup")
    site = tmp_path / "site"
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                          "-d", str(site)], cwd=ROOT, capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stderr
    built = (site / "cli.html").read_text()
    assert reference.MARKER not in built
    for name in reference.commands():
        assert f"harness {name}" in built, name
    nav = (ROOT / "mkdocs.yml").read_text()
    assert [p.name for p in PAGES[:-1] if f": {p.name}" not in nav] == []


def test_the_built_manual_works_from_disk_with_no_network(tmp_path: Path, browser) -> None:
    """Opened as `make docs` says (site/index.html, file://): every navigation link opens
    its page (before, each opened a directory listing) and no request leaves the machine
    (before, every page loaded highlight.js from a public CDN)."""
    pytest.importorskip("mkdocs", reason="mkdocs is a dev dependency: make setup")
    site = tmp_path / "site"
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                          "-d", str(site)], cwd=ROOT, capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stderr
    outside: list[str] = []
    page = browser.new_page()

    def route(r) -> None:  # the network is blocked: only files may load
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto((site / "index.html").as_uri())
    links = page.eval_on_selector_all(
        "a[href$='.html']", "els => [...new Set(els.map(e => e.href))]")
    pages = [u for u in links if u.startswith("file://") and "#" not in u]
    assert len(pages) >= 15, links
    for url in pages:
        page.goto(url)
        assert not page.title().startswith("Index of"), url
        assert page.locator("div[role=main], .col-md-9").count() > 0, url
        assert url.endswith(".html"), url
    assert outside == [], outside
