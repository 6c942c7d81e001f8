"""A program run on a pseudo-terminal, as a person runs it: its stdin, stdout and stderr are
the terminal (its controlling one, so Ctrl-C is a SIGINT), and everything it shows is read from
the master side, byte for byte."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import acp_fast

# Where the package under test lives (the source tree, or site-packages when CI tests the wheel).
PYTHON_DIR = Path(acp_fast.__file__).resolve().parents[1]


def env(**extra: str) -> dict[str, str]:
    result = dict(os.environ)
    old = result.get("PYTHONPATH")
    result["PYTHONPATH"] = str(PYTHON_DIR) + (os.pathsep + old if old else "")
    result.pop("ACP_DEMO_DELAY", None)
    result["TERM"] = "xterm"
    result.update(extra)
    return result


def _controlling_tty() -> None:
    # In the child, after setsid (start_new_session): the pty on fd 0 becomes its terminal.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Pty:
    def __init__(self, args: list[str], *, cwd: Path, extra_env: dict[str, str] | None = None):
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.master = master
        self.output = b""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "acp_fast", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=env(**(extra_env or {})),
            start_new_session=True,
            preexec_fn=_controlling_tty,
            close_fds=True,
        )
        os.close(slave)

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every slave side is closed
            return False
        if not data:
            return False
        self.output += data
        return True

    def expect(self, pattern: str | bytes, timeout: float = 30.0) -> int:
        """Read until `pattern` (a regular expression) appears after `mark`; its end offset."""
        wanted = re.compile(pattern.encode() if isinstance(pattern, str) else pattern)
        deadline = time.monotonic() + timeout
        start = getattr(self, "mark", 0)
        while True:
            found = wanted.search(self.output, start)
            if found is not None:
                self.mark = found.end()
                return found.end()
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(min(left, 0.2)):
                found = wanted.search(self.output, start)
                if found is not None:
                    self.mark = found.end()
                    return found.end()
                raise AssertionError(
                    f"{pattern!r} did not appear; the terminal shows:\n"
                    + self.output[start:].decode("utf-8", "replace")
                )

    def send(self, data: bytes | str) -> None:
        os.write(self.master, data.encode() if isinstance(data, str) else data)

    def finish(self, timeout: float = 30.0) -> int:
        """Read to the end; the exit status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._read(0.2):
            if self.proc.poll() is not None:
                while self._read(0.05):
                    if not select.select([self.master], [], [], 0)[0]:
                        break
                break
        try:
            return self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        finally:
            self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        try:
            os.close(self.master)
        except OSError:
            pass

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")
