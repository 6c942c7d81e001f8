"""Telemetry against hostile agents, a broken tracer, the environment, a journal and a host
without OpenTelemetry."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import acp_fast as acp
import pytest
from conftest import TEST_TRANSFER_LIMITS, agent

from tests.pool.kit import slow_args
from tests.telemetry.kit import Otel, demo_client, options

BIG = dataclasses.replace(TEST_TRANSFER_LIMITS, update_count=1 << 20)


def test_a_huge_tool_title_is_bounded(otel: Otel) -> None:
    with acp.Client(
        sys.executable,
        args=slow_args("--tools", "1", "--title-bytes", str(900 * 1024)),
        **options(),
    ) as client:
        client.start()
        client.prompt("go")
    tool = otel.span("execute_tool")
    assert len(tool.name) <= 70 * 1024
    assert len(str(dict(tool.attributes or {})["gen_ai.tool.name"])) <= 65 * 1024


def test_a_flood_of_unfinished_tool_calls_is_bounded(otel: Otel) -> None:
    with acp.Client(
        sys.executable, args=slow_args("--tools", "5000"), **options(transfer_limits=BIG)
    ) as client:
        client.start()
        assert client.prompt("go") == "ok"
    tools = [s for s in otel.spans() if s.name.startswith("execute_tool")]
    assert len(tools) == 1024  # the rest get no span; every opened one is ended
    assert all(dict(s.attributes or {})["acp.tool.status"] == "unfinished" for s in tools)


def test_failed_tool_calls_are_error_spans(otel: Otel) -> None:
    with acp.Client(
        sys.executable, args=slow_args("--tools", "3", "--finish-tools"), **options()
    ) as client:
        client.start()
        client.prompt("go")
    tools = [s for s in otel.spans() if s.name.startswith("execute_tool")]
    assert len(tools) == 3
    assert all(dict(s.attributes or {})["error.type"] == "tool_failed" for s in tools)


def test_a_broken_tracer_never_stops_the_client(otel: Otel) -> None:
    class Broken:
        def start_span(self, *args: object, **kwargs: object) -> object:
            raise RuntimeError("exporter on fire")

    with demo_client(permission_policy=acp.PermissionPolicy(allowed_tool_kinds=["edit"])) as c:
        assert c._telemetry is not None
        c._telemetry._api.tracer = Broken()
        c.start()
        assert c.default_session is not None
        result = c.default_session.prompt("write hello.txt please")
        assert result.stop_reason == "end_turn"


def test_otel_variables_reach_agents_spawned_with_an_explicit_env(
    otel: Otel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "host-service")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "from=host")
    seen = tmp_path / "env"
    script = f"env > {seen}\n" + agent(None, ":")
    env = {"PATH": "/usr/bin:/bin", "OTEL_RESOURCE_ATTRIBUTES": "from=caller"}
    with acp.Client("/bin/sh", args=["-c", script], env=env, **options()) as client:
        client.start()
    lines = seen.read_text().splitlines()
    assert "OTEL_SERVICE_NAME=host-service" in lines
    assert "OTEL_RESOURCE_ATTRIBUTES=from=caller" in lines  # the caller's env wins
    acp.telemetry.uninstrument()  # off: the caller's env is passed as given
    with acp.Client("/bin/sh", args=["-c", script], env=env, **options()) as client:
        client.start()
    assert "OTEL_SERVICE_NAME=host-service" not in seen.read_text().splitlines()


def test_a_journal_keeps_its_path_and_tool_calls_become_spans_at_the_turn_end(
    otel: Otel, tmp_path: Path
) -> None:
    from acp_fast.journal import open_journal

    policy = acp.PermissionPolicy(allowed_tool_kinds=["edit"])
    with open_journal(tmp_path / "j.jsonl") as journal:
        with acp.Client(
            sys.executable,
            args=["-m", "acp_fast.demo_agent"],
            **{**options(permission_policy=policy), "observer": journal},
        ) as client:
            assert client._telemetry is not None
            client.start()
            assert client.default_session is not None
            client.default_session.prompt("write hello.txt please")
    tool = otel.span("execute_tool")
    turn = otel.span("invoke_agent")
    assert tool.parent is not None and tool.parent.span_id == turn.context.span_id
    attributes = dict(tool.attributes or {})
    assert attributes["acp.tool.timed"] is False
    assert attributes["acp.tool.status"] == "completed"


def test_a_pool_claim_is_measured(otel: Otel) -> None:
    from tests.pool.kit import demo_pool

    with demo_pool(min_idle=1, max_idle=1) as pool:
        pool.start(wait=True)
        pool.release(pool.claim())
    (point,) = otel.metrics()["acp_fast.pool.claim.duration"]
    assert point.count == 1


def test_without_opentelemetry_telemetry_is_a_no_op_with_one_warning() -> None:
    code = textwrap.dedent(
        """
        import sys, warnings
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ImportError("blocked for the test")
        sys.meta_path.insert(0, Block())
        import acp_fast as acp
        limits = acp.TransferLimits(request_bytes=1 << 20, response_bytes=1 << 20,
            update_bytes=1 << 20, update_count=1024, response_segment_count=1024)
        class Quiet:
            def on_update(self, update): pass
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            acp.telemetry.instrument()
            for _ in range(2):
                with acp.Client(sys.executable, args=["-m", "acp_fast.demo_agent"],
                        reader_limits=acp.DEFAULT_READER_LIMITS, transfer_limits=limits,
                        transport_epoch=1, observer=Quiet(), telemetry=True) as client:
                    client.start()
                    assert client.prompt("hi") == "Hello! You said: hi."
                    assert client._telemetry is None
        texts = [str(w.message) for w in caught]
        assert len(texts) == 1, texts
        assert "acp-fast[otel]" in texts[0], texts
        assert "opentelemetry" not in " ".join(sys.modules), "an OTel module was imported"
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_permission_events_are_capped_and_counted(otel: Otel) -> None:
    """A flood of permission requests in one turn: at most MAX_PERMISSION_EVENTS events (the
    SDK's default per span), every request counted on the turn."""
    root = Path(__file__).resolve().parents[2]
    with acp.Client(
        sys.executable,
        args=[str(root / "benches" / "fs_agent.py")],
        **options(permission_policy=acp.PermissionPolicy(allowed_tool_kinds=["edit"])),
    ) as client:
        client.start()
        client.prompt("300 permission")
    turn = otel.span("invoke_agent")
    events = [e for e in turn.events if e.name == "acp.permission"]
    assert len(events) == acp.telemetry.MAX_PERMISSION_EVENTS
    assert dict(turn.attributes or {})["acp.permission.count"] == 300


