"""The ACP v2 turn lifecycle attacked as an adversary agent would (issue 25): every turn ends with
a clear result or a clear error, never a hang (each call is bounded by ``timeout=10``).

The v2 turn (V2-CONTRACT.md): the ``session/prompt`` answer ``{messageId}`` only acknowledges;
the turn ends at the session's ``state_update`` ``idle`` after the turn's own ``running`` or
``requires_action``; the reply is per message id, in first-seen order, ``agent_message``
replacing and ``agent_message_chunk`` appending. Plus v2's stand-in for ``session/load``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from conftest import TEST_CLIENT_INFO, Journal, limits

from .conftest import FULL_CAPABILITIES, MakeClient, init_result

AGENT = Path(__file__).with_name("v2_adversary.py")
BOUND = 10.0  # seconds: "no hang", never a speed claim
ACK = ["ack"]
RUNNING = ["state", "running"]
IDLE = ["state", "idle", "end_turn"]

Adversary = Callable[..., tuple[acp.Client, Path]]


@pytest.fixture
def adversary(tmp_path: Path, journal: Journal) -> Iterator[Adversary]:
    """`adversary(turns, **options)`: a v2 client on `v2_adversary.py` playing `turns`, started,
    and the log of what the agent received."""
    clients: list[acp.Client] = []

    def make(turns: list[list[list[Any]]], **options: Any) -> tuple[acp.Client, Path]:
        directory = tmp_path / f"agent{len(clients)}"
        directory.mkdir()
        config = directory / "agent.json"
        config.write_text(json.dumps({"turns": turns}))
        log = directory / "agent.log"
        log.write_text("")
        settings: dict[str, Any] = {
            "reader_limits": acp.DEFAULT_READER_LIMITS,
            "transfer_limits": limits(),
            "transport_epoch": 1,
            "client_info": TEST_CLIENT_INFO,
            "observer": journal,
            "cwd": str(tmp_path),
            "protocol": "v2",
            "cancel_grace": 1.0,
        }
        settings.update(options)
        client = acp.Client(
            sys.executable, args=["-I", str(AGENT), str(config), str(log)], **settings
        )
        clients.append(client)
        client.start(timeout=BOUND)
        return client, log

    yield make
    for client in clients:
        client.close()


def received(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line]


def cancels(log: Path) -> int:
    return sum(m.get("method") == "session/cancel" for m in received(log))


def bounded(call: Callable[[], Any]) -> Any:
    """Run `call`, proving it returned (or raised) well within the bound."""
    began = time.monotonic()
    try:
        return call()
    finally:
        assert time.monotonic() - began < BOUND + 2, "the call hung"


def prompt(client: acp.Client, text: str = "go", **options: Any) -> acp.TurnResult:
    session = client.default_session
    assert session is not None
    options.setdefault("timeout", BOUND)
    result: acp.TurnResult = bounded(lambda: session.prompt(text, **options))
    return result


def still_usable(client: acp.Client) -> None:
    """The next (well-behaved) turn of the script works: nothing of the attack leaked."""
    result = prompt(client)
    assert (result.response, result.stop_reason) == ("ok", "end_turn")


# --- the end of a turn --------------------------------------------------------------------------


def test_an_idle_before_the_turns_running_is_not_its_end(adversary: Adversary) -> None:
    # simple_agent_v2's order: idle (no stop reason) before the acknowledgement and `running`.
    turn = [["state", "idle"], ACK, RUNNING, ["chunk", "m1", "hi"], IDLE]
    client, _ = adversary([turn])
    result = prompt(client)
    assert (result.response, result.stop_reason) == ("hi", "end_turn")
    still_usable(client)


def test_an_acknowledged_idle_with_a_stop_reason_ends_a_turn_never_running(
    adversary: Adversary,
) -> None:
    # An agent that never says `running`: its idle after the acknowledgement, with a stop
    # reason, is the end (the core's rule for such agents), not a wait for the timeout.
    client, _ = adversary([[ACK, ["chunk", "m1", "hi"], ["state", "idle", "max_tokens"]]])
    result = prompt(client)
    assert (result.response, result.stop_reason) == ("hi", "max_tokens")
    still_usable(client)


def test_an_idle_without_a_stop_reason_and_no_running_never_ends_the_turn(
    adversary: Adversary,
) -> None:
    client, log = adversary([[ACK, ["chunk", "m1", "hi"], ["state", "idle"]]])
    with pytest.raises(acp.TurnTimeout) as caught:
        prompt(client, timeout=0.3)
    assert caught.value.result is None, "the agent never answered the cancel either"
    assert cancels(log) == 1
    still_usable(client)


def test_idle_before_the_acknowledgement_ends_the_turn(adversary: Adversary) -> None:
    turn = [RUNNING, ["chunk", "m1", "early"], IDLE, ["sleep", 0.2], ACK]
    client, _ = adversary([turn])
    result = prompt(client)
    assert (result.response, result.stop_reason) == ("early", "end_turn")
    still_usable(client)  # the late acknowledgement is not taken for the next turn's


def test_no_acknowledgement_at_all(adversary: Adversary) -> None:
    client, _ = adversary([[RUNNING, ["chunk", "m1", "a"], IDLE]])
    result = prompt(client)
    assert (result.response, result.stop_reason) == ("a", "end_turn")
    still_usable(client)


def test_two_idles_end_one_turn_and_the_stray_one_no_other(adversary: Adversary) -> None:
    first = [ACK, RUNNING, ["chunk", "m1", "a"], IDLE, ["state", "idle", "max_tokens"]]
    # The second turn begins with yet another stray idle, after its prompt was written.
    second = [["state", "idle", "refusal"], ACK, RUNNING, ["chunk", "m2", "b"], IDLE]
    client, _ = adversary([first, second])
    result = prompt(client)
    assert (result.response, result.stop_reason) == ("a", "end_turn")
    result = prompt(client)
    assert (result.response, result.stop_reason) == ("b", "end_turn")


@pytest.mark.parametrize("other", ["s2", "unknown"])
def test_running_and_idle_of_another_session_are_not_this_turns(
    adversary: Adversary, journal: Journal, other: str
) -> None:
    turn = [
        ACK,
        ["state_for", other, "running"],
        ["state_for", other, "idle", "refusal"],
        RUNNING,
        ["chunk", "m1", "mine"],
        IDLE,
    ]
    client, _ = adversary([turn])
    client.new_session()  # s2 exists; "unknown" does not
    result = prompt(client)
    assert (result.response, result.stop_reason) == ("mine", "end_turn")
    assert [u.session_id for u in journal.updates if u.session_id != "s1"] == [other, other]


@pytest.mark.parametrize("answer", [{}, {"messageId": None}, {"messageId": 7}, 5, None, "x"])
def test_a_malformed_acknowledgement_is_a_clear_result_or_error(
    adversary: Adversary, journal: Journal, answer: Any
) -> None:
    client, _ = adversary([[["ack_raw", answer], RUNNING, ["chunk", "m1", "a"], IDLE]])
    try:
        result = prompt(client)
    except acp.AgentProtocolError as error:
        assert "session/prompt (id 2) is not a JSON object" in str(error), str(error)
        # The agent plays its turn on regardless (v2's states name no turn): let it end
        # before the next prompt, or its running and idle would be taken for that one's.
        deadline = time.monotonic() + BOUND
        while not any(u.text == "idle" for u in journal.updates) and time.monotonic() < deadline:
            client.drain(0.1)
    else:
        # No usable message id (absent, null, a number) is no error: the idle ends the turn.
        assert (result.response, result.stop_reason) == ("a", "end_turn")
    still_usable(client)


def test_a_prompt_error_after_running_raises_at_once(adversary: Adversary) -> None:
    turn = [RUNNING, ["chunk", "m1", "a"], ["error", -32603, "boom"], ["sleep", 0.2], IDLE]
    client, _ = adversary([turn])
    with pytest.raises(acp.AgentProtocolError) as caught:
        prompt(client)
    assert caught.value.code == -32603
    assert "boom" in str(caught.value)
    still_usable(client)  # the stray idle after the error ends nothing


# --- the reply: upserts per message id ----------------------------------------------------------


def test_a_chunk_appends_to_a_message_first_seen_whole(adversary: Adversary) -> None:
    turn = [
        ACK,
        RUNNING,
        ["message", "m1", "Hello"],
        ["chunk", "m1", " world"],
        ["chunk", "m2", "!"],
        ["message", "m1", "Bye"],  # replaces m1 only; m2 stays after it
        IDLE,
    ]
    client, _ = adversary([turn])
    assert prompt(client).response == "Bye!"


def test_an_agent_message_past_response_bytes_overflows_and_cancels_once(
    adversary: Adversary,
) -> None:
    turn = [
        ACK,
        RUNNING,
        ["chunk", "m1", "short"],
        ["message", "m1", "x" * 5000],
        ["wait_cancel", BOUND],
        ["idle_if_cancelled"],
    ]
    client, log = adversary([turn], transfer_limits=limits(response_bytes=64))
    result = prompt(client)
    assert result.overflow is not None
    assert result.overflow.kind is acp.OverflowKind.RESPONSE_BYTES
    assert len(result.response.encode()) <= 64
    assert result.stop_reason == "cancelled"
    assert cancels(log) == 1
    still_usable(client)


def test_thousands_of_distinct_message_ids_are_one_reply_in_order(adversary: Adversary) -> None:
    client, _ = adversary(
        [[ACK, RUNNING, ["chunks", 5000], IDLE]],
        transfer_limits=limits(response_segment_count=1 << 20, update_count=1 << 20),
    )
    result = prompt(client)
    assert (result.response, result.overflow) == ("x" * 5000, None)


def test_thousands_of_message_ids_past_the_segment_cap_overflow(adversary: Adversary) -> None:
    turn = [ACK, RUNNING, ["chunks", 3000], ["wait_cancel", BOUND], ["idle_if_cancelled"]]
    client, log = adversary([turn], transfer_limits=limits(update_count=1 << 20))
    result = prompt(client)  # response_segment_count is 1024
    assert result.overflow is not None
    assert result.overflow.kind is acp.OverflowKind.RESPONSE_SEGMENTS
    assert result.response == "x" * 1024
    assert result.stop_reason == "cancelled"
    assert cancels(log) == 1


def test_long_message_ids_count_against_the_reply_bytes(adversary: Adversary) -> None:
    """Each message of the reply is kept with its id: 400 one-byte messages with 64 KiB ids
    are 25 MiB held for a 400-byte reply. The ids count as the reply's bytes, so the reply
    overflows at response_bytes (1 MiB here) instead of growing past it."""
    turn = [ACK, RUNNING, ["big_ids", 400, 64 << 10], ["wait_cancel", 3], ["idle_if_cancelled"]]
    client, log = adversary([turn])
    result = prompt(client)
    assert result.overflow is not None, "25 MiB of message ids were held for the reply"
    assert result.overflow.kind is acp.OverflowKind.RESPONSE_BYTES
    assert result.stop_reason == "cancelled"
    assert cancels(log) == 1


@pytest.mark.parametrize("state", ["thinking", "", 7, None, {"nested": True}])
def test_an_unknown_state_is_delivered_and_ends_nothing(
    adversary: Adversary, journal: Journal, state: Any
) -> None:
    client, _ = adversary([[ACK, RUNNING, ["state", state], ["chunk", "m1", "a"], IDLE]])
    result = prompt(client)
    assert (result.response, result.stop_reason) == ("a", "end_turn")
    states = [u for u in journal.updates if u.session_update == "state_update"]
    assert len(states) == 3
    if isinstance(state, str) and state:
        assert states[1].text == state


# --- a turn that never goes idle ----------------------------------------------------------------


def test_a_turn_that_never_goes_idle_times_out_past_the_grace(adversary: Adversary) -> None:
    never = [ACK, RUNNING, ["chunk", "m1", "a"]]
    # The abandoned turn's idle comes late, after the next prompt was written: not its end.
    late = [["state", "idle", "cancelled"], *[ACK, RUNNING, ["chunk", "m2", "ok"], IDLE]]
    client, log = adversary([never, late], cancel_grace=0.5)
    began = time.monotonic()
    with pytest.raises(acp.TurnTimeout) as caught:
        prompt(client, timeout=0.3)
    assert time.monotonic() - began < BOUND
    assert caught.value.result is None
    assert cancels(log) == 1
    result = prompt(client)
    assert (result.response, result.stop_reason) == ("ok", "end_turn")


def test_a_timeout_the_agent_honours_raises_with_the_result(adversary: Adversary) -> None:
    turn = [ACK, RUNNING, ["chunk", "m1", "a"], ["wait_cancel", BOUND], ["idle_if_cancelled"]]
    client, log = adversary([turn])
    with pytest.raises(acp.TurnTimeout) as caught:
        prompt(client, timeout=0.3)
    assert caught.value.result is not None
    assert (caught.value.result.response, caught.value.result.stop_reason) == ("a", "cancelled")
    assert cancels(log) == 1
    still_usable(client)


def test_the_latch_holds_until_the_late_idle_of_a_turn_given_up_on(
    adversary: Adversary, journal: Journal
) -> None:
    """A turn that timed out past its grace: its permission requests, still coming, are
    answered `cancelled` until its late idle; the next turn's are the policy's again."""
    late = [ACK, RUNNING, ["sleep", 1.5], ["permission"], ["state", "idle", "cancelled"]]
    asked_again = [ACK, RUNNING, ["permission"], ["chunk", "m2", "ok"], IDLE]
    policy = acp.PermissionPolicy(allow=[acp.PermissionRule()])
    client, log = adversary([late, asked_again], permission_policy=policy, cancel_grace=0.3)
    with pytest.raises(acp.TurnTimeout) as caught:
        prompt(client, timeout=0.3)
    assert caught.value.result is None
    deadline = time.monotonic() + BOUND
    while len(journal.permissions) < 1 and time.monotonic() < deadline:
        client.drain(0.1)
    result = prompt(client)
    assert (result.response, result.stop_reason) == ("ok", "end_turn")
    answers = {m["id"]: m["result"] for m in received(log) if str(m.get("id")).startswith("perm")}
    assert answers == {
        "perm-1": {"outcome": {"outcome": "cancelled"}},
        "perm-2": {"outcome": {"outcome": "selected", "optionId": "yes"}},
    }


def test_cancel_answers_a_pending_permission_through_the_latch(adversary: Adversary) -> None:
    asked = threading.Event()

    class Observer(Journal):
        def on_permission(self, request: acp.PermissionRequest) -> acp.PermissionReply:
            asked.set()
            time.sleep(0.3)
            return acp.PermissionReply("selected", "yes", "allow_once")

    observer = Observer()
    turn = [ACK, RUNNING, ["state", "requires_action"], ["permission"], ["wait_cancel", BOUND]]
    turn += [["idle_if_cancelled"]]
    client, log = adversary([turn], observer=observer)
    session = client.default_session
    assert session is not None
    threading.Thread(target=lambda: asked.wait(BOUND) and session.cancel()).start()
    result = prompt(client)
    assert result.stop_reason == "cancelled"
    answers = [m for m in received(log) if m.get("id") == "perm-1"]
    assert answers[0]["result"] == {"outcome": {"outcome": "cancelled"}}
    assert [p.outcome for p in observer.permissions] == ["cancelled"]
    assert observer.permissions[0].title == "Write a"
    assert cancels(log) == 1


YES = [{"optionId": "yes", "name": "Yes", "kind": "allow_once"}]
TOOL = {"toolCallId": "t1", "title": "Write a", "kind": "edit"}
PERMISSION_SHAPES = {
    "no subject": {"title": "Run it", "options": YES},
    "null subject": {"title": "Run it", "subject": None, "options": YES},
    "command": {
        "title": "Run ls",
        "subject": {"type": "command", "command": "ls", "cwd": "/"},
        "options": YES,
    },
    "unknown subject": {"title": "Run it", "subject": {"type": "_x", "what": 1}, "options": YES},
    "toolCall not an object": {
        "title": "Run it",
        "subject": {"type": "tool_call", "toolCall": 7},
        "options": YES,
    },
    "no title": {"subject": {"type": "tool_call", "toolCall": TOOL}, "options": YES},
    "title a number": {"title": 5, "options": YES},
    "no options": {"title": "Run it", "options": []},
    "deep subject": {"title": "Run it", "subject": {"type": "_x", "x": [[[[[[[[[[]]]]]]]]]]}},
}


@pytest.mark.parametrize("params", PERMISSION_SHAPES.values(), ids=PERMISSION_SHAPES.keys())
def test_every_v2_permission_shape_is_answered(
    adversary: Adversary, journal: Journal, params: dict[str, Any]
) -> None:
    """A v2 permission request of any shape is answered (an allow rule's choice, or
    `cancelled` with no usable option) and committed; the turn goes on to its idle."""
    turn = [ACK, RUNNING, ["permission_raw", params], ["chunk", "m1", "after"], IDLE]
    policy = acp.PermissionPolicy(allow=[acp.PermissionRule()])
    client, log = adversary([turn], permission_policy=policy)
    result = prompt(client)
    assert (result.response, result.stop_reason) == ("after", "end_turn")
    (answer,) = [m for m in received(log) if m.get("id") == "raw-1"]
    usable = bool(params.get("options"))
    expected = {"outcome": "selected", "optionId": "yes"} if usable else {"outcome": "cancelled"}
    assert answer["result"] == {"outcome": expected}
    (record,) = journal.permissions
    # The request's own title; without a string one, its tool call's (else "").
    title = params.get("title")
    tool = (params.get("subject") or {}).get("toolCall")
    fallback = tool.get("title", "") if isinstance(tool, dict) else ""
    assert record.title == (title if isinstance(title, str) else fallback)
    still_usable(client)


# --- v2's stand-in for session/load -------------------------------------------------------------

REPLAY = [
    {
        "sessionUpdate": "user_message",
        "messageId": "u1",
        "content": [{"type": "text", "text": "hi"}],
    },
    {
        "sessionUpdate": "agent_message",
        "messageId": "a1",
        "content": [{"type": "text", "text": "yo"}],
    },
]


@pytest.mark.parametrize("protocol", ["v2"])
def test_v2_resumes_with_the_replay_and_has_no_load(
    make_session_client: MakeClient, journal: Journal
) -> None:
    client, agent = make_session_client(
        {"known": ["old"], "replay": REPLAY, "initialize": init_result(FULL_CAPABILITIES)}
    )
    client.start(new_session=False)
    with pytest.raises(acp.CapabilityError, match="ACP v2") as caught:
        client.load_session("old")
    assert caught.value.capability == "session/load"
    session = client.resume_session("old", replay_from="start")
    assert [u.text for u in journal.updates] == ["hi", "yo"], "delivered before it returned"
    assert session.session_id == "old"
    sent = agent.received()[-1]
    assert (sent["method"], sent["params"]["replayFrom"]) == ("session/resume", {"type": "start"})
