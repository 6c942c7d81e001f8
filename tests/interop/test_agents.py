"""Real agents driven through `acp_fast.Client`: Gemini CLI, claude-code-acp, claude-agent-acp and
codex-acp against the fake model server, and the official TypeScript and Python SDK agents.

Each check runs once per agent it applies to. Runs that compare against the wire are tapped: the
agent sits behind `tee` on both pipes, so the tests see every line each way, byte for byte. The
start, plain-prompt and permission checks run twice, with `protocol="v1"` and `"auto"`: `auto`
offers ACP v2 and every one of these agents answers 1, so it must go on exactly as v1 does.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import acp_fast as acp
import pytest

from .conftest import Harness, Run
from .support import (
    AFTER_TOOL,
    AGENTS,
    HELLO,
    LIMITS,
    TICK_DELAY,
    TICKS,
    describe,
    expected_modes,
    global_problem,
    group_processes,
    tagged_processes,
    v1_and_auto,
    wait_for,
)

ALL = list(AGENTS)
pytestmark = pytest.mark.time_limit(90)

# One line for the whole module when nothing here can run (no Node, no namespace, no agents).
_problem = global_problem()
if _problem:
    pytest.skip(_problem, allow_module_level=True)


def agents(*names: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("harness", names, indirect=True)


def agents_v1_and_auto(names: list[str]) -> pytest.MarkDecorator:
    """The check runs with `protocol="v1"` and with `"auto"` (which falls back to v1 with these
    agents; the ones that answer 2 are driven in v2 by test_v2_agents.py)."""
    return pytest.mark.parametrize(("harness", "protocol"), v1_and_auto(names), indirect=True)


def assert_offered(run: Run, protocol: str) -> None:
    """The `initialize` the client sent: v1's shape with `protocol="v1"`; with `"auto"` v2's
    (protocolVersion 2, `info`, `capabilities` without fs or terminal) carrying v1's
    `clientCapabilities`/`clientInfo` for an agent that answers 1; and what it agreed."""
    assert wait_for(lambda: len(run.sent()) >= 1)
    first = run.sent()[0]
    assert first["method"] == "initialize"
    params = first["params"]
    if protocol == "v1":
        assert params["protocolVersion"] == 1 and "clientCapabilities" in params
    else:
        assert params["protocolVersion"] == 2
        assert set(params) == {
            "protocolVersion",
            "info",
            "capabilities",
            "clientCapabilities",
            "clientInfo",
        }
        assert params["clientInfo"] == params["info"]
        assert not {"fs", "terminal"} & set(params["capabilities"])
    assert run.client.protocol_version == 1


# --- helpers ------------------------------------------------------------------------------------


def answer_to(lines: list[dict[str, Any]], request_id: Any) -> dict[str, Any]:
    """The answer line (no method) with JSON-RPC id `request_id`, compared with its JSON type."""
    for line in lines:
        if "method" not in line and "id" in line and type(line["id"]) is type(request_id):
            if line["id"] == request_id:
                return line
    raise AssertionError(f"no answer with id {request_id!r} in {lines!r}")


def wire_out_until(run: Run, response_id: int) -> list[str]:
    """The agent's lines up to its answer to our request `response_id` (waiting for `tee`)."""

    def answered() -> bool:
        return any(
            "method" not in value and value.get("id") == response_id
            for value in [json.loads(line) for line in run.received()]
        )

    assert wait_for(answered), f"the agent's answer to request {response_id} never reached tee"
    lines = []
    for line in run.received():
        lines.append(line)
        value = json.loads(line)
        if "method" not in value and value.get("id") == response_id:
            break
    return lines


def updates_on_wire(lines: list[str]) -> list[str]:
    return [line for line in lines if json.loads(line).get("method") == "session/update"]


