"""The project's set-up files agree with each other."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _name(req: str) -> str:
    return re.split(r"[<>=!~ \[]", req, maxsplit=1)[0].strip().lower().replace("_", "-")


def test_environment_yml_lists_the_same_python_dependencies_as_pyproject() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    deps = {_name(d): d.replace(" ", "") for d in pyproject["project"]["dependencies"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    servers = {"python", "memcached", "redis-server", "postgresql", "openssh", "pip", "pango"}
    conda_py = {_name(d): d.replace(" ", "") for d in conda if _name(d) not in servers}
    assert conda_py == deps
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip
    for server in ("memcached", "redis-server", "postgresql", "openssh"):
        assert server in conda


def test_ci_installs_the_servers_and_runs_make_test() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    for pkg in ("memcached", "redis-server", "redis-tools", "postgresql", "openssh-server",
                "iproute2"):
        assert re.search(rf"\b{re.escape(pkg)}\b", ci), pkg
    assert "make test" in ci


def test_makefile_has_the_documented_targets() -> None:
    make = (ROOT / "Makefile").read_text()
    for target in ("setup", "demo", "report", "test", "help"):
        assert re.search(rf"^{target}:", make, re.M), target


def test_console_script_is_declared() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["harness"] == "harness.cli:main"
