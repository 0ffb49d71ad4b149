"""The project's set-up files agree with each other."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from harness.services import SERVICES
from harness.services.catalog import all_packages, readme_table

ROOT = Path(__file__).resolve().parent.parent


def _name(req: str) -> str:
    return re.split(r"[<>=!~ \[]", req, maxsplit=1)[0].strip().lower().replace("_", "-")


def test_environment_yml_lists_the_same_python_dependencies_as_pyproject() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    deps = {_name(d): d.replace(" ", "") for d in pyproject["project"]["dependencies"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    system = {p.conda for p in all_packages() if p.conda} | {"python", "pip"}
    conda_py = {_name(d): d.replace(" ", "") for d in conda if _name(d) not in system}
    assert conda_py == deps
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip


# -- system packages: declared once (harness.services.catalog), checked everywhere -----

#: What .ci/run installs besides the declared packages: the bare machine's build tools.
CI_BASE = {"make", "git", "procps", "libc6-dev", "python3-dev"}


def setup_script_disagreements(script: str) -> list[str]:
    """scripts/ensure-system-packages.sh's NEED map against the declarations."""
    need = dict(re.findall(r"^\s*\[([^\]]+)\]=(\S+)", script, re.M))
    want = {p.probe: p.debian for p in all_packages()}
    return ([f"setup script lacks {probe} -> {deb}" for probe, deb in want.items()
             if need.get(probe) != deb]
            + [f"setup script has undeclared {probe} -> {deb}" for probe, deb in need.items()
               if probe not in want])


def ci_disagreements(ci: str) -> list[str]:
    """The packages .ci/run's apt-get line installs against the declarations."""
    lines = ci[ci.index("apt-get install"):].splitlines()
    # The command runs on while a line ends with a backslash; comments are not words.
    end = next(i for i, text in enumerate(lines) if not text.rstrip().endswith("\\"))
    words = " ".join(re.sub(r"#.*", "", text).rstrip(" \\")
                     for text in lines[: end + 1]).split()
    installed = {w for w in words[2:] if not w.startswith(("-", ">"))}
    want = {p.debian for p in all_packages()}
    return ([f".ci/run lacks {p}" for p in sorted(want - installed)]
            + [f".ci/run installs undeclared {p}" for p in sorted(installed - want - CI_BASE)])


def conda_disagreements(env_yml: str) -> list[str]:
    env = yaml.safe_load(env_yml)
    listed = {_name(d) for d in env["dependencies"] if isinstance(d, str)}
    want = {p.conda for p in all_packages() if p.conda}
    return [f"environment.yml lacks {p}" for p in sorted(want - listed)]


def readme_disagreements(readme: str) -> list[str]:
    table = re.search(r"<!-- packages table[^>]*-->\n(.*?)\n<!-- end packages table -->",
                      readme, re.S)
    assert table, "docs/servers.md has no packages table"
    return [] if table.group(1).strip() == readme_table() else [
        "docs/servers.md's packages table differs from `harness list packages`"]


def test_the_setup_script_installs_what_is_declared() -> None:
    assert setup_script_disagreements(
        (ROOT / "scripts" / "ensure-system-packages.sh").read_text()) == []


def test_ci_installs_what_is_declared_and_runs_make_test() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci_disagreements(ci) == []
    assert "make test" in ci


def test_environment_yml_has_the_declared_conda_packages() -> None:
    assert conda_disagreements((ROOT / "environment.yml").read_text()) == []


def test_the_readme_server_table_is_the_declarations() -> None:
    assert readme_disagreements((ROOT / "docs" / "servers.md").read_text()) == []


def test_every_service_with_binaries_declares_its_packages() -> None:
    """A server kind that needs executables says which packages bring them; the test
    fixtures name them from there when a server is missing."""
    for name in SERVICES:
        svc = SERVICES.get(name)
        if svc.binaries and svc.kind not in ("filestore", "command", "external"):
            assert svc.packages, f"service {name} needs {svc.binaries} but declares no package"
    assert "PACKAGES" not in (ROOT / "tests" / "fixtures" / "servers.py").read_text()


def test_a_package_dropped_from_one_place_is_caught() -> None:
    """Each check names the package when one copy loses it."""
    script = (ROOT / "scripts" / "ensure-system-packages.sh").read_text()
    assert setup_script_disagreements(script.replace("[redis-cli]=redis-tools", "")) == [
        "setup script lacks redis-cli -> redis-tools"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci_disagreements(ci.replace(" libhdrhistogram-java", "")) == [
        ".ci/run lacks libhdrhistogram-java"]
    assert ci_disagreements(ci.replace("make git", "make git cowsay")) == [
        ".ci/run installs undeclared cowsay"]
    env = (ROOT / "environment.yml").read_text()
    assert conda_disagreements(env.replace("  - poppler\n", "")) == [
        "environment.yml lacks poppler"]
    readme = (ROOT / "docs" / "servers.md").read_text()
    assert readme_disagreements(readme.replace("| `redis-server` `redis-tools` |",
                                               "| `redis-server` |")) != []


def test_makefile_has_the_documented_targets() -> None:
    make = (ROOT / "Makefile").read_text()
    for target in ("setup", "demo", "report", "test", "help"):
        assert re.search(rf"^{target}:", make, re.M), target


def test_console_script_is_declared() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["harness"] == "harness.cli:main"
