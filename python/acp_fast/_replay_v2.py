"""ACP v2 (preview) in the replay agent (`acp_fast.replay_agent`): which version a recording
speaks, whether its last turn ended, and what the replay makes up in v2 (a journal without the
wire tap gets a handshake and a turn around its updates; prompts past the recording get a turn
of their own). A v2 turn ends at the session's `state_update` `idle`, not at the answer to
`session/prompt`, which only acknowledges it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

# Updates only ACP v2 has: a journal holding one was recorded by a v2 client.
V2_UPDATES = frozenset(
    {
        "state_update",
        "user_message",
        "agent_message",
        "agent_thought",
        "tool_call_content_chunk",
        "plan_update",
        "terminal_update",
        "terminal_output_chunk",
    }
)

Message = tuple[str, dict[str, Any]]  # (direction "->" or "<-", the message)


class Recorded(Protocol):
    """A recorded event (`replay_agent.Entry`)."""

    @property
    def direction(self) -> str: ...
    @property
    def message(self) -> Any: ...


def update_body(message: Any) -> dict[str, Any]:
    """A `session/update` notification's update object, else {}."""
    params = message.get("params") if isinstance(message, dict) else None
    body = params.get("update") if isinstance(params, dict) else None
    return body if isinstance(body, dict) else {}


def is_v2_update(message: Any) -> bool:
    """An update of a kind only v2 has, or with v2's `messageId`."""
    body = update_body(message)
    return body.get("sessionUpdate") in V2_UPDATES or "messageId" in body


def recorded_version(entries: Sequence[Recorded]) -> int:
    """The protocol version the recorded `initialize` was answered with (1 when none)."""
    asked = {
        json.dumps(e.message["id"])
        for e in entries
        if e.direction == "->"
        and isinstance(e.message, dict)
        and e.message.get("method") == "initialize"
        and "id" in e.message
    }
    for entry in entries:
        message = entry.message
        if entry.direction == "<-" and isinstance(message, dict) and "method" not in message:
            if json.dumps(message.get("id")) in asked:
                result = message.get("result")
                version = result.get("protocolVersion") if isinstance(result, dict) else None
                return 2 if version == 2 and not isinstance(version, bool) else 1
    return 1


def last_turn_ended(entries: Sequence[Recorded]) -> bool:
    """The recording's last prompt turn went `idle` after its `running` (or
    `requires_action`); True when nothing was prompted."""
    last = max(
        (
            index
            for index, e in enumerate(entries)
            if e.direction == "->"
            and isinstance(e.message, dict)
            and e.message.get("method") == "session/prompt"
        ),
        default=None,
    )
    if last is None:
        return True
    began = False
    for entry in entries[last + 1 :]:
        found = update_body(entry.message).get("state") if entry.direction == "<-" else None
        if found in ("running", "requires_action"):
            began = True
        elif found == "idle" and began:
            return True
    return False


def state_update(session_id: str, state: str, stop_reason: str | None = None) -> dict[str, Any]:
    """A `state_update` notification of `session_id`."""
    body: dict[str, Any] = {"sessionUpdate": "state_update", "state": state}
    if stop_reason is not None:
        body["stopReason"] = stop_reason
    params = {"sessionId": session_id, "update": body}
    return {"jsonrpc": "2.0", "method": "session/update", "params": params}


def made_up_turn(
    session_id: str, updates: Sequence[Recorded]
) -> tuple[list[Message], list[Message]]:
    """For a v2 journal without the wire tap: what goes before its recorded updates (the
    handshake, the prompt and its acknowledgement, `running` unless they hold one) and after
    them (`idle` with `end_turn` unless they end idle)."""

    def request(number: int, method: str) -> Message:
        return "->", {"jsonrpc": "2.0", "id": number, "method": method}

    def answer(number: int, result: Any) -> Message:
        return "<-", {"jsonrpc": "2.0", "id": number, "result": result}

    states = [update_body(e.message).get("state") for e in updates]
    states = [state for state in states if state is not None]
    info = {"name": "acp-fast-replay", "version": "1"}
    before = [
        request(0, "initialize"),
        answer(0, {"protocolVersion": 2, "info": info, "capabilities": {"session": {}}}),
        request(1, "session/new"),
        answer(1, {"sessionId": session_id}),
        request(2, "session/prompt"),
        answer(2, {"messageId": "replay-1"}),
    ]
    if not {"running", "requires_action"} & set(states):
        before.append(("<-", state_update(session_id, "running")))
    after = (
        []
        if states and states[-1] == "idle"
        else [("<-", state_update(session_id, "idle", "end_turn"))]
    )
    return before, after


def further_turn(request_id: Any, session_id: str, number: int) -> list[dict[str, Any]]:
    """A prompt past the recording, played as a v2 turn that ends at once: acknowledged
    (``replay-N``), `running`, `idle` with `end_turn`."""
    return [
        {"jsonrpc": "2.0", "id": request_id, "result": {"messageId": f"replay-{number}"}},
        state_update(session_id, "running"),
        state_update(session_id, "idle", "end_turn"),
    ]
