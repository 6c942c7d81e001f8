"""Fleets with Ray's own child cleanup on and its raylet subreaper on: the raylet sets
SIGCHLD to SIG_IGN and its workers inherit it, so the kernel would reap the host's agents by
itself and their exit statuses would be lost. The host puts the default back; agents still
end, are reaped (no zombie left behind), report their real exit status, and never outlive a
host that dies: killed (`ray.kill`, SIGKILL of its worker) or lost with its node. The same
drills with cleanup off are in test_fleet.py and test_node_loss.py."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import acp_fast as acp
import procinfo
import pytest

pytest.importorskip("ray", reason="Ray has no wheel for this interpreter")

from acp_fast import fleet

from .conftest import ray_cluster, wait_gone
from .kit import kill_a_busy_host, lose_a_node, spec

SUBREAPER = {
    "RAY_kill_child_processes_on_worker_exit": "true",
    "RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper": "true",
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    with ray_cluster(SUBREAPER) as made:
        yield made


def _sigchld_ignored(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("SigIgn:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGCHLD - 1)))
    raise AssertionError("no SigIgn line")


@pytest.mark.parametrize("pool", [None, {"min_idle": 2}], ids=["fresh", "pooled"])
def test_agents_end_and_are_reaped_under_the_subreaper(
    cluster: object, tmp_path: Path, pool: dict[str, int] | None
) -> None:
    async def main() -> None:
        f = fleet.Fleet(spec(), hosts=2, agents_per_host=4, journal_dir=tmp_path, pool=pool)
        async with f:
            stats = await f.stats()
            hosts = [s["pid"] for s in stats]
            if sys.platform == "linux":
                # The raylet ignores SIGCHLD (the subreaper option is in effect); the hosts,
                # which inherit that, have put the default back.
                assert _sigchld_ignored(_raylet_pid())
                assert not any(_sigchld_ignored(pid) for pid in hosts)
            tasks = [fleet.Task(f"r{i}", tmp_path, ["hi", "there"]) for i in range(8)]
            results = await asyncio.wait_for(f.run(tasks), 60)
            assert all(r.ok for r in results), [r.message for r in results if not r.ok]
            spares = {pid for s in await f.stats() for pid in s["spare_pids"]}
            # Every agent has ended and none is left a zombie under its host.
            table = procinfo.process_table()
            left = [
                (child, state, procinfo.command_line(child))
                for child, (state, parent, _, _) in table.items()
                if parent in hosts
            ]
            # What is left under a host is the client's host-death guard, alive and well (and
            # a pool's idle spares).
            assert [e for e in left if "_serve_guard" not in e[2] and e[0] not in spares] == []
            assert all(state != "Z" for _, state, _ in left)
            guards = [child for child, _, _ in left]
        # Closed: the hosts are gone, and their guards with them.
        assert wait_gone(hosts + guards, within=10.0) == []

    asyncio.run(main())


@pytest.mark.parametrize("how", ["ray.kill", "SIGKILL"])
def test_killing_a_busy_host_with_the_subreaper(cluster: object, tmp_path: Path, how: str) -> None:
    kill_a_busy_host(how, tmp_path)


def test_sigkill_of_a_busy_pooled_host_with_the_subreaper(cluster: object, tmp_path: Path) -> None:
    kill_a_busy_host("SIGKILL", tmp_path, pool={"min_idle": 2, "max_idle": 2})


def _raylet_pid() -> int:
    for pid, (_, _, _, _) in procinfo.process_table().items():
        if "/raylet" in procinfo.command_line(pid).split(" ", 1)[0]:
            return pid
    raise AssertionError("no raylet process")


def test_an_agents_exit_status_survives_the_subreaper(cluster: object, tmp_path: Path) -> None:
    # With SIGCHLD ignored the kernel reaps the agent and its status is lost; the host puts
    # the default back, so the failure says what really happened.
    async def main() -> None:
        agent = acp.AgentSpec(sys.executable, ["-c", "import sys; sys.exit(3)"])
        f = fleet.Fleet(agent, hosts=1, agents_per_host=1, journal_dir=tmp_path)
        async with f:
            (result,) = await asyncio.wait_for(f.run([fleet.Task("e", tmp_path, ["hi"])]), 60)
        assert result.error_type == "ConnectError"
        assert "exited with status 3" in (result.message or "")

    asyncio.run(main())


# Last in the module: it removes the second node (and adds one back for its next case).
@pytest.mark.parametrize("pool", [None, {"min_idle": 2}], ids=["fresh", "pooled"])
def test_losing_a_node_mid_turn_with_the_subreaper(
    cluster: Any, tmp_path: Path, pool: dict[str, int] | None
) -> None:
    lose_a_node(cluster, tmp_path, pool)
