"""A durable journal of every conversation: an observer that writes down, in order, every update,
every permission decision, every activity record and every line the client and the agent
exchanged, and `read()` to get them back.

Two kinds, told apart by content (never by file name):

- `JsonlJournal`: one JSON object a line after a fixed header line. A record's last key is
  ``"m"``, the exact line it records, embedded verbatim (it is JSON already), so the envelope
  comes back byte for byte and the file stays readable with ``jq``.
- `SqliteJournal`: SQLite in WAL mode, one row a record; created, checked and read with the
  standard library's `sqlite3`.

Records are made by the core (`_core.JournalWriter`, `_core.SqliteWriter`) on the reader's
thread, a lock and a few copies each, and stored in batches by a thread of the writer's own, so
an update costs the reader a small part of what reading it does (`benches/journal_bench.py`).
The SQLite writer calls the very SQLite library `sqlite3` loaded, through a connection of its
own, with the GIL released. Never a second SQLite: two SQLite libraries in one process do not
see each other's POSIX locks, so a `sqlite3` connection to the journal closing in the same
process would delete the WAL under the writer (tried with SQLite compiled into the core:
records were lost). Where the core cannot reach that SQLite (`_sqlite3` built into the
interpreter, or its SQLite functions hidden), rows go through `sqlite3` on the reader's thread
instead, at several µs each.

``fsync`` says when records reach the disk:

- ``"every"``: each record is written and synced before its callback returns;
- ``"batch"`` (default): updates are buffered and written in batches, each batch synced; a batch
  ends at 512 KiB or when it has waited 50 ms (the writer's thread writes it then, even when no
  record follows; should that thread still be busy when 1 MiB is pending, the reader writes
  it), and at any record that is not an update (a permission decision, a line sent or
  received), so decisions and turn boundaries are on disk at once;
- ``"never"``: batches as ``"batch"``, handed to the OS but never synced.

A host killed with SIGKILL leaves a journal that opens cleanly and holds a gap-free prefix of
what was recorded (with ``"every"``: every record whose callback returned). A JSONL journal may
end in a torn record (a write cut short); `read()` drops it with one `TornRecordWarning` and the
next writer cuts it off. Reopening a journal appends after its last record, numbering on.

The journal is an observer: pass it as ``observer=``, or wrap your own
(``JsonlJournal(path, observer=mine)``): every callback is forwarded to ``mine`` after it is
recorded. It is not thread-safe: use it from the thread that runs the client's calls.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import sqlite3
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from time import time_ns
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import quote

from . import _core
from ._errors import AcpError
from ._types import PermissionOption, PermissionRequest

if TYPE_CHECKING:
    from ._core import Update

__all__ = [
    "FSYNC_MODES",
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
    "read",
    "summarize",
]

Fsync = Literal["every", "batch", "never"]
FSYNC_MODES: tuple[Fsync, ...] = ("every", "batch", "never")

#: The first line of every JSONL journal, byte for byte.
JSONL_HEADER = b'{"format":"acp-fast-journal","version":1}\n'
SQLITE_MAGIC = b"SQLite format 3\x00"
FORMAT_NAME = "acp-fast-journal"
FORMAT_VERSION = 1

#: A batch of `_SqliteFallback` ends when this many characters of envelopes are pending ...
#: (the core's writers: 1 MiB of records, or 50 ms)
BATCH_CHARS = 1 << 20
#: ... or when this many nanoseconds passed since the last write (checked as records arrive).
BATCH_NS = 50_000_000

_ENVELOPE_KEY = ',"m":'


class RecordKind(enum.StrEnum):
    """What a journal record is; values are what the journal stores."""

    SENT = "sent"  # a line the client wrote to the agent
    UPDATE = "update"  # a session/update
    PERMISSION = "permission"  # a committed permission decision (the agent's request line)
    ACTIVITY = "activity"  # an fs/* or terminal/* request served by the host
    RECEIVED = "received"  # any other line the agent sent


_KINDS = frozenset(kind.value for kind in RecordKind)


class JournalError(AcpError):
    """A journal cannot be opened, written or read. The message names the file and, where one
    is at fault, the record number (from 1, in writing order)."""

    def __init__(self, path: str, what: str, record: int | None = None) -> None:
        where = f"{path}: record {record}: " if record is not None else f"{path}: "
        super().__init__(where + what)
        self.path = path
        self.record = record


class TornRecordWarning(UserWarning):
    """A JSONL journal ends in a record cut short, what a crash leaves; it was dropped."""


@dataclass(frozen=True)
class JournalRecord:
    """One record of a journal, as `read()` yields it.

    number: the record's place in the journal, from 1, gap-free.
    kind: see `RecordKind`.
    transport_epoch: the client's epoch (updates carry their own; other records the epoch of
        the latest update, or the journal's ``transport_epoch`` when one was given).
    update_sequence: the update's number; 0 for other kinds.
    session_id: the update's or request's session ("" when the line names none).
    time: when it was recorded, seconds since the epoch.
    envelope: the exact line ("" for activity records).
    fields: for ``permission`` the committed `PermissionRequest`'s fields (options as a list of
        dicts), for ``activity`` the `ClientActivity`'s fields; empty otherwise.
    """

    number: int
    kind: RecordKind
    transport_epoch: int
    update_sequence: int
    session_id: str
    time: float
    envelope: str
    fields: Mapping[str, Any] = dataclasses.field(default_factory=lambda: MappingProxyType({}))

    def permission(self) -> PermissionRequest:
        """The committed permission record, rebuilt (fields this version does not know are left
        out; fields the journal lacks take their defaults, or "")."""
        if self.kind != RecordKind.PERMISSION:
            raise ValueError(f"record {self.number} is a {self.kind.value} record")
        values = dict(self.fields)
        values["envelope"] = self.envelope
        values["options"] = tuple(
            PermissionOption(
                str(o.get("option_id", "")), str(o.get("name", "")), str(o.get("kind", ""))
            )
            for o in values.get("options") or ()
            if isinstance(o, dict)
        )
        kwargs: dict[str, Any] = {}
        for field in dataclasses.fields(PermissionRequest):
            if field.name in values:
                kwargs[field.name] = values[field.name]
            elif field.default is dataclasses.MISSING:
                kwargs[field.name] = ""
        return PermissionRequest(**kwargs)


# --- writing --------------------------------------------------------------------------------


def _record_fields(record: object) -> dict[str, Any]:
    """A permission or activity record as plain JSON values (envelope left out: it is stored
    verbatim). Any dataclass works, so fields the core adds later are kept."""
    out: dict[str, Any] = {}
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        names = [f.name for f in dataclasses.fields(record)]
    else:
        names = [n for n in vars(record) if not n.startswith("_")]
    for name in names:
        if name == "envelope":
            continue
        value = getattr(record, name)
        if name == "options":
            value = [
                {"option_id": o.option_id, "name": o.name, "kind": o.kind} for o in value or ()
            ]
        elif isinstance(value, enum.Enum):
            value = value.value
        elif not isinstance(value, str | int | float | bool | type(None) | list | dict):
            value = str(value)
        out[name] = value
    return out


def _line_session(message: Any) -> str:
    """The session a JSON-RPC message names: params.sessionId, else result.sessionId."""
    if isinstance(message, dict):
        for key in ("params", "result"):
            inner = message.get(key)
            if isinstance(inner, dict):
                session = inner.get("sessionId")
                if isinstance(session, str):
                    return session
    return ""


def _check_fsync(fsync: Fsync) -> Fsync:
    if fsync not in FSYNC_MODES:
        raise ValueError(f"fsync must be one of {', '.join(FSYNC_MODES)}, not {fsync!r}")
    return fsync


def _missing_directory(path: str) -> JournalError:
    parent = os.path.dirname(os.path.abspath(path))
    return JournalError(path, f"cannot create the journal: no such directory {parent}")


class _Writer(Protocol):
    """What a journal's writer does (`_core.JournalWriter`, `_core.SqliteWriter`, or
    `_SqliteFallback`): make records, store them in batches, flush, close."""

    @property
    def last_record(self) -> int: ...
    def update(self, update: Update) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def forked(self) -> None: ...


class _Journal:
    """The observer plumbing both kinds share; the writer (`_writer`) makes and stores the
    records."""

    #: Set per instance: the writer's `update`, which records the update and then calls the
    #: wrapped observer's `on_update`. `on_permission` is set only when the wrapped observer
    #: has one, so the client sees no answer hook otherwise.
    on_update: Callable[[Update], None]
    on_permission: Callable[[PermissionRequest], Any]

    path: str
    fsync: Fsync
    #: The epoch of the last record found when the journal was opened (0: it was empty).
    last_transport_epoch: int
    _writer: _Writer

    def __init__(self, observer: object | None, transport_epoch: int | None) -> None:
        self._observer = observer
        #: Stamped on every record that is not an update (settable, e.g. once the caller has
        #: chosen the client's epoch from `last_transport_epoch`). None: the latest update's
        #: epoch, or before any update the last one found when the journal was opened.
        self.transport_epoch = transport_epoch
        inner_permission = getattr(observer, "on_permission", None)
        if inner_permission is not None:
            self.on_permission = inner_permission

    def _start(self, writer: _Writer) -> None:
        self._writer = writer
        _WRITERS.add(writer)
        # The writer, not the journal: a dropped journal still stores its pending records.
        self._finalizer = weakref.finalize(self, writer.close)
        self.on_update = writer.update

    @property
    def last_record(self) -> int:
        """The number of the last record written (records are numbered from 1)."""
        return self._writer.last_record

    def _other(
        self,
        kind: RecordKind,
        session_id: str,
        envelope: str,
        fields: dict[str, Any] | None,
        is_json: bool = True,
    ) -> None:
        """Store a record that is not an update, and write it out at once. `is_json`: the
        envelope is one JSON value (stored verbatim) rather than any text."""
        raise NotImplementedError

    def on_permission_commit(self, request: PermissionRequest) -> None:
        self._other(
            RecordKind.PERMISSION, request.session_id, request.envelope, _record_fields(request)
        )
        inner = getattr(self._observer, "on_permission_commit", None)
        if inner is not None:
            inner(request)

    def on_activity(self, activity: Any) -> None:
        session = str(getattr(activity, "session_id", "") or "")
        self._other(RecordKind.ACTIVITY, session, "", _record_fields(activity), is_json=False)
        inner = getattr(self._observer, "on_activity", None)
        if inner is not None:
            inner(activity)

    def on_sent(self, line: str) -> None:
        self._wire(RecordKind.SENT, line)
        inner = getattr(self._observer, "on_sent", None)
        if inner is not None:
            inner(line)

    def on_received(self, line: str) -> None:
        self._wire(RecordKind.RECEIVED, line)
        inner = getattr(self._observer, "on_received", None)
        if inner is not None:
            inner(line)

    def _wire(self, kind: RecordKind, line: str) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            self._other(kind, "", line, None, is_json=False)
            return
        self._other(kind, _line_session(message), line, None)

    def flush(self) -> None:
        """Store (and, unless fsync is "never", sync) every pending record now."""
        self._writer.flush()

    def close(self) -> None:
        """Store the pending records and close the journal. Idempotent."""
        self._finalizer()

    def __enter__(self) -> _Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Every live writer, told in a child made by fork() that its records are the parent's.
_WRITERS: weakref.WeakSet[_Writer] = weakref.WeakSet()


def _forked() -> None:
    global _FLUSHER
    _FLUSHER = _Flusher()  # a forked child has no flusher thread and writes no parent journal
    for writer in list(_WRITERS):
        writer.forked()


class JsonlJournal(_Journal):
    """A journal in one JSONL file: a header line, then one record a line (see the module)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        fsync: Fsync = "batch",
        *,
        observer: object | None = None,
        transport_epoch: int | None = None,
    ) -> None:
        super().__init__(observer, transport_epoch)
        self.path = os.fspath(path)
        self.fsync = _check_fsync(fsync)
        fd = _open_jsonl(self.path, self.fsync != "never")
        try:
            last_record, self.last_transport_epoch = _jsonl_tail(self.path, fd)
            writer = _core.JournalWriter(
                self.path,
                fd,
                self.fsync,
                os.fstat(fd).st_size,
                last_record,
                self.last_transport_epoch,
                getattr(observer, "on_update", None),
            )
        finally:
            os.close(fd)  # the writer keeps a duplicate
        self._jsonl = writer
        self._start(writer)

    def _other(
        self,
        kind: RecordKind,
        session_id: str,
        envelope: str,
        fields: dict[str, Any] | None,
        is_json: bool = True,
    ) -> None:
        rest = f'"i":{json.dumps(session_id)}'
        if fields is not None:
            rest += ',"p":' + json.dumps(fields, separators=(",", ":"))
        if is_json and envelope and "\n" not in envelope:
            rest += f',"m":{envelope}}}'
        else:  # not JSON (or empty): kept as a string instead
            rest += f',"x":{json.dumps(envelope)}}}'
        self._jsonl.other(kind.value, self.transport_epoch, rest.encode("utf-8", "surrogatepass"))


