"""What the fleet tests share: the demo agent's spec, a journal's updates, the drills (a busy
host killed, a node lost), run by the modules of Ray's child cleanup off and on."""

from __future__ import annotations

import asyncio
import faulthandler
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import acp_fast as acp
import procinfo
from acp_fast import fleet, journal

from .conftest import SLOTS_PER_NODE, alive, ray, wait_gone

DEATHS = ("ActorDiedError", "ActorUnavailableError")

#: A scripted agent that dies mid-turn, or breaks the protocol alive, as its prompt says.
DYING_AGENT = str(Path(__file__).with_name("dying_agent.py"))


def extend_time_guard(seconds: int) -> None:
    """For the one case that starts a Ray of its own (twice) in a subprocess: re-arm the alarm
    and the watchdog of tests/conftest.py past its 30 s (its teardown disarms both)."""
    signal.alarm(seconds)
    faulthandler.dump_traceback_later(seconds + 30, exit=True, file=sys.__stderr__)


def end_session(leader: int) -> None:
    """SIGKILLs every process of the session `leader` began (a subprocess started with
    ``start_new_session``: Ray's processes stay in it), so a failed test leaves none."""
    for pid, (_, _, _, session) in procinfo.process_table().items():
        if session == leader:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def processes_running(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (e.g. a test's own tmp path)."""
    return [
        pid
        for pid, (state, _, _, _) in procinfo.process_table().items()
        if state != "Z" and marker in procinfo.command_line(pid)
    ]


def spec(*extra: str) -> acp.AgentSpec:
    command, args = acp.demo_agent_command()
    return acp.AgentSpec(command, [*args, *extra])


def journal_updates(path: str) -> list[tuple[int, bytes]]:
    """(sequence, envelope) of every update the attempt's journal recorded."""
    return [
        (r.update_sequence, r.envelope.encode())
        for r in journal.read(path)
        if r.kind == journal.RecordKind.UPDATE
    ]


def kill_a_busy_host(how: str, tmp_path: Path, pool: dict[str, int] | None = None) -> None:
    """Kills host 0 mid-turn (`ray.kill` or SIGKILL of its worker): neither its agents nor,
    with a `pool`, its idle spares survive it; its tasks are retried on host 1."""

    async def main() -> None:
        # Slow turns (0.3 s per chunk), so the kill lands mid-turn.
        restarts = 0 if how == "ray.kill" else 1
        f = fleet.Fleet(
            spec("--delay", "0.3"),
            hosts=2,
            agents_per_host=4,
            journal_dir=tmp_path,
            max_restarts=restarts,
            pool=pool,
        )
        async with f:
            tasks = [fleet.Task(f"k{i}", tmp_path, ["tell me a long story"]) for i in range(4)]
            running = asyncio.ensure_future(f.run(tasks, retry=fleet.Retry(attempts=2, on=DEATHS)))
            seen: dict[tuple[str, int], list[tuple[int, bytes]]] = {}

            async def consume(task_id: str) -> None:
                # One stream per task, following it across attempts.
                async for batch in f.stream(task_id):
                    seen.setdefault((task_id, batch.attempt), []).extend(batch.envelopes())

            consumers = [asyncio.ensure_future(consume(t.id)) for t in tasks]
            victim: dict[str, object] = {}
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                stats = {s["host"]: s for s in await f.stats()}
                # Both of host 0's attempts under way (least-loaded: two tasks on each host).
                host = stats.get(0, {})
                spares_ready = not pool or len(host.get("spare_pids", ())) >= pool["min_idle"]
                if len(host.get("agent_pids", ())) == 2 and spares_ready:
                    victim = stats[0]
                    break
                await asyncio.sleep(0.05)
            agents = list(victim["agent_pids"])  # type: ignore[call-overload]
            agents += list(victim["spare_pids"])  # type: ignore[call-overload]
            assert agents and all(alive(pid) for pid in agents)
            if how == "ray.kill":
                ray.kill(f.actor(0), no_restart=True)
            else:
                os.kill(int(victim["pid"]), signal.SIGKILL)  # type: ignore[call-overload]
            # No agent of the dead host survives it (the client's host-death guard).
            assert wait_gone(agents, within=10.0) == []
            results = await asyncio.wait_for(running, 120)
            await asyncio.wait_for(asyncio.gather(*consumers), 30)
        retried = [r for r in results if r.failures]
        assert retried, "no task was running on the killed host"
        for r in results:
            assert r.ok, (r.failures[-1].error_type, r.failures[-1].message)
        for r in retried:
            (failure,) = r.failures
            assert failure.error_type in DEATHS, failure
            assert failure.host == 0 and r.attempts == 2 and r.host == 1, r
            # The failed attempt's journal is kept and opens cleanly: a gap-free prefix of what
            # was recorded (a host killed with SIGKILL may not have written the last batch).
            assert failure.journal is not None and os.path.exists(failure.journal), failure
            numbers = [record.number for record in journal.read(failure.journal)]
            assert numbers == list(range(1, len(numbers) + 1)), numbers
            # The stream went on with the retry: all of attempt 2, as its journal holds it.
            assert seen.get((r.id, 2)) == journal_updates(r.journal or ""), (r, sorted(seen))
            first = seen.get((r.id, 1), [])
            # Both are prefixes of the same updates: the stream may be ahead of the journal's
            # file (a batch not yet written when the host was killed), or behind it.
            kept = journal_updates(failure.journal)
            shorter, longer = sorted((first, kept), key=len)
            assert shorter == longer[: len(shorter)], "attempt 1: stream and journal disagree"
        for r in results:
            if not r.failures:
                assert set(seen) & {(r.id, 2)} == set(), r
                assert seen.get((r.id, 1)) == journal_updates(r.journal or ""), (r, sorted(seen))

    asyncio.run(main())


def lose_a_node(cluster: Any, tmp_path: Path, pool: dict[str, int] | None) -> None:
    """Removes the second raylet without grace while its host runs two turns: the host, its
    agents and (with a `pool`) its spares are gone within 10 s; its tasks end as values and
    are retried on the other node's host."""
    if len(cluster.list_all_nodes()) < 2:  # an earlier drill lost the second node: a new one
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
