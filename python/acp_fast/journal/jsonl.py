"""The JSONL journal: opening (header, torn tail, last record) and the core's writer."""

from __future__ import annotations

import json
import os
import warnings

from .. import _core
from . import files
from .observer import _Journal
from .records import (
    JSONL_HEADER,
    Fsync,
    JournalError,
    TornRecordWarning,
    _check_fsync,
    _missing_directory,
    _not_a_journal,
)


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
        self._start(writer)


def _open_jsonl(path: str, sync: bool) -> int:
    """Open an existing JSONL journal for appending, or create one atomically: the header is
    written to a temporary file (an unpredictable name, ``O_EXCL | O_NOFOLLOW``) that is then
    linked into place, so `path` never exists without its whole header. A symlink or a file
    another user planted at `path` is refused (`files`). An existing empty file (made with
    ``touch``) gets the header."""
    path = files.resolve_for_writing(path)
    flags = os.O_RDWR | os.O_APPEND
    try:
        fd = files.open_existing(path, flags | os.O_NONBLOCK)
    except FileNotFoundError:
        pass
    else:
        if os.fstat(fd).st_size == 0:
            try:
                os.write(fd, JSONL_HEADER)
                if sync:
                    os.fsync(fd)
            except OSError as exc:
                os.close(fd)
                raise JournalError(path, f"cannot write the journal: {exc.strerror}") from None
        return fd
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise _missing_directory(path)
    try:
        fd, temporary = files.create_temporary(directory, os.path.basename(path))
        try:
            os.write(fd, JSONL_HEADER)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # someone else created it meanwhile: theirs is checked as any existing file
        finally:
            os.unlink(temporary)
        if sync:
            dir_fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    except OSError as exc:
        raise JournalError(path, f"cannot create the journal: {exc.strerror}") from None
    try:
        return files.open_existing(path, flags | os.O_NONBLOCK)
    except FileNotFoundError:
        raise JournalError(path, "was removed while it was created") from None


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
