"""Crash safety: a host streaming 100,000 updates into a journal is SIGKILLed at a random
point mid-stream, 21 times per kind (7 per fsync mode; `Client` and `AsyncClient` in turn): at
a random update or after a random delay, whichever comes first (a journal that keeps up with
the reader streams all 100,000 in well under the delays' 60 ms, fsync "every" only a few
hundred in it).
Every journal must open, hold a gap-free prefix of the stream with no torn record (a torn tail
is dropped with one warning), hold every update the journal had recorded before the kill with
fsync="every", and take new records after its last one when reopened."""

from __future__ import annotations

import json
import mmap
import os
import random
import signal
import struct
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from acp_fast import journal

from .kit import KINDS, make, update

HOST = Path(__file__).with_name("crash_host.py")
COUNT = 100_000
RUNS = 21
SEED = int(os.environ.get("ACP_FAST_CRASH_SEED", "0")) or random.randrange(1 << 30)
TEXT = ("abcdefghijklmnopqrstuvwxyz" * 2)[:32]


def kill_after_first_update(
    kind: str,
    path: Path,
    fsync: str,
    progress: Path,
    delay: float,
    driver: str = "blocking",
    at_update: int = COUNT,
) -> tuple[int, int]:
    """Start the host, SIGKILL it `delay` s after its first recorded update or once it has
    recorded update `at_update`, whichever comes first; the last recorded sequence it reported
    and the agent's pid."""
    progress.write_bytes(bytes(16))
    host = subprocess.Popen(
        [sys.executable, str(HOST), kind, str(path), fsync, str(progress), str(COUNT), driver],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    with progress.open("r+b") as handle:
        view = mmap.mmap(handle.fileno(), 16)
    try:
        deadline = time.monotonic() + 60
        while struct.unpack_from("q", view, 8)[0] == 0:
            if host.poll() is not None:
                raise AssertionError(f"the host exited early: {host.stderr.read()!r}")  # type: ignore[union-attr]
            if time.monotonic() > deadline:
                raise AssertionError("the host did not start streaming within 60 s")
            time.sleep(0.002)
        # Watched without sleeping: at full speed the host records an update every 0.5 µs.
        kill_at = time.monotonic() + delay
        while struct.unpack_from("q", view, 8)[0] < at_update and time.monotonic() < kill_at:
            pass
        host.send_signal(signal.SIGKILL)
        host.wait()
        agent_pid, reported = struct.unpack_from("qq", view, 0)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        view.close()
        host.stderr.close()  # type: ignore[union-attr]
    if agent_pid:
        try:
            os.killpg(agent_pid, signal.SIGKILL)  # the agent leads its own group
        except ProcessLookupError:
            pass
    return reported, agent_pid


@pytest.mark.parametrize("kind", KINDS)
def test_sigkill_mid_stream_leaves_a_clean_prefix(tmp_path: Path, kind: str) -> None:
    rng = random.Random(f"{SEED}-{kind}")
    progress = tmp_path / "progress"
    summary = []
    for run in range(RUNS):
        fsync = journal.FSYNC_MODES[run % 3]
        driver = ("blocking", "async")[run % 2]  # with the fsync modes: every pair, in turn
        path = tmp_path / f"run-{run}"
        delay = rng.uniform(0.0, 0.06)
        at_update = rng.randrange(1, COUNT * 9 // 10)
        reported, _ = kill_after_first_update(kind, path, fsync, progress, delay, driver, at_update)
        where = (
            f"seed {SEED}, {kind}, {driver}, run {run}, fsync={fsync}, delay {delay:.3f} s,"
            f" update {at_update}"
        )

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            records = list(journal.read(path))  # raises on any gap or corrupted record
        assert len(caught) <= 1, where
        assert all(w.category is journal.TornRecordWarning for w in caught), where
        assert kind == "jsonl" or not caught, where  # SQLite commits whole batches
        assert [r.number for r in records] == list(range(1, len(records) + 1)), where
        updates = [r for r in records if r.kind == "update"]
        # The wire lines of the handshake and the prompt come first, then only updates; only
        # a stream that ended before the kill has lines after them (the prompt's answer).
        first = next((i for i, r in enumerate(records) if r.kind == "update"), len(records))
        assert all(r.kind != "update" for r in records[:first]), where
        assert records[first : first + len(updates)] == updates, where
        assert len(updates) == COUNT or first + len(updates) == len(records), where
        assert [r.update_sequence for r in updates] == list(range(1, len(updates) + 1)), where
        if fsync == "every":
            assert len(updates) >= reported, where
        for record in (updates[0], updates[-1]) if updates else ():
            body = json.loads(record.envelope)["params"]["update"]
            assert body["content"]["text"] == TEXT, where
        summary.append((fsync, reported, len(updates), bool(caught)))

        if run % 3 == 0:  # reopened: continues after its last record, the torn tail cut off
            with warnings.catch_warnings(record=True):
                warnings.simplefilter("always")
                reopened = make(kind, path, "never")
            assert reopened.last_record == len(records), where
            reopened.on_update(update(len(updates) + 1))
            reopened.close()
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                again = list(journal.read(path))
            assert [r.number for r in again] == list(range(1, len(records) + 2)), where
    # Kills land mid-stream, not after it: the run is about crashes. (A kill can miss its
    # update when the watcher is descheduled for the last 10% of a full-speed stream.)
    assert sum(found < COUNT for _, _, found, _ in summary) > RUNS // 2, summary
    print(f"{kind}: (fsync, reported, recorded, torn) per run: {summary}")
