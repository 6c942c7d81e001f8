"""The core's journal writers (`_core.JournalWriter`, `_core.SqliteWriter`) and the `sqlite3`
fallback: which writer a journal gets, records read back exactly whatever the envelope, a
reader in the same process losing nothing, more pending than a writer thread takes at once."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from acp_fast import _core, journal
from acp_fast.journal import JournalError, RecordKind
from acp_fast.journal import sqlite as journal_sqlite

from .kit import KINDS, Recorder, journal_path, make, permission, update
from .kit import records as read_all

SENT = '{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s-1","prompt":[]}}'


@pytest.fixture
def no_shared_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    """As where `_sqlite3` is built into the interpreter: no module for the core to look in."""
    monkeypatch.setattr(journal_sqlite, "_sqlite_library", lambda: None)


def test_each_kind_gets_the_core_writer_when_it_can(tmp_path: Path) -> None:
    with make("jsonl", journal_path(tmp_path, "jsonl")) as j:
        assert isinstance(j._writer, _core.JournalWriter)
    library = journal_sqlite._sqlite_library()
    with make("sqlite", journal_path(tmp_path, "sqlite")) as j:
        if library is None:  # this Python has _sqlite3 built in
            assert isinstance(j._writer, journal_sqlite._SqliteFallback)
        else:
            assert isinstance(j._writer, _core.SqliteWriter)
            assert Path(library).name.startswith("_sqlite3.")


def test_the_core_refuses_a_library_that_is_not_the_loaded_one(tmp_path: Path) -> None:
    path = journal_path(tmp_path, "sqlite")
    make("sqlite", path).close()  # a journal database
    version = journal_sqlite._SQLITE_VERSION
    with pytest.raises(LookupError, match="is not loaded"):
        _core.SqliteWriter(str(tmp_path / "_sqlite3.so"), version, str(path), "batch", 0, 0)
    library = journal_sqlite._sqlite_library()
    if library is not None:
        with pytest.raises(LookupError, match="not 1"):
            _core.SqliteWriter(library, 1, str(path), "batch", 0, 0)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fsync", journal.FSYNC_MODES)
def test_reading_in_the_same_process_loses_nothing(
    tmp_path: Path, kind: str, fsync: journal.Fsync
) -> None:
    """`read()` opens and closes its own `sqlite3` connection while the writer's is open: with
    a second SQLite in the process that close deleted the WAL under the writer."""
    path = journal_path(tmp_path, kind)
    j = make(kind, path, fsync)
    seen = []
    for number in range(1, 41):
        j.on_update(update(number))
        if number % 10 == 0:
            j.flush()
            seen.append(len(read_all(path)))
    j.on_sent(SENT)
    seen.append(len(read_all(path)))
    j.close()
    assert seen == [10, 20, 30, 40, 41]
    assert [r.number for r in read_all(path)] == list(range(1, 42))


@pytest.mark.parametrize("kind", KINDS)
def test_more_than_a_writer_thread_takes_at_once(tmp_path: Path, kind: str) -> None:
    """At 1 MiB pending (the writer thread busy) the reader waits for the thread to take the
    batch: nothing is lost or reordered."""
    path = journal_path(tmp_path, kind)
    text = "x" * 600
    count = 40_000  # about 28 MB of records
    with make(kind, path, "never") as j:
        for number in range(1, count + 1):
            j.on_update(update(number, text))
    found = read_all(path)
    assert [r.update_sequence for r in found] == list(range(1, count + 1))
    assert json.loads(found[-1].envelope)["params"]["update"]["content"]["text"] == text


@pytest.mark.parametrize("kind", KINDS)
def test_envelopes_that_are_not_one_json_line_come_back_exactly(tmp_path: Path, kind: str) -> None:
    """A made-up Update may carry any text (the core's envelopes are the JSON lines it parsed):
    what is not one line holding an object, or holds a lone surrogate, JSONL keeps as a JSON
    string (SQLite, like sqlite3, refuses text that is not Unicode)."""
    path = journal_path(tmp_path, kind)
    odd = ['{"a":\n1}', "not json at all", "\\", '"quoted"', "[1, 2]", '{"ok": 1}', " {}"]
    if kind == "jsonl":
        odd += ["lone \ud800 surrogate", '{"a":"\udc00"}']
    with make(kind, path) as j:
        for number, envelope in enumerate(odd, 1):
            j.on_update(update(number, envelope=envelope))
    assert [r.envelope for r in read_all(path)] == odd


def test_session_ids_are_encoded_as_python_encodes_them(tmp_path: Path) -> None:
    path = journal_path(tmp_path, "jsonl")
    sessions = ["plain", 'é ✓ "q" \\ \t\x01', "😀", "plain"]
    with make("jsonl", path) as j:
        for number, session in enumerate(sessions, 1):
            j.on_update(update(number, session=session))
    lines = path.read_bytes().splitlines()[1:]
    for line, session in zip(lines, sessions, strict=True):
        assert f',"i":{json.dumps(session)},"m":'.encode() in line
    assert [r.session_id for r in read_all(path)] == sessions


def test_the_sqlite3_fallback_records_every_callback(
    tmp_path: Path, no_shared_sqlite: None
) -> None:
    path = journal_path(tmp_path, "sqlite")
    mine = Recorder()
    j = make("sqlite", path, observer=mine)
    assert isinstance(j._writer, journal_sqlite._SqliteFallback)
    j.on_sent(SENT)
    j.on_update(update(1))
    j.on_permission_commit(permission())
    j.on_update(update(2))
    # A pending batch is written by the flusher thread without waiting for the next record.
    deadline = time.monotonic() + 30
    while len(read_all(path)) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(read_all(path)) == 4
    j.close()
    j.close()
    with pytest.raises(JournalError, match="the journal is closed"):
        j.on_update(update(3))
    found = read_all(path)
    assert [r.kind for r in found] == [
        RecordKind.SENT,
        RecordKind.UPDATE,
        RecordKind.PERMISSION,
        RecordKind.UPDATE,
    ]
    assert found[2].permission() == permission()
    assert [name for name, _ in mine.calls] == ["sent", "update", "permission", "update"]