def assert_numbered_and_faithful(run: Run, wire: list[str]) -> None:
    """Every update is numbered from 1 without gaps, carries this client's epoch and session,
    and is exactly the line the agent wrote; together they are every update on the wire."""
    journal, client = run.journal, run.client
    count = len(journal.updates)
    assert journal.sequences == list(range(1, count + 1))
    assert client.next_update_sequence == count + 1
    for update in journal.updates:
        assert update.transport_epoch == 1
        assert update.session_id == client.session_id
        envelope = json.loads(update.envelope)
        assert envelope["method"] == "session/update"
        assert update.json() == envelope["params"]["update"]
        assert update.session_update == envelope["params"]["update"]["sessionUpdate"]
    assert journal.envelopes == updates_on_wire(wire)


def plain_reply(harness: Harness, run: Run, start: int, prompt: str) -> str:
    """The reply the agent should give to a plain prompt."""
    if harness.spec.model_api is not None:
        return "".join(HELLO)
    if harness.spec.echo:
        return prompt
    # The TypeScript example agent plays a fixed script; its reply is the text it streamed.
    text = run.journal.chunk_text(start)
    assert text.startswith("I'll help you with that.")
    return text


# --- start --------------------------------------------------------------------------------------


@agents_v1_and_auto(ALL)
def test_start_captures_initialize_session_and_modes(harness: Harness) -> None:
    run = harness.start(tap=True)
    client = run.client
    assert_offered(run, harness.protocol)
    wire = [json.loads(line) for line in wire_out_until(run, 1)]
    init = answer_to(wire, 0)["result"]
    new = answer_to(wire, 1)["result"]
    info = client.initialize
    assert info.protocol_version == init["protocolVersion"] == 1
    assert info.raw == init
    capabilities = init.get("agentCapabilities") or {}
    prompts = capabilities.get("promptCapabilities") or {}
    assert info.load_session is bool(capabilities.get("loadSession", False))
    assert info.prompt_image is bool(prompts.get("image", False))
    assert info.prompt_audio is bool(prompts.get("audio", False))
    assert info.prompt_embedded_content is bool(prompts.get("embeddedContext", False))
    assert info.agent_info == init.get("agentInfo")
    assert [m.id for m in info.auth_methods] == [m["id"] for m in init.get("authMethods") or []]
    assert [m.name for m in info.auth_methods] == [m["name"] for m in init.get("authMethods") or []]
    assert client.session_id == new["sessionId"] and client.session_id
    # Its modes object, else (opencode 1.18) its "mode" config option.
    current, offered = expected_modes(new)
    assert client.modes.current == current
    assert [(m.id, m.name) for m in client.modes.available] == offered
    if harness.spec.model_api is not None:  # the coding agents all offer modes
        assert client.modes.current and client.modes.available
    if harness.spec.name == "codex-acp":  # auth methods of `type: "env_var"` are understood
        assert {"openai-api-key", "codex-api-key"} <= {m.id for m in info.auth_methods}
        assert info.agent_info == {"name": "codex-acp", "title": "Codex", "version": "0.16.0"}
    assert client.pid is not None and client.pid in tagged_processes(run.launch.tag)


# --- a plain prompt -----------------------------------------------------------------------------


@agents_v1_and_auto(ALL)
def test_plain_prompt_reply_and_every_update(harness: Harness) -> None:
    run = harness.start(tap=True)
    client, journal = run.client, run.journal
    first = client.prompt_detailed("Say hello")
    assert first == acp.PromptResult(
        response=plain_reply(harness, run, 0, "Say hello"), stop_reason="end_turn", overflow=None
    )
    # A second prompt: whatever the agent sent after its first answer (some send updates after
    # the prompt's response) is delivered first, in order, and never mixed into this reply.
    mark = len(journal.updates)
    second = client.prompt_detailed("Say hello again")
    late = [u for u in journal.updates[mark:] if u.kind == acp.UpdateKind.AGENT_MESSAGE_CHUNK]
    assert second.response == "".join(u.text for u in late)
    assert second == acp.PromptResult(
        response=plain_reply(harness, run, mark, "Say hello again"),
        stop_reason="end_turn",
        overflow=None,
    )
    assert_numbered_and_faithful(run, wire_out_until(run, 3))
    if harness.server is not None:
        prompts = [r for r in harness.server.main_requests() if "Say hello" in r.text()]
        assert len(prompts) >= 2, "the fake model never saw the prompts"


