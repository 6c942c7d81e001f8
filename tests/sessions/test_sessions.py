"""The rules of design/sessions.md §2 to §8, each with the scripted multi-session agent, in ACP
v1 and v2 (the `protocol` fixture) unless the rule is v1's alone (`v1_only` says why)."""

from __future__ import annotations

import copy
import pickle
import threading
import time
from typing import Any

import acp_fast as acp
import pytest
from acp_fast import model
from conftest import Journal, v1_only

from .conftest import FULL_CAPABILITIES, MODES, MakeClient, init_result

# --- sessions, routing, numbering -------------------------------------------------------------


def test_two_sessions_interleave_updates_in_one_sequence(
    make_session_client: MakeClient, journal: Journal
) -> None:
    client, _ = make_session_client()
    client.start()
    first = client.default_session
    assert first is not None
    second = client.new_session()
    assert (first.session_id, second.session_id) == ("s1", "s2")
    assert client.sessions == (first, second)
    result = first.prompt("interleave 3 s2")
    assert isinstance(result, acp.TurnResult)
    assert result.response == "a0 a1 a2 ", "the reply keeps only its own session's chunks"
    assert result.session_id == "s1"
    everything = list(range(1, len(journal.updates) + 1))
    assert journal.sequences == everything, "one lifetime sequence across sessions"
    assert [u.session_id for u in journal.content] == ["s1", "s2"] * 3
    assert [u.kind for u in journal.content][1] is acp.UpdateKind.AGENT_THOUGHT_CHUNK
    again = second.prompt("stream 2")
    assert again.response == "c0 c1 "
    last = [u.update_sequence for u in journal.content[-2:]]
    assert last[1] == last[0] + 1 > everything[-1]


def test_session_handles_and_lookup(make_session_client: MakeClient, protocol: str) -> None:
    client, _ = make_session_client({"modes": MODES})
    client.start()
    session = client.session("s1")
    assert session is client.default_session
    assert session.cwd == client.default_session.cwd
    if protocol == "v1":  # v2 has no modes (config options stand in)
        assert session.modes.current == "ask"
    assert client.modes == session.modes
    with pytest.raises(KeyError):
        client.session("nope")


def test_start_without_a_session_then_new_session_becomes_default(
    make_session_client: MakeClient, tmp_path: Any
) -> None:
    client, agent = make_session_client()
    client.start(new_session=False)
    assert client.default_session is None
    assert client.session_id is None
    assert agent.methods() == ["initialize"]
    session = client.new_session(tmp_path / "sub", additional_directories=["/x"])
    assert client.default_session is session
    assert session.cwd == str(tmp_path / "sub")
    assert session.additional_directories == ("/x",)
    sent = agent.raw_lines()[-1]
    assert sent == (
        '{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"'
        + str(tmp_path / "sub")
        + '","additionalDirectories":["/x"],"mcpServers":[]}}'
    )
    with pytest.raises(ValueError, match="absolute"):
        client.new_session(additional_directories=["relative"])
    with pytest.raises(RuntimeError):
        client.start()


@v1_only("v2 has no session/load (tests/sessions/test_v2_turns.py: resume with replay)")
def test_load_session_delivers_the_replay_before_returning(
    make_session_client: MakeClient, journal: Journal
) -> None:
    replay = [
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hello"}},
        {"sessionUpdate": "current_mode_update", "currentModeId": "code"},
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [{"name": "test", "description": "run tests"}],
        },
    ]
    client, agent = make_session_client({"known": ["old"], "replay": replay, "modes": MODES})
    client.start(new_session=False)
    session = client.load_session("old")
    assert [u.session_id for u in journal.updates] == ["old"] * 4
    assert journal.sequences == [1, 2, 3, 4]
    assert session.modes.current == "code", "the replay's mode update was routed to it"
    assert session.available_commands == (
        model.AvailableCommand.from_json({"name": "test", "description": "run tests"}),
    )
    assert client.default_session is session
    assert agent.raw_lines()[-1] == (
        '{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"old","cwd":"'
        + session.cwd
        + '","mcpServers":[]}}'
    )
    with pytest.raises(ValueError, match="already open"):
        client.load_session("old")
    # A failed load closes the handle; the error is raised.
    with pytest.raises(acp.AgentProtocolError) as caught:
        client.load_session("missing")
    assert caught.value.code == -32002
    assert [s.session_id for s in client.sessions] == ["old"]


