"""Hostile lines: invalid UTF-8, NUL bytes, 100,000 nested arrays, duplicate keys, odd ids,
`session/update` params of every wrong JSON type, unknown content types, and permission requests
whose options have every wrong shape.

Documented outcomes: a line that is not a usable message (not UTF-8, not JSON, not an object, a
malformed `session/update`, an unexpected message) fails the call with `AgentProtocolError`;
fields of the wrong type that the client only reads are read as absent (lenient), so an update
with unknown content is delivered and a permission request with unusable options is answered
(`cancelled` when no option can be chosen). Every update before the fault reaches the observer.
The faults of the reader are the same in ACP v1 and v2 (the shell agent speaks the version through
`watch.wire`); the tests of v1's shapes (updates, permission requests) stay v1.
"""

from __future__ import annotations

import json

import acp_fast as acp
import pytest
from conftest import (
    NEW_RESULT,
    chunk_line,
    emit,
    read_lines,
    stop_line,
    update_line,
    v1_only,
    wait_for,
)

from .kit import Watch, cat, raw_file

PROMPT_ID = 2


@pytest.fixture
def fault_protocol(protocol: str) -> str:
    """A hostile line is the same fault in both versions."""
    return protocol


def play(watch: Watch, lines: list[bytes], *, log: bool = False, name: str = "lines") -> acp.Client:
    """A started client whose agent answers the prompt with `lines` (bytes, verbatim; each
    followed by a newline), then waits for more input (the call must end on the lines alone)."""
    path = raw_file(watch, f"{name}.bin", b"".join(line + b"\n" for line in lines))
    received = watch.tmp_path / "received.jsonl" if log else None
    client = watch.client(watch.wire.agent(received, cat(path)))
    client.start()
    return client


def fails_after(watch: Watch, bad: bytes, match: str) -> acp.AgentProtocolError:
    """Two good updates, then `bad`, then a response that must never be reached."""
    wire = watch.wire
    client = play(
        watch, [wire.chunk("one").encode(), wire.chunk("two").encode(), bad, wire.end(2).encode()]
    )
    with pytest.raises(acp.AgentProtocolError, match=match) as caught:
        client.prompt("hello")
    watch.assert_updates(["one", "two"])
    watch.assert_clean()
    return caught.value


# --- bytes that are not a message ---------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        b"\xff\xfe",
        chunk_line("caf\xe9").encode("latin-1"),  # a Latin-1 byte inside a JSON string
        b'{"jsonrpc":"2.0","method":"session/update","params":{"x":"\xc3"}}',  # truncated char
        b"\xed\xa0\x80",  # an encoded surrogate
    ],
)
def test_invalid_utf8(watch: Watch, bad: bytes) -> None:
    fails_after(watch, bad, "UTF-8")


@pytest.mark.parametrize(
    "bad",
    [
        b"\x00",
        chunk_line("nul\x00inside").encode(),  # a raw NUL inside a JSON string
        chunk_line("after").encode() + b"\x00",  # a NUL after the object
        b"\x00" + chunk_line("before").encode(),
    ],
)
def test_nul_bytes(watch: Watch, bad: bytes) -> None:
    fails_after(watch, bad, "invalid JSON")


def test_escaped_nul_is_text(watch: Watch) -> None:
    """`\\u0000` is valid JSON: the chunk is delivered with a NUL in its text."""
    client = play(watch, [watch.wire.chunk("a\\u0000b").encode(), watch.wire.end(2).encode()])
    assert client.prompt("hello") == "a\x00b"
    watch.assert_updates(["a\x00b"])
    watch.assert_clean()


@pytest.mark.parametrize("depth", [129, 100_000])
def test_deeply_nested_arrays(watch: Watch, depth: int) -> None:
    """A line of 100,000 nested arrays: a clear error, no stack overflow."""
    error = fails_after(watch, b"[" * depth + b"]" * depth, "not a JSON object")
    assert len(str(error)) < 1000, "the message quotes an excerpt, not the whole line"


def test_deeply_nested_objects(watch: Watch) -> None:
    depth = 100_000
    fails_after(watch, b'{"a":' * depth + b"1" + b"}" * depth, "unexpected message")


