"""No module circle in the package (design/layout.md: a higher room uses lower ones only).

The graph is read from the source (``ast``): every import, at the top of a module or late inside
a function. The compiled core is a module too: its stub's imports stand for the names it looks
up at run time (it imports ``acp_fast._types``), so ``_types`` and what it imports must not
import the core back.

- Through the package root: ``acp_fast/__init__`` imports the clients (and, on first use, the
  pools), so a module below it that imports ``acp_fast`` itself, even late inside a function,
  closes a circle. Such a module imports the sibling it needs (``acp_fast._core`` for
  ``__version__``). ``if TYPE_CHECKING:`` blocks are left out here (they never run).
- Anywhere: no module imports one that imports it back, directly or through others; here
  ``if TYPE_CHECKING:`` imports count too (a type-only circle is still two rooms that each need
  the other), so a lower module names what it needs of a higher one by a `Protocol`."""

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


def _imports(
    name: str, path: Path, modules: dict[str, Path], *, type_checking: bool = False
) -> set[str]:
    """The package's modules `name` imports at run time (at import or inside a function), and
    with `type_checking` also in ``if TYPE_CHECKING:`` blocks."""
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
            if (
                not type_checking
                and isinstance(child, ast.If)
                and "TYPE_CHECKING" in ast.unparse(test or child)
            ):
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


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in graph:
                    continue
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _path(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One circle inside a component, as module names (first == last), for the message."""
    members = set(component)
    start = component[0]
    trail = [start]
    seen = {start}
    while True:
        step = sorted(graph[trail[-1]] & members)
        back = [m for m in step if m in seen]
        if back:
            return [*trail[trail.index(back[0]) :], back[0]]
        trail.append(step[0])
        seen.add(step[0])


def test_no_module_imports_one_that_imports_it_back() -> None:
    modules = _modules()
    graph = {
        name: _imports(name, path, modules, type_checking=True) for name, path in modules.items()
    }
    circles = [" -> ".join(_path(graph, component)) for component in _circles(graph)]
    assert circles == [], "module circles (lazy and TYPE_CHECKING imports count):\n" + "\n".join(
        circles
    )


def test_the_circle_finder_finds_circles() -> None:
    """The check above fails on a circle, however long, and passes on a layered graph."""
    layered = {"a": {"b", "c"}, "b": {"c"}, "c": set()}
    assert _circles(layered) == []
    looped = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert _circles(looped) == [["a", "b", "c"]]
    assert _path(looped, ["a", "b", "c"]) == ["a", "b", "c", "a"]
