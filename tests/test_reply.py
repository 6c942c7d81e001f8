"""The reply text: assembled from the admitted chunks exactly, whatever their sizes and
alphabets (the core writes ASCII replies straight into the returned str and switches to a byte
buffer at the first non-ASCII chunk); in ACP v1 and v2 (the agent answers the version offered:
in v2 the chunks carry a message id and the turn ends at ``idle``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import acp_fast as acp
import pytest
from conftest import protocol_option

AGENT = r"""
import json, sys
chunks = json.loads(sys.argv[1])
v2 = False
def update(u):
    n = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": u}}
    sys.stdout.write(json.dumps(n) + "\n")
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        v2 = m["params"].get("protocolVersion") == 2
        result = {"protocolVersion": 1}
        if v2:
            result = {"protocolVersion": 2, "info": {"name": "a", "version": "1"},
                      "capabilities": {"session": {}}}
        out = {"jsonrpc": "2.0", "id": m["id"], "result": result}
    elif m.get("method") == "session/new":
        out = {"jsonrpc": "2.0", "id": m["id"], "result": {"sessionId": "s"}}
    elif m.get("method") == "session/prompt":
        if v2:
            ack = {"jsonrpc": "2.0", "id": m["id"], "result": {"messageId": "u"}}
            sys.stdout.write(json.dumps(ack) + "\n")
            update({"sessionUpdate": "state_update", "state": "running"})
        for text in chunks:
            u = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
            update({**u, "messageId": "m"} if v2 else u)
        if v2:
            update({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})
            sys.stdout.flush()
            continue
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
def test_reply_is_the_exact_concatenation(tmp_path: Path, chunks: list[str], protocol: str) -> None:
    def record(update: acp.Update) -> None:
        seen.append(update.text)
        kinds.append(update.session_update == "agent_message_chunk")

    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    seen: list[str] = []
    kinds: list[bool] = []  # per update: a chunk (not v2's state_update)
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
        observer=acp.Observer(on_update=record),
        **protocol_option(protocol),
    )
    with client:
        client.start()
        for _ in range(2):  # a second prompt starts from an empty reply
            seen.clear()
            kinds.clear()
            result = client.prompt_detailed("go")
            assert result.response == "".join(chunks)
            assert [text for text, kind in zip(seen, kinds, strict=True) if kind] == chunks
            assert result.overflow is None
