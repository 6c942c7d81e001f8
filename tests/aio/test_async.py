"""`AsyncClient` beyond what the seed port and the fault suite check through `SyncOverAsync`:
concurrency, awaited permission answers, task cancellation, `updates()` batches and
backpressure, shutdown by the loop, threads and loops (design/async.md); in ACP v1 and v2 (the
`protocol` fixture: the scripted agent answers the version offered)."""

from __future__ import annotations

import asyncio
import gc
import json
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import acp_fast as acp
import procinfo
import pytest
from conftest import (
    TEST_CLIENT_INFO,
    V2_LIFECYCLE,
    Journal,
    is_dead,
    protocol_option,
    wait_for,
)

AGENT = Path(__file__).parents[1] / "sessions" / "session_agent.py"

CAPABILITIES = {
    "loadSession": True,
    "sessionCapabilities": {"list": {}, "close": {}},
}
BIG_LIMITS = acp.TransferLimits(
    request_bytes=1 << 20,
    response_bytes=1 << 30,
    update_bytes=1 << 20,
    update_count=1 << 40,
    response_segment_count=1 << 40,
)

MakeAsync = Callable[..., tuple[acp.AsyncClient, Path]]


@pytest.fixture
def make_async(tmp_path: Path, protocol: str) -> Iterator[MakeAsync]:
    """`make_async(config=None, observer=Journal(), **options)`: an `AsyncClient` on the scripted
    session agent, and the agent's log of received lines."""
    clients: list[acp.AsyncClient] = []

    def make(
        config: dict[str, Any] | None = None, observer: object = None, **options: Any
    ) -> tuple[acp.AsyncClient, Path]:
        directory = tmp_path / f"agent{len(clients)}"
        directory.mkdir()
        settings = {"initialize": {"protocolVersion": 1, "agentCapabilities": CAPABILITIES}}
        settings.update(config or {})
        (directory / "agent.json").write_text(json.dumps(settings))
        log = directory / "agent.log"
        log.write_text("")
        args = ["-I", str(AGENT), str(directory / "agent.json"), str(log)]
        client = acp.AsyncClient(
            sys.executable,
            args=args,
            reader_limits=acp.DEFAULT_READER_LIMITS,
            transfer_limits=options.pop("transfer_limits", BIG_LIMITS),
            transport_epoch=3,
            client_info=TEST_CLIENT_INFO,
            observer=Journal() if observer is None else observer,
            cwd=str(tmp_path),
            **{**protocol_option(protocol), **options},
        )
        clients.append(client)
        return client, log

    yield make
    for client in clients:
        client.close()


def received(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line]


def run(main: Any) -> Any:
    return asyncio.run(main)


# --- concurrency -------------------------------------------------------------------------------


def test_two_sessions_prompt_at_once_with_interleaved_updates(make_async: MakeAsync) -> None:
    journal = Journal()
    client, _ = make_async(observer=journal)

    async def main() -> tuple[acp.TurnResult, acp.TurnResult, str, str]:
        await client.start()
        first = client.default_session
        assert first is not None
        second = await client.new_session()
        a, b = await asyncio.gather(first.prompt("duet 200"), second.prompt("duet 200"))
        return a, b, first.session_id, second.session_id

    a, b, first_id, second_id = run(main())
    assert a.response == "".join(f"a{i} " for i in range(200))
    assert b.response == "".join(f"b{i} " for i in range(200))
    # One global sequence, in arrival order, alternating between the sessions.
    assert journal.sequences == list(range(1, len(journal.updates) + 1))
    assert len(journal.content) == 400
    assert [u.session_id for u in journal.content[:4]] == [first_id, second_id] * 2


def test_second_prompt_on_a_busy_session_raises_before_writing(make_async: MakeAsync) -> None:
    client, log = make_async()

    async def main() -> None:
        await client.start()
        session = client.default_session
        assert session is not None
        turn = asyncio.ensure_future(session.prompt("hang"))
        await asyncio.sleep(0.05)
        with pytest.raises(RuntimeError):
            await session.prompt("stream 1")
        session.cancel()
        assert (await turn).stop_reason == "cancelled"

    run(main())
    assert [m.get("method") for m in received(log)].count("session/prompt") == 1


