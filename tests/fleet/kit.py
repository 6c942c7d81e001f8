"""What the fleet tests share: the demo agent's spec, a journal's updates, the kill drill."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import acp_fast as acp
from acp_fast import fleet, journal

from .conftest import alive, ray, wait_gone

DEATHS = ("ActorDiedError", "ActorUnavailableError")


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
