"""The SQLite journal's format (version 3): a batch of records a row of table `batches`, the
records being the JSONL journal's lines LZ4-packed, the row naming its records and the range
of its updates. Damaged rows name the file and the record; version 2 journals (the lines
plain) are still read and appended to as they are; version 1 journals (a record a row, what
earlier builds wrote) are still read, and never appended to."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp_fast import _core, journal
from acp_fast.journal import JournalError, RecordKind
from acp_fast.journal import sqlite as journal_sqlite

from .kit import make, permission, update
from .kit import records as read_all

SENT = '{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s-1","prompt":[]}}'


@pytest.fixture(params=["core", "fallback"])
def writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each SQLite writer in turn: the core's, and the `sqlite3` fallback used where the core
    cannot find the library's calls."""
    if request.param == "fallback":
        monkeypatch.setattr(journal_sqlite, "_sqlite_library", lambda: None)
    return str(request.param)


def rows(path: Path, packed: bool = True) -> list[tuple[Any, ...]]:
    """The batch rows, their records unpacked (`packed`: a version 3 journal)."""
    connection = sqlite3.connect(path)
    try:
        found = connection.execute(
            "SELECT first_record, last_record, first_epoch, first_sequence, last_epoch, "
            "last_sequence, records FROM batches ORDER BY first_record"
        ).fetchall()
    finally:
        connection.close()
    unpack = _core.unpack_records if packed else bytes
    return [(*row[:6], unpack(row[6])) for row in found]


def lines_without_time(records: bytes) -> list[dict[str, Any]]:
    found = []
    for line in records.decode().splitlines():
        value = json.loads(line)
        assert isinstance(value.pop("t"), int)
        found.append(value)
    return found


def test_both_sqlite_writers_write_the_same_rows(tmp_path: Path, writer: str) -> None:
    path = tmp_path / "j.sqlite"
    with make("sqlite", path, "every", transport_epoch=7) as j:
        j.on_sent(SENT)
        j.on_update(update(1, session="s-2", epoch=3))
        j.on_update(update(2, envelope="not json"))
        j.on_permission_commit(permission())
    found = rows(path)
    # fsync="every": each record is stored (a row) before its callback returns.
    assert [row[:6] for row in found] == [
        (1, 1, None, None, None, None),
        (2, 2, 3, 1, 3, 1),
        (3, 3, 1, 2, 1, 2),
        (4, 4, None, None, None, None),
    ]
    records = [lines_without_time(row[6]) for row in found]
    assert records[0] == [{"n": 1, "k": "sent", "e": 7, "s": 0, "i": "s-1", "m": json.loads(SENT)}]
    assert records[1][0]["n"] == 2 and records[1][0]["i"] == "s-2" and "m" in records[1][0]
    assert records[2] == [{"n": 3, "k": "update", "e": 1, "s": 2, "i": "s-1", "x": "not json"}]
    assert records[3][0]["k"] == "permission" and records[3][0]["p"]["option_id"] == "allow"
    assert [r.number for r in read_all(path)] == [1, 2, 3, 4]


def test_a_batch_row_holds_many_updates_and_names_their_range(tmp_path: Path, writer: str) -> None:
    path = tmp_path / "j.sqlite"
    with make("sqlite", path, "batch") as j:
        j.on_sent(SENT)  # stored at once: a row of its own
        for sequence in range(1, 2001):
            j.on_update(update(sequence, "x" * 200))
    found = rows(path)
    assert found[0][:6] == (1, 1, None, None, None, None)
    # Batches end at 512 KiB or 50 ms: far fewer rows than records, whatever the timing.
    assert 1 < len(found) < 200
    expected = 2
    for first, last, first_epoch, first_sequence, last_epoch, last_sequence, records in found[1:]:
        lines = lines_without_time(records)
        assert (first, last) == (expected, expected + len(lines) - 1)
        assert [line["n"] for line in lines] == list(range(first, last + 1))
        assert (first_epoch, first_sequence) == (1, lines[0]["s"])
        assert (last_epoch, last_sequence) == (1, lines[-1]["s"])
        expected = last + 1
    assert expected == 2002
    # The index finds the batch holding an update.
    connection = sqlite3.connect(path)
    try:
        (page_size,) = connection.execute("PRAGMA page_size").fetchone()
        assert page_size == journal_sqlite.PAGE_SIZE  # new journals: 16 KiB pages
        (holder,) = connection.execute(
            "SELECT records FROM batches WHERE (first_epoch, first_sequence) <= (1, 1234) "
            "ORDER BY first_epoch DESC, first_sequence DESC LIMIT 1"
        ).fetchone()
    finally:
        connection.close()
    assert 1234 in [line["s"] for line in lines_without_time(_core.unpack_records(holder))]
    assert [r.update_sequence for r in read_all(path)][1:] == list(range(1, 2001))