def test_awaited_permission_resolved_after_50_updates(make_async: MakeAsync) -> None:
    seen_after_ask: list[acp.Update] = []

    class Observer(Journal):
        asked = False

        def on_update(self, update: Any) -> None:
            super().on_update(update)
            if self.asked and update.session_update not in V2_LIFECYCLE:
                seen_after_ask.append(update)

        def on_permission(self, request: acp.PermissionRequest) -> Any:
            self.asked = True

            async def answer() -> acp.PermissionReply:
                while len(seen_after_ask) < 50:
                    await asyncio.sleep(0.005)
                return acp.PermissionReply("selected", "yes", "allow_once")

            return answer()

    observer = Observer()
    client, log = make_async(observer=observer)

    async def main() -> acp.TurnResult:
        await client.start()
        assert client.default_session is not None
        return await client.default_session.prompt("ask_then_stream 50")

    turn = run(main())
    assert len(seen_after_ask) == 51  # the 50 streamed while it waited, then the outcome
    assert turn.response.endswith('outcome {"outcome":"selected","optionId":"yes"}')
    (record,) = observer.permissions
    assert (record.outcome, record.option_id) == ("selected", "yes")
    answers = [m for m in received(log) if m.get("id") == "perm-2"]
    assert answers == [
        {
            "jsonrpc": "2.0",
            "id": "perm-2",
            "result": {"outcome": {"outcome": "selected", "optionId": "yes"}},
        }
    ]


def test_cancelling_the_session_cancels_an_awaited_permission(make_async: MakeAsync) -> None:
    cancelled = threading.Event()

    class Observer(Journal):
        def on_permission(self, request: acp.PermissionRequest) -> Any:
            async def never() -> None:
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    cancelled.set()
                    raise

            return never()

    observer = Observer()
    client, log = make_async(observer=observer)

    async def main() -> acp.TurnResult:
        await client.start()
        session = client.default_session
        assert session is not None
        turn = asyncio.ensure_future(session.prompt("permission"))
        await asyncio.sleep(0.1)
        session.cancel()
        return await turn

    turn = run(main())
    assert cancelled.is_set()
    assert turn.stop_reason == "cancelled"
    assert observer.permissions[0].outcome == "cancelled"
    methods = [m.get("method") for m in received(log)]
    assert methods.count("session/cancel") == 1


def test_task_cancellation_mid_turn_cancels_the_turn(make_async: MakeAsync) -> None:
    client, log = make_async()

    async def main() -> str:
        await client.start()
        session = client.default_session
        assert session is not None
        turn = asyncio.ensure_future(session.prompt("hang"))
        await asyncio.sleep(0.1)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
        # The client stays usable; the next turn on the session works.
        return (await session.prompt("stream 2")).response

    assert run(main()) == "c0 c1 "
    methods = [m.get("method") for m in received(log)]
    assert methods.count("session/cancel") == 1


def test_cancelled_task_of_another_call_sends_cancel_request(make_async: MakeAsync) -> None:
    client, log = make_async({"hang_methods": ["session/list"]})

    async def main() -> str:
        await client.start()
        listing = asyncio.ensure_future(client.list_sessions())
        await asyncio.sleep(0.1)
        listing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await listing
        assert client.default_session is not None
        return (await client.default_session.prompt("stream 1")).response

    assert run(main()) == "c0 "
    lines = received(log)
    list_id = next(m["id"] for m in lines if m.get("method") == "session/list")
    assert {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": list_id}} in (
        lines
    )


def test_prompt_timeout_then_the_client_stays_usable(make_async: MakeAsync) -> None:
    client, _ = make_async(cancel_grace=0.2)

    async def main() -> str:
        await client.start()
        session = client.default_session
        assert session is not None
        with pytest.raises(acp.TurnTimeout):
            await session.prompt("late 1", timeout=0.1)
        return (await session.prompt("stream 1")).response

    assert run(main()) == "c0 "


# --- observers on the loop ---------------------------------------------------------------------


def test_on_update_raising_stops_the_client_and_fails_every_call(make_async: MakeAsync) -> None:
    class Boom(Exception):
        pass

    class Observer(Journal):
        def on_update(self, update: Any) -> None:
            super().on_update(update)
            if update.text.startswith("b5"):
                raise Boom("from on_update")

    client, _ = make_async(observer=Observer())

    async def main() -> list[BaseException]:
        await client.start()
        first = client.default_session
        assert first is not None
        second = await client.new_session()
        updates = first.updates()
        results = await asyncio.gather(
            first.prompt("duet 20"), second.prompt("duet 20"), return_exceptions=True
        )
        with pytest.raises(acp.AgentProtocolError):
            async for _ in updates:
                pass
        with pytest.raises(acp.AgentProtocolError):
            await first.prompt("stream 1")
        return [r for r in results if isinstance(r, BaseException)]

    first_error, second_error = run(main())
    # The call about the failing update's session raises the exception itself; the other one
    # raises "the client stopped", caused by it.
    assert isinstance(second_error, Boom)
    assert isinstance(first_error, acp.AgentProtocolError)
    assert "the client stopped" in str(first_error)
    assert isinstance(first_error.__cause__, Boom)


