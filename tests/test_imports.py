"""Imports run one way: the graph of harness's own imports has no cycle, and the
layers below (hosts, the raw-results format, analysis, studies) import nothing above
them. Read from the source with `ast`, so nothing is imported to check it.

Function-level imports count as much as module-level ones: a lazy import is still a
dependency, and a cycle closed by one is the tangle this test is here to prevent.
Imports under `if TYPE_CHECKING:` do not count (they never run).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def modules(root: Path) -> dict[str, Path]:
    """Every module of the harness package by dotted name; C extensions by their source."""
    found: dict[str, Path] = {}
    for path in sorted((root / "harness").rglob("*")):
        if path.suffix not in (".py", ".c") or "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(mods: dict[str, Path], current: str, is_pkg: bool,
             node: ast.Import | ast.ImportFrom) -> Iterable[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = current.split(".")[: None if is_pkg else -1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, *([base] if base else [])])
        # `from pkg import mod` depends on pkg.mod; `from mod import name` on mod.
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                 for a in node.names]
    for name in names:
        while name not in mods and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in mods and name != current:
            yield name


def _imports(body: list[ast.stmt]) -> Iterable[ast.Import | ast.ImportFrom]:
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _imports(node.orelse)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    yield from _imports([child])


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the harness modules it imports (anywhere in it)."""
    mods = modules(root)
    out: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps: set[str] = set()
        if path.suffix == ".py":
            tree = ast.parse(path.read_text(), str(path))
            for node in _imports(tree.body):
                deps.update(_resolve(mods, name, path.name == "__init__.py", node))
        out[name] = deps
    return out