def test_resume_session_accepts_a_null_result(make_session_client: MakeClient) -> None:
    client, agent = make_session_client({"known": ["r"], "load_result": None})
    client.start()
    session = client.resume_session("r")
    assert session.session_id == "r"
    assert agent.methods()[-1] == "session/resume"


def test_list_sessions_follows_every_page(make_session_client: MakeClient) -> None:
    pages = [
        [{"sessionId": "a", "cwd": "/w"}],
        [{"sessionId": "b", "cwd": "/w"}],
        [{"sessionId": "c", "cwd": "/w", "title": "T"}],
    ]
    client, agent = make_session_client({"pages": pages})
    client.start()
    listed = client.list_sessions("/w")
    assert [s.session_id for s in listed] == ["a", "b", "c"]
    assert listed[2].title == "T"
    lines = agent.raw_lines()[-3:]
    assert lines[0].endswith('"method":"session/list","params":{"cwd":"/w"}}')
    assert lines[1].endswith('"params":{"cwd":"/w","cursor":"1"}}')
    assert lines[2].endswith('"params":{"cwd":"/w","cursor":"2"}}')


def test_list_sessions_stops_on_a_repeated_cursor(make_session_client: MakeClient) -> None:
    pages = [[{"sessionId": "a", "cwd": "/w"}], [{"sessionId": "b", "cwd": "/w"}]]
    client, _ = make_session_client({"pages": pages, "loop_cursor": True})
    client.start()
    with pytest.raises(acp.AgentProtocolError, match="a second time"):
        client.list_sessions()
    # The client stays usable.
    assert client.default_session is not None
    assert client.default_session.prompt("stream 1").response == "c0 "


def test_delete_and_close(make_session_client: MakeClient) -> None:
    client, agent = make_session_client()
    client.start()
    other = client.new_session()
    client.delete_session("s2")
    assert other.closed and other not in client.sessions
    assert agent.methods()[-1] == "session/delete"
    session = client.default_session
    assert session is not None
    session.close()
    assert agent.methods()[-1] == "session/close"
    session.close()  # idempotent, nothing more written
    assert agent.methods().count("session/close") == 1
    with pytest.raises(RuntimeError, match="closed"):
        session.prompt("stream 1")
    session.cancel()  # not a call: does nothing


@v1_only("in v2 session/close is one of the baseline methods `session: {}` advertises")
def test_close_without_the_capability_is_local(make_session_client: MakeClient) -> None:
    client, agent = make_session_client({"initialize": init_result({})})
    client.start()
    session = client.default_session
    assert session is not None
    with session:
        pass
    assert session.closed
    assert "session/close" not in agent.methods()


def test_updates_for_a_closed_session_are_delivered_not_routed(
    make_session_client: MakeClient, journal: Journal
) -> None:
    client, _ = make_session_client({"initialize": init_result({})})
    client.start()
    first = client.default_session
    assert first is not None
    second = client.new_session()
    second.close()
    result = first.prompt("interleave 2 s2")
    assert result.response == "a0 a1 "
    assert [u.session_id for u in journal.content] == ["s1", "s2", "s1", "s2"]


# --- capability checks: nothing written -------------------------------------------------------


