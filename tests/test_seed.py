# ruff: noqa: E501
"""The seed's tests (`seeds/000_e1e3cdbc6ecb0d21.txt`, the Zig client), ported to acp-fast.

Every agent script is the seed's, copied byte for byte; the expected values are the seed's. Where
the seed tests an encoder directly (prompt content, MCP servers), the test reads the exact bytes
the client wrote off the wire instead.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import acp_fast as acp
import pytest
from conftest import (
    TEST_TRANSFER_LIMITS,
    Journal,
    UpdateCounter,
    agent,
    child_pids,
    emit,
    limits,
    logged,
    read_lines,
    stop_line,
    wait_dead,
    wait_for,
    wait_for_lines,
)

# seed: test "client collects ACP agent message chunks"
COLLECT_SCRIPT = r"""prompt_count=0
while IFS= read -r line; do
  case "$line" in
    *'"method":"initialize"'*) printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}' ;;
    *'"method":"session/new"'*) printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"acp-test","modes":{"currentModeId":"plan","availableModes":[{"id":"plan","name":"Plan"},{"id":"act","name":"Act"}]}}}' ;;
    *'"method":"session/prompt"'*)
      prompt_count=$((prompt_count + 1))
      if [ "$prompt_count" -eq 1 ]; then
        printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"{\"decision\":\"accept\"}"}}}}'
        printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
      fi
      ;;
  esac
done"""


@pytest.fixture(params=["blocking", "async"])
def client_driver(request: pytest.FixtureRequest) -> str:
    """The seed port runs against `Client` and `AsyncClient` (tests/aio_sync.py)."""
    return str(request.param)


# seed: test "client preserves ACP initialize capabilities"
CAPABILITIES_SCRIPT = r"""while IFS= read -r line; do
  case "$line" in
    *'"method":"initialize"'*) printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"promptCapabilities":{"image":true,"embeddedContent":true}},"authMethods":[{"id":"token"}]}}' ;;
    *'"method":"session/new"'*) printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"acp-test","modes":{"currentModeId":"plan","availableModes":[{"id":"plan","name":"Plan"},{"id":"act","name":"Act"}]}}}' ;;
  esac
done"""


# seed: test "client preserves ACP session updates"
SESSION_UPDATES_SCRIPT = r"""while IFS= read -r line; do
  case "$line" in
    *'"method":"initialize"'*) printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}' ;;
    *'"method":"session/new"'*) printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"acp-test"}}' ;;
    *'"method":"session/prompt"'*)
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"thinking"}}}}'
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"plan","entries":[{"content":"inspect","status":"pending"}]}}}'
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"done"}}}}'
      printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
      ;;
  esac
done"""


# seed: test "client frames every official ACP v1 session update variant exactly once"
VARIANTS_SCRIPT = r"""while IFS= read -r line; do
  case "$line" in
    *'"method":"initialize"'*) printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}' ;;
    *'"method":"session/new"'*) printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"acp-test"}}' ;;
    *'"method":"session/prompt"'*)
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"user"}}}}'
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"agent"}}}}'
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"thought"}}}}'
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"tool_call","toolCallId":"call-1","title":"Read","kind":"read","status":"pending","content":[]}}}'
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"tool_call_update","toolCallId":"call-1","status":"completed","content":[]}}}'
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"plan","entries":[]}}}'
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}'
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"current_mode_update","currentModeId":"code"}}}'
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"config_option_update","configOptions":[]}}}'
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"session_info_update","title":"Session","updatedAt":"2026-08-15T00:00:00Z"}}}'
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"usage_update","used":1,"size":2}}}'
      printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
      ;;
  esac
done"""


# seed: test "client rejects and records ACP permission callbacks"
REJECT_SCRIPT = r"""while IFS= read -r line; do
  case "$line" in
    *'"method":"initialize"'*) printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}' ;;
    *'"method":"session/new"'*) printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"acp-test"}}' ;;
    *'"method":"session/prompt"'*)
      printf '%s\n' '{"jsonrpc":"2.0","id":"perm-1","method":"session/request_permission","params":{"sessionId":"acp-test","toolCall":{"toolCallId":"tc1","title":"run command","kind":"execute","status":"pending"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}'
      ;;
    *'"id":"perm-1"'*'"outcome":"selected"'*'"optionId":"reject"'*)
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"denied"}}}}'
      printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
      ;;
  esac
