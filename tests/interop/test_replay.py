"""Replays every recorded transcript of a real agent (tests/interop/data/*.jsonl, from
shared/interop-transcripts) through `acp_fast.Client`, with `acp_fast.replay_agent` playing the
agent's side: the client must deliver every update, exactly as sent and numbered from 1, answer
every request of the agent, and end each call the way the recorded run ended (the recorded stop
reason, or the recorded error). No network, no Node: these run in every test run.

Where the recorded client cancelled mid-reply, the replay sets `response_bytes` so that the
reply overflows at the same chunk, and the agent waits for the client's one `session/cancel`.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from acp_fast import replay_agent

from .support import DATA, LIMITS, REPLAY_AGENT_ARGS, Journal, expected_modes, read_json_lines

TRANSCRIPTS = sorted(DATA.glob("*.jsonl"))
ALLOWED_KINDS = ("edit", "execute")
DRAIN_PROMPT = "drain"


def wire(message: dict[str, Any]) -> str:
    """A message as the replay agent writes it (compact JSON, UTF-8)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


@dataclass
class Answer:
    """How the recorded agent answered one of the client's requests (None: it never did)."""

    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


@dataclass
class Expected:
    """What the client must show when the transcript is replayed, worked out from it alone."""

    answers: dict[str, Answer | None] = field(default_factory=dict)  # by client method
    prompt_text: str = "hello"
    updates_before: list[str] = field(default_factory=list)  # before the prompt's answer
    updates_after: list[str] = field(default_factory=list)  # after it
    requests: list[dict[str, Any]] = field(default_factory=list)  # the agent's own requests
    # for each request: toolCallId -> kind announced by tool_call updates before it
    announced_kinds: list[dict[Any, str]] = field(default_factory=list)
    cancel_after_bytes: int | None = None  # response_bytes that overflows where it cancelled


def expected_from(path: Path) -> Expected:
    entries = read_json_lines(path)
    expected = Expected()
    method_of: dict[str, str] = {}
    for method in ("initialize", "session/new", "session/prompt"):
        expected.answers[method] = None
    prompt_answered = False
    prompt_chunks: list[bytes] = []  # reply chunks of the current prompt, in order
    last_agent_line: dict[str, Any] | None = None
    announced: dict[Any, str] = {}  # toolCallId -> kind, from tool_call updates so far
    for entry in entries:
        message = entry.get("msg")
        if not isinstance(message, dict):
            continue
        if entry["dir"] == "->":
            if "method" in message and "id" in message:
                method_of[json.dumps(message["id"])] = message["method"]
                if message["method"] == "session/prompt":
                    expected.prompt_text = message["params"]["prompt"][0]["text"]
            if message.get("method") == "session/cancel" and last_agent_line is not None:
                update = last_agent_line.get("params", {}).get("update", {})
                if update.get("sessionUpdate") == "agent_message_chunk" and prompt_chunks:
                    kept = sum(len(chunk) for chunk in prompt_chunks[:-1])
                    limit = kept + len(prompt_chunks[-1]) - 1
                    if limit > 0:
                        expected.cancel_after_bytes = limit
            continue
        if entry["dir"] != "<-":
            continue
        last_agent_line = message
        if "method" not in message and "id" in message:
            method = method_of.get(json.dumps(message["id"]), "")
            if method in expected.answers:
                expected.answers[method] = Answer(message.get("result"), message.get("error"))
                prompt_answered = prompt_answered or method == "session/prompt"
        elif message.get("method") == "session/update":
            (expected.updates_after if prompt_answered else expected.updates_before).append(
                wire(message)
            )
            update = message["params"]["update"]
            if update.get("sessionUpdate") in ("tool_call", "tool_call_update") and isinstance(
                update.get("kind"), str
            ):
                announced[update.get("toolCallId")] = update["kind"]
            content = update.get("content")
            if (
                update.get("sessionUpdate") == "agent_message_chunk"
                and isinstance(content, dict)
                and content.get("type") == "text"
            ):
                prompt_chunks.append(content["text"].encode())
        elif "method" in message and "id" in message:
            expected.requests.append(message)
            expected.announced_kinds.append(dict(announced))
    return expected


