"""ACP v2 agents written by others, driven with `protocol="v2"` and `"auto"` through `Client` and
`AsyncClient` (issue 25 item 6, design/protocol-now.md §4): the Rust SDK's `simple_agent_v2`
example and our agent on the TypeScript SDK 2.4.0's experimental v2 API (`v2_agents.py`).

What each shows: the v2 handshake (v2's initialize shape, version 2 agreed); turns that end at
the turn's own `state_update` `idle` with the reply and stop reason (simple_agent_v2 reports an
`idle` before its first turn's `running`, which must not end that turn); a permission request in
v2's shape allowed and rejected by rules (kind and title) and by an observer; a cancel mid-turn
ending `cancelled` (and one while a permission is pending); every update numbered and exactly
the agent's line. `protocol="v2"` against a v1 agent fails start, saying what to use instead.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import acp_fast as acp
import pytest

from .conftest import Harness, Run
from .support import (
    AFTER_TOOL,
    HELLO,
    V2_REAL_AGENTS,
    Journal,
    global_problem,
    tagged_processes,
    wait_for,
)
from .test_agents import answer_to, updates_on_wire
from .test_sessions import AskingJournal, plain, sent_methods
from .v2_agents import SCRIPTED, V2_AGENTS, V2Spec

pytestmark = pytest.mark.time_limit(60)

_problem = global_problem()
if _problem:
    pytest.skip(_problem, allow_module_level=True)

V2 = list(V2_AGENTS)
CHUNK = acp.UpdateKind.AGENT_MESSAGE_CHUNK
#: The TypeScript agent's "slow" turn: "tick N. " every 0.3 s, 40 at most.
TICKS = tuple(f"tick {n}. " for n in range(40))
TICK_DELAY = 0.3


def agents(*names: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("harness", names, indirect=True)


v2_and_auto = pytest.mark.parametrize("protocol", ["v2", "auto"], indirect=True)


def spec_of(harness: Harness) -> V2Spec:
    assert isinstance(harness.spec, V2Spec)
    return harness.spec


def wire_updates_until_idle(run: Run, count: int) -> list[str]:
    """The agent's session/update lines, once the tap has logged `count` `idle` state updates
    (the client has read them, so they are whole in the log)."""

    def idles() -> int:
        return sum(
            1
            for line in run.received()
            if '"state_update"' in line and json.loads(line)["params"]["update"]["state"] == "idle"
        )

    assert wait_for(lambda: idles() >= count), f"the tap never logged {count} idle updates"
    return updates_on_wire(run.received())


def assert_numbered_and_faithful(run: Run, idles: int) -> None:
    """Every update is numbered from 1 without gaps, names the session and is exactly the line
    the agent wrote; together they are every update on the wire."""
    journal, client = run.journal, run.client
    count = len(journal.updates)
    assert journal.sequences == list(range(1, count + 1))
    assert client.next_update_sequence == count + 1
    for update in journal.updates:
        envelope = json.loads(update.envelope)
        assert update.session_id == client.session_id == envelope["params"]["sessionId"]
        assert update.json() == envelope["params"]["update"]
        assert update.session_update == envelope["params"]["update"]["sessionUpdate"]
    assert journal.envelopes == wire_updates_until_idle(run, idles)


def states(journal: Journal) -> list[str]:
    return [u.text for u in journal.of_kind(acp.UpdateKind.STATE_UPDATE)]


# --- start --------------------------------------------------------------------------------------


@v2_and_auto
@agents(*V2)
def test_v2_handshake(harness: Harness) -> None:
    run = harness.start(tap=True)
    client = run.client
    assert wait_for(lambda: len(run.sent()) >= 2)
    initialize, new = run.sent()[:2]
    assert initialize["method"] == "initialize" and new["method"] == "session/new"
    params = initialize["params"]
    assert params["protocolVersion"] == 2
    v1_keys = {"clientCapabilities", "clientInfo"} if harness.protocol == "auto" else set()
    assert set(params) == {"protocolVersion", "info", "capabilities"} | v1_keys
    assert params["info"]["name"] and params["info"]["version"]
    assert not {"fs", "terminal"} & set(params["capabilities"])
    wire = [json.loads(line) for line in run.received()]
    answer = answer_to(wire, initialize["id"])["result"]
    assert answer["protocolVersion"] == 2
    assert client.protocol_version == 2
    assert client.initialize.protocol_version == 2
    assert client.initialize.raw == answer
    assert client.initialize.agent_info == answer["info"]
    assert client.session_id == answer_to(wire, new["id"])["result"]["sessionId"]
    assert client.pid is not None and client.pid in tagged_processes(run.launch.tag)


@agents("ts-sdk-2")
def test_v2_against_a_v1_agent_fails_start_saying_what_to_use(harness: Harness) -> None:
    harness.protocol = "v2"
    with pytest.raises(acp.AgentProtocolError) as caught:
        harness.start()
    message = str(caught.value)
    assert "auto" in message and "v1" in message, message


# --- turns --------------------------------------------------------------------------------------


@v2_and_auto
@agents(*V2)
def test_v2_turns_end_at_idle_with_reply_and_stop_reason(harness: Harness) -> None:
    spec = spec_of(harness)
    run = harness.start(tap=True)
    client, journal = run.client, run.journal
    session = client.default_session
    assert session is not None
    first = session.prompt("hello there")
    assert (first.response, first.stop_reason) == (spec.reply("hello there"), "end_turn")
    assert first.overflow is None and first.session_id == client.session_id
    assert first.tokens is None
    # simple_agent_v2's idle before the first running did not end the turn early.
    assert states(journal)[-2:] == ["running", "idle"]
    mark = len(journal.updates)
    second = client.prompt_detailed("and again")
    assert second == acp.PromptResult(spec.reply("and again"), "end_turn", None)
    turn = journal.updates[mark:]
    assert [u.text for u in turn if u.kind == acp.UpdateKind.STATE_UPDATE][-1] == "idle"
    assert "".join(u.text for u in turn if u.kind == CHUNK) == spec.reply("and again")
    users = [u for u in turn if u.kind == acp.UpdateKind.USER_MESSAGE]
    assert [u.text for u in users] == ["and again"]
    assert_numbered_and_faithful(run, idles=3 if spec.name == "rust-sdk-v2" else 2)
    prompts = sent_methods(run, "session/prompt", 2)
    assert [p["params"]["prompt"] for p in prompts] == [
        [{"type": "text", "text": "hello there"}],
        [{"type": "text", "text": "and again"}],
    ]


# --- permissions --------------------------------------------------------------------------------


def write_turn(harness: Harness, run: Run) -> tuple[acp.TurnResult, acp.PermissionRequest]:
    """Prompts "write hello.txt"; checks the one v2 permission request against the wire and
    the answer the client wrote; returns the turn and the committed request."""
    session = run.client.default_session
    assert session is not None
    result = session.prompt("Please write hello.txt")
    [record] = run.journal.permissions
    wire = [json.loads(line) for line in run.received()]
    [asked] = [v for v in wire if v.get("method") == "session/request_permission"]
    assert json.loads(record.envelope) == asked
    params = asked["params"]
    assert record.title == params["title"] == "Write hello.txt"
    assert params["subject"]["type"] == "tool_call"
    assert record.tool_call_id == params["subject"]["toolCall"]["toolCallId"]
    assert record.tool_kind == "edit"
    assert wait_for(lambda: any(v.get("id") == record.request_id for v in run.sent()))
    answer = answer_to(run.sent(), record.request_id)
    if record.outcome == "selected":
        expected = {"outcome": {"outcome": "selected", "optionId": record.option_id}}
    else:
        expected = {"outcome": {"outcome": record.outcome}}
    assert answer["result"] == expected
    assert result.stop_reason == "end_turn"
    [call] = plain(result.tool_calls)
    assert call["toolCallId"] == record.tool_call_id and call["kind"] == "edit"
    assert_numbered_and_faithful(run, idles=1)
    return result, record


def assert_allowed(harness: Harness, result: acp.TurnResult, record: Any) -> None:
    assert (record.outcome, record.option_id, record.option_kind) == (
        "selected",
        "allow",
        "allow_once",
    )
    # The whole-message agent_message replaced what the chunks of that message said.
    assert result.response == "I wrote the file."
    assert plain(result.tool_calls)[0]["status"] == "completed"
    assert (harness.cwd / "hello.txt").read_text().startswith("hi from")


def assert_rejected(harness: Harness, result: acp.TurnResult, record: Any) -> None:
    assert (record.outcome, record.option_id, record.option_kind) == (
        "selected",
        "reject",
        "reject_once",
    )
    assert result.response == "I did not write the file."
    assert plain(result.tool_calls)[0]["status"] == "failed"
    assert not (harness.cwd / "hello.txt").exists()


RULES = {
    "kind": acp.PermissionPolicy(allowed_tool_kinds=["edit"]),
    # v2's request `title` is the title the rules see.
    "title": acp.PermissionPolicy(allowed_title_prefixes=["Write "]),
}


@pytest.mark.parametrize("rule", list(RULES))
@v2_and_auto
@agents(*SCRIPTED)
def test_v2_permission_allowed_by_a_rule(harness: Harness, rule: str) -> None:
    run = harness.start(tap=True, policy=RULES[rule])
    result, record = write_turn(harness, run)
    assert_allowed(harness, result, record)


@v2_and_auto
@agents(*SCRIPTED)
def test_v2_permission_rejected_by_default(harness: Harness) -> None:
    run = harness.start(tap=True)
    result, record = write_turn(harness, run)
    assert_rejected(harness, result, record)


class Deciding(Journal):
    """An observer that answers every permission request with the option `choice`."""

    def __init__(self, choice: str) -> None:
        super().__init__()
        self.choice = choice
        self.previews: list[acp.PermissionRequest] = []

    def on_permission(self, request: acp.PermissionRequest) -> acp.PermissionReply:
        self.previews.append(request)
        (option,) = [o for o in request.options if o.option_id == self.choice]
        return acp.PermissionReply("selected", option.option_id, option.kind)


@pytest.mark.parametrize("choice", ["allow", "reject"])
@v2_and_auto
@agents(*SCRIPTED)
def test_v2_permission_decided_by_an_observer(harness: Harness, choice: str) -> None:
    observer = Deciding(choice)
    # The policy would allow: the observer's answer wins either way.
    run = harness.start(tap=True, observer=observer, policy=RULES["kind"])
    run.journal = observer
    result, record = write_turn(harness, run)
    [preview] = observer.previews
    assert (preview.title, preview.tool_kind) == ("Write hello.txt", "edit")
    assert record.decision and record.reason == "observer"
    (assert_allowed if choice == "allow" else assert_rejected)(harness, result, record)


# --- cancel -------------------------------------------------------------------------------------


@v2_and_auto
@agents(*SCRIPTED)
def test_v2_cancel_mid_turn_ends_cancelled(harness: Harness) -> None:
    run = harness.start(tap=True)
    client, journal = run.client, run.journal
    session = client.default_session
    assert session is not None
    sid = session.session_id
    session.cancel()  # no turn in flight: nothing is written
    cancelled_at: list[float] = []

    def streamed() -> bool:
        text = "".join(u.text for u in list(journal.updates) if u.kind == CHUNK)
        return text.startswith(TICKS[0] + TICKS[1])

    def cancel_once_streaming() -> None:
        if wait_for(streamed, 20):
            cancelled_at.append(time.monotonic())
            session.cancel()
            session.cancel()  # the latch: still one session/cancel

    helper = threading.Thread(target=cancel_once_streaming, daemon=True)
    helper.start()
    result = session.prompt("Please be slow")
    ended = time.monotonic()
    helper.join(5)
    assert cancelled_at, "the turn never streamed two ticks"
    assert result.stop_reason == "cancelled"
    assert result.response.startswith(TICKS[0] + TICKS[1])
    assert "".join(TICKS).startswith(result.response) and result.response != "".join(TICKS)
    assert ended - cancelled_at[0] < len(TICKS) * TICK_DELAY / 2, "it streamed on after cancel"
    assert states(journal)[-1] == "idle"
    time.sleep(0.5)  # a second cancel would have been written by now
    assert sent_methods(run, "session/cancel", 1) == [
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
    ]
    # The session carries on.
    after = session.prompt("after the cancel")
    assert (after.response, after.stop_reason) == ("after the cancel", "end_turn")


@v2_and_auto
@agents(*SCRIPTED)
def test_v2_cancel_while_a_permission_request_is_pending(harness: Harness) -> None:
    journal = AskingJournal()
    # The policy would allow the call: the cancel must win over it.
    run = harness.start(tap=True, observer=journal, policy=RULES["kind"])
    run.journal = journal
    session = run.client.default_session
    assert session is not None

    def cancel_while_asked() -> None:
        if journal.asked.wait(20):
            session.cancel()
        journal.release.set()

    helper = threading.Thread(target=cancel_while_asked, daemon=True)
    helper.start()
    result = session.prompt("Please write hello.txt")
    helper.join(5)
    assert journal.asked.is_set(), "the agent never asked"
    assert result.stop_reason == "cancelled"
    [record] = journal.permissions
    assert (record.outcome, record.option_id) == ("cancelled", "")
    # One session/cancel, then the request's answer `cancelled` (the latch), in that order.
    assert wait_for(
        lambda: any("method" not in v and v.get("id") == record.request_id for v in run.sent())
    )
    sent = run.sent()
    cancels = [i for i, v in enumerate(sent) if v.get("method") == "session/cancel"]
    answers = [
        i for i, v in enumerate(sent) if "method" not in v and v.get("id") == record.request_id
    ]
    assert len(cancels) == 1 and len(answers) == 1 and cancels[0] < answers[0]
    assert sent[answers[0]]["result"] == {"outcome": {"outcome": "cancelled"}}
    assert not (harness.cwd / "hello.txt").exists()
    after = session.prompt("still here")
    assert (after.response, after.stop_reason) == ("still here", "end_turn")


class CancelWhenRunning(Journal):
    """Cancels `session`'s turn from `on_update` when the turn's `running` arrives (while
    `session` is set): the turn is still in flight then (its idle is not read yet), however
    fast the agent is."""

    session: acp.Session | None = None

    def on_update(self, update: Any) -> None:
        super().on_update(update)
        running = update.kind == acp.UpdateKind.STATE_UPDATE and update.text == "running"
        if running and self.session is not None:
            self.session.cancel()


@v2_and_auto
@agents("rust-sdk-v2")
def test_v2_cancel_of_a_turn_the_agent_has_finished(harness: Harness) -> None:
    """simple_agent_v2 answers at once: a cancel sent once the turn runs finds it done or
    nearly; the turn still ends at its idle (end_turn or cancelled, as the agent says), one
    session/cancel is written and the session carries on."""
    journal = CancelWhenRunning()
    run = harness.start(tap=True, observer=journal)
    run.journal = journal
    journal.session = session = run.client.default_session
    assert session is not None
    result = session.prompt("slow")
    assert result.stop_reason in ("end_turn", "cancelled")
    if result.stop_reason == "end_turn":
        assert result.response == "Echo: slow"
    assert sent_methods(run, "session/cancel", 1) == [
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session.session_id}}
    ]
    journal.session = None
    after = session.prompt("after")
    assert (after.response, after.stop_reason) == ("Echo: after", "end_turn")


# --- AsyncClient --------------------------------------------------------------------------------


class AwaitingObserver(Journal):
    """Answers permission requests after an await, choosing `choice`."""

    def __init__(self, choice: str) -> None:
        super().__init__()
        self.choice = choice

    def on_permission(self, request: acp.PermissionRequest) -> Any:
        async def decide() -> acp.PermissionReply:
            await asyncio.sleep(0.05)
            (option,) = [o for o in request.options if o.option_id == self.choice]
            return acp.PermissionReply("selected", option.option_id, option.kind)

        return decide()


@v2_and_auto
@agents(*V2)
def test_v2_turn_through_async_client(harness: Harness) -> None:
    spec = spec_of(harness)
    run = harness.start(tap=True, asynchronous=True)
    client: acp.AsyncClient = run.client

    async def main() -> tuple[acp.PromptResult, acp.PromptResult]:
        async with client:
            await client.start()
            assert client.protocol_version == 2
            first = await client.prompt_detailed("hello there")
            second = await client.prompt_detailed("and again")
            return first, second

    first, second = asyncio.run(main())
    assert first == acp.PromptResult(spec.reply("hello there"), "end_turn", None)
    assert second == acp.PromptResult(spec.reply("and again"), "end_turn", None)
    sequences = run.journal.sequences
    assert sequences == list(range(1, len(sequences) + 1))
    assert client.pid is None  # `async with` closed it


@pytest.mark.parametrize("choice", ["allow", "reject"])
@v2_and_auto
@agents(*SCRIPTED)
def test_v2_awaited_permission_through_async_client(harness: Harness, choice: str) -> None:
    observer = AwaitingObserver(choice)
    run = harness.start(tap=True, asynchronous=True, observer=observer)
    client: acp.AsyncClient = run.client

    async def main() -> acp.PromptResult:
        async with client:
            await client.start()
            return await client.prompt_detailed("Please write hello.txt")

    result = asyncio.run(main())
    [record] = observer.permissions
    assert (record.outcome, record.option_id) == ("selected", choice)
    assert result.stop_reason == "end_turn"
    if choice == "allow":
        assert result.response == "I wrote the file."
        assert (harness.cwd / "hello.txt").read_text().startswith("hi from")
    else:
        assert result.response == "I did not write the file."
        assert not (harness.cwd / "hello.txt").exists()


@v2_and_auto
@agents(*SCRIPTED)
def test_v2_cancel_through_async_client(harness: Harness) -> None:
    run = harness.start(tap=True, asynchronous=True)
    client: acp.AsyncClient = run.client
    journal = run.journal

    async def main() -> tuple[acp.TurnResult, acp.PromptResult]:
        async with client:
            await client.start()
            session = client.default_session
            assert session is not None
            turn = asyncio.ensure_future(session.prompt("Please be slow"))
            while not any(u.kind == CHUNK for u in journal.updates):
                await asyncio.sleep(0.02)
            session.cancel()  # a plain method, as in Client
            cancelled = await turn
            after = await client.prompt_detailed("after the cancel")
            return cancelled, after

    cancelled, after = asyncio.run(main())
    assert cancelled.stop_reason == "cancelled"
    assert cancelled.response.startswith(TICKS[0])
    assert "".join(TICKS).startswith(cancelled.response)
    assert after == acp.PromptResult("after the cancel", "end_turn", None)
    assert len(sent_methods(run, "session/cancel", 1)) == 1


# --- today's real agents that speak v2 (ACP_INTEROP_CURRENT=1) -----------------------------------
#
# claude-agent-acp 0.101 and codex-acp 2.6 answer v2's initialize with 2: with "auto" (and "v2")
# they are driven in v2, against the fake model server like the v1 tests.


def assert_numbered_as_sent(run: Run) -> None:
    """Every update is numbered from 1 without gaps and is exactly an agent's line."""
    journal = run.journal
    count = len(journal.updates)
    assert journal.sequences == list(range(1, count + 1))
    assert run.client.next_update_sequence == count + 1
    on_wire = set(updates_on_wire(run.received()))
    for update in journal.updates:
        envelope = json.loads(update.envelope)
        assert update.json() == envelope["params"]["update"]
        assert update.envelope in on_wire