@v1_only("its deep field is in the prompt's answer, which in v2 only acknowledges")
def test_deep_nesting_inside_a_field(watch: Watch) -> None:
    """Nesting where the client reads a field is read leniently (the field reads as absent);
    nesting in a field it skips is skipped. Neither overflows the stack."""
    depth = 100_000
    deep = "[" * depth + "]" * depth
    content = update_line('{"sessionUpdate":"agent_message_chunk","content":' + deep + "}")
    skipped = update_line('{"sessionUpdate":"plan","entries":[],"_meta":' + deep + "}")
    answer = '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","_meta":' + deep + "}}"
    client = play(watch, [content.encode(), skipped.encode(), answer.encode()])
    result = client.prompt_detailed("hello")
    assert result.response == ""
    assert result.stop_reason == "end_turn"
    watch.assert_updates(["", ""])
    watch.assert_clean()


@pytest.mark.parametrize(
    "bad, match",
    [
        (b"", None),  # blank lines are skipped
        (b"   \t\r", None),
        (b"not json", "invalid JSON"),
        (b"{", "invalid JSON"),
        (b"[]", "not a JSON object"),
        (b'"text"', "not a JSON object"),
        (b"42", "not a JSON object"),
        (b"null", "not a JSON object"),
        (b"{}", "unexpected message"),
        (b'{"jsonrpc":"2.0"}', "unexpected message"),
        (b'{"jsonrpc":"2.0","result":{}}', "unexpected message"),
        (b'{"jsonrpc":"2.0","id":2}', "unexpected message"),  # neither result nor error
        (b'{"jsonrpc":"2.0","method":7,"params":{}}', "unexpected message"),
    ],
)
def test_not_a_message(watch: Watch, bad: bytes, match: str | None) -> None:
    if match is not None:
        fails_after(watch, bad, match)
        return
    wire = watch.wire
    client = play(watch, [wire.chunk("one").encode(), bad, wire.end(2).encode()])
    assert client.prompt("hello") == "one"
    watch.assert_updates(["one"])
    watch.assert_clean()


# --- duplicate keys -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        b'{"jsonrpc":"2.0","id":2,"id":2,"result":{"stopReason":"end_turn"}}',
        b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"},"result":{}}',
        b'{"jsonrpc":"2.0","method":"session/update","method":"session/update",'
        b'"params":{"sessionId":"acp-test","update":{"sessionUpdate":"plan"}}}',
        update_line(
            '{"sessionUpdate":"agent_message_chunk","sessionUpdate":"plan","content":'
            '{"type":"text","text":"x"}}'
        ).encode(),
        update_line(
            '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x",'
            '"text":"y"}}'
        ).encode(),
    ],
)
def test_duplicate_keys_the_client_reads(watch: Watch, bad: bytes) -> None:
    """A key the client acts on, given twice, is ambiguous (parsers disagree on which wins): the
    line is refused as invalid JSON naming the duplicate field, never silently half-read."""
    fails_after(watch, bad, "duplicate field")


@v1_only("its line is a v1 chunk (no messageId); the reader's rule is the same in v2")
def test_duplicate_keys_the_client_skips(watch: Watch) -> None:
    line = update_line(
        '{"sessionUpdate":"agent_message_chunk","_meta":1,"_meta":2,'
        '"content":{"type":"text","text":"ok","annotations":null,"annotations":{}}}'
    )
    client = play(watch, [line.encode(), stop_line(2).encode()])
    assert client.prompt("hello") == "ok"
    watch.assert_updates(["ok"])
    watch.assert_clean()


# --- ids ----------------------------------------------------------------------------------------

ODD_IDS = ["2.0", "2e0", "123456789012345678901234567890", "-2", "null", '"2"', "true", "[2]", "{}"]


@pytest.mark.parametrize("raw_id", ODD_IDS)
def test_response_with_an_odd_id_is_unexpected(watch: Watch, raw_id: str) -> None:
    """Only the integer id the client sent answers its request; 2.0, "2", -2, null, a huge
    number… carrying a result is an unexpected message."""
    bad = f'{{"jsonrpc":"2.0","id":{raw_id},"result":{{"stopReason":"end_turn"}}}}'
    fails_after(watch, bad.encode(), "unexpected message")


