"""Hypothesis properties through the real `Client`, against a scripted agent (a small Python
program run with `sys.executable`) that plays a generated sequence of valid and invalid lines
in answer to `initialize` or to a prompt, then closes its stdout.

The property: the call's result is exactly the one documented for that sequence (computed here
by a model of DESIGN.md's rules: a `PromptResult` with the reply and overflow record, or the one
documented `AcpError` subclass), the observer saw exactly the updates sent before the end, in
order and numbered without gaps, every permission request was committed with the policy's
choice, and afterwards no process or descriptor is left. Never a hang, a crash or an
undocumented exception.

Example counts: the profile "acp-faults" (50 examples per property) runs by default; set
HYPOTHESIS_PROFILE=long for 2,000 (and =soak for 20,000). Every example is bounded by its own
30 s alarm, so long runs are not cut by the suite's per-test alarm.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from conftest import TEST_CLIENT_INFO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .kit import alive, fd_table, wait_for

settings.register_profile(
    "acp-faults",
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("long", parent=settings.get_profile("acp-faults"), max_examples=2_000)
settings.register_profile("soak", parent=settings.get_profile("acp-faults"), max_examples=20_000)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "acp-faults")
if PROFILE not in ("long", "soak"):
    PROFILE = "acp-faults"
RUN = settings(settings.get_profile(PROFILE))

MESSAGE_BYTES = 4096
UPDATE_BYTES = 1024
SESSION = "acp-test"
INIT_RESULT = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}

AGENT = r"""
import json, os, sys

script = json.load(open(sys.argv[1]))
log = open(sys.argv[2], "ab", buffering=0)
phase = script["phase"]
lines = b"".join(bytes.fromhex(line) + b"\n" for line in script["lines"])
stdin = sys.stdin.buffer

def answer(text):
    os.write(1, text.encode() + b"\n")

def serve(until):
    # Answers initialize and session/new until the request named `until` arrives.
    while True:
        line = stdin.readline()
        if not line:
            sys.exit(0)
        log.write(line)
        if b'"method":"initialize"' in line:
            if until == "initialize":
                return
            answer(script["init"])
        elif b'"method":"session/new"' in line:
            answer('{"jsonrpc":"2.0","id":1,"result":{"sessionId":"acp-test"}}')
            if until == "session/new":
                return
        elif until in ("session/prompt",) and b'"method":"session/prompt"' in line:
            return

serve("initialize" if phase == "initialize" else "session/prompt")
view = memoryview(lines)
while view:
    view = view[os.write(1, view):]
if phase == "initialize" and script["serve_session_new"]:
    serve("session/new")
os.close(1)
while True:  # keep stdin open and log what the client still sends, until it closes
    line = stdin.readline()
    if not line:
        break
    log.write(line)
