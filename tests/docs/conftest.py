"""Reports the docs examples that are marked not to run (they need a real agent)."""

from __future__ import annotations

from typing import Any

from .blocks import examples


def pytest_terminal_summary(terminalreporter: Any) -> None:
    marked = [block for block in examples() if block.not_run is not None]
    if not marked:
        return
    terminalreporter.write_sep("-", f"docs examples not run: {len(marked)}")
    for block in marked:
        terminalreporter.write_line(f"{block.where}: {block.not_run}")
