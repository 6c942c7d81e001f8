"""Usage with cost (protocol-now.md §2): `TurnResult.usage` is the turn's last `usage_update`
(cost exact), `TurnResult.tokens` the prompt answer's `usage`; hostile numbers never fail a
turn and are never rounded."""

from __future__ import annotations

import json

import acp_fast as acp
import pytest
from acp_fast import model

from .conftest import chunk, update

COST = "0.00014000000000000001"


def usage_update(used: str, size: str, cost: str | None = None) -> str:
    body = '{"sessionUpdate":"usage_update","used":' + used + ',"size":' + size
    if cost is not None:
        body += ',"cost":{"amount":' + cost + ',"currency":"USD"}'
    return update(body + "}")


def test_the_last_usage_update_and_the_prompt_usage(agent) -> None:  # type: ignore[no-untyped-def]
    tokens = {
        "totalTokens": 1200,
        "inputTokens": 1000,
        "outputTokens": 200,
        "thoughtTokens": 50,
        "cachedReadTokens": 900,
        "_meta": {"model": "m"},
    }
    run = agent(
        turn=[usage_update("1", "10", "0.5"), chunk("hi"), usage_update("5", "100", COST)],
        prompt_result={"usage": tokens},
    )
    result = run.client.default_session.prompt("go")
    assert isinstance(result.usage, model.UsageUpdate)
    assert (result.usage.used, result.usage.size) == (5, 100)
    assert repr(result.usage.cost.amount) == COST and result.usage.cost.currency == "USD"
    assert result.tokens == acp.TokenUsage(
        total_tokens=1200,
        input_tokens=1000,
        output_tokens=200,
        thought_tokens=50,
        cached_read_tokens=900,
        cached_write_tokens=None,
        meta={"model": "m"},
    )


def test_no_usage_is_none(agent) -> None:  # type: ignore[no-untyped-def]
    result = agent(turn=[chunk("hi")]).client.default_session.prompt("go")
    assert result.usage is None and result.tokens is None


@pytest.mark.parametrize("value", [None, 5, "x", [1], True])
def test_a_usage_that_is_not_an_object_is_none(agent, value: object) -> None:  # type: ignore[no-untyped-def]
    run = agent(turn=[chunk("hi")], prompt_result={"usage": value})
    result = run.client.default_session.prompt("go")
    assert result.response == "hi" and result.tokens is None


def test_hostile_token_counts_read_as_none(agent) -> None:  # type: ignore[no-untyped-def]
    tokens = {
        "totalTokens": 2**64,  # past uint64
        "inputTokens": -1,
        "outputTokens": 1.5,
        "thoughtTokens": True,
        "cachedReadTokens": "12",
        "cachedWriteTokens": 2**64 - 1,  # the largest uint64: kept exactly
        "_meta": "not an object",
    }
    run = agent(turn=[chunk("hi")], prompt_result={"usage": tokens})
    result = run.client.default_session.prompt("go")
    assert result.tokens == acp.TokenUsage(cached_write_tokens=2**64 - 1)


def test_a_huge_usage_number_is_exact_through_the_core(agent) -> None:  # type: ignore[no-untyped-def]
    # A 400-digit count and a cost with 40 significant digits: the core holds numbers as text.
    huge = "9" * 400
    cost = "1234567890.123456789012345678901234567891"
    run = agent(
        turn=[usage_update("3", "4", cost)],
        prompt_result={"usage": json.loads('{"totalTokens":' + huge + "}")},
    )
    result = run.client.default_session.prompt("go")
    assert result.tokens is not None and result.tokens.total_tokens is None  # out of range
    assert result.usage.cost.amount == float(cost)


def test_a_usage_update_past_uint64_is_dropped_leniently(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(turn=[usage_update(str(2**64), "4"), chunk("ok")])
    result = run.client.default_session.prompt("go")
    assert result.response == "ok"
    assert result.usage is None  # not a UsageUpdate: the turn still ends normally


def test_nan_is_not_json_and_fails_as_any_invalid_json_does(agent) -> None:  # type: ignore[no-untyped-def]
    nan = (
        '{"sessionUpdate":"usage_update","used":1,"size":2,"cost":{"amount":NaN,"currency":"USD"}}'
    )
    run = agent(turn=[update(nan), chunk("ok")])
    with pytest.raises(acp.AgentProtocolError, match="invalid JSON"):
        run.client.default_session.prompt("go")


def test_an_overflowing_cost_reads_as_python_reads_it(agent) -> None:  # type: ignore[no-untyped-def]
    run = agent(turn=[usage_update("1", "2", "1e400"), chunk("ok")])
    result = run.client.default_session.prompt("go")
    assert result.response == "ok"
    assert result.usage.cost.amount == float("inf")  # as json.loads reads 1e400; never dropped
