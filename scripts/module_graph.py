#!/usr/bin/env python3
"""Which module uses which, for every crate under crates/ and for the Python package, and the
circles among them (strongly connected components of more than one module).

Rust: each crate's src/**/*.rs is read (comments and literals skipped) and every module, a file
or an inline `mod name { ... }`, gets an edge to each module of the same crate it names: in a
`use` tree (`crate::`, `super::`, `self::`, or a child module's name), or in a path in the code
(`crate::x::f()`, `super::g`, `child::h`). A path names the longest module prefix it has, so
`use super::helper` in `fs/walk.rs` is the edge `fs::walk -> fs`, and `use super::write` (a
module) is `fs::walk -> fs::write`. Declaring `mod child;` is no edge; a parent that uses its
child's items (`pub use child::f`) is one, so a child using its parent's items back is a circle.
`pub(in crate::x)` visibility is no use. Other crates (`acp_proto::...`) are not followed.

One kind of Rust circle is not reported (unless `--strict`): one whose every edge joins a module
and its own descendant, i.e. one module split over files (connection/mod.rs re-exports
`host::HostId` and its child host.rs implements part of `Connection` with `use super::*`). The
children are the parent's parts: declared by it, private to it unless it says otherwise, and
Rust lets them see its private items. A circle with any other edge in it (a sibling, a cousin,
another subtree: `fs::write -> fs::walk -> fs -> fs::write`) is reported.

Python: every `import` and `from ... import` of python/acp_fast, at module level or inside a
function (a lazy import still closes a circle when it runs) or under `if TYPE_CHECKING:` (a
circle for the type checker and the reader; `--runtime-only` leaves those out), resolved to the
package's modules: `from . import x` is an edge to the submodule `x` when there is one, else to
the package (its `__init__`, whose re-exports are its own edges, so a module importing its own
package's `__init__` back is a circle: Python runs those imports).

Usage: module_graph.py [--root DIR] [--crate NAME ...] [--python] [--runtime-only] [--strict]
With neither --crate nor --python, every crate and the package. Prints one "a -> b, c" line per
module, then the circles; exits 1 if there is any.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

Graph = dict[str, set[str]]
Module = tuple[str, ...]

# --- Rust: tokens ------------------------------------------------------------------------------


def _skip_block_comment(text: str, i: int) -> int:
    """`i` is just past `/*`; block comments nest in Rust."""
    depth = 1
    while i < len(text) and depth:
        if text.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif text.startswith("*/", i):
            depth, i = depth - 1, i + 2
        else:
            i += 1
    return i


def _skip_string(text: str, i: int) -> int:
    """`i` is just past the opening quote of a "..." string with escapes."""
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    return i


def _raw_string_end(text: str, i: int) -> int | None:
    """`i` at the `r` of r"..." / r#"..."#; the index past it, or None if it is no raw string."""
    j = i + 1
    while j < len(text) and text[j] == "#":
        j += 1
    if j >= len(text) or text[j] != '"':
        return None
    end = text.find('"' + "#" * (j - i - 1), j + 1)
    return len(text) if end < 0 else end + 1 + (j - i - 1)


def _char_end(text: str, i: int) -> int | None:
    """`i` at a `'`: the index past a char literal, or None for a lifetime or label."""
    if i + 1 < len(text) and text[i + 1] == "\\":
        end = text.find("'", i + 3)
        return len(text) if end < 0 else end + 1
    if i + 2 < len(text) and text[i + 2] == "'":
        return i + 3
    return None


def _ident_end(text: str, i: int) -> int:
    while i < len(text) and (text[i].isalnum() or text[i] == "_"):
        i += 1
    return i


