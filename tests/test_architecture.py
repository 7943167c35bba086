"""The architecture holds: packages import only what their docstrings allow, and nothing circles.

Every package of ``benchmark`` (and the top-level ``methods``) says in its ``__init__`` docstring
which packages it may import (``May import: core, config.``). This test reads every import of
every module, function-level and type-checking ones included, and checks that each one between
packages is declared, that the declarations form no circle (so every import goes down), that no
two modules import each other even indirectly, and that no module outgrows ~500 lines.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 500
# Transcribed data (the paper's numbers), not code: exempt from the size limit.
TRANSCRIBED = {"benchmark.experiments.paper_numbers"}


def module_files() -> dict[str, Path]:
    """Every module of the project by dotted name (packages by their ``__init__``)."""
    files = sorted((ROOT / "benchmark").rglob("*.py")) + sorted((ROOT / "methods").rglob("*.py"))
    out = {}
    for path in files:
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


MODULES = module_files()


def type_only_nodes(tree: ast.AST) -> set[ast.AST]:
    """The import statements inside ``if TYPE_CHECKING:`` blocks (never run)."""
    nodes: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                nodes.update(ast.walk(stmt))
    return nodes


def imports_of(module: str, path: Path, runtime_only: bool = False) -> set[str]:
    """The project modules ``module`` imports, wherever the import statement stands (with
    ``runtime_only``, leaving out the type-only imports of ``if TYPE_CHECKING:`` blocks)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = type_only_nodes(tree) if runtime_only else set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if node in skip:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")
                if path.name != "__init__.py":
                    base = base[:-1]
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names = [f"{prefix}.{alias.name}" for alias in node.names]
            names = [n if n in MODULES else prefix for n in names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


# Every import (layering) and the imports that run (circles: a type-only import cannot circle).
GRAPH = {m: imports_of(m, p) for m, p in MODULES.items()}
RUNTIME_GRAPH = {m: imports_of(m, p, runtime_only=True) for m, p in MODULES.items()}


def package_of(module: str) -> str | None:
    """``benchmark.X...`` -> ``X``; ``methods...`` -> ``methods``; the root package -> None."""
    parts = module.split(".")
    if parts[0] == "methods":
        return "methods"
    return parts[1] if len(parts) > 1 else None


PACKAGES = sorted({p for m in MODULES if (p := package_of(m))})


def declared(package: str) -> set[str]:
    """The packages ``package``'s docstring allows it to import (its ``May import:`` line)."""
    init = "methods" if package == "methods" else f"benchmark.{package}"
    doc = ast.get_docstring(ast.parse(MODULES[init].read_text())) or ""
    match = re.search(r"^May import: ([^.]+)\.", doc, re.M)
    assert match, f"{MODULES[init]}: the docstring has no 'May import: ...' line"
    text = " ".join(match.group(1).split())
    return set() if text == "nothing" else {p.strip() for p in text.split(",")}


ALLOWED = {p: declared(p) for p in PACKAGES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_package_declares_known_packages() -> None:
    for package, allowed in ALLOWED.items():
        unknown = allowed - set(PACKAGES)
        assert not unknown, f"{package} declares unknown packages {sorted(unknown)}"


def test_the_declared_layers_have_no_circle() -> None:
    assert cycles(ALLOWED) == []


def test_every_import_between_packages_is_declared() -> None:
    wrong = []
    for module, targets in sorted(GRAPH.items()):
        source = package_of(module)
        for target in sorted(targets):
            dest = package_of(target)
            if source and dest and dest != source and dest not in ALLOWED[source]:
                wrong.append(
                    f"{module} imports {target} ({source} may import: "
                    f"{', '.join(sorted(ALLOWED[source])) or 'nothing'})"
                )
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_itself_through_others() -> None:
    assert cycles(RUNTIME_GRAPH) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_500_lines(module: str) -> None:
    if module in TRANSCRIBED:
        return
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[module]} has {lines} lines (at most {MAX_LINES})"


def test_the_checks_catch_a_circle_and_an_undeclared_import() -> None:
    # The test's own machinery on a made-up graph: a circle is found, a clean graph is not.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
