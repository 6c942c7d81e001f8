"""The client system prompt (protocol-now.md §2): `systemPrompt` on session/new, load and resume,
written only when given, refused with `CapabilityError` (nothing written) unless the agent
advertises the mode; both drivers."""

from __future__ import annotations

from typing import Any

import acp_fast as acp
import pytest

APPEND = {"sessionCapabilities": {"systemPrompt": {}, "resume": {}}, "loadSession": True}
BOTH = {
    "sessionCapabilities": {"systemPrompt": {"mode": {"override": {}}}, "resume": {}},
    "loadSession": True,
}
NONE = {"sessionCapabilities": {"resume": {}}, "loadSession": True}


def open_session(run: Any, how: str, **kwargs: Any) -> Any:
    client = run.client
    if how == "new":
        return client.new_session(**kwargs)
    if how == "load":
        return client.load_session("old", **kwargs)
    return client.resume_session("old", **kwargs)


METHODS = {"new": "session/new", "load": "session/load", "resume": "session/resume"}


@pytest.mark.parametrize("how", ["new", "load", "resume"])
def test_written_only_when_given(agent, how: str) -> None:  # type: ignore[no-untyped-def]
    run = agent(agent_caps=APPEND)
    open_session(run, how)
    assert all("systemPrompt" not in m["params"] for m in run.sent(METHODS[how]))
    run2 = agent(agent_caps=APPEND)
    open_session(run2, how, system_prompt="Answer in French.\n\x1b[0m")
    (request,) = [m for m in run2.sent(METHODS[how]) if "systemPrompt" in m["params"]]
    assert request["params"]["systemPrompt"] == {
        "mode": "append",
        "content": [{"type": "text", "text": "Answer in French.\n\x1b[0m"}],
    }


@pytest.mark.parametrize("how", ["new", "load", "resume"])
def test_override_needs_its_own_capability(agent, how: str) -> None:  # type: ignore[no-untyped-def]
    run = agent(agent_caps=APPEND)
    before = len(run.sent())
    with pytest.raises(acp.CapabilityError, match=r"systemPrompt\.mode\.override"):
        open_session(run, how, system_prompt="x", system_prompt_mode="override")
    assert len(run.sent()) == before  # nothing written
    run = agent(agent_caps=BOTH)
    open_session(run, how, system_prompt="x", system_prompt_mode="override")
    request = run.sent(METHODS[how])[-1]
    assert request["params"]["systemPrompt"]["mode"] == "override"


@pytest.mark.parametrize("how", ["new", "load", "resume"])
def test_refused_when_not_advertised(agent, how: str) -> None:  # type: ignore[no-untyped-def]
    run = agent(agent_caps=NONE)
    before = len(run.sent())
    with pytest.raises(acp.CapabilityError, match=r"sessionCapabilities\.systemPrompt"):
        open_session(run, how, system_prompt="x")
    assert len(run.sent()) == before
    open_session(run, how)  # without one the call works


@pytest.mark.parametrize(
    ("caps", "advertised"),
    [
        ({"sessionCapabilities": {"systemPrompt": None}}, False),
        ({"sessionCapabilities": {"systemPrompt": {"mode": None}}}, True),
        ({"sessionCapabilities": {"systemPrompt": {"mode": {"override": None}}}}, True),
        ({"sessionCapabilities": []}, False),
    ],
)
def test_null_means_not_advertised(agent, caps: dict[str, Any], advertised: bool) -> None:  # type: ignore[no-untyped-def]
    run = agent(agent_caps=caps)
    if advertised:
        run.client.new_session(system_prompt="x")
        with pytest.raises(acp.CapabilityError):
            run.client.new_session(system_prompt="x", system_prompt_mode="override")
    else:
        with pytest.raises(acp.CapabilityError):
            run.client.new_session(system_prompt="x")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"system_prompt": 5}, TypeError, "system_prompt must be a str"),
        ({"system_prompt": b"x"}, TypeError, "system_prompt must be a str"),
        ({"system_prompt": ""}, ValueError, "must not be empty"),
        ({"system_prompt": "x", "system_prompt_mode": "replace"}, ValueError, "append"),
        ({"system_prompt": "x", "system_prompt_mode": "_vendor"}, ValueError, "override"),
    ],
)
def test_arguments_are_checked_before_anything_is_written(agent, kwargs, error, match) -> None:  # type: ignore[no-untyped-def]
    run = agent(agent_caps=BOTH)
    before = len(run.sent())
    with pytest.raises(error, match=match):
        run.client.new_session(**kwargs)
    assert len(run.sent()) == before


def test_a_mode_without_a_prompt_writes_nothing(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(agent_caps=NONE)
    run.client.new_session(system_prompt_mode="override")
    request = run.sent("session/new")[-1]
    assert "systemPrompt" not in request["params"]


def test_a_large_prompt_is_bounded_by_request_bytes(agent) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    from .conftest import LIMITS

    run = agent(agent_caps=APPEND, transfer_limits=dataclasses.replace(LIMITS, request_bytes=4096))
    with pytest.raises(acp.RequestCapacityExceeded):
        run.client.new_session(system_prompt="x" * 10_000)
    assert len(run.sent("session/new")) == 1  # start()'s own
