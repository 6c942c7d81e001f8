"""The clients and journals of these tests are collected before the next test counts the
process's descriptors (the fault suite does): a closed journal's writer keeps its file until
it is garbage, and a client that stopped on an error sits in reference cycles."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _collected() -> Iterator[None]:
    yield
    gc.collect()
