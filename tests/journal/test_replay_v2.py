"""`acp-fast replay` of real ACP v2 traffic (tests/interop/data/v2: the TypeScript SDK 2.4.0 agent
and the Rust SDK's `simple_agent_v2`) to a client on ``protocol="auto"``: it gets the recorded
version 2 and completes the four recorded turns with the recorded replies and stop reasons,
through a permission allowed, one rejected, and a cancel."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import acp_fast as acp
import pytest

DATA = Path(__file__).parents[1] / "interop" / "data" / "v2"
PROMPTS = ["hello there", "write hello.txt", "write hello.txt", "slow"]
# What each recording's turns end with: (reply, stop reason), worked out from the transcript.
EXPECTED = {
    "ts-sdk-2-v2.jsonl": [
        ("hello there", "end_turn"),
        ("I wrote the file.", "end_turn"),  # the whole agent_message replaced the chunk's text
        ("I did not write the file.", "end_turn"),
        ("tick 0. tick 1. ", "cancelled"),
    ],
    "rust-sdk-v2.jsonl": [
        ("Echo: hello there", "end_turn"),  # after an idle that came before its running
        ("Echo: write hello.txt", "end_turn"),
        ("Echo: write hello.txt", "end_turn"),
        ("Echo: slow", "end_turn"),  # already done when the cancel came
    ],
}


class AllowThenReject:
    """Answers the recorded permission requests as the recording client did."""

    def __init__(self) -> None:
        self.asked: list[acp.PermissionRequest] = []

    def on_update(self, update: acp.Update) -> None:
        pass

    def on_permission(self, request: acp.PermissionRequest) -> acp.PermissionReply:
        self.asked.append(request)
        if len(self.asked) == 1:
            return acp.PermissionReply("selected", "allow", "allow_once")
        return acp.PermissionReply("selected", "reject", "reject_once")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_v2_transcript_replays_to_an_auto_client(tmp_path: Path, name: str) -> None:
    observer = AllowThenReject()
    args = ["-m", "acp_fast", "replay", str(DATA / name), "--wait-cancel"]
    args += ["--map-path", f"/workspace={tmp_path}"]
    with acp.Client(
        sys.executable,
        args=args,
        cwd=str(tmp_path),
        protocol="auto",
        observer=observer,
        stderr="tail",
    ) as client:
        client.start(timeout=10)
        assert client.protocol_version == 2
        session = client.default_session
        assert session is not None
        results = []
        for text in PROMPTS:
            timer = threading.Timer(0.3, session.cancel) if text == "slow" else None
            if timer is not None:
                timer.start()
            result = session.prompt(text, timeout=10)
            results.append((result.response, result.stop_reason))
    assert results == EXPECTED[name], client.stderr_tail()
    if name.startswith("ts"):
        assert [r.title for r in observer.asked] == ["Write hello.txt"] * 2
        assert [r.tool_kind for r in observer.asked] == ["edit", "edit"]
    assert "gave up" not in client.stderr_tail()