# --- a tool-using prompt ------------------------------------------------------------------------


def tool_run(harness: Harness, policy: acp.PermissionPolicy | None) -> tuple[Run, Any, Any]:
    run = harness.start(tap=True, policy=policy)
    result = run.client.prompt_detailed("Please write hello.txt")
    permissions = run.journal.permissions
    assert len(permissions) == 1, permissions
    request = permissions[0]
    # The request id is echoed verbatim: codex-acp uses UUID strings, the others integers.
    if harness.spec.name == "codex-acp":
        assert isinstance(request.request_id, str) and len(request.request_id) == 36
    else:
        assert isinstance(request.request_id, int)
    wire_out = [json.loads(line) for line in run.received()]
    asked = [v for v in wire_out if v.get("method") == "session/request_permission"]
    assert [json.loads(request.envelope)] == asked
    assert request.tool_call_id == asked[0]["params"]["toolCall"]["toolCallId"]
    assert wait_for(lambda: len(run.sent()) >= 4)
    answer = answer_to(run.sent(), request.request_id)
    assert answer["result"] == {
        "outcome": {"outcome": request.outcome, "optionId": request.option_id}
    }
    assert_numbered_and_faithful(run, wire_out_until(run, 2))
    return run, result, request


def first_line_index(run: Run, predicate: Any) -> int:
    for index, line in enumerate(map(json.loads, run.received())):
        if predicate(line):
            return index
    raise AssertionError("line not found")


@agents_v1_and_auto(ALL)
def test_tool_call_allowed_by_policy(harness: Harness) -> None:
    spec = harness.spec
    run, result, request = tool_run(harness, spec.allow_policy)
    assert (request.outcome, request.option_id, request.option_kind) == (
        "selected",
        spec.allow_option,
        "allow_once",
    )
    assert result.stop_reason == "end_turn"
    mine = [u for u in run.journal.updates if u.tool_call_id == request.tool_call_id]
    calls = [u for u in mine if u.kind == acp.UpdateKind.TOOL_CALL]
    updates = [u for u in mine if u.kind == acp.UpdateKind.TOOL_CALL_UPDATE]
    assert updates, "no tool_call_update for the granted tool call"
    assert updates[-1].json().get("status") == "completed"
    if spec.tool_call_before_permission:
        announced = first_line_index(
            run, lambda v: v.get("params", {}).get("update", {}).get("sessionUpdate") == "tool_call"
        )
        asked = first_line_index(run, lambda v: v.get("method") == "session/request_permission")
        assert calls and announced < asked
    if spec.name == "claude-code-acp":  # it announces the same tool call id twice
        assert len(calls) == 2 and calls[0].tool_call_id == calls[1].tool_call_id
    if spec.name == "codex-acp":  # announced once it runs, after the grant
        assert len(calls) == 1
    hello = harness.cwd / "hello.txt"
    if spec.writes_file:
        assert hello.read_text().startswith("hi from")
    if harness.server is not None:
        assert harness.server.main_requests()[-1].has_tool_result()
        assert result.response.endswith("".join(AFTER_TOOL))


@agents_v1_and_auto(ALL)
def test_tool_call_rejected_by_default(harness: Harness) -> None:
    spec = harness.spec
    run, result, request = tool_run(harness, None)
    assert (request.outcome, request.option_id, request.option_kind) == (
        "selected",
        spec.reject_option,
        "reject_once",
    )
    assert result.stop_reason == spec.reject_stop_reason
    assert not (harness.cwd / "hello.txt").exists()
    assert not any(
        u.json().get("status") == "completed"
        for u in run.journal.of_kind(acp.UpdateKind.TOOL_CALL_UPDATE)
        if u.tool_call_id == request.tool_call_id
    )


