"""A durable journal of every conversation: an observer that writes down, in order, every update,
every permission decision, every activity record and every line the client and the agent
exchanged, and `read()` to get them back.

Two kinds, told apart by content (never by file name):

- `JsonlJournal`: one JSON object a line after a fixed header line. A record's last key is
  ``"m"``, the exact line it records, embedded verbatim (it is JSON already), so the envelope
  comes back byte for byte and the file stays readable with ``jq``.
- `SqliteJournal`: SQLite in WAL mode, one row a batch of records (the same lines, LZ4-packed,
  with the batch's record numbers and the (epoch, sequence) of its first and last update as
  indexed columns: format version 3); created, checked and read with the standard library's
  `sqlite3`. Version 2 journals (the lines plain) are read and appended to plain; version 1
  journals (a record a row) are still read, never appended to.

Records are made by the core (`_core.JournalWriter`, `_core.SqliteWriter`) on the reader's
thread, a lock and a few copies each, and stored in batches by a thread of the writer's own
(`benches/journal_bench.py` measures what each costs against what reading an update does).
When a journal is the client's observer, the driver hands it each update in Rust (no Python
call for the journal's part); the observer it wraps is still called from Python.
The SQLite writer calls the very SQLite library `sqlite3` loaded, through a connection of its
own, with the GIL released. Never a second SQLite: two SQLite libraries in one process do not
see each other's POSIX locks, so a `sqlite3` connection to the journal closing in the same
process would delete the WAL under the writer (tried with SQLite compiled into the core:
records were lost). Where the core cannot reach that SQLite (`_sqlite3` built into the
interpreter, or its SQLite functions hidden), records are made in Python and their batches go
through `sqlite3` on the reader's thread instead, at several µs a record.

``fsync`` says when records reach the disk:

- ``"every"``: each record is written and synced before its callback returns;
- ``"batch"`` (default): updates are buffered and written in batches, each batch synced; a batch
  ends at 512 KiB or when it has waited 50 ms (the writer's thread writes it then, even when no
  record follows; should that thread still be busy when 1 MiB is pending, the reader waits
  for it to take them), and at any record that is not an update (a permission decision, a
  line sent or received), so decisions and turn boundaries are on disk at once. The syncs are a
  group commit on a thread of their own: one sync covers every batch written before it began,
  so writing never waits for the disk;
- ``"never"``: batches as ``"batch"``, handed to the OS but never synced.

A host killed with SIGKILL leaves a journal that opens cleanly and holds a gap-free prefix of
what was recorded (with ``"every"``: every record whose callback returned). A JSONL journal may
end in a torn record (a write cut short); `read()` drops it with one `TornRecordWarning` and the
next writer cuts it off. Reopening a journal appends after its last record, numbering on.

Journals are hostile input when read back: `read()` (and reopening) refuses a record longer
than ``max_record_bytes`` (default `MAX_RECORD_BYTES`, 64 MiB) with a `JournalError` naming the
option, never parses an envelope deeper than the nesting bound, and opens only regular files.
A journal in a shared directory is safe from names other users plant (see `files`): temporary
files get unpredictable names and ``O_EXCL | O_NOFOLLOW``, and a symlink or file another user
planted at the journal's path (or at a SQLite journal's ``-wal``/``-shm``) is refused.

The journal is an observer: pass it as ``observer=``, or wrap your own
(``JsonlJournal(path, observer=mine)``): every callback is forwarded to ``mine`` after it is
recorded. It is not thread-safe: use it from the thread that runs the client's calls.
"""

from __future__ import annotations

import os
from typing import Literal

from . import files
from .jsonl import JsonlJournal
from .reading import journal_kind, read
from .records import (
    FORMAT_NAME,
    FORMAT_VERSION,
    FSYNC_MODES,
    JSONL_HEADER,
    MAX_RECORD_BYTES,
    SQLITE_FORMAT_VERSION,
    SQLITE_MAGIC,
    Fsync,
    JournalError,
    JournalRecord,
    RecordKind,
    TornRecordWarning,
)
from .sqlite import SqliteJournal
from .stats import JournalStats, Turn, permission_label, summarize

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "FSYNC_MODES",
    "JSONL_HEADER",
    "MAX_RECORD_BYTES",
    "SQLITE_FORMAT_VERSION",
    "SQLITE_MAGIC",
    "SQLITE_SUFFIXES",
    "Fsync",
    "JournalError",
    "JournalRecord",
    "JournalStats",
    "JsonlJournal",
    "RecordKind",
    "SqliteJournal",
    "TornRecordWarning",
    "Turn",
    "journal_kind",
    "open_journal",
    "permission_label",
    "read",
    "summarize",
]


SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


def open_journal(
    path: str | os.PathLike[str],
    fsync: Fsync = "batch",
    *,
    kind: Literal["jsonl", "sqlite"] | None = None,
    observer: object | None = None,
    transport_epoch: int | None = None,
    max_record_bytes: int = MAX_RECORD_BYTES,
) -> JsonlJournal | SqliteJournal:
    """Open a journal for appending: an existing file keeps its kind (by content); a new one is
    SQLite when `kind` says so or its name ends in .sqlite, .sqlite3 or .db, else JSONL."""
    found = journal_kind(files.resolve_for_writing(os.fspath(path)))
    if found is not None and kind is not None and found != kind:
        raise JournalError(os.fspath(path), f"is a {found} journal, not {kind}")
    chosen = found or kind
    if chosen is None:
        chosen = "sqlite" if os.fspath(path).endswith(SQLITE_SUFFIXES) else "jsonl"
    cls = SqliteJournal if chosen == "sqlite" else JsonlJournal
    return cls(
        path,
        fsync,
        observer=observer,
        transport_epoch=transport_epoch,
        max_record_bytes=max_record_bytes,
    )


# Named where they are imported from (reprs, tracebacks), not by the file defining them.
_PUBLIC: tuple[type, ...] = (
    JournalError,
    JournalRecord,
    JournalStats,
    JsonlJournal,
    RecordKind,
    SqliteJournal,
    TornRecordWarning,
    Turn,
)
for _public in _PUBLIC:
    _public.__module__ = __name__
