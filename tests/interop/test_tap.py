"""The wire tap the interop tests put between the client and a real agent (agents/tap.py),
checked with scripted agents: needs no network and no Node.

- A line the client has read is whole in the tap's log (with `tee` a test could read a line
  over 8 KiB half-written: `tee` passes each chunk on before logging it).
- A tapped agent that cannot start fails the client's start at once (behind a `tee` pipeline
  the client waited out the test's whole 90 s limit).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest

from .support import HERE, LIMITS, Journal, Launch, raw_lines, read_json_lines, tapped

BIG_LINE_AGENT = HERE / "agents" / "big_line_agent.py"


def _client(start: Launch, observer: Any = None) -> acp.Client:
    return acp.Client(
        start.command,
        args=start.args,
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=LIMITS,
        transport_epoch=1,
        cwd=start.cwd,
        env=start.env,
        observer=observer or Journal(),
    )


class LogChecker(Journal):
    """On every update the client delivers, the tap's log must already hold its line whole."""

    def __init__(self, log: Path) -> None:
        super().__init__()
        self.log = log
        self.missing: list[int] = []

    def on_update(self, update: Any) -> None:
        super().on_update(update)
        if update.envelope not in raw_lines(self.log):
            self.missing.append(update.update_sequence)


def test_every_line_the_client_reads_is_whole_in_the_log(tmp_path: Path) -> None:
    count, size = 40, 64 * 1024
    log_in, log_out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    start = Launch(sys.executable, [str(BIG_LINE_AGENT), str(count), str(size)], {}, tmp_path, "")
    checker = LogChecker(log_out)
    client = _client(tapped(start, log_in, log_out), checker)
    try:
        client.start()
        result = client.prompt_detailed("go")
        assert result.stop_reason == "end_turn"
    finally:
        client.close()
    assert len(checker.updates) == count
    assert checker.missing == []
    # Both logs hold every line, byte for byte as each side wrote it.
    lines = raw_lines(log_out)
    assert [json.loads(u.envelope) for u in checker.updates] == [
        v for v in map(json.loads, lines) if v.get("method") == "session/update"
    ]
    assert [v.get("method") for v in read_json_lines(log_in)][:3] == [
        "initialize",
        "session/new",
        "session/prompt",
    ]


def test_a_half_written_line_is_not_read(tmp_path: Path) -> None:
    log = tmp_path / "out.jsonl"
    log.write_bytes(b'{"a": 1}\n{"b": 2')
    assert raw_lines(log) == ['{"a": 1}']
    assert read_json_lines(log) == [{"a": 1}]


@pytest.mark.parametrize(
    "agent",
    [
        [sys.executable, "/nonexistent/acp-agent.py"],  # the program starts, its script is gone
        ["/nonexistent/acp-agent"],  # the program itself is gone
    ],
)
def test_a_tapped_agent_that_cannot_start_fails_the_start_at_once(
    tmp_path: Path, agent: list[str]
) -> None:
    start = Launch(agent[0], agent[1:], {"PATH": "/usr/bin:/bin"}, tmp_path, "")
    client = _client(tapped(start, tmp_path / "in.jsonl", tmp_path / "out.jsonl"))
    began = time.monotonic()
    try:
        with pytest.raises(acp.AcpError):
            client.start()
    finally:
        client.close()
    assert time.monotonic() - began < 10  # a generous bound: it took the 90 s limit before
