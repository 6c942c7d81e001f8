"""`acp_fast.AsyncPool`: the same rules as `Pool` on asyncio (fleet.md §1)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

import acp_fast as acp
import pytest
from conftest import is_dead, wait_dead

from tests.pool.kit import DEMO, options, slow_args

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="needs Linux (/proc)")


def demo(**settings: object) -> acp.AsyncPool:
    return acp.AsyncPool(sys.executable, args=DEMO, client_options=options(), **settings)  # type: ignore[arg-type]


async def until(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def test_a_burst_on_a_warm_pool_is_served_by_spares() -> None:
    async def main() -> None:
        async with demo(min_idle=6, max_idle=6, max_total=6) as pool:
            await pool.start(wait=True)
            clients = await asyncio.gather(*(pool.claim() for _ in range(6)))
            stats = pool.stats()
            assert (stats.claims, stats.hits, stats.misses) == (6, 6, 0)
            assert len({c.pid for c in clients}) == 6
            session = await clients[0].new_session()
            assert (await session.prompt("hi")).response == "Hello! You said: hi."
            for client in clients:
                pool.release(client)

    asyncio.run(main())


def test_sessions_refill_and_close_leave_nothing(tmp_path: object) -> None:
    pids: list[int] = []

    async def main() -> None:
        pool = demo(min_idle=2, max_idle=2, max_total=5)
        async with pool:
            await pool.start(wait=True)
            async with pool.session(cwd=str(tmp_path)) as session:
                assert session.cwd == str(tmp_path)
                assert (await session.prompt("hi")).stop_reason == "end_turn"
                held = session._client.pid
            assert held is not None and wait_dead(held, 5.0)  # not reused by default
            assert await until(lambda: pool.stats().idle == 2, 20.0), pool.stats()
            kept = await pool.claim()
            assert await until(lambda: pool.stats().idle == 2, 20.0), pool.stats()
            pids.extend(c.pid for c in pool._state.owned if c.pid is not None)
            assert kept.pid in pids and len(pids) == 3
        pool.close()  # idempotent

    asyncio.run(main())
    for pid in pids:
        assert wait_dead(pid, 5.0), f"agent {pid} outlived close()"


def test_a_dead_spare_is_evicted_at_claim() -> None:
    async def main() -> None:
        async with demo(min_idle=1, max_idle=1, max_total=3, claim_timeout=10.0) as pool:
            await pool.start(wait=True)
            spare = pool._state.idle[0].client
            pid = spare.pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            assert await until(lambda: is_dead(pid), 5.0)
            await asyncio.sleep(0.05)  # the loop sees the exit
            client = await pool.claim()
            assert client is not spare and pool.stats().evicted >= 1
            session = await client.new_session()
            assert (await session.prompt("x")).stop_reason == "end_turn"
            pool.release(client)

    asyncio.run(main())


def test_a_spawn_failure_reaches_a_claim_with_nothing_else() -> None:
    async def main() -> None:
        async with acp.AsyncPool(
            sys.executable,
            args=slow_args("--exit-at-init"),
            client_options=options(),
            min_idle=1,
            claim_timeout=30.0,
        ) as pool:
            began = time.monotonic()
            with pytest.raises(acp.ConnectError):
                await pool.claim()
            assert time.monotonic() - began < 10.0
            assert pool.stats().failed >= 1
        async with acp.AsyncPool("/nonexistent/agent", client_options=options()) as missing:
            with pytest.raises(FileNotFoundError):
                await missing.claim()

    asyncio.run(main())


def test_claim_timeout_falls_back_to_a_cold_start() -> None:
    async def main() -> None:
        async with acp.AsyncPool(
            sys.executable,
            args=slow_args("--init-delay", "1"),
            client_options=options(),
            min_idle=0,
            max_idle=1,
            claim_timeout=0.05,
        ) as pool:
            client = await pool.claim()
            assert (pool.stats().hits, pool.stats().misses) == (0, 1)
            pool.release(client)

    asyncio.run(main())


def test_max_total_bounds_claims() -> None:
    async def main() -> None:
        async with demo(min_idle=1, max_idle=1, max_total=1) as pool:
            held = await pool.claim()
            with pytest.raises(TimeoutError, match="max_total=1"):
                await pool.claim(timeout=0.3)
            pool.release(held)
            pool.release(await pool.claim(timeout=20.0))

    asyncio.run(main())


def test_reuse_only_when_the_agent_closes_sessions() -> None:
    async def main() -> None:
        async with acp.AsyncPool(
            sys.executable,
            args=slow_args("--close"),
            client_options=options(),
            min_idle=0,  # no refill: the next claim can only get the reused client
            max_idle=1,
            reuse=True,
        ) as pool:
            await pool.start(wait=True)
            async with pool.session() as session:
                pid = session._client.pid
            async with pool.session() as session:
                assert session._client.pid == pid
        async with demo(min_idle=1, max_idle=1, reuse=True) as plain:
            await plain.start(wait=True)
            async with plain.session() as session:
                gone = session._client.pid
            assert gone is not None and wait_dead(gone, 5.0)

    asyncio.run(main())


def test_the_loop_ending_without_close_leaves_no_process() -> None:
    """A pool abandoned inside asyncio.run(): its clients' loop guards close them."""
    pids: list[int] = []

    async def main() -> None:
        pool = demo(min_idle=2, max_idle=2)
        await pool.start(wait=True)
        pids.extend(c.pid for c in pool._state.owned if c.pid is not None)

    asyncio.run(main())
    assert len(pids) == 2
    for pid in pids:
        assert wait_dead(pid, 5.0)