def capability_cases() -> list[tuple[str, Any, str]]:
    return [
        ("loadSession", lambda c: c.load_session("x"), "loadSession"),
        ("resume", lambda c: c.resume_session("x"), "sessionCapabilities.resume"),
        ("list", lambda c: c.list_sessions(), "sessionCapabilities.list"),
        ("delete", lambda c: c.delete_session("s1"), "sessionCapabilities.delete"),
        (
            "dirs",
            lambda c: c.new_session(additional_directories=["/x"]),
            "sessionCapabilities.additionalDirectories",
        ),
        (
            "http",
            lambda c: c.new_session(mcp_servers=[_Http("h", "http://127.0.0.1/")]),
            "mcpCapabilities.http",
        ),
        (
            "sse",
            lambda c: c.new_session(mcp_servers=[_Http("h", "http://127.0.0.1/", "sse")]),
            "mcpCapabilities.sse",
        ),
        (
            "image",
            lambda c: c.default_session.prompt([acp.Image("image/png", "AA==")]),
            "promptCapabilities.image",
        ),
        (
            "audio",
            lambda c: c.default_session.prompt([acp.Audio("audio/wav", "AA==")]),
            "promptCapabilities.audio",
        ),
        (
            "resource",
            lambda c: c.default_session.prompt([acp.TextResource("file:///a", "x")]),
            "promptCapabilities.embeddedContext",
        ),
        ("set_mode", lambda c: c.default_session.set_mode("code"), "session/set_mode"),
        ("set_model", lambda c: c.default_session.set_model("m"), "session/set_model"),
        ("logout", lambda c: c.logout(), "auth.logout"),
    ]


class _Http:
    def __init__(self, name: str, url: str, kind: str = "http") -> None:
        self.type = kind
        self.name = name
        self.url = url
        self.headers = ()


@v1_only("v1's capability names; v2's gates (session.*, the version) are tests/v2's")
@pytest.mark.parametrize(("name", "call", "capability"), capability_cases())
def test_capability_errors_write_nothing(
    make_session_client: MakeClient, name: str, call: Any, capability: str
) -> None:
    client, agent = make_session_client({"initialize": init_result({})}, agent_id="fake")
    client.start()
    before = agent.raw_lines()
    with pytest.raises(acp.CapabilityError) as caught:
        call(client)
    assert caught.value.capability == capability
    assert caught.value.agent_id == "fake" or caught.value.agent_id == ""
    assert str(caught.value) == (
        f"ACP agent 'fake' did not advertise the '{capability}' capability."
    )
    time.sleep(0.05)
    assert agent.raw_lines() == before, "nothing is written"
    # No id was taken: the next request is id 2.
    assert client.default_session is not None
    client.default_session.prompt("stream 1")
    assert '"id":2,' in agent.raw_lines()[-1]


def test_text_and_links_are_never_gated(make_session_client: MakeClient) -> None:
    client, _ = make_session_client({"initialize": init_result({})})
    client.start()
    assert client.default_session is not None
    link = acp.ResourceLink(uri="file:///a", name="a")
    assert client.default_session.prompt([acp.Text("stream 1"), link]).response == "c0 "
    # The wave-1 prompt_content stays ungated.
    client.prompt_content([acp.Text("stream 1"), acp.TextResource("file:///a", "x")])


# --- modes, config options, models -------------------------------------------------------------

CONFIG_OPTIONS = [
    {
        "id": "mode",
        "name": "Mode",
        "type": "select",
        "currentValue": "ask",
        "options": [{"value": "ask", "name": "Ask"}, {"value": "code", "name": "Code"}],
    },
    {
        "id": "model",
        "name": "Model",
        "category": "model",
        "type": "select",
        "currentValue": "fast",
        "options": [
            {
                "group": "g",
                "name": "G",
                "options": [
                    {"value": "fast", "name": "Fast"},
                    {"value": "slow", "name": "Slow", "description": "careful"},
                ],
            }
        ],
    },
    {"id": "brave", "name": "Brave", "type": "boolean", "currentValue": False},
]


@v1_only("v2 has no session/set_mode")
def test_set_mode(make_session_client: MakeClient) -> None:
    client, agent = make_session_client({"modes": MODES})
    client.start()
    session = client.default_session
    assert session is not None
    with pytest.raises(ValueError, match="not one of the session's modes"):
        session.set_mode("nope")
    session.set_mode("code")
    assert session.modes.current == "code"
    assert agent.raw_lines()[-1] == (
        '{"jsonrpc":"2.0","id":2,"method":"session/set_mode",'
        '"params":{"sessionId":"s1","modeId":"code"}}'
    )


