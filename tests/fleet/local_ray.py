"""Run by test_fleet.py (test_a_fleet_starts_and_stops_its_own_local_ray) in a process of its
own, with no RAY_ADDRESS: Ray is one per process, and the test's own has joined a Cluster. A
`Fleet` that finds no Ray starts a local one with the slots it needs and shuts it down on
`close()`; a start that fails leaves none behind. Writes what it saw, as JSON, to argv[2]."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import acp_fast as acp
import procinfo
import ray
from acp_fast import fleet


def descendants() -> list[int]:
    """The live processes under this one (Ray's, the hosts, their agents and guards)."""
    table = procinfo.process_table()
    children: dict[int, list[int]] = {}
    for pid, (_, parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found: list[int] = []
    todo = [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return [pid for pid in found if procinfo.process_state(pid) not in (None, "Z")]


def left(pids: list[int], within: float = 10.0) -> list[str]:
    """What of `pids` still runs after `within` seconds (with its command line)."""
    deadline = time.monotonic() + within
    while True:
        alive = [p for p in pids if procinfo.process_state(p) not in (None, "Z")]
        if not alive or time.monotonic() > deadline:
            return [f"{p} {procinfo.command_line(p)[:200]}" for p in alive]
        time.sleep(0.05)


async def main(journal_dir: str) -> dict[str, Any]:
    command, args = acp.demo_agent_command()
    report: dict[str, Any] = {"initialized_before": ray.is_initialized()}

    # A start that fails (no host can answer within a millisecond) stops the Ray it started.
    failing = fleet.Fleet(acp.AgentSpec(command, args), hosts=1, agents_per_host=1,
                          journal_dir=journal_dir, start_timeout=0.001)  # fmt: skip
    try:
        await failing.start()
        report["failed_start"] = None
    except RuntimeError as error:
        report["failed_start"] = str(error)
    report["initialized_after_failed_start"] = ray.is_initialized()
    report["left_after_failed_start"] = left(descendants())

    f = fleet.Fleet(acp.AgentSpec(command, [*args, "--delay", "0.2"]), hosts=2,
                    agents_per_host=2, journal_dir=journal_dir)  # fmt: skip
    await f.start()
    report["slots"] = ray.cluster_resources().get("acp_slots")  # type: ignore[no-untyped-call]
    report["nodes"] = len(ray.nodes())  # type: ignore[no-untyped-call]
    tasks = [fleet.Task(f"l{i}", journal_dir, ["hello", "again"]) for i in range(4)]
    running = asyncio.ensure_future(f.run(tasks))
    streamed = asyncio.ensure_future(_count(f, "l0"))
    agents: list[int] = []
    deadline = time.monotonic() + 60
    while len(agents) < 4 and time.monotonic() < deadline:
        stats = await f.stats()
        agents = [pid for s in stats for pid in s["agent_pids"]]
        await asyncio.sleep(0.02)
    report["agents"] = agents
    report["hosts"] = [s["pid"] for s in stats]
    started = descendants()  # Ray's processes, the hosts, the agents, their guards
    report["raylets"] = [p for p in started if "/raylet" in procinfo.command_line(p).split()[0]]
    results = await asyncio.wait_for(running, 120)
    report["ok"] = [r.ok for r in results]
    report["streamed"] = await asyncio.wait_for(streamed, 30)
    report["updates"] = results[0].updates
    await f.close()
    report["initialized_after_close"] = ray.is_initialized()
    report["started"] = started
    report["left_after_close"] = left(started + descendants())
    return report


async def _count(f: fleet.Fleet, task_id: str) -> int:
    return sum([len(batch) async for batch in f.stream(task_id)])


if __name__ == "__main__":
    outcome = asyncio.run(main(sys.argv[1]))
    with open(sys.argv[2], "w") as out:
        json.dump(outcome, out)
