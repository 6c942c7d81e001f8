"""Fixtures of the fault suite (a package, so this module does not shadow tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .kit import Watch


@pytest.fixture(params=["blocking", "async"])
def client_driver(request: pytest.FixtureRequest) -> str:
    """Every fault runs against `Client` and against `AsyncClient` (see tests/aio_sync.py)."""
    return str(request.param)


@pytest.fixture
def fault_protocol() -> str:
    """The ACP version of the watch's clients: v1; a module whose faults both versions share
    overrides it with the `protocol` fixture (its shell agents then use `watch.wire`)."""
    return "v1"


@pytest.fixture
def watch(tmp_path: Path, client_driver: str, fault_protocol: str) -> Iterator[Watch]:
    """The test's clients and every process their agents start; see `kit.Watch`."""
    guard = Watch(tmp_path, client_driver, fault_protocol)
    try:
        yield guard
    finally:
        guard.cleanup()