def test_set_config_option_and_model_through_config(
    make_session_client: MakeClient, protocol: str
) -> None:
    # The agent writes the options in each version's shape (v2: configId, groupId).
    client, agent = make_session_client({"configOptions": CONFIG_OPTIONS})
    client.start()
    session = client.default_session
    assert session is not None
    assert session.models == acp.Models(
        "fast", (acp.ModelOption("fast", "Fast", ""), acp.ModelOption("slow", "Slow", "careful"))
    )
    with pytest.raises(ValueError, match="not one of the session's config options"):
        session.set_config_option("nope", "x")
    with pytest.raises(ValueError, match="boolean"):
        session.set_config_option("brave", "yes")
    with pytest.raises(ValueError, match="select"):
        session.set_config_option("mode", True)
    with pytest.raises(ValueError, match="not a value"):
        session.set_config_option("mode", "other")
    options = session.set_config_option("brave", True)
    assert agent.raw_lines()[-1].endswith(
        '"params":{"sessionId":"s1","configId":"brave","type":"boolean","value":true}}'
    )
    assert [o.kind.current_value for o in options] == ["ask", "fast", True]
    session.set_model("slow")
    tagged = "" if protocol == "v1" else '"type":"id",'  # v2 tags a select's value
    assert agent.raw_lines()[-1].endswith(
        '"method":"session/set_config_option",'
        '"params":{"sessionId":"s1","configId":"model",' + tagged + '"value":"slow"}}'
    )
    assert session.models.current == "slow"
    with pytest.raises(ValueError, match="not one of the session's models"):
        session.set_model("huge")


@v1_only("v2 has no session/set_model")
def test_set_model_falls_back_to_legacy_models(make_session_client: MakeClient) -> None:
    models = {
        "currentModelId": "a",
        "availableModels": [{"modelId": "a", "name": "A"}, {"modelId": "b", "name": "B"}],
    }
    client, agent = make_session_client({"models": models, "null_results": True})
    client.start()
    session = client.default_session
    assert session is not None
    assert session.models.current == "a"
    session.set_model("b")
    assert agent.raw_lines()[-1] == (
        '{"jsonrpc":"2.0","id":2,"method":"session/set_model",'
        '"params":{"sessionId":"s1","modelId":"b"}}'
    )
    assert session.models.current == "b"


# --- authentication and connect errors ------------------------------------------------------


def test_authenticate_checks_the_method(make_session_client: MakeClient, protocol: str) -> None:
    methods = [
        {"id": "agent-login", "name": "Login"},
        {"id": "term", "name": "Terminal", "type": "terminal"},
    ]
    client, agent = make_session_client({"initialize": init_result({}, authMethods=methods)})
    client.start(new_session=False)
    assert client.initialize.auth_methods[1].type == "terminal"
    with pytest.raises(ValueError, match="not one of the agent's auth methods"):
        client.authenticate("nope")
    with pytest.raises(ValueError, match="terminal"):
        client.authenticate("term")
    client.authenticate("agent-login")
    method = "authenticate" if protocol == "v1" else "auth/login"
    assert agent.raw_lines()[-1] == (
        '{"jsonrpc":"2.0","id":1,"method":"' + method + '","params":{"methodId":"agent-login"}}'
    )


def test_auth_required_is_a_connect_error_and_the_client_stays_usable(
    make_session_client: MakeClient,
) -> None:
    methods = [{"id": "agent-login", "name": "Login"}]
    client, _ = make_session_client(
        {"initialize": init_result({}, authMethods=methods), "auth_required": True}
    )
    with pytest.raises(acp.ConnectError) as caught:
        client.start()
    assert caught.value.code == -32000
    assert "agent-login" in str(caught.value)
    assert isinstance(caught.value, acp.AgentProtocolError)
    client.authenticate("agent-login")


@v1_only("what a v1 client refuses: an answer of 2")
def test_other_protocol_versions_are_connect_errors(make_session_client: MakeClient) -> None:
    client, _ = make_session_client({"initialize": {"protocolVersion": 2}})
    with pytest.raises(acp.ConnectError, match="protocol version 2"):
        client.start()