done"""


# seed: test "client allows granted ACP permission callbacks"
ALLOW_KIND_SCRIPT = r"""while IFS= read -r line; do
  case "$line" in
    *'"method":"initialize"'*) printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}' ;;
    *'"method":"session/new"'*) printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"acp-test"}}' ;;
    *'"method":"session/prompt"'*)
      printf '%s\n' '{"jsonrpc":"2.0","id":"perm-1","method":"session/request_permission","params":{"sessionId":"acp-test","toolCall":{"toolCallId":"tc1","title":"run command","kind":"execute","status":"pending"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}'
      ;;
    *'"id":"perm-1"'*'"outcome":"selected"'*'"optionId":"allow"'*)
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"allowed"}}}}'
      printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
      ;;
  esac
done"""


# seed: test "client allows granted MCP tool titles without a kind"
ALLOW_TITLE_SCRIPT = r"""while IFS= read -r line; do
  case "$line" in
    *'"method":"initialize"'*) printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}' ;;
    *'"method":"session/new"'*) printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"acp-test"}}' ;;
    *'"method":"session/prompt"'*)
      printf '%s\n' '{"jsonrpc":"2.0","id":"perm-1","method":"session/request_permission","params":{"sessionId":"acp-test","toolCall":{"toolCallId":"tc1","title":"mcp__fixture__tool","status":"pending"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}'
      ;;
    *'"id":"perm-1"'*'"outcome":"selected"'*'"optionId":"allow"'*)
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"granted"}}}}'
      printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'
      ;;
  esac
done"""


# seed: test "client rejects oversized ACP output before parsing"
OVERSIZED_OUTPUT_SCRIPT = r"""while IFS= read -r line; do
  printf '%s' '{"jsonrpc":"2.0","method":"session/update",'
  printf '%s' '"params":{"sessionId":"acp-test","update":'
  printf '%s' '{"sessionUpdate":"agent_message_chunk",'
  printf '%s\n' '"content":{"type":"text","text":"oversized"}}}}'
done"""


# seed: test "client refuses an oversized request before forwarding"
OVERSIZED_REQUEST_SCRIPT = r"""while IFS= read -r line; do
  case "$line" in
    *'"method":"initialize"'*) printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}' ;;
    *'"method":"session/new"'*) printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"acp-test"}}' ;;
    *'"method":"session/prompt"'*) printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"forwarded"}}' ;;
  esac
done"""


# seed: test "client commits admitted response segments and settles overflow"
OVERFLOW_SCRIPT = r"""while IFS= read -r line; do
  case "$line" in
    *'"method":"initialize"'*) printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}' ;;
    *'"method":"session/new"'*) printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"acp-test"}}' ;;
    *'"method":"session/prompt"'*)
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ok"}}}}'
      printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"no"}}}}'
      ;;
    *'"method":"session/cancel"'*) printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}' ;;
  esac
