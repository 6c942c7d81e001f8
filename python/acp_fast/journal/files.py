"""Opening and creating a journal's files where other users may plant names.

A journal often lives in a shared directory (``/tmp``) and its host may run as root, so every
name the journal writes through is checked before it is written:

- Temporary files get an unpredictable name and are created with ``O_CREAT | O_EXCL |
  O_NOFOLLOW``: a name planted in advance (a symlink, a file) makes the create fail, never
  redirects it.
- The journal itself (and a SQLite journal's ``-wal`` / ``-shm`` / ``-journal``) is opened with
  ``O_NOFOLLOW``. A symlink there is followed only when it belongs to the host's user or to the
  owner of its directory (the kernel's ``fs.protected_symlinks`` rule, applied here too because
  containers often turn it off); a symlink another user planted is refused with a
  `JournalError`. A file owned by another user in a directory others can write to is refused
  too (``fs.protected_regular``): it may have been planted to read the conversation, or be a
  hard link to a file of the host's user.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat

from .records import JournalError

#: Written only by the host's user; a SQLite journal's side files get the database's mode.
_WRITE_FLAGS = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK


def _trusted_owner(uid: int, directory: str) -> bool:
    if uid == os.geteuid():
        return True
    try:
        return uid == os.stat(directory).st_uid
    except OSError:
        return False


def _others_can_write(directory: str) -> bool:
    try:
        return bool(os.stat(directory).st_mode & (stat.S_IWGRP | stat.S_IWOTH))
    except OSError:
        return True


def resolve_for_writing(path: str) -> str:
    """`path` with a final symlink resolved when the policy above lets it be followed (the
    target is checked the same way, up to 8 links); raises `JournalError` otherwise."""
    for _ in range(8):
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return path
        except OSError as exc:
            raise JournalError(path, f"cannot open the journal: {exc.strerror}") from None
        if not stat.S_ISLNK(info.st_mode):
            return path
        directory = os.path.dirname(os.path.abspath(path))
        if not _trusted_owner(info.st_uid, directory):
            raise JournalError(
                path,
                f"is a symbolic link owned by another user (uid {info.st_uid}) in {directory}: "
                "not followed (it may point at a file of yours); remove it or pass the real path",
            )
        target = os.readlink(path)
        path = os.path.join(directory, target)
    raise JournalError(path, "too many levels of symbolic links")


def check_written_file(path: str, info: os.stat_result) -> None:
    """Refuse to write into `info` (what `path` holds) unless it is a regular file of ours (or
    of the directory's owner), or one in a directory only its owner writes."""
    if not stat.S_ISREG(info.st_mode):
        raise JournalError(path, "is not a regular file")
    directory = os.path.dirname(os.path.abspath(path))
    if not _trusted_owner(info.st_uid, directory) and _others_can_write(directory):
        raise JournalError(
            path,
            f"is owned by another user (uid {info.st_uid}) in a directory others can write to "
            f"({directory}): not written (it may have been planted to read what is recorded)",
        )
    if info.st_nlink > 1 and _others_can_write(directory):
        # Whoever made the link, the file may be one of ours elsewhere.
        raise JournalError(path, "has other hard links, in a directory others can write to")


def open_existing(path: str, flags: int = _WRITE_FLAGS) -> int:
    """Open an existing journal file for writing without following a final symlink (resolve
    it first with `resolve_for_writing`); FileNotFoundError when it does not exist."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise JournalError(path, "became a symbolic link while it was opened") from None
        raise JournalError(path, f"cannot open the journal: {exc.strerror}") from None
    try:
        check_written_file(path, os.fstat(fd))
        if flags & os.O_NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def create_temporary(directory: str, stem: str, mode: int = 0o644) -> tuple[int, str]:
    """A new empty file in `directory`, named ``.<stem>.<random>.tmp``, created with
    ``O_EXCL | O_NOFOLLOW`` (a planted name never redirects it). Returns (fd, path)."""
    for _ in range(100):
        name = os.path.join(directory, f".{stem}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(
                name,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                mode,
            )
        except FileExistsError:
            continue
        return fd, name
    raise FileExistsError(errno.EEXIST, "no free temporary name", directory)


def create_new(path: str, mode: int = 0o644) -> int | None:
    """Create `path` as a new empty file (``O_EXCL | O_NOFOLLOW``); None when something is
    already there."""
    try:
        return os.open(
            path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode
        )
    except FileExistsError:
        return None
    except OSError as exc:
        raise JournalError(path, f"cannot create the journal: {exc.strerror}") from None


def prepare_sqlite_files(path: str) -> None:
    """Before SQLite opens the journal `path` (already resolved and checked) for writing: its
    ``-wal`` and ``-shm`` exist as files of ours (created here when absent, so SQLite never
    creates them through a planted name), and a ``-journal`` present passes the checks."""
    mode = stat.S_IMODE(os.stat(path).st_mode) & 0o666
    for suffix in ("-wal", "-shm", "-journal"):
        side = path + suffix
        try:
            info = os.lstat(side)
        except FileNotFoundError:
            if suffix == "-journal":
                continue
            fd = create_new(side, mode)
            if fd is None:
                info = os.lstat(side)
            else:
                os.close(fd)
                continue
        if stat.S_ISLNK(info.st_mode):
            raise JournalError(
                side,
                f"is a symbolic link (owned by uid {info.st_uid}): SQLite would write through "
                "it; remove it",
            )
        check_written_file(side, info)


def check_sqlite_files_for_reading(path: str) -> None:
    """Before a reader's SQLite connection (which may write the ``-shm`` and checkpoint the
    ``-wal``): side files that are symlinks or hard links are refused. Absent ones are left to
    SQLite: a reader creates nothing (its files would lock the journal's owner out)."""
    for suffix in ("-wal", "-shm", "-journal"):
        side = path + suffix
        try:
            info = os.lstat(side)
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode):
            raise JournalError(side, "is a symbolic link: SQLite would write through it; remove it")
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            raise JournalError(side, "is not a regular file with one link: remove it")