def test_a_failed_handshake_stops_the_client(make_session_client: MakeClient) -> None:
    client, _ = make_session_client({"initialize": {"protocolVersion": 3}})
    with pytest.raises(acp.ConnectError):
        client.start()
    with pytest.raises(acp.AgentProtocolError, match="start\\(\\) failed") as caught:
        client.new_session()
    assert isinstance(caught.value.__cause__, acp.ConnectError)


# Who persists at end of input: the agent itself before it exits ("exit_marker"), or a process
# of its group 0.3 s after the agent exited at once ("child_marker", as claude-agent-acp's
# `claude` child does); what the marker then holds.
PERSISTERS = [("exit_marker", "exited by itself"), ("child_marker", "done")]


@pytest.mark.parametrize("grace", [0.0, 3.0])
@pytest.mark.parametrize(("persister", "written"), PERSISTERS)
def test_close_with_a_grace_lets_the_agent_and_its_group_finish(
    make_session_client: MakeClient, tmp_path: Any, grace: float, persister: str, written: str
) -> None:
    marker = tmp_path / f"{persister}-{grace}"
    client, _ = make_session_client({persister: str(marker)})
    client.start()
    client.prompt("stream 1")
    began = time.monotonic()
    client.close(grace=grace)
    assert time.monotonic() - began < grace + 1.0
    if grace:
        assert marker.read_text() == written
    else:
        time.sleep(0.6)
        assert not marker.exists(), "without a grace the whole group is killed at once"


def test_a_grace_ends_for_a_group_process_that_never_exits(
    make_session_client: MakeClient, tmp_path: Any
) -> None:
    marker = tmp_path / "never"
    client, _ = make_session_client({"child_marker": str(marker), "child_seconds": 30})
    client.start()
    client.prompt("stream 1")
    began = time.monotonic()
    client.close(grace=0.5)
    spent = time.monotonic() - began
    assert 0.4 < spent < 0.5 + 1.0, spent  # waited out the grace, then killed the group
    time.sleep(0.3)
    assert not marker.exists()


def test_start_timeout_stops_the_client() -> None:
    hung = acp.Client(
        "/bin/sh",
        args=["-c", "sleep 30"],
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=acp.TransferLimits(1 << 20, 1 << 20, 1 << 20, 100, 100),
        transport_epoch=1,
    )
    try:
        began = time.monotonic()
        with pytest.raises(acp.ConnectError, match="timed out"):
            hung.start(timeout=0.3)
        assert time.monotonic() - began < 2.0
        with pytest.raises(acp.AgentProtocolError, match="only close"):
            hung.new_session()
    finally:
        hung.close()


# --- cancel, timeouts, $/cancel_request --------------------------------------------------------


def test_cancel_from_another_thread_ends_a_hung_turn(make_session_client: MakeClient) -> None:
    client, agent = make_session_client()
    client.start()
    session = client.default_session
    assert session is not None
    timer = threading.Timer(0.2, session.cancel)
    timer.start()
    began = time.monotonic()
    result = session.prompt("hang")
    assert result.stop_reason == "cancelled"
    assert time.monotonic() - began < 3.0
    assert agent.methods().count("session/cancel") == 1
    session.cancel()  # no turn in flight: nothing
    assert session.prompt("stream 1").response == "c0 "
    assert agent.methods().count("session/cancel") == 1