def third_party(root: Path, module: str) -> set[str]:
    """Top-level names of what `module` imports outside harness."""
    path = modules(root)[module]
    tree = ast.parse(path.read_text())
    names = set()
    for node in _imports(tree.body):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names - {"harness"}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def _in(module: str, packages: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


#: Layer -> what it must never import. The layers below run on client machines or hold
#: the data format; pulling in what sits above them would bring it along.
FORBIDDEN = {
    "harness.hosts": ("harness.spec", "harness.services", "harness.loadgen", "harness.run",
                      "harness.netem", "harness.analysis", "harness.studies",
                      "harness.workloads", "harness.report"),
    "harness.results": ("harness.spec", "harness.hosts", "harness.services", "harness.loadgen",
                        "harness.run", "harness.netem", "harness.analysis", "harness.studies",
                        "harness.workloads", "harness.report"),
    "harness.netem": ("harness.spec", "harness.services", "harness.loadgen", "harness.run",
                      "harness.analysis", "harness.studies", "harness.workloads"),
    "harness.services": ("harness.spec", "harness.loadgen", "harness.run", "harness.analysis",
                         "harness.studies", "harness.workloads", "harness.report"),
    "harness.workloads": ("harness.spec", "harness.loadgen", "harness.run", "harness.analysis",
                          "harness.studies", "harness.report"),
    "harness.loadgen": ("harness.spec", "harness.run", "harness.analysis", "harness.studies",
                        "harness.report"),
    "harness.spec": ("harness.loadgen", "harness.run", "harness.analysis", "harness.studies",
                     "harness.report"),
    "harness.analysis": ("harness.studies", "harness.run", "harness.hosts",
                         "harness.services", "harness.loadgen", "harness.report"),
    "harness.studies": ("harness.run", "harness.hosts", "harness.services",
                        "harness.loadgen", "harness.report"),
    "harness.run": ("harness.studies", "harness.report"),
}


def layer_violations(g: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, deps in sorted(g.items()):
        for layer, banned in FORBIDDEN.items():
            if _in(module, [layer]):
                bad += [f"{module} imports {d}" for d in sorted(deps) if _in(d, banned)]
    return bad


def cli_importers(g: dict[str, set[str]]) -> list[str]:
    """Modules outside the command line that import it: it sits above every layer."""
    return sorted(f"{m} imports {d}" for m, deps in g.items() if not _in(m, ["harness.cli"])
                  for d in deps if _in(d, ["harness.cli"]))


def test_nothing_below_the_command_line_imports_it() -> None:
    g = graph()
    assert any(_in(m, ["harness.cli"]) for m in g)  # the graph sees the package
    assert cli_importers(g) == []
    assert cli_importers({"harness.run.runner": {"harness.cli.exits"}}) != []


def test_the_import_graph_has_no_cycle() -> None:
    assert cycles(graph()) == []


def test_layers_import_nothing_above_them() -> None:
    assert layer_violations(graph()) == []


def ssh_leaks(root: Path) -> list[str]:
    """Modules of the host layer's local side that import SSH (they must not)."""
    g = graph(root)
    return [m for m in ("harness.hosts.base", "harness.hosts.local", "harness.hosts.hostspec")
            if "harness.hosts.ssh" in g[m] or "paramiko" in third_party(root, m)]


def test_the_host_base_never_imports_ssh() -> None:
    assert ssh_leaks(ROOT) == []
    # connect picks SSH only for a remote spec, inside the function.
    assert "harness.hosts.ssh" in graph()["harness.hosts.connect"]


def test_the_runner_worker_contract_is_light() -> None:
    """The client config crosses to every client machine: plain data, nothing of the kit
    but the base module that masks the passwords it carries (standard library only)."""
    assert graph()["harness.loadgen.config"] <= {"harness.errors", "harness.hosts.endpoint",
                                                 "harness.text"}
    assert graph()["harness.hosts.endpoint"] == {"harness.text"}
    assert graph()["harness.text"] == set()


def test_the_checks_see_what_they_claim(tmp_path: Path) -> None:
    """A copy of the package with a cycle and an upward import added: both are found."""
    pkg = tmp_path / "harness"
    for path in modules(ROOT).values():
        dest = tmp_path / path.relative_to(ROOT)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(path.read_text())
    assert cycles(graph(tmp_path)) == []
    errors = pkg / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef _late():\n    from harness import spec\n")
    assert any("harness.errors" in c and "harness.spec" in c for c in cycles(graph(tmp_path)))
    base = pkg / "hosts" / "base.py"
    base.write_text("import paramiko\n" + base.read_text())
    assert ssh_leaks(tmp_path) == ["harness.hosts.base"]
    results = pkg / "results" / "schema.py"
    results.write_text("import harness.run.runner\n" + results.read_text())
    assert "harness.results.schema imports harness.run.runner" in layer_violations(
        graph(tmp_path))


#: `harness.analysis`'s subpackages (and top modules), bottom to top (issue 42): each may
#: import those before it, never one after. The path of `harness summary` reads this way:
#: the tree and its data, the statistics, the checks, the table.
ANALYSIS_ORDER = ("stats", "data", "checks", "figures", "sections", "compare",
                  "summary_table", "history", "explore", "explain")


def _analysis_unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["harness", "analysis"] else None


def analysis_upward(g: dict[str, set[str]]) -> list[str]:
    rank = {u: i for i, u in enumerate(ANALYSIS_ORDER)}
    bad = []
    for module, deps in sorted(g.items()):
        unit = _analysis_unit(module)
        if unit is None:
            continue
        bad += [f"{module} imports {d}" for d in sorted(deps)
                if (other := _analysis_unit(d)) is not None and other != unit
                and rank[other] > rank[unit]]
    return bad


def test_the_analysis_subpackages_import_one_way() -> None:
    g = graph()
    units = {u for m in g if (u := _analysis_unit(m)) is not None}
    assert units == set(ANALYSIS_ORDER)  # every subpackage has its place in the order
    assert analysis_upward(g) == []
    assert analysis_upward({"harness.analysis.data.load": {
        "harness.analysis.sections.tables"}}) == [
        "harness.analysis.data.load imports harness.analysis.sections.tables"]


def test_the_analysis_package_keeps_at_most_12_modules_at_its_top() -> None:
    top = ROOT / "harness" / "analysis"
    units = [p for p in top.iterdir() if p.name != "__init__.py" and not
             p.name.startswith((".", "_")) and (p.suffix == ".py" or (p / "__init__.py").exists())]
    assert len(units) <= 12, sorted(p.name for p in units)
