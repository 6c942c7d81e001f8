"""ACP v2 end to end against the scripted v2 agent, with both clients: negotiation, the turn's
end at `idle`, the reply per message, upserts, permissions, cancel, resume with replay, the calls
v2 lacks, the host side not offered, and `Session.state`."""

from __future__ import annotations

import logging
import threading
from typing import Any

import acp_fast as acp
import acp_fast.model as m
import pytest

from .conftest import RUNNING, V2Factory, idle, text

TIMEOUT = 20


def turn_of(*steps: dict[str, Any], reason: str | None = "end_turn") -> list[dict[str, Any]]:
    return [RUNNING, *steps, idle(reason)]


def update(body: dict[str, Any]) -> dict[str, Any]:
    return {"update": body}


def whole(content: str | None, message_id: str, kind: str = "agent_message") -> dict[str, Any]:
    body: dict[str, Any] = {"sessionUpdate": kind, "messageId": message_id}
    if content is not None:
        body["content"] = [{"type": "text", "text": content}]
    return update(body)


def tool(**fields: Any) -> dict[str, Any]:
    return update({"sessionUpdate": "tool_call_update", **fields})


ASK = {
    "ask": {
        "title": "Write hello.txt",
        "subject": {
            "type": "tool_call",
            "toolCall": {"toolCallId": "c1", "title": "Write hello.txt", "kind": "edit"},
        },
        "options": [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ],
    }
}


def initialize_params(agent: Any) -> dict[str, Any]:
    (first,) = [x for x in agent.received() if x.get("method") == "initialize"]
    params: dict[str, Any] = first["params"]
    return params


# --- negotiation ------------------------------------------------------------------------------


def test_v2_is_agreed_and_offered_as_v2(v2_client: V2Factory) -> None:
    client, agent = v2_client()
    assert client.protocol_version is None
    client.start(timeout=TIMEOUT)
    assert client.protocol_version == 2
    assert client.initialize.agent_info["name"] == "v2-scripted"
    params = initialize_params(agent)
    assert params["protocolVersion"] == 2 and "info" in params
    assert "fs" not in params.get("capabilities", {})
    assert "terminal" not in params.get("capabilities", {})


def test_auto_gets_v2_from_a_v2_agent_and_v1_from_a_v1_agent(v2_client: V2Factory) -> None:
    client, _ = v2_client(protocol="auto")
    client.start(timeout=TIMEOUT)
    assert client.protocol_version == 2
    old, agent = v2_client({"only_v1": True}, protocol="auto")
    old.start(timeout=TIMEOUT)
    assert old.protocol_version == 1
    assert initialize_params(agent)["protocolVersion"] == 2  # offered 2, went on in v1
    command, args = acp.demo_agent_command()  # made a v1-only agent:
    with acp.Client(command, [*args, "--max-protocol", "1"], protocol="auto") as demo:
        demo.start(timeout=TIMEOUT)
        assert demo.protocol_version == 1
        assert demo.prompt("hello")


def test_v2_refuses_an_agent_that_answers_1_and_says_what_to_use(v2_client: V2Factory) -> None:
    client, _ = v2_client({"only_v1": True})
    with pytest.raises(acp.AgentProtocolError) as raised:
        client.start(timeout=TIMEOUT)
    assert 'protocol="auto"' in str(raised.value)


def test_v1_is_unchanged(v2_client: V2Factory) -> None:
    client, agent = v2_client({"speaks_v1": True}, protocol="v1")
    client.start(timeout=TIMEOUT)
    assert client.protocol_version == 1
    assert initialize_params(agent)["protocolVersion"] == 1


# --- a turn -----------------------------------------------------------------------------------


def test_the_reply_is_per_message_the_last_upsert_wins_later_chunks_append(
    v2_client: V2Factory,
) -> None:
    turn = turn_of(
        update(text("Hel", "a1")),
        update(text("lo", "a1")),
        whole("Hello!", "a1"),
        update(text(" More.", "a1")),
        update(text(" Second.", "a2")),
        whole(None, "a2"),  # no content: no change
    )
    client, _ = v2_client({"turns": {"hello": turn}})
    client.start(timeout=TIMEOUT)
    result = client.default_session.prompt("hello", timeout=TIMEOUT)
    assert result.stop_reason == "end_turn"
    assert result.response == "Hello! More. Second."


def test_an_idle_before_the_turn_s_running_is_not_its_end(v2_client: V2Factory) -> None:
    # simple_agent_v2 reports idle for the session before its first turn's running.
    turn = [idle(None), RUNNING, update(text("late", "a1")), idle("max_tokens")]
    client, _ = v2_client({"turns": {"go": turn}})
    client.start(timeout=TIMEOUT)
    result = client.default_session.prompt("go", timeout=TIMEOUT)
    assert (result.response, result.stop_reason) == ("late", "max_tokens")


