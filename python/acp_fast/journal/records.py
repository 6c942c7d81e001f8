"""What a journal holds: record kinds, `JournalRecord`, the formats' constants and errors."""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from .._errors import AcpError
from .._types import PermissionOption, PermissionRequest

Fsync = Literal["every", "batch", "never"]
FSYNC_MODES: tuple[Fsync, ...] = ("every", "batch", "never")

#: The first line of every JSONL journal, byte for byte.
JSONL_HEADER = b'{"format":"acp-fast-journal","version":1}\n'
SQLITE_MAGIC = b"SQLite format 3\x00"
FORMAT_NAME = "acp-fast-journal"
FORMAT_VERSION = 1
#: SQLite journals: 3 stores a batch of records a row, the JSONL journal's lines LZ4-packed
#: (`_core.unpack_records`); version 2 (the lines plain) is still read and appended to (plain);
#: version 1 (a record a row) is still read, not appended to.
SQLITE_FORMAT_VERSION = 3
#: The earlier batch format (the lines plain), still appended to as it is.
SQLITE_PLAIN_VERSION = 2

#: A batch of `_SqliteFallback` ends when this many characters of envelopes are pending ...
#: (the core's writers: 1 MiB of records, or 50 ms)
BATCH_CHARS = 1 << 20
#: ... or when this many nanoseconds passed since the last write (checked as records arrive).
BATCH_NS = 50_000_000

_ENVELOPE_KEY = ',"m":'

#: Readers refuse a record longer than this (``max_record_bytes``): a crafted journal must not
#: make them hold a multiple of the file in memory.
MAX_RECORD_BYTES = 64 << 20
#: What a SQLite batch row may hold beyond its largest record (batches end near 1 MiB).
BATCH_SLACK_BYTES = 4 << 20


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
    time: when it was recorded, seconds since the epoch (an update the client's driver
        recorded: when the host read it from the agent, the same for every line of one read).
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


def _check_fsync(fsync: Fsync) -> Fsync:
    if fsync not in FSYNC_MODES:
        raise ValueError(f"fsync must be one of {', '.join(FSYNC_MODES)}, not {fsync!r}")
    return fsync


def _missing_directory(path: str) -> JournalError:
    parent = os.path.dirname(os.path.abspath(path))
    return JournalError(path, f"cannot create the journal: no such directory {parent}")


def _not_a_journal(head: bytes) -> str:
    if head.startswith(SQLITE_MAGIC[: len(head)]) and head:
        return "a SQLite file, not a JSONL journal (open it with SqliteJournal)"
    return "not an acp-fast journal (the first line is not the journal header)"
