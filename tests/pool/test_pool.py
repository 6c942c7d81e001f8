"""`acp_fast.Pool` (blocking): warm spares served at claim, refill, eviction, failures surfaced,
no process left behind (fleet.md §1)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

import acp_fast as acp
import pytest
from acp_fast.pool import _sync as pool_sync
from acp_fast.pool._common import pid_exited
from conftest import is_dead, wait_dead, wait_for

from tests.pool.kit import demo_pool, options, slow_args

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="needs Linux (/proc)")


def test_a_burst_on_a_warm_pool_is_served_by_spares() -> None:
    with demo_pool(min_idle=4, max_idle=4, max_total=4) as pool:
        pool.start(wait=True)
        assert pool.stats().idle == 4
        claimed: list[acp.Client] = []
        lock = threading.Lock()

        def claim() -> None:
            client = pool.claim()
            with lock:
                claimed.append(client)

        threads = [threading.Thread(target=claim) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        stats = pool.stats()
        assert (stats.claims, stats.hits, stats.misses) == (4, 4, 0)
        assert stats.claimed == 4 and stats.idle == 0
        assert len({c.pid for c in claimed}) == 4
        # Each claimed client works, from the claiming thread or another.
        session = claimed[0].new_session()
        assert session.prompt("hi").response == "Hello! You said: hi."
        for client in claimed:
            pool.release(client)


def test_session_claims_then_opens_a_session_in_the_task_directory(tmp_path: object) -> None:
    with demo_pool(min_idle=1, max_idle=1) as pool:
        pool.start(wait=True)
        with pool.session(cwd=str(tmp_path)) as session:
            assert session.cwd == str(tmp_path)
            pid = session._client.pid
            assert session.prompt("hi").stop_reason == "end_turn"
        assert pid is not None and wait_dead(pid, 5.0)  # no reuse by default: closed
        stats = pool.stats()
        assert stats.claimed == 0 and stats.hits == 1


def test_refill_after_claims() -> None:
    with demo_pool(min_idle=2, max_idle=2, max_total=6) as pool:
        pool.start(wait=True)
        first = pool.claim()
        second = pool.claim()
        assert wait_for(lambda: pool.stats().idle == 2, 20.0), pool.stats()
        stats = pool.stats()
        assert stats.claimed == 2 and stats.started == 4
        pool.release(first)
        pool.release(second)


def test_close_leaves_no_process() -> None:
    pool = demo_pool(min_idle=3, max_idle=3, max_total=5)
    pool.start(wait=True)
    held = pool.claim()
    assert wait_for(lambda: pool.stats().idle == 3, 20.0)
    pids = [s.client.pid for s in pool._state.idle] + [held.pid]
    assert len(pids) == 4 and all(p is not None for p in pids)
    pool.close()
    pool.close()  # idempotent
    for pid in pids:
        assert pid is not None and wait_dead(pid, 5.0), f"agent {pid} outlived close()"
    with pytest.raises(RuntimeError, match="closed"):
        pool.claim()


def test_close_during_starts_leaves_no_process() -> None:
    """close() while spares are still in their handshake: the starting clients die too."""
    pool = acp.Pool(
        sys.executable,
        args=slow_args("--init-delay", "2"),
        client_options=options(),
        min_idle=2,
        max_idle=2,
        spawn_concurrency=2,
    )
    pool.start()
    assert wait_for(lambda: len(pool._state.owned) == 2, 10.0)
    pids = [c.pid for c in pool._state.owned]
    pool.close()
    for pid in pids:
        assert pid is not None and wait_dead(pid, 5.0), f"agent {pid} outlived close()"
    time.sleep(2.5)  # the start threads finish their (failed) handshakes
    assert pool.stats().idle == 0


def test_a_dead_spare_is_evicted_at_claim() -> None:
    with demo_pool(min_idle=1, max_idle=1, max_total=3, claim_timeout=10.0) as pool:
        pool.start(wait=True)
        spare = pool._state.idle[0].client
        assert spare.pid is not None
        os.kill(spare.pid, signal.SIGKILL)
        assert wait_dead(spare.pid, 5.0)
        # /proc shows the zombie a moment before the kernel reports the exit to its parent
        # (which is what the liveness check asks): wait for the report, as the pool sees it.
        assert wait_for(lambda: pid_exited(spare.pid), 5.0)
        client = pool.claim()
        assert client is not spare
        assert client.new_session().prompt("hi").stop_reason == "end_turn"
        stats = pool.stats()
        assert stats.evicted >= 1
        pool.release(client)


def test_a_spare_whose_output_ended_is_evicted_at_session_new() -> None:
    """An agent whose output ends between calls passes the claim's check (only a call sees
    the end): `session()` evicts it at ``session/new`` and tries the next spare, boundedly."""
    with acp.Pool(
        sys.executable,
        args=slow_args("--mute-after-init"),
        client_options=options(),
        min_idle=2,
        max_idle=2,
        max_total=3,
        claim_timeout=0.1,
    ) as pool:
        pool.start(wait=True)
        with pytest.raises(acp.AgentProtocolError, match="output ended"), pool.session():
            pass
        assert pool.stats().evicted == 4  # max_total + 1 attempts, each evicted
        pids = [c.pid for c in list(pool._state.owned)]
    for pid in pids:
        assert pid is not None and wait_dead(pid, 5.0)


def test_expired_spares_are_replaced() -> None:
    with demo_pool(min_idle=1, max_idle=1, idle_ttl=0.3, max_age=None) as pool:
        pool.start(wait=True)
        first = pool._state.idle[0].client.pid
        assert wait_for(lambda: pool.stats().evicted >= 1, 10.0), pool.stats()
        assert first is not None and wait_dead(first, 5.0)
        assert wait_for(lambda: pool.stats().idle == 1, 10.0)


def test_a_missing_program_is_raised_by_the_claim() -> None:
    with acp.Pool(
        "/nonexistent/agent", client_options=options(), min_idle=1, claim_timeout=30.0
    ) as pool:
        began = time.monotonic()
        with pytest.raises(FileNotFoundError):
            pool.claim()
        assert time.monotonic() - began < 10.0  # not claim_timeout: nothing else was coming
        assert pool.stats().failed >= 1


def test_a_failing_agent_is_raised_by_the_claim_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with acp.Pool(
        sys.executable,
        args=slow_args("--exit-at-init"),
        client_options=options(),
        min_idle=1,
        claim_timeout=30.0,
    ) as pool:
        began = time.monotonic()
        with pytest.raises(acp.ConnectError):
            pool.claim()
        assert time.monotonic() - began < 10.0
        assert wait_for(lambda: pool.stats().failed >= 2, 10.0)  # background retries
    assert any("failed to start" in r.getMessage() for r in caplog.records)


def test_a_hung_handshake_is_bounded_by_start_timeout() -> None:
    with acp.Pool(
        sys.executable,
        args=slow_args("--hang-at-init"),
        client_options=options(),
        min_idle=1,
        start_timeout=0.5,
        claim_timeout=0.2,
    ) as pool:
        with pytest.raises(acp.ConnectError, match="timed out"):
            pool.claim()
        pids = [c.pid for c in list(pool._state.owned)]
    for pid in pids:
        assert pid is not None and wait_dead(pid, 5.0)


def test_claim_timeout_falls_back_to_a_cold_start() -> None:
    with acp.Pool(
        sys.executable,
        args=slow_args("--init-delay", "1"),
        client_options=options(),
        min_idle=0,
        max_idle=1,
        claim_timeout=0.05,
    ) as pool:
        client = pool.claim()
        stats = pool.stats()
        assert stats.misses == 1 and stats.hits == 0
        assert client.initialize.agent_info == {"name": "slow-agent", "version": "1.0"}
        pool.release(client)


def test_max_total_bounds_claims() -> None:
    with demo_pool(min_idle=1, max_idle=1, max_total=1) as pool:
        held = pool.claim()
        with pytest.raises(TimeoutError, match="max_total=1"):
            pool.claim(timeout=0.3)
        pool.release(held)
        again = pool.claim(timeout=20.0)  # capacity came back
        pool.release(again)


def test_reuse_returns_a_healthy_client_when_the_agent_closes_sessions() -> None:
    with acp.Pool(
        sys.executable,
        args=slow_args("--close"),
        client_options=options(),
        min_idle=0,  # no refill: the next claim can only get the reused client
        max_idle=1,
        reuse=True,
    ) as pool:
        pool.start(wait=True)
        with pool.session() as session:
            pid = session._client.pid
        with pool.session() as session:
            assert session._client.pid == pid  # the same agent, a new session
            assert session.session_id == "slow-2"


def test_reuse_is_refused_when_the_agent_cannot_close_sessions() -> None:
    with demo_pool(min_idle=1, max_idle=1, reuse=True) as pool:
        pool.start(wait=True)
        with pool.session() as session:
            pid = session._client.pid
        assert pid is not None and wait_dead(pid, 5.0)


def test_the_pool_key_is_not_overridable() -> None:
    with pytest.raises(ValueError, match="pool key"):
        acp.Pool(sys.executable, client_options={"env": {}})
    with pytest.raises(ValueError, match="min_idle <= max_idle <= max_total"):
        acp.Pool(sys.executable, min_idle=3, max_idle=2)
    pool = acp.Pool(sys.executable, args=("a",), env={"B": "1"}, cwd="rel")
    assert pool.key == acp.pool.PoolKey(
        sys.executable, ("a",), (("B", "1"),), os.path.abspath("rel")
    )
    pool.close()


def test_dead_spare_pid_is_never_handed_out_after_kill_races() -> None:
    """Kill every spare, then burst: every claim gets a live agent (evicted, restarted)."""
    with demo_pool(min_idle=3, max_idle=3, max_total=6, claim_timeout=20.0) as pool:
        pool.start(wait=True)
        pids = [spare.client.pid for spare in pool._state.idle]
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        for pid in pids:
            assert wait_dead(pid, 5.0)
            assert wait_for(lambda pid=pid: pid_exited(pid), 5.0)  # as the pool sees it
        clients = [pool.claim() for _ in range(3)]
        for client in clients:
            assert not is_dead(client.pid)
            assert client.new_session().prompt("x").stop_reason == "end_turn"
            pool.release(client)


def test_a_start_failure_is_logged_without_the_agents_control_bytes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The start error carries the agent's stderr tail: the log shows its controls, never
    sends them to a terminal."""
    script = "printf 'boom\\033[2J\\033]0;title\\007\\n' >&2; exit 3"
    with acp.Pool(
        "/bin/sh",
        args=("-c", script),
        client_options=options(stderr="tail"),
        min_idle=1,
        claim_timeout=30.0,
    ) as pool:
        # ConnectError, or AgentTransportFailed when it exits before `initialize` is written.
        with pytest.raises(acp.AcpError) as raised:
            pool.claim()
        assert "\x1b" in str(raised.value)  # the error itself keeps the exact bytes
        assert wait_for(lambda: any("failed to start" in r.getMessage() for r in caplog.records))
    logged = [r.getMessage() for r in caplog.records if "failed to start" in r.getMessage()]
    assert logged and all("\x1b" not in m and "\x07" not in m for m in logged)
    assert any("boom" in m for m in logged)


