"""Deeply nested agent JSON (issue 21, item 4): with or without a journal, in every
``session_state``, a line nested 990 or 100,000 deep never raises `RecursionError`; the call
succeeds (read leniently or skipped), except that ``session_state="strict"`` refuses an update
it cannot decode with a `ProtocolDecodeError`, as it refuses any other.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from acp_fast import _json, journal, model

AGENT = str(Path(__file__).with_name("line_agent.py"))
LIMITS = acp.TransferLimits(
    request_bytes=1 << 22,
    response_bytes=1 << 22,
    update_bytes=1 << 22,
    update_count=1024,
    response_segment_count=1024,
)


def deep(n: int) -> str:
    return "[" * n + "]" * n


def update(body: str) -> str:
    return (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":'
        + body
        + "}}"
    )


def lines(depth: int) -> dict[str, str]:
    return {
        "unknown notification": '{"jsonrpc":"2.0","method":"x/unknown","params":'
        + deep(depth)
        + "}",
        "permission toolCall": '{"jsonrpc":"2.0","id":"p1","method":"session/request_permission",'
        '"params":{"sessionId":"s1","toolCall":{"toolCallId":"t9","title":"t","rawInput":'
        + deep(depth)
        + '},"options":[{"optionId":"y","name":"Y","kind":"allow_once"}]}}',
        "chunk _meta": update(
            '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"},'
            '"_meta":' + deep(depth) + "}"
        ),
        "tool_call rawInput": update(
            '{"sessionUpdate":"tool_call","toolCallId":"t1","title":"x","rawInput":'
            + deep(depth)
            + "}"
        ),
        "usage _meta": update(
            '{"sessionUpdate":"usage_update","used":1,"size":2,"_meta":' + deep(depth) + "}"
        ),
    }


class Recorder:
    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.permissions: list[Any] = []

    def on_update(self, update: Any) -> None:
        self.updates.append(update)

    def on_permission_commit(self, request: Any) -> None:
        self.permissions.append(request)


def run(tmp_path: Path, line: str, observer: Any, session_state: str) -> Any:
    script = tmp_path / "script"
    script.write_text(line + "\n")
    client = acp.Client(
        sys.executable,
        args=[AGENT, str(script)],
        observer=observer,
        session_state=session_state,  # type: ignore[arg-type]
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=LIMITS,
        transport_epoch=1,
    )
    with client:
        client.start()
        session = client.session(client.session_id)
        return session.prompt("go"), session


CASES = [(name, depth) for depth in (990, 100_000) for name in lines(depth)]


@pytest.mark.parametrize("session_state", ["off", "lenient", "strict"])
@pytest.mark.parametrize("with_journal", [False, True])
@pytest.mark.parametrize(("name", "depth"), CASES)
def test_a_deep_line_never_stops_the_client(
    tmp_path: Path, name: str, depth: int, with_journal: bool, session_state: str
) -> None:
    line = lines(depth)[name]
    recorder = Recorder()
    observer: Any = recorder
    if with_journal:
        observer = journal.JsonlJournal(tmp_path / "j.jsonl", observer=recorder)
    try:
        check_run(tmp_path, name, depth, line, observer, recorder, session_state)
    finally:
        if with_journal:
            observer.close()  # its descriptors, before the next test counts them


def check_run(
    tmp_path: Path,
    name: str,
    depth: int,
    line: str,
    observer: Any,
    recorder: Recorder,
    session_state: str,
) -> None:
    with_journal = observer is not recorder
    decoded_update = name.startswith(("chunk", "tool_call", "usage"))
    if session_state == "strict" and decoded_update:
        # Strict decoding refuses what it cannot decode, with the model's error.
        with pytest.raises(model.ProtocolDecodeError, match="nested deeper than 128"):
            run(tmp_path, line, observer, session_state)
        return
    result, session = run(tmp_path, line, observer, session_state)
    assert result.stop_reason == "end_turn"
    if name == "permission toolCall":
        # The request announced the call: it is in the turn's record, the levels of its
        # value beyond the bound read as null.
        assert [call.tool_call_id for call in result.tool_calls] == ["t9"]
        raw_input = json.dumps(result.tool_calls[0].raw_input)
        assert raw_input.startswith("[[[") and "null" in raw_input
        assert not _json.too_deep(raw_input)
    if name == "tool_call rawInput":
        # The core reads a tool_call's fields as a tree (serde_json, 128 levels): this one is
        # left out of the turn's record; the update itself was delivered.
        assert result.tool_calls == ()
        assert len(recorder.updates) == 1
    if name == "usage _meta":
        # As a tool_call: the core's tree of the update refuses it; left out, not fatal.
        assert result.usage is None
    if session_state == "lenient" and name == "chunk _meta":
        state = session.state
        assert state is not None and len(state.agent_messages) == 1
    if with_journal:
        observer.close()
        records = list(journal.read(tmp_path / "j.jsonl"))
        # Every line is kept verbatim, however deep.
        assert any(r.envelope == line for r in records)
        stats = journal.summarize(tmp_path / "j.jsonl")
        assert stats.records == len(records)


def test_the_bounded_loader() -> None:
    assert _json.loads('{"a":[1,2,{"b":"[[[["}]}') == {"a": [1, 2, {"b": "[[[["}]}
    text = '{"a":' + deep(200) + ',"b":"' + "[" * 300 + '","c":1}'
    assert _json.too_deep(text)
    with pytest.raises(_json.TooDeep):
        _json.loads(text)
    assert _json.loads_lenient(text) == {"a": _nested(127), "b": "[" * 300, "c": 1}
    assert not _json.too_deep('"' + "[" * 1000 + '"')  # brackets in a string do not nest
    assert _json.loads(deep(128)) is not None
    with pytest.raises(_json.TooDeep):
        _json.loads(deep(129))


def _nested(levels: int) -> Any:
    value: Any = None
    for _ in range(levels):
        value = [value]
    return value
