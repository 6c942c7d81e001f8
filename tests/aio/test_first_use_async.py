"""The first five minutes on `AsyncClient` (first-use.md §1): defaults, `aclose()` and
``async with``, usage errors, start() failures, Ctrl-C, and the `__cause__` of the errors the
other pending calls raise when the client stops (async.md §3)."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from conftest import Journal, agent, chunk_line, emit, is_dead, stop_line, wait_dead
from test_first_use import EXITS
from test_interrupt import Interrupter, cancel_agent

from aio.test_async import MakeAsync, make_async, run  # noqa: F401 - the fixture


def test_async_with_and_aclose_stop_the_agent() -> None:
    async def main() -> tuple[str, int | None, acp.AsyncClient]:
        async with acp.AsyncClient(*acp.demo_agent_command()) as client:
            await client.start()
            reply = await client.prompt("hello")
            pid = client.pid
        return reply, pid, client

    reply, pid, client = run(main())
    assert reply == "Hello! You said: hello."
    assert pid is not None and wait_dead(pid, timeout=5.0)
    assert client.pid is None


def test_aclose_fails_pending_calls_and_is_idempotent() -> None:
    async def main() -> BaseException:
        client = acp.AsyncClient("/bin/sh", ["-c", agent(None, "sleep 30")])
        await client.start()
        turn = asyncio.ensure_future(client.prompt("never answered"))
        await asyncio.sleep(0.1)
        await client.aclose()
        await client.aclose()
        client.close()
        assert turn.done()  # aclose() let the awaiting task see its error
        return turn.exception()  # type: ignore[return-value]

    error = run(main())
    assert isinstance(error, acp.AgentProtocolError)
    assert "close()" in str(error)


def test_aclose_with_grace_does_not_block_the_loop() -> None:
    """The grace wait runs off the loop: another coroutine keeps ticking meanwhile."""

    async def main() -> tuple[int, int | None]:
        # The agent ignores its stdin closing (and SIGTERM) for a while: the grace runs out.
        script = "trap '' TERM; while :; do sleep 0.05; done"
        client = acp.AsyncClient("/bin/sh", ["-c", script])
        pid = client.pid
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.ensure_future(tick())
        await client.aclose(grace=0.5)
        ticker.cancel()
        return ticks, pid

    started = time.monotonic()
    ticks, pid = run(main())
    assert time.monotonic() - started < 10
    assert ticks >= 5  # the loop ran during the wait (it would be 1 if close() blocked it)
    assert pid is not None and is_dead(pid)


def test_async_calls_before_start_and_after_close_are_runtime_errors() -> None:
    async def main() -> None:
        client = acp.AsyncClient("/bin/sh", ["-c", agent(None, emit(stop_line(2)))])
        for call in (client.prompt("x"), client.new_session(), client.list_sessions()):
            with pytest.raises(RuntimeError, match=r"call start\(\) first"):
                await call
        await client.start()
        await client.aclose()
        for call in (client.prompt("x"), client.new_session(), client.start()):
            with pytest.raises(RuntimeError, match="the client is closed"):
                await call

    run(main())


def test_an_agent_exiting_in_async_start_is_a_connect_error() -> None:
    async def main() -> acp.ConnectError:
        client = acp.AsyncClient("/bin/sh", ["-c", EXITS])
        assert wait_dead(client.pid or 0, timeout=5.0)
        try:
            with pytest.raises(acp.ConnectError) as caught:
                await client.start()
        finally:
            await client.aclose()
        return caught.value

    error = run(main())
    assert "exited with status 3" in str(error)
    assert "GEMINI_API_KEY is not set" in str(error)  # stderr="tail" is the default


def test_no_observer_works_on_the_loop() -> None:
    script = agent(None, emit(chunk_line("a"), chunk_line("b"), stop_line(2)))

    async def main() -> acp.TurnResult:
        async with acp.AsyncClient("/bin/sh", ["-c", script]) as client:
            await client.start()
            assert client.default_session is not None
            return await client.default_session.prompt("x")

    assert run(main()).response == "ab"


def test_every_other_pending_call_has_the_stop_as_cause(make_async: MakeAsync) -> None:  # noqa: F811
    """async.md §3: the failing session's call raises the error itself; the other pending
    calls raise "the client stopped" with ``__cause__`` set to it (here the audit rule's
    `MissingDurableObserver`, which before had no cause)."""
    observer = acp.Observer(on_permission_commit=lambda request: None)
    client, _ = make_async(observer=observer, durable=True)

    async def main() -> tuple[list[Any], BaseException]:
        await client.start()
        first = client.default_session
        assert first is not None
        second = await client.new_session()
        results = await asyncio.gather(
            first.prompt("duet 5"), second.prompt("duet 5"), return_exceptions=True
        )
        try:
            await first.prompt("stream 1")
        except acp.AgentProtocolError as error:
            return results, error
        raise AssertionError("the next call must fail")

    results, later = run(main())
    missing = [r for r in results if isinstance(r, acp.MissingDurableObserver)]
    others = [r for r in results if not isinstance(r, acp.MissingDurableObserver)]
    assert len(missing) == 1 and len(others) == 1
    assert isinstance(others[0], acp.AgentProtocolError)
    assert others[0].__cause__ is missing[0]
    assert later.__cause__ is missing[0]


def test_an_updates_iterator_has_the_stop_as_cause(make_async: MakeAsync) -> None:  # noqa: F811
    class Boom(Exception):
        pass

    class Observer(Journal):
        def on_update(self, update: Any) -> None:
            super().on_update(update)
            if update.text.startswith("b3"):
                raise Boom("from on_update")

    client, _ = make_async(observer=Observer())

    async def main() -> BaseException:
        await client.start()
        first = client.default_session
        assert first is not None
        second = await client.new_session()
        updates = first.updates()
        await asyncio.gather(
            first.prompt("duet 10"), second.prompt("duet 10"), return_exceptions=True
        )
        with pytest.raises(acp.AgentProtocolError) as caught:
            async for _ in updates:
                pass
        return caught.value

    error = run(main())
    assert "the client stopped" in str(error)
    assert isinstance(error.__cause__, Boom)


def test_ctrl_c_cancels_an_async_turn_first(tmp_path: Path) -> None:
    log = tmp_path / "log"
    before = signal.getsignal(signal.SIGINT)

    async def main() -> tuple[acp.TurnResult, acp.TurnResult]:
        client = acp.AsyncClient(
            "/bin/sh", ["-c", cancel_agent(log)], observer=Interrupter(), interrupt="cancel"
        )
        async with client:
            await client.start()
            session = client.default_session
            assert session is not None
            cancelled = await session.prompt("long task")
            return cancelled, await session.prompt("quick")

    assert threading.current_thread() is threading.main_thread()
    cancelled, quick = run(main())
    assert (cancelled.response, cancelled.stop_reason) == ("working", "cancelled")
    assert quick.stop_reason == "end_turn"
    assert sum('"method":"session/cancel"' in line for line in log.read_text().splitlines()) == 1
    assert signal.getsignal(signal.SIGINT) is before


def test_aclose_with_grace_from_another_loop() -> None:
    """The client is bound to a loop on another thread: aclose() hands the close to it."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    try:
        client = acp.AsyncClient(*acp.demo_agent_command())
        asyncio.run_coroutine_threadsafe(client.start(), loop).result(10)
        pid = client.pid
        turn = asyncio.run_coroutine_threadsafe(client.prompt("hi"), loop).result(10)
        assert turn == "Hello! You said: hi."
        asyncio.run(client.aclose(grace=2.0))
        assert pid is not None and wait_dead(pid, timeout=5.0)
        assert client.pid is None
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