@v2_and_auto
@agents(*V2_REAL_AGENTS)
def test_real_agent_in_v2_plain_turns(harness: Harness) -> None:
    run = harness.start(tap=True)
    client = run.client
    assert client.protocol_version == 2
    init = answer_to([json.loads(line) for line in run.received()], 0)["result"]
    assert init["protocolVersion"] == 2 and client.initialize.agent_info == init["info"]
    session = client.default_session
    assert session is not None
    for prompt in ("Say hello", "Say hello again"):
        result = session.prompt(prompt)
        assert (result.response, result.stop_reason) == ("".join(HELLO), "end_turn")
    assert states(run.journal)[-1] == "idle"
    assert_numbered_as_sent(run)
    assert harness.server is not None
    assert len([r for r in harness.server.main_requests() if "Say hello" in r.text()]) >= 2


@pytest.mark.parametrize("allowed", [True, False])
@v2_and_auto
@agents(*V2_REAL_AGENTS)
def test_real_agent_in_v2_permission(harness: Harness, allowed: bool) -> None:
    spec = harness.spec
    assert not isinstance(spec, V2Spec)
    run = harness.start(tap=True, policy=spec.allow_policy if allowed else None)
    assert run.client.protocol_version == 2
    session = run.client.default_session
    assert session is not None
    result = session.prompt("Please write hello.txt")
    [record] = run.journal.permissions
    wire = [json.loads(line) for line in run.received()]
    [asked] = [v for v in wire if v.get("method") == "session/request_permission"]
    assert json.loads(record.envelope) == asked
    assert "title" in asked["params"] and "toolCall" not in asked["params"]
    assert record.tool_call_id == asked["params"]["subject"]["toolCall"]["toolCallId"]
    option = spec.allow_option if allowed else spec.reject_option
    assert (record.outcome, record.option_id) == ("selected", option)
    assert wait_for(lambda: any(v.get("id") == record.request_id for v in run.sent()))
    answer = answer_to(run.sent(), record.request_id)
    assert answer["result"] == {"outcome": {"outcome": "selected", "optionId": option}}
    assert_numbered_as_sent(run)
    if allowed:
        assert result.stop_reason == "end_turn"
        assert result.response.endswith("".join(AFTER_TOOL))
        assert (harness.cwd / "hello.txt").read_text().startswith("hi from")
    else:
        assert result.stop_reason in ("end_turn", "cancelled")
        assert not (harness.cwd / "hello.txt").exists()
