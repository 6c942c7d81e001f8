"""Fleets with warm spares (``pool=``) on a real two-raylet Ray cluster, Ray's child cleanup off:
tasks claim started agents, each attempt's journal is attached at the claim, every update still
reaches the stream once and in order, and no spare outlives its host or the fleet."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="Ray has no wheel for this interpreter")

import acp_fast as acp
from acp_fast import fleet, journal

from .conftest import ray_cluster, wait_gone
from .kit import DEATHS, journal_updates, spec

CLEANUP_OFF = {"RAY_kill_child_processes_on_worker_exit": "false"}
SLOW_AGENT = str(Path(__file__).parents[1] / "pool" / "slow_agent.py")


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    with ray_cluster(CLEANUP_OFF) as made:
        yield made


def sent_methods(path: str) -> list[str]:
    lines = [json.loads(r.envelope) for r in journal.read(path)
             if r.kind == journal.RecordKind.SENT]  # fmt: skip
    return [line.get("method") or "answer" for line in lines]


async def until(f: fleet.Fleet, check: Any, within: float = 60.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        stats = await f.stats()
        if check(stats):
            return stats
        await asyncio.sleep(0.05)
    raise AssertionError(f"not reached within {within} s: {stats}")


def test_tasks_claim_warm_agents_and_stream_every_update_once(
    cluster: object, tmp_path: Path
) -> None:
    async def main() -> None:
        f = fleet.Fleet(spec(), hosts=2, agents_per_host=4, journal_dir=tmp_path,
                        pool={"min_idle": 2, "max_idle": 2})  # fmt: skip
        async with f:
            # start() waited for each host's spares.
            ready = await f.stats()
            assert all(len(s["spare_pids"]) == 2 for s in ready), ready
            tasks = [fleet.Task(f"w{i}", tmp_path, [f"hello {i}", "again"]) for i in range(16)]
            seen: dict[str, list[tuple[int, bytes]]] = {t.id: [] for t in tasks}

            async def consume(task_id: str) -> None:
                async for batch in f.stream(task_id):
                    seen[task_id].extend(batch.envelopes())

            consumers = [asyncio.ensure_future(consume(t.id)) for t in tasks]
            results = await asyncio.wait_for(f.run(tasks, max_concurrent=4), 120)
            await asyncio.wait_for(asyncio.gather(*consumers), 30)
            stats = await f.stats()
        assert all(r.ok for r in results), [r.message for r in results if not r.ok]
        pools = [s["pool"] for s in stats]
        claims = sum(p["claims"] for p in pools)
        hits = sum(p["hits"] for p in pools)
        misses = sum(p["misses"] for p in pools)
        assert claims == len(tasks)
        # Claims are used: at least each host's first spares; fewer cold claims than tasks.
        assert hits >= 4 and misses < len(tasks), pools
        for r, t in zip(results, tasks, strict=True):
            assert r.responses == (f"Hello! You said: {t.prompts[0]}.", "Hello! You said: again.")
            assert r.journal is not None
            # The journal of a claimed spare reads as a fresh agent's: the handshake first.
            assert sent_methods(r.journal)[:3] == ["initialize", "session/new", "session/prompt"]
            recorded = journal_updates(r.journal)
            assert len(recorded) == r.updates > 0
            assert seen[t.id] == recorded  # exactly once, in order, byte for byte

    asyncio.run(main())


def test_reused_agents_need_fewer_spawns_than_tasks(cluster: object, tmp_path: Path) -> None:
    # An agent that advertises session/close, with reuse: one agent serves task after task.
    agent = acp.AgentSpec(sys.executable, [SLOW_AGENT, "--close"])

    async def main() -> None:
        f = fleet.Fleet(agent, hosts=1, agents_per_host=2, journal_dir=tmp_path,
                        pool={"min_idle": 1, "max_idle": 2, "reuse": True})  # fmt: skip
        async with f:
            tasks = [fleet.Task(f"r{i}", tmp_path, ["hi"]) for i in range(12)]
            results = await asyncio.wait_for(f.run(tasks, max_concurrent=2), 120)
            (stats,) = await f.stats()
        assert all(r.ok and r.responses == ("ok",) for r in results)
        assert stats["pool"]["started"] < len(tasks), stats["pool"]
        for r in results:
            methods = sent_methods(r.journal or "")
            # Each task's journal holds its own session only (a reused agent's handshake was
            # another task's).
            assert methods.count("session/new") == 1 and methods.count("session/prompt") == 1
            assert len(journal_updates(r.journal or "")) == 1

    asyncio.run(main())


def test_a_killed_host_leaves_no_spare_and_close_leaves_nothing(
    cluster: object, tmp_path: Path
) -> None:
    async def main() -> None:
        f = fleet.Fleet(spec("--delay", "0.3"), hosts=2, agents_per_host=2, journal_dir=tmp_path,
                        max_restarts=1, pool={"min_idle": 2, "max_idle": 2})  # fmt: skip
        async with f:
            tasks = [fleet.Task(f"s{i}", tmp_path, ["tell me a long story"]) for i in range(2)]
            running = asyncio.ensure_future(f.run(tasks, retry=fleet.Retry(attempts=2, on=DEATHS)))
            # One task on each host, and each host's two spares ready again.
            stats = await until(f, lambda ss: len(ss) == 2 and all(
                len(s["agent_pids"]) == 1 and len(s["spare_pids"]) == 2 for s in ss))  # fmt: skip
            victim = next(s for s in stats if s["host"] == 0)
            doomed = [*victim["agent_pids"], *victim["spare_pids"]]
            os.kill(victim["pid"], signal.SIGKILL)
            # Neither its running agent nor its idle spares survive it.
            assert wait_gone(doomed, within=10.0) == []
            results = await asyncio.wait_for(running, 120)
            assert all(r.ok for r in results), [r.message for r in results if not r.ok]
            assert any(r.failures and r.failures[0].error_type in DEATHS for r in results)
            # Ray restarted the killed host; the fleet warmed its pool again.
            after = await until(f, lambda ss: len(ss) == 2 and all(
                len(s["spare_pids"]) == 2 for s in ss))  # fmt: skip
            assert next(s for s in after if s["host"] == 0)["pid"] != victim["pid"]
            survivors = [pid for s in after for pid in (*s["agent_pids"], *s["spare_pids"])]
            survivors += [s["pid"] for s in after]
        assert wait_gone(survivors, within=10.0) == []

    asyncio.run(main())


def test_pool_options_are_checked_where_the_fleet_is_made(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="may not set max_total"):
        fleet.Fleet(spec(), journal_dir=tmp_path, pool={"max_total": 3})
    with pytest.raises(ValueError, match="may not set client_options"):
        fleet.Fleet(spec(), journal_dir=tmp_path, pool={"client_options": {}})
    with pytest.raises(ValueError, match="min_idle <= max_idle"):
        fleet.Fleet(spec(), journal_dir=tmp_path, pool={"min_idle": 5, "max_idle": 2})
    with pytest.raises(TypeError, match="mapping"):
        fleet.Fleet(spec(), journal_dir=tmp_path, pool=2)  # type: ignore[arg-type]
    made = fleet.Fleet(spec(), journal_dir=tmp_path, pool={"min_idle": 1})
    assert made.pool == {"min_idle": 1, "max_idle": 4}


def test_spares_that_cannot_start_are_failures_as_values(cluster: object, tmp_path: Path) -> None:
    # An agent that exits at once: start() does not hang on the spares, and each attempt ends
    # with the start error as its value (not a hang, not a raise).
    broken = acp.AgentSpec(sys.executable, ["-c", "import sys; sys.stderr.write('no\\x1b[2J')"])

    async def main() -> None:
        f = fleet.Fleet(broken, hosts=1, agents_per_host=2, journal_dir=tmp_path,
                        pool={"min_idle": 1})  # fmt: skip
        async with f:
            await asyncio.wait_for(f.start(), 60)
            (result,) = await asyncio.wait_for(f.run([fleet.Task("b", tmp_path, ["hi"])]), 60)
        assert not result.ok and result.error_type == "ConnectError", result
        assert result.message and "\x1b" not in result.message

    asyncio.run(main())


def test_cancelling_while_an_attempt_waits_for_its_claim_closes_the_agent_claimed_later(
    cluster: object, tmp_path: Path
) -> None:
    # Agents that take 3 s to start and then tell a 30 s story: run() is cancelled while the
    # attempt waits for its spare. The agent it is handed later is closed at once, not after
    # the story.
    slow_start = (
        "import os, sys, time; time.sleep(3); "
        "os.execv(sys.executable, [sys.executable, '-m', 'acp_fast.demo_agent', '--delay', '5'])"
    )
    agent = acp.AgentSpec(sys.executable, ["-c", slow_start])

    async def main() -> None:
        f = fleet.Fleet(agent, hosts=1, agents_per_host=1, journal_dir=tmp_path,
                        pool={"min_idle": 0, "max_idle": 1, "claim_timeout": 30.0})  # fmt: skip
        async with f:
            running = asyncio.ensure_future(f.run([fleet.Task("late", tmp_path, ["a story"])]))
            await until(f, lambda ss: ss[0]["pool"]["starting"] == 1)  # the claim is waiting
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
            # Claimed about 3 s after the start began, closed then: nothing left by 15 s.
            (host,) = await until(f, lambda ss: ss[0]["pool"]["started"] == 1 and ss[0][
                "running"] == 0, within=15.0)  # fmt: skip
            assert host["pool"]["claimed"] == 0 and not host["agent_pids"]

    asyncio.run(main())


def test_a_missing_cwd_fails_as_without_a_pool(cluster: object, tmp_path: Path) -> None:
    # session/new takes any path: a warm agent would work in a directory that does not exist.
    # The attempt fails as a fresh agent's spawn does, with FileNotFoundError naming it.
    async def main() -> None:
        for pool in (None, {"min_idle": 1}):
            f = fleet.Fleet(spec(), hosts=1, agents_per_host=1, journal_dir=tmp_path, pool=pool)
            async with f:
                missing = tmp_path / "nowhere"
                (result,) = await f.run([fleet.Task(f"m{bool(pool)}", missing, ["hi"])])
            assert not result.ok and result.error_type == "FileNotFoundError", result
            assert str(missing) in (result.message or "")

    asyncio.run(main())