def _open_jsonl(path: str, sync: bool) -> int:
    """Open an existing JSONL journal for appending, or create one atomically: the header is
    written to a temporary file that is then linked into place, so `path` never exists without
    its whole header."""
    flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise JournalError(path, f"cannot open the journal: {exc.strerror}") from None
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise _missing_directory(path)
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, JSONL_HEADER)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # someone else created it meanwhile: use theirs
        finally:
            os.unlink(temporary)
        if sync:
            dir_fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        return os.open(path, flags)
    except OSError as exc:
        raise JournalError(path, f"cannot create the journal: {exc.strerror}") from None


def _jsonl_tail(path: str, fd: int) -> tuple[int, int]:
    """Check the header, cut off a torn final record (warning once) and return the last
    record's number and epoch ((0, 0) when there is none)."""
    size = os.fstat(fd).st_size
    head = os.pread(fd, len(JSONL_HEADER), 0)
    if head != JSONL_HEADER:
        raise JournalError(path, _not_a_journal(head))
    end = size
    block = 1 << 16
    # Find the last newline; everything after it is a torn record.
    tail = b""
    position = size
    while True:
        start = max(len(JSONL_HEADER) - 1, position - block)
        tail = os.pread(fd, position - start, start) + tail
        position = start
        cut = tail.rfind(b"\n")
        if cut >= 0:
            end = position + cut + 1
            break
        if position <= len(JSONL_HEADER) - 1:
            end = len(JSONL_HEADER)
            break
    if end < size:
        warnings.warn(
            f"{path}: dropped a torn final record ({size - end} bytes), what a crash leaves",
            TornRecordWarning,
            stacklevel=4,
        )
        os.ftruncate(fd, end)
    if end == len(JSONL_HEADER):
        return 0, 0
    # The last complete line ends at `end`; find where it starts.
    position = end - 1
    chunk = b""
    while True:
        start = max(0, position - block)
        chunk = os.pread(fd, position - start, start) + chunk
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            line = chunk[newline + 1 :]
            break
        position = start
    try:
        record = json.loads(line)
        return int(record["n"]), int(record["e"])
    except (ValueError, KeyError, TypeError):
        number = _count_lines(fd, end) - 1
        raise JournalError(path, "the last record is corrupted", number) from None