# claude-code-acp leaves `kind` out of its permission request and sends it only in the earlier
# tool_call update for the same toolCallId: the policy uses that announced kind.
@agents("claude-code-acp")
def test_claude_code_acp_allowed_by_kind(harness: Harness) -> None:
    run = harness.start(policy=acp.PermissionPolicy(allowed_tool_kinds=["edit"]))
    run.client.prompt_detailed("Please write hello.txt")
    announced = run.journal.of_kind(acp.UpdateKind.TOOL_CALL)
    assert announced and announced[0].json()["kind"] == "edit"
    assert run.journal.permissions[0].option_id == "allow"


# --- overflow -----------------------------------------------------------------------------------


@agents(*ALL)
def test_overflow_keeps_what_fit_and_cancels_once(harness: Harness) -> None:
    spec = harness.spec
    limit = 10  # "tick 0. " (8 bytes) fits, "tick 1. " does not
    run = harness.start(tap=True, limits=dataclasses.replace(LIMITS, response_bytes=limit))
    began = time.monotonic()
    result = run.client.prompt_detailed("Please be slow")
    took = time.monotonic() - began
    overflow = result.overflow
    assert overflow is not None and overflow.kind == acp.OverflowKind.RESPONSE_BYTES
    assert result.stop_reason == "cancelled"
    kept = [
        u
        for u in run.journal.updates
        if u.kind == acp.UpdateKind.AGENT_MESSAGE_CHUNK
        and u.update_sequence < overflow.withheld_update_sequence
    ]
    assert result.response == "".join(u.text for u in kept)
    assert overflow.admitted_bytes == len(result.response.encode()) <= limit
    withheld = run.journal.updates[overflow.withheld_update_sequence - 1]
    assert withheld.kind == acp.UpdateKind.AGENT_MESSAGE_CHUNK
    if spec.name == "ts-sdk":  # its first chunk is already longer than the limit
        assert result.response == ""
    else:
        assert result.response == TICKS[0] and withheld.text == TICKS[1]
        assert took < len(TICKS) * TICK_DELAY / 2, "the agent streamed on after session/cancel"
    time.sleep(0.5)  # a second cancel would have been written by now
    cancels = [v for v in run.sent() if v.get("method") == "session/cancel"]
    assert cancels == [
        {
            "jsonrpc": "2.0",
            "method": "session/cancel",
            "params": {"sessionId": run.client.session_id},
        }
    ]


# --- close --------------------------------------------------------------------------------------


@agents(*ALL)
def test_close_leaves_no_process(harness: Harness) -> None:
    run = harness.start()
    client, tag = run.client, run.launch.tag
    if harness.spec.name != "ts-sdk":  # its one scripted turn takes 5 s and starts nothing
        client.prompt_detailed("Say hello")
    pid = client.pid
    assert pid is not None
    before = tagged_processes(tag)
    assert pid in before
    # Gemini relaunches itself in a child node; the Claude adapters run the Claude Code CLI;
    # codex-acp's node shim runs the native binary.
    assert len(before) >= 1 + harness.spec.helpers, describe(before)
    began = time.monotonic()
    client.close()
    took = time.monotonic() - began
    assert took < 5, f"close() took {took:.1f} s"
    assert wait_for(lambda: not tagged_processes(tag), 3), (
        f"left running after close() (of {len(before)} processes): {tagged_processes(tag)}"
    )
    # close() reaps the agent; the rest of its group may take a moment more to finish dying.
    assert wait_for(lambda: not group_processes(pid), 3), describe(group_processes(pid))
    client.close()  # idempotent
