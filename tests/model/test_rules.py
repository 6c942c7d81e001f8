"""One test per rule of design/model.md §1-4, with the kinds and paths it names."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from acp_fast import model as m

K = m.DecodeErrorKind


def note(update: dict[str, Any]) -> dict[str, Any]:
    return {"sessionId": "s", "update": update}


def chunk(content: Any) -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "content": content}


def fails(
    cls: Any, value: Any, kind: m.DecodeErrorKind, path: str, *, strict: bool = True
) -> m.ProtocolDecodeError:
    """The error is the same from a dict, from str and from bytes (the fast path)."""
    errors = []
    for v in (value, json.dumps(value), json.dumps(value).encode()):
        with pytest.raises(m.ProtocolDecodeError) as info:
            cls.from_json(v, strict=strict)
        errors.append(info.value)
    e = errors[0]
    assert (e.kind, e.path) == (kind, path), str(e)
    assert all(
        (x.kind, x.path, x.reason, x.value) == (e.kind, e.path, e.reason, e.value) for x in errors
    )
    return e


TOOL_CALL = {
    "sessionUpdate": "tool_call",
    "toolCallId": "t1",
    "title": "Edit",
    "kind": "edit",
    "status": "pending",
    "content": [
        {"type": "diff", "path": "/a.py", "oldText": None, "newText": "x"},
        {"type": "content", "content": {"type": "text", "text": "hi"}},
        {"type": "terminal", "terminalId": "term"},
    ],
    "locations": [{"path": "/a.py", "line": 3}],
    "rawInput": {"a": [1, None]},
}


# -- §1 conventions ---------------------------------------------------------------------------


def test_classes_are_frozen_keyword_built_equal_repr_match_args_pickle_replace() -> None:
    t = m.TextContent(text="hi")
    with pytest.raises(AttributeError):
        t.text = "no"  # type: ignore[misc]
    assert t == m.TextContent(text="hi") and t != m.TextContent(text="ho")
    assert "hi" in repr(t)
    assert m.TextContent.__match_args__ == ("annotations", "text", "meta")
    match t:
        case m.TextContent(_, text):
            assert text == "hi"
    assert pickle.loads(pickle.dumps(t)) == t
    assert m.replace(t, text="ho") == m.TextContent(text="ho")
    opt = m.SessionConfigOption(id="o", name="O", kind=m.SessionConfigBoolean(current_value=True))
    with pytest.raises(AttributeError):
        opt.name = "x"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(opt)) == opt
    assert m.replace(opt, name="P").name == "P"
    assert m.SessionConfigOption.__match_args__[:2] == ("id", "name")


def test_field_names_are_snake_case_in_wire_order_meta_last_discriminator_is_the_class() -> None:
    assert m.ImageContent.__match_args__ == ("annotations", "data", "mime_type", "uri", "meta")
    img = m.ImageContent(data="QUJD", mime_type="image/png", meta={"k": 1})
    assert list(img.to_json()) == ["type", "data", "mimeType", "_meta"]
    assert m.AgentMessageChunk.SESSION_UPDATE == "agent_message_chunk"


def test_enums_are_str_enums_with_upper_case_members() -> None:
    assert m.ToolKind.SWITCH_MODE == "switch_mode"
    assert m.StopReason.MAX_TURN_REQUESTS.value == "max_turn_requests"


def test_tri_state_omitted_null_value() -> None:
    assert not m.OMITTED and m.OMITTED is m.ToolCallUpdate(tool_call_id="t").title
    u = m.ToolCallUpdate.from_json({"toolCallId": "t", "title": None})
    assert u.title is None and u.status is m.OMITTED
    assert u.to_json() == {"sessionUpdate": "tool_call_update", "toolCallId": "t", "title": None}
    assert isinstance(m.OMITTED, m.Omitted)


def test_integers_follow_the_schema_formats() -> None:
    fails(m.InitializeParams, {"protocolVersion": 65536}, K.INVALID_FIELD, "$.protocolVersion")
    loc = {"path": "/a", "line": 2**32}
    fails(m.ToolCallLocation, loc, K.INVALID_FIELD, "$.line")
    assert m.UsageUpdate.from_json({"used": 2**64 - 1, "size": 0}).used == 2**64 - 1
    fails(m.UsageUpdate, {"used": 2**64, "size": 0}, K.INVALID_FIELD, "$.used")
    assert m.ResourceLink.from_json({"name": "n", "uri": "u", "size": -5}).size == -5


# -- §2 errors --------------------------------------------------------------------------------


def test_error_carries_kind_path_reason_value_and_reads_well() -> None:
    bad = note(chunk({"type": "nope", "text": "x"}))
    e = fails(m.SessionNotification, bad, K.INVALID_DISCRIMINATOR, "$.update.content.type")
    assert e.value == "nope" and e.reason is None
    assert str(e) == "invalid_discriminator at $.update.content.type (value nope)"
    assert isinstance(e, ValueError) and isinstance(e, m.ProtocolDecodeError)
    assert pickle.loads(pickle.dumps(e)).path == e.path


def test_the_seed_path_example() -> None:
    call = dict(TOOL_CALL)
    call["content"] = [*TOOL_CALL["content"][:2], {"type": "???"}]
    e = fails(
        m.SessionNotification, note(call), K.INVALID_DISCRIMINATOR, "$.update.content[2].type"
    )
    assert e.value == "???"


def test_json_parse() -> None:
    with pytest.raises(m.ProtocolDecodeError) as info:
        m.TextContent.from_json('{"type": "text", ')
    assert info.value.kind == K.JSON_PARSE and info.value.path == "$" and info.value.reason
    with pytest.raises(m.ProtocolDecodeError):
        m.parse_json(b"[1,")


def test_missing_and_unknown_field_paths_name_the_key() -> None:
    fails(
        m.SessionNotification,
        note({"sessionUpdate": "tool_call", "toolCallId": "t"}),
        K.MISSING_FIELD,
        "$.update.title",
    )
    fails(
        m.SessionNotification,
        note(chunk({"type": "text", "text": "x", "bold": True})),
        K.UNKNOWN_FIELD,
        "$.update.content.bold",
    )


# -- §3 strict ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ({"type": "text", "text": 1}, K.EXPECTED_STRING),
        ({"type": "text", "text": "x", "_meta": []}, K.EXPECTED_OBJECT),
        ({"type": "text", "text": "x", "annotations": {"priority": True}}, K.EXPECTED_NUMBER),
        ({"type": "text", "text": "x", "annotations": {"audience": "user"}}, K.EXPECTED_ARRAY),
    ],
)
def test_wrong_json_type_is_expected_star(value: dict[str, Any], kind: m.DecodeErrorKind) -> None:
    with pytest.raises(m.ProtocolDecodeError) as info:
        m.TextContent.from_json(value)
    assert info.value.kind == kind


def test_expected_boolean_and_true_is_not_a_number() -> None:
    fails(m.AgentCapabilities, {"loadSession": 1}, K.EXPECTED_BOOLEAN, "$.loadSession")
    fails(m.UsageUpdate, {"used": True, "size": 1}, K.EXPECTED_NUMBER, "$.used")


def test_meta_is_never_unknown() -> None:
    assert m.CapabilityMarker.from_json({"_meta": {"x": 1}}).meta == {"x": 1}


def test_null_where_the_schema_forbids_it_is_invalid_field() -> None:
    e = fails(
        m.ToolCall, {"toolCallId": "t", "title": "x", "kind": None}, K.INVALID_FIELD, "$.kind"
    )
    assert e.reason and "null" in e.reason
    fails(m.AgentCapabilities, {"loadSession": None}, K.INVALID_FIELD, "$.loadSession")


@pytest.mark.parametrize("bad", [1.5, -1, 2**32, 1.0])
def test_integer_out_of_range_or_not_integral(bad: Any) -> None:
    fails(m.ToolCallLocation, {"path": "/a", "line": bad}, K.INVALID_FIELD, "$.line")


@pytest.mark.parametrize(
    ("cls", "value", "path"),
    [
        (m.SessionNotification, note({"sessionUpdate": "nope"}), "$.update.sessionUpdate"),
        (m.Content, {"type": "content", "content": {"type": "video"}}, "$.content.type"),
        (
            m.ToolCall,
            {"toolCallId": "t", "title": "x", "content": [{"type": "gif"}]},
            "$.content[0].type",
        ),
        (
            m.NewSessionParams,
            {"cwd": "/", "mcpServers": [{"type": "ws", "name": "n"}]},
            "$.mcpServers[0].type",
        ),
        (
            m.ConfigOptionUpdate,
            {"configOptions": [{"type": "slider", "id": "i", "name": "n"}]},
            "$.configOptions[0].type",
        ),
        (
            m.InitializeResult,
            {"protocolVersion": 1, "authMethods": [{"type": "x", "id": "a", "name": "n"}]},
            "$.authMethods[0].type",
        ),
        (m.RequestPermissionResponse, {"outcome": {"outcome": "maybe"}}, "$.outcome.outcome"),
    ],
)
def test_unknown_tag_is_invalid_discriminator(cls: Any, value: Any, path: str) -> None:
    fails(cls, value, K.INVALID_DISCRIMINATOR, path)


def test_mcp_server_without_type_is_stdio_and_type_stdio_is_accepted_not_written() -> None:
    stdio = {"name": "n", "command": "c", "args": [], "env": [{"name": "A", "value": "1"}]}
    p = m.NewSessionParams.from_json(
        {"cwd": "/w", "mcpServers": [stdio, {**stdio, "type": "stdio"}]}
    )
    assert p.mcp_servers[0] == p.mcp_servers[1]
    assert isinstance(p.mcp_servers[0], m.McpServerStdio)
    assert "type" not in p.to_json()["mcpServers"][1]
    http = {"type": "http", "name": "h", "url": "http://x", "headers": []}
    assert m.NewSessionParams.from_json({"cwd": "/w", "mcpServers": [http]}).to_json()[
        "mcpServers"
    ] == [http]


def test_auth_method_without_type_is_an_agent_method() -> None:
    r = m.InitializeResult.from_json(
        {
            "protocolVersion": 1,
            "authMethods": [
                {"id": "a", "name": "A"},
                {"type": "terminal", "id": "t", "name": "T", "args": ["x"]},
            ],
        }
    )
    assert type(r.auth_methods[0]) is m.AuthMethod  # type: ignore[index]
    assert type(r.auth_methods[1]) is m.AuthMethodTerminal  # type: ignore[index]


@pytest.mark.parametrize(
    ("cls", "value", "path"),
    [
        (m.ToolCall, {"toolCallId": "t", "title": "x", "kind": "dance"}, "$.kind"),
        (m.ToolCall, {"toolCallId": "t", "title": "x", "status": "done"}, "$.status"),
        (m.PlanEntry, {"content": "c", "priority": "urgent", "status": "pending"}, "$.priority"),
        (m.PlanEntry, {"content": "c", "priority": "low", "status": "failed"}, "$.status"),
        (m.PermissionOption, {"optionId": "o", "name": "n", "kind": "maybe"}, "$.kind"),
        (m.Annotations, {"audience": ["robot"]}, "$.audience[0]"),
        (m.PromptResult, {"stopReason": "bored"}, "$.stopReason"),
    ],
)
def test_unknown_closed_enum_value_is_invalid_field(cls: Any, value: Any, path: str) -> None:
    fails(cls, value, K.INVALID_FIELD, path)


def test_config_option_category_is_open() -> None:
    raw = {"type": "boolean", "id": "i", "name": "n", "category": "_mine", "currentValue": True}
    opt = m.SessionConfigOption.from_json(raw)
    assert opt.category == "_mine" and opt.to_json() == raw
    assert m.SessionConfigOption.from_json({**raw, "category": "model"}).category is (
        m.SessionConfigOptionCategory.MODEL
    )


@pytest.mark.parametrize(
    ("cls", "value", "path"),
    [
        (m.ReadTextFileParams, {"sessionId": "s", "path": "a.txt"}, "$.path"),
        (m.WriteTextFileParams, {"sessionId": "s", "path": "./a", "content": ""}, "$.path"),
        (m.TerminalCreateParams, {"sessionId": "s", "command": "ls", "cwd": "tmp"}, "$.cwd"),
        (m.NewSessionParams, {"cwd": "w", "mcpServers": []}, "$.cwd"),
        (
            m.NewSessionParams,
            {"cwd": "/w", "mcpServers": [], "additionalDirectories": ["/a", "b"]},
            "$.additionalDirectories[1]",
        ),
        (m.LoadSessionParams, {"sessionId": "s", "cwd": "w", "mcpServers": []}, "$.cwd"),
        (m.ResumeSessionParams, {"sessionId": "s", "cwd": "w"}, "$.cwd"),
        (m.ListSessionsParams, {"cwd": "w"}, "$.cwd"),
        (m.SessionInfo, {"sessionId": "s", "cwd": "w"}, "$.cwd"),
    ],
)
def test_relative_path_is_invalid_path(cls: Any, value: Any, path: str) -> None:
    e = fails(cls, value, K.INVALID_PATH, path)
    assert e.value is not None


def test_windows_absolute_paths_are_absolute() -> None:
    assert m.ReadTextFileParams.from_json({"sessionId": "s", "path": "C:\\x"}).path == "C:\\x"


@pytest.mark.parametrize(
    ("cls", "value", "path"),
    [
        (m.ImageContent, {"data": "not base64!", "mimeType": "image/png"}, "$.data"),
        (m.AudioContent, {"data": "QUJ", "mimeType": "audio/wav"}, "$.data"),
        (m.EmbeddedResource, {"resource": {"uri": "u", "blob": "@@"}}, "$.resource.blob"),
    ],
)
def test_bad_base64_is_invalid_base64(cls: Any, value: Any, path: str) -> None:
    fails(cls, value, K.INVALID_BASE64, path)


def test_embedded_resource_needs_exactly_one_of_text_and_blob() -> None:
    fails(
        m.EmbeddedResource,
        {"resource": {"uri": "u", "text": "t", "blob": "QUJD"}},
        K.INVALID_FIELD,
        "$.resource",
    )
    fails(m.EmbeddedResource, {"resource": {"uri": "u"}}, K.INVALID_FIELD, "$.resource")


def test_select_mixing_grouped_and_ungrouped_options_is_invalid_field() -> None:
    raw = {
        "type": "select",
        "id": "i",
        "name": "n",
        "currentValue": "a",
        "options": [{"value": "a", "name": "A"}, {"group": "g", "name": "G", "options": []}],
    }
    fails(m.SessionConfigOption, raw, K.INVALID_FIELD, "$.options")
    grouped = {**raw, "options": [raw["options"][1]]}  # type: ignore[index]
    assert m.SessionConfigOption.from_json(grouped).to_json() == grouped


def test_set_config_option_bool_is_written_with_type_boolean() -> None:
    p = m.SetSessionConfigOptionParams(session_id="s", config_id="c", value=True)
    assert p.to_json() == {"sessionId": "s", "configId": "c", "type": "boolean", "value": True}
    assert m.SetSessionConfigOptionParams.from_json(p.to_json()) == p
    fails(
        m.SetSessionConfigOptionParams,
        {"sessionId": "s", "configId": "c", "type": "boolean", "value": "x"},
        K.EXPECTED_BOOLEAN,
        "$.value",
    )


# -- §3 lenient ---------------------------------------------------------------------------------


def test_lenient_default_on_error_skip_invalid_items_unknown_keys() -> None:
    raw = {
        "toolCallId": "t",
        "title": "x",
        "kind": "dance",
        "extra": 1,
        "content": [{"type": "gif"}, {"type": "terminal", "terminalId": "a"}],
    }
    call = m.ToolCall.from_json(raw, strict=False)
    assert call.kind is m.OMITTED
    assert call.content == (m.Terminal(terminal_id="a"),)
    caps = m.AgentCapabilities.from_json({"loadSession": "yes"}, strict=False)
    assert caps.load_session is m.OMITTED
    sessions = m.NewSessionParams.from_json({"cwd": "/w", "mcpServers": 5}, strict=False)
    assert sessions.mcp_servers == ()  # a required default-on-error field: its default


def test_lenient_unknown_update_and_required_fields_still_raise() -> None:
    u = m.session_update_from_json({"sessionUpdate": "future_thing", "x": 1}, strict=False)
    assert isinstance(u, m.UnknownUpdate) and u.session_update == "future_thing"
    assert m.session_update_to_json(u) == {"sessionUpdate": "future_thing", "x": 1}
    fails(m.ToolCall, {"toolCallId": "t"}, K.MISSING_FIELD, "$.title", strict=False)
    fails(
        m.SessionNotification,
        note(chunk({"type": "video"})),
        K.INVALID_DISCRIMINATOR,
        "$.update.content.type",
        strict=False,
    )


# -- §4 codec -----------------------------------------------------------------------------------


def test_round_trip_keeps_absence_and_nulls() -> None:
    upd = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "t",
        "status": None,
        "content": None,
        "rawOutput": None,
        "_meta": None,
    }
    assert m.session_update_from_json(upd).to_json() == upd  # type: ignore[union-attr]
    assert m.session_update_to_json(m.session_update_from_json(TOOL_CALL)) == TOOL_CALL


def test_to_json_key_order_type_first_schema_order_meta_last() -> None:
    block = m.ResourceLink(meta={}, uri="u", name="n", size=3)
    assert list(block.to_json()) == ["type", "name", "size", "uri", "_meta"]
    assert m.stringify_json(block.to_json()) == (
        '{"type":"resource_link","name":"n","size":3,"uri":"u","_meta":{}}'
    )


def test_decode_message_types_params_by_method_and_results_when_told() -> None:
    line = json.dumps(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": note(chunk({"type": "text", "text": "hi"})),
        }
    )
    msg = m.decode_message(line)
    assert isinstance(msg, m.Notification) and isinstance(msg.params, m.SessionNotification)
    req = m.decode_message(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": "s", "prompt": []},
        }
    )
    assert isinstance(req, m.Request) and isinstance(req.params, m.PromptParams)
    resp = {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}
    assert m.decode_message(resp).result == {"stopReason": "end_turn"}  # type: ignore[union-attr]
    typed = m.decode_message(resp, request_method="session/prompt")
    assert typed.result == m.PromptResult(stop_reason=m.StopReason.END_TURN)  # type: ignore[union-attr]
    err = m.decode_message({"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "no"}})
    assert err.error == m.RpcError(code=-32601, message="no")  # type: ignore[union-attr]


def test_decode_message_unknown_method() -> None:
    bad = {"jsonrpc": "2.0", "method": "session/dance", "params": {"a": 1}}
    with pytest.raises(m.ProtocolDecodeError) as info:
        m.decode_message(bad)
    assert (info.value.kind, info.value.path, info.value.value) == (
        K.INVALID_DISCRIMINATOR,
        "$.method",
        "session/dance",
    )
    assert m.decode_message(bad, strict=False).params == {"a": 1}  # type: ignore[union-attr]
    ext = {"jsonrpc": "2.0", "method": "_auth/status_update", "params": {"a": 1}}
    assert m.decode_message(ext).params == {"a": 1}  # type: ignore[union-attr]


def test_decode_update_paths_are_rooted_at_params() -> None:
    call = dict(TOOL_CALL)
    call["content"] = [*TOOL_CALL["content"][:2], {"type": 7}]
    line = json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": note(call)})
    with pytest.raises(m.ProtocolDecodeError) as info:
        m.decode_update(line)
    assert (info.value.kind, info.value.path) == (K.EXPECTED_STRING, "$.update.content[2].type")


def test_decode_permission_request_tool_call_is_untagged() -> None:
    params = {
        "sessionId": "s",
        "toolCall": {"toolCallId": "t", "title": "Write"},
        "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}],
    }
    req = m.decode_permission_request(params)
    assert req.tool_call.title == "Write" and req.to_json() == params
    tagged = {**params, "toolCall": {**params["toolCall"], "sessionUpdate": "tool_call_update"}}
    with pytest.raises(m.ProtocolDecodeError) as info:
        m.decode_permission_request(tagged)
    assert info.value.path == "$.toolCall.sessionUpdate"


def test_schema_has_no_examples_to_decode() -> None:
    """model.md asks that every schema example decodes: the v1 schema carries none."""
    from pathlib import Path

    schema = Path(__file__).resolve().parents[2] / "schema" / "v1" / "schema.json"
    text = schema.read_text()
    assert '"examples"' not in text and '"example"' not in text


def test_generated_code_is_up_to_date() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, str(root / "scripts" / "gen_model.py"), "--check"], check=True)


# -- elicitation (§3 discriminators `mode`/`action`, content only on accept, §4 to_json) ------

FORM = {
    "mode": "form",
    "message": "Name?",
    "requestedSchema": {"type": "object"},
    "sessionId": "s",
    "toolCallId": None,
}


def test_elicitation_params_round_trip_and_discriminate_on_mode() -> None:
    req = m.decode_message(
        {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": FORM}
    )
    assert isinstance(req.params, m.ElicitationFormParams)  # type: ignore[union-attr]
    assert req.params.to_json() == FORM  # type: ignore[union-attr]
    url = {"mode": "url", "message": "Go", "elicitationId": "e", "url": "https://x", "requestId": 4}
    p = m.ElicitationUrlParams.from_json(url)
    assert p.scope == m.ElicitationRequestScope(request_id=4) and p.to_json() == url
    fails(m.ElicitationFormParams, {**FORM, "mode": "voice"}, K.INVALID_DISCRIMINATOR, "$.mode")
    fails(m.ElicitationFormParams, {**FORM, "requestId": 1}, K.INVALID_FIELD, "$")


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_elicitation_result_content_only_on_accept(action: str) -> None:
    fails(
        m.ElicitationCreateResult, {"action": action, "content": {}}, K.INVALID_FIELD, "$.content"
    )
    lenient = m.ElicitationCreateResult.from_json({"action": action, "content": {}}, strict=False)
    assert lenient.content is m.OMITTED
    with pytest.raises(m.ProtocolDecodeError) as info:
        m.ElicitationCreateResult(action=m.ElicitationAction(action), content={}).to_json()
    assert (info.value.kind, info.value.path) == (K.INVALID_FIELD, "$.content")


def test_elicitation_result_accept_and_unknown_action() -> None:
    raw = {"action": "accept", "content": {"a": 1, "b": ["x"], "c": True}}
    assert m.ElicitationCreateResult.from_json(raw).to_json() == raw
    fails(m.ElicitationCreateResult, {"action": "shrug"}, K.INVALID_DISCRIMINATOR, "$.action")
    fails(
        m.ElicitationCreateResult,
        {"action": "accept", "content": {"a": {}}},
        K.INVALID_FIELD,
        "$.content.a",
    )


def test_host_params_strict_types_unknown_keys_allowed() -> None:
    raw = {"sessionId": "s", "path": "/w/a.txt", "line": 2, "future": True}
    p = m.decode_host_params(m.ReadTextFileParams, raw)
    assert p.path == "/w/a.txt" and p.line == 2
    assert m.decode_host_params(m.ReadTextFileParams, json.dumps(raw).encode()) == p
    for bad, kind, path in [
        ({**raw, "line": -1}, K.INVALID_FIELD, "$.line"),
        ({**raw, "path": "a.txt"}, K.INVALID_PATH, "$.path"),
        ({"path": "/a"}, K.MISSING_FIELD, "$.sessionId"),
    ]:
        with pytest.raises(m.ProtocolDecodeError) as info:
            m.decode_host_params(m.ReadTextFileParams, bad)
        assert (info.value.kind, info.value.path) == (kind, path)
