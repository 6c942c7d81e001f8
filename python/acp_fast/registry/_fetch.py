"""Bytes from a file or a URL, bounded in size and time.

Used for the registry document and for binary archives. A path (or ``file://`` URL) is read
from the filesystem; ``http://`` and ``https://`` through urllib with a timeout on each read.
Nothing is fetched unless the caller names it: no network at import, no default registry URL.
"""

from __future__ import annotations

import os
import stat
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from .._text import printable_line
from ._format import RegistryError

#: Per-read timeout for URLs, seconds.
READ_TIMEOUT = 30.0
_CHUNK = 1 << 16

#: ``progress(done_bytes, total_bytes_or_None)`` while a download runs.
Progress = Callable[[int, "int | None"], None]


def describe(source: str | os.PathLike[str]) -> str:
    """`source` as a message names it (control characters made visible)."""
    return printable_line(os.fspath(source))


def chunks(
    source: str | os.PathLike[str],
    *,
    limit: int,
    deadline: float,
    progress: Progress | None = None,
) -> Iterator[bytes]:
    """The bytes of `source` in chunks; `RegistryError` past `limit` bytes or `deadline`
    (a ``time.monotonic()`` value), or when it cannot be read."""
    name = describe(source)
    done = 0
    with _open(source) as (stream, total):
        if total is not None and total > limit:
            raise RegistryError(f"{name} is {total:,} bytes (at most {limit:,})")
        while True:
            if time.monotonic() > deadline:
                raise RegistryError(f"{name}: gave up after the time allowed for it")
            try:
                chunk = stream.read(_CHUNK)
            except OSError as exc:
                raise RegistryError(f"{name}: {exc}") from exc
            if not chunk:
                return
            done += len(chunk)
            if done > limit:
                raise RegistryError(f"{name} is longer than {limit:,} bytes")
            if progress is not None:
                progress(done, total)
            yield chunk


def read(source: str | os.PathLike[str], *, limit: int, timeout: float) -> bytes:
    """The whole of `source`, at most `limit` bytes, within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    return b"".join(chunks(source, limit=limit, deadline=deadline))


class _open:
    """A readable stream for a path or URL, with its length when known."""

    def __init__(self, source: str | os.PathLike[str]) -> None:
        self.source = source
        self.stream: BinaryIO | None = None

    def __enter__(self) -> tuple[BinaryIO, int | None]:
        text = os.fspath(self.source)
        scheme = urllib.parse.urlsplit(text).scheme if isinstance(text, str) else ""
        try:
            if scheme in ("http", "https"):
                response = urllib.request.urlopen(text, timeout=READ_TIMEOUT)
                length = response.headers.get("Content-Length")
                self.stream = response
                return response, int(length) if length and length.isdigit() else None
            if scheme == "file":
                text = urllib.request.url2pathname(urllib.parse.urlsplit(text).path)
            elif scheme and len(scheme) > 1:
                raise RegistryError(
                    f"{describe(text)}: only paths, file://, http:// and https:// are read"
                )
            path = Path(text)
            # Not a FIFO or device: reading one could block forever or never end.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            stream = os.fdopen(fd, "rb")
            info = os.fstat(stream.fileno())
            if not stat.S_ISREG(info.st_mode):
                stream.close()
                raise RegistryError(f"{describe(text)} is not a regular file")
            os.set_blocking(stream.fileno(), True)
            self.stream = stream
            return stream, info.st_size
        except RegistryError:
            raise
        except (OSError, ValueError) as exc:
            raise RegistryError(f"cannot read {describe(text)}: {exc}") from exc

    def __exit__(self, *exc: object) -> None:
        if self.stream is not None:
            self.stream.close()
