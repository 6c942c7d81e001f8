"""The demo agent in ACP v2, driven directly over pipes (no acp_fast.Client involved): what it
answers to an offer of 2 and every byte of its v2 turn (the rules in its module docstring)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_demo_agent import PERMISSION_OPTIONS, Agent, _prompt, spawn

__all__ = ["spawn"]  # the fixture, used by name


def open_v2(agent: Agent, cwd: Path, offered: int = 2) -> tuple[dict[str, Any], dict[str, Any]]:
    agent.request(0, "initialize", {"protocolVersion": offered, "capabilities": {}})
    init = agent.read()["result"]
    agent.request(1, "session/new", {"cwd": str(cwd), "mcpServers": []})
    return init, agent.read()["result"]


def until_idle(agent: Agent) -> list[dict[str, Any]]:
    """Every message up to and with the `idle` state update that ends the turn."""
    messages = []
    while True:
        message = agent.read()
        messages.append(message)
        update = message.get("params", {}).get("update", {})
        if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
            return messages


def bodies(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["params"]["update"] for m in messages if m.get("method") == "session/update"]


def mode_option(current: str) -> dict[str, Any]:
    return {
        "configId": "mode",
        "name": "Mode",
        "category": "mode",
        "type": "select",
        "currentValue": current,
        "options": [{"value": "ask", "name": "Ask"}, {"value": "code", "name": "Code"}],
    }


@pytest.mark.parametrize("offered", [2, 3])
def test_an_offer_of_2_or_more_is_answered_2(spawn: Any, tmp_path: Path, offered: int) -> None:
    agent = spawn()
    init, new = open_v2(agent, tmp_path, offered)
    version = init["info"].pop("version")
    assert isinstance(version, str) and version
    assert init == {
        "protocolVersion": 2,
        "info": {"name": "acp-fast-demo", "title": "acp-fast demo agent"},
        "capabilities": {"session": {"prompt": {"embeddedContext": {}}}},
        "authMethods": [],
    }
    assert new == {"sessionId": "demo-1", "configOptions": [mode_option("ask")]}
    agent.request(2, "session/set_mode", {"sessionId": "demo-1", "modeId": "code"})
    assert agent.read()["error"]["code"] == -32601, "v2 has no set_mode"
    params = {"sessionId": "demo-1", "configId": "mode", "type": "id", "value": "code"}
    agent.request(3, "session/set_config_option", params)
    assert agent.read() == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"configOptions": [mode_option("code")]},
    }
    agent.request(4, "session/set_config_option", {**params, "value": "yolo"})
    assert agent.read()["error"]["code"] == -32602


def test_a_v2_turn(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    open_v2(agent, tmp_path)
    _prompt(agent, 2, "demo-1", "hello there")
    ack = agent.read()
    assert ack == {"jsonrpc": "2.0", "id": 2, "result": {"messageId": "msg-1"}}
    reply = "Hello! You said: hello there."
    assert bodies(until_idle(agent)) == [
        {"sessionUpdate": "state_update", "state": "running"},
        {
            "sessionUpdate": "user_message",
            "messageId": "msg-1",
            "content": [{"type": "text", "text": "hello there"}],
        },
        {
            "sessionUpdate": "agent_thought_chunk",
            "messageId": "msg-2",
            "content": {"type": "text", "text": "Thinking about: hello there"},
        },
        {
            "sessionUpdate": "plan_update",
            "plan": {
                "type": "items",
                "planId": "plan",
                "entries": [
                    {"content": "Read the prompt", "priority": "medium", "status": "pending"},
                    {"content": "Reply to the user", "priority": "medium", "status": "pending"},
                ],
            },
        },
        *[
            {
                "sessionUpdate": "agent_message_chunk",
                "messageId": "msg-3",
                "content": {"type": "text", "text": text},
            }
            for text in ["Hello! ", "You ", "said: ", "hello ", "there."]
        ],
        {
            "sessionUpdate": "agent_message",
            "messageId": "msg-3",
            "content": [{"type": "text", "text": reply}],
        },
        {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"},
    ]
    _prompt(agent, 3, "demo-1", "again")
    assert agent.read()["result"] == {"messageId": "msg-4"}, "message ids count on"


@pytest.mark.parametrize(
    ("option", "status", "sentence"),
    [
        ("allow", "completed", "I wrote hello.txt."),
        ("reject", "failed", "I did not write hello.txt: permission was rejected."),
    ],
)
def test_a_v2_permission_between_requires_action_and_running(
    spawn: Any, tmp_path: Path, option: str, status: str, sentence: str
) -> None:
    agent = spawn()
    open_v2(agent, tmp_path)
    _prompt(agent, 2, "demo-1", "write hello.txt")
    head = []
    while (message := agent.read()).get("method") != "session/request_permission":
        head.append(message)
    assert [u["sessionUpdate"] for u in bodies(head)][-2:] == ["tool_call_update", "state_update"]
    assert bodies(head)[-2] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-1",
        "title": "Write hello.txt",
        "kind": "edit",
        "status": "pending",
        "locations": [{"path": str(tmp_path / "hello.txt")}],
    }
    assert bodies(head)[-1] == {"sessionUpdate": "state_update", "state": "requires_action"}
    tool_call = {"toolCallId": "call-1", "title": "Write hello.txt", "kind": "edit"}
    assert message["params"] == {
        "sessionId": "demo-1",
        "title": "Write hello.txt",
        "subject": {"type": "tool_call", "toolCall": {**tool_call, "status": "pending"}},
        "options": PERMISSION_OPTIONS,
    }
    outcome = {"outcome": "selected", "optionId": option}
    agent.send({"jsonrpc": "2.0", "id": "perm-1", "result": {"outcome": outcome}})
    tail = bodies(until_idle(agent))
    assert tail[:2] == [
        {"sessionUpdate": "state_update", "state": "running"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": status},
    ]
    assert tail[-2]["content"][0]["text"].endswith(sentence)
    assert tail[-1]["stopReason"] == "end_turn"


def test_v2_cancel_goes_idle_cancelled(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    open_v2(agent, tmp_path)
    _prompt(agent, 2, "demo-1", "write x.md")
    while agent.read().get("method") != "session/request_permission":
        pass
    agent.notify("session/cancel", {"sessionId": "demo-1"})
    assert bodies(until_idle(agent)) == [
        {"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "failed"},
        {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"},
    ]


def test_v2_code_mode_by_config_option_skips_the_question(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    open_v2(agent, tmp_path)
    params = {"sessionId": "demo-1", "configId": "mode", "type": "id", "value": "code"}
    agent.request(2, "session/set_config_option", params)
    agent.read()
    _prompt(agent, 3, "demo-1", "write y.md")
    agent.read()  # the acknowledgement
    turn = until_idle(agent)
    assert all(m.get("method") == "session/update" for m in turn)
    assert bodies(turn)[-2]["content"][0]["text"].endswith("I wrote y.md.")


def test_v2_flood_mode(spawn: Any, tmp_path: Path) -> None:
    agent = spawn("--flood-count", "600", "--flood-bytes", "10")
    open_v2(agent, tmp_path)
    for request_id, message_id in ((2, "msg-2"), (3, "msg-4")):
        _prompt(agent, request_id, "demo-1", "go")
        assert "messageId" in agent.read()["result"]
        turn = bodies(until_idle(agent))
        assert [u["sessionUpdate"] for u in turn[:2]] == ["state_update", "user_message"]
        chunks = turn[2:-1]
        assert len(chunks) == 600
        assert {c["messageId"] for c in chunks} == {message_id}
        assert {c["content"]["text"] for c in chunks} == {"abcdefghij"}
        assert turn[-1] == {
            "sessionUpdate": "state_update",
            "state": "idle",
            "stopReason": "end_turn",
        }


@pytest.mark.parametrize(("flags", "offered"), [((), 1), (("--max-protocol", "1"), 2)])
def test_an_offer_of_1_is_the_v1_agent(
    spawn: Any, tmp_path: Path, flags: tuple[str, ...], offered: int
) -> None:
    """An offer of 1, or any offer to ``--max-protocol 1``: the v1 agent."""
    agent = spawn(*flags)
    init, new = open_v2(agent, tmp_path, offered)
    assert init["protocolVersion"] == 1 and "agentCapabilities" in init
    assert "modes" in new and "configOptions" not in new
    _prompt(agent, 2, "demo-1", "hi")
    before, response = agent.read_until_response(2)
    assert response["result"] == {"stopReason": "end_turn"}
    assert all("messageId" not in m["params"]["update"] for m in before)


SCHEMA = Path(__file__).parents[1] / "schema" / "v2" / "schema.json"


def test_every_v2_line_is_valid_by_the_vendored_schema(spawn: Any, tmp_path: Path) -> None:
    """Each answer, update and request the demo agent writes in v2 is what schema/v2 says
    (the session update union's `other` branch excludes the known names, so a known update
    with a wrong field is caught)."""
    jsonschema = pytest.importorskip("jsonschema")
    import json

    schema = json.loads(SCHEMA.read_text())

    validators: dict[str, Any] = {}

    def check(value: Any, name: str) -> None:
        if name not in validators:
            root = {"$defs": schema["$defs"], "$ref": f"#/$defs/{name}"}
            validators[name] = jsonschema.Draft202012Validator(root)
        validators[name].validate(value)

    agent = spawn()
    init, new = open_v2(agent, tmp_path)
    check(init, "InitializeResponse")
    check(new, "NewSessionResponse")
    params = {"sessionId": "demo-1", "configId": "mode", "type": "id", "value": "ask"}
    agent.request(2, "session/set_config_option", params)
    check(agent.read()["result"], "SetSessionConfigOptionResponse")
    seen: set[str] = set()
    for request_id, text, answer in [
        (3, "hello there", None),
        (4, "write hello.txt", "allow"),
        (5, "write notes.md", "reject"),
        (6, "write later.md", "cancel"),
    ]:
        _prompt(agent, request_id, "demo-1", text)
        check(agent.read()["result"], "PromptResponse")
        while True:
            message = agent.read()
            if message.get("method") == "session/request_permission":
                check(message["params"], "RequestPermissionRequest")
                if answer == "cancel":
                    agent.notify("session/cancel", {"sessionId": "demo-1"})
                else:
                    outcome = {"outcome": "selected", "optionId": answer}
                    agent.send(
                        {"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}}
                    )
                continue
            check(message["params"], "UpdateSessionNotification")
            update = message["params"]["update"]
            seen.add(update["sessionUpdate"])
            if update["sessionUpdate"] == "state_update" and update["state"] == "idle":
                break
    assert seen == {
        "state_update",
        "user_message",
        "agent_thought_chunk",
        "plan_update",
        "tool_call_update",
        "agent_message_chunk",
        "agent_message",
    }


def test_set_mode_in_v2_goes_through_the_mode_config_option(tmp_path: Path) -> None:
    """The README's `set_mode("code")` on the demo agent in v2: the session's modes come from
    its `mode` config option and are set through it, by a request v2's schema accepts."""
    import json

    import acp_fast as acp

    jsonschema = pytest.importorskip("jsonschema")
    sent: list[str] = []

    class Tap:
        def on_update(self, update: acp.Update) -> None:
            pass

        def on_sent(self, line: str) -> None:
            sent.append(line)

    with acp.Client(
        *acp.demo_agent_command(), protocol="v2", observer=Tap(), cwd=tmp_path
    ) as client:
        client.start()
        session = client.default_session
        assert session is not None
        assert session.modes.current == "ask"
        session.set_mode("code")
        assert session.modes.current == "code"
        result = session.prompt("edit c.py", timeout=10)  # code mode: nothing asked
        assert result.response.endswith("I wrote c.py.")
    (line,) = [line for line in sent if '"session/set_config_option"' in line]
    schema = json.loads(SCHEMA.read_text())
    root = {"$defs": schema["$defs"], "$ref": "#/$defs/SetSessionConfigOptionRequest"}
    jsonschema.validate(json.loads(line)["params"], root)