def policy_choice(request: dict[str, Any], announced: dict[Any, str]) -> tuple[str, str]:
    """(outcome, optionId) the client's policy must answer a recorded permission request with.
    A request without `toolCall.kind` is judged by the kind announced for its toolCallId."""
    options = request["params"].get("options") or []
    tool_call = request["params"].get("toolCall") or {}
    kind = tool_call.get("kind", announced.get(tool_call.get("toolCallId")))

    def first(kind: str) -> str | None:
        return next((o["optionId"] for o in options if o.get("kind") == kind), None)

    if kind in ALLOWED_KINDS:
        chosen = first("allow_once") or first("allow_always")
    else:
        rejects = [o["optionId"] for o in options if o.get("kind") == "reject_always"]
        chosen = first("reject_once") or (rejects[-1] if rejects else None)
    return ("selected", chosen) if chosen is not None else ("cancelled", "")


def reply_text(updates: list[str], withheld_from: int | None) -> str:
    """The reply kept from these update lines (numbered from 1): the text chunks before the
    first one withheld."""
    text = []
    for number, line in enumerate(updates, start=1):
        if withheld_from is not None and number >= withheld_from:
            break
        update = json.loads(line)["params"]["update"]
        content = update.get("content")
        if update["sessionUpdate"] == "agent_message_chunk" and isinstance(content, dict):
            text.append(content.get("text", "") if content.get("type") == "text" else "")
    return "".join(text)


def check_error(caught: pytest.ExceptionInfo[acp.AgentProtocolError], answer: Answer | None):
    """An error answer surfaces with its code and message; a missing one as the output ending."""
    if answer is not None and answer.error is not None:
        assert caught.value.code == answer.error["code"]
        assert caught.value.message == answer.error["message"]
    else:
        assert caught.value.code is None


def test_transcripts_are_there() -> None:
    assert len(TRANSCRIPTS) >= 29
    names = " ".join(path.name for path in TRANSCRIPTS)
    for agent in ("gemini", "claude-code-acp", "claude-agent-acp", "codex-acp", "ts-", "py-"):
        assert agent in names


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def test_replay(path: Path, tmp_path: Path) -> None:
    expected = expected_from(path)
    log = tmp_path / "client.jsonl"
    args = [*REPLAY_AGENT_ARGS, str(path), "--log", str(log)]
    limits = LIMITS
    if expected.cancel_after_bytes is not None:
        args.append("--wait-cancel")
        limits = dataclasses.replace(LIMITS, response_bytes=expected.cancel_after_bytes)
    journal = Journal()
    with acp.Client(
        sys.executable,
        args=args,
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=limits,
        transport_epoch=7,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        permission_policy=acp.PermissionPolicy(allowed_tool_kinds=ALLOWED_KINDS),
        observer=journal,
    ) as client:
        init = expected.answers["initialize"]
        new = expected.answers["session/new"]
        prompt = expected.answers["session/prompt"]
        if init is None or init.result is None or new is None or new.result is None:
            with pytest.raises(acp.AgentProtocolError) as caught:
                client.start()
            check_error(caught, new if init is not None and init.result is not None else init)
            assert journal.updates == []
            return
        client.start()
        check_start(client, init.result, new.result)

        if prompt is None or prompt.result is None:
            with pytest.raises(acp.AgentProtocolError) as caught:
                client.prompt_detailed(expected.prompt_text)
            check_error(caught, prompt)
            if prompt is not None:
                assert client.agent_error == prompt.error["message"]  # type: ignore[index]
            result = None
        else:
            result = client.prompt_detailed(expected.prompt_text)
            assert result.stop_reason == prompt.result["stopReason"]
        assert journal.envelopes == expected.updates_before

        if result is not None:
            withheld = result.overflow.withheld_update_sequence if result.overflow else None
            assert result.response == reply_text(expected.updates_before, withheld)
            if expected.cancel_after_bytes is not None:
                assert result.overflow is not None
                assert result.overflow.kind == acp.OverflowKind.RESPONSE_BYTES
            else:
                assert result.overflow is None
        if prompt is not None:
            # Updates the agent sent after answering the prompt arrive with the next call, in
            # order, and stay out of its reply.
            drained = client.prompt_detailed(DRAIN_PROMPT)
            assert drained == acp.PromptResult(response="", stop_reason="end_turn", overflow=None)
            assert journal.envelopes == expected.updates_before + expected.updates_after

        count = len(journal.updates)
        assert journal.sequences == list(range(1, count + 1))
        assert client.next_update_sequence == count + 1
        for update in journal.updates:
            assert update.transport_epoch == 7
            assert update.json() == json.loads(update.envelope)["params"]["update"]
        check_requests_answered(expected, journal, log, client)


