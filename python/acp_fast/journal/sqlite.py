"""The SQLite journal: creating and checking the database, and its writers (the core's, or
`_SqliteFallback` through `sqlite3`)."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from time import time_ns
from typing import TYPE_CHECKING

from .. import _core
from . import files
from .observer import _Journal
from .reading import SELECT_BATCHES, _check_sqlite_meta, batch_lines, last_numbers
from .records import (
    BATCH_SLACK_BYTES,
    FORMAT_NAME,
    JSONL_HEADER,
    MAX_RECORD_BYTES,
    SQLITE_FORMAT_VERSION,
    SQLITE_MAGIC,
    SQLITE_PLAIN_VERSION,
    Fsync,
    JournalError,
    _check_fsync,
    _missing_directory,
)

if TYPE_CHECKING:
    from .._core import Update

#: A batch of `_SqliteFallback` ends when this many characters of envelopes are pending ...
#: (the core's writers: 1 MiB of records, or 50 ms)
BATCH_CHARS = 1 << 20
#: ... or when this many nanoseconds passed since the last write (checked as records arrive).
BATCH_NS = 50_000_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS journal_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batches (
    first_record INTEGER PRIMARY KEY, -- the number of its first record (from 1, gap-free)
    last_record INTEGER NOT NULL,     -- the number of its last record
    first_epoch INTEGER,              -- (transport_epoch, update_sequence) of its first update,
    first_sequence INTEGER,           --   NULL when it holds none
    last_epoch INTEGER,               -- ... and of its last update
    last_sequence INTEGER,
    records BLOB NOT NULL             -- its records, one JSON object a line, as in JSONL
);
CREATE INDEX IF NOT EXISTS batches_by_update ON batches (first_epoch, first_sequence);
"""
PAGE_SIZE = 16384
_INSERT = (
    "INSERT INTO batches (first_record, last_record, first_epoch, first_sequence, last_epoch, "
    "last_sequence, records) VALUES (?, ?, ?, ?, ?, ?, ?)"
)