done"""


VARIANT_ENVELOPES = [
    r'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"user"}}}}',
    r'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"agent"}}}}',
    r'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"thought"}}}}',
    r'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"tool_call","toolCallId":"call-1","title":"Read","kind":"read","status":"pending","content":[]}}}',
    r'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"tool_call_update","toolCallId":"call-1","status":"completed","content":[]}}}',
    r'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"plan","entries":[]}}}',
    r'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}',
    r'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"current_mode_update","currentModeId":"code"}}}',
    r'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"config_option_update","configOptions":[]}}}',
    r'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"session_info_update","title":"Session","updatedAt":"2026-08-15T00:00:00Z"}}}',
    r'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-test","update":{"sessionUpdate":"usage_update","used":1,"size":2}}}',
]


EXPECTED_PROMPT_ARRAY = r'[{"type":"text","text":"hello"},{"type":"resource","resource":{"uri":"file:///tmp/context.zig","text":"const answer = 42;","mimeType":"text/zig"}},{"type":"resource_link","uri":"file:///tmp/notes.md","name":"notes.md","mimeType":"text/markdown","title":"Notes","description":"user notes","size":12}]'


def _start(client: acp.Client) -> acp.Client:
    client.start()
    return client


# --- client writes structured ACP prompt content -----------------------------------------------


def test_writes_structured_prompt_content(make_client, tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    client = make_client(agent(log, emit(stop_line(2))), client_info=acp.ClientInfo())
    client.start()
    result = client.prompt_content(
        [
            acp.Text("hello"),
            acp.TextResource(
                uri="file:///tmp/context.zig", text="const answer = 42;", mime_type="text/zig"
            ),
            acp.ResourceLink(
                uri="file:///tmp/notes.md",
                name="notes.md",
                mime_type="text/markdown",
                title="Notes",
                description="user notes",
                size=12,
            ),
        ]
    )
    assert result == acp.PromptResult(response="", stop_reason="end_turn", overflow=None)
    lines = read_lines(log)
    assert len(lines) == 3
    initialize, session_new, prompt = lines
    assert initialize == (
        '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,'
        '"clientCapabilities":{},"clientInfo":{"name":"acp-fast","title":"acp-fast",'
        f'"version":"{acp.__version__}"}}}}}}'
    )
    cwd = json.dumps(os.getcwd(), ensure_ascii=False)
    assert session_new == (
        '{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":'
        + cwd
        + ',"mcpServers":[]}}'
    )
    prefix = '{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"acp-test","prompt":'
    assert prompt.startswith(prefix)
    assert prompt.endswith("}}")
    assert prompt[len(prefix) : -2] == EXPECTED_PROMPT_ARRAY
    assert prompt == prefix + EXPECTED_PROMPT_ARRAY + "}}"


# --- client collects ACP agent message chunks ---------------------------------------------------


def test_collects_agent_message_chunks(make_client, journal: Journal) -> None:
    client = make_client(COLLECT_SCRIPT)
    client.start()
    assert client.initialize.protocol_version == 1
    response = client.prompt("hello")
    assert response == '{"decision":"accept"}'
    assert journal.kinds == [acp.UpdateKind.AGENT_MESSAGE_CHUNK]
    assert journal.texts == ['{"decision":"accept"}']


# --- client preserves ACP initialize capabilities -----------------------------------------------


def test_preserves_initialize_capabilities(make_client) -> None:
    client = make_client(CAPABILITIES_SCRIPT, observer=None)
    client.start()
    initialize = client.initialize
    assert initialize.protocol_version == 1
    assert initialize.load_session is True
    assert initialize.prompt_image is True
    assert initialize.prompt_embedded_content is True
    assert initialize.prompt_audio is False
    assert len(initialize.auth_methods) == 1
    assert [method.id for method in initialize.auth_methods] == ["token"]
    assert initialize.auth_methods == (acp.AuthMethod(id="token", name="", description=""),)
    assert client.modes.current == "plan"
    assert len(client.modes.available) == 2
    assert [mode.id for mode in client.modes.available] == ["plan", "act"]
    assert [mode.name for mode in client.modes.available] == ["Plan", "Act"]


# --- client preserves ACP session updates -------------------------------------------------------


def test_preserves_session_updates(make_client, journal: Journal) -> None:
    client = make_client(SESSION_UPDATES_SCRIPT)
    client.start()
    result = client.prompt_detailed("hello")
    assert result.response == "done"
    assert result.stop_reason == "end_turn"
    assert result.overflow is None
    assert len(journal.updates) == 3
    assert journal.kinds[0] == acp.UpdateKind.AGENT_THOUGHT_CHUNK
    assert journal.texts[0] == "thinking"
    assert journal.kinds[1] == acp.UpdateKind.PLAN
    assert journal.texts[1] == "inspect"
    assert journal.kinds[2] == acp.UpdateKind.AGENT_MESSAGE_CHUNK
    assert journal.sequences == [1, 2, 3]


# --- client frames every official ACP v1 session update variant exactly once --------------------


class FixtureJournal:
    """The seed's FixtureJournal: checks epoch, sequence and envelope of each update as it comes."""

    def __init__(self, expected: list[str], transport_epoch: int) -> None:
        self.expected = expected
        self.transport_epoch = transport_epoch
        self.index = 0
        self.kinds: list[acp.UpdateKind] = []

    def on_update(self, update: acp.Update) -> None:
        assert self.index < len(self.expected), "unexpected update"
        assert update.transport_epoch == self.transport_epoch
        assert update.update_sequence == self.index + 1
        assert update.envelope == self.expected[self.index]
        self.kinds.append(update.kind)
        self.index += 1


