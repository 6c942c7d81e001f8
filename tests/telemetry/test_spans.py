"""The spans, events and metrics of a turn (fleet.md §2), read back from the OpenTelemetry
SDK's in-memory exporter and metric reader."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from acp_fast.telemetry import COUNT_BUCKETS, DURATION_BUCKETS
from opentelemetry.trace import SpanKind, StatusCode

from tests.telemetry.kit import DEMO, Otel, demo_client, options

ROOT = Path(__file__).resolve().parents[2]
EDIT = acp.PermissionPolicy(allowed_tool_kinds=["edit"])


def check_turn(otel: Otel, session_id: str) -> None:
    turn = otel.span("invoke_agent")
    tool = otel.span("execute_tool")
    assert turn.name == "invoke_agent acp-fast-demo"
    assert turn.kind is SpanKind.CLIENT
    assert turn.parent is None  # no ambient span in the test
    attributes = dict(turn.attributes or {})
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.provider.name"] == "acp.acp-fast-demo"
    assert attributes["gen_ai.agent.name"] == "acp-fast-demo"
    assert attributes["gen_ai.agent.version"] == acp.__version__
    assert attributes["gen_ai.conversation.id"] == session_id
    assert attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert "gen_ai.input.messages" not in attributes  # content is opt-in
    assert "error.type" not in attributes

    assert tool.name == "execute_tool Write hello.txt"
    assert tool.kind is SpanKind.INTERNAL
    assert tool.parent is not None and tool.parent.span_id == turn.context.span_id
    assert tool.context.trace_id == turn.context.trace_id
    tool_attributes = dict(tool.attributes or {})
    assert tool_attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_attributes["gen_ai.tool.call.id"] == "call-1"
    assert tool_attributes["gen_ai.tool.type"] == "extension"
    assert tool_attributes["acp.tool.kind"] == "edit"
    assert tool_attributes["acp.tool.status"] == "completed"
    assert tool.status.status_code is not StatusCode.ERROR
    assert turn.start_time is not None and tool.start_time is not None
    assert turn.start_time <= tool.start_time and tool.end_time <= turn.end_time  # type: ignore[operator]

    events = [e for e in turn.events if e.name == "acp.permission"]
    assert len(events) == 1


def check_metrics(otel: Otel) -> None:
    found = otel.metrics()
    durations = [
        "gen_ai.invoke_agent.duration",
        "gen_ai.execute_tool.duration",
        "acp_fast.turn.time_to_first_update",
        "acp_fast.agent.start.duration",
    ]
    for name in durations:
        (point,) = found[name]
        assert tuple(point.explicit_bounds) == DURATION_BUCKETS, name
        assert point.count == 1, name
    for name in ("acp_fast.turn.updates", "acp_fast.turn.bytes"):
        (point,) = found[name]
        assert tuple(point.explicit_bounds) == COUNT_BUCKETS, name
    (updates,) = found["acp_fast.turn.updates"]
    assert updates.sum >= 5  # thought, plan, tool call, its update, the reply's chunks
    (turn,) = found["gen_ai.invoke_agent.duration"]
    assert dict(turn.attributes)["gen_ai.operation.name"] == "invoke_agent"


def test_a_turn_with_a_tool_call_and_a_permission(otel: Otel) -> None:
    with demo_client(permission_policy=EDIT) as client:
        client.start()
        assert client.default_session is not None
        result = client.default_session.prompt("write hello.txt please")
        assert result.stop_reason == "end_turn"
    check_turn(otel, "demo-1")
    (event,) = otel.span("invoke_agent").events
    assert dict(event.attributes or {}) == {
        "acp.permission.tier": "allowed_tool_kinds",
        "acp.permission.decision": "allow",
        "acp.permission.outcome": "selected",
        "acp.permission.option": "allow",
        "acp.permission.option_kind": "allow_once",
        "gen_ai.tool.call.id": "call-1",
        "acp.tool.kind": "edit",
    }
    check_metrics(otel)


def test_the_same_turn_through_asyncclient_with_an_observer_decision(otel: Otel) -> None:
    class Deny:
        def on_update(self, update: object) -> None:
            pass

        async def on_permission(self, request: acp.PermissionRequest) -> acp.PermissionReply:
            return acp.PermissionReply(outcome="selected", option_id="reject")

        def on_permission_commit(self, request: acp.PermissionRequest) -> None:
            pass

    async def main() -> None:
        async with acp.AsyncClient(sys.executable, args=DEMO, **options(observer=Deny())) as c:
            await c.start()
            assert c.default_session is not None
            await c.default_session.prompt("write hello.txt please")

    asyncio.run(main())
    turn = otel.span("invoke_agent")
    tool = otel.span("execute_tool")
    assert tool.parent is not None and tool.parent.span_id == turn.context.span_id
    assert dict(tool.attributes or {})["acp.tool.status"] == "failed"  # rejected: not written
    assert tool.status.status_code is StatusCode.ERROR
    (event,) = turn.events
    assert dict(event.attributes or {})["acp.permission.option"] == "reject"
    assert dict(event.attributes or {})["acp.permission.tier"] == "observer"


def test_content_only_with_the_opt_in_variable(otel: Otel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    with demo_client() as client:
        client.start()
        client.prompt("hi there")
    attributes = dict(otel.span("invoke_agent").attributes or {})
    sent = json.loads(str(attributes["gen_ai.input.messages"]))
    assert sent == [{"role": "user", "parts": [{"type": "text", "content": "hi there"}]}]
    reply = json.loads(str(attributes["gen_ai.output.messages"]))
    assert reply[0]["parts"][0]["content"] == "Hello! You said: hi there."
    assert reply[0]["finish_reason"] == "end_turn"


def test_host_requests_are_execute_tool_spans(otel: Otel, tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("data")
    with acp.Client(
        sys.executable,
        args=[str(ROOT / "benches" / "fs_agent.py")],
        cwd=str(tmp_path),
        capabilities=acp.ClientCapabilityConfig(terminal=False),
        **options(),
    ) as client:
        client.start()
        client.prompt(f"2 {target}")
    turn = otel.span("invoke_agent")
    reads = [s for s in otel.spans() if s.name == "execute_tool fs/read_text_file"]
    assert len(reads) == 2
    for span in reads:
        assert span.kind is SpanKind.INTERNAL
        assert span.parent is not None and span.parent.span_id == turn.context.span_id
        attributes = dict(span.attributes or {})
        assert attributes["gen_ai.tool.type"] == "function"
        assert attributes["acp.activity.allowed"] is True
        assert attributes["acp.activity.path"] == str(target)


def test_a_timed_out_turn_carries_error_type(otel: Otel, tmp_path: Path) -> None:
    from conftest import agent

    with acp.Client(
        "/bin/sh", args=["-c", agent(None, ":")], cancel_grace=0.2, **options()
    ) as client:
        client.start()
        with pytest.raises(acp.TurnTimeout):
            client.prompt("never answered", timeout=0.2)
    turn = otel.span("invoke_agent")
    assert dict(turn.attributes or {})["error.type"] == "TurnTimeout"
    assert turn.status.status_code is StatusCode.ERROR
    (point,) = otel.metrics()["gen_ai.invoke_agent.duration"]
    assert dict(point.attributes)["error.type"] == "TurnTimeout"


def test_off_by_default_and_opt_out(otel: Otel) -> None:
    acp.telemetry.uninstrument()
    with demo_client() as client:
        assert client._telemetry is None
        client.start()
        client.prompt("hi")
    acp.telemetry.instrument(
        tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
    )
    with demo_client(telemetry=False) as client:
        assert client._telemetry is None
        client.start()
        client.prompt("hi")
    assert otel.spans() == []


def test_turns_nest_under_the_callers_span_and_the_observers_spans_under_the_turn(
    otel: Otel,
) -> None:
    tracer = otel.tracer_provider.get_tracer("host")

    class Traced:
        def on_update(self, update: acp.Update) -> None:
            if update.session_update == "plan":
                tracer.start_span("observer work").end()

    with demo_client(observer=Traced()) as client, tracer.start_as_current_span("task 17"):
        client.start()
        client.prompt("hi")
        client.prompt("again")
    task = otel.span("task 17")
    turns = [s for s in otel.spans() if s.name.startswith("invoke_agent")]
    assert len(turns) == 2
    for turn in turns:
        assert turn.parent is not None and turn.parent.span_id == task.context.span_id
    assert len({dict(t.attributes or {})["gen_ai.conversation.id"] for t in turns}) == 1
    work = [s for s in otel.spans() if s.name == "observer work"]
    assert len(work) == 2
    assert {w.parent.span_id for w in work if w.parent} == {t.context.span_id for t in turns}


class Sent:
    """Keeps every line the client sends (the telemetry wrapper passes ``on_sent`` through)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def on_sent(self, line: str) -> None:
        self.lines.append(line)


