"""`Session.steer(content)` (protocol-now.md §2, unstable): the `_session/steering` extension,
sent into the running turn; `CapabilityError` with nothing written without ``unstable=True``
or the agent's ``_meta.steering.supported``; "promptRequired" when no turn runs."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from conftest import TEST_CLIENT_INFO, wait_for

AGENT = str(Path(__file__).with_name("steer_agent.py"))


def script(tmp_path: Path, **keys: Any) -> tuple[list[str], Path]:
    log = tmp_path / "sent.jsonl"
    log.touch()
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"log": str(log), **keys}))
    return [AGENT, str(path)], log


def sent(log: Path, method: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log.read_text().splitlines() if line]
    return [m for m in lines if m.get("method") == method]


def options(args: list[str], **more: Any) -> dict[str, Any]:
    return {"args": args, "client_info": TEST_CLIENT_INFO, **more}


def test_async_steer_reaches_the_running_turn(tmp_path: Path) -> None:
    args, log = script(tmp_path, wait=True)

    async def main() -> tuple[str, acp.TurnResult]:
        async with acp.AsyncClient(sys.executable, **options(args, unstable=True)) as client:
            await client.start(new_session=False)
            session = await client.new_session()
            turn = asyncio.create_task(session.prompt("go"))
            # The agent holds the turn until it is steered: wait until it has the prompt.
            while not sent(log, "session/prompt"):
                await asyncio.sleep(0.01)
            outcome = await session.steer("go left")
            return outcome, await asyncio.wait_for(turn, 10)

    outcome, turn = asyncio.run(main())
    assert outcome == "injected"
    assert turn.response == "working. steered: go left"
    (request,) = sent(log, "_session/steering")
    assert request["params"] == {
        "sessionId": "s1",
        "prompt": [{"type": "text", "text": "go left"}],
        "_meta": {"steering": {"idleBehavior": "promptRequired"}},
    }


def test_async_steer_takes_content_blocks(tmp_path: Path) -> None:
    args, log = script(tmp_path)

    async def main() -> str:
        async with acp.AsyncClient(sys.executable, **options(args, unstable=True)) as client:
            await client.start(new_session=False)
            session = await client.new_session()
            return await session.steer([acp.Text("a"), "b"])

    assert asyncio.run(main()) == "promptRequired"
    (request,) = sent(log, "_session/steering")
    assert request["params"]["prompt"] == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
    ]


@pytest.mark.parametrize("driver", ["blocking", "async"])
def test_no_running_turn_is_prompt_required(tmp_path: Path, driver: str) -> None:
    args, log = script(tmp_path)
    if driver == "blocking":
        with acp.Client(sys.executable, **options(args, unstable=True)) as client:
            client.start(new_session=False)
            assert client.new_session().steer("hello") == "promptRequired"
    else:

        async def main() -> str:
            async with acp.AsyncClient(sys.executable, **options(args, unstable=True)) as c:
                await c.start(new_session=False)
                return await (await c.new_session()).steer("hello")

        assert asyncio.run(main()) == "promptRequired"
    assert len(sent(log, "_session/steering")) == 1


def test_blocking_steer_from_another_thread_reaches_the_running_turn(tmp_path: Path) -> None:
    """The blocking client's turn holds the client: a steer() from another thread is handed
    to that turn's pump, written while the turn runs, and its answer handed back."""
    args, log = script(tmp_path, wait=True)
    with acp.Client(sys.executable, **options(args, unstable=True)) as client:
        client.start(new_session=False)
        session = client.new_session()
        results: list[acp.TurnResult] = []
        worker = threading.Thread(target=lambda: results.append(session.prompt("go")))
        worker.start()
        assert wait_for(lambda: bool(sent(log, "session/prompt")), timeout=10.0)
        assert session.steer(["go", "left"]) == "injected"
        worker.join(10)
        assert not worker.is_alive()
        assert results[0].response == "working. steered: go left"
        # Between turns it is an ordinary call.
        assert session.steer("again") == "promptRequired"
    assert len(sent(log, "_session/steering")) == 2


