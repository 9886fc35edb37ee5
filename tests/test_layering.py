"""The layering of our packages (README "Layout"; issue 82), checked on the source alone.

Every .py file of our packages is parsed with `ast` (nothing of ours is imported) and every
import in it counts: at module level, inside functions, under `if TYPE_CHECKING:`, relative
ones, and `importlib.import_module` / `__import__` of a literal name. The rules:

- no import cycle among our modules, hidden ones included;
- `models` and `decoder` import nothing else of ours (decoder imports no models either: it
  does not need to, numpy in, text out);
- `server` imports `models` and `decoder` only: no workshop package (`training`, `corpus`,
  `evaluation`, `loadtest`);
- `corpus` and `training` import `models` only; `evaluation` anything but `loadtest`;
- `loadtest` talks to the server over the network: of ours it imports `server.protocol`
  (the message shapes) and nothing else;
- nothing imports `harken_cli` (the top), `experiments` or `results` (folders, not packages),
  or anything under a `results/` directory;
- plotting is the `plot` extra: matplotlib is no core dependency, serving never imports it,
  and elsewhere only inside functions (importing a module never needs the extra);
- no package holds a `results/` directory, committed or not.

An experiment's write-up, script and summary live outside the product packages, so that a
reader of the serving path never meets them: the shipped default's per-set reports in
`results/` (top level, beside RESULTS.md), everything else in `experiments/` (the load-test,
decoder and server runs the docs cite in `experiments/loadtest/`, `decoder/`, `server/`). A
tool that writes into a package's `results/` folder fails the last rule on the next test run.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("models", "decoder", "server", "corpus", "training", "evaluation", "loadtest")
TOP_MODULES = ("harken_cli",)
EXCLUDED_DIRS = frozenset({"__pycache__"})
# top-level folders of the repository that are not packages: nothing may import them
NOT_PACKAGES = ("experiments", "results")

# What each package may import of ours besides itself: a package, or one module (and below)
MAY_IMPORT: dict[str, frozenset[str]] = {
    "models": frozenset(),
    "decoder": frozenset(),
    "server": frozenset({"models", "decoder"}),
    "corpus": frozenset({"models"}),
    "training": frozenset({"models"}),
    "evaluation": frozenset({"models", "decoder", "server", "corpus", "training"}),
    "loadtest": frozenset({"server.protocol"}),
    "harken_cli": frozenset(PACKAGES),
}
SERVING = ("models", "decoder", "server")
# third-party packages that only an extra installs: (import name, distribution, extra)
EXTRA_ONLY = (("matplotlib", "matplotlib", "plot"),)

# Imports that break a rule today from files this change could not edit, each with the fix.
# Each must still occur: once fixed, its line here goes too (so it cannot come back unseen).
PENDING: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    line: int
    text: str  # the statement as written (ast.unparse)
    name: str  # the absolute dotted name imported
    target: str  # the module of ours it loads (the deepest one the name reaches)
    in_function: bool


@dataclass
class Module:
    name: str
    path: Path
    imports: list[Import] = field(default_factory=list)  # of our modules
    extras: list[Import] = field(default_factory=list)  # of EXTRA_ONLY packages

    def where(self, root: Path, imp: Import) -> str:
        return f"{self.path.relative_to(root)}:{imp.line}: `{imp.text}`"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_files(root: Path, packages: Iterable[str], modules: Iterable[str]) -> list[Path]:
    files = [root / f"{m}.py" for m in modules if (root / f"{m}.py").is_file()]
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            if not EXCLUDED_DIRS & set(path.relative_to(root).parts):
                files.append(path)
    return files


def results_dirs(root: Path, packages: Iterable[str] = PACKAGES) -> list[str]:
    """Every `results/` directory inside a package, at any depth (files git ignores count)."""
    return sorted(
        str(path.relative_to(root))
        for pkg in packages
        for path in (root / pkg).rglob("results")
        if path.is_dir()
    )


class _Imports(ast.NodeVisitor):
    """Every import of one file, with the absolute names it asks for."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.package = module.split(".") if is_package else module.split(".")[:-1]
        self.found: list[tuple[ast.stmt | ast.expr, str, bool]] = []  # node, name, in function
        self.depth = 0

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((node, alias.name, self.depth > 0))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            if node.level > len(self.package):
                raise ValueError(f"relative import beyond the top: {ast.unparse(node)}")
            base = self.package[: len(self.package) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        for alias in node.names:  # `from pkg import sub` loads pkg.sub when that is a module
            self.found.append((node, f"{module}.{alias.name}", self.depth > 0))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called in ("import_module", "__import__") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                self.found.append((node, first.value, self.depth > 0))
        self.generic_visit(node)


def scan(
    root: Path, packages: Iterable[str] = PACKAGES, modules: Iterable[str] = TOP_MODULES
) -> dict[str, Module]:
    """Our modules by name, each with its imports of our code and of EXTRA_ONLY packages."""
    packages, modules = tuple(packages), tuple(modules)
    ours = {*packages, *modules, *NOT_PACKAGES}
    extra_only = {name for name, _, _ in EXTRA_ONLY}
    files = source_files(root, packages, modules)
    graph = {module_name(p, root): Module(module_name(p, root), p) for p in files}
    for mod in graph.values():
        tree = ast.parse(mod.path.read_text(encoding="utf-8"), str(mod.path))
        visitor = _Imports(mod.name, mod.path.name == "__init__.py")
        visitor.visit(tree)
        for node, name, in_function in visitor.found:
            line, text, top = getattr(node, "lineno", 0), ast.unparse(node), name.split(".")[0]
            if top in extra_only:
                mod.extras.append(Import(line, text, name, top, in_function))
            if top not in ours:
                continue
            target = name
            while target not in graph and "." in target:
                target = target.rpartition(".")[0]
            mod.imports.append(Import(line, text, name, target, in_function))
    return graph


def _owner(module: str) -> str:
    return module.split(".")[0]


def _allowed(target: str, specs: Iterable[str]) -> bool:
    return any(target == s or target.startswith(s + ".") for s in specs)


def rule_violations(
    graph: Mapping[str, Module],
    root: Path,
    may_import: Mapping[str, frozenset[str]] = MAY_IMPORT,
    pending: Mapping[tuple[str, str], str] = PENDING,
) -> tuple[list[str], set[tuple[str, str]]]:
    """Imports across packages that the rules forbid, as "file:line: `import`: why", and the
    pending exceptions that were met."""
    problems, met = [], set()
    for mod in graph.values():
        owner = _owner(mod.name)
        rel = str(mod.path.relative_to(root))
        for imp in mod.imports:
            if _owner(imp.target) in NOT_PACKAGES or "results" in imp.name.split("."):
                problems.append(f"{mod.where(root, imp)}: imports an experiment's output or script")
                continue
            if _owner(imp.target) == owner:
                continue
            if _owner(imp.target) in TOP_MODULES:
                problems.append(f"{mod.where(root, imp)}: nothing of ours imports {imp.target}")
                continue
            specs = may_import.get(owner, frozenset())
            if _allowed(imp.target, specs):
                continue
            if (rel, imp.target) in pending:
                met.add((rel, imp.target))
                continue
            allowed = ", ".join(sorted(specs)) or "nothing else of ours"
            problems.append(
                f"{mod.where(root, imp)}: {owner} may import {allowed}; not {imp.target}"
            )
    return problems, met


def extra_violations(graph: Mapping[str, Module], root: Path) -> list[str]:
    """Imports of EXTRA_ONLY packages by serving, or at module level anywhere."""
    problems = []
    for mod in graph.values():
        for imp in mod.extras:
            if _owner(mod.name) in SERVING:
                problems.append(f"{mod.where(root, imp)}: serving imports no {imp.target}")
            elif not imp.in_function:
                problems.append(
                    f"{mod.where(root, imp)}: {imp.target} is an extra's, import it in a function"
                )
    return problems


Cycle = list[tuple[str, Import]]  # (module, the import that leads to the next), in order


def cycles(graph: Mapping[str, Module]) -> list[tuple[list[str], Cycle]]:
    """Each group of modules that import one another, directly or not (Tarjan's strongly
    connected components), with the shortest cycle through its first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def edges(name: str) -> list[Import]:
        return [i for i in graph[name].imports if i.target in graph and i.target != name]

    def connect(v: str) -> None:  # recursive; our graph is a few hundred modules
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for imp in edges(v):
            w = imp.target
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for name in sorted(graph):
        if name not in index:
            connect(name)
    found: list[tuple[list[str], Cycle]] = []
    for group in groups:  # the shortest way from the group's first module back to itself
        start = min(group)
        paths: dict[str, list[tuple[str, Import]]] = {start: []}
        queue = [start]
        cycle = None
        while queue and cycle is None:
            v = queue.pop(0)
            for imp in edges(v):
                if imp.target == start:
                    cycle = [*paths[v], (v, imp)]
                    break
                if imp.target in group and imp.target not in paths:
                    paths[imp.target] = [*paths[v], (v, imp)]
                    queue.append(imp.target)
        assert cycle is not None
        found.append((sorted(group), cycle))
    return found


def describe_cycle(group: list[str], cycle: Cycle, graph: Mapping[str, Module], root: Path) -> str:
    names = " -> ".join([*(v for v, _ in cycle), cycle[0][0]])
    if len(group) > len(cycle):
        names += f" (of the group {', '.join(group)})"
    steps = "".join(f"\n    {graph[v].where(root, imp)}" for v, imp in cycle)
    return f"import cycle {names}:{steps}"


@pytest.fixture(scope="module")
def graph() -> dict[str, Module]:
    return scan(ROOT)


def test_the_rules_cover_every_package_we_ship() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    shipped = {p.rstrip("*") for p in setuptools["packages"]["find"]["include"]}
    assert shipped == set(PACKAGES), "a new package needs its line in MAY_IMPORT"
    assert set(setuptools["py-modules"]) == set(TOP_MODULES)
    assert set(MAY_IMPORT) == {*PACKAGES, *TOP_MODULES}


def test_imports_go_only_downward(graph: dict[str, Module]) -> None:
    problems, _ = rule_violations(graph, ROOT)
    assert not problems, "imports against the layering (README, Layout):\n" + "\n".join(problems)


def test_pending_exceptions_are_still_needed(graph: dict[str, Module]) -> None:
    _, met = rule_violations(graph, ROOT)
    stale = [f"{file} -> {target}" for file, target in PENDING if (file, target) not in met]
    assert not stale, "fixed, so drop from PENDING in tests/test_layering.py: " + ", ".join(stale)


def test_no_import_cycles(graph: dict[str, Module]) -> None:
    found = [describe_cycle(g, c, graph, ROOT) for g, c in cycles(graph)]
    assert not found, "\n".join(found)


def test_no_package_holds_a_results_folder() -> None:
    found = results_dirs(ROOT)
    assert not found, (
        "experiment output inside a product package (the shipped default's reports go to "
        "results/, other runs to experiments/; move them and fix whatever wrote them there): "
        + ", ".join(found)
    )


def test_plotting_is_an_extra(graph: dict[str, Module]) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    for _, dist, extra in EXTRA_ONLY:
        assert dist not in core, f"{dist} is a core dependency; it belongs to the {extra} extra"
        assert any(d.startswith(dist) for d in project["optional-dependencies"][extra])
    problems = extra_violations(graph, ROOT)
    assert not problems, "\n".join(problems)


# -- the checker itself, on a made-up tree --------------------------------------------------


def _tree(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checker_finds_hidden_imports_and_cycles(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "models/__init__.py": "",
            "models/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from models.b import B\n",
            "models/b.py": "def f():\n    from . import a\n",
            "models/c.py": "import importlib\nimportlib.import_module('server.x')\n",
            "models/results/probe.py": "",  # a results/ folder in a package
            "loadtest/results/run1/report.md": "",  # and one without Python
            "server/__init__.py": "",
            "server/protocol.py": "",
            "server/x.py": "from models import c\nfrom training import t\n",
            "training/__init__.py": "",
            "training/t.py": "from experiments.soup import soup\nimport results\n",
            "loadtest/__init__.py": "",
            "loadtest/run.py": "from server.protocol import Final\nfrom server import x\n",
            "loadtest/plots.py": "import matplotlib.pyplot as plt\n",
            "loadtest/report.py": "def plot():\n    import matplotlib\n",  # as it should
            "server/page.py": "def plot():\n    import matplotlib\n",
        },
    )
    packages = ("models", "server", "training", "loadtest")
    assert results_dirs(tmp_path, packages) == ["loadtest/results", "models/results"]
    graph = scan(tmp_path, packages, ())
    problems, _ = rule_violations(graph, tmp_path, pending={})
    assert problems == [
        "models/c.py:2: `importlib.import_module('server.x')`: models may import nothing else "
        "of ours; not server.x",
        "server/x.py:2: `from training import t`: server may import decoder, models; "
        "not training.t",
        "training/t.py:1: `from experiments.soup import soup`: imports an experiment's output "
        "or script",
        "training/t.py:2: `import results`: imports an experiment's output or script",
        "loadtest/run.py:2: `from server import x`: loadtest may import server.protocol; "
        "not server.x",
    ]
    assert extra_violations(graph, tmp_path) == [
        "server/page.py:2: `import matplotlib`: serving imports no matplotlib",
        "loadtest/plots.py:1: `import matplotlib.pyplot as plt`: matplotlib is an extra's, "
        "import it in a function",
    ]
    texts = sorted(describe_cycle(g, c, graph, tmp_path) for g, c in cycles(graph))
    assert texts == [
        "import cycle models.a -> models.b -> models.a:\n"
        "    models/a.py:3: `from models.b import B`\n"
        "    models/b.py:2: `from . import a`",
        "import cycle models.c -> server.x -> models.c:\n"
        "    models/c.py:2: `importlib.import_module('server.x')`\n"
        "    server/x.py:1: `from models import c`",
    ]
