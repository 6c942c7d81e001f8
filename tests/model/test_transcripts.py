"""Every real-agent message decodes leniently; every strictly decodable one round-trips."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from acp_fast import model as m

from ._corpus import messages, transcript_files

# The strict failures of real agents, by (method, error): keys the schema does not have yet.
# Counted over both transcript folders (the test data and the shared copy are the same runs).
KNOWN_STRICT_FAILURES = {
    "unknown_field at $.result.models",  # session/new: unstable model selector
    "unknown_field at $.result.agentCapabilities.sessionCapabilities.fork",  # claude-agent-acp
    "unknown_field at $.result.agentCapabilities.mcpCapabilities.acp",  # codex-acp
    "unknown_field at $.result.usage",  # session/prompt: unstable usage in PromptResponse
}  # (the tool call `name` of claude-agent-acp and codex-acp is typed since schema 1.22)


def _payload(msg: dict[str, Any]) -> tuple[str, Any]:
    if "method" in msg:
        return "params", msg.get("params")
    return ("result", msg["result"]) if "result" in msg else ("error", msg["error"])


def _wire(value: Any) -> Any:
    if isinstance(value, (m.Request, m.Notification, m.Response)):
        raise AssertionError("envelope")
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, m.RpcError):
        out: dict[str, Any] = {"code": value.code, "message": value.message}
        if value.data is not m.OMITTED:
            out["data"] = value.data
        return out
    return value


def _ordered(value: Any) -> Any:
    """JSON with key order made significant, for an exact comparison."""
    if isinstance(value, dict):
        return [(k, _ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_ordered(v) for v in value]
    return value


def test_the_corpus_is_there() -> None:
    assert len(transcript_files()) >= 16
    assert sum(1 for _ in messages()) > 300


def test_every_message_decodes_leniently() -> None:
    count = 0
    for name, n, msg, method in messages():
        try:
            m.decode_message(json.dumps(msg), strict=False, request_method=method)
        except m.ProtocolDecodeError as e:  # pragma: no cover - the failure message
            pytest.fail(f"{name}:{n}: {e}")
        count += 1
    assert count > 300


def test_strict_decoding_round_trips_and_failures_are_the_known_ones() -> None:
    failures: Counter[str] = Counter()
    same_value = same_order = 0
    for name, n, msg, method in messages():
        line = json.dumps(msg)
        try:
            decoded = m.decode_message(line, strict=True, request_method=method)
        except m.ProtocolDecodeError as e:
            failures[str(e)] += 1
            continue
        field, original = _payload(msg)
        if method is None and "method" not in msg and "result" in msg:
            continue  # a response to a request outside the transcript: nothing typed
        got = _wire(getattr(decoded, field))
        assert got == original, f"{name}:{n}: {field} did not round-trip"
        same_value += 1
        # The model writes keys in schema order; most agents do not, so only count it.
        same_order += _ordered(got) == _ordered(original)
    assert set(failures) <= KNOWN_STRICT_FAILURES, failures
    # tests/interop/data alone holds 343 such messages; ../shared/interop-transcripts as many.
    assert same_value > 300
    assert same_order > 0


def test_updates_decode_through_decode_update_with_params_rooted_paths() -> None:
    seen: Counter[str] = Counter()
    for _name, _n, msg, _method in messages():
        if msg.get("method") != "session/update":
            continue
        update = m.decode_update(json.dumps(msg).encode(), strict=False)
        same = m.decode_update(msg["params"], strict=False)
        assert update == same
        seen[type(update).__name__] += 1
        try:
            strict = m.decode_update(json.dumps(msg), strict=True)
        except m.ProtocolDecodeError as e:
            assert e.path.startswith("$.update"), e
            continue
        assert m.session_update_to_json(strict) == msg["params"]["update"]
    assert seen["AgentMessageChunk"] > 50
    assert seen["ToolCall"] > 0 and seen["ToolCallUpdate"] > 0


def test_permission_requests_decode() -> None:
    count = 0
    for _name, _n, msg, _method in messages():
        if msg.get("method") != "session/request_permission":
            continue
        req = m.decode_permission_request(json.dumps(msg))
        assert req == m.decode_permission_request(msg["params"])
        assert req.to_json() == msg["params"]
        count += 1
    assert count > 0


def test_the_transcripts_fold_strictly_or_with_issues() -> None:
    """Each session of each transcript folds leniently; the state counts its messages."""
    by_session: dict[tuple[str, str], list[Any]] = {}
    for name, _n, msg, _method in messages():
        if msg.get("method") == "session/update":
            key = (name, msg["params"]["sessionId"])
            by_session.setdefault(key, []).append(m.decode_update(msg["params"], strict=False))
    assert by_session
    for updates in by_session.values():
        state = m.fold_updates(updates, strict=False)
        chunks = sum(type(u) is m.AgentMessageChunk for u in updates)
        assert sum(len(msg.blocks) for msg in state.agent_messages) == chunks