def test_the_acknowledgement_may_come_first_or_never_and_a_missing_reason_is_end_turn(
    v2_client: V2Factory,
) -> None:
    first = [RUNNING, {"ack": True}, update(text("x", "a1")), idle(None)]
    client, _ = v2_client({"turns": {"first": first}})
    client.start(timeout=TIMEOUT)
    result = client.default_session.prompt("first", timeout=TIMEOUT)
    assert (result.response, result.stop_reason) == ("x", "end_turn")


def test_tool_calls_are_upserts_with_streamed_content_and_plan_update_is_the_plan(
    v2_client: V2Factory,
) -> None:
    item = {"type": "content", "content": {"type": "text", "text": "out"}}
    entry = {"content": "step one", "priority": "high", "status": "pending"}
    turn = turn_of(
        tool(toolCallId="c1", title="Run tests", kind="execute", status="pending"),
        update({"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c1", "content": item}),
        tool(toolCallId="c1", status="completed"),
        update(
            {
                "sessionUpdate": "plan_update",
                "plan": {"type": "items", "planId": "p1", "entries": [entry]},
            }
        ),
    )
    client, _ = v2_client({"turns": {"tools": turn}}, session_state="strict")
    client.start(timeout=TIMEOUT)
    session = client.default_session
    result = session.prompt("tools", timeout=TIMEOUT)
    (call,) = result.tool_calls
    assert (call.title, call.status) == ("Run tests", "completed")
    assert [e.content for e in result.plan] == ["step one"]
    state = session.state
    (folded,) = state.tool_calls
    assert (folded.title, folded.status, len(folded.content)) == ("Run tests", "completed", 1)
    assert state.plan.entries[0].content == "step one"
    assert state.activity is m.SessionActivity.IDLE and state.stop_reason == "end_turn"


def test_the_session_state_folds_messages_like_the_reply(v2_client: V2Factory) -> None:
    turn = turn_of(
        whole("hello", "u1", "user_message"),
        update(text("draft", "a1")),
        whole("final", "a1"),
    )
    client, _ = v2_client({"turns": {"hello": turn}}, session_state="lenient")
    client.start(timeout=TIMEOUT)
    session = client.default_session
    session.prompt("hello", timeout=TIMEOUT)
    state = session.state
    assert [(x.message_id, x.blocks[0].text) for x in state.agent_messages] == [("a1", "final")]
    assert [x.message_id for x in state.user_messages] == ["u1"]
    assert not state.issues


def test_new_update_kinds_reach_the_observer_with_their_text(v2_client: V2Factory) -> None:
    seen: list[acp.Update] = []
    turn = turn_of(whole("Hi", "a1"), update({"sessionUpdate": "_vendor_thing", "x": 1}))
    client, _ = v2_client({"turns": {"hi": turn}}, observer=acp.Observer(on_update=seen.append))
    client.start(timeout=TIMEOUT)
    client.default_session.prompt("hi", timeout=TIMEOUT)
    kinds = [(u.kind, u.text) for u in seen]
    assert (acp.UpdateKind("state_update"), "running") in kinds
    assert (acp.UpdateKind("agent_message"), "Hi") in kinds
    assert (acp.UpdateKind("state_update"), "idle") in kinds
    assert (acp.UpdateKind.UNKNOWN, "") in kinds
    sequences = [u.update_sequence for u in seen]
    assert sequences == sorted(sequences) and len(set(sequences)) == len(sequences)


# --- permissions and cancel -------------------------------------------------------------------


def test_a_v2_permission_request_is_decided_by_the_rules_and_decodes(v2_client: V2Factory) -> None:
    asked: list[acp.PermissionRequest] = []
    turn = turn_of(update({"sessionUpdate": "state_update", "state": "requires_action"}), ASK)
    policy = acp.PermissionPolicy(allow=[acp.PermissionRule(kind="edit")])
    observer = acp.Observer(on_permission_commit=asked.append)
    client, _ = v2_client({"turns": {"write": turn}}, permission_policy=policy, observer=observer)
    client.start(timeout=TIMEOUT)
    result = client.default_session.prompt("write", timeout=TIMEOUT)
    assert result.response == "outcome allow"
    (request,) = asked
    assert request.title == "Write hello.txt" and request.tool_call_id == "c1"
    typed = request.decode()
    assert typed.title == "Write hello.txt"
    assert typed.subject.type is m.PermissionSubjectType.TOOL_CALL


