"""A node lost mid-turn (its raylet killed, Ray's child cleanup off): the tasks of its host end
as values, are retried on the other node's host, and none of its agents survives. The same
drill with cleanup on (and the raylet subreaper) is in test_subreaper.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="Ray has no wheel for this interpreter")

from .conftest import ray_cluster
from .kit import lose_a_node

CLEANUP_OFF = {"RAY_kill_child_processes_on_worker_exit": "false"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with ray_cluster(CLEANUP_OFF) as made:
        yield made


@pytest.mark.parametrize("pool", [None, {"min_idle": 2}], ids=["fresh", "pooled"])
def test_losing_a_node_mid_turn(cluster: Any, tmp_path: Path, pool: dict[str, int] | None) -> None:
    lose_a_node(cluster, tmp_path, pool)