def rust_tokens(text: str) -> list[str]:
    """Identifiers, `::` and single punctuation; comments, strings, chars and numbers dropped."""
    tokens: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        elif text.startswith("/*", i):
            i = _skip_block_comment(text, i + 2)
        elif c == '"':
            i = _skip_string(text, i + 1)
        elif c in "rb" and (literal := _literal_prefix_end(text, i)) is not None:
            i = literal
        elif c == "'":
            char = _char_end(text, i)
            i = char if char is not None else _ident_end(text, i + 1)  # a lifetime: dropped
        elif c.isalpha() or c == "_":
            end = _ident_end(text, i)
            tokens.append(text[i:end])
            i = end
        elif c.isdigit():
            i = _ident_end(text, i)
        elif text.startswith("::", i):
            tokens.append("::")
            i += 2
        else:
            tokens.append(c)
            i += 1
    return tokens


def _literal_prefix_end(text: str, i: int) -> int | None:
    """b"..", b'.', r"..", br"..", r#".."#, or the raw identifier r#name: past it, else None."""
    if text.startswith('b"', i):
        return _skip_string(text, i + 2)
    if text.startswith("b'", i):
        return _char_end(text, i + 1)
    if text.startswith("br", i):
        return _raw_string_end(text, i + 1)
    if (
        text.startswith("r#", i)
        and i + 2 < len(text)
        and (text[i + 2].isalpha() or text[i + 2] == "_")
    ):
        return None  # a raw identifier: read as an identifier (`r`, then `#`, then the name)
    if text.startswith("r", i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
        return _raw_string_end(text, i)
    return None


# --- Rust: modules and uses --------------------------------------------------------------------


def _file_module(src: Path, path: Path) -> Module:
    parts = path.relative_to(src).with_suffix("").parts
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts in (("lib",), ("main",)):
        return ()
    return tuple(parts)


def _inline_modules(tokens: list[str], base: Module) -> Iterator[tuple[int, int, Module]]:
    """(first token, end token, module) of each inline `mod name { ... }`, nested ones too."""
    stack: list[tuple[Module, int, int]] = []  # (module, depth inside its braces, start)
    depth = 0
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "mod" and i + 2 < len(tokens) and tokens[i + 2] == "{":
            parent = stack[-1][0] if stack else base
            depth += 1
            stack.append(((*parent, tokens[i + 1]), depth, i + 3))
            i += 3
            continue
        if tok == "{":
            depth += 1
        elif tok == "}":
            if stack and stack[-1][1] == depth:
                module, _, start = stack.pop()
                yield start, i, module
            depth -= 1
        i += 1


def _use_paths(tokens: list[str], i: int) -> tuple[list[list[str]], int]:
    """The paths a use tree starting at `i` names (each ends at a name, `self` or `*`), and the
    index past it."""
    prefix: list[str] = []
    while i < len(tokens):
        tok = tokens[i]
        if tok == "{":
            paths: list[list[str]] = []
            i += 1
            while i < len(tokens) and tokens[i] != "}":
                if tokens[i] == ",":
                    i += 1
                    continue
                inner, i = _use_paths(tokens, i)
                paths.extend(prefix + p for p in inner)
            return paths, i + 1
        if tok == "*":
            return [[*prefix, "*"]], i + 1
        if tok == "::":
            i += 1
            continue
        if tok in (",", "}", ";"):
            return [prefix], i
        if tok == "as":
            i += 2  # `as name`
            continue
        prefix.append(tok)
        i += 1
    return [prefix], i


def _skip_visibility(tokens: list[str], i: int) -> int:
    """`i` just past `pub`: past a `(crate)`/`(in path)` restriction, if any."""
    if i < len(tokens) and tokens[i] == "(":
        depth = 0
        while i < len(tokens):
            depth += {"(": 1, ")": -1}.get(tokens[i], 0)
            i += 1
            if depth == 0:
                break
    return i


class RustCrate:
    """The module graph of one crate's src/."""

    def __init__(self, src: Path) -> None:
        self.files = {path: _file_module(src, path) for path in sorted(src.rglob("*.rs"))}
        self.tokens = {path: rust_tokens(path.read_text(encoding="utf-8")) for path in self.files}
        self.modules: set[Module] = set(self.files.values())
        self.spans: dict[Path, list[tuple[int, int, Module]]] = {}
        for path, module in self.files.items():
            self.spans[path] = list(_inline_modules(self.tokens[path], module))
            self.modules.update(span[2] for span in self.spans[path])
        self.children: dict[Module, set[str]] = {}
        for module in self.modules:
            if module:
                self.children.setdefault(module[:-1], set()).add(module[-1])

    def _module_at(self, path: Path, index: int) -> Module:
        inner = [m for start, end, m in self.spans[path] if start <= index < end]
        return max(inner, key=len) if inner else self.files[path]

    def resolve(self, here: Module, path: list[str]) -> Module | None:
        """The module of this crate a path names (its longest module prefix), or None."""
        if not path:
            return None
        if path[0] in ("crate", "$crate"):
            full = list(path[1:])
            base: list[str] = []
        elif path[0] in ("super", "self"):
            base = list(here)
            rest = list(path)
            while rest and rest[0] in ("super", "self"):
                if rest.pop(0) == "super":
                    if not base:
                        return None
                    base.pop()
            full = rest
        elif path[0] in self.children.get(here, ()):
            base, full = list(here), list(path)
        else:
            return None  # another crate, std, or a name imported into scope
        names = [name for name in full if name not in ("*", "self")]
        for cut in range(len(names), -1, -1):
            candidate = (*base, *names[:cut])
            if candidate in self.modules:
                return candidate
        return None

    def graph(self) -> Graph:
        edges: dict[Module, set[Module]] = {module: set() for module in self.modules}
        for path in self.files:
            for index, module, target in self._uses(path):
                del index
                if target is not None and target != module:
                    edges[module].add(target)
        return {_rust_name(m): {_rust_name(t) for t in ts} for m, ts in edges.items()}

    def _uses(self, path: Path) -> Iterator[tuple[int, Module, Module | None]]:
        tokens = self.tokens[path]
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if tok == "pub":
                i = _skip_visibility(tokens, i + 1)
                continue
            here = self._module_at(path, i)
            if tok == "use" and (i == 0 or tokens[i - 1] in (";", "{", "}", "]", "pub", ")")):
                if i + 1 < len(tokens) and tokens[i + 1] == "::":
                    i += 2  # `use ::name`: another crate
                    continue
                paths, end = _use_paths(tokens, i + 1)
                for use in paths:
                    yield i, here, self.resolve(here, use)
                i = end
                continue
            if (
                (tok.isidentifier() or tok == "$crate")
                and i + 1 < len(tokens)
                and tokens[i + 1] == "::"
                and (i == 0 or tokens[i - 1] not in ("::", "."))
            ):
                segments = [tok]
                j = i + 1
                while j + 1 < len(tokens) and tokens[j] == "::" and tokens[j + 1].isidentifier():
                    segments.append(tokens[j + 1])
                    j += 2
                yield i, here, self.resolve(here, segments)
                i = j
                continue
            i += 1


def _rust_name(module: Module) -> str:
    return "::".join(module) if module else "crate"


def rust_graph(src: Path) -> Graph:
    return RustCrate(src).graph()


# --- Python --------------------------------------------------------------------------------------


def _python_modules(package: Path) -> dict[str, Path]:
    """Each module's name and source; a compiled module is known by its stub (``_core.pyi``,
    which imports nothing of ours)."""
    found: dict[str, Path] = {}
    for path in sorted([*package.rglob("*.py"), *package.rglob("*.pyi")]):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if path.suffix == ".py" or name not in found:
            found[name] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _import_nodes(tree: ast.AST, runtime_only: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and runtime_only and _is_type_checking(child):
                todo.extend(child.orelse)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child
            todo.append(child)


def python_graph(package: Path, runtime_only: bool = False) -> Graph:
    """Edges between the modules of `package` (a directory with an __init__.py)."""
    modules = _python_modules(package)

    def owner(target: str) -> str | None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    graph: Graph = {name: set() for name in modules}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        if path.suffix == ".pyi":
            continue  # a stub describes a compiled module: its imports are for the type checker
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _import_nodes(tree, runtime_only):
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [owner(alias.name) for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = here.split(".")
                    if node.level - 1 > len(parts):
                        continue
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else owner(base))
            graph[name].update(t for t in targets if t is not None and t != name)
    return graph


# --- Circles -------------------------------------------------------------------------------------


def _nested(a: str, b: str, sep: str) -> bool:
    """Whether one of the two modules is the other's descendant (`crate` is every module's)."""
    if "crate" in (a, b):
        return True
    return a.startswith(b + sep) or b.startswith(a + sep)


def cycles(graph: Graph, nested_sep: str | None = None) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's), each sorted. With
    `nested_sep` (Rust's "::"), a component whose every internal edge joins a module and its own
    descendant is left out (see the module doc)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 and _crosses(graph, component, nested_sep):
                    found.append(sorted(component))
    return sorted(found)


def _crosses(graph: Graph, component: list[str], nested_sep: str | None) -> bool:
    if nested_sep is None:
        return True
    members = set(component)
    return any(
        not _nested(a, b, nested_sep) for a in component for b in graph.get(a, ()) if b in members
    )


def _path(graph: Graph, members: set[str], start: str, goal: str) -> list[str]:
    """A shortest path from `start` to `goal` inside `members` (breadth first)."""
    previous: dict[str, str] = {start: start}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = [goal]
            while path[-1] != start:
                path.append(previous[path[-1]])
            return path[::-1]
        for succ in sorted(graph.get(node, ())):
            if succ in members and succ not in previous:
                previous[succ] = node
                queue.append(succ)
    return [start]


def a_loop(graph: Graph, component: Iterable[str], nested_sep: str | None = None) -> list[str]:
    """One loop in the component for the reader: through an edge that is not a module's own
    descendant when `nested_sep` is given (the edge that makes it a reported circle)."""
    members = set(component)
    edges = sorted((a, b) for a in members for b in graph.get(a, ()) if b in members)
    if nested_sep is not None:
        edges = [(a, b) for a, b in edges if not _nested(a, b, nested_sep)] or edges
    a, b = edges[0]
    return [a, *_path(graph, members, b, a)]


def render(title: str, graph: Graph, nested_sep: str | None = None) -> tuple[str, int]:
    lines = [f"# {title}"]
    for module in sorted(graph):
        lines.append(f"{module} -> {', '.join(sorted(graph[module]))}".rstrip())
    circles = cycles(graph, nested_sep)
    for component in circles:
        example = " -> ".join(a_loop(graph, component, nested_sep))
        lines.append(f"CYCLE: {', '.join(component)}  (e.g. {example})")
    if not circles:
        lines.append("no cycles")
    return "\n".join(lines), len(circles)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--crate", action="append", default=[], help="a crate under crates/")
    parser.add_argument("--python", action="store_true", help="the package python/acp_fast")
    parser.add_argument(
        "--runtime-only", action="store_true", help="leave out imports under TYPE_CHECKING"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="also report a Rust circle of a module and its own descendants only",
    )
    args = parser.parse_args(argv)
    crates = args.crate
    if not crates and not args.python:
        crates = sorted(p.parent.parent.name for p in (args.root / "crates").glob("*/src/lib.rs"))
        args.python = True
    reports: list[str] = []
    total = 0
    for crate in crates:
        src = args.root / "crates" / crate / "src"
        if not src.is_dir():
            parser.error(f"no crate {crate!r}: {src} is not a directory")
        text, count = render(f"crate {crate}", rust_graph(src), None if args.strict else "::")
        reports.append(text)
        total += count
    if args.python:
        text, count = render(
            "python acp_fast", python_graph(args.root / "python" / "acp_fast", args.runtime_only)
        )
        reports.append(text)
        total += count
    print("\n\n".join(reports))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
