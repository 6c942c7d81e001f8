"""The reply text: assembled from the admitted chunks exactly, whatever their sizes and
alphabets (the core writes ASCII replies straight into the returned str and switches to a byte
buffer at the first non-ASCII chunk)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import acp_fast as acp
import pytest

AGENT = r"""
import json, sys
chunks = json.loads(sys.argv[1])
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        out = {"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": 1}}
    elif m.get("method") == "session/new":
        out = {"jsonrpc": "2.0", "id": m["id"], "result": {"sessionId": "s"}}
    elif m.get("method") == "session/prompt":
        for text in chunks:
            u = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
            n = {"jsonrpc": "2.0", "method": "session/update",
                 "params": {"sessionId": "s", "update": u}}
            sys.stdout.write(json.dumps(n) + "\n")
        out = {"jsonrpc": "2.0", "id": m["id"], "result": {"stopReason": "end_turn"}}
    else:
        continue
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"""

CASES = {
    "empty": [],
    "empty chunks": ["", "", ""],
    "one small": ["hi"],
    "ascii growing past every capacity": ["x" * n for n in (1, 4095, 1, 5000, 70000, 3)],
    "non-ascii first": ["é", "abc", "z" * 9000],
    "non-ascii after a long ascii start": ["a" * 10000, "ü€😀", "tail"],
    "only non-ascii": ["日本", "語"],
}


@pytest.mark.parametrize("chunks", CASES.values(), ids=CASES.keys())
def test_reply_is_the_exact_concatenation(tmp_path: Path, chunks: list[str]) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    seen: list[str] = []
    client = acp.Client(
        sys.executable,
        args=[str(script), json.dumps(chunks)],
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=acp.TransferLimits(
            request_bytes=1 << 20,
            response_bytes=1 << 20,
            update_bytes=1 << 20,
            update_count=1 << 20,
            response_segment_count=1 << 20,
        ),
        transport_epoch=1,
        observer=acp.Observer(on_update=lambda u: seen.append(u.text)),
    )
    with client:
        client.start()
        for _ in range(2):  # a second prompt starts from an empty reply
            seen.clear()
            result = client.prompt_detailed("go")
            assert result.response == "".join(chunks)
            assert seen == chunks
            assert result.overflow is None