"""


# --- the model --------------------------------------------------------------------------------


@dataclass
class Line:
    """One generated line: its bytes and what it means."""

    kind: str
    data: bytes
    text: str = ""  # update text
    update_kind: str = ""  # wire sessionUpdate of an update
    selection: tuple[str, str] = ("", "")  # a permission's (outcome, option_id)
    code: int | None = None  # an error answer's code
    stop_reason: str = ""


@dataclass
class Expected:
    error: type[BaseException] | None = None
    code: int | None = None
    updates: list[tuple[str, str]] = field(default_factory=list)  # (sessionUpdate, text)
    permissions: list[tuple[str, str]] = field(default_factory=list)
    response: str = ""
    stop_reason: str = ""
    overflow: tuple[str, int, int, int] | None = None
    cancels: int = 0


def expected_outcome(phase: str, lines: list[Line], limits: acp.TransferLimits) -> Expected:
    """What DESIGN.md says the call does with these lines, then the end of output."""
    out = Expected()
    answered = False
    sequence = 1
    reply = b""
    segments = 0
    for line in lines:
        kind = line.kind
        if kind in ("blank", "notification", "request"):
            continue
        if kind == "permission":
            out.permissions.append(line.selection)
            continue
        if kind in ("update", "huge_update", "malformed_update"):
            if sequence > limits.update_count:
                out.error = acp.UpdateCountCapacityExceeded
                return out
            if len(line.data.strip()) > limits.update_bytes:
                out.error = acp.UpdateCapacityExceeded
                return out
            if kind == "malformed_update":
                out.error = acp.AgentProtocolError
                return out
            out.updates.append((line.update_kind, line.text))
            if (
                phase == "prompt"
                and line.update_kind == "agent_message_chunk"
                and out.overflow is None
            ):
                text = line.text.encode()
                if segments + 1 > limits.response_segment_count:
                    out.overflow = ("response_segments", len(reply), segments, sequence)
                elif len(reply) + len(text) > limits.response_bytes:
                    out.overflow = ("response_bytes", len(reply), segments, sequence)
                else:
                    reply += text
                    segments += 1
                if out.overflow is not None:
                    out.cancels = 1
            sequence += 1
            continue
        if kind == "overlong":
            out.error = acp.ReaderMessageCapacityExceeded
            return out
        if kind == "error_answer":
            out.error = acp.AgentProtocolError
            out.code = line.code
            return out
        if kind == "final":
            if phase == "initialize":
                # start() goes on to session/new, whose answer the agent writes after all its
                # lines: the (benign) lines after this one are read while waiting for it.
                answered = True
                continue
            out.response = reply.decode()
            out.stop_reason = line.stop_reason
            return out
        # garbage, invalid UTF-8, non-objects, responses to other ids
        out.error = acp.AgentProtocolError
        return out
    if not answered:
        out.error = acp.AgentProtocolError  # the output ended before the response
    return out


def policy_selection(tool: Any, options: Any) -> tuple[str, str]:
    """The permission policy of DESIGN.md with allowed_tool_kinds=["read"]."""
    if not isinstance(options, list):
        return ("cancelled", "")
    candidates = [
        (o["kind"], o["optionId"])
        for o in options
        if isinstance(o, dict)
        and isinstance(o.get("kind"), str)
        and isinstance(o.get("optionId"), str)
    ]
    allowed = isinstance(tool, dict) and tool.get("kind") == "read"

    def first(wanted: str) -> tuple[str, str] | None:
        for kind, option_id in candidates:
            if kind == wanted:
                return ("selected", option_id)
        return None

    if allowed:
        choice = first("allow_once") or first("allow_always")
        if choice:
            return choice
    choice = first("reject_once")
    if choice:
        return choice
    for kind, option_id in reversed(candidates):
        if kind == "reject_always":
            return ("selected", option_id)
    return ("cancelled", "")


# --- strategies -------------------------------------------------------------------------------

texts = st.text(max_size=40)
ids = st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=8))
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)


def dumps(value: Any, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":")).encode()


def update_message(update: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": SESSION, "update": update},
    }


@st.composite
def update_lines(draw: st.DrawFn) -> Line:
    ascii_only = draw(st.booleans())
    text = draw(texts)
    choice = draw(st.sampled_from(["chunk", "thought", "tool_call", "unknown", "odd_content"]))
    if choice == "chunk":
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        name, shown = "agent_message_chunk", text
    elif choice == "thought":
        update = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}}
        name, shown = "agent_thought_chunk", text
    elif choice == "tool_call":
        update = {"sessionUpdate": "tool_call", "toolCallId": "t", "title": text}
        name, shown = "tool_call", text
    elif choice == "unknown":
        name = draw(st.sampled_from(["plan_update", "notice", "", "x" * 30]))
        update = {"sessionUpdate": name, "text": text}
        shown = ""
    else:
        content = draw(
            json_values.filter(lambda v: not isinstance(v, dict) or v.get("type") != "text")
        )
        update = {"sessionUpdate": "agent_message_chunk", "content": content}
        name, shown = "agent_message_chunk", ""
    return Line("update", dumps(update_message(update), ascii_only), text=shown, update_kind=name)


@st.composite
def permission_lines(draw: st.DrawFn) -> Line:
    option = st.fixed_dictionaries(
        {},
        optional={
            "optionId": st.one_of(st.sampled_from(["a", "b", "c"]), json_scalars),
            "kind": st.one_of(
                st.sampled_from(
                    ["allow_once", "allow_always", "reject_once", "reject_always", "other"]
                ),
                json_scalars,
            ),
            "name": texts,
        },
    )
    options = draw(st.one_of(st.lists(st.one_of(option, json_scalars), max_size=5), json_values))
    tool = draw(
        st.one_of(
            st.fixed_dictionaries(
                {
                    "toolCallId": st.just("t"),
                    "kind": st.sampled_from(["read", "execute"]),
                    "title": texts,
                }
            ),
            json_scalars,
        )
    )
    params = {"sessionId": SESSION, "toolCall": tool, "options": options}
    message = {
        "jsonrpc": "2.0",
        "id": draw(ids),
        "method": "session/request_permission",
        "params": params,
    }
    return Line(
        "permission", dumps(message, draw(st.booleans())), selection=policy_selection(tool, options)
    )


@st.composite
def hostile_lines(draw: st.DrawFn, pending_id: int) -> Line:
    choice = draw(
        st.sampled_from(
            [
                "garbage",
                "not_utf8",
                "non_object",
                "other_id",
                "malformed_update",
                "huge_update",
                "overlong",
                "error_answer",
            ]
        )
    )
    if choice == "garbage":
        tail = draw(st.binary(max_size=30)).replace(b"\n", b"")
        return Line("garbage", b"#" + tail)
    if choice == "not_utf8":
        return Line(
            "garbage",
            b'{"jsonrpc":"2.0","method":"x","params":"\xff'
            + draw(st.binary(max_size=10)).replace(b"\n", b"")
            + b'"}',
        )
    if choice == "non_object":
        value = draw(json_values.filter(lambda v: not isinstance(v, dict)))
        return Line("non_object", dumps(value, True))
    if choice == "other_id":
        other = draw(
            st.one_of(
                st.integers(-5, 50).filter(lambda i: i != pending_id),
                st.just(float(pending_id)),
                st.none(),
            )
        )
        return Line(
            "other_id",
            dumps({"jsonrpc": "2.0", "id": other, "result": {"stopReason": "end_turn"}}, True),
        )
    if choice == "malformed_update":
        params = draw(
            st.one_of(
                json_values.filter(lambda v: not isinstance(v, dict)),
                st.just({"sessionId": SESSION}),
                st.builds(
                    lambda u: {"sessionId": SESSION, "update": u},
                    json_values.filter(lambda v: not isinstance(v, dict)),
                ),
                st.builds(
                    lambda n: {"sessionId": SESSION, "update": {"sessionUpdate": n}},
                    json_values.filter(lambda v: not isinstance(v, str)),
                ),
            )
        )
        return Line(
            "malformed_update",
            dumps({"jsonrpc": "2.0", "method": "session/update", "params": params}, True),
        )
    if choice == "huge_update":
        text = "h" * draw(st.integers(UPDATE_BYTES, MESSAGE_BYTES - 300))
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        return Line(
            "huge_update",
            dumps(update_message(update), True),
            text=text,
            update_kind="agent_message_chunk",
        )
    if choice == "overlong":
        return Line(
            "overlong",
            b'{"pad":"' + b"p" * draw(st.integers(MESSAGE_BYTES, 3 * MESSAGE_BYTES)) + b'"}',
        )
    code = draw(st.integers(-(2**40), 2**40))
    message = {"jsonrpc": "2.0", "id": pending_id, "error": {"code": code, "message": draw(texts)}}
    return Line("error_answer", dumps(message, True), code=code)


def benign_lines() -> st.SearchStrategy[Line]:
    return st.one_of(
        update_lines(),
        update_lines(),
        permission_lines(),
        st.builds(
            lambda ws: Line("blank", ws.encode()), st.sampled_from(["", " ", "\t", "\r", "  \r"])
        ),
        st.builds(
            lambda m: Line(
                "notification", dumps({"jsonrpc": "2.0", "method": m, "params": {}}, True)
            ),
            st.sampled_from(["_x/ping", "session/cancel", "$/progress"]),
        ),
        st.builds(
            lambda i: Line(
                "request",
                dumps(
                    {"jsonrpc": "2.0", "id": i, "method": "fs/read_text_file", "params": {}}, True
                ),
            ),
            ids,
        ),
    )


@st.composite
def scripts(draw: st.DrawFn, phase: str) -> tuple[list[Line], acp.TransferLimits]:
    pending_id = 0 if phase == "initialize" else 2
    body = draw(
        st.lists(
            st.one_of(benign_lines(), benign_lines(), benign_lines(), hostile_lines(pending_id)),
            max_size=25,
        )
    )
    ending = draw(st.sampled_from(["final", "final", "none"]))
    if ending == "final":
        if phase == "initialize":
            final = {"jsonrpc": "2.0", "id": 0, "result": INIT_RESULT}
            body.append(Line("final", dumps(final, True)))
        else:
            reason = draw(st.sampled_from(["end_turn", "cancelled", "max_tokens", "refusal"]))
            final = {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": reason}}
            body.append(Line("final", dumps(final, True), stop_reason=reason))
        body += draw(st.lists(benign_lines(), max_size=3))  # after the end: never read
    limits = acp.TransferLimits(
        request_bytes=1 << 20,
        response_bytes=draw(st.sampled_from([1 << 20, 40, 1])),
        update_bytes=UPDATE_BYTES,
        update_count=draw(st.sampled_from([1 << 20, 3])),
        response_segment_count=draw(st.sampled_from([1 << 20, 2])),
    )
    return body, limits


# --- running a script -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def agent_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scripted-agent") / "agent.py"
    path.write_text(AGENT)
    return path


class Recorder:
    def __init__(self) -> None:
        self.updates: list[acp.Update] = []
        self.permissions: list[acp.PermissionRequest] = []

    def on_update(self, update: acp.Update) -> None:
        self.updates.append(update)

    def on_permission_commit(self, request: acp.PermissionRequest) -> None:
        self.permissions.append(request)


def rearm_guards() -> None:
    """Bound each example (not the whole property) by the suite's 30 s alarm and 90 s watchdog,
    so that long runs (HYPOTHESIS_PROFILE=long) are bounded per example."""
    signal.alarm(30)
    faulthandler.dump_traceback_later(90, exit=True, file=sys.__stderr__)


def check(agent_program: Path, phase: str, lines: list[Line], limits: acp.TransferLimits) -> None:
    rearm_guards()
    expected = expected_outcome(phase, lines, limits)
    fds = fd_table()
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "script.json"
        log = Path(scratch) / "received.jsonl"
        script.write_text(
            json.dumps(
                {
                    "phase": phase,
                    "lines": [line.data.hex() for line in lines],
                    "init": json.dumps({"jsonrpc": "2.0", "id": 0, "result": INIT_RESULT}),
                    "serve_session_new": any(line.kind == "final" for line in lines),
                }
            )
        )
        recorder = Recorder()
        client = acp.Client(
            sys.executable,
            args=["-I", "-S", str(agent_program), str(script), str(log)],
            reader_limits=acp.ReaderLimits(message_bytes=MESSAGE_BYTES),
            transfer_limits=limits,
            transport_epoch=3,
            client_info=TEST_CLIENT_INFO,
            permission_policy=acp.PermissionPolicy(allowed_tool_kinds=["read"]),
            observer=recorder,
        )
        pid = client.pid
        assert pid is not None
        result: acp.PromptResult | None = None
        raised: BaseException | None = None
        try:
            if phase == "initialize":
                client.start()
            else:
                client.start()
                result = client.prompt_detailed("go")
        except acp.AcpError as error:
            raised = error
        try:
            # The documented outcome, exactly.
            if expected.error is None:
                assert raised is None, f"expected success, got {raised!r}"
                if phase == "prompt":
                    assert result is not None
                    assert result.response == expected.response
                    assert result.stop_reason == expected.stop_reason
                    if expected.overflow is None:
                        assert result.overflow is None
                    else:
                        assert result.overflow is not None
                        kind, admitted_bytes, admitted_segments, withheld = expected.overflow
                        assert result.overflow.kind.value == kind
                        assert result.overflow.admitted_bytes == admitted_bytes
                        assert result.overflow.admitted_segments == admitted_segments
                        assert result.overflow.withheld_update_sequence == withheld
                else:
                    assert client.session_id == SESSION
            else:
                # start() reports handshake failures as ConnectError, an AgentProtocolError.
                handshake = isinstance(raised, acp.ConnectError) and phase == "initialize"
                assert type(raised) is expected.error or (
                    handshake and expected.error is acp.AgentProtocolError
                ), f"expected {expected.error.__name__}, got {raised!r}"
                if expected.code is not None:
                    assert isinstance(raised, acp.AgentProtocolError)
                    assert raised.code == expected.code
            # Every update before the end, in order, numbered without gaps.
            seen = [(u.session_update, u.text) for u in recorder.updates]
            assert seen == expected.updates
            assert [u.update_sequence for u in recorder.updates] == list(range(1, len(seen) + 1))
            assert all(u.transport_epoch == 3 for u in recorder.updates)
            committed = [(p.outcome, p.option_id) for p in recorder.permissions]
            assert committed == expected.permissions
            if expected.cancels:
                assert wait_for(lambda: _cancels(log) >= 1, 2.0)
            assert _cancels(log) == expected.cancels
        finally:
            client.close()
        assert wait_for(lambda: not alive(pid), 2.0)
    assert wait_for(lambda: set(fd_table()) == set(fds), 1.0), "a descriptor leaked"


def _cancels(log: Path) -> int:
    try:
        return sum('"method":"session/cancel"' in line for line in log.read_text().splitlines())
    except FileNotFoundError:
        return 0


@RUN
@given(case=scripts("prompt"))
def test_prompt_with_any_sequence_of_lines(
    agent_program: Path, case: tuple[list[Line], acp.TransferLimits]
) -> None:
    lines, limits = case
    check(agent_program, "prompt", lines, limits)


@RUN
@given(case=scripts("initialize"))
def test_start_with_any_sequence_of_lines(
    agent_program: Path, case: tuple[list[Line], acp.TransferLimits]
) -> None:
    lines, limits = case
    check(agent_program, "initialize", lines, limits)


def test_model_agrees_with_a_known_case() -> None:
    """The model itself, on a hand-written case: two chunks, a permission, the response."""
    limits = acp.TransferLimits(1 << 20, 1 << 20, UPDATE_BYTES, 100, 100)
    chunk = Line("update", b"{}", text="a", update_kind="agent_message_chunk")
    lines = [
        chunk,
        Line("permission", b"{}", selection=("cancelled", "")),
        chunk,
        Line("final", b"{}", stop_reason="end_turn"),
    ]
    out = expected_outcome("prompt", lines, limits)
    assert out.error is None
    assert out.response == "aa"
    assert out.updates == [("agent_message_chunk", "a")] * 2
    assert out.permissions == [("cancelled", "")]
