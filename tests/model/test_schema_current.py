"""The model follows the vendored schema 1.25.0 (schema/v1) without losing what 1.21 read."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import acp_fast
import msgspec
import pytest
from acp_fast import model as m

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "interop" / "data"
K = m.DecodeErrorKind


def _gen_model() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_model", ROOT / "scripts" / "gen_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _forms(params: dict[str, Any]) -> tuple[Any, ...]:
    """The params as a dict, and the whole notification as str and as bytes (the fast path)."""
    line = json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params})
    return params, line, line.encode()


def _line(name: str, n: int) -> dict[str, Any]:
    msg: dict[str, Any] = json.loads((DATA / name).read_text().splitlines()[n - 1])["msg"]
    return msg


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_vendored_schema_files_are_the_ones_the_source_note_names(version: str) -> None:
    folder = ROOT / "schema" / version
    note = (folder / "SOURCE.md").read_text()
    listed = dict(re.findall(r"\| `([\w.]+)`[^|]*\| `([0-9a-f]{64})` \|", note))
    assert set(listed) == {"schema.json", "schema.unstable.json"}
    for name, digest in listed.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name


def test_the_generator_reads_the_vendored_1_25_schema() -> None:
    gen = _gen_model()
    assert gen.SCHEMA_CANDIDATES == [ROOT / "schema" / "v1" / "schema.json"]
    defs = json.loads(gen.SCHEMA_CANDIDATES[0].read_text())["$defs"]
    assert {"Notice", "CompactionUpdate", "CompactionSummaryChunk"} <= set(defs)  # 1.25
    assert "name" in defs["ToolCall"]["properties"]  # 1.22


# -- the tool call `name` (schema 1.22), as current agents send it ----------------------------


@pytest.mark.parametrize(
    ("name", "line", "cls", "tool"),
    [
        ("claude-agent-acp-101-fake-write.jsonl", 23, m.ToolCall, "Write"),
        ("codex-acp-new-fake-write.jsonl", 17, m.ToolCallUpdate, "exec_command"),
    ],
)
def test_the_tool_call_name_decodes_strictly_and_round_trips(
    name: str, line: int, cls: type[Any], tool: str
) -> None:
    msg = _line(name, line)
    for value in _forms(msg["params"]):
        update = m.decode_update(value, strict=True)
        assert type(update) is cls and update.name == tool
    assert m.session_update_to_json(update) == msg["params"]["update"]
    # The envelope path too (decode_message), and lenient decoding keeps it.
    assert m.decode_message(json.dumps(msg), strict=True).params.update.name == tool  # type: ignore[union-attr]
    assert m.decode_update(msg["params"], strict=False).name == tool  # type: ignore[union-attr]


def test_the_tool_call_name_in_a_permission_request_decodes_strictly() -> None:
    params = {
        "sessionId": "s",
        "toolCall": {"toolCallId": "t", "title": "Write hello.txt", "name": "Write"},
        "options": [{"optionId": "allow-once", "name": "Allow", "kind": "allow_once"}],
    }
    req = m.decode_permission_request(params)
    assert req.tool_call.name == "Write" and req.to_json() == params


def test_a_bad_tool_call_name_fails_strictly_and_is_dropped_leniently() -> None:
    update = {"sessionUpdate": "tool_call", "toolCallId": "t", "title": "x", "name": 7}
    with pytest.raises(m.ProtocolDecodeError) as info:
        m.decode_update({"sessionId": "s", "update": update}, strict=True)
    assert (info.value.kind, info.value.path) == (K.EXPECTED_STRING, "$.update.name")
    lenient = m.decode_update({"sessionId": "s", "update": update}, strict=False)
    assert isinstance(lenient, m.ToolCall) and lenient.name is m.OMITTED
    null = m.decode_update({"sessionId": "s", "update": {**update, "name": None}}, strict=True)
    assert isinstance(null, m.ToolCall) and null.name is None


# -- notices and compaction (schema 1.25) -----------------------------------------------------

NOTICE = {
    "sessionUpdate": "notice",
    "severity": "warning",
    "title": "Billing",
    "description": "Your credit is low.",
}
COMPACTION = {
    "sessionUpdate": "compaction_update",
    "compactionId": "c1",
    "status": "completed",
    "summary": [{"type": "text", "text": "We wrote hello.txt."}],
}
SUMMARY_CHUNK = {
    "sessionUpdate": "compaction_summary_chunk",
    "compactionId": "c1",
    "content": {"type": "text", "text": "More."},
}


@pytest.mark.parametrize(
    ("update", "cls"),
    [
        (NOTICE, m.Notice),
        (COMPACTION, m.CompactionUpdate),
        (SUMMARY_CHUNK, m.CompactionSummaryChunk),
    ],
)
def test_the_1_25_updates_decode_strictly_and_round_trip(update: dict[str, Any], cls: Any) -> None:
    params = {"sessionId": "s", "update": update}
    for value in _forms(params):
        decoded = m.decode_update(value, strict=True)
        assert type(decoded) is cls
        assert m.session_update_to_json(decoded) == update
    # The Rust core classifies them (protocol-now §2), and so does the model.
    assert decoded.update_kind is acp_fast.UpdateKind(update["sessionUpdate"])
    assert decoded.update_kind is not acp_fast.UpdateKind.UNKNOWN


@pytest.mark.parametrize("strict", [True, False])
def test_open_enums_keep_future_values_and_give_known_ones_their_member(strict: bool) -> None:
    for value in ({**NOTICE, "severity": "_vendor.fatal"}, {**COMPACTION, "status": "paused"}):
        params = {"sessionId": "s", "update": value}
        for given in _forms(params):
            decoded = m.decode_update(given, strict=strict)
            kept = getattr(decoded, "severity", None) or getattr(decoded, "status", None)
            assert type(kept) is str and kept in ("_vendor.fatal", "paused")
            assert m.session_update_to_json(decoded) == value
    for given in _forms({"sessionId": "s", "update": NOTICE}):
        notice = m.decode_update(given, strict=strict)
        assert isinstance(notice, m.Notice) and notice.severity is m.NoticeSeverity.WARNING
    assert m.Notice(severity="error", title="x").severity is m.NoticeSeverity.ERROR
    assert (
        m.CompactionUpdate(compaction_id="c", status="failed").status is m.CompactionStatus.FAILED
    )


def test_a_notice_without_a_title_fails_strictly_and_a_bad_description_is_dropped_leniently() -> (
    None
):
    untitled = {k: v for k, v in NOTICE.items() if k != "title"}
    for strict in (True, False):
        with pytest.raises(m.ProtocolDecodeError) as info:
            m.decode_update({"sessionId": "s", "update": untitled}, strict=strict)
        assert (info.value.kind, info.value.path) == (K.MISSING_FIELD, "$.update.title")
    with pytest.raises(m.ProtocolDecodeError):
        m.decode_update({"sessionId": "s", "update": {**NOTICE, "severity": 3}}, strict=False)
    lenient = m.decode_update(
        {"sessionId": "s", "update": {**NOTICE, "description": 3}}, strict=False
    )
    assert isinstance(lenient, m.Notice) and lenient.description is m.OMITTED


def test_a_compaction_summary_null_clears_and_omitted_leaves_it() -> None:
    """Patch semantics (schema 1.25): null and absent stay distinct after decoding."""
    cleared = m.decode_update({"sessionId": "s", "update": {**COMPACTION, "summary": None}})
    absent = m.decode_update(
        {"sessionId": "s", "update": {k: v for k, v in COMPACTION.items() if k != "summary"}}
    )
    assert isinstance(cleared, m.CompactionUpdate) and cleared.summary is None
    assert isinstance(absent, m.CompactionUpdate) and absent.summary is m.OMITTED


def test_the_client_session_capabilities_carry_notices_and_compaction() -> None:
    caps = {"notices": {}, "compaction": {"_meta": {"x": 1}}, "configOptions": {}}
    decoded = m.ClientSessionCapabilities.from_json(caps)
    assert decoded.notices == m.CapabilityMarker()
    assert decoded.to_json() == caps


def test_the_core_update_kinds_the_generator_knows_are_the_facade_s() -> None:
    """A tag the core learns must be added to CORE_UPDATE_KINDS, and regenerated."""
    known = {k.value for k in acp_fast.UpdateKind} - {"unknown"}
    assert _gen_model().CORE_UPDATE_KINDS == known


# -- what 1.21 read leniently, 1.25 no longer marks: still read --------------------------------


def test_every_field_1_21_read_leniently_still_is() -> None:
    gen = _gen_model()
    specs = {cls: {f.wire: f for f in fs} for cls, fs in m._generated.SPECS.items()}
    for (definition, wire), skip in gen.KEEP_1_21_LENIENCY.items():
        cls = getattr(m, gen.RENAME.get(definition, definition))
        field = specs[cls][wire]
        assert field.default_on_error, (definition, wire)
        assert field.skip_invalid or not skip, (definition, wire)


@pytest.mark.parametrize(
    ("cls", "value", "attr", "lenient", "path"),
    [
        (
            m.TerminalCreateParams,
            {"outputByteLimit": "lots"},
            "output_byte_limit",
            m.OMITTED,
            "$.outputByteLimit",
        ),
        (m.TerminalCreateParams, {"args": ["-c", 7, "true"]}, "args", ("-c", "true"), "$.args[1]"),
        (m.TerminalCreateParams, {"env": None}, "env", m.OMITTED, "$.env"),
        (m.TerminalCreateParams, {"cwd": 5}, "cwd", m.OMITTED, "$.cwd"),
        (m.ReadTextFileParams, {"line": -1}, "line", m.OMITTED, "$.line"),
        (m.NewSessionParams, {"mcpServers": None}, "mcp_servers", (), "$.mcpServers"),
    ],
)
def test_host_and_session_requests_read_as_leniently_as_under_1_21(
    cls: Any, value: dict[str, Any], attr: str, lenient: Any, path: str
) -> None:
    base: dict[str, Any] = {
        m.TerminalCreateParams: {"sessionId": "s", "command": "sh"},
        m.ReadTextFileParams: {"sessionId": "s", "path": "/tmp/a"},
        m.NewSessionParams: {"cwd": "/tmp", "mcpServers": []},
    }[cls]
    given = {**base, **value}
    assert getattr(cls.from_json(given, strict=False), attr) == lenient
    with pytest.raises(m.ProtocolDecodeError) as info:
        cls.from_json(given, strict=True)
    assert info.value.path == path


@pytest.mark.parametrize("strict", [True, False])
def test_folding_a_1_25_update_never_raises_and_keeps_only_the_compactions(strict: bool) -> None:
    """Before 1.25 these decoded (leniently) as UnknownUpdate, which the fold skips; typed now,
    they must not make the fold (and a lenient client routing them) raise. A notice leaves the
    state as it was; the compaction updates change only ``compactions``."""
    state = m.session_update_fold(())
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    state = state.apply(m.decode_update({"sessionId": "s", "update": chunk}), strict=strict)
    for update in (NOTICE, COMPACTION, SUMMARY_CHUNK):
        decoded = m.decode_update({"sessionId": "s", "update": update}, strict=strict)
        after = state.apply(decoded, strict=strict)
        if update is NOTICE:
            assert after == state
        else:
            assert msgspec.structs.replace(after, compactions=state.compactions) == state
            assert [c.compaction_id for c in after.compactions] == ["c1"]