def test_blocking_steer_refused_by_the_turns_pump_is_a_capability_error(tmp_path: Path) -> None:
    """Not advertised: the pump's check refuses it, nothing is written, the turn goes on."""
    args, log = script(tmp_path, wait=True, supported=False)
    with acp.Client(sys.executable, **options(args, unstable=True)) as client:
        client.start(new_session=False)
        session = client.new_session()
        results: list[acp.TurnResult] = []
        worker = threading.Thread(target=lambda: results.append(session.prompt("go")))
        worker.start()
        assert wait_for(lambda: bool(sent(log, "session/prompt")), timeout=10.0)
        with pytest.raises(acp.CapabilityError) as caught:
            session.steer("go left")
        assert caught.value.capability == "_meta.steering"
        session.cancel()
        worker.join(10)
        assert not worker.is_alive()
        assert results[0].stop_reason == "cancelled"
    assert sent(log, "_session/steering") == []


def test_blocking_steer_unanswered_when_the_turn_ends_is_an_error(tmp_path: Path) -> None:
    """The agent ends the turn without answering the steering request: the waiting thread
    gets an error at once, not a hang."""
    args, log = script(tmp_path, wait=True, silent=True)
    with acp.Client(sys.executable, **options(args, unstable=True)) as client:
        client.start(new_session=False)
        session = client.new_session()
        worker = threading.Thread(target=lambda: session.prompt("go"))
        worker.start()
        assert wait_for(lambda: bool(sent(log, "session/prompt")), timeout=10.0)
        with pytest.raises(acp.AgentProtocolError, match="turn ended before the agent answered"):
            session.steer("go left")
        worker.join(10)
        assert not worker.is_alive()
    assert len(sent(log, "_session/steering")) == 1


def steer_error(tmp_path: Path, driver: str, **client_options: Any) -> acp.CapabilityError:
    args, log = script(tmp_path, supported=client_options.pop("supported", True))
    if driver == "blocking":
        with acp.Client(sys.executable, **options(args, **client_options)) as client:
            client.start(new_session=False)
            session = client.new_session()
            with pytest.raises(acp.CapabilityError) as caught:
                session.steer("go")
    else:

        async def main() -> None:
            async with acp.AsyncClient(sys.executable, **options(args, **client_options)) as c:
                await c.start(new_session=False)
                await (await c.new_session()).steer("go")

        with pytest.raises(acp.CapabilityError) as caught:
            asyncio.run(main())
    assert sent(log, "_session/steering") == []
    return caught.value


@pytest.mark.parametrize("driver", ["blocking", "async"])
def test_without_unstable_is_a_capability_error(tmp_path: Path, driver: str) -> None:
    error = steer_error(tmp_path, driver)
    assert error.capability == "unstable"
    assert "unstable=True" in str(error)


@pytest.mark.parametrize("driver", ["blocking", "async"])
@pytest.mark.parametrize("supported", [False, "true", None])
def test_not_advertised_is_a_capability_error(
    tmp_path: Path, driver: str, supported: object
) -> None:
    error = steer_error(tmp_path, driver, unstable=True, supported=supported)
    assert error.capability == "_meta.steering"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"outcome": "x" * 100_000}, "x" * 256),
        ({"outcome": {"nested": ["x"] * 1000}}, ""),
        ({"outcome": 7}, ""),
        ({}, ""),
    ],
)
def test_a_hostile_outcome_is_bounded(tmp_path: Path, answer: object, expected: str) -> None:
    args, log = script(tmp_path, wait=True, answer=answer)

    async def main() -> tuple[str, acp.TurnResult]:
        async with acp.AsyncClient(sys.executable, **options(args, unstable=True)) as client:
            await client.start(new_session=False)
            session = await client.new_session()
            turn = asyncio.create_task(session.prompt("go"))
            while not sent(log, "session/prompt"):
                await asyncio.sleep(0.01)
            outcome = await session.steer("left")
            return outcome, await asyncio.wait_for(turn, 10)

    outcome, turn = asyncio.run(main())
    assert outcome == expected
    assert turn.response.endswith("steered: left")
