"""The package's layout holds: no import cycle, even through imports deferred into functions
(a deferred import may keep start-up light, never hide a cycle) or through the package
``__init__`` that importing a module runs; the models import nothing of their evaluation, the
hardware layer or the command line; the governor nothing of the fleet, the evaluation or the
command line (they build on it); no Python file over 700 lines; every gpudvfs import resolves, and
a test imports helpers only from its own folder or the tests root."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "gpudvfs"
MAX_LINES = 700
#: What each model package may not import: evaluation imports the models, never the reverse.
MODELS = ("gpudvfs.time", "gpudvfs.power", "gpudvfs.online", "gpudvfs.policy", "gpudvfs.data", "gpudvfs.catalog")
FORBIDDEN_TO_MODELS = ("gpudvfs.evaluation", "gpudvfs.cli", "gpudvfs.hardware", "gpudvfs.govern", "gpudvfs.fleet",
                       "gpudvfs.demo")
#: What the governor may not import: the fleet, the replays and the command line drive it.
FORBIDDEN_TO_GOVERN = ("gpudvfs.fleet", "gpudvfs.evaluation", "gpudvfs.cli", "gpudvfs.demo")


def _modules(root: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__)."""
    out = {}
    for f in root.rglob("*.py"):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (f, is_package)
    return out


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")[: None if is_package else -1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _under_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _packages_run(module: str, target: str, modules: dict[str, tuple[Path, bool]]) -> set[str]:
    """The packages whose ``__init__`` importing ``target`` from ``module`` may run: the target's
    enclosing packages, less those ``module`` is in (already being imported)."""
    own = module.split(".")[: None if modules[module][1] else -1]
    parts = target.split(".")
    enclosing = {".".join(parts[:i]) for i in range(1, len(parts)) if parts[:i] != own[:i]}
    return {p for p in enclosing if p in modules and modules[p][1]}


def import_graph(modules: dict[str, tuple[Path, bool]]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere (module level or in a function;
    not under ``if TYPE_CHECKING``), and the packages whose ``__init__`` that runs.
    ``from pkg import name`` is an edge to ``pkg.name`` where that is a module, else to ``pkg``."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _absolute(module, is_package, node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            if not _under_type_checking(node, parents):
                found = {t for t in targets if t in modules and t != module}
                graph[module] |= found.union(*(_packages_run(module, t, modules) for t in found))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph(_modules())) == []


def test_the_cycle_check_finds_a_cycle_through_a_deferred_import(tmp_path):
    pkg = tmp_path / "gpudvfs"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import g\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpudvfs import a\n")
    graph = import_graph(_modules(pkg))
    assert cycles(graph) == [["gpudvfs.a", "gpudvfs.sub.b"]]
    assert graph["gpudvfs.c"] == set()


def test_the_cycle_check_follows_a_package_init(tmp_path):
    # Imported first, c runs sub's __init__ on its way to sub.a, which imports b, which imports
    # c half-made: a cycle, though no module imports c's importer.
    pkg = tmp_path / "gpudvfs"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from gpudvfs.sub import b\n")
    (pkg / "sub" / "a.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from gpudvfs.c import y\n")
    (pkg / "c.py").write_text("from gpudvfs.sub.a import x\n")
    graph = import_graph(_modules(pkg))
    assert cycles(graph) == [["gpudvfs.c", "gpudvfs.sub", "gpudvfs.sub.b"]]
    assert graph["gpudvfs.sub"] == {"gpudvfs.sub.b"}  # a package importing its own module runs no __init__ again


def _up(graph: dict[str, set[str]], package: str, forbidden: tuple[str, ...]) -> list[tuple[str, str]]:
    return sorted((m, t) for m, targets in graph.items() if m == package or m.startswith(package + ".")
                  for t in targets if t.startswith(forbidden))


@pytest.mark.parametrize("package", MODELS)
def test_a_model_imports_none_of_what_builds_on_it(package):
    assert _up(import_graph(_modules()), package, FORBIDDEN_TO_MODELS) == []


def test_the_governor_imports_neither_the_fleet_nor_the_evaluation():
    assert _up(import_graph(_modules()), "gpudvfs.govern", FORBIDDEN_TO_GOVERN) == []


def test_the_layer_check_finds_a_deferred_import_up(tmp_path):
    pkg = tmp_path / "gpudvfs"
    for sub in ("govern", "fleet"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "fleet" / "whatif.py").write_text("from gpudvfs.govern import daemon\n")
    (pkg / "govern" / "daemon.py").write_text("def f():\n    from gpudvfs.fleet.whatif import g\n")
    assert _up(import_graph(_modules(pkg)), "gpudvfs.govern", FORBIDDEN_TO_GOVERN) == [
        ("gpudvfs.govern.daemon", "gpudvfs.fleet"), ("gpudvfs.govern.daemon", "gpudvfs.fleet.whatif")]


def test_no_python_file_is_over_700_lines():
    long = {str(f.relative_to(PACKAGE)): n for f in PACKAGE.rglob("*.py")
            if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def _gpudvfs_imports() -> list[tuple[str, int, str, str | None]]:
    """(file, line, module, name or None) of every absolute ``gpudvfs`` import in the package, the
    tests and the benchmarks, deferred and TYPE_CHECKING ones included."""
    root = PACKAGE.parents[1]
    out = []
    for f in sorted([*PACKAGE.rglob("*.py"), *(root / "tests").rglob("*.py"), *(root / "benches").rglob("*.py")]):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("gpudvfs"):
                out += [(str(f.relative_to(root)), node.lineno, node.module, a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                out += [(str(f.relative_to(root)), node.lineno, a.name, None) for a in node.names
                        if a.name.startswith("gpudvfs")]
    return out


def test_every_gpudvfs_import_resolves():
    # mypy runs with ignore_missing_imports, and a deferred import runs only when its function
    # does: a module moved or a name renamed would otherwise be found by a user.
    import importlib

    unresolved = []
    for where, line, module, name in _gpudvfs_imports():
        try:
            mod = importlib.import_module(module)
            found = name is None or hasattr(mod, name) or importlib.util.find_spec(f"{module}.{name}") is not None
        except ModuleNotFoundError as e:
            if (e.name or "").startswith("gpudvfs"):
                unresolved.append(f"{where}:{line}: no module {e.name}")
            continue  # an optional dependency (torch, transformers, ray) is not installed
        if not found:
            unresolved.append(f"{where}:{line}: {module} has no {name}")
    assert not unresolved, "\n".join(unresolved)


def test_a_test_imports_helpers_from_its_own_folder_or_the_tests_root():
    # pytest puts a test file's folder and tests/ on sys.path: a helper imported from a sibling
    # folder's test module is found only when that folder was collected first (not run alone).
    tests = PACKAGE.parents[1] / "tests"
    wrong = []
    for f in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                top = node.module.split(".")[0]
                if top.startswith(("test_", "conftest")) and not (f.parent / f"{top}.py").exists() \
                        and not (tests / f"{top}.py").exists():
                    wrong.append(f"{f.relative_to(tests)}:{node.lineno}: from {node.module}")
    assert not wrong, "\n".join(wrong)
