"""Names another user plants where a journal is written (issue 21, item 2).

The host runs as root and writes its journal into a sticky, world-writable directory (``/tmp``
style); a forked child that became ``nobody`` plants symlinks and files there first. A
root-owned 0600 file must never be touched, and every refusal is a `JournalError` naming the
path. The kernel's own guard (``fs.protected_symlinks``) is off in many containers, so the
journal must not rely on it.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from acp_fast import journal

NOBODY = 65534
SECRET = b"root's secret, never to be overwritten\n"

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="planting names as another user needs root (setuid to nobody in a child)",
)


def as_nobody(action: Callable[[], None]) -> None:
    """Run `action` in a forked child that dropped to uid/gid 65534."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            action()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child could not plant its names"


@pytest.fixture
def shared() -> Iterator[Path]:
    """A sticky world-writable directory, as /tmp is."""
    directory = Path(tempfile.mkdtemp(prefix="acp-shared-", dir="/tmp"))
    directory.chmod(0o1777)
    try:
        yield directory
    finally:
        for entry in directory.iterdir():
            entry.unlink()
        directory.rmdir()


@pytest.fixture
def secrets(tmp_path: Path) -> tuple[Path, Path]:
    """Two root-owned 0600 files: one with content, one empty (an empty file is where a
    journal header would be written)."""
    full = tmp_path / "secret"
    full.write_bytes(SECRET)
    empty = tmp_path / "empty-secret"
    empty.write_bytes(b"")
    for path in (full, empty):
        path.chmod(0o600)
    tmp_path.chmod(0o755)  # nobody may name the files, never open them
    return full, empty


def untouched(secrets: tuple[Path, Path]) -> bool:
    full, empty = secrets
    return (
        full.read_bytes() == SECRET
        and empty.read_bytes() == b""
        and stat.S_IMODE(full.stat().st_mode) == 0o600
        and full.stat().st_uid == 0
    )


def test_the_old_temporary_name_redirects_nothing(shared: Path, secrets: tuple[Path, Path]) -> None:
    # The old writer's temporary name was `.<name>.<pid>.tmp`, opened O_CREAT|O_TRUNC.
    target = shared / "j.jsonl"
    planted = [shared / f".j.jsonl.{os.getpid()}.tmp", shared / ".j.jsonl.tmp"]

    def plant() -> None:
        for name in planted:
            os.symlink(secrets[0], name)

    as_nobody(plant)
    with journal.JsonlJournal(target) as written:
        written.on_sent('{"jsonrpc":"2.0","id":1,"method":"x"}')
    assert untouched(secrets)
    assert not target.is_symlink() and target.stat().st_uid == 0
    assert target.read_bytes().startswith(journal.JSONL_HEADER)
    assert [r.kind for r in journal.read(target)] == [journal.RecordKind.SENT]
    assert all(name.is_symlink() for name in planted)  # left alone, never written through


@pytest.mark.parametrize("name", ["j.jsonl", "j.db"])
@pytest.mark.parametrize("which", [0, 1])
def test_a_symlink_planted_at_the_journal_path_is_refused(
    shared: Path, secrets: tuple[Path, Path], name: str, which: int
) -> None:
    target = shared / name
    as_nobody(lambda: os.symlink(secrets[which], target))
    with pytest.raises(journal.JournalError, match="symbolic link owned by another user"):
        journal.open_journal(target)
    assert untouched(secrets)


def test_a_symlink_of_the_hosts_own_user_is_followed(shared: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.jsonl"
    link = shared / "mine.jsonl"
    link.symlink_to(real)  # made by root, the host's user
    with journal.JsonlJournal(link) as written:
        written.on_sent('{"jsonrpc":"2.0","id":1,"method":"x"}')
    assert real.read_bytes().startswith(journal.JSONL_HEADER)


@pytest.mark.parametrize("name", ["j.jsonl", "j.db"])
def test_a_journal_file_another_user_planted_is_refused(
    shared: Path, secrets: tuple[Path, Path], name: str
) -> None:
    # Planted to read what root's session records.
    target = shared / name
    as_nobody(lambda: target.write_bytes(journal.JSONL_HEADER if name.endswith("l") else b""))
    with pytest.raises(journal.JournalError, match="owned by another user"):
        journal.open_journal(target)
    assert target.read_bytes() in (journal.JSONL_HEADER, b"")


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_sqlite_side_files_planted_as_symlinks_are_refused(
    shared: Path, secrets: tuple[Path, Path], suffix: str
) -> None:
    target = shared / "j.db"
    as_nobody(lambda: os.symlink(secrets[0], str(target) + suffix))
    with pytest.raises(journal.JournalError, match="symbolic link"):
        with journal.SqliteJournal(target) as written:
            written.on_sent('{"jsonrpc":"2.0","id":1,"method":"x"}')
    assert untouched(secrets)


def test_a_sqlite_journal_reopened_after_planting_side_files(
    shared: Path, secrets: tuple[Path, Path]
) -> None:
    # The -wal and -shm are deleted when the last connection closes: the next open is the
    # moment to plant them, and readers are checked too.
    target = shared / "j.db"
    with journal.SqliteJournal(target) as written:
        written.on_sent('{"jsonrpc":"2.0","id":1,"method":"x"}')
    for suffix in ("-wal", "-shm"):
        side = Path(str(target) + suffix)
        if side.exists():
            side.unlink()
    as_nobody(lambda: os.symlink(secrets[0], str(target) + "-shm"))
    with pytest.raises(journal.JournalError, match="symbolic link"):
        list(journal.read(target))
    with pytest.raises(journal.JournalError, match="symbolic link"):
        journal.SqliteJournal(target)
    assert untouched(secrets)


@pytest.mark.parametrize("name", ["j.jsonl", "j.db", "j.db-wal"])
def test_a_hard_link_to_a_file_of_ours_is_refused(
    shared: Path, secrets: tuple[Path, Path], name: str
) -> None:
    # Another user can make one where fs.protected_hardlinks is off; made here by root (the
    # kernel of this machine may refuse nobody), the file is ours either way.
    os.link(secrets[1], shared / name)
    with pytest.raises(journal.JournalError, match="other hard links"):
        journal.open_journal(shared / name.removesuffix("-wal"))
    assert untouched(secrets)