def test_on_update_returning_an_awaitable_is_a_type_error(make_async: MakeAsync) -> None:
    async def on_update(update: Any) -> None:
        pass

    client, _ = make_async(observer=acp.Observer(on_update=on_update))

    async def main() -> None:
        await client.start()
        assert client.default_session is not None
        with pytest.raises(TypeError, match="must not return an awaitable"):
            await client.default_session.prompt("stream 3")

    run(main())


# --- updates() -----------------------------------------------------------------------------------


def test_updates_batches_every_update_in_order(make_async: MakeAsync, protocol: str) -> None:
    journal = Journal()
    lifecycle = 0 if protocol == "v1" else 3  # v2: running, the user message, idle
    client, _ = make_async(observer=journal)

    async def main() -> list[tuple[acp.Update, ...]]:
        await client.start()
        session = client.default_session
        assert session is not None
        batches = []
        it = session.updates(max_latency=0.01, max_items=64)
        turn = asyncio.ensure_future(session.prompt("stream 1000"))
        total = 0
        async for batch in it:
            batches.append(batch)
            total += len(batch)
            if total == 1000 + lifecycle:
                break
        await turn
        await it.aclose()
        return batches

    batches = run(main())
    assert all(0 < len(batch) <= 64 for batch in batches)
    flat = [u for batch in batches for u in batch]
    assert flat == journal.updates  # the same objects on_update received, in order


def test_updates_iterator_ends_when_the_session_closes(
    make_async: MakeAsync, protocol: str
) -> None:
    client, _ = make_async()

    async def main() -> int:
        await client.start()
        session = client.default_session
        assert session is not None
        it = session.updates()
        await session.prompt("stream 3")
        await session.close()
        return sum([len(batch) async for batch in it])

    assert run(main()) == (3 if protocol == "v1" else 6)  # v2: running, user message, idle


@pytest.mark.parametrize(
    "arguments",
    [{"max_latency": 0}, {"max_items": 0}, {"max_buffered_bytes": -1}],
)
def test_updates_arguments_must_be_positive(
    make_async: MakeAsync, arguments: dict[str, Any]
) -> None:
    client, _ = make_async()

    async def main() -> None:
        await client.start()
        assert client.default_session is not None
        with pytest.raises(ValueError):
            client.default_session.updates(**arguments)

    run(main())


def rss() -> int:
    return procinfo.rss_bytes()


def test_slow_consumer_of_a_flood_keeps_memory_bounded_and_loses_nothing(
    make_async: MakeAsync, protocol: str
) -> None:
    # ~50 MB of envelopes; in v2 with the turn's running, user message and idle (the turn ends
    # at that idle, an update: the consumer takes it too, or the paused reader never reads it).
    chunks = 400_000
    count = chunks + (0 if protocol == "v1" else 3)
    client, _ = make_async(observer=acp.Observer(on_update=lambda update: None))
    phases: list[str] = []

    async def main() -> tuple[int, list[int], int]:
        await client.start()
        session = client.default_session
        assert session is not None
        it = session.updates(max_latency=0.005, max_items=256)
        turn = asyncio.ensure_future(session.prompt(f"flood {chunks}"))
        got = 0
        sequences: list[int] = []
        peak = 0
        async for batch in it:
            got += len(batch)
            sequences.append(batch[0].update_sequence)
            peak = max(peak, rss())
            phases.append(client.reader_status().phase)
            await asyncio.sleep(0.001)  # slower than the agent
            if got == count:
                break
        await turn
        await it.aclose()
        return got, sequences, peak

    before = rss()
    got, sequences, peak = run(main())
    assert got == count
    assert sequences == sorted(sequences)
    assert "paused" in phases  # the reader waited for the consumer
    # The queue holds at most 4 x 256 updates; the pipe and the reader's buffer the rest.
    assert peak - before < 40 << 20, f"RSS grew by {(peak - before) >> 20} MiB"


# --- loops, threads, shutdown ------------------------------------------------------------------


def test_a_call_from_another_loop_raises(make_async: MakeAsync) -> None:
    client, _ = make_async()
    run(client.start())
    with pytest.raises(RuntimeError, match="another event loop"):
        run(client.prompt("stream 1"))


def test_a_coroutine_from_another_thread_raises(make_async: MakeAsync) -> None:
    client, _ = make_async()
    errors: list[BaseException] = []

    async def main() -> None:
        await client.start()

        def other() -> None:
            try:
                asyncio.run(client.prompt("stream 1"))
            except BaseException as error:
                errors.append(error)

        thread = threading.Thread(target=other)
        thread.start()
        await asyncio.get_running_loop().run_in_executor(None, thread.join)

    run(main())
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError)


