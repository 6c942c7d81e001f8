"""Warm pools of agents (fleet.md §1): `Pool` for the blocking `Client`, `AsyncPool` for
asyncio. A spare is a started client (own process group, host-death guard) through
``initialize`` (and ``authenticate`` when configured); ``session/new`` runs at claim time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._common import PoolKey, PoolStats
from ._relay import SpareOverflow
from ._sync import Pool

if TYPE_CHECKING:
    from ._async import AsyncPool


def __getattr__(name: str) -> object:
    # asyncio is loaded only by the asyncio pool (as acp_fast loads AsyncClient lazily).
    if name == "AsyncPool":
        from ._async import AsyncPool

        globals()[name] = AsyncPool
        return AsyncPool
    raise AttributeError(f"module 'acp_fast.pool' has no attribute {name!r}")


__all__ = ["AsyncPool", "Pool", "PoolKey", "PoolStats", "SpareOverflow"]
