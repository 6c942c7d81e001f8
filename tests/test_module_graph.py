"""No module circle in the crates that have cut theirs (scripts/module_graph.py reads the graph
from the source), and the checker itself on small trees: it finds a circle of two modules, a
circle through a lazy (function-level) Python import, and does not count a Rust parent that
declares `mod child;` (or a child using its parent's items) as one."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The crates whose module graph must stay free of circles: extended as the others are cut.
ACYCLIC_CRATES = ["acp-proto", "acp-os", "acp-journal", "acp-client", "acp-fast-py"]


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "module_graph", ROOT / "scripts" / "module_graph.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


graph = _checker()


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _rust_cycles(src: Path) -> list[list[str]]:
    found: list[list[str]] = graph.cycles(graph.rust_graph(src), "::")
    return found


@pytest.mark.parametrize("crate", ACYCLIC_CRATES)
def test_the_crate_has_no_module_circle(crate: str) -> None:
    edges = graph.rust_graph(ROOT / "crates" / crate / "src")
    circles = graph.cycles(edges, "::")
    loops = [" -> ".join(graph.a_loop(edges, c, "::")) for c in circles]
    assert circles == [], f"{crate} has module circles: {loops}"


def test_a_two_module_circle_is_found(tmp_path: Path) -> None:
    src = _write(
        tmp_path,
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::Thing;\npub struct Other;\n",
            # In code, not a `use`: a path through `crate::`.
            "b.rs": "pub struct Thing;\nfn f() { let _ = crate::a::Other; }\n",
        },
    )
    assert graph.rust_graph(src)["a"] == {"b"}
    assert _rust_cycles(src) == [["a", "b"]]


def test_a_circle_between_siblings_through_super_is_found(tmp_path: Path) -> None:
    src = _write(
        tmp_path,
        {
            "lib.rs": "pub mod os;\n",
            "os/mod.rs": "mod process;\nmod supervisor;\n",
            "os/process.rs": "use super::supervisor::watch;\n",
            "os/supervisor.rs": "fn start() { super::process::pipe(); }\n",
        },
    )
    assert _rust_cycles(src) == [["os::process", "os::supervisor"]]


def test_a_parent_and_its_child_are_no_circle(tmp_path: Path) -> None:
    src = _write(
        tmp_path,
        {
            "lib.rs": "pub mod fs;\n",
            # The parent declares its child and re-exports from it; the child uses the parent.
            "fs.rs": "mod walk;\npub use walk::resolve;\npub struct Roots;\n",
            "fs/walk.rs": "use super::Roots;\npub fn resolve(_: &Roots) {}\n",
        },
    )
    edges = graph.rust_graph(src)
    assert edges["fs::walk"] == {"fs"}, "a child using its parent's items is an edge"
    assert "crate" not in edges["fs"] and edges["crate"] == set(), "`mod x;` is no edge"
    assert _rust_cycles(src) == []
    # A mere `mod child;` with the child using its parent is no circle even counted strictly.
    _write(tmp_path, {"fs.rs": "mod walk;\npub struct Roots;\n"})
    assert graph.cycles(graph.rust_graph(src)) == []


def test_a_child_in_a_circle_with_a_sibling_through_its_parent_is_found(tmp_path: Path) -> None:
    src = _write(
        tmp_path,
        {
            "lib.rs": "mod fs;\n",
            "fs.rs": "mod walk;\nmod write;\npub use write::write_text_file;\npub struct Roots;\n",
            "fs/walk.rs": "use super::Roots;\n",
            "fs/write.rs": "use super::walk;\npub fn write_text_file() {}\n",
        },
    )
    assert _rust_cycles(src) == [["fs", "fs::walk", "fs::write"]]


def test_comments_strings_and_inline_test_modules_are_read_right(tmp_path: Path) -> None:
    src = _write(
        tmp_path,
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": (
                "// use crate::b::X;\n/* crate::b::Y /* nested */ crate::b::Z */\n"
                'const S: &str = "crate::b::W"; const R: &str = r#"use crate::b;"#;\n'
                "const C: char = '\"'; fn f<'a>(x: &'a str) {}\n"
                "pub(in crate::b) fn g() {}\n"
                "#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::b::T;\n}\n"
            ),
            "b.rs": "pub struct T;\nuse crate::a::f;\n",
        },
    )
    edges = graph.rust_graph(src)
    assert edges["a"] == set()
    assert edges["a::tests"] == {"a", "b"}
    assert _rust_cycles(src) == []


def test_a_lazy_python_import_circle_is_found(tmp_path: Path) -> None:
    package = _write(
        tmp_path / "pkg",
        {
            "__init__.py": "from ._a import A\n",
            "_a.py": "class A:\n    def b(self):\n        from ._b import B\n        return B\n",
            "_b.py": "def helper():\n    from pkg import _a\n    return _a\n",
            "_c.py": "from . import _b\n",
        },
    )
    edges = graph.python_graph(package)
    assert edges["pkg"] == {"pkg._a"}
    assert edges["pkg._a"] == {"pkg._b"}
    assert edges["pkg._b"] == {"pkg._a"}
    assert graph.cycles(edges) == [["pkg._a", "pkg._b"]]


def test_a_python_circle_through_a_package_reexport_is_found(tmp_path: Path) -> None:
    package = _write(
        tmp_path / "pkg",
        {
            "__init__.py": "from .model import Thing\n",
            "model/__init__.py": "from ._base import Thing\n",
            "model/_base.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from .. import _types\nclass Thing: ...\n",
            "_types.py": "from .model import Thing\n",
        },
    )
    edges = graph.python_graph(package)
    assert edges["pkg.model"] == {"pkg.model._base"}
    assert graph.cycles(edges) == [["pkg._types", "pkg.model", "pkg.model._base"]]
    # The import under TYPE_CHECKING never runs: no circle at run time.
    assert graph.cycles(graph.python_graph(package, runtime_only=True)) == []


def test_the_command_exits_1_on_a_circle_and_0_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(
        tmp_path / "crates" / "ring" / "src",
        {"lib.rs": "mod a;\nmod b;\n", "a.rs": "use crate::b;\n", "b.rs": "use crate::a;\n"},
    )
    _write(
        tmp_path / "crates" / "line" / "src",
        {"lib.rs": "mod a;\nmod b;\n", "a.rs": "use crate::b;\n", "b.rs": ""},
    )
    assert graph.main(["--root", str(tmp_path), "--crate", "line"]) == 0
    assert "a -> b" in capsys.readouterr().out
    assert graph.main(["--root", str(tmp_path), "--crate", "ring"]) == 1
    assert "CYCLE: a, b" in capsys.readouterr().out
