"""The API reference (docs/reference/*.md) names every public class and function.

mkdocstrings renders what a page names with a ``::: dotted.name`` line; a public name no page
names would be missing from the site without any warning, so this test lists them.
"""

from __future__ import annotations

import inspect
import re

import acp_fast
from acp_fast import journal

from .blocks import ROOT

_DIRECTIVE = re.compile(r"^:::\s*(\S+)", re.MULTILINE)
_MEMBER = re.compile(r"^\s+-\s+(\w+)\s*$", re.MULTILINE)


def _documented() -> set[str]:
    """Every dotted name a reference page renders (a `:::` line, or a listed member of one)."""
    names: set[str] = set()
    for page in (ROOT / "docs" / "reference").glob("*.md"):
        text = page.read_text(encoding="utf-8")
        names.update(_DIRECTIVE.findall(text))
        for directive in re.split(r"(?=^:::)", text, flags=re.MULTILINE):
            found = _DIRECTIVE.match(directive)
            if found and "members:" in directive:
                names.update(f"{found[1]}.{member}" for member in _MEMBER.findall(directive))
    return names


def test_every_public_name_is_in_the_reference() -> None:
    documented = _documented()
    wanted = [f"acp_fast.{name}" for name in acp_fast.__all__ if name != "__version__"]
    # ContentBlock is a type alias (a union of the block classes, each documented).
    wanted.remove("acp_fast.ContentBlock")
    wanted += [
        f"acp_fast.journal.{name}"
        for name in journal.__all__
        if inspect.isclass(getattr(journal, name)) or inspect.isfunction(getattr(journal, name))
    ]
    missing = [name for name in wanted if name not in documented]
    assert not missing, (
        "public but not in the API reference; add a `::: NAME` line to a page of "
        f"docs/reference/ (or a member of a `:::` with `members:`): {missing}"
    )


def test_the_reference_names_only_what_exists() -> None:
    """A `:::` line for a name that does not exist fails `mkdocs build`; say which, here."""
    import importlib

    for name in sorted(_documented()):
        module_name, _, attribute = name.rpartition(".")
        try:
            module = importlib.import_module(name)
            continue
        except ImportError:
            module = importlib.import_module(module_name)
        assert hasattr(module, attribute), f"docs/reference names {name}, which does not exist"