@v1_only("a v1 permission request (v2's: sessions/test_v2_turns, host/test_permission_rules)")
@pytest.mark.parametrize(
    "raw_id", ["0", "-1", "2.0", "123456789012345678901234567890", "null", '"p"']
)
def test_permission_request_ids_are_echoed_verbatim(watch: Watch, raw_id: str) -> None:
    request = (
        f'{{"jsonrpc":"2.0","id":{raw_id},"method":"session/request_permission","params":'
        '{"sessionId":"acp-test","toolCall":{"toolCallId":"t","title":"run","kind":"execute"},'
        '"options":[{"optionId":"no","name":"No","kind":"reject_once"}]}}'
    )
    client = play(watch, [request.encode(), stop_line(2).encode()], log=True)
    assert client.prompt_detailed("hello").stop_reason == "end_turn"
    (permission,) = watch.journal.permissions
    assert permission.request_id == json.loads(raw_id)
    assert permission.option_id == "no"
    log = watch.tmp_path / "received.jsonl"
    answer = (
        f'{{"jsonrpc":"2.0","id":{raw_id},"result":{{"outcome":'
        '{"outcome":"selected","optionId":"no"}}}'
    )
    assert wait_for(lambda: answer in read_lines(log)), read_lines(log)
    watch.assert_clean()


@pytest.mark.parametrize("raw_id", ["2.0", "-7", "123456789012345678901234567890", "null", '"x"'])
def test_unknown_requests_get_method_not_found_with_the_id_verbatim(
    watch: Watch, raw_id: str
) -> None:
    request = f'{{"jsonrpc":"2.0","id":{raw_id},"method":"fs/read_text_file","params":{{}}}}'
    client = play(watch, [request.encode(), watch.wire.end(2).encode()], log=True)
    assert client.prompt_detailed("hello").stop_reason == "end_turn"
    log = watch.tmp_path / "received.jsonl"
    answer = (
        f'{{"jsonrpc":"2.0","id":{raw_id},"error":{{"code":-32601,"message":"method not found"}}}}'
    )
    assert wait_for(lambda: answer in read_lines(log)), read_lines(log)
    watch.assert_clean()


# --- session/update params ----------------------------------------------------------------------

WRONG_TYPES = ["null", "true", "0", "-1.5", '"params"', "[]", '[{"update":{}}]']


def update_with_params(params: str) -> bytes:
    return f'{{"jsonrpc":"2.0","method":"session/update","params":{params}}}'.encode()


@pytest.mark.parametrize("params", WRONG_TYPES)
def test_update_params_of_a_wrong_type(watch: Watch, params: str) -> None:
    fails_after(watch, update_with_params(params), "session/update")


def test_update_without_params(watch: Watch) -> None:
    fails_after(watch, b'{"jsonrpc":"2.0","method":"session/update"}', "session/update")


@pytest.mark.parametrize("update", ["null", "true", "1", '"u"', "[]", "[{}]", "{}"])
def test_update_object_of_a_wrong_type(watch: Watch, update: str) -> None:
    fails_after(
        watch, update_with_params('{"sessionId":"acp-test","update":' + update + "}"), "update"
    )


@pytest.mark.parametrize("kind", ["null", "true", "1", "[]", '{"x":1}'])
def test_session_update_name_of_a_wrong_type(watch: Watch, kind: str) -> None:
    fails_after(watch, update_line('{"sessionUpdate":' + kind + "}").encode(), "sessionUpdate")


