"""Fleets on a real two-raylet Ray cluster, with Ray's own child cleanup off: what is proven
here (no agent outlives its host) is acp-fast's host-death guard, not Ray's."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="Ray has no wheel for this interpreter")

import acp_fast as acp
from acp_fast import fleet

from .conftest import ray_cluster, wait_gone
from .kit import (
    DYING_AGENT,
    end_session,
    extend_time_guard,
    journal_updates,
    kill_a_busy_host,
    processes_running,
    spec,
)

CLEANUP_OFF = {"RAY_kill_child_processes_on_worker_exit": "false"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    with ray_cluster(CLEANUP_OFF) as made:
        yield made


def max_overlap(spans: list[tuple[float, float]]) -> int:
    events = sorted([(b, 1) for b, _ in spans] + [(e, -1) for _, e in spans])
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def test_64_tasks_on_2_hosts_every_update_once_in_order(cluster: object, tmp_path: Path) -> None:
    async def main() -> None:
        f = fleet.Fleet(spec(), hosts=2, agents_per_host=8, journal_dir=tmp_path)
        async with f:
            tasks = [fleet.Task(f"t{i}", tmp_path, [f"hello {i}", "again"]) for i in range(64)]
            seen: dict[str, list[tuple[int, bytes]]] = {t.id: [] for t in tasks}

            async def consume(task_id: str) -> None:
                async for batch in f.stream(task_id):
                    assert batch.attempt == 1
                    seen[task_id].extend(batch.envelopes())

            running = asyncio.ensure_future(f.run(tasks, max_concurrent=12))
            consumers = [asyncio.ensure_future(consume(t.id)) for t in tasks]
            results = await asyncio.wait_for(running, 120)
            await asyncio.wait_for(asyncio.gather(*consumers), 30)
            stats = await f.stats()
        assert [r.id for r in results] == [t.id for t in tasks]
        assert all(r.ok and r.attempts == 1 for r in results), [r for r in results if not r.ok]
        assert {r.host for r in results} == {0, 1}
        for r, t in zip(results, tasks, strict=True):
            assert r.responses == (f"Hello! You said: {t.prompts[0]}.", "Hello! You said: again.")
            assert r.journal is not None and os.path.dirname(r.journal) == f.run_dir
            recorded = journal_updates(r.journal)
            assert len(recorded) == r.updates > 0
            # Exactly once, in order, byte for byte what the journal holds.
            assert seen[t.id] == recorded
        # Ray spread the two hosts over the two raylets.
        assert len({s["node"] for s in stats}) == 2
        # Admission: never more than 12 attempts at once across the hosts.
        spans = [span for s in stats for span in s["spans"]]
        assert len(spans) == 64 and max_overlap(spans) <= 12
        assert f.peak_running <= 12

    asyncio.run(main())


def test_resume_from_a_sequence_loses_and_duplicates_nothing(
    cluster: object, tmp_path: Path
) -> None:
    async def main() -> None:
        f = fleet.Fleet(spec("--flood-count", "3000"), hosts=1, agents_per_host=2,
                        journal_dir=tmp_path)  # fmt: skip
        async with f:
            running = asyncio.ensure_future(f.run([fleet.Task("flood", tmp_path, ["go"])]))
            first: list[tuple[int, bytes]] = []
            async for batch in f.stream("flood"):
                first.extend(batch.envelopes())
                break  # the consumer goes away after one batch
            resume_at = first[-1][0] + 1
            rest: list[tuple[int, bytes]] = []
            async for batch in f.stream("flood", from_seq=resume_at, attempt=1):
                rest.extend(batch.envelopes())
            (result,) = await running
            # After the task ended: the whole record again, in batches of at most 1 MiB.
            batches = [b async for b in f.stream("flood", from_seq=0)]
        assert result.ok
        recorded = journal_updates(result.journal or "")
        assert len(recorded) >= 3000
        assert first + rest == recorded
        assert b"".join(b.data for b in batches) == b"".join(e + b"\n" for _, e in recorded)
        assert all(len(b.data) <= (1 << 20) + 4096 for b in batches)
        # Coalesced: far fewer Ray objects than updates.
        assert len(batches) <= len(recorded) / 10

    asyncio.run(main())


def test_ray_kill_of_a_busy_host(cluster: object, tmp_path: Path) -> None:
    kill_a_busy_host("ray.kill", tmp_path)


def test_sigkill_of_a_busy_hosts_worker(cluster: object, tmp_path: Path) -> None:
    kill_a_busy_host("SIGKILL", tmp_path)


def test_close_mid_run_leaves_nothing(cluster: object, tmp_path: Path) -> None:
    async def main() -> None:
        f = fleet.Fleet(spec("--delay", "0.3"), hosts=2, agents_per_host=2, journal_dir=tmp_path)
        await f.start()
        # Six tasks for four slots: two wait for a slot when the fleet closes.
        tasks = [fleet.Task(f"c{i}", tmp_path, ["a long story please"]) for i in range(6)]
        running = asyncio.ensure_future(f.run(tasks))
        agents: list[int] = []
        hosts: list[int] = []
        deadline = time.monotonic() + 60
        while len(agents) < 4 and time.monotonic() < deadline:
            stats = await f.stats()
            agents = [pid for s in stats for pid in s["agent_pids"]]
            hosts = [s["pid"] for s in stats]
            await asyncio.sleep(0.05)
        assert len(agents) == 4
        await asyncio.wait_for(f.close(), 30)
        await f.close()  # idempotent
        results = await asyncio.wait_for(running, 30)
        assert all(not r.ok for r in results)  # ended as values, not hanging
        assert wait_gone(agents + hosts, within=10.0) == []
        with pytest.raises(RuntimeError, match="closed"):
            await f.start()

    asyncio.run(main())


def test_failures_are_values_and_retried_elsewhere(cluster: object, tmp_path: Path) -> None:
    async def main() -> None:
        # An agent that exits at once: every attempt fails to connect.
        broken = fleet.Fleet(
            acp.AgentSpec(sys.executable, ["-c", "import sys; sys.stderr.write('no\\x1b[2J')"]),
            hosts=2,
            agents_per_host=2,
            journal_dir=tmp_path,
        )
        async with broken:
            retry = fleet.Retry(attempts=3, on=("ConnectError",), backoff=0.01)
            (result,) = await asyncio.wait_for(
                broken.run([fleet.Task("b1", tmp_path, ["hi"])], retry=retry), 60
            )
            # Not in `on`: one attempt only.
            (once,) = await broken.run([fleet.Task("b2", tmp_path, ["hi"])])
        assert not result.ok and result.attempts == 3
        assert [f.error_type for f in result.failures] == ["ConnectError"] * 3
        hosts = [f.host for f in result.failures]
        assert hosts[0] != hosts[1] and hosts[1] != hosts[2]  # retried on the other host
        assert result.error_type == "ConnectError" and result.message
        assert "\x1b" not in result.message  # the agent's control bytes are not passed on
        assert len({f.journal for f in result.failures}) == 3  # one journal per attempt
        assert not once.ok and once.attempts == 1

    asyncio.run(main())


def test_cancelling_run_closes_its_agents(cluster: object, tmp_path: Path) -> None:
    async def main() -> None:
        # Turns of half a minute (5 s a chunk): only the cancel can end them within 10 s.
        f = fleet.Fleet(spec("--delay", "5"), hosts=1, agents_per_host=2, journal_dir=tmp_path)
        async with f:
            tasks = [fleet.Task(f"x{i}", tmp_path, ["a long story please"]) for i in range(2)]
            running = asyncio.ensure_future(f.run(tasks))
            agents: list[int] = []
            deadline = time.monotonic() + 60
            while len(agents) < 2 and time.monotonic() < deadline:
                agents = [pid for s in await f.stats() for pid in s["agent_pids"]]
                await asyncio.sleep(0.05)
            assert len(agents) == 2
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
            assert wait_gone(agents, within=10.0) == []  # while the fleet stays up
            assert (await f.stats())[0]["agent_pids"] == []

    asyncio.run(main())


def test_hosts_that_cannot_be_placed_fail_start_clearly(cluster: object, tmp_path: Path) -> None:
    async def main() -> None:
        # 20 slots on one node: no node offers that many (16 each), though the cluster does.
        f = fleet.Fleet(spec(), hosts=1, agents_per_host=20, journal_dir=tmp_path,
                        start_timeout=3.0)  # fmt: skip
        with pytest.raises(RuntimeError, match="acp_slots on one node"):
            await asyncio.wait_for(f.start(), 30)
        await f.close()

    asyncio.run(main())


def test_replay_agents_across_hosts_stream_the_recording(cluster: object, tmp_path: Path) -> None:
    # A demo conversation recorded by the fleet, then played back by 16 replay agents over 2
    # hosts: every stream carries the recorded updates, byte for byte, once, in order.
    async def main() -> None:
        recorder = fleet.Fleet(spec(), hosts=1, agents_per_host=1, journal_dir=tmp_path)
        async with recorder:
            (recorded,) = await recorder.run([fleet.Task("rec", tmp_path, ["hello", "again"])])
        assert recorded.ok and recorded.journal
        original = [envelope for _, envelope in journal_updates(recorded.journal)]
        replay = acp.AgentSpec(sys.executable, ["-m", "acp_fast.replay_agent", recorded.journal])
        f = fleet.Fleet(replay, hosts=2, agents_per_host=4, journal_dir=tmp_path)
        async with f:
            tasks = [fleet.Task(f"p{i}", tmp_path, ["hello", "again"]) for i in range(16)]
            seen: dict[str, list[bytes]] = {t.id: [] for t in tasks}

            async def consume(task_id: str) -> None:
                async for batch in f.stream(task_id):
                    seen[task_id] += [envelope for _, envelope in batch.envelopes()]

            consumers = [asyncio.ensure_future(consume(t.id)) for t in tasks]
            results = await asyncio.wait_for(f.run(tasks), 120)
            await asyncio.wait_for(asyncio.gather(*consumers), 30)
        assert all(r.ok for r in results), [r.message for r in results if not r.ok]
        assert {r.host for r in results} == {0, 1}
        for r in results:
            assert r.responses == recorded.responses
            assert seen[r.id] == original

    asyncio.run(main())


def test_an_agent_that_dies_mid_turn_is_retried_elsewhere(cluster: object, tmp_path: Path) -> None:
    # Agents that exit or are killed mid-turn (once: the retry's agent answers) end their
    # attempt as AgentDied and are retried on the other host; agents that break the protocol
    # alive are not called dead, so Retry(on=("AgentDied",)) leaves them be. Slots to spare,
    # so that each retry has room on the other host.
    once = tmp_path / "once"
    once.mkdir()
    retry = fleet.Retry(attempts=2, on=("AgentDied",))

    async def main() -> None:
        scripted = acp.AgentSpec(sys.executable, [DYING_AGENT, "--once", str(once)])
        f = fleet.Fleet(scripted, hosts=2, agents_per_host=4, journal_dir=tmp_path)
        async with f:
            tasks = [
                fleet.Task("exit", tmp_path, ["hi", "exit"]),
                fleet.Task("kill", tmp_path, ["kill"]),
                fleet.Task("garbage", tmp_path, ["garbage"]),
                fleet.Task("mute", tmp_path, ["mute"]),
            ]
            exited, killed, garbled, muted = await asyncio.wait_for(f.run(tasks, retry=retry), 120)
        for r, how in ((exited, "exited with status 5"), (killed, "was killed by signal 9")):
            assert r.ok and r.attempts == 2, r
            (died,) = r.failures
            assert died.error_type == "AgentDied" and how in died.message, died
            assert "output ended before the response to session/prompt" in died.message
            assert died.host != r.host  # retried on the other host
            # The failed attempt's journal is kept: an update a turn, the last one's sent
            # before the death.
            assert died.journal and len(journal_updates(died.journal)) == len(r.responses)
        for r in (garbled, muted):
            assert not r.ok and r.attempts == 1, r
            assert r.error_type == "AgentProtocolError", r
        assert "unexpected message" in (garbled.message or "")
        # Nothing is left running: not the live offenders, not the retries' agents.
        assert wait_gone(processes_running(str(once))) == []

    asyncio.run(main())


def test_a_demo_agent_killed_mid_turn_is_retried_elsewhere(cluster: object, tmp_path: Path) -> None:
    async def main() -> None:
        f = fleet.Fleet(spec("--delay", "0.3"), hosts=2, agents_per_host=1, journal_dir=tmp_path)
        async with f:
            running = asyncio.ensure_future(
                f.run([fleet.Task("k", tmp_path, ["a long story please"])],
                      retry=fleet.Retry(attempts=2, on=("AgentDied",)))
            )  # fmt: skip
            agents: list[int] = []
            deadline = time.monotonic() + 60
            while not agents and time.monotonic() < deadline:
                agents = [pid for s in await f.stats() for pid in s["agent_pids"]]
                await asyncio.sleep(0.05)
            assert len(agents) == 1
            await asyncio.sleep(0.5)  # into its turn
            os.kill(agents[0], signal.SIGKILL)
            (result,) = await asyncio.wait_for(running, 120)
            left = [pid for s in await f.stats() for pid in s["agent_pids"]]
        assert result.ok and result.attempts == 2, result
        (died,) = result.failures
        assert died.error_type == "AgentDied" and "killed by signal 9" in died.message, died
        assert died.host != result.host
        assert left == [] and wait_gone(agents) == []

    asyncio.run(main())


def test_a_fleet_starts_and_stops_its_own_local_ray(cluster: object, tmp_path: Path) -> None:
    # In a process of its own, with Ray's defaults (child cleanup on) and no RAY_ADDRESS,
    # while this module's cluster runs (its address is in Ray's temp directory, which a bare
    # ray.init() would join).
    here = Path(__file__).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env["PYTHONPATH"] = os.pathsep.join([str(here.parent), env.get("PYTHONPATH", "")])
    out = tmp_path / "report.json"
    extend_time_guard(120)  # two starts of a Ray, ~6 s each (~20 s on a loaded machine)
    child = subprocess.Popen(
        [sys.executable, str(here / "local_ray.py"), str(tmp_path), str(out)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        _, stderr = child.communicate(timeout=110)
        assert child.returncode == 0, stderr.decode(errors="replace")[-4000:]
        report = json.loads(out.read_text())
        assert report["initialized_before"] is False
        # A start that fails stops the Ray it started, and leaves nothing running.
        assert "did not all start" in report["failed_start"]
        assert report["initialized_after_failed_start"] is False
        assert report["left_after_failed_start"] == []
        # A Ray of its own: one node, offering the fleet's slots; the tasks ran and streamed.
        assert report["slots"] == 4 and report["nodes"] == 1
        assert report["ok"] == [True] * 4 and report["streamed"] == report["updates"] > 0
        assert len(report["agents"]) == 4 and len(report["hosts"]) == 2 and report["raylets"]
        started = set(report["started"])
        assert set(report["agents"] + report["hosts"] + report["raylets"]) <= started
        # close() shut it down: no agent, host, raylet or other process it started is left.
        assert report["initialized_after_close"] is False
        assert report["left_after_close"] == []
        assert wait_gone(started) == []
    finally:
        end_session(child.pid)  # whatever failed, nothing of it stays running
        child.wait()
