"""The typed model of ACP v2: the new updates, structured diffs, the v2 permission request,
open variants kept as values, and the fold (`SessionState`) over v2's upserts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import acp_fast as acp
import acp_fast.model as m
import pytest

DATA = Path(__file__).resolve().parents[1] / "interop" / "data" / "v2"


def line(update: dict[str, Any], session_id: str = "s1") -> str:
    params = {"sessionId": session_id, "update": update}
    return json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params})


def decode(update: dict[str, Any], strict: bool = True) -> Any:
    return m.decode_update(line(update), strict=strict)


def recorded(name: str) -> list[dict[str, Any]]:
    return [json.loads(row)["msg"] for row in (DATA / name).read_text().splitlines() if row]


@pytest.mark.parametrize("name", ["ts-sdk-2-v2.jsonl", "rust-sdk-v2.jsonl"])
def test_every_recorded_v2_update_and_permission_decodes_strictly(name: str) -> None:
    kinds = set()
    for message in recorded(name):
        if message.get("method") == "session/update":
            update = m.decode_update(json.dumps(message))
            assert not isinstance(update, m.UnknownUpdate), message
            kinds.add(type(update).__name__)
        elif message.get("method") == "session/request_permission":
            request = m.decode_permission_request(json.dumps(message))
            assert request.title == "Write hello.txt"
            assert isinstance(request.subject, m.RequestPermissionSubject)
            assert request.subject.type is m.PermissionSubjectType.TOOL_CALL
            assert isinstance(request.subject.tool_call, m.PermissionToolCall)
            assert request.to_json() == message["params"]
    assert {"StateUpdate", "UserMessage", "AgentMessageChunk"} <= kinds


@pytest.mark.parametrize(
    ("body", "cls"),
    [
        ({"sessionUpdate": "user_message", "messageId": "u1"}, m.UserMessage),
        (
            {"sessionUpdate": "agent_message", "messageId": "a1", "content": None},
            m.AgentMessage,
        ),
        ({"sessionUpdate": "agent_thought", "messageId": "t1", "content": []}, m.AgentThought),
        ({"sessionUpdate": "state_update", "state": "running"}, m.StateUpdate),
        (
            {
                "sessionUpdate": "tool_call_content_chunk",
                "toolCallId": "c1",
                "content": {"type": "content", "content": {"type": "text", "text": "x"}},
            },
            m.ToolCallContentChunk,
        ),
        (
            {
                "sessionUpdate": "plan_update",
                "plan": {"type": "items", "planId": "p", "entries": []},
            },
            m.PlanUpdate,
        ),
        (
            {"sessionUpdate": "terminal_update", "terminalId": "t", "cwd": "/w", "command": "ls"},
            m.TerminalUpdate,
        ),
        (
            {"sessionUpdate": "terminal_output_chunk", "terminalId": "t", "data": "aGk="},
            m.TerminalOutputChunk,
        ),
    ],
)
def test_each_v2_update_has_its_class_and_round_trips(body: dict[str, Any], cls: type) -> None:
    update = decode(body)
    assert type(update) is cls
    assert m.session_update_to_json(update) == body


def test_idle_carries_its_stop_reason_background_and_error() -> None:
    update = decode(
        {
            "sessionUpdate": "state_update",
            "state": "idle",
            "stopReason": "error",
            "error": {"code": -32603, "message": "boom"},
            "background": [
                {"type": "terminal", "terminalId": "t1"},
                {"type": "tool_call", "toolCallId": "c1"},
                {"type": "_vendor_job", "id": 7},
            ],
        },
        strict=False,
    )
    assert update.state is m.SessionActivity.IDLE
    assert update.stop_reason == "error"
    assert update.error == {"code": -32603, "message": "boom"}
    types = [work.type for work in update.background]
    assert types == [m.BackgroundWorkType.TERMINAL, m.BackgroundWorkType.TOOL_CALL, "_vendor_job"]


def test_unknown_states_and_update_variants_are_values_not_errors() -> None:
    custom = decode({"sessionUpdate": "state_update", "state": "_paused"})
    assert custom.state == "_paused" and not isinstance(custom.state, m.SessionActivity)
    future = decode({"sessionUpdate": "_vendor_thing", "x": 1}, strict=False)
    assert isinstance(future, m.UnknownUpdate)
    assert future.update_kind is acp.UpdateKind.UNKNOWN


DIFF = {
    "type": "diff",
    "changes": [
        {"operation": "add", "path": "/w/new.txt", "fileType": "text"},
        {"operation": "delete", "path": "/w/old.txt"},
        {"operation": "modify", "path": "/w/a.py", "mimeType": "text/x-python"},
        {"operation": "move", "oldPath": "/w/b", "path": "/w/c"},
        {"operation": "copy", "oldPath": "/w/d", "path": "/w/e", "fileType": "symlink"},
        {"operation": "_chmod", "path": "/w/f", "mode": "0755"},
    ],
    "patch": {"format": "git_patch", "text": "diff --git a/x b/x\n"},
}


def test_structured_diffs_are_typed_with_every_operation() -> None:
    body = {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "content": [DIFF]}
    update = decode(body, strict=False)
    (diff,) = update.content
    assert isinstance(diff, m.Diff)
    ops = [change.operation for change in diff.changes]
    assert ops[:5] == list(m.DiffOperation) and ops[5] == "_chmod"
    move = diff.changes[3]
    assert (move.old_path, move.path) == ("/w/b", "/w/c")
    assert diff.changes[0].file_type is m.DiffFileType.TEXT
    assert diff.patch == m.DiffPatch(format=m.DiffPatchFormat.GIT_PATCH, text=DIFF["patch"]["text"])
    assert diff.path is m.OMITTED  # v1's fields are absent in a v2 diff


def test_a_v1_diff_still_decodes_as_before() -> None:
    body = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "content": [{"type": "diff", "path": "/w/a", "oldText": "a", "newText": "b"}],
    }
    (diff,) = decode(body).content
    assert (diff.path, diff.old_text, diff.new_text, diff.changes) == ("/w/a", "a", "b", m.OMITTED)


def test_a_relative_diff_path_is_refused_strictly() -> None:
    body = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "content": [{"type": "diff", "changes": [{"operation": "add", "path": "x"}]}],
    }
    with pytest.raises(m.ProtocolDecodeError):
        decode(body)


def test_the_v2_permission_request_with_a_command_subject() -> None:
    params = {
        "sessionId": "s1",
        "title": "Run tests",
        "description": "the suite",
        "subject": {"type": "command", "command": "pytest", "cwd": "/w", "toolCallId": "c1"},
        "options": [{"optionId": "y", "name": "Yes", "kind": "allow_once"}],
    }
    message = {"jsonrpc": "2.0", "id": 3, "method": "session/request_permission", "params": params}
    request = m.decode_permission_request(json.dumps(message))
    assert (request.title, request.description) == ("Run tests", "the suite")
    assert request.subject.type is m.PermissionSubjectType.COMMAND
    assert (request.subject.command, request.subject.cwd) == ("pytest", "/w")
    assert request.tool_call is m.OMITTED
    assert request.to_json() == params  # v2's fields written back, in the wire's shape
    custom = {**params, "subject": {"type": "_mcp_elicit", "server": "x"}}
    decoded = m.decode_permission_request(custom, strict=False)
    assert decoded.subject.type == "_mcp_elicit"


def test_a_request_with_neither_tool_call_nor_title_is_still_an_error() -> None:
    params = {"sessionId": "s1", "options": [{"optionId": "y", "name": "Y", "kind": "allow_once"}]}
    with pytest.raises(m.ProtocolDecodeError):
        m.decode_permission_request(params)


# --- the fold -------------------------------------------------------------------------------


def fold(bodies: list[dict[str, Any]], version: int = 2, strict: bool = True) -> m.SessionState:
    state = m.session_update_fold(protocol_version=version)
    for body in bodies:
        state = state.apply(decode(body, strict=strict), strict=strict)
    return state


def chunk(text: str, message_id: str, kind: str = "agent_message_chunk") -> dict[str, Any]:
    return {
        "sessionUpdate": kind,
        "messageId": message_id,
        "content": {"type": "text", "text": text},
    }


def message(text: str | None, message_id: str, kind: str = "agent_message") -> dict[str, Any]:
    body: dict[str, Any] = {"sessionUpdate": kind, "messageId": message_id}
    body["content"] = None if text is None else [{"type": "text", "text": text}]
    return body


def texts(messages: Any) -> list[tuple[str, str]]:
    return [(x.message_id, "".join(b.text for b in x.blocks)) for x in messages]


def test_the_last_upsert_wins_and_later_chunks_append() -> None:
    state = fold(
        [
            chunk("Hel", "a1"),
            chunk("lo", "a1"),
            message("Hello!", "a1"),
            chunk(" More.", "a1"),
            chunk("other", "a2"),
            message("Replaced", "a1"),
        ]
    )
    assert texts(state.agent_messages) == [("a1", "Replaced"), ("a2", "other")]


def test_an_upsert_without_content_keeps_the_message_and_null_clears_it() -> None:
    state = fold([chunk("x", "a1"), {"sessionUpdate": "agent_message", "messageId": "a1"}])
    assert texts(state.agent_messages) == [("a1", "x")]
    state = fold([chunk("x", "a1"), message(None, "a1")])
    assert texts(state.agent_messages) == [("a1", "")]


def test_user_messages_and_thoughts_fold_per_id() -> None:
    state = fold(
        [
            message("hi", "u1", "user_message"),
            chunk("think", "t1", "agent_thought_chunk"),
            message("thought", "t1", "agent_thought"),
        ]
    )
    assert texts(state.user_messages) == [("u1", "hi")]
    assert texts(state.agent_thoughts) == [("t1", "thought")]


def test_activity_follows_state_updates() -> None:
    running = {"sessionUpdate": "state_update", "state": "running"}
    waiting = {"sessionUpdate": "state_update", "state": "requires_action"}
    idle = {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"}
    assert fold([]).activity is None
    assert fold([running]).activity is m.SessionActivity.RUNNING
    assert fold([running, waiting]).activity is m.SessionActivity.REQUIRES_ACTION
    state = fold([running, idle])
    assert (state.activity, state.stop_reason) == (m.SessionActivity.IDLE, "cancelled")
    assert fold([running, idle, running]).stop_reason == "cancelled"  # the last idle's


def test_v2_tool_call_updates_are_upserts_and_chunks_append_content() -> None:
    item = {"type": "content", "content": {"type": "text", "text": "out"}}
    state = fold(
        [
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c1",
                "title": "Run",
                "kind": "execute",
            },
            {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c1", "content": item},
            {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c1", "content": item},
            {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"},
            {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c2", "content": item},
        ]
    )
    first, second = state.tool_calls
    assert (first.title, first.kind, first.status) == ("Run", m.ToolKind.EXECUTE, "completed")
    assert len(first.content) == 2
    assert (second.tool_call_id, second.title, len(second.content)) == ("c2", "", 1)
    assert not state.issues


def test_in_v1_an_update_of_an_unknown_tool_call_is_still_an_issue() -> None:
    body = {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "title": "Run"}
    with pytest.raises(m.UnknownToolCall):
        fold([body], version=1)
    assert len(fold([body], version=1, strict=False).issues) == 1


def test_plan_update_sets_the_plan_and_other_plan_kinds_are_kept_out() -> None:
    entry = {"content": "step", "priority": "high", "status": "pending"}
    items = {
        "sessionUpdate": "plan_update",
        "plan": {"type": "items", "planId": "p", "entries": [entry]},
    }
    state = fold([items])
    assert state.plan is not None and [e.content for e in state.plan.entries] == ["step"]
    other = {
        "sessionUpdate": "plan_update",
        "plan": {"type": "_markdown", "planId": "p", "md": "#"},
    }
    assert fold([items, other], strict=False).plan == state.plan


def test_fold_updates_takes_the_version() -> None:
    body = {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "title": "Run"}
    updates = [decode(body)]
    assert len(m.fold_updates(updates, protocol_version=2).tool_calls) == 1
    assert len(m.fold_updates(updates, strict=False).issues) == 1


def test_a_message_upserted_many_times_stays_one_message() -> None:
    bodies = [message(f"v{i}", "a1") for i in range(2000)] + [chunk("!", "a1")]
    state = fold(bodies)
    assert texts(state.agent_messages) == [("a1", "v1999!")]


def test_an_earlier_message_upserted_keeps_its_place_and_a_branch_is_unaffected() -> None:
    base = fold([chunk("one", "a1"), chunk("two", "a2")])
    left = base.apply(decode(message("ONE", "a1")))
    right = base.apply(decode(chunk(" more", "a1")))
    assert texts(left.agent_messages) == [("a1", "ONE"), ("a2", "two")]
    assert texts(right.agent_messages) == [("a1", "one more"), ("a2", "two")]
    assert texts(base.agent_messages) == [("a1", "one"), ("a2", "two")]


def test_a_turn_s_tool_call_without_a_title_is_kept() -> None:
    from acp_fast._convert import _tool_calls

    calls = _tool_calls(
        ['{"toolCallId":"c1","status":"completed"}', '{"toolCallId":"c2","title":null}', "[1]"]
    )
    assert [(c.tool_call_id, c.title) for c in calls] == [("c1", ""), ("c2", "")]


@pytest.mark.parametrize(
    ("cls", "custom", "known"),
    [
        (m.DiffChange, {"operation": "_chmod", "path": "/w/f", "mode": "0755"}, "add"),
        (m.RequestPermissionSubject, {"type": "_mcp_elicit", "server": "x"}, "command"),
        (m.BackgroundWork, {"type": "_job", "id": 7}, "terminal"),
        (m.PlanUpdateContent, {"type": "_markdown", "planId": "p", "md": "#"}, "items"),
    ],
)
def test_strict_decoding_keeps_a_custom_variant_and_its_open_fields(
    cls: type, custom: dict[str, Any], known: str
) -> None:
    tag = next(iter(custom))
    decoded = cls.from_json(custom)  # strict: the schema allows a custom variant any field
    assert getattr(decoded, tag) == custom[tag]
    with pytest.raises(m.ProtocolDecodeError):  # a known variant still has a closed shape
        cls.from_json({**custom, tag: known, "unexpected": 1})


def test_a_custom_state_with_its_own_fields_decodes_strictly() -> None:
    update = decode({"sessionUpdate": "state_update", "state": "_compacting", "progress": 0.5})
    assert update.state == "_compacting"
    with pytest.raises(m.ProtocolDecodeError):
        decode({"sessionUpdate": "state_update", "state": "idle", "progress": 0.5})


def test_v2_config_options_decode_as_the_same_class() -> None:
    """v2 spells a config option's id `configId` and a group's `groupId`."""
    v2 = {
        "configId": "mode",
        "name": "Mode",
        "category": "mode",
        "type": "select",
        "currentValue": "ask",
        "options": [
            {"groupId": "g", "name": "G", "options": [{"value": "ask", "name": "Ask"}]},
        ],
    }
    option = m.SessionConfigOption.from_json(v2)
    assert option.id == "mode"
    assert isinstance(option.kind, m.SessionConfigSelect)
    assert option.kind.options[0].group == "g"  # type: ignore[union-attr]
    flag = m.SessionConfigOption.from_json(
        {"configId": "b", "name": "B", "type": "boolean", "currentValue": True}
    )
    assert flag.id == "b"