def test_a_reopened_journal_continues_after_its_last_batch(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    with make("sqlite", path) as j:
        for sequence in range(1, 4):
            j.on_update(update(sequence, epoch=5))
    with make("sqlite", path) as j:
        assert (j.last_record, j.last_transport_epoch) == (3, 5)
        j.on_sent(SENT)
    found = read_all(path)
    assert [r.number for r in found] == [1, 2, 3, 4]
    assert found[3].kind == RecordKind.SENT and found[3].transport_epoch == 5


def rewrite_line(number: int, damage: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    def rewrite(records: bytes) -> bytes:
        lines = records.split(b"\n")
        for index, line in enumerate(lines):
            if line.startswith(b'{"n":%d,' % number):
                lines[index] = damage(line)
        return b"\n".join(lines)

    return rewrite


def damage_rows(path: Path, change: Callable[[bytes], bytes], packed: bool = True) -> None:
    """Rewrites each batch's lines (`change` of the unpacked lines, packed again)."""
    if packed:
        plain = change

        def change(records: bytes) -> bytes:
            return _core.pack_records(plain(_core.unpack_records(records)))

    connection = sqlite3.connect(path)
    try:
        with connection:
            for first, records in connection.execute(
                "SELECT first_record, records FROM batches"
            ).fetchall():
                connection.execute(
                    "UPDATE batches SET records = ? WHERE first_record = ?",
                    (change(records), first),
                )
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda line: line.replace(b'"k":"update"', b'"k":"bogus"'), "unknown kind 'bogus'"),
        (lambda line: line.replace(b'"s":3', b'"s":"x"'), "a field has the wrong type"),
        (lambda line: line[:10] + b"#" + line[11:], "not valid JSON"),
        (lambda line: line.replace(b'"t":', b'"T":'), "lacks the key 't'"),
    ],
)
def test_a_corrupted_record_in_a_batch_names_file_and_number(
    tmp_path: Path, damage: Callable[[bytes], bytes], message: str
) -> None:
    path = tmp_path / "j.sqlite"
    with make("sqlite", path) as j:
        for sequence in range(1, 6):
            j.on_update(update(sequence))
    damage_rows(path, rewrite_line(3, damage))
    with pytest.raises(JournalError, match=message) as caught:
        read_all(path)
    assert str(caught.value).startswith(f"{path}: record 3: ")


