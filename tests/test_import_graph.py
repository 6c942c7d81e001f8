"""No module circle through the package root: ``acp_fast/__init__`` imports the clients (and, on
first use, the pools), so a module below it that imports ``acp_fast`` itself, even late inside a
function, closes a circle. Such a module imports the sibling it needs (``acp_fast._core`` for
``__version__``). The graph is read from the source (``ast``), lazy imports included,
``if TYPE_CHECKING:`` blocks left out."""

from __future__ import annotations

import ast
from pathlib import Path

import acp_fast

PACKAGE = Path(acp_fast.__file__).resolve().parent


def _modules() -> dict[str, Path]:
    found = {}
    # The compiled core is a module too (its stub stands for it: it imports nothing of ours).
    for path in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyi")]:
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules `name` imports at run time (at import or inside a function)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def add(target: str) -> None:
        while target and target not in modules:  # a name inside a module: the module
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            test = getattr(child, "test", None)
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(test or child):
                for orelse in child.orelse:
                    visit(orelse)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    add(alias.name)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = package.split(".")
                    parent = parent[: len(parent) - child.level + 1]
                    base = ".".join(parent + ([child.module] if child.module else []))
                for alias in child.names:
                    add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {target for target in found if target.startswith("acp_fast")}


def test_no_module_below_the_root_imports_the_root() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    # What the root reaches, and which of those import the root back.
    reached: set[str] = set()
    todo = list(graph["acp_fast"])
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(graph.get(name, ()))
    circles = sorted(name for name in reached if "acp_fast" in graph.get(name, ()))
    assert circles == [], f"these modules import acp_fast, which imports them: {circles}"
