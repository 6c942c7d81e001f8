"""Numbers survive exactly (issue 21): through the core (a turn's usage and tool calls, which
it reads as a tree), the journal (envelopes verbatim) and the typed model."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from acp_fast import journal, model

from .test_deep_lines import AGENT, LIMITS, Recorder, update

COST = "0.00014000000000000001"
BIG = str(2**64 + 1)
USAGE = update(
    '{"sessionUpdate":"usage_update","used":5,"size":9,'
    f'"cost":{{"amount":{COST},"currency":"USD"}}}}'
)
RAW = f'{{"cost":{COST},"zero":-0.0,"tiny":5e-324,"big":{BIG},"huge":1e400}}'
TOOL_CALL = update(
    f'{{"sessionUpdate":"tool_call","toolCallId":"t1","title":"x","rawInput":{RAW}}}'
)
TOOL_UPDATE = update(f'{{"sessionUpdate":"tool_call_update","toolCallId":"t1","rawOutput":{RAW}}}')


def test_the_value_is_not_its_short_neighbour() -> None:
    assert float(COST) != 0.00014  # the core once gave back 0.00014


def run(tmp_path: Path, lines: list[str], session_state: str = "off") -> tuple[Any, Path]:
    script = tmp_path / "script"
    script.write_text("\n".join(lines) + "\n")
    path = tmp_path / "j.jsonl"
    observer = journal.JsonlJournal(path, observer=Recorder())
    client = acp.Client(
        sys.executable,
        args=[AGENT, str(script)],
        observer=observer,
        session_state=session_state,  # type: ignore[arg-type]
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=LIMITS,
        transport_epoch=1,
    )
    try:
        with client:
            client.start()
            result = client.session(client.session_id).prompt("go")
    finally:
        observer.close()
    return result, path


@pytest.mark.parametrize("session_state", ["off", "lenient", "strict"])
def test_usage_cost_through_the_core(tmp_path: Path, session_state: str) -> None:
    result, path = run(tmp_path, [USAGE], session_state)
    assert result.usage is not None
    assert repr(result.usage.cost.amount) == COST
    envelopes = [r.envelope for r in journal.read(path)]
    assert USAGE in envelopes  # byte for byte
    decoded = model.decode_update(USAGE)
    assert isinstance(decoded, model.UsageUpdate) and repr(decoded.cost.amount) == COST


def test_tool_call_numbers_through_the_core(tmp_path: Path) -> None:
    # The core folds tool_call and tool_call_update into the turn's record as a tree.
    result, _ = run(tmp_path, [TOOL_CALL, TOOL_UPDATE])
    (call,) = result.tool_calls
    for value in (call.raw_input, call.raw_output):
        assert repr(value["cost"]) == COST
        assert repr(value["zero"]) == "-0.0"
        assert value["tiny"] == 5e-324
        assert value["big"] == 2**64 + 1  # the core's tree holds it as text, not a double
        assert value["huge"] == float("inf")  # as Python's json reads 1e400; never dropped


def test_the_model_keeps_every_number() -> None:
    call = model.decode_update(TOOL_CALL)
    assert isinstance(call, model.ToolCall)
    assert call.raw_input["big"] == 2**64 + 1
    assert repr(call.raw_input["cost"]) == COST
    assert repr(call.raw_input["zero"]) == "-0.0"
    del call.raw_input["huge"]  # inf has no JSON spelling
    expected = json.loads(RAW)
    del expected["huge"]
    assert json.loads(model.stringify_json(call.to_json()["rawInput"])) == expected
    # Beyond a double: read as Python's json reads it, never a parse error (lenient or not).
    huge = update('{"sessionUpdate":"tool_call","toolCallId":"t1","title":"x","rawInput":1e400}')
    for strict in (True, False):
        decoded = model.decode_update(huge, strict=strict)
        assert decoded.raw_input == float("inf")  # type: ignore[union-attr]
    assert model.parse_json("[1e400,-1e400]") == [float("inf"), float("-inf")]