def _count_lines(fd: int, end: int) -> int:
    count = 0
    position = 0
    while position < end:
        data = os.pread(fd, min(1 << 20, end - position), position)
        if not data:
            break
        count += data.count(b"\n")
        position += len(data)
    return count


def _not_a_journal(head: bytes) -> str:
    if head.startswith(SQLITE_MAGIC[: len(head)]) and head:
        return "a SQLite file, not a JSONL journal (open it with SqliteJournal)"
    return "not an acp-fast journal (the first line is not the journal header)"


# --- SQLite ---------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS journal_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    n INTEGER PRIMARY KEY,            -- record number, from 1, gap-free
    kind TEXT NOT NULL,               -- sent, update, permission, activity, received
    transport_epoch INTEGER NOT NULL,
    update_sequence INTEGER NOT NULL, -- 0 unless kind = 'update'
    session_id TEXT NOT NULL,
    time_ns INTEGER NOT NULL,         -- nanoseconds since the epoch
    envelope TEXT NOT NULL,           -- the exact line
    fields TEXT                       -- JSON: permission / activity record fields, else NULL
);
"""
_INSERT = "INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
#: An update's row: its constant columns are in the statement, since binding a parameter is
#: most of what a row costs in `sqlite3` (8 parameters: about 3 µs a row, 6: about 2 µs).
_INSERT_UPDATE = "INSERT INTO records VALUES (?, 'update', ?, ?, ?, ?, ?, NULL)"


class SqliteJournal(_Journal):
    """A journal in a SQLite database (WAL), one row a record in table ``records``. The
    database is created and checked with `sqlite3`; the core's writer inserts the rows through
    the same SQLite library (`_core.SqliteWriter`), or, where the core cannot reach it,
    `sqlite3` does (`_SqliteFallback`)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        fsync: Fsync = "batch",
        *,
        observer: object | None = None,
        transport_epoch: int | None = None,
    ) -> None:
        super().__init__(observer, transport_epoch)
        self.path = os.fspath(path)
        self.fsync = _check_fsync(fsync)
        connection = _open_sqlite(self.path, create=True)
        inner = getattr(observer, "on_update", None)
        writer: _core.SqliteWriter | _SqliteFallback | None = None
        try:
            last_record, self.last_transport_epoch = _sqlite_tail(self.path, connection)
            library = _sqlite_library()
            if library is not None:
                try:
                    writer = _core.SqliteWriter(
                        library,
                        _SQLITE_VERSION,
                        self.path,
                        self.fsync,
                        last_record,
                        self.last_transport_epoch,
                        inner,
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
                    self.path, connection, self.fsync, last_record, self.last_transport_epoch, inner
                )
        except BaseException:
            connection.close()
            raise
        if not isinstance(writer, _SqliteFallback):
            connection.close()  # the core's writer has a connection of its own
        self._sqlite = writer
        self._start(writer)

    def _other(
        self,
        kind: RecordKind,
        session_id: str,
        envelope: str,
        fields: dict[str, Any] | None,
        is_json: bool = True,
    ) -> None:
        encoded = None if fields is None else json.dumps(fields, separators=(",", ":"))
        self._sqlite.other(kind.value, self.transport_epoch, session_id, envelope, encoded)


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
    ) -> None:
        self.path = path
        self.pid = os.getpid()
        self.connection = connection
        self.every = fsync == "every"
        self.last_record = last_record
        self.last_epoch = last_epoch
        self.observer = observer
        self.pending: list[tuple[Any, ...]] = []
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
        self.pending.append(
            (number, epoch, update.update_sequence, update.session_id, now, envelope)
        )
        self.chars += len(envelope)
        if self.every or self.chars >= BATCH_CHARS or now >= self.deadline:
            self._write()
        if self.observer is not None:
            self.observer(update)

    def other(
        self, kind: str, epoch: int | None, session_id: str, envelope: str, fields: str | None
    ) -> None:
        if self.closed:
            raise JournalError(self.path, "the journal is closed")
        number = self.last_record = self.last_record + 1
        stamp = self.last_epoch if epoch is None else epoch
        self.pending.append((number, kind, stamp, 0, session_id, time_ns(), envelope, fields))
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

    def _insert(self, batch: list[tuple[Any, ...]]) -> None:
        connection = self.connection
        try:
            connection.execute("BEGIN")
            try:
                # Runs of update rows (6 values) and of other rows (8), in order.
                start = 0
                while start < len(batch):
                    width = len(batch[start])
                    end = start + 1
                    while end < len(batch) and len(batch[end]) == width:
                        end += 1
                    statement = _INSERT_UPDATE if width == 6 else _INSERT
                    connection.executemany(statement, batch[start:end])
                    start = end
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
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
os.register_at_fork(after_in_child=_forked)


