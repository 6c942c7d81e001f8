"""Fixtures of the fault suite (a package, so this module does not shadow tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .kit import Watch


@pytest.fixture
def watch(tmp_path: Path) -> Iterator[Watch]:
    """The test's clients and every process their agents start; see `kit.Watch`."""
    guard = Watch(tmp_path)
    try:
        yield guard
    finally:
        guard.cleanup()
