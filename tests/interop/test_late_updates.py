"""A client defect found with claude-agent-acp (see test_sessions.py, the cancel and timeout
tests), reproduced with a scripted agent so that it shows on every run: a chunk the agent wrote
after a turn's answer, and which was waiting in the pipe before the next `session/prompt` was
written, was counted into that next turn's reply. Fixed: every call first handles what the agent
sent since the last one. sessions.md §4: a turn's updates are those
that arrive after its `session/prompt` is written and before its response. Needs no network and
no Node."""

from __future__ import annotations

import sys
import time

import acp_fast as acp

from .support import HERE, LIMITS, Journal, wait_for

LATE_CHUNK_AGENT = HERE / "agents" / "late_chunk_agent.py"


def test_a_chunk_sent_after_an_answer_is_not_part_of_the_next_turn() -> None:
    journal = Journal()
    client = acp.Client(
        sys.executable,
        args=[str(LATE_CHUNK_AGENT)],
        reader_limits=acp.DEFAULT_READER_LIMITS,
        transfer_limits=LIMITS,
        transport_epoch=1,
        observer=journal,
    )
    try:
        client.start()
        session = client.default_session
        assert session is not None
        first = session.prompt("one")
        assert first.response == "reply 1."
        time.sleep(0.5)  # the late chunk is in the pipe long before the next prompt is written
        second = session.prompt("two")
        # Every update is delivered, in order ...
        assert wait_for(lambda: len(journal.updates) == 3, 1)
        assert [u.text for u in journal.updates] == ["reply 1.", " late after 1.", "reply 2."]
        # ... but the late chunk belongs to no turn.
        assert second.response == "reply 2."
    finally:
        client.close()
