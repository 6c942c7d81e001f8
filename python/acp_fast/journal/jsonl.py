"""The JSONL journal: opening (header, torn tail, last record) and the core's writer."""

from __future__ import annotations

import os
import warnings

from .. import _core
from . import files
from .observer import _Journal
from .reading import last_numbers, parse_line, too_long
from .records import (
    JSONL_HEADER,
    MAX_RECORD_BYTES,
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
        max_record_bytes: int = MAX_RECORD_BYTES,
    ) -> None:
        super().__init__(observer, transport_epoch)
        self.path = os.fspath(path)
        self.fsync = _check_fsync(fsync)
        fd = _open_jsonl(self.path, self.fsync != "never")
        try:
            last_record, self.last_transport_epoch = _jsonl_tail(self.path, fd, max_record_bytes)
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


_BLOCK = 1 << 16


def _last_newline(fd: int, start: int, end: int) -> int:
    """The offset of the last newline in [start, end), or -1: blocks read backwards, each
    searched once (linear in the bytes scanned, never a growing concatenation)."""
    position = end
    while position > start:
        begin = max(start, position - _BLOCK)
        block = os.pread(fd, position - begin, begin)
        cut = block.rfind(b"\n")
        if cut >= 0:
            return begin + cut
        position = begin
    return -1


def _jsonl_tail(path: str, fd: int, limit: int) -> tuple[int, int]:
    """Check the header, cut off a torn final record (warning once) and return the last
    record's number and epoch ((0, 0) when there is none). Linear in the last line's length;
    only its first bytes are parsed (the writers put the number and epoch first)."""
    size = os.fstat(fd).st_size
    head = os.pread(fd, len(JSONL_HEADER), 0)
    if head != JSONL_HEADER:
        raise JournalError(path, _not_a_journal(head))
    header_end = len(JSONL_HEADER)
    end = _last_newline(fd, header_end - 1, size) + 1  # the header's own newline at worst
    if end < size:
        warnings.warn(
            f"{path}: dropped a torn final record ({size - end} bytes), what a crash leaves",
            TornRecordWarning,
            stacklevel=4,
        )
        os.ftruncate(fd, end)
    if end == header_end:
        return 0, 0
    start = _last_newline(fd, header_end - 1, end - 1) + 1
    if end - 1 - start > limit:
        raise too_long(path, "the last record", end - 1 - start, limit, None)
    line = os.pread(fd, end - 1 - start, start)
    try:
        number, epoch = last_numbers(path, line, None)
        parse_line(path, line, number)  # the whole record checked, as read() will
        return number, epoch
    except JournalError:
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