def test_spares_are_authenticated_when_asked() -> None:
    with acp.Pool(
        sys.executable, args=slow_args("--auth", "needed"), client_options=options(), min_idle=1
    ) as pool:
        with pytest.raises(acp.AgentProtocolError, match="authentication required"):
            with pool.session():
                pass
    with acp.Pool(
        sys.executable,
        args=slow_args("--auth", "needed"),
        client_options=options(),
        min_idle=1,
        authenticate="key",
    ) as pool:
        pool.start(wait=True)
        with pool.session() as session:
            assert session.prompt("go").response == "ok"
        assert pool.stats().hits == 1


def test_a_hung_authenticate_is_bounded_by_start_timeout() -> None:
    with acp.Pool(
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
            pool.claim()
        assert time.monotonic() - began < 10.0


def test_release_refuses_a_client_the_pool_did_not_hand_out() -> None:
    with demo_pool(min_idle=1, max_idle=1) as pool, demo_pool(min_idle=1) as other:
        foreign = other.claim()
        with pytest.raises(ValueError, match="not claimed from this pool"):
            pool.release(foreign)
        assert not is_dead(foreign.pid)  # left alone
        mine = pool.claim()
        pool.release(mine)
        pool.release(mine)  # already given back and closed: nothing to do
        other.release(foreign)


def test_a_failed_task_is_never_reused() -> None:
    with acp.Pool(
        sys.executable,
        args=slow_args("--close"),
        client_options=options(),
        min_idle=1,
        max_idle=2,  # room to take it back
        reuse=True,
    ) as pool:
        pool.start(wait=True)
        with pytest.raises(KeyError), pool.session() as session:
            pid = session._client.pid
            raise KeyError("the task failed")
        assert pid is not None and wait_dead(pid, 5.0)
        assert pool.stats().claimed == 0


def hung_pool() -> acp.Pool:
    """A pool whose agents never answer initialize, with no start_timeout and no spares wanted:
    a claim ends up waiting on a start."""
    return acp.Pool(
        sys.executable,
        args=slow_args("--hang-at-init"),
        client_options=options(),
        min_idle=0,
        max_idle=0,
        claim_timeout=0.01,
        start_timeout=None,
    )


def claim_on_a_thread(pool: acp.Pool) -> tuple[threading.Thread, list[BaseException]]:
    """A claim running on a thread of its own, and where its error goes."""
    failure: list[BaseException] = []

    def claim() -> None:
        try:
            pool.claim()
        except BaseException as error:
            failure.append(error)

    claimer = threading.Thread(target=claim, daemon=True)
    claimer.start()
    return claimer, failure


def test_close_while_a_spare_is_spawned_leaves_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """close() landing between a start's spawn and its registration (here: the refill start a
    waiting claim asks for): the client was not yet among those close() closes, and its start
    (a hung handshake, no start_timeout) waited forever with the agent running."""
    pool = hung_pool()
    spawned: list[acp.Client] = []
    pids: list[int | None] = []

    def spawn_then_close(*args: Any, **kwargs: Any) -> acp.Client:
        client = acp.Client(*args, **kwargs)
        spawned.append(client)
        pids.append(client.pid)
        pool.close()
        return client

    monkeypatch.setattr(pool_sync, "Client", spawn_then_close)
    claimer, failure = claim_on_a_thread(pool)
    claimer.join(10)
    assert not claimer.is_alive(), "the claim hung on a start close() never saw"
    assert isinstance(failure[0], RuntimeError) and "closed" in str(failure[0])
    assert spawned and all(client._live.closed for client in spawned)
    for pid in pids:
        assert pid is not None and wait_dead(pid, 5.0), f"agent {pid} outlived close()"


@pytest.mark.parametrize("pause", [0.0, 0.3])
def test_a_cold_claim_stopped_by_close_says_the_pool_is_closed(pause: float) -> None:
    """close() while a claim waits on its own (cold) start: RuntimeError("the pool is closed"),
    as for every other claim, not the AgentProtocolError of the start close() stopped (which
    means the agent misbehaved). `pause` lets the start reach its wait for initialize's
    answer (close() before it made start() raise RuntimeError already)."""
    pool = hung_pool()
    claimer, failure = claim_on_a_thread(pool)
    assert wait_for(lambda: pool._state.cold == 1, 10.0)
    time.sleep(pause)
    pool.close()
    claimer.join(10)
    assert not claimer.is_alive()
    assert isinstance(failure[0], RuntimeError), repr(failure[0])
    assert "the pool is closed" in str(failure[0])