def test_frames_every_session_update_variant_once(make_client) -> None:
    fixture_journal = FixtureJournal(VARIANT_ENVELOPES, transport_epoch=9)
    client = make_client(
        VARIANTS_SCRIPT,
        transport_epoch=9,
        client_info=acp.ClientInfo(),
        observer=fixture_journal,
    )
    client.start()
    result = client.prompt_detailed("fixture")
    assert fixture_journal.index == len(VARIANT_ENVELOPES) == 11
    assert result.response == "agent"
    assert fixture_journal.kinds == [
        acp.UpdateKind.USER_MESSAGE_CHUNK,
        acp.UpdateKind.AGENT_MESSAGE_CHUNK,
        acp.UpdateKind.AGENT_THOUGHT_CHUNK,
        acp.UpdateKind.TOOL_CALL,
        acp.UpdateKind.TOOL_CALL_UPDATE,
        acp.UpdateKind.PLAN,
        acp.UpdateKind.AVAILABLE_COMMANDS_UPDATE,
        acp.UpdateKind.CURRENT_MODE_UPDATE,
        acp.UpdateKind.CONFIG_OPTION_UPDATE,
        acp.UpdateKind.SESSION_INFO_UPDATE,
        acp.UpdateKind.USAGE_UPDATE,
    ]
    assert client.next_update_sequence == 12


# --- permission callbacks -----------------------------------------------------------------------

PERMISSION_REQUEST_LINE = '{"jsonrpc":"2.0","id":"perm-1","method":"session/request_permission","params":{"sessionId":"acp-test","toolCall":{"toolCallId":"tc1","title":"run command","kind":"execute","status":"pending"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}'


def test_rejects_and_records_permission(make_client, journal: Journal) -> None:
    client = make_client(REJECT_SCRIPT)
    client.start()
    result = client.prompt_detailed("hello")
    assert result.response == "denied"
    assert len(journal.permissions) == 1
    permission = journal.permissions[0]
    assert permission.session_id == "acp-test"
    assert permission.tool_call_id == "tc1"
    assert permission.title == "run command"
    assert permission.tool_kind == "execute"
    assert permission.status == "pending"
    assert permission.outcome == "selected"
    assert permission.option_id == "reject"
    assert permission.option_kind == "reject_once"
    assert len(permission.options) == 2
    assert permission.options == (
        acp.PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
        acp.PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
    )
    assert permission.envelope == PERMISSION_REQUEST_LINE
    assert permission.request_id == "perm-1"


def test_allows_granted_permission_by_kind(make_client, journal: Journal) -> None:
    client = make_client(
        ALLOW_KIND_SCRIPT,
        permission_policy=acp.PermissionPolicy(allowed_tool_kinds=["execute"]),
    )
    client.start()
    result = client.prompt_detailed("hello")
    assert result.response == "allowed"
    assert len(journal.permissions) == 1
    permission = journal.permissions[0]
    assert permission.outcome == "selected"
    assert permission.option_id == "allow"
    assert permission.option_kind == "allow_once"


def test_allows_granted_mcp_title_prefix(make_client, journal: Journal) -> None:
    client = make_client(
        ALLOW_TITLE_SCRIPT,
        permission_policy=acp.PermissionPolicy(allowed_title_prefixes=["mcp__fixture__"]),
    )
    client.start()
    result = client.prompt_detailed("hello")
    assert result.response == "granted"
    assert len(journal.permissions) == 1
    permission = journal.permissions[0]
    assert permission.outcome == "selected"
    assert permission.option_id == "allow"
    assert permission.option_kind == "allow_once"
    assert permission.title == "mcp__fixture__tool"
    assert permission.tool_kind == ""


# --- client admits reader capacity before spawning the agent ------------------------------------


def test_admits_reader_capacity_before_spawning() -> None:
    with pytest.raises(acp.CapacityOverflow):
        acp.Client(
            "/does/not/exist",
            reader_limits=acp.ReaderLimits(message_bytes=2**64 - 1),
            transfer_limits=TEST_TRANSFER_LIMITS,
            transport_epoch=1,
        )


# --- client rejects oversized ACP output before parsing -----------------------------------------