@v1_only("v1's update shapes (tool_call, plan, current_mode_update)")
def test_update_fields_of_wrong_types_read_as_absent(watch: Watch) -> None:
    """sessionId, content, text, title, toolCallId, messageId, entries of wrong types: the update
    is delivered with those fields empty."""
    lines = [
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":5,"update":'
        '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":5},'
        '"messageId":[],"toolCallId":{}}}}',
        update_line('{"sessionUpdate":"tool_call","title":["t"],"toolCallId":7}'),
        update_line('{"sessionUpdate":"plan","entries":{"content":"x"}}'),
        update_line('{"sessionUpdate":"plan","entries":[1,null,{"content":2},{"content":"ok"}]}'),
        update_line('{"sessionUpdate":"current_mode_update","currentModeId":false}'),
    ]
    client = play(watch, [line.encode() for line in lines] + [stop_line(2).encode()])
    assert client.prompt("hello") == ""
    watch.assert_updates(["", "", "", "ok", ""])
    first = watch.journal.updates[0]
    assert first.session_id == ""
    assert first.message_id is None
    assert first.tool_call_id is None
    watch.assert_clean()


# --- unknown content types and update kinds -----------------------------------------------------


@v1_only("v1's update kinds: plan_update is unknown to v1 only")
def test_unknown_content_types_and_update_kinds(watch: Watch) -> None:
    """Content that is not a text block gives "" (the chunk is still delivered and counted);
    an unknown sessionUpdate is delivered as UNKNOWN. Nothing is lost."""
    chunk = '{{"sessionUpdate":"agent_message_chunk","content":{content}}}'
    contents = [
        '{"type":"image","mimeType":"image/png","data":"AAAA"}',
        '{"type":"hologram","text":"ignored"}',
        '{"text":"no type"}',
        '"just a string"',
        "null",
        "[]",
        '{"type":"text","text":"real"}',
    ]
    lines = [update_line(chunk.format(content=c)) for c in contents]
    lines.append(update_line('{"sessionUpdate":"_vendor_plan","text":"?"}'))
    lines.append(update_line('{"sessionUpdate":"","whatever":true}'))
    client = play(watch, [line.encode() for line in lines] + [stop_line(2).encode()])
    result = client.prompt_detailed("hello")
    assert result.response == "real"
    watch.assert_updates(["", "", "", "", "", "", "real", "", ""])
    kinds = watch.journal.kinds
    assert kinds[:7] == [acp.UpdateKind.AGENT_MESSAGE_CHUNK] * 7
    assert kinds[7:] == [acp.UpdateKind.UNKNOWN, acp.UpdateKind.UNKNOWN]
    assert [u.session_update for u in watch.journal.updates[7:]] == ["_vendor_plan", ""]
    assert watch.journal.updates[0].json()["content"]["type"] == "image"
    watch.assert_clean()


# --- permission requests ------------------------------------------------------------------------


def permission(params: str, raw_id: str = '"perm"') -> bytes:
    return (
        f'{{"jsonrpc":"2.0","id":{raw_id},"method":"session/request_permission","params":{params}}}'
    ).encode()


TOOL = '"toolCall":{"toolCallId":"t1","title":"Run ls","kind":"execute"}'
OPTION_SHAPES = [
    ("absent", f'{{"sessionId":"acp-test",{TOOL}}}', "cancelled", ""),
    ("null", f'{{"sessionId":"acp-test",{TOOL},"options":null}}', "cancelled", ""),
    ("number", f'{{"sessionId":"acp-test",{TOOL},"options":3}}', "cancelled", ""),
    ("string", f'{{"sessionId":"acp-test",{TOOL},"options":"allow"}}', "cancelled", ""),
    ("object", f'{{"sessionId":"acp-test",{TOOL},"options":{{"optionId":"a"}}}}', "cancelled", ""),
    ("empty", f'{{"sessionId":"acp-test",{TOOL},"options":[]}}', "cancelled", ""),
    (
        "scalars",
        f'{{"sessionId":"acp-test",{TOOL},"options":[1,"a",null,true,[]]}}',
        "cancelled",
        "",
    ),
    ("empty objects", f'{{"sessionId":"acp-test",{TOOL},"options":[{{}},{{}}]}}', "cancelled", ""),
    (
        "ids of wrong types",
        f'{{"sessionId":"acp-test",{TOOL},"options":[{{"optionId":1,"kind":"reject_once"}},'
        '{"optionId":null,"kind":"reject_always"}]}',
        "cancelled",
        "",
    ),
    (
        "kinds of wrong types",
        f'{{"sessionId":"acp-test",{TOOL},"options":[{{"optionId":"a","kind":5}},'
        '{"optionId":"b","kind":["reject_once"]},{"optionId":"c"}]}',
        "cancelled",
        "",
    ),
    (
        "unknown kinds",
        f'{{"sessionId":"acp-test",{TOOL},"options":[{{"optionId":"a","kind":"maybe"}}]}}',
        "cancelled",
        "",
    ),
    (
        "one usable among junk",
        f'{{"sessionId":"acp-test",{TOOL},"options":[7,{{"optionId":2}},'
        '{"optionId":"r","name":"Reject","kind":"reject_once"},"x"]}',
        "selected",
        "r",
    ),
    ("params null", "null", "cancelled", ""),
    ("params array", '[{"options":[{"optionId":"r","kind":"reject_once"}]}]', "cancelled", ""),
    ("params string", '"options"', "cancelled", ""),
    (
        "toolCall wrong type",
        '{"sessionId":"acp-test","toolCall":"run","options":'
        '[{"optionId":"r","kind":"reject_once"}]}',
        "selected",
        "r",
    ),
]