def test_the_api_without_an_sdk_records_nothing_and_costs_no_error() -> None:
    """instrument() with OpenTelemetry's global providers and no SDK configured: every call is
    the API's no-op, and the client works as without telemetry."""
    acp.telemetry.instrument()
    try:
        assert acp.telemetry.available()
        with demo_client(permission_policy=acp.PermissionPolicy(allowed_tool_kinds=["edit"])) as c:
            assert c._telemetry is not None
            c.start()
            assert c.default_session is not None
            turn = c.default_session.prompt("write hello.txt please")
            assert turn.stop_reason == "end_turn" and len(turn.tool_calls) == 1
    finally:
        acp.telemetry.uninstrument()


def test_a_permission_event_bounds_the_agent_s_option_id_and_kind(otel: Otel) -> None:
    """The option id and tool kind of a permission request are the agent's strings (300 KiB
    here): the event's attributes are bounded as every other attribute is (they were not)."""

    class Allow:
        def on_update(self, update: acp.Update) -> None:
            pass

        def on_permission(self, request: acp.PermissionRequest) -> acp.PermissionOutcome:
            return acp.PermissionOutcome(acp.PermissionDecision.ALLOW)

        def on_permission_commit(self, request: acp.PermissionRequest) -> None:
            assert len(request.option_id or "") > 300 * 1024  # the agent's, whole

    script = Path(__file__).with_name("long_permission_agent.py")
    with acp.Client(sys.executable, args=[str(script)], **options(observer=Allow())) as client:
        client.start()
        assert client.prompt("go") == ""
    (event,) = otel.span("invoke_agent").events
    attributes = dict(event.attributes or {})
    assert attributes["acp.permission.decision"] == "allow"
    for name in ("acp.permission.option", "acp.tool.kind"):
        assert 1024 < len(str(attributes[name])) <= 65 * 1024, name
