"""Reading a journal of either kind: `journal_kind` (by content) and `read`."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import warnings
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, BinaryIO, Literal
from urllib.parse import quote

import msgspec

from .. import _core, _json
from . import files
from .records import (
    _ENVELOPE_KEY,
    _KINDS,
    BATCH_SLACK_BYTES,
    FORMAT_NAME,
    JSONL_HEADER,
    MAX_RECORD_BYTES,
    SQLITE_FORMAT_VERSION,
    SQLITE_MAGIC,
    SQLITE_PLAIN_VERSION,
    JournalError,
    JournalRecord,
    RecordKind,
    TornRecordWarning,
    _not_a_journal,
)


def _open_regular(name: str) -> BinaryIO | None:
    """`name` opened for reading, once (never by name twice); None when it does not exist.
    Anything but a regular file (a FIFO would block, a device never end) is refused."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JournalError(name, f"cannot read: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise JournalError(name, "is a directory")
        if not stat.S_ISREG(mode):
            raise JournalError(name, "is not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _kind_of(name: str, head: bytes) -> Literal["jsonl", "sqlite"] | None:
    if not head:
        return None
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    if head == JSONL_HEADER:
        return "jsonl"
    raise JournalError(name, _not_a_journal(head))


def journal_kind(path: str | os.PathLike[str]) -> Literal["jsonl", "sqlite"] | None:
    """The kind of an existing journal by its first bytes; None for a missing or empty file.
    Raises `JournalError` for a file that is neither."""
    name = os.fspath(path)
    handle = _open_regular(name)
    if handle is None:
        return None
    with handle:
        return _kind_of(name, handle.read(len(JSONL_HEADER)))


def read(
    path: str | os.PathLike[str], *, max_record_bytes: int = MAX_RECORD_BYTES
) -> Iterator[JournalRecord]:
    """Yield the records of a journal of either kind, in order. A torn final record (JSONL) is
    dropped with one `TornRecordWarning`; anything else wrong raises `JournalError` naming the
    file and the record number. An empty file is an empty journal.

    A record longer than `max_record_bytes` (default 64 MiB) is refused with a `JournalError`
    naming the option (a SQLite batch may hold 4 MiB more), so memory stays near that bound
    whatever the file holds."""
    name = os.fspath(path)
    _check_limit(max_record_bytes)
    handle = _open_regular(name)
    if handle is None:
        raise JournalError(name, "no such file")
    with handle:
        kind = _kind_of(name, handle.read(len(JSONL_HEADER)))
        if kind == "jsonl":
            yield from _read_jsonl(name, handle, max_record_bytes)
            return
    if kind == "sqlite":
        yield from _read_sqlite(name, max_record_bytes)


def _check_limit(max_record_bytes: int) -> None:
    if not isinstance(max_record_bytes, int) or max_record_bytes < 1:
        raise ValueError(f"max_record_bytes must be a positive int, not {max_record_bytes!r}")


def too_long(
    path: str, what: str, size: int | None, limit: int, number: int | None
) -> JournalError:
    """`size` None: read only as far as the limit."""
    length = "longer than" if size is None else f"{size} bytes, over"
    return JournalError(
        path,
        f"{what} is {length} max_record_bytes ({limit} bytes): not read (a crafted or "
        "damaged journal?); pass a larger max_record_bytes to read it",
        number,
    )


_NO_FIELDS: Mapping[str, Any] = MappingProxyType({})


def _fields(path: str, number: int, value: Any) -> Mapping[str, Any]:
    if value is None:
        return _NO_FIELDS
    if not isinstance(value, dict):
        raise JournalError(path, "its fields are not a JSON object", number)
    return MappingProxyType(value)


_decode = json.JSONDecoder().decode
_KIND_OF = {kind.value: kind for kind in RecordKind}


def _read_jsonl(path: str, handle: BinaryIO, limit: int) -> Iterator[JournalRecord]:
    """The records after the header (`handle` is just past it), each line read with a bound."""
    expected = 1
    while True:
        raw = handle.readline(limit + 1)
        if not raw:
            return
        if not raw.endswith(b"\n"):
            if len(raw) > limit:
                raise too_long(path, "the record", None, limit, expected)
            warnings.warn(
                f"{path}: dropped a torn final record (record {expected}, {len(raw)} "
                "bytes), what a crash leaves",
                TornRecordWarning,
                stacklevel=3,
            )
            return
        yield parse_line(path, raw[:-1], expected)
        del raw
        expected += 1


# The layout every writer makes: a record's header, its session, then fields and envelope.
_CANONICAL = re.compile(r'\{"n":(\d+),"k":"([a-z]+)","e":(\d+),"s":(\d+),"t":(\d+),"i":"')
_scanstring = json.decoder.scanstring  # type: ignore[attr-defined]
_raw_decode = json.JSONDecoder().raw_decode
_validate = msgspec.json.Decoder(msgspec.Raw).decode


_HEAD = re.compile(rb'\{"n":(\d+),"k":"[a-z]+","e":(\d+),')


def last_numbers(path: str, line: bytes, number: int | None) -> tuple[int, int]:
    """The number and epoch of a journal's last record, from its line (or only the line's
    first bytes: the writers put them first); `number`, when known, must match."""
    match = _HEAD.match(line)
    try:
        if match is not None:
            found, epoch = int(match.group(1)), int(match.group(2))
        else:
            record = _json.loads_lenient(line.decode("utf-8", "surrogatepass"))
            found, epoch = int(record["n"]), int(record["e"])
        if number is not None and found != number:
            raise ValueError(found)
        return found, epoch
    except (ValueError, KeyError, TypeError):
        raise JournalError(path, "the last record is corrupted", number) from None


def parse_line(path: str, raw: bytes, expected: int) -> JournalRecord:
    """One record's line (without its newline), which must be record number `expected`."""
    try:
        text = raw.decode("utf-8", "surrogatepass")
    except ValueError as exc:
        raise JournalError(path, f"not valid UTF-8 ({exc})", expected) from None
    record = _parse_canonical(path, text, expected)
    if record is not None:
        return record
    return _parse_any(path, text, expected)


def _parse_canonical(path: str, text: str, expected: int) -> JournalRecord | None:
    """A record in the writers' own layout, read without parsing its envelope (which is the
    agent's JSON, as deep and as large as the agent made it); None for any other layout."""
    match = _CANONICAL.match(text)
    if match is None:
        return None
    try:
        session, at = _scanstring(text, match.end())
        fields: Any = None
        if text.startswith(',"p":', at):
            try:
                fields, at = _raw_decode(text, at + 5)
            except RecursionError:
                raise JournalError(path, "its fields are nested too deep", expected) from None
        if text.startswith(_ENVELOPE_KEY, at) and text.endswith("}"):
            envelope = text[at + len(_ENVELOPE_KEY) : -1]
            try:
                # Checked as JSON as the whole line once was, without building it (msgspec
                # validates into a Raw), its too-deep values pruned first.
                _validate(_json.prune(envelope))
            except msgspec.DecodeError as exc:
                raise JournalError(path, f"not valid JSON ({exc})", expected) from None
        elif text.startswith(',"x":"', at):
            envelope, at = _scanstring(text, at + 6)
            if at != len(text) - 1 or not text.endswith("}"):
                return None
        else:
            return None
    except ValueError:
        return None
    number, kind, epoch, sequence, stamp = match.groups()
    if int(number) != expected:
        raise JournalError(
            path, f"numbered {int(number)!r}: a record is missing or out of order", expected
        )
    record_kind = _KIND_OF.get(kind)
    if record_kind is None:
        raise JournalError(path, f"unknown kind {kind!r}", expected)
    return JournalRecord(
        expected,
        record_kind,
        int(epoch),
        int(sequence),
        session,
        int(stamp) / 1e9,
        envelope,
        _fields(path, expected, fields),
    )


def _parse_any(path: str, text: str, expected: int) -> JournalRecord:
    """A record in any other layout (keys reordered, spaces): parsed whole, values nested too
    deep read as null (the envelope is still taken from the text)."""
    try:
        value = _json.loads_lenient(text)
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
    if not (type(epoch) is int and type(sequence) is int and type(stamp) is int) or not isinstance(
        session, str
    ):
        raise JournalError(path, "a field has the wrong type", expected)
    cut = text.find(_ENVELOPE_KEY)
    if cut >= 0 and "m" in value:
        # The exact text, not a re-encoding of the parsed value: what lies between the
        # first `,"m":` (the header before it holds no such text) and the closing brace.
        if text.endswith("}"):
            envelope = text[cut + len(_ENVELOPE_KEY) : -1]
        else:
            envelope = text.rstrip(" \t\r\n")[cut + len(_ENVELOPE_KEY) : -1]
    elif isinstance(value.get("x"), str):
        envelope = value["x"]
    else:
        raise JournalError(path, "has no envelope", expected)
    return JournalRecord(
        number,
        record_kind,
        epoch,
        sequence,
        session,
        stamp / 1e9,
        envelope,
        _fields(path, expected, value.get("p")),
    )


def _read_sqlite(path: str, limit: int) -> Iterator[JournalRecord]:
    files.check_sqlite_files_for_reading(os.path.realpath(path))
    try:
        connection = sqlite3.connect(f"file:{_uri_path(path)}?mode=rw", uri=True)
    except sqlite3.DatabaseError as exc:
        raise JournalError(path, f"cannot open: {exc}") from None
    try:
        version = _check_sqlite_meta(path, connection)
        if version == 1:
            yield from _read_rows(path, connection, limit)
        else:
            packed = version == SQLITE_FORMAT_VERSION
            yield from _read_batches(path, connection, limit, packed=packed)
    finally:
        connection.close()


#: A batch row: its numbers, its stored length, and its records when that length is within the
#: bound (?1), so a crafted row is never fetched whole.
SELECT_BATCHES = (
    "SELECT first_record, last_record, length(records), "
    "CASE WHEN length(records) <= ?1 THEN records END FROM batches"
)


def batch_lines(
    path: str, records: object, number: int, limit: int, *, packed: bool, stored: int = 0
) -> bytes:
    """A batch row's records as lines (unpacked when `packed`: version 3), checked to end
    whole and to stay within `limit` (max_record_bytes) plus `BATCH_SLACK_BYTES`; `number`:
    its first record's, for the error; `stored`: the row's stored length."""
    bound = limit + BATCH_SLACK_BYTES
    if records is None and stored > bound:
        raise too_long(path, "its batch", stored, limit, number)
    if packed and isinstance(records, bytes):
        if len(records) >= 4 and int.from_bytes(records[:4], "little") > bound:
            # Refused before anything that large is allocated (LZ4 expands up to 255x).
            unpacked = int.from_bytes(records[:4], "little")
            raise too_long(path, "its batch (unpacked)", unpacked, limit, number)
        try:
            records = _core.unpack_records(records)
        except ValueError as exc:
            raise JournalError(path, f"its batch's records are corrupted ({exc})", number) from None
    if not isinstance(records, bytes) or not records.endswith(b"\n"):
        raise JournalError(path, "its batch's records are cut short", number)
    return records


def _read_batches(
    path: str, connection: sqlite3.Connection, limit: int, *, packed: bool
) -> Iterator[JournalRecord]:
    """Versions 2 and 3: a batch of records a row, each record a line as in a JSONL journal
    (version 3: the lines LZ4-packed)."""
    expected = 1
    try:
        cursor = connection.execute(
            SELECT_BATCHES + " ORDER BY first_record", (limit + BATCH_SLACK_BYTES,)
        )
        for first, last, stored, records in cursor:
            if first != expected:
                raise JournalError(
                    path, f"a batch starts at record {first!r}: a record is missing", expected
                )
            text = batch_lines(path, records, expected, limit, packed=packed, stored=stored)
            lines = text.split(b"\n")
            del text, records
            lines.pop()  # after the last newline: nothing
            for raw in lines:
                if len(raw) > limit:
                    raise too_long(path, "the record", len(raw), limit, expected)
                yield parse_line(path, raw, expected)
                expected += 1
            if last != expected - 1:
                raise JournalError(path, f"its batch says it ends at record {last!r}", expected - 1)
    except sqlite3.DatabaseError as exc:
        raise JournalError(path, f"unreadable ({exc})", expected) from None


def _read_rows(path: str, connection: sqlite3.Connection, limit: int) -> Iterator[JournalRecord]:
    """Version 1 (acp-fast before batch rows): a record a row of table ``records``."""
    expected = 1
    try:
        cursor = connection.execute(
            "SELECT n, kind, transport_epoch, update_sequence, session_id, time_ns, "
            # Characters, not bytes (SQLite 3.40 has no octet_length): a bound all the same.
            "CASE WHEN ifnull(length(envelope), 0) + ifnull(length(fields), 0) <= ?1 "
            "THEN envelope END, CASE WHEN ifnull(length(envelope), 0) + "
            "ifnull(length(fields), 0) <= ?1 THEN fields END, "
            "ifnull(length(envelope), 0) + ifnull(length(fields), 0) FROM records ORDER BY n",
            (limit,),
        )
        for row in cursor:
            number, kind, epoch, sequence, session, stamp, envelope, fields, size = row
            if size is not None and size > limit:
                raise too_long(path, "the record", size, limit, expected)
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
                parsed = None if fields is None else _json.loads_lenient(fields)
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


def _uri_path(path: str) -> str:
    return quote(os.path.abspath(path))


def _check_sqlite_meta(path: str, connection: sqlite3.Connection) -> int:
    """The format version of a SQLite journal (1: a record a row; 2: a batch a row; 3: a
    batch a row, packed)."""
    try:
        rows = dict(connection.execute("SELECT key, value FROM journal_meta").fetchall())
    except sqlite3.DatabaseError:
        raise JournalError(path, "not an acp-fast journal (no journal_meta table)") from None
    if rows.get("format") != FORMAT_NAME:
        raise JournalError(path, "not an acp-fast journal (journal_meta names another format)")
    version = rows.get("version")
    if version not in ("1", str(SQLITE_PLAIN_VERSION), str(SQLITE_FORMAT_VERSION)):
        raise JournalError(path, f"journal version {version} is not supported")
    return int(version)