def check_start(client: acp.Client, init: dict[str, Any], new: dict[str, Any]) -> None:
    info = client.initialize
    assert info.raw == init
    assert info.protocol_version == init["protocolVersion"]
    assert info.agent_info == init.get("agentInfo")
    methods = init.get("authMethods") or []
    assert [(m.id, m.name) for m in info.auth_methods] == [(m["id"], m["name"]) for m in methods]
    assert client.session_id == new["sessionId"]
    current, offered = expected_modes(new)  # the modes object, else the "mode" option
    assert client.modes.current == current
    assert [(m.id, m.name) for m in client.modes.available] == offered


def check_requests_answered(
    expected: Expected, journal: Journal, log: Path, client: acp.Client
) -> None:
    """Every request of the agent got exactly one answer with its id, verbatim: permission
    requests the policy's choice (also seen by `on_permission_commit`), others -32601."""
    sent = read_json_lines(log)
    answers = [line for line in sent if "method" not in line]
    permissions = [r for r in expected.requests if r["method"] == "session/request_permission"]
    assert [p.request_id for p in journal.permissions] == [r["id"] for r in permissions]
    assert [p.envelope for p in journal.permissions] == [wire(r) for r in permissions]
    assert len(answers) == len(expected.requests)
    for request, answer, announced in zip(
        expected.requests, answers, expected.announced_kinds, strict=True
    ):
        assert type(answer["id"]) is type(request["id"]) and answer["id"] == request["id"]
        if request["method"] == "session/request_permission":
            outcome, option = policy_choice(request, announced)
            wanted: dict[str, Any] = {"outcome": outcome}
            if option:
                wanted["optionId"] = option
            assert answer == {"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": wanted}}
        else:
            assert answer == {
                "jsonrpc": "2.0",
                "id": request["id"],
                "error": {"code": -32601, "message": "method not found"},
            }
    cancels = [line for line in sent if line.get("method") == "session/cancel"]
    wanted_cancels = 1 if expected.cancel_after_bytes is not None else 0
    assert (
        cancels
        == [
            {
                "jsonrpc": "2.0",
                "method": "session/cancel",
                "params": {"sessionId": client.session_id},
            }
        ]
        * wanted_cancels
    )


# --- the host side: recorded fs/terminal traffic served for real --------------------------------

HOST_TRANSCRIPTS = sorted(DATA.glob("*-host-*.jsonl"))
RECORDED_CWD = "/workspace/work"  # record_host.py writes each run's root as /workspace
HOST_METHODS = tuple(m.value for m in acp.ClientMethod)


def recorded_exchanges(
    path: Path, cwd: str
) -> tuple[dict[str, Any], list[tuple[dict[str, Any], dict[str, Any]]]]:
    """The recorded `initialize` params and each fs/terminal request of the agent with the
    recorded client's answer, the recorded cwd read as `cwd`."""
    entries = [replay_agent.map_paths(entry, RECORDED_CWD, cwd) for entry in read_json_lines(path)]
    messages = [(e["dir"], e["msg"]) for e in entries if isinstance(e.get("msg"), dict)]
    init = next(m for d, m in messages if d == "->" and m.get("method") == "initialize")
    pending: dict[str, dict[str, Any]] = {}
    exchanges = []
    for direction, message in messages:
        if direction == "<-" and message.get("method") in HOST_METHODS:
            pending[json.dumps(message["id"])] = message
        elif direction == "->" and "method" not in message:
            request = pending.pop(json.dumps(message.get("id")), None)
            if request is not None:
                exchanges.append((request, message))
    return init["params"], exchanges


def test_host_transcripts_are_there() -> None:
    names = [path.stem for path in HOST_TRANSCRIPTS]
    assert names == [
        "claude-code-acp-host-terminal",
        "claude-code-acp-host-write",
        "gemini-host-read-write",
        "opencode-host-write",
    ]


