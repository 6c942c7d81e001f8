"""The unstable calls behind `Client(unstable=True)` (protocol-now.md §2): `fork_session`,
`Session.set_title`, `Session.status`; each a `CapabilityError` (nothing written) when the
client was made without ``unstable=True`` or the agent does not advertise it; both drivers."""

from __future__ import annotations

import inspect
from typing import Any

import acp_fast as acp
import pytest

ALL = {"sessionCapabilities": {"fork": {}, "title": {}, "status": {}, "systemPrompt": {}}}
MODES = {
    "currentModeId": "ask",
    "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}],
}


def done(run: Any, value: Any) -> Any:
    """A call's value on either driver (`SyncOverAsync` hands back the coroutine of a method
    it does not wrap)."""
    if inspect.iscoroutine(value):
        value = run.client._run(value)
        if isinstance(value, acp.AsyncSession):
            return run.client._view(value)
    return value


def fork(run: Any, *args: Any, **kwargs: Any) -> Any:
    return done(run, run.client.fork_session(*args, **kwargs))


def test_fork_opens_a_new_session(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(agent_caps=ALL, session={"modes": MODES}, unstable=True)
    forked = fork(run, "s1", system_prompt="Summarise.")
    assert forked.session_id == "fork1"
    assert forked.modes.current == "ask" and [m.id for m in forked.modes.available] == [
        "ask",
        "code",
    ]
    assert forked in run.client.sessions
    (request,) = run.sent("session/fork")
    params = request["params"]
    assert params["sessionId"] == "s1" and params["cwd"] and params["mcpServers"] == []
    assert params["systemPrompt"]["content"][0]["text"] == "Summarise."
    result = forked.prompt("hi")
    assert result.stop_reason == "end_turn"
    (prompt,) = [m for m in run.sent("session/prompt") if m["params"]["sessionId"] == "fork1"]
    assert prompt


def test_set_title_returns_the_stored_title(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(agent_caps=ALL, unstable=True)
    session = run.client.default_session
    assert done(run, session.set_title("  My \x1b[31mtitle ")) == "My \x1b[31mtitle"  # trimmed
    (request,) = run.sent("session/set_title")
    assert request["params"] == {"sessionId": "s1", "title": "  My \x1b[31mtitle "}


def test_status(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(agent_caps=ALL, unstable=True)
    assert done(run, run.client.default_session.status()) == "idle"  # the script's answer
    (request,) = run.sent("session/status")
    assert request["params"] == {"sessionId": "s1"}


@pytest.mark.parametrize(
    "call",
    [
        lambda run: fork(run, "s1"),
        lambda run: done(run, run.client.default_session.set_title("t")),
        lambda run: done(run, run.client.default_session.status()),
    ],
    ids=["fork", "set_title", "status"],
)
def test_refused_without_unstable(agent, call) -> None:  # type: ignore[no-untyped-def]
    run = agent(agent_caps=ALL)
    before = len(run.sent())
    with pytest.raises(acp.CapabilityError, match="unstable=True") as caught:
        call(run)
    assert caught.value.capability == "unstable"
    assert len(run.sent()) == before


@pytest.mark.parametrize(
    ("call", "capability"),
    [
        (lambda run: fork(run, "s1"), "sessionCapabilities.fork"),
        (
            lambda run: done(run, run.client.default_session.set_title("t")),
            "sessionCapabilities.title",
        ),
        (lambda run: done(run, run.client.default_session.status()), "sessionCapabilities.status"),
    ],
    ids=["fork", "set_title", "status"],
)
def test_refused_when_the_agent_does_not_advertise_it(agent, call, capability: str) -> None:  # type: ignore[no-untyped-def]
    run = agent(agent_caps={"sessionCapabilities": {"fork": None}}, unstable=True)
    before = len(run.sent())
    with pytest.raises(acp.CapabilityError) as caught:
        call(run)
    assert caught.value.capability == capability
    assert len(run.sent()) == before


def test_unstable_is_a_bool(agent) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match="unstable must be a bool"):
        agent(unstable="yes", start=False)


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        ({"status": "open"}, "open"),
        ({"status": "_vendor.warm"}, "_vendor.warm"),
        ({"status": 5}, "saved"),
        ({}, "saved"),
        ({"status": ["open"]}, "saved"),
    ],
)
def test_status_answers(agent, answer: object, status: str) -> None:  # type: ignore[no-untyped-def]
    run = agent(agent_caps=ALL, unstable=True, status=answer)
    assert done(run, run.client.default_session.status()) == status


@pytest.mark.parametrize("answer", [{}, {"title": 5}])
def test_a_title_the_agent_does_not_echo_is_the_one_sent(agent, answer: object) -> None:  # type: ignore[no-untyped-def]
    run = agent(agent_caps=ALL, unstable=True, title_answer=answer)
    assert done(run, run.client.default_session.set_title("x" * 100_000)) == "x" * 100_000


def test_a_result_that_is_not_an_object_is_a_protocol_error(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(agent_caps=ALL, unstable=True, title_answer=[], status=[])
    with pytest.raises(acp.AgentProtocolError, match="not a JSON object"):
        done(run, run.client.default_session.set_title("t"))
    with pytest.raises(acp.AgentProtocolError, match="not a JSON object"):
        done(run, run.client.default_session.status())


def test_each_fork_is_a_new_session(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(agent_caps=ALL, unstable=True)
    fork(run, "s1")
    fork(run, "s1")  # fork2: a new id each time
    assert [s.session_id for s in run.client.sessions] == ["s1", "fork1", "fork2"]
