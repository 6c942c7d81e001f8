"""Elicitations (`elicitation/create`, protocol-now.md §2) against the scripted host agent, with
`Client` and `AsyncClient`: form and url mode, the schema's decline without an observer (and
nothing advertised), awaited observers and the agent's `$/cancel_request`, a raising observer,
the journal, and the attacks (sizes, depth, control bytes, unknown sessions and ids, content
that does not match the schema)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from acp_fast import journal

from .conftest import MakeClient, Recorder, run

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "age": {"type": "integer"},
        "ratio": {"type": "number"},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        "color": {"type": "string", "enum": ["red", "blue"]},
    },
    "required": ["name"],
}


def form(message: str, schema: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    body = {"mode": "form", "message": message, "requestedSchema": schema or SCHEMA, **params}
    return {"method": "elicitation/create", "params": body}


def url(message: str = "Sign in", **params: Any) -> dict[str, Any]:
    body = {
        "mode": "url",
        "message": message,
        "url": "https://example.test/login?x=1",
        "elicitationId": "e-1",
        **params,
    }
    return {"method": "elicitation/create", "params": body}


class Eliciting(Recorder):
    """A recorder whose `on_elicitation` keeps each request and answers with `answer`."""

    def __init__(self, answer: Any) -> None:
        super().__init__()
        self.requests: list[acp.ElicitationRequest] = []
        self.reply = answer

    def on_elicitation(self, request: acp.ElicitationRequest) -> Any:
        self.requests.append(request)
        return self.reply(request)


def initialize_line(recorder: Recorder) -> dict[str, Any]:
    line = next(line for line in recorder.received() if '"initialize"' in line)
    message: dict[str, Any] = json.loads(line)
    return message


def test_form_accept_decline_and_cancel(make_host_client: MakeClient) -> None:
    def answer(request: acp.ElicitationRequest) -> acp.ElicitationReply:
        if request.message == "accept":
            content = {"name": "Ada", "age": 36, "ratio": 0.5, "ok": True, "tags": ["a"]}
            return acp.ElicitationReply("accept", content)
        return acp.ElicitationReply(request.message)  # type: ignore[arg-type]

    recorder = Eliciting(answer)
    client, _ = make_host_client(recorder)
    answers = run(client, [{"request": form(m)} for m in ("accept", "decline", "cancel")])
    assert [a["result"] for a in answers] == [
        {
            "action": "accept",
            "content": {"name": "Ada", "age": 36, "ratio": 0.5, "ok": True, "tags": ["a"]},
        },
        {"action": "decline"},
        {"action": "cancel"},
    ]
    capability = initialize_line(recorder)["params"]["clientCapabilities"]["elicitation"]
    assert capability == {"form": {}, "url": {}}
    first = recorder.requests[0]
    assert (first.mode, first.session_id, first.request_id) == ("form", "s1", "h1")
    assert first.requested_schema == SCHEMA
    assert [f.name for f in first.fields] == ["name", "age", "ratio", "ok", "tags", "color"]
    name, *_, tags, color = first.fields
    assert (name.title, name.required, name.type) == ("Name", True, "string")
    assert (tags.choices, color.choices) == (("a", "b"), ("red", "blue"))
    assert json.loads(first.envelope)["method"] == "elicitation/create"
    assert type(first.decode()).__name__ == "ElicitationFormParams"


def test_url_mode_hands_the_url_over_and_a_completion_is_harmless(
    make_host_client: MakeClient,
) -> None:
    recorder = Eliciting(lambda _: acp.ElicitationReply("accept"))
    client, _ = make_host_client(recorder)
    steps: list[dict[str, Any]] = [
        {"request": url()},
        {"notify": {"method": "elicitation/complete", "params": {"elicitationId": "e-1"}}},
        {"notify": {"method": "elicitation/complete", "params": {"elicitationId": "nobody"}}},
        {"request": url(elicitationId="e-2")},
    ]
    answers = run(client, steps)
    assert [a["result"] for a in answers] == [{"action": "accept"}, {"action": "accept"}]
    request = recorder.requests[0]
    assert (request.mode, request.url, request.elicitation_id) == (
        "url",
        "https://example.test/login?x=1",
        "e-1",
    )
    assert request.fields == () and request.requested_schema is None
    with pytest.raises(ValueError, match="url elicitation carries no content"):
        acp_fast_check(request, {"x": 1})


def acp_fast_check(request: acp.ElicitationRequest, content: dict[str, Any]) -> str:
    from acp_fast._elicitation import check_content

    return check_content(request, content)


def test_without_on_elicitation_nothing_is_advertised_and_the_agent_gets_decline(
    make_host_client: MakeClient,
) -> None:
    client, recorder = make_host_client()  # a Recorder has no on_elicitation
    answers = run(client, [{"request": form("hello")}, {"request": url()}])
    assert [a["result"] for a in answers] == [{"action": "decline"}] * 2
    assert "elicitation" not in initialize_line(recorder)["params"]["clientCapabilities"]


def test_an_observer_returning_none_declines(make_host_client: MakeClient) -> None:
    client, _ = make_host_client(Eliciting(lambda _: None))
    assert run(client, [{"request": form("x")}])[0]["result"] == {"action": "decline"}


@pytest.mark.parametrize("client_driver", ["async"])  # awaitables: AsyncClient only
def test_an_awaitable_observer_is_awaited_while_reading_goes_on(
    make_host_client: MakeClient,
) -> None:

    async def answer(request: acp.ElicitationRequest) -> acp.ElicitationReply:
        await asyncio.sleep(0.01)
        return acp.ElicitationReply("accept", {"name": request.message})

    chunk = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "."}}
    recorder = Eliciting(answer)
    client, _ = make_host_client(recorder)
    # The update sent after the request is handled while the observer is still awaiting.
    answers = run(client, [{"send": form("Ada")}, {"update": chunk}, {"collect": 1}])
    assert answers[0]["result"] == {"action": "accept", "content": {"name": "Ada"}}
    assert len(recorder.updates) >= 1


@pytest.mark.parametrize("client_driver", ["async"])  # awaitables: AsyncClient only
def test_the_agents_cancel_request_cancels_a_pending_awaitable(
    make_host_client: MakeClient,
) -> None:
    tasks: list[asyncio.Task[Any]] = []

    async def answer(_: acp.ElicitationRequest) -> acp.ElicitationReply:
        await asyncio.Event().wait()  # the user never answers
        return acp.ElicitationReply("decline")

    def observer(request: acp.ElicitationRequest) -> Any:
        task = asyncio.ensure_future(answer(request))
        tasks.append(task)
        return task

    client, _ = make_host_client(Eliciting(observer))
    cancel = {"method": "$/cancel_request", "params": {"requestId": "h1"}}
    answers = run(client, [{"send": form("x")}, {"notify": cancel}, {"collect": 1}])
    assert answers[0]["result"] == {"action": "cancel"}
    assert tasks[0].cancelled(), "the pending awaitable is cancelled"


@pytest.mark.parametrize("client_driver", ["async"])  # awaitables: AsyncClient only
def test_a_cancelled_turn_cancels_a_pending_elicitation(
    make_host_client: MakeClient,
) -> None:
    tasks: list[asyncio.Task[Any]] = []
    holder: dict[str, Any] = {}

    async def answer(_: acp.ElicitationRequest) -> acp.ElicitationReply:
        await asyncio.Event().wait()
        return acp.ElicitationReply("decline")

    def observer(request: acp.ElicitationRequest) -> Any:
        holder["session"].cancel()  # the user pressed Ctrl-C meanwhile
        tasks.append(asyncio.ensure_future(answer(request)))
        return tasks[-1]

    client, _ = make_host_client(Eliciting(observer))
    holder["session"] = client.default_session
    answers = run(client, [{"send": form("x")}, {"wait_cancel": True}, {"collect": 1}])
    assert answers[0]["result"] == {"action": "cancel"}
    assert tasks[0].cancelled()


def test_a_raising_observer_stops_the_client(make_host_client: MakeClient) -> None:
    def answer(_: acp.ElicitationRequest) -> Any:
        raise LookupError("the form broke")

    client, _ = make_host_client(Eliciting(answer))
    with pytest.raises(LookupError, match="the form broke"):
        run(client, [{"request": form("x")}])
    with pytest.raises(acp.AgentProtocolError, match="on_elicitation raised"):
        run(client, [])


def test_an_observer_object_and_a_blocking_client_given_a_coroutine(
    make_host_client: MakeClient, client_driver: str
) -> None:
    async def later(_: acp.ElicitationRequest) -> acp.ElicitationReply:
        return acp.ElicitationReply("accept", {"name": "Ada"})

    observer = acp.Observer(on_elicitation=later)
    client, _ = make_host_client(Recorder(), observer=observer)
    if client_driver == "async":
        assert run(client, [{"request": form("x")}])[0]["result"]["action"] == "accept"
        return
    with pytest.raises(TypeError, match="only AsyncClient awaits one"):
        run(client, [{"request": form("x")}])


def test_a_wrong_answer_type_stops_the_client_with_a_type_error(
    make_host_client: MakeClient,
) -> None:
    client, _ = make_host_client(Eliciting(lambda _: {"action": "accept"}))
    with pytest.raises(TypeError, match=r"must return an acp_fast\.ElicitationReply"):
        run(client, [{"request": form("x")}])


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ({"name": "x", "nope": 1}, "has no property 'nope'"),
        ({"name": 5}, "property 'name' of the elicitation is of type 'string'"),
        ({"name": "x", "age": 1.5}, "property 'age' .* 'integer'"),
        ({"name": "x", "ok": 1}, "property 'ok' .* 'boolean'"),
        ({"name": "x", "age": True}, "property 'age'"),
        ({"name": "x", "ratio": float("nan")}, "property 'ratio'"),
        ({"age": 3}, "requires 'name'"),
        (None, "requires 'name'"),
        ({"name": "x", "color": "green"}, "'green' is not one of its choices \\('red', 'blue'\\)"),
        ({"name": "x", "tags": ["a", "z"]}, "property 'tags': 'z' is not one of its choices"),
    ],
)
def test_content_that_does_not_match_the_schema_raises_a_value_error_naming_the_property(
    make_host_client: MakeClient, content: dict[str, Any] | None, match: str
) -> None:
    client, recorder = make_host_client(
        Eliciting(lambda _: acp.ElicitationReply("accept", content))
    )
    with pytest.raises(ValueError, match=match):
        run(client, [{"request": form("x")}])
    # Nothing was answered: the client stopped before writing.
    assert not any('"id":"h1"' in line for line in recorder.received())


def test_the_reply_checks_itself() -> None:
    with pytest.raises(ValueError, match="accept"):
        acp.ElicitationReply("maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='only an "accept" carries content'):
        acp.ElicitationReply("decline", {"a": 1})
    with pytest.raises(TypeError, match="content must be a dict"):
        acp.ElicitationReply("accept", ["a"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"content\['\^\[x'\] must be"):
        acp.ElicitationReply("accept", {"\x1bx": object()})


def test_the_journal_records_the_request_and_the_answer_before_it_is_sent(
    make_host_client: MakeClient, tmp_path: Path
) -> None:
    path = tmp_path / "j.jsonl"
    inner = Eliciting(lambda _: acp.ElicitationReply("accept", {"name": "Ada"}))
    with journal.JsonlJournal(str(path), observer=inner) as written:
        client, _ = make_host_client(inner, observer=written)
        run(client, [{"request": form("x")}])
        client.close()
    records = list(journal.read(str(path)))
    received = [
        r
        for r in records
        if r.kind == journal.RecordKind.RECEIVED
        and json.loads(r.envelope).get("method") == "elicitation/create"
    ]
    answered = [r for r in records if r.kind == journal.RecordKind.SENT and '"h1"' in r.envelope]
    assert len(received) == 1 and len(answered) == 1
    assert received[0].session_id == "s1"
    assert json.loads(answered[0].envelope)["result"] == {
        "action": "accept",
        "content": {"name": "Ada"},
    }
    assert received[0].number < answered[0].number
    assert len(inner.requests) == 1, "the journal forwards on_elicitation to the observer"


# --- attacks ----------------------------------------------------------------------------------


def raw(message_id: int, params: str) -> dict[str, Any]:
    line = f'{{"jsonrpc":"2.0","id":{message_id},"method":"elicitation/create","params":{params}}}'
    return {"raw": line, "id": message_id}


def test_hostile_requests_are_refused_and_the_observer_never_sees_them(
    make_host_client: MakeClient,
) -> None:
    recorder = Eliciting(lambda _: acp.ElicitationReply("decline"))
    big_reader = acp.ReaderLimits(message_bytes=16 << 20)
    client, _ = make_host_client(
        recorder,
        reader_limits=big_reader,
        transfer_limits=acp.TransferLimits(
            request_bytes=32 << 20,  # the prompt carries the agent's script, attacks included
            response_bytes=1 << 20,
            update_bytes=1 << 20,
            update_count=1024,
            response_segment_count=1024,
        ),
    )
    deep = "[" * 10_000 + "]" * 10_000
    many = ",".join(f'"p{i}":{{"type":"string"}}' for i in range(100_000))
    steps = [
        raw(1, '{"sessionId":"s1","mode":"form","message":"' + "m" * (10 << 20) + '"}'),
        raw(2, '{"sessionId":"s1","mode":"form","message":"m","requestedSchema":' + deep + "}"),
        raw(
            3,
            '{"sessionId":"s1","mode":"form","message":"m","requestedSchema":{"properties":{'
            + many
            + "}}}",
        ),
        {"request": form("x", sessionId="nobody")},
        raw(5, '{"requestId":12345,"mode":"url","message":"m","url":"u","elicitationId":"e"}'),
        {"request": {"method": "elicitation/create", "params": {"mode": "form"}}},
    ]
    answers = run(client, steps)
    errors = [a["error"] for a in answers]
    assert [e["code"] for e in errors] == [-32602] * 6
    messages = [e["message"] for e in errors]
    assert "bytes" in messages[0] and "nested" in messages[1] and "bytes" in messages[2]
    assert "unknown session" in messages[3] and "unknown request" in messages[4]
    assert "message must be a string" in messages[5]
    assert recorder.requests == []
    # The client is fine afterwards.
    assert run(client, [{"request": form("x")}])[0]["result"] == {"action": "decline"}


def test_control_bytes_reach_the_observer_as_sent_and_errors_show_them_escaped(
    make_host_client: MakeClient,
) -> None:
    evil = "\x1b]0;pwned\x07\x1b[2J\r\x00"
    schema = {
        "type": "object",
        "title": evil,
        "properties": {evil: {"type": "string", "title": evil, "description": evil}},
    }
    seen: list[acp.ElicitationRequest] = []

    def answer(request: acp.ElicitationRequest) -> acp.ElicitationReply:
        seen.append(request)
        if request.mode == "url":
            return acp.ElicitationReply("decline")
        return acp.ElicitationReply("accept", {evil + "x": "v"})

    client, _ = make_host_client(Eliciting(answer))
    steps = [
        {"request": url(message=evil, elicitationId=evil)},
        {"request": form(evil, schema, toolCallId=evil)},
    ]
    with pytest.raises(ValueError) as raised:
        run(client, steps)
    text = str(raised.value)
    assert "has no property" in text
    assert not any(ord(c) < 32 or ord(c) == 127 for c in text), repr(text)
    url_request, form_request = seen
    assert (url_request.message, url_request.elicitation_id) == (evil, evil)
    assert form_request.message == evil and form_request.tool_call_id == evil
    assert form_request.fields[0].name == evil and form_request.fields[0].description == evil


@pytest.mark.parametrize("client_driver", ["async"])  # awaitables: AsyncClient only
def test_an_awaited_observer_that_raises_or_answers_wrongly_stops_the_client(
    make_host_client: MakeClient,
) -> None:

    async def raising(_: acp.ElicitationRequest) -> acp.ElicitationReply:
        await asyncio.sleep(0)
        raise LookupError("the form broke")

    client, _ = make_host_client(Eliciting(raising))
    with pytest.raises(LookupError, match="the form broke"):
        run(client, [{"request": form("x")}])
    with pytest.raises(acp.AgentProtocolError, match="on_elicitation raised"):
        run(client, [])

    async def wrong(_: acp.ElicitationRequest) -> acp.ElicitationReply:
        return acp.ElicitationReply("accept", {"name": 3})

    client, recorder = make_host_client(Eliciting(wrong))
    with pytest.raises(ValueError, match="property 'name'"):
        run(client, [{"request": form("x")}])
    assert not any('"id":"h1"' in line for line in recorder.received())


@pytest.mark.parametrize("client_driver", ["async"])  # awaitables: AsyncClient only
def test_a_flood_of_elicitations_is_bounded(make_host_client: MakeClient) -> None:
    tasks: list[asyncio.Task[Any]] = []

    def observer(request: acp.ElicitationRequest) -> Any:
        tasks.append(asyncio.ensure_future(asyncio.Event().wait()))
        return tasks[-1]

    client, _ = make_host_client(Eliciting(observer))
    steps: list[dict[str, Any]] = [{"send": form("x")} for _ in range(70)]
    answers = run(client, [*steps, {"collect": 6}])
    assert len(tasks) == 64, "64 wait for the user at once"
    assert [a["error"]["code"] for a in answers] == [-32602] * 6
    assert "too many elicitations pending" in answers[0]["error"]["message"]


def test_policy_rules_decline_before_the_observer_is_asked(make_host_client: MakeClient) -> None:
    """`PermissionPolicy(decline_elicitations=...)`: a matching elicitation is declined by the
    rule (the observer never sees it); the others are asked; a new policy applies at once."""
    recorder = Eliciting(lambda _: acp.ElicitationReply("accept"))
    policy = acp.PermissionPolicy(
        decline_elicitations=[
            acp.ElicitationRule(mode="url", url=re.compile(r"^https://example\.test/")),
            acp.ElicitationRule(message="PASSWORD"),
        ]
    )
    client, _ = make_host_client(recorder, permission_policy=policy)
    steps: list[dict[str, Any]] = [
        {"request": url()},  # declined by the first rule
        {"request": url(url="https://other.test/x", elicitationId="e-2")},  # asked
        {"request": form("your password please", {"type": "object", "properties": {}})},
        {"request": form("your name", {"type": "object", "properties": {}})},
    ]
    answers = run(client, steps)
    assert [a["result"]["action"] for a in answers] == ["decline", "accept", "decline", "accept"]
    assert [r.message for r in recorder.requests] == ["Sign in", "your name"]
    client.permission_policy = acp.PermissionPolicy(
        decline_elicitations=[acp.ElicitationRule()]  # every elicitation
    )
    answers = run(client, [{"request": url()}])
    assert [a["result"] for a in answers] == [{"action": "decline"}]
    assert len(recorder.requests) == 2


def test_elicitation_rules_check_their_fields() -> None:
    with pytest.raises(TypeError, match=r"ElicitationRule\.message"):
        acp.ElicitationRule(message=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ElicitationRule\.mode"):
        acp.ElicitationRule(mode=["url"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="decline_elicitations"):
        acp.PermissionPolicy(decline_elicitations=acp.ElicitationRule())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ElicitationRule items"):
        acp.PermissionPolicy(decline_elicitations=[acp.PermissionRule()])  # type: ignore[list-item]
    rule = acp.ElicitationRule(message=re.compile("secret"))
    # A pattern searches the first 16 KiB only: text the agent pads past it is not searched.
    assert rule.matches("form", "x" * 20_000 + "secret", None) is False
    assert rule.matches("form", "the secret", None) is True
    # A form never matches a rule about URLs.
    assert acp.ElicitationRule(url="x").matches("form", "m", None) is False