def _prompt_meta(lines: list[str]) -> list[Any]:
    return [
        json.loads(line)["params"].get("_meta")
        for line in lines
        if '"session/prompt"' in line and json.loads(line).get("method") == "session/prompt"
    ]


def test_the_turns_trace_context_reaches_the_agent_in_meta(otel: Otel) -> None:
    """fleet.md §2: `traceparent` in `params._meta` of `session/prompt`, naming the turn's
    span, on both drivers; with telemetry off, no `_meta` at all."""
    sent = Sent()
    with demo_client(observer=sent) as client:
        client.start()
        client.prompt("hello")
    blocking_turn = otel.span("invoke_agent")

    sent_async = Sent()

    async def main() -> None:
        async with acp.AsyncClient(sys.executable, args=DEMO, **options(observer=sent_async)) as c:
            await c.start()
            await c.prompt("hello")

    asyncio.run(main())
    (meta,) = _prompt_meta(sent.lines)
    version, trace_id, span_id, flags = meta["traceparent"].split("-")
    assert version == "00" and int(flags, 16) & 1  # sampled
    assert int(trace_id, 16) == blocking_turn.context.trace_id
    assert int(span_id, 16) == blocking_turn.context.span_id
    (meta_async,) = _prompt_meta(sent_async.lines)
    assert set(meta_async) == {"traceparent"}

    acp.telemetry.uninstrument()
    quiet = Sent()
    with demo_client(observer=quiet) as client:
        client.start()
        client.prompt("hello")
    assert _prompt_meta(quiet.lines) == [None]
