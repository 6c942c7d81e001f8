"""ACP v2 (preview) messages for the agents acp-fast ships and tests with (the demo agent, the
replay agent, the scripted test agents), standard library only.

The agents keep their v1 logic and speak v2 by encoding: `negotiate` picks the version as the
SDKs do, `initialize_result` and `permission_params` build v2's shapes, and `V2Turn` turns the
v1 updates a turn would send into v2's (chunks carry a ``messageId``, ``tool_call`` becomes a
``tool_call_update`` upsert, ``plan`` a ``plan_update``) between the acknowledgement
``{messageId}`` with ``state_update`` ``running`` and the ``state_update`` ``idle`` that ends the
turn with its stop reason (schema/v2/schema.json).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

#: The updates a v1 agent streams text with; in v2 each carries the message's id.
CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")


def negotiate(params: Any, highest: int = 2) -> int:
    """The version an agent supporting 1 up to `highest` answers to `initialize`: the offered
    one when it supports it, else its highest below (an offer of 1, or none, is v1)."""
    offered = params.get("protocolVersion") if isinstance(params, dict) else None
    if isinstance(offered, bool) or not isinstance(offered, int) or offered < 2:
        return 1
    return min(offered, highest)


def initialize_result(
    info: dict[str, Any], session: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """A v2 `initialize` answer: `session` is `capabilities.session` ({} = the baseline
    `session/*` methods)."""
    return {
        "protocolVersion": 2,
        "info": info,
        "capabilities": {"session": {} if session is None else session},
        "authMethods": [],
        **extra,
    }


def session_capabilities(v1: dict[str, Any]) -> dict[str, Any]:
    """v2's `capabilities.session` for what a v1 `agentCapabilities` advertises: prompt blocks
    (true → {}), MCP transports, `delete` and `additionalDirectories`."""
    session: dict[str, Any] = {}
    prompt = v1.get("promptCapabilities") or {}
    blocks: dict[str, Any] = {
        name: {} for name in ("image", "audio", "embeddedContext") if prompt.get(name)
    }
    if blocks:
        session["prompt"] = blocks
    mcp = v1.get("mcpCapabilities") or {}
    transports: dict[str, Any] = {name: {} for name in ("http", "sse") if mcp.get(name)}
    if transports:
        session["mcp"] = transports
    extras = v1.get("sessionCapabilities") or {}
    for name in ("delete", "additionalDirectories"):
        if name in extras:
            session[name] = {}
    return session


def auth_methods(v1: list[Any]) -> list[dict[str, Any]]:
    """v1's auth methods (``id``, ``type`` absent for the agent's own) as v2 spells them
    (``methodId``, ``type`` ``agent`` unless another)."""
    return [
        {
            "type": method.get("type") or "agent",
            "methodId": method.get("id"),
            **{k: v for k, v in method.items() if k not in ("id", "type")},
        }
        for method in v1
        if isinstance(method, dict)
    ]


def config_options(v1: list[Any]) -> list[dict[str, Any]]:
    """v1's session config options as v2 spells them: ``configId`` for ``id``, a group's
    ``groupId`` for ``group``."""

    def option(item: Any) -> Any:
        if not isinstance(item, dict):
            return item
        out = {("configId" if k == "id" else k): v for k, v in item.items()}
        values = out.get("options")
        if isinstance(values, list):
            out["options"] = [
                {("groupId" if k == "group" else k): v for k, v in value.items()}
                if isinstance(value, dict)
                else value
                for value in values
            ]
        return out

    return [option(item) for item in v1]


def permission_params(
    session_id: str, tool_call: dict[str, Any], options: list[dict[str, Any]]
) -> dict[str, Any]:
    """A v2 `session/request_permission`: the tool call's title as the request's, the call as
    its `subject`."""
    return {
        "sessionId": session_id,
        "title": str(tool_call.get("title") or "Permission"),
        "subject": {"type": "tool_call", "toolCall": tool_call},
        "options": options,
    }


def state(name: str, stop_reason: str | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": "state_update", "state": name}
    if stop_reason is not None:
        update["stopReason"] = stop_reason
    return update


def text_blocks(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


class V2Turn:
    """One prompt turn in v2: the ids of its messages and the v1 → v2 update encoding.
    `send(update)` sends one update body of the turn's session."""

    def __init__(self, send: Callable[[dict[str, Any]], None], ids: Callable[[], str]) -> None:
        self._send = send
        self._ids = ids
        self.user_id = ids()
        self._messages: dict[str, str] = {}  # v1 chunk kind -> this turn's message id
        self.texts: dict[str, str] = {}  # message id -> its text so far

    def start(self, prompt: list[Any]) -> None:
        """`running`, then the user message the acknowledgement named."""
        self._send(state("running"))
        self._send({"sessionUpdate": "user_message", "messageId": self.user_id, "content": prompt})

    def message_id(self, kind: str) -> str:
        found = self._messages.get(kind)
        if found is None:
            found = self._messages[kind] = self._ids()
        return found

    def encode(self, update: dict[str, Any]) -> dict[str, Any]:
        """A v1 update body as v2 sends it."""
        kind = update.get("sessionUpdate")
        if kind in CHUNKS:
            message = self.message_id(str(kind))
            content = update.get("content")
            if isinstance(content, dict) and isinstance(content.get("text"), str):
                self.texts[message] = self.texts.get(message, "") + content["text"]
            return {
                "sessionUpdate": kind,
                "messageId": message,
                **_without(update, "sessionUpdate"),
            }
        if kind == "tool_call":
            return {"sessionUpdate": "tool_call_update", **_without(update, "sessionUpdate")}
        if kind == "plan":
            entries = update.get("entries", [])
            return {
                "sessionUpdate": "plan_update",
                "plan": {"type": "items", "planId": "plan", "entries": entries},
            }
        return update

    def send(self, update: dict[str, Any]) -> None:
        self._send(self.encode(update))

    def final_message(self) -> None:
        """The whole agent message as one `agent_message` upsert (what both SDK agents send
        after streaming it)."""
        message = self._messages.get("agent_message_chunk")
        if message is not None:
            text = self.texts.get(message, "")
            self._send(
                {
                    "sessionUpdate": "agent_message",
                    "messageId": message,
                    "content": text_blocks(text),
                }
            )

    def end(self, stop_reason: str) -> None:
        self._send(state("idle", stop_reason))


def counter(prefix: str) -> Callable[[], str]:
    """`prefix-1`, `prefix-2`, ... on each call."""
    numbers = itertools.count(1)
    return lambda: f"{prefix}-{next(numbers)}"


def _without(mapping: dict[str, Any], key: str) -> dict[str, Any]:
    return {name: value for name, value in mapping.items() if name != key}