def _open_sqlite(path: str, *, create: bool) -> sqlite3.Connection:
    """Connect to a journal, creating it when `create` and the database is new."""
    if not create and not os.path.exists(path):
        raise JournalError(path, "no such file")
    if create and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise _missing_directory(path)
    if os.path.exists(path):
        with open(path, "rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
        if head and head != SQLITE_MAGIC:
            if head == JSONL_HEADER[: len(head)]:
                raise JournalError(path, "a JSONL journal, not SQLite (open it with JsonlJournal)")
            raise JournalError(path, "not an acp-fast journal (not a SQLite database)")
    try:
        connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise JournalError(path, f"cannot open: {exc}") from None
    try:
        (tables,) = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        if create and tables == 0:
            # Only a new (empty) database becomes a journal; any other must already be one.
            # One transaction, so a crash never leaves tables without the format row.
            connection.execute("PRAGMA journal_mode=WAL")
            connection.executescript(
                f"BEGIN; {_SCHEMA} INSERT INTO journal_meta VALUES "
                f"('format', '{FORMAT_NAME}'), ('version', '{FORMAT_VERSION}'); COMMIT;"
            )
        else:
            _check_sqlite_meta(path, connection)
            if create:
                connection.execute("PRAGMA journal_mode=WAL")
    except sqlite3.DatabaseError as exc:
        connection.close()
        raise JournalError(path, f"not a usable SQLite journal: {exc}") from None
    except BaseException:
        connection.close()
        raise
    return connection


def _check_sqlite_meta(path: str, connection: sqlite3.Connection) -> None:
    try:
        rows = dict(connection.execute("SELECT key, value FROM journal_meta").fetchall())
    except sqlite3.DatabaseError:
        raise JournalError(path, "not an acp-fast journal (no journal_meta table)") from None
    if rows.get("format") != FORMAT_NAME:
        raise JournalError(path, "not an acp-fast journal (journal_meta names another format)")
    if rows.get("version") != str(FORMAT_VERSION):
        raise JournalError(path, f"journal version {rows.get('version')} is not supported")


def _sqlite_tail(path: str, connection: sqlite3.Connection) -> tuple[int, int]:
    _check_sqlite_meta(path, connection)
    try:
        row = connection.execute(
            "SELECT n, transport_epoch FROM records ORDER BY n DESC LIMIT 1"
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        raise JournalError(path, f"not an acp-fast journal ({exc})") from None
    if row is None:
        return 0, 0
    return int(row[0]), int(row[1])


# --- choosing a kind ------------------------------------------------------------------------


def journal_kind(path: str | os.PathLike[str]) -> Literal["jsonl", "sqlite"] | None:
    """The kind of an existing journal by its first bytes; None for a missing or empty file.
    Raises `JournalError` for a file that is neither."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as handle:
            head = handle.read(len(JSONL_HEADER))
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise JournalError(name, "is a directory") from None
    except OSError as exc:
        raise JournalError(name, f"cannot read: {exc.strerror}") from None
    if not head:
        return None
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    if head == JSONL_HEADER:
        return "jsonl"
    raise JournalError(name, _not_a_journal(head))


SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


def open_journal(
    path: str | os.PathLike[str],
    fsync: Fsync = "batch",
    *,
    kind: Literal["jsonl", "sqlite"] | None = None,
    observer: object | None = None,
    transport_epoch: int | None = None,
) -> JsonlJournal | SqliteJournal:
    """Open a journal for appending: an existing file keeps its kind (by content); a new one is
    SQLite when `kind` says so or its name ends in .sqlite, .sqlite3 or .db, else JSONL."""
    found = journal_kind(path)
    if found is not None and kind is not None and found != kind:
        raise JournalError(os.fspath(path), f"is a {found} journal, not {kind}")
    chosen = found or kind
    if chosen is None:
        chosen = "sqlite" if os.fspath(path).endswith(SQLITE_SUFFIXES) else "jsonl"
    cls = SqliteJournal if chosen == "sqlite" else JsonlJournal
    return cls(path, fsync, observer=observer, transport_epoch=transport_epoch)


# --- reading --------------------------------------------------------------------------------


def read(path: str | os.PathLike[str]) -> Iterator[JournalRecord]:
    """Yield the records of a journal of either kind, in order. A torn final record (JSONL) is
    dropped with one `TornRecordWarning`; anything else wrong raises `JournalError` naming the
    file and the record number."""
    name = os.fspath(path)
    kind = journal_kind(name)
    if kind is None:
        if not os.path.exists(name):
            raise JournalError(name, "no such file")
        raise JournalError(name, "empty file, not a journal")
    if kind == "sqlite":
        yield from _read_sqlite(name)
    else:
        yield from _read_jsonl(name)


_NO_FIELDS: Mapping[str, Any] = MappingProxyType({})


def _fields(path: str, number: int, value: Any) -> Mapping[str, Any]:
    if value is None:
        return _NO_FIELDS
    if not isinstance(value, dict):
        raise JournalError(path, "its fields are not a JSON object", number)
    return MappingProxyType(value)


_decode = json.JSONDecoder().decode
_KIND_OF = {kind.value: kind for kind in RecordKind}


def _read_jsonl(path: str) -> Iterator[JournalRecord]:
    expected = 1
    with open(path, "rb") as handle:
        handle.readline()  # the header, checked by journal_kind
        for raw in handle:
            if not raw.endswith(b"\n"):
                warnings.warn(
                    f"{path}: dropped a torn final record (record {expected}, {len(raw)} "
                    "bytes), what a crash leaves",
                    TornRecordWarning,
                    stacklevel=3,
                )
                return
            try:
                text = raw.decode("utf-8", "surrogatepass")
                value = _decode(text)
            except ValueError as exc:
                raise JournalError(path, f"not valid JSON ({exc})", expected) from None
            if not isinstance(value, dict):
                raise JournalError(path, "not a JSON object", expected)
            try:
                number = value["n"]
                kind = value["k"]
                epoch = value["e"]
                sequence = value["s"]
                stamp = value["t"]
                session = value["i"]
            except KeyError as exc:
                raise JournalError(path, f"lacks the key {exc}", expected) from None
            if number != expected:
                raise JournalError(
                    path, f"numbered {number!r}: a record is missing or out of order", expected
                )
            record_kind = _KIND_OF.get(kind) if isinstance(kind, str) else None
            if record_kind is None:
                raise JournalError(path, f"unknown kind {kind!r}", expected)
            if not (
                type(epoch) is int
                and type(sequence) is int
                and type(stamp) is int
                and isinstance(session, str)
            ):
                raise JournalError(path, "a field has the wrong type", expected)
            cut = text.find(_ENVELOPE_KEY)
            if cut >= 0 and "m" in value:
                # The exact text, not a re-encoding of the parsed value: what lies between the
                # first `,"m":` (the header before it holds no such text) and the closing brace.
                if text.endswith("}\n"):
                    envelope = text[cut + len(_ENVELOPE_KEY) : -2]
                else:
                    envelope = text.rstrip(" \t\r\n")[cut + len(_ENVELOPE_KEY) : -1]
            elif isinstance(value.get("x"), str):
                envelope = value["x"]
            else:
                raise JournalError(path, "has no envelope", expected)
            yield JournalRecord(
                number,
                record_kind,
                epoch,
                sequence,
                session,
                stamp / 1e9,
                envelope,
                _fields(path, expected, value.get("p")),
            )
            expected += 1


def _read_sqlite(path: str) -> Iterator[JournalRecord]:
    try:
        connection = sqlite3.connect(f"file:{_uri_path(path)}?mode=rw", uri=True)
    except sqlite3.DatabaseError as exc:
        raise JournalError(path, f"cannot open: {exc}") from None
    try:
        _check_sqlite_meta(path, connection)
        expected = 1
        try:
            cursor = connection.execute(
                "SELECT n, kind, transport_epoch, update_sequence, session_id, time_ns, "
                "envelope, fields FROM records ORDER BY n"
            )
            for row in cursor:
                number, kind, epoch, sequence, session, stamp, envelope, fields = row
                if number != expected:
                    raise JournalError(path, f"numbered {number!r}: a record is missing", expected)
                if kind not in _KINDS:
                    raise JournalError(path, f"unknown kind {kind!r}", expected)
                if not (
                    type(epoch) is int
                    and type(sequence) is int
                    and type(stamp) is int
                    and isinstance(session, str)
                    and isinstance(envelope, str)
                ):
                    raise JournalError(path, "a field has the wrong type", expected)
                try:
                    parsed = None if fields is None else json.loads(fields)
                except ValueError:
                    raise JournalError(path, "its fields are not valid JSON", expected) from None
                yield JournalRecord(
                    number,
                    RecordKind(kind),
                    epoch,
                    sequence,
                    session,
                    stamp / 1e9,
                    envelope,
                    _fields(path, expected, parsed),
                )
                expected += 1
        except sqlite3.DatabaseError as exc:
            raise JournalError(path, f"unreadable ({exc})", expected) from None
    finally:
        connection.close()


def _uri_path(path: str) -> str:
    return quote(os.path.abspath(path))


# --- summaries (acp-fast journal stats) -----------------------------------------------------


@dataclass
class Turn:
    """One `session/prompt` call seen in the journal's wire lines."""

    session_id: str
    started: float
    ended: float | None = None
    stop_reason: str | None = None  # None: no answer recorded; "error" for an error answer
    updates: int = 0


@dataclass
class JournalStats:
    """What `summarize` found: counts, bytes and durations of a journal."""

    path: str
    kind: str
    file_bytes: int
    records: int = 0
    records_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)
    updates_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)
    update_bytes_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)
    envelope_bytes: int = 0
    permissions: dict[str, int] = dataclasses.field(default_factory=dict)
    turns: list[Turn] = dataclasses.field(default_factory=list)
    epochs: set[int] = dataclasses.field(default_factory=set)
    sessions: set[str] = dataclasses.field(default_factory=set)
    first_time: float | None = None
    last_time: float | None = None
    torn: bool = False

    @property
    def updates(self) -> int:
        return sum(self.updates_by_kind.values())


