"""Client behaviour beyond the seed's tests: the wire format, ids, errors, updates, permissions,
limits, options and lifecycle, each against a small fake agent."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import pickle
import time
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from conftest import (
    GET_ID,
    INIT_RESULT,
    NEW_RESULT,
    Journal,
    ShWire,
    agent,
    both_protocols,
    chunk_line,
    emit,
    limits,
    read_lines,
    sq,
    stop_line,
    update_line,
    wait_dead,
    with_id,
)

PERMISSION_OPTIONS = (
    '[{"optionId":"allow","name":"Allow","kind":"allow_once"},'
    '{"optionId":"reject","name":"Reject","kind":"reject_once"}]'
)


TOOL_CALL = '{"toolCallId":"tc1","title":"run command","kind":"execute","status":"pending"}'


def permission_line(
    request_id: str = '"perm-1"',
    tool_call: str = TOOL_CALL,
    options: str | None = PERMISSION_OPTIONS,
) -> str:
    """A `session/request_permission` line; `request_id` is raw JSON."""
    params = '{"sessionId":"acp-test","toolCall":' + tool_call
    if options is not None:
        params += ',"options":' + options
    params += "}"
    return (
        '{"jsonrpc":"2.0","id":'
        + request_id
        + ',"method":"session/request_permission","params":'
        + params
        + "}"
    )


# The case an agent uses to react to the client's permission answer.
ON_PERMISSION_ANSWER = '*\'"outcome":{"outcome":\'*)'


def prompt_lines(log: Path) -> list[str]:
    return [line for line in read_lines(log) if '"method":"session/prompt"' in line]


# --- state before and after start ---------------------------------------------------------------


def test_state_before_start(make_client, tmp_path: Path) -> None:
    client = make_client(agent(tmp_path / "log", emit(stop_line(2))))
    assert client.initialize == acp.Initialize()
    assert client.initialize.protocol_version == 0
    assert client.initialize.auth_methods == ()
    assert client.modes == acp.Modes()
    assert client.session_id is None
    assert client.agent_error is None
    assert client.next_update_sequence == 1
    assert isinstance(client.pid, int)


def test_start_records_initialize_and_session(make_client) -> None:
    init = (
        '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":'
        '{"loadSession":false,"promptCapabilities":{"audio":true,"embeddedContext":true}},'
        '"authMethods":[{"id":"oauth","name":"OAuth","description":"Sign in"}],'
        '"agentInfo":{"name":"fake","version":"0.1"}}}'
    )
    new = (
        '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"sess-42","modes":{"currentModeId":"ask",'
        '"availableModes":[{"id":"ask","name":"Ask","description":"asks first"}]}}}'
    )
    script = (
        "while IFS= read -r line; do\n"
        '  case "$line" in\n'
        f'    *\'"method":"initialize"\'*) {emit(init)} ;;\n'
        f'    *\'"method":"session/new"\'*) {emit(new)} ;;\n'
        "  esac\n"
        "done\n"
    )
    client = make_client(script)
    client.start()
    assert client.session_id == "sess-42"
    initialize = client.initialize
    assert initialize.protocol_version == 1
    assert initialize.load_session is False
    assert initialize.prompt_image is False
    assert initialize.prompt_audio is True
    # The official schema spells it embeddedContext; the seed's agent says embeddedContent.
    assert initialize.prompt_embedded_content is True
    assert initialize.auth_methods == (
        acp.AuthMethod(id="oauth", name="OAuth", description="Sign in"),
    )
    assert initialize.agent_info == {"name": "fake", "version": "0.1"}
    assert initialize.raw == json.loads(init)["result"]
    assert client.modes == acp.Modes(
        current="ask", available=(acp.Mode(id="ask", name="Ask", description="asks first"),)
    )


# --- request ids and update numbering -----------------------------------------------------------

# Answers each prompt with two chunks naming the prompt's id, then the response for that id.
ECHO_ID_ACTION = "; ".join(
    [
        GET_ID,
        with_id(chunk_line("id@ID@")),
        emit(chunk_line(".")),
        with_id('{"jsonrpc":"2.0","id":@ID@,"result":{"stopReason":"end_turn"}}'),
    ]
)


def test_request_ids_and_update_sequence_across_prompts(
    make_client, journal: Journal, tmp_path: Path
) -> None:
    log = tmp_path / "received.jsonl"
    client = make_client(agent(log, ECHO_ID_ACTION))
    client.start()
    assert client.next_update_sequence == 1
    assert client.prompt("first") == "id2."
    assert journal.sequences == [1, 2]
    assert client.next_update_sequence == 3
    assert client.prompt("second") == "id3."
    assert journal.sequences == [1, 2, 3, 4]
    assert client.next_update_sequence == 5
    lines = [json.loads(line) for line in read_lines(log)]
    assert [(line["id"], line["method"]) for line in lines] == [
        (0, "initialize"),
        (1, "session/new"),
        (2, "session/prompt"),
        (3, "session/prompt"),
    ]
    assert [line["params"]["prompt"] for line in lines[2:]] == [
        [{"type": "text", "text": "first"}],
        [{"type": "text", "text": "second"}],
    ]


# --- agent requests -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw_id", "expected_request_id"),
    [
        ('"perm-1"', "perm-1"),
        ('""', ""),
        ("0", 0),
        ("-5", -5),
        ("9007199254740993", 9007199254740993),
        ("18446744073709551615", 18446744073709551615),
        ("123456789012345678901234567890", 123456789012345678901234567890),
    ],
)
def test_permission_answer_echoes_agent_id_verbatim(
    make_client, journal: Journal, tmp_path: Path, raw_id: str, expected_request_id: Any
) -> None:
    log = tmp_path / "received.jsonl"
    script = agent(
        log,
        emit(permission_line(raw_id)),
        f"{ON_PERMISSION_ANSWER} {emit(chunk_line('answered'), stop_line(2))} ;;",
    )
    client = make_client(script)
    client.start()
    assert client.prompt("hello") == "answered"
    lines = read_lines(log)
    assert lines[3] == (
        '{"jsonrpc":"2.0","id":'
        + raw_id
        + ',"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}'
    )
    assert len(journal.permissions) == 1
    assert journal.permissions[0].request_id == expected_request_id
    assert type(journal.permissions[0].request_id) is type(expected_request_id)


@pytest.mark.parametrize("raw_id", ["7", '"fs-1"', "0"])
def test_unknown_agent_request_gets_method_not_found(
    make_client, journal: Journal, tmp_path: Path, raw_id: str
) -> None:
    log = tmp_path / "received.jsonl"
    unknown_notification = '{"jsonrpc":"2.0","method":"x/unknown_notice","params":{"a":1}}'
    unknown_request = (
        '{"jsonrpc":"2.0","id":'
        + raw_id
        + ',"method":"fs/read_text_file","params":{"sessionId":"acp-test","path":"/etc/hostname"}}'
    )
    script = agent(
        log,
        emit(unknown_notification, unknown_request),
        f"*'\"error\"'*) {emit(chunk_line('after'), stop_line(2))} ;;",
    )
    client = make_client(script)
    client.start()
    assert client.prompt("hello") == "after"
    lines = read_lines(log)
    assert len(lines) == 4, "the notification must get no answer"
    assert lines[3] == (
        '{"jsonrpc":"2.0","id":' + raw_id + ',"error":{"code":-32601,"message":"method not found"}}'
    )
    assert journal.permissions == []
    assert len(journal.updates) == 1


# --- protocol errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad_line", "expected"),
    [
        ("this is not json", "invalid json"),
        ('{"jsonrpc":"2.0","id":2,"result":', "invalid json"),
        ("[1,2]", "not a json object"),
        ("42", "not a json object"),
        ('"text"', "not a json object"),
        ('{"jsonrpc":"2.0","id":2}', "unexpected message"),
        ('{"jsonrpc":"2.0","id":"2","result":{"stopReason":"end_turn"}}', "unexpected message"),
        ('{"jsonrpc":"2.0","id":5,"result":{"stopReason":"end_turn"}}', "unexpected message"),
        ('{"jsonrpc":"2.0","result":{"stopReason":"end_turn"}}', "unexpected message"),
    ],
)
def test_malformed_agent_output_raises_protocol_error(
    make_client, journal: Journal, bad_line: str, expected: str
) -> None:
    client = make_client(agent(None, emit(bad_line, stop_line(2))))
    client.start()
    with pytest.raises(acp.AgentProtocolError) as caught:
        client.prompt("hello")
    assert expected in str(caught.value).lower()
    assert caught.value.code is None
    assert journal.updates == []


def test_output_ended_before_response(make_client) -> None:
    client = make_client(agent(None, "exit 0"))
    client.start()
    with pytest.raises(acp.AgentProtocolError) as caught:
        client.prompt("hello")
    assert "output ended" in str(caught.value).lower()


def test_output_ended_during_start(make_client) -> None:
    client = make_client("IFS= read -r line; exit 0")
    with pytest.raises(acp.AgentProtocolError) as caught:
        client.start()
    assert "output ended" in str(caught.value).lower()
    assert client.session_id is None


ERROR_LINE = '{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"boom","data":{"why":"x"}}}'


def test_error_answer_raises_with_code_message_data(make_client) -> None:
    action = (
        "prompt_count=$((prompt_count + 1)); "
        f'if [ "$prompt_count" -eq 1 ]; then {emit(ERROR_LINE)}; '
        f"else {emit(chunk_line('fine'), stop_line(3))}; fi"
    )
    client = make_client(agent(None, action))
    client.start()
    assert client.agent_error is None
    with pytest.raises(acp.AgentProtocolError) as caught:
        client.prompt("hello")
    error = caught.value
    assert error.code == -32000
    assert error.message == "boom"
    assert error.data == {"why": "x"}
    assert "boom" in str(error)
    assert "-32000" in str(error)
    assert client.agent_error == "boom"
    # A later success leaves the message in place.
    assert client.prompt("again") == "fine"
    assert client.agent_error == "boom"


def test_error_answer_to_initialize(make_client) -> None:
    failure = '{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"no auth"}}'
    client = make_client(f"while IFS= read -r line; do {emit(failure)}; done")
    with pytest.raises(acp.AgentProtocolError) as caught:
        client.start()
    assert caught.value.code == -32603
    assert caught.value.message == "no auth"
    assert caught.value.data is None
    assert client.agent_error == "no auth"


@pytest.mark.parametrize(
    ("init", "new", "stop"),
    [
        (
            '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"agentCapabilities":{}}}',
            NEW_RESULT,
            stop_line(2),
        ),
        (INIT_RESULT, '{"jsonrpc":"2.0","id":1,"result":{}}', stop_line(2)),
        (INIT_RESULT, '{"jsonrpc":"2.0","id":1,"result":"acp-test"}', stop_line(2)),
        (INIT_RESULT, NEW_RESULT, '{"jsonrpc":"2.0","id":2,"result":{}}'),
        (INIT_RESULT, NEW_RESULT, '{"jsonrpc":"2.0","id":2,"result":{"stopReason":3}}'),
    ],
    ids=["protocol-version-2", "no-session-id", "result-not-object", "no-stop", "stop-not-string"],
)
def test_malformed_results_raise_protocol_error(
    make_client, init: str, new: str, stop: str
) -> None:
    script = (
        "while IFS= read -r line; do\n"
        '  case "$line" in\n'
        f'    *\'"method":"initialize"\'*) {emit(init)} ;;\n'
        f'    *\'"method":"session/new"\'*) {emit(new)} ;;\n'
        f'    *\'"method":"session/prompt"\'*) {emit(stop)} ;;\n'
        "  esac\n"
        "done\n"
    )
    client = make_client(script)
    with pytest.raises(acp.AgentProtocolError):
        client.start()
        client.prompt("hello")


# --- updates ------------------------------------------------------------------------------------


def test_unknown_session_update_is_delivered(make_client, journal: Journal) -> None:
    unknown = update_line('{"sessionUpdate":"_vendor_progress","entries":[{"content":"x"}]}')
    client = make_client(agent(None, emit(unknown, chunk_line("after"), stop_line(2))))
    client.start()
    assert client.prompt("hello") == "after"
    assert len(journal.updates) == 2
    first = journal.updates[0]
    assert first.kind == acp.UpdateKind.UNKNOWN
    assert first.session_update == "_vendor_progress"
    assert first.update_sequence == 1
    assert first.envelope == unknown
    assert first.text == ""
    assert first.json() == {"sessionUpdate": "_vendor_progress", "entries": [{"content": "x"}]}
    assert journal.updates[1].kind == acp.UpdateKind.AGENT_MESSAGE_CHUNK
    assert journal.updates[1].update_sequence == 2


@pytest.mark.parametrize(
    "bad_update",
    [
        '{"jsonrpc":"2.0","method":"session/update"}',
        '{"jsonrpc":"2.0","method":"session/update","params":[]}',
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test"}}',
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":"x"}}',
        update_line('{"content":{"type":"text","text":"no kind"}}'),
        update_line('{"sessionUpdate":5}'),
    ],
    ids=["no-params", "params-array", "no-update", "update-string", "no-kind", "kind-number"],
)
def test_malformed_session_update_raises(make_client, journal: Journal, bad_update: str) -> None:
    client = make_client(agent(None, emit(bad_update, stop_line(2))))
    client.start()
    with pytest.raises(acp.AgentProtocolError):
        client.prompt("hello")
    assert journal.updates == []


def test_update_fields(make_client, journal: Journal) -> None:
    chunk = update_line(
        '{"sessionUpdate":"agent_message_chunk","messageId":"msg-1",'
        '"content":{"type":"text","text":"hi \\"there\\""}}'
    )
    lines = [
        chunk,
        update_line(
            '{"sessionUpdate":"tool_call","toolCallId":"call-7","title":"Run ls",'
            '"kind":"execute","status":"pending"}'
        ),
        update_line('{"sessionUpdate":"tool_call_update","toolCallId":"call-7","status":"done"}'),
        update_line('{"sessionUpdate":"tool_call_update","toolCallId":"call-7","title":"Ran ls"}'),
        update_line(
            '{"sessionUpdate":"plan","entries":[{"content":"one","priority":"high",'
            '"status":"pending"},{"content":"two","priority":"low","status":"pending"}]}'
        ),
        update_line(
            '{"sessionUpdate":"agent_message_chunk","content":{"type":"image",'
            '"mimeType":"image/png","data":"AAAA"}}'
        ),
        update_line('{"sessionUpdate":"current_mode_update","currentModeId":"code"}'),
        update_line('{"sessionUpdate":"session_info_update","title":"Title"}'),
        update_line('{"sessionUpdate":"usage_update","used":1,"size":2}'),
        update_line('{"sessionUpdate":"available_commands_update","availableCommands":[]}'),
        update_line('{"sessionUpdate":"config_option_update","configOptions":[]}'),
        chunk_line("thinking", "agent_thought_chunk"),
        chunk_line("said", "user_message_chunk"),
    ]
    # The first update comes with whitespace around it; the envelope is trimmed.
    action = f"printf '  %s \\t\\n' {sq(lines[0])}; " + emit(*lines[1:]) + "; " + emit(stop_line(2))
    client = make_client(agent(None, action), transport_epoch=7)
    client.start()
    assert client.prompt("hello") == 'hi "there"'
    updates = journal.updates
    assert len(updates) == len(lines)
    assert [update.kind for update in updates] == [
        acp.UpdateKind.AGENT_MESSAGE_CHUNK,
        acp.UpdateKind.TOOL_CALL,
        acp.UpdateKind.TOOL_CALL_UPDATE,
        acp.UpdateKind.TOOL_CALL_UPDATE,
        acp.UpdateKind.PLAN,
        acp.UpdateKind.AGENT_MESSAGE_CHUNK,
        acp.UpdateKind.CURRENT_MODE_UPDATE,
        acp.UpdateKind.SESSION_INFO_UPDATE,
        acp.UpdateKind.USAGE_UPDATE,
        acp.UpdateKind.AVAILABLE_COMMANDS_UPDATE,
        acp.UpdateKind.CONFIG_OPTION_UPDATE,
        acp.UpdateKind.AGENT_THOUGHT_CHUNK,
        acp.UpdateKind.USER_MESSAGE_CHUNK,
    ]
    assert [update.text for update in updates] == [
        'hi "there"',
        "Run ls",
        "",
        "Ran ls",
        "one\ntwo",
        "",
        "code",
        "Title",
        "",
        "",
        "",
        "thinking",
        "said",
    ]
    for index, (update, line) in enumerate(zip(updates, lines, strict=True)):
        assert isinstance(update.kind, acp.UpdateKind)
        assert update.session_update == update.kind.value
        assert update.transport_epoch == 7
        assert update.update_sequence == index + 1
        assert update.session_id == "acp-test"
        assert update.envelope == line
        assert update.json() == json.loads(line)["params"]["update"]
    assert [update.message_id for update in updates] == ["msg-1"] + [None] * 12
    assert [update.tool_call_id for update in updates] == [None] + ["call-7"] * 3 + [None] * 9


def test_update_equality_repr_and_frozen(make_client) -> None:
    script = agent(None, emit(chunk_line("a"), chunk_line("b"), stop_line(2)))
    journals = [Journal(), Journal()]
    for each in journals:
        client = make_client(script, observer=each)
        client.start()
        assert client.prompt("hello") == "ab"
    first, second = journals[0].updates[0], journals[1].updates[0]
    assert first == second
    assert hash(first) == hash(second)
    assert first != journals[0].updates[1]
    assert repr(first).startswith("Update(")
    assert "update_sequence=1" in repr(first)
    assert "update_sequence=2" in repr(journals[0].updates[1])
    with pytest.raises(AttributeError):
        first.text = "changed"
    with pytest.raises(AttributeError):
        first.update_sequence = 5
    assert first.text == "a"
    assert first.update_sequence == 1


def test_observer_holder(make_client) -> None:
    updates: list[Any] = []
    client = make_client(
        agent(None, emit(chunk_line("x"), stop_line(2))),
        observer=acp.Observer(on_update=updates.append),
    )
    client.start()
    assert client.prompt("hello") == "x"
    assert [update.text for update in updates] == ["x"]


# --- permissions --------------------------------------------------------------------------------


class Deciding:
    """An observer that answers permission requests itself and records what it saw."""

    def __init__(self, reply: acp.PermissionReply | None) -> None:
        self.reply = reply
        self.previews: list[acp.PermissionRequest] = []
        self.commits: list[acp.PermissionRequest] = []
        self.updates: list[Any] = []

    def on_update(self, update: Any) -> None:
        self.updates.append(update)

    def on_permission(self, request: acp.PermissionRequest) -> acp.PermissionReply | None:
        self.previews.append(request)
        return self.reply

    def on_permission_commit(self, request: acp.PermissionRequest) -> None:
        assert len(self.previews) == 1, "on_permission runs before on_permission_commit"
        self.commits.append(request)


def permission_agent(log: Path) -> str:
    """Asks permission once; replies with the decision it received (selected/cancelled)."""
    return agent(
        log,
        emit(permission_line()),
        '*\'"optionId":"allow"\'*) ' + emit(chunk_line("allowed"), stop_line(2)) + " ;;",
        '*\'"optionId":"reject"\'*) ' + emit(chunk_line("denied"), stop_line(2)) + " ;;",
        '*\'"outcome":"cancelled"\'*) ' + emit(chunk_line("cancelled"), stop_line(2)) + " ;;",
    )


def test_on_permission_reply_overrides_policy(make_client, tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    observer = Deciding(acp.PermissionReply("selected", "allow", "allow_once"))
    client = make_client(permission_agent(log), observer=observer)
    client.start()
    assert client.prompt("hello") == "allowed"
    assert read_lines(log)[3] == (
        '{"jsonrpc":"2.0","id":"perm-1","result":{"outcome":{"outcome":"selected",'
        '"optionId":"allow"}}}'
    )
    options = (
        acp.PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
        acp.PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
    )
    assert observer.previews == [
        acp.PermissionRequest(
            session_id="acp-test",
            tool_call_id="tc1",
            title="run command",
            tool_kind="execute",
            status="pending",
            outcome="pending",
            option_id="",
            option_kind="",
            options=options,
            envelope="",
            request_id="perm-1",
        )
    ]
    assert observer.commits == [
        acp.PermissionRequest(
            session_id="acp-test",
            tool_call_id="tc1",
            title="run command",
            tool_kind="execute",
            status="pending",
            outcome="selected",
            option_id="allow",
            option_kind="allow_once",
            options=options,
            envelope=permission_line(),
            request_id="perm-1",
            decision="allow",
            reason="observer",
        )
    ]


def test_the_records_the_core_builds_are_plain_dataclass_instances(
    make_client, tmp_path: Path
) -> None:
    """The core builds `PermissionRequest`s without calling the class: each must be the object
    `__init__` makes (equality, hash, repr, fields, pickle, copy, replace, frozen)."""
    observer = Deciding(acp.PermissionReply("selected", "allow", "allow_once"))
    client = make_client(permission_agent(tmp_path / "received.jsonl"), observer=observer)
    client.start()
    client.prompt("hello")
    for built in (*observer.previews, *observer.commits):
        made = acp.PermissionRequest(
            **{f.name: getattr(built, f.name) for f in dataclasses.fields(built)}
        )
        assert type(built) is acp.PermissionRequest
        assert built == made and hash(built) == hash(made) and repr(built) == repr(made)
        fields = dict(vars(built))
        if built in observer.previews:
            # The preview keeps the request's line privately, for decode() (model.md §4).
            assert fields.pop("_line") == observer.commits[0].envelope
        assert fields == vars(made) and list(fields) == list(vars(made))
        assert pickle.loads(pickle.dumps(built)) == built
        assert copy.deepcopy(built) == built
        assert dataclasses.replace(built, title="t").title == "t"
        for option in built.options:
            assert type(option) is acp.PermissionOption
            assert option == acp.PermissionOption(option.option_id, option.name, option.kind)
        with pytest.raises(dataclasses.FrozenInstanceError):
            built.title = "changed"  # type: ignore[misc]


def test_on_permission_none_leaves_decision_to_policy(make_client, tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    observer = Deciding(None)
    client = make_client(permission_agent(log), observer=observer)
    client.start()
    assert client.prompt("hello") == "denied"
    assert len(observer.previews) == 1
    assert [(c.outcome, c.option_id, c.option_kind) for c in observer.commits] == [
        ("selected", "reject", "reject_once")
    ]


def test_on_permission_cancelled_reply_leaves_out_option_id(make_client, tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    observer = Deciding(acp.PermissionReply("cancelled"))
    client = make_client(permission_agent(log), observer=observer)
    client.start()
    assert client.prompt("hello") == "cancelled"
    assert read_lines(log)[3] == (
        '{"jsonrpc":"2.0","id":"perm-1","result":{"outcome":{"outcome":"cancelled"}}}'
    )
    assert [(c.outcome, c.option_id, c.option_kind) for c in observer.commits] == [
        ("cancelled", "", "")
    ]


def _options(*pairs: tuple[str, str]) -> str:
    return json.dumps(
        [{"optionId": oid, "name": oid.upper(), "kind": kind} for oid, kind in pairs],
        separators=(",", ":"),
    )


@pytest.mark.parametrize(
    ("allowed", "options", "outcome", "option_id", "option_kind"),
    [
        (
            True,
            _options(("aa", "allow_always"), ("r", "reject_once")),
            "selected",
            "aa",
            "allow_always",
        ),
        (
            True,
            _options(
                ("r", "reject_once"),
                ("aa", "allow_always"),
                ("a1", "allow_once"),
                ("a2", "allow_once"),
            ),
            "selected",
            "a1",
            "allow_once",
        ),
        (True, _options(("r", "reject_once")), "selected", "r", "reject_once"),
        (
            False,
            _options(("a", "allow_once"), ("ra1", "reject_always"), ("ra2", "reject_always")),
            "selected",
            "ra2",
            "reject_always",
        ),
        (
            False,
            _options(("ra", "reject_always"), ("r1", "reject_once"), ("r2", "reject_once")),
            "selected",
            "r1",
            "reject_once",
        ),
        (False, _options(("a", "allow_once"), ("aa", "allow_always")), "cancelled", "", ""),
        (True, _options(), "cancelled", "", ""),
        (True, None, "cancelled", "", ""),
    ],
    ids=[
        "allow-always",
        "first-allow-once",
        "allowed-but-only-reject",
        "last-reject-always",
        "first-reject-once",
        "nothing-to-reject-with",
        "empty-options",
        "no-options",
    ],
)
def test_permission_policy_choice(
    make_client,
    journal: Journal,
    tmp_path: Path,
    allowed: bool,
    options: str | None,
    outcome: str,
    option_id: str,
    option_kind: str,
) -> None:
    log = tmp_path / "received.jsonl"
    tool_call = '{"toolCallId":"tc9","title":"Edit file","kind":"edit","status":"pending"}'
    script = agent(
        log,
        emit(permission_line('"p"', tool_call, options)),
        f"{ON_PERMISSION_ANSWER} {emit(stop_line(2))} ;;",
    )
    policy = acp.PermissionPolicy(allowed_tool_kinds=["edit"] if allowed else ["execute"])
    client = make_client(script, permission_policy=policy)
    client.start()
    assert client.prompt_detailed("hello").stop_reason == "end_turn"
    chosen = (
        '"outcome":"' + outcome + '"' + (',"optionId":"' + option_id + '"' if option_id else "")
    )
    assert read_lines(log)[3] == '{"jsonrpc":"2.0","id":"p","result":{"outcome":{' + chosen + "}}}"
    assert [(p.outcome, p.option_id, p.option_kind) for p in journal.permissions] == [
        (outcome, option_id, option_kind)
    ]


class Boom(Exception):
    pass


def test_permission_commit_exception_propagates_and_answer_is_not_sent(
    make_client, tmp_path: Path
) -> None:
    log = tmp_path / "received.jsonl"
    boom = Boom("journal is full")

    def refuse(request: acp.PermissionRequest) -> None:
        raise boom

    client = make_client(
        permission_agent(log),
        observer=acp.Observer(on_update=lambda update: None, on_permission_commit=refuse),
    )
    client.start()
    with pytest.raises(Boom) as caught:
        client.prompt("hello")
    assert caught.value is boom
    time.sleep(0.3)
    lines = read_lines(log)
    assert len(lines) == 3, "the permission answer must not be sent"
    assert '"method":"session/prompt"' in lines[2]


def test_update_observer_exception_propagates(make_client) -> None:
    boom = Boom("disk full")
    seen: list[Any] = []

    def fail(update: Any) -> None:
        seen.append(update)
        raise boom

    client = make_client(
        agent(None, emit(chunk_line("a"), chunk_line("b"), stop_line(2))),
        observer=acp.Observer(on_update=fail),
    )
    client.start()
    with pytest.raises(Boom) as caught:
        client.prompt("hello")
    assert caught.value is boom
    assert caught.value.__traceback__ is not None
    assert [update.text for update in seen] == ["a"]


@pytest.mark.parametrize(
    ("observer", "message"),
    [
        (None, chunk_line("a")),
        (object(), chunk_line("a")),
        (acp.Observer(on_permission_commit=lambda request: None), chunk_line("a")),
        (None, permission_line()),
        (acp.Observer(on_update=lambda update: None), permission_line()),
    ],
    ids=["none-update", "plain-object-update", "no-on-update", "none-permission", "no-commit"],
)
def test_missing_durable_observer(make_client, observer: Any, message: str) -> None:
    client = make_client(agent(None, emit(message, stop_line(2))), observer=observer, durable=True)
    client.start()
    with pytest.raises(acp.MissingDurableObserver):
        client.prompt("hello")


@pytest.mark.parametrize(
    "observer",
    [None, object(), acp.Observer(on_permission_commit=lambda request: None)],
    ids=["none", "plain-object", "no-on-update"],
)
def test_missing_callbacks_are_fine_without_durable(make_client, observer: Any) -> None:
    client = make_client(
        agent(None, emit(chunk_line("a"), permission_line(), stop_line(2))),
        observer=observer,
        durable=False,
    )
    client.start()
    assert client.prompt("hello") == "a"


# --- limits -------------------------------------------------------------------------------------


@both_protocols
@pytest.mark.parametrize(
    ("pad", "spare", "accepted"),
    [("", 0, True), ("  ", 0, True), ("", -1, False), ("  ", -1, False)],
)
def test_update_bytes_limit(
    make_client, journal: Journal, wire: ShWire, pad: str, spare: int, accepted: bool
) -> None:
    line = wire.chunk("x" * 50)  # the longest update line of the turn
    action = f"printf '%s\\n' {sq(pad + line + pad)}; {emit(wire.end(2))}"
    client = make_client(
        wire.agent(None, action), transfer_limits=limits(update_bytes=len(line) + spare)
    )
    client.start()
    if accepted:
        assert client.prompt("hello") == "x" * 50
        assert [u.text for u in journal.content] == ["x" * 50]
        return
    with pytest.raises(acp.UpdateCapacityExceeded) as caught:
        client.prompt("hello")
    assert "update_bytes" in str(caught.value)
    assert journal.content == []


@both_protocols
def test_update_count_limit(make_client, journal: Journal, wire: ShWire) -> None:
    lifecycle = 1 if wire.v2 else 0  # v2's running is an update too
    client = make_client(
        wire.agent(None, emit(wire.chunk("1"), wire.chunk("2"), wire.chunk("3"), wire.end(2))),
        transfer_limits=limits(update_count=2 + lifecycle),
    )
    client.start()
    with pytest.raises(acp.UpdateCountCapacityExceeded) as caught:
        client.prompt("hello")
    assert "update_count" in str(caught.value)
    assert [u.text for u in journal.content] == ["1", "2"]
    assert journal.sequences == list(range(1, 3 + lifecycle))


def test_update_count_spans_the_client_life(make_client, journal: Journal) -> None:
    action = (
        "prompt_count=$((prompt_count + 1)); "
        'if [ "$prompt_count" -eq 1 ]; then '
        + emit(chunk_line("a"), chunk_line("b"), stop_line(2))
        + "; else "
        + emit(chunk_line("c"), chunk_line("d"), stop_line(3))
        + "; fi"
    )
    client = make_client(agent(None, action), transfer_limits=limits(update_count=3))
    client.start()
    assert client.prompt("one") == "ab"
    with pytest.raises(acp.UpdateCountCapacityExceeded):
        client.prompt("two")
    assert journal.sequences == [1, 2, 3]


CANCEL_LINE = '{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"acp-test"}}'


@both_protocols
def test_response_segment_overflow(
    make_client, journal: Journal, tmp_path: Path, wire: ShWire
) -> None:
    log = tmp_path / "received.jsonl"
    script = wire.agent(
        log,
        emit(wire.chunk("a"), wire.chunk("b"), wire.chunk("c")),
        '*\'"method":"session/cancel"\'*) '
        + emit(wire.chunk("d"), wire.end(2, "cancelled"))
        + " ;;",
    )
    lifecycle = 1 if wire.v2 else 0  # v2's running before the chunks
    client = make_client(script, transfer_limits=limits(response_segment_count=1))
    client.start()
    result = client.prompt_detailed("hello")
    assert result == acp.PromptResult(
        response="a",
        stop_reason="cancelled",
        overflow=acp.Overflow(
            kind=acp.OverflowKind.RESPONSE_SEGMENTS,
            admitted_bytes=1 + wire.id_bytes,
            admitted_segments=1,
            withheld_update_sequence=2 + lifecycle,
        ),
    )
    assert result.overflow is not None
    assert result.overflow.kind.value == "response_segments"
    assert [u.text for u in journal.content] == ["a", "b", "c", "d"]
    time.sleep(0.2)
    lines = read_lines(log)
    assert lines.count(CANCEL_LINE) == 1
    assert sum('"session/cancel"' in line for line in lines) == 1


@both_protocols
def test_response_bytes_count_utf8_and_reset_per_prompt(
    make_client, journal: Journal, tmp_path: Path, wire: ShWire
) -> None:
    log = tmp_path / "received.jsonl"
    action = (
        "prompt_count=$((prompt_count + 1)); "
        'if [ "$prompt_count" -eq 1 ]; then '
        + emit(wire.chunk("\\u00e9"), wire.chunk("\u00e9"), wire.chunk("x"))
        + "; else "
        + emit(wire.chunk("ab"), wire.chunk("cd"), wire.end(3))
        + "; fi"
    )
    script = wire.agent(
        log,
        action,
        '*\'"method":"session/cancel"\'*) ' + emit(wire.end(2, "cancelled")) + " ;;",
    )
    client = make_client(script, transfer_limits=limits(response_bytes=4 + wire.id_bytes))
    client.start()
    first = client.prompt_detailed("one")
    assert first.response == "\u00e9\u00e9"
    assert first.stop_reason == "cancelled"
    assert first.overflow == acp.Overflow(
        kind=acp.OverflowKind.RESPONSE_BYTES,
        admitted_bytes=4 + wire.id_bytes,
        admitted_segments=2,
        withheld_update_sequence=4 if wire.v2 else 3,  # v2's running is update 1
    )
    second = client.prompt_detailed("two")
    assert second == acp.PromptResult(response="abcd", stop_reason="end_turn", overflow=None)
    assert sum('"session/cancel"' in line for line in read_lines(log)) == 1


@pytest.mark.parametrize("extra", [0, 1])
def test_reader_message_limit(make_client, journal: Journal, extra: int) -> None:
    message_bytes = 300
    filler = "y" * (message_bytes - len(chunk_line("")) + extra)
    line = chunk_line(filler)
    assert len(line) == message_bytes + extra
    client = make_client(
        agent(None, emit(line, stop_line(2))),
        reader_limits=acp.ReaderLimits(message_bytes=message_bytes),
    )
    client.start()
    if extra == 0:
        assert client.prompt("hello") == filler
        assert client.reader_status().high_water_message_bytes == message_bytes
        assert client.reader_status().terminal is False
        return
    with pytest.raises(acp.ReaderMessageCapacityExceeded) as caught:
        client.prompt("hello")
    assert "message_bytes" in str(caught.value)
    assert journal.updates == []
    status = client.reader_status()
    assert status.message_bytes == message_bytes
    assert status.storage_bytes == message_bytes + 1
    assert status.rejected_message_count == 1
    assert status.terminal is True
    with pytest.raises(acp.AcpError):
        client.prompt("again")


def test_request_bytes_boundary(make_client, tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    request_bytes = 400
    empty_prompt = (
        '{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"acp-test",'
        '"prompt":[{"type":"text","text":""}]}}'
    )
    fitting = "x" * (request_bytes - 1 - len(empty_prompt))
    action = GET_ID + "; " + with_id('{"jsonrpc":"2.0","id":@ID@,"result":{"stopReason":"ok"}}')
    client = make_client(
        agent(log, action), transfer_limits=limits(request_bytes=request_bytes), cwd="/"
    )
    client.start()
    assert client.prompt_detailed(fitting).stop_reason == "ok"
    assert len(prompt_lines(log)[0]) + 1 == request_bytes
    with pytest.raises(acp.RequestCapacityExceeded) as caught:
        client.prompt(fitting + "x")
    assert "request_bytes" in str(caught.value)
    time.sleep(0.3)
    assert len(prompt_lines(log)) == 1


def test_request_bytes_applies_to_initialize(make_client, tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    client = make_client(agent(log, emit(stop_line(2))), transfer_limits=limits(request_bytes=100))
    with pytest.raises(acp.RequestCapacityExceeded):
        client.start()
    time.sleep(0.3)
    assert read_lines(log) == []


TRANSFER_FIELDS = [
    "request_bytes",
    "response_bytes",
    "update_bytes",
    "update_count",
    "response_segment_count",
]


@pytest.mark.parametrize(
    ("field", "value"),
    [(field, 0) for field in TRANSFER_FIELDS]
    + [("transport_epoch", 0), ("response_bytes", -1), ("transport_epoch", -1)],
)
def test_invalid_limits_before_any_process_starts(tmp_path: Path, field: str, value: int) -> None:
    marker = tmp_path / "started"

    def options() -> dict[str, Any]:
        made: dict[str, Any] = {
            "args": ["-c", f": > {sq(str(marker))}"],
            "reader_limits": acp.DEFAULT_READER_LIMITS,
            "transfer_limits": limits(),
            "transport_epoch": 1,
        }
        # An out-of-range limit is refused when the TransferLimits is made (first-use.md §1).
        if field == "transport_epoch":
            made["transport_epoch"] = value
        else:
            made["transfer_limits"] = limits(**{field: value})
        return made

    with pytest.raises(acp.InvalidLimits) as caught:
        acp.Client("/bin/sh", **options())
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, acp.AcpError)
    assert field in str(caught.value)
    with pytest.raises(acp.InvalidLimits):
        acp.Client("/does/not/exist", **options())
    time.sleep(0.3)
    assert not marker.exists(), "no agent may start when the limits are invalid"


# --- framing and transport ----------------------------------------------------------------------


def test_crlf_and_blank_lines(make_client, journal: Journal) -> None:
    chunk = chunk_line("crlf")

    def crlf(line: str) -> str:
        return f"printf '%s\\r\\n' {sq(line)}"

    script = (
        "while IFS= read -r line; do\n"
        '  case "$line" in\n'
        "    *'\"method\":\"initialize\"'*) printf '\\r\\n'; " + crlf(INIT_RESULT) + " ;;\n"
        "    *'\"method\":\"session/new\"'*) printf '\\n\\n  \\n'; " + crlf(NEW_RESULT) + " ;;\n"
        '    *\'"method":"session/prompt"\'*) '
        + crlf(chunk)
        + "; printf ' \\t \\r\\n'; printf '\\r\\n\\r\\n'; "
        + crlf(stop_line(2))
        + " ;;\n"
        "  esac\n"
        "done\n"
    )
    client = make_client(script)
    client.start()
    assert client.session_id == "acp-test"
    assert client.prompt("hello") == "crlf"
    assert [update.envelope for update in journal.updates] == [chunk]


def test_large_stderr_does_not_block(make_client) -> None:
    script = "head -c 8388608 /dev/zero >&2\n" + agent(None, emit(chunk_line("ok"), stop_line(2)))
    client = make_client(script)
    started = time.monotonic()
    client.start()
    assert client.prompt("hello") == "ok"
    assert time.monotonic() - started < 10


def test_many_lines_in_one_read(make_client, journal: Journal) -> None:
    count = 500
    action = (
        f"i=0; while [ $i -lt {count} ]; do i=$((i + 1)); "
        f"printf '%s\\n' {sq(chunk_line('z'))}; done; " + emit(stop_line(2))
    )
    client = make_client(agent(None, action))
    client.start()
    assert client.prompt("hello") == "z" * count
    assert journal.sequences == list(range(1, count + 1))


# --- starting the agent -------------------------------------------------------------------------


def _client_for(command: str) -> acp.Client:
    return acp.Client(
        command,
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=limits(),
        transport_epoch=1,
    )


@pytest.mark.parametrize("command", ["/does/not/exist/agent", "acp-fast-no-such-agent-xyz"])
def test_missing_command_raises_file_not_found(command: str) -> None:
    with pytest.raises(FileNotFoundError) as caught:
        _client_for(command)
    assert command in str(caught.value)


def test_non_executable_command_raises_permission_error(tmp_path: Path) -> None:
    program = tmp_path / "agent.sh"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o644)
    with pytest.raises(PermissionError) as caught:
        _client_for(str(program))
    assert str(program) in str(caught.value)


def test_cwd_and_env(make_client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACP_FAST_INHERITED", "inherited")
    workdir = tmp_path / "work dir"
    workdir.mkdir()
    report = tmp_path / "report.txt"
    log = tmp_path / "received.jsonl"
    script = (
        f'printf \'%s|%s|%s\\n\' "$(pwd)" "${{ACP_FAST_INHERITED-unset}}" '
        f'"${{ACP_FAST_GIVEN-unset}}" >> {sq(str(report))}\n' + agent(log, emit(stop_line(2)))
    )
    replaced = make_client(
        script,
        cwd=str(workdir),
        env={"ACP_FAST_GIVEN": "given", "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    replaced.start()
    session_new = json.loads(read_lines(log)[1])
    assert session_new["params"] == {"cwd": str(workdir), "mcpServers": []}
    inherited = make_client(script)
    inherited.start()
    assert read_lines(report) == [
        f"{workdir}|unset|given",
        f"{os.getcwd()}|inherited|unset",
    ]


# --- prompt content -----------------------------------------------------------------------------


@both_protocols
def test_prompt_content_block_types_on_the_wire(make_client, tmp_path: Path, wire: ShWire) -> None:
    log = tmp_path / "received.jsonl"
    client = make_client(wire.agent(log, emit(wire.end(2))))
    client.start()
    result = client.prompt_content(
        [
            acp.Image(mime_type="image/png", data="iVBOR"),
            acp.Image(mime_type="image/png", data="AAAA", uri="file:///a.png"),
            acp.Audio(mime_type="audio/wav", data="UklG"),
            acp.Audio(mime_type="audio/wav", data="UklG", uri="file:///a.wav"),
            acp.TextResource(uri="file:///b.txt", text="b"),
            acp.BlobResource(uri="file:///c.bin", blob="AAE="),
            acp.BlobResource(uri="file:///c.bin", blob="AAE=", mime_type="application/x"),
            acp.ResourceLink(uri="file:///d", name="d"),
            acp.ResourceLink(uri="file:///e", name="e", size=0),
        ]
    )
    assert result.stop_reason == "end_turn"
    expected = (
        '[{"type":"image","mimeType":"image/png","data":"iVBOR"},'
        '{"type":"image","mimeType":"image/png","data":"AAAA","uri":"file:///a.png"},'
        '{"type":"audio","mimeType":"audio/wav","data":"UklG"},'
        '{"type":"audio","mimeType":"audio/wav","data":"UklG","uri":"file:///a.wav"},'
        '{"type":"resource","resource":{"uri":"file:///b.txt","text":"b"}},'
        '{"type":"resource","resource":{"uri":"file:///c.bin","blob":"AAE="}},'
        '{"type":"resource","resource":{"uri":"file:///c.bin","blob":"AAE=",'
        '"mimeType":"application/x"}},'
        '{"type":"resource_link","uri":"file:///d","name":"d"},'
        '{"type":"resource_link","uri":"file:///e","name":"e","size":0}]'
    )
    assert prompt_lines(log) == [
        '{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"acp-test",'
        '"prompt":' + expected + "}}"
    ]


@both_protocols
def test_prompt_text_is_escaped_into_one_line(make_client, tmp_path: Path, wire: ShWire) -> None:
    log = tmp_path / "received.jsonl"
    text = 'quote " backslash \\ newline \n cr \r tab \t ctl \x01 nul \x00 \u00e9 \U0001f600 </'
    client = make_client(wire.agent(log, emit(wire.end(2))))
    client.start()
    assert client.prompt(text) == ""
    lines = read_lines(log)
    assert len(lines) == 3
    sent = json.loads(lines[2])
    assert sent["params"]["prompt"] == [{"type": "text", "text": text}]


@both_protocols
def test_prompt_returns_text(make_client, wire: ShWire) -> None:
    client = make_client(wire.agent(None, emit(wire.chunk("a"), wire.chunk("b"), wire.end(2))))
    client.start()
    response = client.prompt("hello")
    assert isinstance(response, str)
    assert response == "ab"


# --- lifecycle ----------------------------------------------------------------------------------


def test_prompt_before_start_raises(make_client, tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    client = make_client(agent(log, emit(stop_line(2))))
    # A usage error, not the agent's (first-use.md §1): RuntimeError saying what to do.
    with pytest.raises(RuntimeError, match=r"call start\(\) first"):
        client.prompt("hello")
    with pytest.raises(RuntimeError, match=r"call start\(\) first"):
        client.prompt_detailed("hello")
    with pytest.raises(RuntimeError, match=r"call start\(\) first"):
        client.prompt_content([acp.Text("hello")])
    time.sleep(0.2)
    assert read_lines(log) == []


def test_context_manager_and_idempotent_close(make_client) -> None:
    client = make_client(agent(None, emit(chunk_line("hi"), stop_line(2))))
    with client as entered:
        assert entered is client
        client.start()
        assert client.prompt("hello") == "hi"
        pid = client.pid
        assert isinstance(pid, int)
    assert wait_dead(pid, timeout=1.0)
    client.close()
    client.close()
    # Calls after close() are the caller's mistake (first-use.md §1): RuntimeError.
    with pytest.raises(RuntimeError, match="closed"):
        client.prompt("again")
    with pytest.raises(RuntimeError, match="closed"):
        client.prompt_detailed("again")
    with pytest.raises(RuntimeError, match="closed"):
        client.start()
    client.request_cancel()


def test_context_manager_propagates_and_closes(make_client) -> None:
    client = make_client(agent(None, emit(stop_line(2))))
    pid = client.pid
    with pytest.raises(KeyError), client:
        raise KeyError("inside")
    assert wait_dead(pid, timeout=1.0)
