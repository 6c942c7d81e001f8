"""A node lost mid-turn (its raylet killed, Ray's child cleanup off): the tasks of its host end
as values, are retried on the other node's host, and none of its agents survives."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="Ray has no wheel for this interpreter")

from acp_fast import fleet

from .conftest import SLOTS_PER_NODE, ray_cluster, wait_gone
from .kit import DEATHS, spec

CLEANUP_OFF = {"RAY_kill_child_processes_on_worker_exit": "false"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with ray_cluster(CLEANUP_OFF) as made:
        yield made


@pytest.mark.parametrize("pool", [None, {"min_idle": 2}], ids=["fresh", "pooled"])
def test_losing_a_node_mid_turn(cluster: Any, tmp_path: Path, pool: dict[str, int] | None) -> None:
    if len(cluster.list_all_nodes()) < 2:  # the other case lost its second node: a new one
        cluster.add_node(num_cpus=1, resources={"acp_slots": SLOTS_PER_NODE})
        cluster.wait_for_nodes()

    async def main() -> None:
        f = fleet.Fleet(spec("--delay", "0.3"), hosts=2, agents_per_host=4, journal_dir=tmp_path,
                        pool=pool)  # fmt: skip
        async with f:
            tasks = [fleet.Task(f"n{i}", tmp_path, ["tell me a long story"]) for i in range(4)]
            running = asyncio.ensure_future(f.run(tasks, retry=fleet.Retry(attempts=2, on=DEATHS)))
            worker_node = cluster.list_all_nodes()[1]
            victim: dict[str, Any] = {}
            deadline = time.monotonic() + 60
            while not victim and time.monotonic() < deadline:
                for s in await f.stats():
                    ready = not pool or len(s["spare_pids"]) >= pool["min_idle"]
                    if s["node"] == worker_node.node_id and len(s["agent_pids"]) == 2 and ready:
                        victim = s
                await asyncio.sleep(0.05)
            assert victim, "no host on the second node ran its two agents"
            agents = list(victim["agent_pids"]) + list(victim["spare_pids"])
            cluster.remove_node(worker_node, allow_graceful=False)
            assert wait_gone([*agents, victim["pid"]], within=10.0) == []
            results = await asyncio.wait_for(running, 120)
        lost = [r for r in results if r.failures]
        assert lost and all(r.ok for r in results), [r.message for r in results if not r.ok]
        for r in lost:
            assert r.failures[0].error_type in DEATHS and r.failures[0].host == victim["host"]
            assert r.host != victim["host"]

    asyncio.run(main())