def test_a_timed_out_turn_is_cancelled_and_ends_at_its_idle(v2_client: V2Factory) -> None:
    turn = [RUNNING, update(text("tick", "a1")), {"wait_cancel": True}, idle("cancelled")]
    client, agent = v2_client({"turns": {"slow": turn}}, cancel_grace=10.0)
    client.start(timeout=TIMEOUT)
    with pytest.raises(acp.TurnTimeout) as raised:
        client.default_session.prompt("slow", timeout=0.5)
    assert raised.value.result is not None
    assert raised.value.result.stop_reason == "cancelled"
    assert agent.methods().count("session/cancel") == 1


def test_cancel_from_another_thread_answers_a_pending_permission_cancelled(
    v2_client: V2Factory,
) -> None:
    turn = [RUNNING, ASK, {"wait_cancel": True}, idle("cancelled")]
    holder: dict[str, Any] = {}
    started = threading.Event()

    def on_permission(request: acp.PermissionRequest) -> None:
        started.set()
        holder["session"].cancel()
        return None

    client, _ = v2_client(
        {"turns": {"ask": turn}}, observer=acp.Observer(on_permission=on_permission)
    )
    client.start(timeout=TIMEOUT)
    holder["session"] = client.default_session
    result = client.default_session.prompt("ask", timeout=TIMEOUT)
    assert result.stop_reason == "cancelled"
    assert "outcome cancelled" in result.response


# --- calls v2 lacks, and resume ---------------------------------------------------------------


def test_load_session_and_set_mode_name_acp_v2(v2_client: V2Factory) -> None:
    client, _ = v2_client()
    client.start(timeout=TIMEOUT)
    with pytest.raises(acp.CapabilityError) as raised:
        client.load_session("s9")
    assert raised.value.capability == "session/load" and "ACP v2" in str(raised.value)
    with pytest.raises(acp.CapabilityError) as mode:
        client.default_session.set_mode("code")
    assert "ACP v2" in str(mode.value)


def test_resume_with_replay_from_start_delivers_the_replay_first(v2_client: V2Factory) -> None:
    seen: list[acp.Update] = []
    replay = [whole("old question", "u0", "user_message"), whole("old answer", "a0")]
    client, agent = v2_client(
        {"replay": replay}, observer=acp.Observer(on_update=seen.append), session_state="strict"
    )
    client.start(timeout=TIMEOUT)
    session = client.resume_session("s7", replay_from="start")
    assert [u.text for u in seen if u.session_id == "s7"] == ["old question", "old answer"]
    assert [x.blocks[0].text for x in session.state.agent_messages] == ["old answer"]
    (resume,) = [x for x in agent.received() if x.get("method") == "session/resume"]
    assert resume["params"]["replayFrom"] == {"type": "start"}
    plain = client.resume_session("s8")
    assert plain.session_id == "s8"
    (second,) = [
        x
        for x in agent.received()
        if x.get("method") == "session/resume" and x["params"]["sessionId"] == "s8"
    ]
    assert "replayFrom" not in second["params"]


def test_replay_from_start_in_v1_is_a_capability_error(v2_client: V2Factory) -> None:
    client, _ = v2_client({"speaks_v1": True}, protocol="v1")
    client.start(timeout=TIMEOUT)
    with pytest.raises(acp.CapabilityError) as raised:
        client.resume_session("s1", replay_from="start")
    assert "ACP v1" in str(raised.value) and "load_session" in str(raised.value)


# --- the host side ----------------------------------------------------------------------------


def test_auto_with_a_v2_agent_offers_no_host_side_and_says_so(
    v2_client: V2Factory, caplog: Any
) -> None:
    read = {"request": {"method": "fs/read_text_file", "params": {"sessionId": "$S", "path": "/x"}}}
    turn = turn_of(read)
    client, agent = v2_client(
        {"turns": {"read": turn}}, protocol="auto", capabilities=acp.ClientCapabilityConfig()
    )
    with caplog.at_level(logging.WARNING, logger="acp_fast"):
        client.start(timeout=TIMEOUT)
    assert client.protocol_version == 2 and client.serves_host is False
    assert any("no host side" in r.getMessage() for r in caplog.records)
    params = initialize_params(agent)
    assert "fs" not in params["capabilities"] and "terminal" not in params["capabilities"]
    result = client.default_session.prompt("read", timeout=TIMEOUT)
    assert result.response == "error -32601"


def test_auto_with_a_v1_agent_serves_the_host_side(v2_client: V2Factory) -> None:
    client, _ = v2_client(
        {"only_v1": True}, protocol="auto", capabilities=acp.ClientCapabilityConfig()
    )
    client.start(timeout=TIMEOUT)
    assert client.protocol_version == 1 and client.serves_host is True