def test_cancel_while_a_permission_request_is_pending(make_session_client: MakeClient) -> None:
    asked = threading.Event()
    release = threading.Event()
    committed: list[acp.PermissionRequest] = []

    class Observer:
        def on_update(self, update: acp.Update) -> None:
            pass

        def on_permission(self, request: acp.PermissionRequest) -> acp.PermissionReply:
            asked.set()
            release.wait(5)
            return acp.PermissionReply("selected", "yes", "allow_once")

        def on_permission_commit(self, request: acp.PermissionRequest) -> None:
            committed.append(request)

    client, agent = make_session_client(observer=Observer())
    client.start()
    session = client.default_session
    assert session is not None

    def cancel_then_release() -> None:
        asked.wait(5)
        session.cancel()
        release.set()

    helper = threading.Thread(target=cancel_then_release)
    helper.start()
    result = session.prompt("permission")
    helper.join()
    assert result.stop_reason == "cancelled"
    assert [r.outcome for r in committed] == ["cancelled"], "the observer's reply was replaced"
    answers = [m for m in agent.received() if m.get("id") == "perm-1"]
    assert answers[0]["result"] == {"outcome": {"outcome": "cancelled"}}
    assert agent.methods().count("session/cancel") == 1
    assert result.response == 'outcome {"outcome":"cancelled"}'


def test_a_timeout_cancels_and_raises_with_the_result(make_session_client: MakeClient) -> None:
    client, agent = make_session_client(cancel_grace=2.0)
    client.start()
    session = client.default_session
    assert session is not None
    with pytest.raises(acp.TurnTimeout) as caught:
        session.prompt("hang", timeout=0.2)
    assert caught.value.result is not None
    assert caught.value.result.stop_reason == "cancelled"
    assert caught.value.session_id == "s1"
    assert isinstance(caught.value, TimeoutError)
    assert agent.methods().count("session/cancel") == 1
    assert session.prompt("stream 1").response == "c0 "


def test_a_timeout_past_the_grace_drops_the_late_answer(
    make_session_client: MakeClient, journal: Journal
) -> None:
    client, agent = make_session_client(cancel_grace=0.2)
    client.start()
    session = client.default_session
    assert session is not None
    began = time.monotonic()
    with pytest.raises(acp.TurnTimeout) as caught:
        session.prompt("late 0.6", timeout=0.2)
    elapsed = time.monotonic() - began
    assert caught.value.result is None
    assert 0.35 < elapsed < 1.5, elapsed
    # The late answer (id 2) arrives during the next call and is dropped silently.
    result = session.prompt("stream 2")
    assert result.response == "c0 c1 "
    assert '"id":3,' in [line for line in agent.raw_lines() if "session/prompt" in line][-1]


def test_timeout_must_be_positive(make_session_client: MakeClient) -> None:
    client, agent = make_session_client()
    client.start()
    with pytest.raises(ValueError):
        client.prompt("stream 1", timeout=0)
    assert "session/prompt" not in agent.methods()


def test_cancel_request_for_an_unknown_id_is_ignored(make_session_client: MakeClient) -> None:
    client, _ = make_session_client()
    client.start()
    assert client.prompt("cancel_request") == "still here"


def test_updates_after_a_response_are_drained(
    make_session_client: MakeClient, journal: Journal
) -> None:
    client, _ = make_session_client()
    client.start()
    session = client.default_session
    assert session is not None
    result = session.prompt("after")
    assert result.usage is None, "updates after the response are not part of the turn"
    deadline = time.monotonic() + 3
    delivered = 0
    while delivered < 2 and time.monotonic() < deadline:
        delivered += client.drain(0.2)
    assert delivered == 2
    assert [c.name for c in session.available_commands] == ["web"]


def test_a_chunk_after_the_answer_is_not_taken_into_the_next_turn(
    make_session_client: MakeClient, journal: Journal
) -> None:
    client, _ = make_session_client()
    client.start()
    session = client.default_session
    assert session is not None
    assert session.prompt("aftertalk").response == ""
    time.sleep(0.3)  # the late chunk is readable before the next call writes its prompt
    assert session.prompt("stream 1").response == "c0 "
    assert [u.text for u in journal.content] == ["stale ", "c0 "], "delivered all the same"


# --- TurnResult ---------------------------------------------------------------------------------


