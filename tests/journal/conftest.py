from __future__ import annotations

import pytest


@pytest.fixture(params=["blocking", "async"])
def client_driver(request: pytest.FixtureRequest) -> str:
    """Journals record through `Client` and `AsyncClient` (tests/aio_sync.py) alike."""
    return str(request.param)
