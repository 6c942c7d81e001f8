"""Crafted journals (issue 21, item 8) and journals that hold nothing yet.

Readers refuse a record over ``max_record_bytes`` with a `JournalError` naming the option, so
their memory stays near that bound whatever the file holds (measured as the peak RSS of a child
process, with a generous bound); reopening a journal whose last line is long is linear.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from acp_fast import _core, journal
from acp_fast.journal import JournalError

MIB = 1 << 20


def peak_rss_mib(code: str) -> tuple[float, str]:
    """Run `code` in a child Python; its peak RSS in MiB (ru_maxrss of the child, waited for
    alone by a fresh parent, so no earlier child counts) and its output."""
    runner = textwrap.dedent(
        """
        import resource, subprocess, sys
        done = subprocess.run([sys.executable, "-c", sys.argv[1]], capture_output=True, text=True)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        print(peak / 1024)
        print(done.stdout + done.stderr)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", runner, code], capture_output=True, text=True, timeout=120
    ).stdout
    first, _, rest = out.partition("\n")
    return float(first), rest


READ_ALL = """
import sys
from acp_fast import journal
try:
    for record in journal.read(sys.argv[1] if len(sys.argv) > 1 else {path!r}):
        pass
    print("read")
except journal.JournalError as exc:
    print("JournalError:", exc)
"""


def test_a_gibibyte_record_line_is_refused_within_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "crafted.jsonl"
    with open(path, "wb") as handle:
        handle.write(journal.JSONL_HEADER)
        handle.write(b'{"n":1,"k":"update","e":1,"s":1,"t":1,"i":"s","m":{"a":"')
        handle.truncate(handle.tell() + 1024 * MIB)  # a sparse GiB of the same line
        handle.seek(0, os.SEEK_END)
        handle.write(b'"}}\n')
    peak, output = peak_rss_mib(READ_ALL.format(path=str(path)))
    assert "the record is longer than max_record_bytes" in output, output
    assert "pass a larger max_record_bytes" in output
    assert peak < 400, f"peak RSS {peak:.0f} MiB reading a 1 GiB record"


def test_a_packed_row_that_expands_255_times_is_refused_before_unpacking(
    tmp_path: Path,
) -> None:
    path = tmp_path / "crafted.db"
    with journal.SqliteJournal(path) as written:
        written.on_sent('{"jsonrpc":"2.0","id":1,"method":"x"}')
    line = b'{"n":1,"k":"sent","e":0,"s":0,"t":1,"i":"","m":{}}\n'
    packed = _core.pack_records(line + b"\n" * (200 * MIB))
    assert len(packed) < 2 * MIB
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE batches SET records = ?", (packed,))
    connection.close()
    del packed
    peak, output = peak_rss_mib(READ_ALL.format(path=str(path)))
    assert "its batch (unpacked) is" in output and "over max_record_bytes" in output, output
    assert peak < 150, f"peak RSS {peak:.0f} MiB reading a 2 MiB row"


def test_a_stored_row_over_the_bound_is_never_fetched(tmp_path: Path) -> None:
    path = tmp_path / "crafted.db"
    with journal.SqliteJournal(path) as written:
        written.on_sent('{"jsonrpc":"2.0","id":1,"method":"x"}')
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE batches SET records = zeroblob(?)", (300 * MIB,))
    connection.close()
    peak, output = peak_rss_mib(READ_ALL.format(path=str(path)))
    assert "its batch is 314572800 bytes, over max_record_bytes" in output, output
    assert peak < 150, f"peak RSS {peak:.0f} MiB"


def test_the_limit_is_an_option(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with journal.JsonlJournal(path) as written:
        written.on_sent(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x" * 5000}))
    with pytest.raises(JournalError, match="record 1: the record is longer than max_record_"):
        list(journal.read(path, max_record_bytes=4096))
    assert len(list(journal.read(path, max_record_bytes=8192))) == 1
    with pytest.raises(
        JournalError, match=r"the last record is 5\d\d\d bytes, over max_record_bytes \(4096"
    ):
        journal.JsonlJournal(path, max_record_bytes=4096)
    db = tmp_path / "j.db"
    with journal.SqliteJournal(db) as written:
        written.on_sent(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x" * 5000}))
    with pytest.raises(JournalError, match=r"record 1: the record is 5\d\d\d bytes, over"):
        list(journal.read(db, max_record_bytes=4096))
    with pytest.raises(ValueError, match="max_record_bytes must be a positive int"):
        list(journal.read(db, max_record_bytes=0))


def test_reopening_after_a_64_mib_last_line_is_linear(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    with journal.JsonlJournal(path) as written:
        written.on_sent('{"jsonrpc":"2.0","id":1,"method":"x","params":"' + "a" * 64 * MIB + '"}')
    started = time.monotonic()
    with journal.JsonlJournal(path, max_record_bytes=128 * MIB) as reopened:
        assert reopened.last_record == 1
    # Quadratic, this took ~35 s; linear, well under a second (a generous bound, no speed claim).
    assert time.monotonic() - started < 15


@pytest.mark.parametrize("name", ["empty.jsonl", "empty.db", "empty"])
def test_an_empty_file_is_an_empty_journal(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"")
    assert list(journal.read(path)) == []
    stats = journal.summarize(path)
    assert stats.records == 0 and stats.turns == []
    # And a writer takes it up: the JSONL header is written, SQLite makes its schema.
    with journal.open_journal(path) as written:
        written.on_sent('{"jsonrpc":"2.0","id":1,"method":"x"}')
    assert [r.number for r in journal.read(path)] == [1]


@pytest.mark.parametrize("name", ["never.jsonl", "never.db"])
def test_a_journal_whose_run_never_started(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    journal.open_journal(path).close()  # opened, nothing recorded
    assert list(journal.read(path)) == []
    assert journal.summarize(path).records == 0


def test_the_replay_loader_is_bounded_too(tmp_path: Path) -> None:
    path = tmp_path / "crafted.jsonl"
    with open(path, "wb") as handle:
        handle.write(journal.JSONL_HEADER)
        handle.write(b'{"n":1,"k":"update","e":1,"s":1,"t":1,"i":"s","m":{"a":"')
        handle.truncate(handle.tell() + 512 * MIB)
    code = f"""
from acp_fast import journal, replay_agent
try:
    replay_agent.load({str(path)!r})
except journal.JournalError as exc:
    print("JournalError:", exc)
"""
    peak, output = peak_rss_mib(code)
    assert "longer than max_record_bytes" in output, output
    assert peak < 400, f"peak RSS {peak:.0f} MiB"
    transcript = tmp_path / "t.jsonl"
    with open(transcript, "wb") as handle:
        handle.write(b'{"t":0,"dir":"<-","msg":"')
        handle.truncate(handle.tell() + 512 * MIB)
    code = f"""
from acp_fast import replay_agent
try:
    replay_agent.load({str(transcript)!r})
except replay_agent.RecordingError as exc:
    print("RecordingError:", exc)
"""
    peak, output = peak_rss_mib(code)
    assert "line 1 is longer than" in output, output
    assert peak < 600, f"peak RSS {peak:.0f} MiB"