@pytest.mark.parametrize("path", HOST_TRANSCRIPTS, ids=[p.stem for p in HOST_TRANSCRIPTS])
def test_replay_served_by_the_host(path: Path, tmp_path: Path) -> None:
    """The recorded agent's fs/terminal requests, its paths moved into this test's directory,
    are served for real: reads see the file the test prepared, writes land, the terminal runs,
    and every answer and activity record is what the recorded (acp-fast) client answered."""
    cwd = tmp_path.resolve() / "work"
    cwd.mkdir()
    init, exchanges = recorded_exchanges(path, str(cwd))
    assert exchanges, "no fs/terminal traffic recorded"
    prepared: dict[str, str] = {}
    for request, answer in exchanges:  # a file read before anything writes it existed
        params = request["params"]
        if request["method"] == "fs/write_text_file":
            prepared.setdefault(params["path"], "")
        elif request["method"] == "fs/read_text_file" and params["path"] not in prepared:
            prepared[params["path"]] = answer["result"]["content"]
            Path(params["path"]).write_text(answer["result"]["content"], encoding="utf-8")
    offered = init["clientCapabilities"]
    capabilities = acp.ClientCapabilityConfig(
        read_text_file=offered["fs"]["readTextFile"],
        write_text_file=offered["fs"]["writeTextFile"],
        terminal=offered["terminal"],
        read_missing_as_empty=True,
    )
    expected = expected_from(path)
    log = tmp_path / "client.jsonl"
    journal = Journal()
    with acp.Client(
        sys.executable,
        args=[
            *REPLAY_AGENT_ARGS,
            str(path),
            "--log",
            str(log),
            "--map-path",
            f"{RECORDED_CWD}={cwd}",
        ],
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=LIMITS,
        transport_epoch=7,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin"},
        permission_policy=acp.PermissionPolicy(allowed_tool_kinds=ALLOWED_KINDS),
        observer=journal,
        capabilities=capabilities,
    ) as client:
        client.start()
        assert client.session_id == expected.answers["session/new"].result["sessionId"]  # type: ignore[union-attr]
        result = client.prompt_detailed(expected.prompt_text)
        assert result.stop_reason == expected.answers["session/prompt"].result["stopReason"]  # type: ignore[union-attr]

    sent = {json.dumps(m["id"]): m for m in read_json_lines(log) if "method" not in m}
    for request, recorded in exchanges:
        live = sent[json.dumps(request["id"])]
        assert live == recorded, request
        params = request["params"]
        if request["method"] == "fs/read_text_file":
            assert live["result"]["content"] == prepared[params["path"]]
        elif request["method"] == "fs/write_text_file":
            assert Path(params["path"]).read_text(encoding="utf-8") == params["content"]
        elif request["method"] == "terminal/create":
            assert live["result"]["terminalId"] == "term-1"
        elif request["method"] == "terminal/output":
            assert live["result"]["output"] == f"{cwd}\n"  # the recorded `pwd`, run here
            assert live["result"]["exitStatus"] == {"exitCode": 0, "signal": None}
        elif request["method"] == "terminal/wait_for_exit":
            assert live["result"] == {"exitCode": 0, "signal": None}
    # One activity record per request, in order, each allowed and answered without error.
    assert [a.method for a in journal.activity] == [r["method"] for r, _ in exchanges]
    for activity, (request, _) in zip(journal.activity, exchanges, strict=True):
        params = request["params"]
        assert (activity.allowed, activity.error_code, activity.reason) == (True, None, None)
        assert activity.session_id == params["sessionId"]
        if request["method"].startswith("fs/"):
            assert activity.path == params["path"]
        elif request["method"] == "terminal/create":
            assert (activity.path, activity.command) == (str(cwd), params["command"])
            assert activity.terminal_id == "term-1"
        else:
            assert activity.terminal_id == params["terminalId"]
    # The permission requests were answered as recorded, as in the plain replay.
    assert [p.request_id for p in journal.permissions] == [
        r["id"] for r in expected.requests if r["method"] == "session/request_permission"
    ]


def test_map_path_reads_a_recorded_directory_as_another(tmp_path: Path) -> None:
    recorded = {"cwd": "/workspace/work", "paths": ["/workspace/work/a", "/elsewhere"], "n": 1}
    assert replay_agent.map_paths(recorded, "/workspace/work", "/t/w") == {
        "cwd": "/t/w",
        "paths": ["/t/w/a", "/elsewhere"],
        "n": 1,
    }
    path = HOST_TRANSCRIPTS[0]
    bad = subprocess.run(
        [sys.executable, *REPLAY_AGENT_ARGS, str(path), "--map-path", "no-equals-sign"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert bad.returncode == 1
    assert bad.stderr == ("acp-fast replay: error: --map-path 'no-equals-sign': expected OLD=NEW\n")