def test_close_from_another_thread_fails_the_pending_call(make_async: MakeAsync) -> None:
    client, _ = make_async()

    async def main() -> None:
        await client.start()
        session = client.default_session
        assert session is not None
        turn = asyncio.ensure_future(session.prompt("hang"))
        await asyncio.sleep(0.05)
        threading.Thread(target=client.close).start()
        with pytest.raises(acp.AgentProtocolError, match="close"):
            await asyncio.wait_for(turn, 5)

    run(main())
    assert client.pid is None


def test_loop_shutdown_closes_64_clients(make_async: MakeAsync) -> None:
    clients = [make_async()[0] for _ in range(64)]
    pids = [c.pid for c in clients]

    async def main() -> None:
        await asyncio.gather(*(c.start() for c in clients))
        # Returning with every client open: asyncio.run's shutdown must close them.

    run(main())
    assert all(c.pid is None for c in clients)
    assert all(wait_for(lambda p=pid: is_dead(p), 5) for pid in pids)


def test_garbage_collection_stops_the_agent(make_async: MakeAsync, tmp_path: Path) -> None:
    (tmp_path / "gc.json").write_text(json.dumps({"initialize": {"protocolVersion": 1}}))

    async def main() -> int:
        client = acp.AsyncClient(
            sys.executable,
            args=["-I", str(AGENT), str(tmp_path / "gc.json"), str(tmp_path / "gc.log")],
            reader_limits=acp.DEFAULT_READER_LIMITS,
            transfer_limits=BIG_LIMITS,
            transport_epoch=1,
            observer=Journal(),
        )
        await client.start()
        pid = client.pid
        assert pid is not None
        client.close()  # drops its loop registrations; the object itself goes below
        del client
        gc.collect()
        return pid

    pid = run(main())
    assert wait_for(lambda: is_dead(pid), 5)


CTRL_C_HOST = textwrap.dedent(
    """
    import asyncio, json, sys
    import acp_fast as acp

    agent, config, log = sys.argv[1:4]

    async def main():
        client = acp.AsyncClient(
            sys.executable, args=["-I", agent, config, log],
            reader_limits=acp.DEFAULT_READER_LIMITS,
            transfer_limits=acp.TransferLimits(1 << 20, 1 << 20, 1 << 20, 1024, 1024),
            transport_epoch=1, observer=acp.Observer(on_update=lambda u: None),
            cancel_grace=2.0,
        )
        async with client:
            await client.start()
            print(client.pid, flush=True)
            await client.default_session.prompt("hang")

    asyncio.run(main())
    """
)


def test_ctrl_c_cancels_the_turn_and_leaves_no_agent(tmp_path: Path) -> None:
    config = tmp_path / "agent.json"
    config.write_text(json.dumps({"initialize": {"protocolVersion": 1}}))
    log = tmp_path / "agent.log"
    host = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_HOST, str(AGENT), str(config), str(log)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert host.stdout is not None
    agent_pid = int(host.stdout.readline())
    assert wait_for(lambda: "session/prompt" in log.read_text(), 5)
    host.send_signal(signal.SIGINT)
    assert host.wait(10) != 0  # KeyboardInterrupt after the turn was cancelled
    methods = [json.loads(line).get("method") for line in log.read_text().splitlines()]
    assert methods.count("session/cancel") == 1
    assert wait_for(lambda: is_dead(agent_pid), 5)


def test_uvloop_runs_the_client(make_async: MakeAsync) -> None:
    import uvloop  # a test extra

    journal = Journal()
    client, _ = make_async(observer=journal)

    async def main() -> str:
        await client.start()
        assert client.default_session is not None
        return (await client.default_session.prompt("stream 50")).response

    assert uvloop.run(main()) == "".join(f"c{i} " for i in range(50))
    assert journal.sequences == list(range(1, len(journal.updates) + 1))
    assert len(journal.content) == 50


def test_close_from_inside_a_callback_releases_everything(make_async: MakeAsync) -> None:
    holder: list[acp.AsyncClient] = []

    class Observer(Journal):
        def on_update(self, update: Any) -> None:
            super().on_update(update)
            if update.update_sequence == 3:
                holder[0].close()

    client, _ = make_async(observer=Observer())
    holder.append(client)
    fds_before = set(procinfo.open_fds())

    async def main() -> None:
        await client.start()
        assert client.default_session is not None
        with pytest.raises(acp.AgentProtocolError, match="close"):
            await client.default_session.prompt("stream 10")

    run(main())
    assert client.pid is None
    assert wait_for(lambda: set(procinfo.open_fds()) <= fds_before, 2)
