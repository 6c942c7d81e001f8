"""The journal at unit level: each observer callback called directly, both kinds, read back."""

from __future__ import annotations

import gc
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import warnings
from pathlib import Path

import acp_fast as acp
import pytest
from acp_fast import journal
from acp_fast.journal import JournalError, RecordKind, TornRecordWarning

from .kit import KINDS, PERMISSION_LINE, Activity, Recorder, journal_path, make, permission, update
from .kit import records as read_all

SENT = '{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s-1","prompt":[]}}'
RECEIVED = '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'


def conversation(j: object) -> None:
    """Every callback once, in a plausible order."""
    j.on_sent(  # type: ignore[attr-defined]
        '{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}'
    )
    j.on_received('{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s-1"}}')  # type: ignore[attr-defined]
    j.on_sent(SENT)  # type: ignore[attr-defined]
    j.on_update(update(1, 'héllo ✓ \\u00e9 "q"'))  # type: ignore[attr-defined]
    j.on_permission_commit(permission())  # type: ignore[attr-defined]
    j.on_sent(
        '{"jsonrpc":"2.0","id":"perm-1","result":{"outcome":{"outcome":"selected","optionId":"allow"}}}'
    )  # type: ignore[attr-defined]
    j.on_activity(
        Activity("fs/read_text_file", False, "/etc/passwd", "outside roots", "s-1", -32002)
    )  # type: ignore[attr-defined]
    j.on_update(update(2, "bye"))  # type: ignore[attr-defined]
    j.on_received(RECEIVED)  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", KINDS)
def test_every_callback_is_recorded_in_order(tmp_path: Path, kind: str) -> None:
    path = journal_path(tmp_path, kind)
    with make(kind, path) as j:
        conversation(j)
    found = read_all(path)
    assert [r.kind for r in found] == [
        "sent",
        "received",
        "sent",
        "update",
        "permission",
        "sent",
        "activity",
        "update",
        "received",
    ]
    assert [r.number for r in found] == list(range(1, 10))
    assert [r.update_sequence for r in found] == [0, 0, 0, 1, 0, 0, 0, 2, 0]
    assert all(r.transport_epoch == (0 if r.number < 4 else 1) for r in found)
    assert [r.session_id for r in found] == ["", "s-1", "s-1", "s-1", "s-1", "", "s-1", "s-1", ""]
    assert found[3].envelope == update(1, 'héllo ✓ \\u00e9 "q"').envelope
    assert found[2].envelope == SENT and found[8].envelope == RECEIVED
    assert found[4].envelope == PERMISSION_LINE
    assert found[4].permission() == permission()
    assert found[4].fields["outcome"] == "selected" and found[4].fields["option_id"] == "allow"
    assert found[6].envelope == ""
    assert dict(found[6].fields) == {
        "method": "fs/read_text_file",
        "allowed": False,
        "path": "/etc/passwd",
        "reason": "outside roots",
        "session_id": "s-1",
        "error_code": -32002,
    }
    times = [r.time for r in found]
    assert times == sorted(times) and all(t > 1.7e9 for t in times)
    for record in found:
        with pytest.raises(AttributeError):
            record.kind = RecordKind.SENT  # type: ignore[misc]


