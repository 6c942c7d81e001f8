"""`chat`'s input: lines from stdin, a terminal's through `input()` (editing, history) and
type-ahead while a turn runs, anything else read and split here with a bound on a line."""

from __future__ import annotations

import os
import select
import sys

from acp_fast._text import printable_line

from .output import isatty, say

#: The longest line read from a stdin that is not a terminal (a pipe may hold anything).
LINE_LIMIT = 1 << 20


class LineReader:
    """Lines from stdin. A terminal: `input()` at the prompt (line editing and history when
    readline is there) and, while a turn runs, whole lines as the terminal hands them over.
    Anything else: its bytes, split into lines here (never more than `LINE_LIMIT` a line)."""

    def __init__(self) -> None:
        self.tty = isatty(sys.stdin)
        self._fd = sys.stdin.fileno()
        self._buffer = b""
        self._skipping = False  # inside a line too long to keep, until its newline
        self._lines: list[str] = []
        self.ended = False
        if self.tty:
            try:
                import readline  # noqa: F401 - input() gains editing and history
            except ImportError:
                pass

    def _fill(self, timeout: float | None) -> bool:
        """Read what stdin has (waiting up to `timeout`); False when nothing came."""
        if self.ended:
            return False
        ready, _, _ = select.select([self._fd], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self._fd, 65536)
        except OSError:
            data = b""
        if not data:
            self.ended = True
            if self._buffer and not self._skipping:
                self._lines.append(self._decode(self._buffer))
                self._buffer = b""
            return True
        if self._skipping:  # inside a line too long to keep: drop it up to its newline
            at = data.find(b"\n")
            if at < 0:
                return True
            self._skipping = False
            data = data[at + 1 :]
        *lines, rest = (self._buffer + data).split(b"\n")
        self._lines.extend(self._decode(line) for line in lines if len(line) <= LINE_LIMIT)
        skipped = sum(1 for line in lines if len(line) > LINE_LIMIT)
        self._buffer = rest
        if len(rest) > LINE_LIMIT:
            self._skipping = True
            self._buffer = b""
            skipped += 1
        if skipped:
            say(f"acp-fast: a line longer than {LINE_LIMIT:,} bytes was skipped")
        return True

    @staticmethod
    def _decode(line: bytes) -> str:
        return line.decode("utf-8", "replace").rstrip("\r")

    def take_new(self, timeout: float, wanted: tuple[str, ...]) -> str | None:
        """Wait up to `timeout` for lines (a terminal hands over whole lines); the first new
        one that is one of `wanted` is taken out and returned, the others stay for the next
        prompts (type-ahead)."""
        before = len(self._lines)
        self._fill(timeout)
        for index in range(before, len(self._lines)):
            if self._lines[index].strip() in wanted:
                return self._lines.pop(index).strip()
        return None

    def read(self, prompt: str, *, fresh: bool = False) -> str | None:
        """The next line (None: stdin ended). Type-ahead read during a turn comes first,
        unless `fresh`: a question is answered only by what is typed after it is shown."""
        if self._lines and not (fresh and self.tty):
            line = self._lines.pop(0)
            if self.tty:
                say(f"{prompt}{printable_line(line)}")
            return line
        if self.ended:
            return None
        if self.tty:
            try:
                return input(prompt)
            except EOFError:
                self.ended = True
                return None
        while not self._lines and not self.ended:
            self._fill(None)
        return self._lines.pop(0) if self._lines else None