def test_rejects_oversized_output_before_parsing(make_client) -> None:
    updates = UpdateCounter()
    client = make_client(
        OVERSIZED_OUTPUT_SCRIPT,
        reader_limits=acp.ReaderLimits(message_bytes=32),
        client_info=acp.ClientInfo(),
        observer=updates,
    )
    with pytest.raises(acp.ReaderMessageCapacityExceeded):
        client.start()
    assert updates.count == 0
    assert client.reader_status() == acp.ReaderStatus(
        phase="steady",
        message_bytes=32,
        storage_bytes=33,
        buffered_bytes=33,
        high_water_message_bytes=32,
        rejected_message_count=1,
        terminal=True,
    )


# --- client refuses an oversized request before forwarding --------------------------------------


def test_refuses_oversized_request_before_forwarding(make_client, tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    client = make_client(
        logged(OVERSIZED_REQUEST_SCRIPT, log),
        transfer_limits=limits(request_bytes=512),
        client_info=acp.ClientInfo(),
        observer=None,
    )
    client.start()
    with pytest.raises(acp.RequestCapacityExceeded):
        client.prompt("x" * 1024)
    # Give a wrongly forwarded prompt time to reach the log, then check none did.
    time.sleep(0.3)
    lines = read_lines(log)
    assert len(lines) == 2
    assert '"method":"initialize"' in lines[0]
    assert '"method":"session/new"' in lines[1]
    assert not any('"method":"session/prompt"' in line for line in lines)


# --- client commits admitted response segments and settles overflow -----------------------------

CANCEL_LINE = '{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"acp-test"}}'


def test_commits_admitted_segments_and_settles_overflow(
    make_client, journal: Journal, tmp_path: Path
) -> None:
    log = tmp_path / "received.jsonl"
    client = make_client(
        logged(OVERFLOW_SCRIPT, log),
        transfer_limits=limits(response_bytes=3),
        transport_epoch=3,
        client_info=acp.ClientInfo(),
    )
    client.start()
    result = client.prompt_detailed("overflow")
    assert result.response == "ok"
    assert result.stop_reason == "cancelled"
    assert len(journal.updates) == 2
    assert [update.transport_epoch for update in journal.updates] == [3, 3]
    assert result.overflow is not None
    assert result.overflow.kind == acp.OverflowKind.RESPONSE_BYTES
    assert result.overflow.admitted_bytes == 2
    assert result.overflow.admitted_segments == 1
    assert result.overflow.withheld_update_sequence == 2
    assert result.overflow == acp.Overflow(
        kind=acp.OverflowKind.RESPONSE_BYTES,
        admitted_bytes=2,
        admitted_segments=1,
        withheld_update_sequence=2,
    )
    lines = wait_for_lines(log, lambda lines: CANCEL_LINE in lines)
    time.sleep(0.2)
    lines = read_lines(log)
    assert lines.count(CANCEL_LINE) == 1
    assert sum('"session/cancel"' in line for line in lines) == 1


# --- client cancellation kills process group ----------------------------------------------------


def test_cancellation_kills_process_group(make_client) -> None:
    client = make_client("trap '' TERM; while true; do sleep 5 & wait; done", observer=None)
    pid = client.pid
    assert isinstance(pid, int)
    assert wait_for(lambda: bool(child_pids(pid))), "the agent never started its sleep"
    grandchildren = child_pids(pid)

    client.request_cancel()
    assert wait_dead(pid, timeout=2.0), "the agent outlived request_cancel by 2 s"
    for child in grandchildren:
        assert wait_dead(child, timeout=2.0), "the agent's sleep outlived request_cancel by 2 s"


# --- client serializes stdio MCP servers for session setup --------------------------------------


def test_serializes_stdio_mcp_servers(make_client, tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    client = make_client(
        agent(log, emit(stop_line(2))),
        mcp_servers=[
            acp.McpServer(
                name="sample",
                command="/bin/sample-mcp",
                args=["serve", "stdio"],
                env=[acp.EnvVariable("SAMPLE_SESSION", "session.jsonl")],
            )
        ],
    )
    client.start()
    expected = (
        '[{"name":"sample","command":"/bin/sample-mcp",'
        '"args":["serve","stdio"],"env":['
        '{"name":"SAMPLE_SESSION","value":"session.jsonl"}]}]'
    )
    session_new = read_lines(log)[1]
    cwd = json.dumps(os.getcwd(), ensure_ascii=False)
    prefix = (
        '{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":' + cwd + ',"mcpServers":'
    )
    assert session_new.startswith(prefix)
    assert session_new[len(prefix) : -2] == expected
    assert session_new == prefix + expected + "}}"