def test_turn_result_holds_the_final_state_of_the_turn(
    make_session_client: MakeClient, protocol: str
) -> None:
    client, _ = make_session_client({"modes": MODES})
    client.start()
    session = client.default_session
    assert session is not None
    result = session.prompt("tools")
    assert result.tool_calls[0] == model.ToolCall.from_json(
        {"toolCallId": "t1", "title": "Read a", "kind": "read", "status": "completed"}
    ), "updates set keys; a null removes one, except title"
    if protocol == "v1":
        assert result.tool_calls[1].tool_call_id == "t2", "a permission request announces it"
        assert len(result.tool_calls) == 2, "updates to calls not announced are left out"
    else:  # tool_call_update is an upsert: the first for an id announces the call
        assert [c.tool_call_id for c in result.tool_calls] == ["t1", "zz", "t2"]
    assert result.plan == (
        model.PlanEntry.from_json({"content": "two", "priority": "low", "status": "completed"}),
    )
    assert result.usage is not None
    assert (result.usage.used, result.usage.size) == (10, 100)
    if protocol == "v1":  # v2 has no current_mode_update
        assert result.current_mode_id == "code"
    assert result.available_commands is None
    plain = client.prompt_detailed("stream 1")
    assert type(plain) is acp.PromptResult


# --- defects and faults of the issue ------------------------------------------------------------


class Falsy(Journal):
    def __len__(self) -> int:
        return len(self.permissions)

    def on_permission(self, request: acp.PermissionRequest) -> acp.PermissionReply:
        return acp.PermissionReply("selected", "yes", "allow_once")


def test_a_falsy_observer_keeps_its_permission_callbacks(make_session_client: MakeClient) -> None:
    observer = Falsy()
    assert not observer
    client, _ = make_session_client(observer=observer)
    client.start()
    result = client.prompt_detailed("permission")
    assert result.response == 'outcome {"outcome":"selected","optionId":"yes"}'
    assert [p.option_id for p in observer.permissions] == ["yes"]


def test_updates_pickle_and_copy(make_session_client: MakeClient, journal: Journal) -> None:
    client, _ = make_session_client()
    client.start()
    client.prompt("stream 2")
    update = journal.content[0]
    assert pickle.loads(pickle.dumps(update)) == update
    assert copy.copy(update) == update
    assert copy.deepcopy(update) == update
    assert pickle.loads(pickle.dumps(update)).kind is acp.UpdateKind.AGENT_MESSAGE_CHUNK


def test_an_observer_raising_mid_flood_stops_the_client(make_session_client: MakeClient) -> None:
    seen: list[int] = []

    class Boom(Exception):
        pass

    class Observer:
        def on_update(self, update: acp.Update) -> None:
            seen.append(update.update_sequence)
            if update.update_sequence == 5:
                raise Boom("at 5")

    client, agent = make_session_client(observer=Observer())
    client.start()
    with pytest.raises(Boom):
        client.prompt("flood 1000")
    for call in (lambda: client.prompt("stream 1"), client.new_session, client.list_sessions):
        with pytest.raises(acp.AgentProtocolError, match="stopped after on_update raised") as e:
            call()
        assert isinstance(e.value.__cause__, Boom)
    assert seen == [1, 2, 3, 4, 5], "nothing more is delivered"
    assert agent.methods().count("session/prompt") == 1, "nothing more is written"


def test_a_raising_commit_leaves_the_request_unanswered(make_session_client: MakeClient) -> None:
    class Observer(Journal):
        def on_permission_commit(self, request: acp.PermissionRequest) -> None:
            raise RuntimeError("disk full")

    client, agent = make_session_client(observer=Observer())
    client.start()
    with pytest.raises(RuntimeError, match="disk full"):
        client.prompt("permission")
    time.sleep(0.1)
    assert not [m for m in agent.received() if m.get("id") == "perm-1"]
    with pytest.raises(acp.AgentProtocolError, match="on_permission_commit"):
        client.prompt("stream 1")


@pytest.mark.parametrize("method", ["request_cancel", "close"])
def test_a_stop_during_a_slow_flood_is_seen_per_line(
    make_session_client: MakeClient, method: str
) -> None:
    class Slow:
        def on_update(self, update: acp.Update) -> None:
            time.sleep(0.001)

    client, _ = make_session_client(observer=Slow())
    client.start()
    stopped_at: list[float] = []

    def stop() -> None:
        stopped_at.append(time.monotonic())
        getattr(client, method)()

    timer = threading.Timer(0.3, stop)
    timer.start()
    with pytest.raises(acp.AgentProtocolError) as caught:
        client.prompt("flood 100000")
    raised_at = time.monotonic()
    timer.join()
    assert raised_at - stopped_at[0] < 0.5, raised_at - stopped_at[0]
    assert f"{method}()" in str(caught.value)


