"""A v2 agent that bends the rules: what the client does with it (both clients)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import acp_fast as acp
import pytest

from .conftest import RUNNING, Agent, V2Factory, idle, text

TIMEOUT = 20


def update(body: dict[str, Any]) -> dict[str, Any]:
    return {"update": body}


def test_an_idle_of_another_session_does_not_end_the_turn(v2_client: V2Factory) -> None:
    foreign = {
        "session": "s2",
        "update": {"sessionUpdate": "state_update", "state": "idle", "stopReason": "refusal"},
    }
    turn = [RUNNING, foreign, update(text("mine", "a1")), idle("end_turn")]
    client, _ = v2_client({"turns": {"go": turn}})
    client.start(timeout=TIMEOUT)
    other = client.new_session()
    assert other.session_id == "s2"
    result = client.default_session.prompt("go", timeout=TIMEOUT)
    assert (result.response, result.stop_reason) == ("mine", "end_turn")


def test_requires_action_then_idle_ends_the_turn(v2_client: V2Factory) -> None:
    waiting = update({"sessionUpdate": "state_update", "state": "requires_action"})
    client, _ = v2_client({"turns": {"go": [waiting, idle("refusal")]}})
    client.start(timeout=TIMEOUT)
    assert client.default_session.prompt("go", timeout=TIMEOUT).stop_reason == "refusal"


def test_an_odd_stop_reason_or_state_is_not_an_error(v2_client: V2Factory) -> None:
    weird_state = update({"sessionUpdate": "state_update", "state": "_paused"})
    odd_idle = update({"sessionUpdate": "state_update", "state": "idle", "stopReason": 7})
    client, _ = v2_client({"turns": {"go": [RUNNING, weird_state, odd_idle]}})
    client.start(timeout=TIMEOUT)
    result = client.default_session.prompt("go", timeout=TIMEOUT)
    assert isinstance(result.stop_reason, str)


def test_thoughts_and_user_messages_stay_out_of_the_reply(v2_client: V2Factory) -> None:
    user = update(
        {
            "sessionUpdate": "user_message",
            "messageId": "u1",
            "content": [{"type": "text", "text": "question"}],
        }
    )
    thought = update(
        {
            "sessionUpdate": "agent_thought",
            "messageId": "t1",
            "content": [{"type": "text", "text": "hmm"}],
        }
    )
    turn = [RUNNING, user, thought, update(text("answer", "a1")), idle()]
    client, _ = v2_client({"turns": {"go": turn}})
    client.start(timeout=TIMEOUT)
    assert client.default_session.prompt("go", timeout=TIMEOUT).response == "answer"


def test_turns_after_a_late_acknowledgement_are_unaffected(v2_client: V2Factory) -> None:
    # Without an "ack" step the acknowledgement comes after the turn's idle.
    turn = [RUNNING, update(text("t$T", "a$T")), idle()]
    client, _ = v2_client({"turns": {"go": turn}})
    client.start(timeout=TIMEOUT)
    session = client.default_session
    assert [session.prompt("go", timeout=TIMEOUT).response for _ in range(3)] == [
        "t1",
        "t2",
        "t3",
    ]


def test_an_agent_that_dies_mid_turn_fails_the_call(v2_client: V2Factory) -> None:
    client, _ = v2_client({"turns": {"die": [RUNNING, {"exit": 3}]}})
    client.start(timeout=TIMEOUT)
    with pytest.raises(acp.AgentProtocolError):
        client.default_session.prompt("die", timeout=TIMEOUT)


def test_an_error_answer_to_the_prompt_fails_the_call(v2_client: V2Factory) -> None:
    client, _ = v2_client({"turns": {"bad": [RUNNING, {"error": -32603}]}})
    client.start(timeout=TIMEOUT)
    with pytest.raises(acp.AgentProtocolError):
        client.default_session.prompt("bad", timeout=TIMEOUT)


def test_two_sessions_turns_at_once_each_end_at_their_own_idle(tmp_path: Any) -> None:
    slow = [RUNNING, update(text("slow", "a$T")), {"sleep": 0.3}, idle("end_turn")]
    agent = Agent(tmp_path, {"turns": {"slow": slow}})

    async def main() -> list[str]:
        async with acp.AsyncClient(sys.executable, agent.args, protocol="v2") as c:
            await c.start(timeout=TIMEOUT)
            second = await c.new_session()
            first = c.default_session
            assert first is not None
            results = await asyncio.gather(
                first.prompt("slow", timeout=TIMEOUT), second.prompt("slow", timeout=TIMEOUT)
            )
            return [r.response for r in results]

    assert asyncio.run(main()) == ["slow", "slow"]
