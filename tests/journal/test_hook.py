"""When the observer is a journal, the driver records each update into the journal's core
writer directly (no Python call for the journal's part) and calls only the observer it wraps.
That path must record exactly what a Python call of the journal's `on_update` records, with
either driver, with or without a wrapped observer and with the session fold on."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import acp_fast as acp
import pytest
from acp_fast import journal

from .kit import KINDS, journal_path, make
from .test_roundtrip import DEMO_AGENT, Seen, converse

PROMPTS = ["please write hello.txt ✓", "and again"]


class Forward:
    """Hands every callback to a journal from Python, as any observer calls another: the
    driver sees a Python `on_update`, so no direct hook."""

    def __init__(self, recording: Any) -> None:
        self.recording = recording

    def on_update(self, update: acp.Update) -> None:
        self.recording.on_update(update)

    def on_permission_commit(self, request: acp.PermissionRequest) -> None:
        self.recording.on_permission_commit(request)

    def on_sent(self, line: str) -> None:
        self.recording.on_sent(line)

    def on_received(self, line: str) -> None:
        self.recording.on_received(line)


def recorded(path: Path) -> list[tuple[Any, ...]]:
    """Every record but its time."""
    return [
        (
            r.number,
            r.kind,
            r.transport_epoch,
            r.update_sequence,
            r.session_id,
            r.envelope,
            json.dumps(dict(r.fields), sort_keys=True),
        )
        for r in journal.read(path)
    ]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("wrapped", [True, False])
def test_the_direct_hook_records_what_a_python_call_records(
    tmp_path: Path, kind: str, wrapped: bool, client_driver: str
) -> None:
    found = {}
    seen = {}
    for way in ("hook", "python"):
        path = journal_path(tmp_path, kind, way)
        seen[way] = Seen()
        with make(kind, path, observer=seen[way] if wrapped else None) as recording:
            observer = recording if way == "hook" else Forward(recording)
            results, _ = converse(DEMO_AGENT, observer, PROMPTS, tmp_path, client_driver)
        assert results[0].response.endswith("I wrote hello.txt.")
        found[way] = recorded(path)
    assert found["hook"] == found["python"]
    updates = [r for r in found["hook"] if r[1] == "update"]
    assert len(updates) > 4 and [r[3] for r in updates] == list(range(1, len(updates) + 1))
    if wrapped:  # the wrapped observer saw every update the journal recorded, in order
        assert [u.envelope for u in seen["hook"].updates] == [r[5] for r in updates]
    else:
        assert seen["hook"].updates == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_journal_alone_still_feeds_the_session_fold(
    tmp_path: Path, kind: str, client_driver: str
) -> None:
    # No observer wants an Update object; the fold still gets one for each routed update (a
    # strict fold given anything else stops the client, and the turn with it).
    path = journal_path(tmp_path, kind)
    with make(kind, path) as recording:
        results, _ = converse(
            DEMO_AGENT, recording, PROMPTS[:1], tmp_path, client_driver, session_state="strict"
        )
    assert results[0].response.endswith("I wrote hello.txt.")
    updates = [r for r in recorded(path) if r[1] == "update"]
    assert len(updates) > 4


@pytest.mark.parametrize("kind", KINDS)
def test_an_update_is_stamped_with_the_read_that_delivered_it(
    tmp_path: Path, kind: str, client_driver: str
) -> None:
    """The direct hook reads the clock once a read, not once a line: every update of one read
    has that read's time, so a flood written 256 lines a write has far fewer distinct times
    than updates; the times never go back and lie between sending the prompt and its answer."""
    path = journal_path(tmp_path, kind)
    flood = (sys.executable, "-m", "acp_fast.demo_agent", "--flood-count", "5000")
    with make(kind, path) as recording:
        before = time.time()
        results, _ = converse(flood, recording, ["flood"], tmp_path, client_driver)
        after = time.time()
    assert results[0].stop_reason == "end_turn"
    times = [r.time for r in journal.read(path) if r.kind == "update"]
    assert len(times) == 5000
    assert times == sorted(times)
    assert before <= times[0] and times[-1] <= after
    assert len(set(times)) <= 5000 // 4  # a line a read would give ~5000 (at 0.24 µs steps)