def test_capabilities_are_exposed(make_session_client: MakeClient, protocol: str) -> None:
    client, _ = make_session_client()
    client.start()
    if protocol == "v1":  # v2's capabilities have another shape (tests/v2)
        assert client.initialize.agent_capabilities == model.AgentCapabilities.from_json(
            FULL_CAPABILITIES
        )
        assert client.initialize.load_session
    client.permission_policy = acp.PermissionPolicy(allowed_tool_kinds=["edit"])
    assert client.prompt("permission") == 'outcome {"outcome":"selected","optionId":"yes"}'


# --- the session fold and typed decoding (model.md §7) ----------------------------------------


@pytest.mark.parametrize("mode", ["lenient", "strict"])
def test_session_state_folds_every_routed_update(
    make_session_client: MakeClient, mode: str, protocol: str
) -> None:
    client, _ = make_session_client({"modes": MODES}, session_state=mode)
    client.start()
    session = client.default_session
    assert session is not None
    modes = ["ask", "code"] if protocol == "v1" else []  # v2 has no modes
    assert session.state == model.session_update_fold(modes)
    other = client.new_session()
    session.prompt("interleave 2 s2")
    state = session.state
    assert [b.text for m in state.agent_messages for b in m.blocks] == ["a0 ", "a1 "]
    assert [b.text for m in other.state.agent_thoughts for b in m.blocks] == ["b0 ", "b1 "]
    session.prompt("tools" if mode == "lenient" else "stream 1")
    if mode == "lenient" and protocol == "v1":
        assert [c.tool_call_id for c in session.state.tool_calls] == ["t1"]
        assert session.state.current_mode_id == "code"
    elif mode == "lenient":  # an upsert announces: zz too
        assert [c.tool_call_id for c in session.state.tool_calls][:2] == ["t1", "zz"]


@v1_only("in v2 a tool_call_update for a new id announces the call: no fold error")
def test_strict_session_state_stops_on_a_fold_error(make_session_client: MakeClient) -> None:
    client, _ = make_session_client(session_state="strict")
    client.start()
    session = client.default_session
    assert session is not None
    before = session.state
    with pytest.raises(model.UnknownToolCall):
        session.prompt("tools")  # a tool_call_update for a call never announced
    assert session.state.tool_calls[0].tool_call_id == "t1"
    assert before == model.session_update_fold([])
    with pytest.raises(acp.AgentProtocolError, match="the session fold"):
        session.prompt("stream 1")


def test_off_means_no_state(make_session_client: MakeClient) -> None:
    client, _ = make_session_client()
    client.start()
    assert client.default_session is not None
    assert client.default_session.state is None


def test_updates_and_permission_records_decode(
    make_session_client: MakeClient, journal: Journal, protocol: str
) -> None:
    client, _ = make_session_client(
        permission_policy=acp.PermissionPolicy(allowed_tool_kinds=["edit"])
    )
    client.start()
    client.prompt("permission")
    chunk = journal.content[0].decode()
    assert isinstance(chunk, model.AgentMessageChunk)
    assert chunk.content.text.startswith("outcome")
    request = journal.permissions[0].decode()
    tool_call = request.tool_call if protocol == "v1" else request.subject.tool_call
    assert tool_call.tool_call_id == "t1"


def test_model_content_blocks_are_written_as_they_encode(make_session_client: MakeClient) -> None:
    client, agent = make_session_client()
    client.start()
    session = client.default_session
    assert session is not None
    block = model.TextContent.from_json({"type": "text", "text": "stream 1"})
    assert session.prompt([block]).response == "c0 "
    assert agent.raw_lines()[-1].endswith('"prompt":[{"type":"text","text":"stream 1"}]}}')
    client.prompt_content([block])