def test_a_hung_authenticate_is_bounded_by_start_timeout() -> None:
    async def main() -> None:
        async with acp.AsyncPool(
            sys.executable,
            args=slow_args("--auth", "hangs"),
            client_options=options(),
            min_idle=1,
            authenticate="key",
            start_timeout=0.5,
            claim_timeout=0.2,
        ) as pool:
            began = time.monotonic()
            with pytest.raises(acp.ConnectError, match="authenticate"):
                await pool.claim()
            assert time.monotonic() - began < 10.0
        async with acp.AsyncPool(
            sys.executable,
            args=slow_args("--auth", "needed"),
            client_options=options(),
            min_idle=1,
            authenticate="key",
        ) as ok:
            async with ok.session() as session:
                assert (await session.prompt("go")).response == "ok"

    asyncio.run(main())


def test_a_cancelled_claim_leaves_nothing_behind() -> None:
    """A claim cancelled during its cold start: the half-started agent is closed, the counts
    come back to zero."""
    pids: list[int] = []

    async def main() -> None:
        async with acp.AsyncPool(
            sys.executable,
            args=slow_args("--init-delay", "2"),
            client_options=options(),
            min_idle=0,
            max_idle=1,
            claim_timeout=0.01,
        ) as pool:
            task = asyncio.ensure_future(pool.claim())
            assert await until(lambda: pool._state.cold == 1 and bool(pool._state.owned), 10.0)
            pids.extend(c.pid for c in pool._state.owned if c.pid is not None)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert pool._state.cold == 0 and pool.stats().claimed == 0
            # The cold start's agent is no longer the pool's, and is dead; what remains is the
            # background spare the waiting claim asked for.
            kept = {c.pid for c in pool._state.owned}
            gone = [pid for pid in pids if pid not in kept]
            assert gone
            for pid in gone:
                assert await until(lambda pid=pid: is_dead(pid), 5.0)  # type: ignore[misc]

    asyncio.run(main())
    assert pids


def test_a_cold_claim_stopped_by_close_says_the_pool_is_closed() -> None:
    """As the blocking pool's: RuntimeError, not the stopped start's AgentProtocolError."""

    async def main() -> None:
        pool = acp.AsyncPool(
            sys.executable,
            args=slow_args("--hang-at-init"),
            client_options=options(),
            min_idle=0,
            max_idle=0,
            claim_timeout=0.01,
            start_timeout=None,
        )
        claim = asyncio.ensure_future(pool.claim())
        assert await until(lambda: pool._state.cold == 1, 10.0)
        await asyncio.sleep(0.3)  # the start reaches its wait for initialize's answer
        pool.close()
        with pytest.raises(RuntimeError, match="the pool is closed"):
            await asyncio.wait_for(claim, 10.0)

    asyncio.run(main())
