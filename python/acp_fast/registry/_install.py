"""A binary distribution installed once into a private cache directory.

The archive is downloaded (bounded in size and time), its sha256 checked when the registry gives
one (refused when it does not match), unpacked into a fresh directory of random name and renamed
into place, so a half-done install is never seen and two hosts installing at once both end with
a whole one. The cache is ours: its directories are created 0700 and refused when they are a
symlink, another user's, or writable by others (a planted name). Archives are hostile: no member
may land outside the install directory (absolute names, ``..``, links out), no device files,
bounded count and size; the command run must be a regular file inside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
import tarfile
import tempfile
import time
import urllib.parse
import zipfile
from pathlib import Path, PurePosixPath

from .._text import printable_line
from ._fetch import Progress, chunks, describe
from ._format import Binary, RegistryError

#: The largest archive downloaded, and the most its members may unpack to.
MAX_ARCHIVE_BYTES = 1 << 30
MAX_UNPACKED_BYTES = 4 << 30
MAX_MEMBERS = 100_000
#: The time a download may take, seconds.
DOWNLOAD_TIMEOUT = 1800.0
_MARKER = ".acp-fast-install.json"


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/acp-fast/agents`` (``~/.cache/acp-fast/agents`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "acp-fast" / "agents"


def install(
    agent_id: str,
    version: str,
    binary: Binary,
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    progress: Progress | None = None,
) -> Path:
    """The path of `binary`'s command, installed under `cache_dir` if it is not already."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    agent_dir = _private_dir(root) / agent_id
    _private_dir(agent_dir)
    target = agent_dir / f"{version}-{binary.platform}"
    wanted = {"archive": binary.archive, "sha256": binary.sha256}
    if _installed(target, wanted):
        return _command(target, binary.cmd)
    work = Path(tempfile.mkdtemp(prefix=".install-", dir=agent_dir))
    try:
        digest = _download(binary.archive, work / "archive", progress)
        if binary.sha256 is not None and digest != binary.sha256:
            raise RegistryError(
                f"{describe(binary.archive)}: sha256 {digest} does not match the registry's "
                f"{binary.sha256}: refused (a changed or tampered download)"
            )
        unpacked = work / "unpacked"
        unpacked.mkdir(mode=0o700)
        _unpack(binary, work / "archive", unpacked)
        (unpacked / _MARKER).write_text(json.dumps({**wanted, "downloaded_sha256": digest}))
        _command(unpacked, binary.cmd)  # checked before it is put in place
        _replace(unpacked, target, agent_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _command(target, binary.cmd)


def _private_dir(path: Path) -> Path:
    """`path`, created 0700 when missing; refused when it is not a directory of ours that only
    we can write (another user could otherwise plant the agent we are about to run)."""
    try:
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except FileExistsError:
            pass  # a file or a symlink of that name: told below
        info = os.lstat(path)
    except OSError as exc:
        raise RegistryError(f"cache directory {describe(path)}: {exc}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise RegistryError(f"cache directory {describe(path)} is not a directory (a symlink?)")
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        raise RegistryError(
            f"cache directory {describe(path)} belongs to uid {info.st_uid}, not to us: refused"
        )
    if info.st_mode & 0o022:
        raise RegistryError(
            f"cache directory {describe(path)} is writable by others "
            f"(mode {stat.S_IMODE(info.st_mode):o}): refused; chmod go-w it"
        )
    return path


def _installed(target: Path, wanted: dict[str, str | None]) -> bool:
    try:
        if not stat.S_ISDIR(os.lstat(target).st_mode):
            return False
        marker = json.loads((target / _MARKER).read_text()[:65536])
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and all(marker.get(k) == v for k, v in wanted.items())


def _download(url: str, dest: Path, progress: Progress | None) -> str:
    digest = hashlib.sha256()
    deadline = time.monotonic() + DOWNLOAD_TIMEOUT
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        for chunk in chunks(url, limit=MAX_ARCHIVE_BYTES, deadline=deadline, progress=progress):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def _archive_kind(url: str) -> str:
    name = PurePosixPath(urllib.parse.urlsplit(url).path or url).name.lower()
    if name.endswith(".zip"):
        return "zip"
    if name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar")):
        return "tar"
    return "raw"


def _unpack(binary: Binary, archive: Path, dest: Path) -> None:
    kind = _archive_kind(binary.archive)
    try:
        if kind == "zip":
            _unzip(archive, dest)
        elif kind == "tar":
            _untar(archive, dest)
        else:  # a bare program: it is the command
            program = dest / PurePosixPath(binary.cmd).name
            os.replace(archive, program)
            os.chmod(program, 0o755)
    except RegistryError:
        raise
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        raise RegistryError(f"{describe(binary.archive)} cannot be unpacked: {exc}") from exc


def _member_path(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or "\\" in name or "\x00" in name:
        raise RegistryError(f"archive member {printable_line(name)!r} would land outside it")
    return path


def _unzip(archive: Path, dest: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        members = zf.infolist()
        _check_totals(len(members), sum(m.file_size for m in members))
        for member in members:
            path = _member_path(member.filename)
            mode = member.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise RegistryError(f"archive member {member.filename!r} is a symlink: refused")
            out = dest.joinpath(*path.parts)
            if member.is_dir():
                out.mkdir(mode=0o755, parents=True, exist_ok=True)
                continue
            out.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with zf.open(member) as src, os.fdopen(fd, "wb") as dst:
                shutil.copyfileobj(src, dst)  # ZipExtFile stops at the declared size
            os.chmod(out, 0o755 if mode & 0o111 else 0o644)


def _untar(archive: Path, dest: Path) -> None:
    if not hasattr(tarfile, "data_filter"):
        raise RegistryError(
            f"this Python ({sys.version.split()[0]}) cannot unpack tar archives safely "
            "(tarfile extraction filters came in 3.11.4): upgrade Python"
        )
    with tarfile.open(archive, "r:*") as tf:
        members = tf.getmembers()
        _check_totals(len(members), sum(m.size for m in members if m.isfile()))
        for member in members:
            _member_path(member.name)
        # The "data" filter refuses absolute names, links out of dest, devices; drops setuid.
        tf.extractall(dest, filter="data")


def _check_totals(count: int, size: int) -> None:
    if count > MAX_MEMBERS:
        raise RegistryError(f"the archive has {count:,} members (at most {MAX_MEMBERS:,})")
    if size > MAX_UNPACKED_BYTES:
        raise RegistryError(
            f"the archive unpacks to {size:,} bytes (at most {MAX_UNPACKED_BYTES:,})"
        )


def _command(root: Path, cmd: str) -> Path:
    """The command `cmd` inside `root`: a regular, executable file that resolves inside it."""
    path = root.joinpath(*_member_path(cmd).parts)
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root:
        raise RegistryError(f"the command {cmd!r} resolves outside its install directory")
    try:
        info = os.stat(real)
    except OSError as exc:
        raise RegistryError(f"the command {cmd!r} is not in the archive: {exc}") from exc
    if not stat.S_ISREG(info.st_mode) or not info.st_mode & 0o100:
        raise RegistryError(f"the command {cmd!r} in the archive is not an executable file")
    return Path(real)


def _replace(unpacked: Path, target: Path, agent_dir: Path) -> None:
    """Puts `unpacked` at `target`; an older install there is moved aside, then removed."""
    try:
        os.rename(unpacked, target)
        return
    except OSError:
        pass  # target exists (a stale or different install)
    old = Path(tempfile.mkdtemp(prefix=".old-", dir=agent_dir))
    try:
        os.rename(target, old / "install")
    except FileNotFoundError:
        pass  # someone else removed it meanwhile
    try:
        os.rename(unpacked, target)
    except OSError:
        if not target.is_dir():  # not another host's concurrent install of the same thing
            raise
    shutil.rmtree(old, ignore_errors=True)
