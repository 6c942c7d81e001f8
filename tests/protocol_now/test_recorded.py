"""Usage with cost against recorded traffic of real agents (tests/interop/data, from
shared/interop-transcripts): claude-agent-acp 0.101 and codex-acp 2.6 send `usage_update`s (with
`cost`) and a `usage` object on the prompt result; `acp_fast.replay_agent` plays them back to
both drivers and `TurnResult.usage` / `.tokens` must say exactly what was sent."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from conftest import client_class

DATA = Path(__file__).resolve().parents[1] / "interop" / "data"
LIMITS = acp.TransferLimits(
    request_bytes=1 << 20,
    response_bytes=1 << 20,
    update_bytes=1 << 20,
    update_count=100_000,
    response_segment_count=10_000,
)
TOKEN_KEYS = {
    "totalTokens": "total_tokens",
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "thoughtTokens": "thought_tokens",
    "cachedReadTokens": "cached_read_tokens",
    "cachedWriteTokens": "cached_write_tokens",
}


def recorded(path: Path) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """The recorded prompt text, its answer's `usage`, and the last `usage_update` before it."""
    prompt_id, text, last = None, "", None
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("msg")
        if not isinstance(message, dict):
            continue
        if entry["dir"] == "->" and message.get("method") == "session/prompt":
            prompt_id, text = message["id"], message["params"]["prompt"][0]["text"]
        elif entry["dir"] == "<-" and prompt_id is not None:
            update = (message.get("params") or {}).get("update") or {}
            if update.get("sessionUpdate") == "usage_update":
                last = update
            if message.get("id") == prompt_id and "result" in message:
                return text, message["result"]["usage"], last
    raise AssertionError(f"{path.name}: no prompt answer")


def with_usage() -> list[Path]:
    paths = []
    for path in sorted(DATA.glob("*.jsonl")):
        if '"usage":{' in path.read_text().replace(" ", ""):
            try:
                recorded(path)
            except (AssertionError, KeyError, TypeError):
                continue
            paths.append(path)
    return paths


PATHS = with_usage()


def test_there_is_recorded_usage() -> None:
    names = {path.name for path in PATHS}
    assert "claude-agent-acp-101-fake-write.jsonl" in names
    assert "codex-acp-new-fake-write.jsonl" in names


@pytest.mark.parametrize("driver", ["blocking", "async"])
@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_recorded_usage(path: Path, driver: str, tmp_path: Path) -> None:
    text, usage, last = recorded(path)
    client = client_class(driver)(
        sys.executable,
        args=["-m", "acp_fast.replay_agent", str(path)],
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=LIMITS,
        transport_epoch=7,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        permission_policy=acp.PermissionPolicy(allowed_tool_kinds=("edit", "execute")),
    )
    try:
        client.start()
        result = client.default_session.prompt(text)
    finally:
        client.close()
    assert result.tokens == acp.TokenUsage(
        **{name: usage.get(key) for key, name in TOKEN_KEYS.items()},
        meta=usage.get("_meta"),
    )
    if last is None:
        assert result.usage is None
        return
    assert (result.usage.used, result.usage.size) == (last["used"], last["size"])
    if "cost" in last:
        assert result.usage.cost.amount == last["cost"]["amount"]
        assert repr(result.usage.cost.amount) == repr(last["cost"]["amount"])
        assert result.usage.cost.currency == last["cost"]["currency"]