def _update_kind(envelope: str) -> str:
    # Fast path: the name right after `"sessionUpdate":"` (a plain identifier in practice);
    # anything unusual takes a full parse.
    at = envelope.find('"sessionUpdate":"')
    if at >= 0:
        start = at + 17
        end = envelope.find('"', start)
        name = envelope[start:end]
        if end > start and "\\" not in name and envelope.count('"sessionUpdate"') == 1:
            return name
    try:
        update = json.loads(envelope)["params"]["update"]["sessionUpdate"]
    except (ValueError, KeyError, TypeError):
        return "unknown"
    return update if isinstance(update, str) else "unknown"


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def permission_label(fields: Mapping[str, Any]) -> str:
    """A permission decision in a few words: outcome, option, and the decision's reason."""
    label = f"{fields.get('outcome', '')} {fields.get('option_id', '')}".strip()
    reason = fields.get("reason")
    if reason:
        label += f" ({reason})"
    return label or "(none)"


def summarize(path: str | os.PathLike[str]) -> JournalStats:
    """Read a whole journal and count it (a torn final record is noted, not warned about)."""
    name = os.fspath(path)
    stats = JournalStats(name, journal_kind(name) or "", 0)
    stats.file_bytes = sum(os.path.getsize(p) for p in (name, name + "-wal") if os.path.exists(p))
    open_turns: dict[Any, Turn] = {}
    current: Turn | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TornRecordWarning)
        for record in read(name):
            stats.records += 1
            kind = record.kind.value
            stats.records_by_kind[kind] = stats.records_by_kind.get(kind, 0) + 1
            size = _utf8_len(record.envelope)
            stats.envelope_bytes += size
            stats.epochs.add(record.transport_epoch)
            if record.session_id:
                stats.sessions.add(record.session_id)
            if stats.first_time is None:
                stats.first_time = record.time
            stats.last_time = record.time
            if record.kind == RecordKind.UPDATE:
                update_kind = _update_kind(record.envelope)
                stats.updates_by_kind[update_kind] = stats.updates_by_kind.get(update_kind, 0) + 1
                stats.update_bytes_by_kind[update_kind] = (
                    stats.update_bytes_by_kind.get(update_kind, 0) + size
                )
                if current is not None:
                    current.updates += 1
            elif record.kind == RecordKind.PERMISSION:
                label = permission_label(record.fields)
                stats.permissions[label] = stats.permissions.get(label, 0) + 1
            elif record.kind in (RecordKind.SENT, RecordKind.RECEIVED):
                try:
                    message = json.loads(record.envelope)
                except ValueError:
                    continue
                if not isinstance(message, dict):
                    continue
                if record.kind == RecordKind.SENT and message.get("method") == "session/prompt":
                    current = Turn(record.session_id, record.time)
                    stats.turns.append(current)
                    open_turns[json.dumps(message.get("id"))] = current
                elif record.kind == RecordKind.RECEIVED and "method" not in message:
                    turn = open_turns.pop(json.dumps(message.get("id")), None)
                    if turn is not None:
                        turn.ended = record.time
                        result = message.get("result")
                        reason = result.get("stopReason") if isinstance(result, dict) else None
                        turn.stop_reason = reason if isinstance(reason, str) else "error"
                        if turn is current:
                            current = None
    stats.torn = any(issubclass(w.category, TornRecordWarning) for w in caught)
    return stats