def test_a_missing_or_cut_batch_names_file_and_number(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    with make("sqlite", path, "every") as j:  # a row a record
        for sequence in range(1, 6):
            j.on_update(update(sequence))
    connection = sqlite3.connect(path)
    with connection:
        connection.execute("DELETE FROM batches WHERE first_record = 3")
    connection.close()
    with pytest.raises(JournalError, match="record 3: a batch starts at record 4: a record is"):
        read_all(path)
    damage_rows(path, lambda records: records[:-1])
    with pytest.raises(JournalError, match=f"^{path}: record 1: its batch's records are cut"):
        read_all(path)


def test_a_batch_naming_other_records_than_it_holds(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    with make("sqlite", path, "every") as j:
        for sequence in range(1, 4):
            j.on_update(update(sequence))
    connection = sqlite3.connect(path)
    with connection:
        connection.execute("UPDATE batches SET last_record = 7 WHERE first_record = 2")
    connection.close()
    with pytest.raises(JournalError, match="record 2: its batch says it ends at record 7"):
        read_all(path)


# What earlier builds wrote: version 1, a record a row (their schema, verbatim).
V1_SCHEMA = """
CREATE TABLE journal_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE records (
    n INTEGER PRIMARY KEY, kind TEXT NOT NULL, transport_epoch INTEGER NOT NULL,
    update_sequence INTEGER NOT NULL, session_id TEXT NOT NULL, time_ns INTEGER NOT NULL,
    envelope TEXT NOT NULL, fields TEXT
);
INSERT INTO journal_meta VALUES ('format', 'acp-fast-journal'), ('version', '1');
"""


def v1_journal(path: Path) -> list[Any]:
    made = [update(1), update(2, "é ✓")]
    fields = json.dumps({"outcome": "selected", "option_id": "allow", "reason": "rule"})
    connection = sqlite3.connect(path)
    with connection:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.executescript(V1_SCHEMA)
        connection.execute(
            "INSERT INTO records VALUES (1, 'sent', 1, 0, 's-1', 1000000000, ?, NULL)", (SENT,)
        )
        for number, made_update in enumerate(made, start=2):
            connection.execute(
                "INSERT INTO records VALUES (?, 'update', 1, ?, 's-1', 2000000000, ?, NULL)",
                (number, made_update.update_sequence, made_update.envelope),
            )
        connection.execute(
            "INSERT INTO records VALUES (4, 'permission', 1, 0, 's-1', 3000000000, '{}', ?)",
            (fields,),
        )
    connection.close()
    return made


def test_a_version_1_journal_is_read_but_not_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    made = v1_journal(path)
    found = read_all(path)
    assert [r.kind for r in found] == ["sent", "update", "update", "permission"]
    assert [r.envelope for r in found[1:3]] == [u.envelope for u in made]
    assert found[0].envelope == SENT and found[0].time == 1.0
    assert found[3].fields["reason"] == "rule"
    assert journal.journal_kind(path) == "sqlite"
    with pytest.raises(
        JournalError, match=r"old.sqlite: a version 1 SQLite journal .* new journal"
    ):
        journal.SqliteJournal(path)
    assert len(read_all(path)) == 4  # untouched


def test_close_leaves_every_record_in_the_database_file(tmp_path: Path, writer: str) -> None:
    # close() closes the writer's connection (the last one checkpoints the WAL into the file
    # and removes it) even while the journal object lives on: a closed journal is one file.
    path = tmp_path / "j.sqlite"
    j = make("sqlite", path)
    for sequence in range(1, 3001):
        j.on_update(update(sequence))
    j.close()
    assert not Path(f"{path}-wal").exists()
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(path.read_bytes())  # the file alone
    assert [r.update_sequence for r in read_all(copy)] == list(range(1, 3001))
    del j


def test_a_batch_is_stored_packed_and_damage_to_the_packing_names_the_record(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.sqlite"
    with make("sqlite", path) as j:
        for sequence in range(1, 2001):
            j.on_update(update(sequence))
    connection = sqlite3.connect(path)
    try:
        meta = dict(connection.execute("SELECT key, value FROM journal_meta").fetchall())
        stored = [row[0] for row in connection.execute("SELECT records FROM batches")]
    finally:
        connection.close()
    assert meta["version"] == "3"
    plain = sum(len(_core.unpack_records(packed)) for packed in stored)
    assert sum(len(packed) for packed in stored) * 5 < plain  # made-up updates: alike
    # A packed batch cut short, or with a wrong length, is not one whole batch.
    damage_rows(path, lambda packed: packed[:-2], packed=False)
    with pytest.raises(JournalError, match=f"^{path}: record 1: its batch's records are corr"):
        read_all(path)
    with pytest.raises(JournalError, match=r"record .*: its batch's records are corrupted"):
        journal.SqliteJournal(path)  # the writer reads the last batch too
    with pytest.raises(ValueError, match="shorter than its length"):
        _core.unpack_records(b"\x01")


def test_a_version_2_journal_is_read_and_appended_to_plain(tmp_path: Path, writer: str) -> None:
    # What the builds before packing wrote: version 2, the lines plain (same schema).
    path = tmp_path / "v2.sqlite"
    with make("sqlite", path) as j:
        for sequence in range(1, 4):
            j.on_update(update(sequence))
    connection = sqlite3.connect(path)
    with connection:
        connection.execute("UPDATE journal_meta SET value = '2' WHERE key = 'version'")
        for first, packed in connection.execute("SELECT first_record, records FROM batches"):
            connection.execute(
                "UPDATE batches SET records = ? WHERE first_record = ?",
                (_core.unpack_records(packed), first),
            )
    connection.close()
    assert [r.update_sequence for r in read_all(path)] == [1, 2, 3]
    with make("sqlite", path) as j:
        assert j.last_record == 3
        for sequence in range(4, 7):
            j.on_update(update(sequence))
    found = rows(path, packed=False)
    assert [line["s"] for row in found for line in lines_without_time(row[6])] == list(range(1, 7))
    assert [r.update_sequence for r in read_all(path)] == list(range(1, 7))