@v1_only("v1's permission request shape (toolCall)")
@pytest.mark.parametrize(
    "params, outcome, option_id",
    [shape[1:] for shape in OPTION_SHAPES],
    ids=[shape[0] for shape in OPTION_SHAPES],
)
def test_permission_options_of_every_wrong_shape(
    watch: Watch, params: str, outcome: str, option_id: str
) -> None:
    """The request is answered all the same: with the policy's choice among the usable options,
    or `cancelled` when there is none; the observer commits it; the prompt goes on."""
    lines = [chunk_line("before").encode(), permission(params), chunk_line("after").encode()]
    client = play(watch, [*lines, stop_line(2).encode()], log=True)
    assert client.prompt("hello") == "beforeafter"
    (committed,) = watch.journal.permissions
    assert committed.outcome == outcome
    assert committed.option_id == option_id
    assert committed.envelope == permission(params).decode()
    if outcome == "cancelled":
        answer = '{"jsonrpc":"2.0","id":"perm","result":{"outcome":{"outcome":"cancelled"}}}'
    else:
        answer = (
            '{"jsonrpc":"2.0","id":"perm","result":{"outcome":'
            f'{{"outcome":"selected","optionId":"{option_id}"}}}}}}'
        )
    log = watch.tmp_path / "received.jsonl"
    assert wait_for(lambda: answer in read_lines(log)), read_lines(log)
    watch.assert_updates(["before", "after"])
    watch.assert_clean()


def test_permission_request_without_an_id(watch: Watch) -> None:
    """It cannot be answered: the call fails."""
    bad = (
        '{"jsonrpc":"2.0","method":"session/request_permission","params":'
        f'{{"sessionId":"acp-test",{TOOL},"options":[]}}}}'
    )
    fails_after(watch, bad.encode(), "without an id")


# --- during start() -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer, match",
    [
        (b"\xff", "UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "not a JSON object"),
        (b'{"jsonrpc":"2.0","id":0.0,"result":{"protocolVersion":1}}', "unexpected message"),
        (b'{"jsonrpc":"2.0","id":0,"result":[]}', "not a JSON object"),
        (b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"1"}}', "protocolVersion"),
        (b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2}}', "version 2"),
    ],
)
@v1_only("what a v1 client refuses (an answer of 2 among them)")
def test_hostile_initialize_answers(watch: Watch, answer: bytes, match: str) -> None:
    path = raw_file(watch, "init.bin", chunk_line("early").encode() + b"\n" + answer + b"\n")
    script = (
        "while IFS= read -r line; do\n"
        '  case "$line" in\n'
        f'    *\'"method":"initialize"\'*) {cat(path)} ;;\n'
        f'    *\'"method":"session/new"\'*) {emit(NEW_RESULT)} ;;\n'
        "  esac\n"
        "done\n"
    )
    client = watch.client(script)
    with pytest.raises(acp.AgentProtocolError, match=match):
        client.start()
    assert client.session_id is None
    watch.assert_updates(["early"])
    watch.assert_clean()