@pytest.mark.parametrize("kind", KINDS)
def test_envelopes_come_back_byte_for_byte(tmp_path: Path, kind: str) -> None:
    """Whatever the agent's JSON looks like: spacing, escapes, key order, nested "m" keys."""
    lines = [
        '{ "jsonrpc" : "2.0",\t"method":"session/update","params":{"sessionId":"s","update":'
        '{"sessionUpdate":"plan","entries":[],"m":{"m":1}}}}',
        '{"params":{"update":{"sessionUpdate":"x","content":{"type":"text","text":"a\\nb\\u2028"'
        '}},"sessionId":"s"},"method":"session/update","jsonrpc":"2.0"}',
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
        '{"sessionUpdate":"agent_message_chunk","content":{"type":"text",'
        '"text":"\U0001f600 ,\\"m\\":"}}}}',
    ]
    path = journal_path(tmp_path, kind)
    with make(kind, path) as j:
        for number, line in enumerate(lines, 1):
            j.on_update(update(number, envelope=line))
        j.on_received('not json at all , "m": {')
        j.on_received('{"jsonrpc":"2.0","method":"_auth/status_update","params":{}}')
    found = read_all(path)
    assert [r.envelope for r in found] == [
        *lines,
        'not json at all , "m": {',
        '{"jsonrpc":"2.0","method":"_auth/status_update","params":{}}',
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_wrapped_observer_gets_every_callback_after_the_record(tmp_path: Path, kind: str) -> None:
    path = journal_path(tmp_path, kind)
    seen_on_disk: list[int] = []

    class Mine(Recorder):
        def on_update(self, value: acp.Update) -> None:
            super().on_update(value)
            j.flush()
            seen_on_disk.append(len(read_all(path)))

    mine = Mine()
    j = make(kind, path, observer=mine)
    conversation(j)
    j.close()
    assert [name for name, _ in mine.calls] == [
        "sent",
        "received",
        "sent",
        "update",
        "permission",
        "sent",
        "activity",
        "update",
        "received",
    ]
    assert seen_on_disk == [4, 8]  # the update itself was recorded before mine saw it
    assert not hasattr(j, "on_permission")  # Recorder has none: the client must see none


def test_on_permission_is_the_wrapped_observers_own(tmp_path: Path) -> None:
    def answer(request: acp.PermissionRequest) -> acp.PermissionReply:
        return acp.PermissionReply("selected", "allow")

    observer = acp.Observer(on_permission=answer)
    with journal.JsonlJournal(tmp_path / "j", observer=observer) as j:
        assert j.on_permission is answer


@pytest.mark.parametrize("kind", KINDS)
def test_fixed_transport_epoch_stamps_every_record_but_updates(tmp_path: Path, kind: str) -> None:
    path = journal_path(tmp_path, kind)
    with make(kind, path, transport_epoch=9) as j:
        j.on_sent(SENT)
        j.on_update(update(1, epoch=4))
        j.on_received(RECEIVED)
    assert [r.transport_epoch for r in read_all(path)] == [9, 4, 9]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fsync", journal.FSYNC_MODES)
def test_what_is_written_when(tmp_path: Path, kind: str, fsync: journal.Fsync) -> None:
    """ "every": each update is in the file when on_update returns. Every mode: a record that
    is not an update writes the pending batch and itself at once."""
    path = journal_path(tmp_path, kind)
    j = make(kind, path, fsync)
    j.on_update(update(1))
    j.on_update(update(2))
    if fsync == "every":
        assert len(read_all(path)) == 2
    else:  # pending, unless a batch (its 50 ms up) was written meanwhile
        assert len(read_all(path)) in (0, 1, 2)
    j.on_permission_commit(permission())
    assert len(read_all(path)) == 3
    j.on_update(update(3))
    j.on_sent(SENT)
    assert len(read_all(path)) == 5
    j.on_update(update(4))
    j.close()
    j.close()  # idempotent
    assert [r.number for r in read_all(path)] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fsync", ["batch", "never"])
def test_a_pending_batch_does_not_wait_for_the_next_record(
    tmp_path: Path, kind: str, fsync: journal.Fsync
) -> None:
    """An agent may think for minutes between two updates: the flusher thread writes what the
    journal holds without waiting for another record (about 0.1 s later)."""
    path = journal_path(tmp_path, kind)
    with make(kind, path, fsync) as j:
        for number in range(1, 4):
            j.on_update(update(number))
        deadline = time.monotonic() + 30  # generous: the machine may be busy
        while len(read_all(path)) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [r.update_sequence for r in read_all(path)] == [1, 2, 3]


@pytest.mark.parametrize("kind", KINDS)
def test_a_dropped_journal_writes_its_pending_records(tmp_path: Path, kind: str) -> None:
    path = journal_path(tmp_path, kind)
    j = make(kind, path, "never")
    for number in range(1, 6):
        j.on_update(update(number))
    del j
    gc.collect()
    assert [r.update_sequence for r in read_all(path)] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("kind", KINDS)
def test_a_reopened_journal_continues_after_its_last_record(tmp_path: Path, kind: str) -> None:
    path = journal_path(tmp_path, kind)
    with make(kind, path) as j:
        assert (j.last_record, j.last_transport_epoch) == (0, 0)
        j.on_update(update(1, epoch=3))
        j.on_update(update(2, epoch=3))
    with journal.open_journal(path) as j:
        assert type(j).__name__ == ("JsonlJournal" if kind == "jsonl" else "SqliteJournal")
        assert (j.last_record, j.last_transport_epoch) == (2, 3)
        j.on_sent(SENT)  # before any update: the last epoch found
        j.on_update(update(1, epoch=4))
    found = read_all(path)
    assert [(r.number, r.transport_epoch, r.update_sequence) for r in found] == [
        (1, 3, 1),
        (2, 3, 2),
        (3, 3, 0),
        (4, 4, 1),
    ]


def test_new_journal_kind_follows_the_name_existing_the_content(tmp_path: Path) -> None:
    for name, kind in (
        ("a.sqlite", "sqlite"),
        ("b.db", "sqlite"),
        ("c.jsonl", "jsonl"),
        ("d", "jsonl"),
    ):
        with journal.open_journal(tmp_path / name) as j:
            j.on_update(update(1))
        assert journal.journal_kind(tmp_path / name) == kind
    with journal.open_journal(tmp_path / "e.jsonl", kind="sqlite") as j:
        j.on_update(update(1))
    assert journal.journal_kind(tmp_path / "e.jsonl") == "sqlite"
    with pytest.raises(JournalError, match=r"e\.jsonl: is a sqlite journal, not jsonl"):
        journal.open_journal(tmp_path / "e.jsonl", kind="jsonl")
    with pytest.raises(JournalError, match="a SQLite file, not a JSONL journal"):
        journal.JsonlJournal(tmp_path / "a.sqlite")
    with pytest.raises(JournalError, match="a JSONL journal, not SQLite"):
        journal.SqliteJournal(tmp_path / "c.jsonl")


def test_fsync_must_be_a_mode(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fsync must be one of every, batch, never"):
        journal.JsonlJournal(tmp_path / "j", "always")  # type: ignore[arg-type]


# --- bad input ------------------------------------------------------------------------------


def write_some(path: Path, kind: str, count: int = 5) -> None:
    with make(kind, path) as j:
        for number in range(1, count + 1):
            j.on_update(update(number))


def test_a_torn_final_record_is_dropped_with_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    write_some(path, "jsonl")
    whole = path.read_bytes()
    last_line = whole[whole.rstrip(b"\n").rfind(b"\n") + 1 :]
    for cut in (1, len(last_line) // 2, len(last_line) - 1):  # never the newline itself
        path.write_bytes(whole + last_line[:cut].replace(b'"n":5', b'"n":6'))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found = read_all(path)
        assert [r.update_sequence for r in found] == [1, 2, 3, 4, 5]
        assert len(caught) == 1 and caught[0].category is TornRecordWarning
        assert f"{path}: dropped a torn final record (record 6" in str(caught[0].message)


def test_the_next_writer_cuts_the_torn_record_off(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    write_some(path, "jsonl")
    with path.open("ab") as handle:
        handle.write(b'{"n":6,"k":"update","e":1,"s":6,"t":1')
    with pytest.warns(TornRecordWarning, match="dropped a torn final record"):
        j = journal.JsonlJournal(path)
    assert j.last_record == 5
    j.on_update(update(6))
    j.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = read_all(path)
    assert [(r.number, r.update_sequence) for r in found] == [(n, n) for n in range(1, 7)]


def test_a_journal_cut_inside_its_first_record_holds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(journal.JSONL_HEADER + b'{"n":1,"k":"upd')
    with pytest.warns(TornRecordWarning):
        assert read_all(path) == []
    with pytest.warns(TornRecordWarning):
        with journal.JsonlJournal(path) as j:
            assert j.last_record == 0
            j.on_update(update(1))
    assert [r.number for r in read_all(path)] == [1]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda line: line[:20] + b"#" + line[21:], "record 3: not valid JSON"),
        (lambda line: b"", "record 3: numbered 4: a record is missing or out of order"),
        (lambda line: line.replace(b'"k":"update"', b'"k":"bogus"'), "record 3: unknown kind"),
        (lambda line: line.replace(b'"s":3', b'"s":"3"'), "record 3: a field has the wrong type"),
        (lambda line: line.replace(b'"t":', b'"T":'), "record 3: lacks the key 't'"),
        (lambda line: b"[1,2]\n", "record 3: not a JSON object"),
    ],
)
def test_a_corrupted_record_names_file_and_number(
    tmp_path: Path, damage: object, message: str
) -> None:
    path = tmp_path / "j.jsonl"
    write_some(path, "jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3] = damage(lines[3])  # type: ignore[operator]  # record 3 (line 1 is the header)
    path.write_bytes(b"".join(lines))
    with pytest.raises(JournalError, match=message) as caught:
        read_all(path)
    assert str(caught.value).startswith(f"{path}: record 3: ")
    assert caught.value.path == str(path) and caught.value.record == 3


def test_a_corrupted_last_record_stops_the_next_writer(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    write_some(path, "jsonl")
    data = path.read_bytes()
    path.write_bytes(data[:-10] + b"#########\n")
    with pytest.raises(JournalError, match=r"record 5: the last record is corrupted"):
        journal.JsonlJournal(path)


def test_files_that_are_not_journals(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE t (x)")
    connection.close()
    text = tmp_path / "notes.txt"
    text.write_text('{"t": 1, "dir": "->"}\n')
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    cases = [
        (other, "not an acp-fast journal (no journal_meta table)"),
        (text, "not an acp-fast journal (the first line is not the journal header)"),
        (tmp_path / "missing.jsonl", "no such file"),
        (tmp_path, "is a directory"),
    ]
    for path, message in cases:
        with pytest.raises(JournalError, match=re.escape(message)) as caught:
            read_all(path)
        assert str(caught.value).startswith(f"{path}: ")
    with pytest.raises(JournalError, match="no journal_meta table"):
        journal.SqliteJournal(other, "never").close()
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(JournalError, match="is not a regular file"):
        read_all(fifo)  # never blocks waiting for a writer
    with pytest.raises(JournalError, match="the first line is not the journal header"):
        journal.JsonlJournal(text)


@pytest.mark.parametrize("kind", KINDS)
def test_a_path_in_a_missing_directory(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "nowhere" / "j"
    with pytest.raises(JournalError, match=r"cannot create the journal: no such directory") as e:
        make(kind, path)
    assert str(e.value).startswith(f"{path}: ")
    assert not path.parent.exists()


def test_summarize_counts_turns_updates_bytes_and_decisions(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with journal.JsonlJournal(path) as j:
        conversation(j)
        j.on_permission_commit(permission("selected", "reject"))
        j.on_sent('{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s-1"}}')
        j.on_update(update(3, kind="agent_thought_chunk"))
        j.on_received('{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}')
    stats = journal.summarize(path)
    assert stats.records == 13
    assert stats.records_by_kind == {
        "sent": 4,
        "received": 3,
        "update": 3,
        "permission": 2,
        "activity": 1,
    }
    assert stats.updates_by_kind == {"agent_message_chunk": 2, "agent_thought_chunk": 1}
    assert stats.permissions == {"selected allow": 1, "selected reject": 1}
    assert [(t.updates, t.stop_reason) for t in stats.turns] == [(2, "end_turn"), (1, "error")]
    assert all(t.ended is not None and t.ended >= t.started for t in stats.turns)
    assert stats.file_bytes == path.stat().st_size and not stats.torn
    assert json.loads(path.read_bytes().splitlines()[0]) == {
        "format": "acp-fast-journal",
        "version": 1,
    }


@pytest.mark.parametrize("kind", KINDS)
def test_a_closed_journal_refuses_records(tmp_path: Path, kind: str) -> None:
    path = journal_path(tmp_path, kind)
    j = make(kind, path)
    j.on_update(update(1))
    j.close()
    with pytest.raises(JournalError, match=re.escape(f"{path}: the journal is closed")):
        j.on_sent(SENT)
    assert [r.number for r in read_all(path)] == [1]


@pytest.mark.parametrize("kind", KINDS)
def test_a_forked_child_leaves_the_pending_records_to_the_parent(tmp_path: Path, kind: str) -> None:
    path = journal_path(tmp_path, kind)
    j = make(kind, path, "never")
    j.on_update(update(1))
    j.on_update(update(2))  # pending
    child = os.fork()
    if child == 0:  # the child's interpreter exit runs the journal's finalizer
        code = 0
        try:
            j.close()
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    j.on_update(update(3))
    j.close()
    assert [r.update_sequence for r in read_all(path)] == [1, 2, 3]


_THREADS_SCRIPT = """
import gc, sys, time
from pathlib import Path
from acp_fast import journal
sys.path.insert(0, sys.argv[4])
from journal.kit import update

def journal_threads():
    # Linux: /proc/self/task/*/comm, at most 15 characters: "acp-fast-journa".
    names = []
    for comm in Path("/proc/self/task").glob("*/comm"):
        try:
            names.append(comm.read_text().strip())
        except OSError:
            continue  # the thread ended between the listing and the read
    return sum(name.startswith("acp-fast-journa") for name in names)

def until(done):
    deadline = time.monotonic() + 30  # generous: the machine may be busy
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)

kind, path, ending = sys.argv[1:4]
cls = journal.JsonlJournal if kind == "jsonl" else journal.SqliteJournal
j = cls(path, "batch")
until(lambda: journal_threads() == 2)  # a thread names itself once it runs
running = journal_threads()
for number in range(1, 6):
    j.on_update(update(number))
if ending == "close":
    j.close()
else:
    del j
    gc.collect()
until(lambda: journal_threads() == 0)
print(running, journal_threads())
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ending", ["close", "drop"])
def test_a_journal_leaves_no_thread_behind(tmp_path: Path, kind: str, ending: str) -> None:
    """fsync "batch" runs two threads (the batch thread and the sync thread); both end when the
    journal is closed or dropped, after storing and syncing what was pending. In a fresh
    interpreter: journals of other tests, awaiting collection, would blur the count."""
    path = journal_path(tmp_path, kind)
    tests = str(Path(__file__).resolve().parent.parent)
    found = subprocess.run(
        [sys.executable, "-c", _THREADS_SCRIPT, kind, str(path), ending, tests],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == ["2", "0"]
    assert [r.update_sequence for r in read_all(path)] == [1, 2, 3, 4, 5]


def test_a_sqlite_journal_named_relative_syncs_after_the_host_changes_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fsync "batch" syncs the SQLite WAL by its path, resolved when the journal opened: a host
    that changes directory afterwards still has its journal synced, not a JournalError."""
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    with journal.SqliteJournal("j.data", "batch") as j:
        monkeypatch.chdir(tmp_path / "elsewhere")
        for number in range(1, 4):
            j.on_update(update(number))
        j.flush()
        j.on_sent(SENT)  # a record stored and synced at once
    assert [r.kind for r in read_all(tmp_path / "j.data")] == ["update"] * 3 + ["sent"]