class SqliteJournal(_Journal):
    """A journal in a SQLite database (WAL): table ``batches``, a batch of records a row (the
    records are the JSONL journal's lines, LZ4-packed; a row says which records and updates it
    holds).
    The database is created and checked with `sqlite3`; the core's writer inserts the rows through
    the same SQLite library (`_core.SqliteWriter`), or, where the core cannot reach it,
    `sqlite3` does (`_SqliteFallback`)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        fsync: Fsync = "batch",
        *,
        observer: object | None = None,
        transport_epoch: int | None = None,
        max_record_bytes: int = MAX_RECORD_BYTES,
    ) -> None:
        super().__init__(observer, transport_epoch)
        self.path = os.fspath(path)
        self.fsync = _check_fsync(fsync)
        connection, version, real_path = _open_sqlite(self.path, create=True)
        packed = version == SQLITE_FORMAT_VERSION  # a version 2 journal goes on plain
        inner = getattr(observer, "on_update", None)
        writer: _core.SqliteWriter | _SqliteFallback | None = None
        try:
            last_record, self.last_transport_epoch = _sqlite_tail(
                self.path, connection, packed, max_record_bytes
            )
            library = _sqlite_library()
            if library is not None:
                try:
                    writer = _core.SqliteWriter(
                        library,
                        _SQLITE_VERSION,
                        real_path,
                        self.fsync,
                        last_record,
                        self.last_transport_epoch,
                        inner,
                        packed=packed,
                    )
                except LookupError:
                    writer = None  # SQLite not reachable through _sqlite3: write through it
                except RuntimeError as exc:
                    raise JournalError(self.path, f"not a usable SQLite journal: {exc}") from None
            if writer is None:
                connection.execute(
                    f"PRAGMA synchronous={'OFF' if self.fsync == 'never' else 'FULL'}"
                )
                writer = _SqliteFallback(
                    self.path,
                    connection,
                    self.fsync,
                    last_record,
                    self.last_transport_epoch,
                    inner,
                    packed,
                )
        except BaseException:
            connection.close()
            raise
        if not isinstance(writer, _SqliteFallback):
            connection.close()  # the core's writer has a connection of its own
        self._start(writer)


_SQLITE_VERSION = (
    sqlite3.sqlite_version_info[0] * 1_000_000
    + sqlite3.sqlite_version_info[1] * 1_000
    + sqlite3.sqlite_version_info[2]
)


def _sqlite_library() -> str | None:
    """The file of `sqlite3`'s extension module `_sqlite3`: the core looks SQLite's functions
    up through it, so it calls the very SQLite `sqlite3` does. None where `_sqlite3` is built
    into the interpreter."""
    import _sqlite3

    return getattr(_sqlite3, "__file__", None)


class _SqliteFallback:
    """SQLite rows written through `sqlite3`, where the core cannot reach its SQLite (the core
    must not load a second SQLite: the two would not see each other's POSIX locks). Rows
    are batched on the reader's thread, which writes a batch when it is due; the flusher
    thread writes what has waited too long. Batches are taken from the front of the list and
    written under the lock, so they reach the database whole and in order."""

    def __init__(
        self,
        path: str,
        connection: sqlite3.Connection,
        fsync: Fsync,
        last_record: int,
        last_epoch: int,
        observer: Callable[[Update], object] | None,
        packed: bool,
    ) -> None:
        self.path = path
        self.packed = packed
        self.pid = os.getpid()
        self.connection = connection
        self.every = fsync == "every"
        self.last_record = last_record
        self.last_epoch = last_epoch
        self.observer = observer
        #: (number, line, (epoch, sequence) of an update or None)
        self.pending: list[tuple[int, str, tuple[int, int] | None]] = []
        self.lock = threading.Lock()
        self.written_ns = time_ns()
        self.deadline = 0
        self.chars = 0
        self.closed = False
        self.foreign = False
        self.failed: str | None = None
        if not self.every:
            _FLUSHER.add(self)

    def update(self, update: Update) -> None:
        if self.closed:
            raise JournalError(self.path, "the journal is closed")
        now = time_ns()
        number = self.last_record = self.last_record + 1
        envelope = update.envelope
        epoch = self.last_epoch = update.transport_epoch
        sequence = update.update_sequence
        if envelope.startswith("{") and envelope.endswith("}") and "\n" not in envelope:
            tail = f',"m":{envelope}}}\n'
        else:  # as the core's writers store a made-up envelope: a JSON string
            tail = f',"x":{json.dumps(envelope)}}}\n'
        self.pending.append(
            (
                number,
                f'{{"n":{number},"k":"update","e":{epoch},"s":{sequence},"t":{now},'
                f'"i":{json.dumps(update.session_id)}{tail}',
                (epoch, sequence),
            )
        )
        self.chars += len(envelope)
        if self.every or self.chars >= BATCH_CHARS or now >= self.deadline:
            self._write()
        if self.observer is not None:
            self.observer(update)

    def other(self, kind: str, epoch: int | None, rest: bytes) -> None:
        if self.closed:
            raise JournalError(self.path, "the journal is closed")
        number = self.last_record = self.last_record + 1
        stamp = self.last_epoch if epoch is None else epoch
        head = f'{{"n":{number},"k":"{kind}","e":{stamp},"s":0,"t":{time_ns()},'
        self.pending.append((number, head + rest.decode("utf-8", "surrogatepass") + "\n", None))
        self._write()

    def _write(self) -> None:
        self.chars = 0
        self.store_pending()
        self.deadline = time_ns() + BATCH_NS

    def flush(self) -> None:
        if not self.closed:
            self._write()

    def forked(self) -> None:
        self.foreign = True

    def store_pending(self) -> None:
        if not self.pending:
            return
        if self.foreign or os.getpid() != self.pid:
            raise JournalError(self.path, f"the journal belongs to process {self.pid}")
        with self.lock:
            pending = self.pending
            count = len(pending)
            if not count:
                return
            if self.closed:
                pending.clear()
                raise JournalError(self.path, "the journal is closed")
            if self.failed is not None:
                raise JournalError(self.path, f"an earlier write failed ({self.failed})")
            batch = pending[:count]
            del pending[:count]  # records appended meanwhile stay, after these
            try:
                self._insert(batch)
            except BaseException:
                if self.failed is None:
                    pending[0:0] = batch  # not stored: they go first in the next batch
                raise
            self.written_ns = time_ns()

    def _insert(self, batch: list[tuple[int, str, tuple[int, int] | None]]) -> None:
        updates = [key for _, _, key in batch if key is not None]
        first = updates[0] if updates else (None, None)
        last = updates[-1] if updates else (None, None)
        records = "".join(line for _, line, _ in batch).encode("utf-8", "surrogatepass")
        if self.packed:
            records = _core.pack_records(records)
        row = (batch[0][0], batch[-1][0], *first, *last, records)
        try:
            self.connection.execute(_INSERT, row)  # one row: whole or absent
        except sqlite3.Error as exc:
            raise JournalError(self.path, f"cannot write the journal: {exc}") from exc

    def close(self) -> None:
        if self.closed:
            return
        _FLUSHER.remove(self)
        if self.foreign or os.getpid() != self.pid:
            # A child made by fork() inherits the pending records: only the parent writes.
            self.closed = True
            return
        try:
            if self.failed is None:
                self.store_pending()
        finally:
            with self.lock:
                self.closed = True
                self.connection.close()
        if self.failed is not None:
            raise JournalError(self.path, f"records were lost: a write failed ({self.failed})")


class _Flusher:
    """One daemon thread for every `_SqliteFallback` of the process: it writes the pending
    records of one that wrote nothing for `BATCH_NS`, so a batch never waits for the next
    record (an agent may think for minutes between two updates). It runs only while such
    journals are open."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.writers: set[_SqliteFallback] = set()
        self.running = False

    def add(self, writer: _SqliteFallback) -> None:
        with self.lock:
            self.writers.add(writer)
            if not self.running:
                self.running = True
                threading.Thread(target=self._run, name="acp-fast-journal", daemon=True).start()

    def remove(self, writer: _SqliteFallback) -> None:
        with self.lock:
            self.writers.discard(writer)

    def _run(self) -> None:
        while True:
            time.sleep(BATCH_NS / 1e9)
            with self.lock:
                if not self.writers:
                    self.running = False
                    return
                writers = list(self.writers)
            due = time_ns() - BATCH_NS
            for writer in writers:
                if writer.pending and writer.written_ns <= due:
                    try:
                        writer.store_pending()
                    except Exception:
                        pass  # the journal raises it again at its next record, or at close()


_FLUSHER = _Flusher()


def _forked() -> None:
    global _FLUSHER
    _FLUSHER = _Flusher()  # a forked child has no flusher thread and writes no parent journal


os.register_at_fork(after_in_child=_forked)


def _open_sqlite(path: str, *, create: bool) -> tuple[sqlite3.Connection, int, str]:
    """Connect to a journal, creating it when `create` and the database is new; with its
    format version and the path SQLite was given (a final symlink resolved: `files`)."""
    if not create and not os.path.exists(path):
        raise JournalError(path, "no such file")
    if create:
        path = files.resolve_for_writing(path)
        if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise _missing_directory(path)
        # Created here (O_EXCL | O_NOFOLLOW), never by SQLite through a planted name; an
        # empty database is a new journal.
        fd = files.create_new(path)
        if fd is None:
            fd = files.open_existing(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            head = os.pread(fd, len(SQLITE_MAGIC), 0)
        finally:
            os.close(fd)
        _check_sqlite_head(path, head)
        files.prepare_sqlite_files(path)
    elif os.path.exists(path):
        with open(path, "rb") as handle:
            _check_sqlite_head(path, handle.read(len(SQLITE_MAGIC)))
    try:
        connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise JournalError(path, f"cannot open: {exc}") from None
    try:
        (tables,) = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        if create and tables == 0:
            # Only a new (empty) database becomes a journal; any other must already be one.
            # One transaction, so a crash never leaves tables without the format row.
            # A batch row is overflow pages (up to 1 MiB of lines, packed to a few tens of
            # KiB): 16 KiB pages take a quarter of the WAL frames and writes of the default
            # 4 KiB (measured before packing: host CPU per update in batch/never mode 1.4-1.6
            # us against 2.0-2.4, benches/journal_bench.py), while a lone record's commit
            # (fsync "every", a decision) writes no more than one such page.
            connection.execute(f"PRAGMA page_size={PAGE_SIZE}")
            connection.execute("PRAGMA journal_mode=WAL")
            connection.executescript(
                f"BEGIN; {_SCHEMA} INSERT INTO journal_meta VALUES "
                f"('format', '{FORMAT_NAME}'), ('version', '{SQLITE_FORMAT_VERSION}'); COMMIT;"
            )
            version = SQLITE_FORMAT_VERSION
        else:
            version = _check_sqlite_meta(path, connection)
            if create and version not in (SQLITE_PLAIN_VERSION, SQLITE_FORMAT_VERSION):
                raise JournalError(
                    path,
                    f"a version {version} SQLite journal (a record a row, from an earlier "
                    "acp-fast): read() and replay read it, but new records go to a new journal",
                )
            if create:
                connection.execute("PRAGMA journal_mode=WAL")
    except sqlite3.DatabaseError as exc:
        connection.close()
        raise JournalError(path, f"not a usable SQLite journal: {exc}") from None
    except BaseException:
        connection.close()
        raise
    return connection, version, path


def _check_sqlite_head(path: str, head: bytes) -> None:
    if head and head != SQLITE_MAGIC:
        if head == JSONL_HEADER[: len(head)]:
            raise JournalError(path, "a JSONL journal, not SQLite (open it with JsonlJournal)")
        raise JournalError(path, "not an acp-fast journal (not a SQLite database)")


def _sqlite_tail(
    path: str, connection: sqlite3.Connection, packed: bool, limit: int
) -> tuple[int, int]:
    """The last record's number and epoch ((0, 0) when there is none)."""
    try:
        row = connection.execute(
            SELECT_BATCHES.replace("first_record, ", "", 1) + " ORDER BY first_record DESC LIMIT 1",
            (limit + BATCH_SLACK_BYTES,),
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        raise JournalError(path, f"not an acp-fast journal ({exc})") from None
    if row is None:
        return 0, 0
    number, stored, records = row
    records = batch_lines(path, records, number, limit, packed=packed, stored=stored)
    line = records[records.rfind(b"\n", 0, len(records) - 1) + 1 :]
    return last_numbers(path, line, number)
