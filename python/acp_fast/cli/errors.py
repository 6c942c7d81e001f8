"""How the CLI reports what went wrong: one line on stderr (agent text made printable), the
agent's last stderr lines under it, quiet exits on a closed stdout, and the signals that end
a run."""

from __future__ import annotations

import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

import acp_fast
from acp_fast import journal as journal_module
from acp_fast._text import printable_line

#: The exit status of a run whose stdout was closed under it (as a filter killed by SIGPIPE).
EXIT_PIPE = 128 + signal.SIGPIPE
#: The most stderr lines of the agent shown under an error.
TAIL_LINES = 20
#: The most characters of one such line shown.
TAIL_WIDTH = 1000
#: The marker the core writes before the stderr tail it appends to an error's message.
_CORE_TAIL = "\nagent stderr ("


def one_line(exc: BaseException | str) -> str:
    """An error message as one printable line (agent text may be in it)."""
    text = " ".join(printable_line(str(exc)).replace("^J", " ").split())
    if isinstance(exc, BaseException):
        return text or type(exc).__name__
    return text


def split_tail(message: str) -> tuple[str, str]:
    """(the message, the agent stderr the core appended to it, if any)."""
    at = message.find(_CORE_TAIL)
    if at < 0:
        return message, ""
    rest = message[at + 1 :]
    _, _, tail = rest.partition("\n")
    return message[:at], tail


def tail_lines(tail: str, limit: int = TAIL_LINES) -> list[str]:
    """The last `limit` non-blank lines of an agent's stderr, each made printable."""
    lines = [line for line in tail.replace("\r\n", "\n").split("\n") if line.strip()]
    shown = []
    for line in lines[-limit:]:
        line = line.rstrip()
        if len(line) > TAIL_WIDTH:
            line = f"{line[:TAIL_WIDTH]}… ({len(line) - TAIL_WIDTH:,} more characters)"
        shown.append(printable_line(line))
    return shown


def describe(exc: BaseException | str) -> str:
    """The message for a person at the CLI: the library's words, except where they name
    calls the person did not make (a timeout given as --timeout)."""
    if isinstance(exc, acp_fast.TurnTimeout):
        text = f"the turn did not end within {exc.timeout:g} s (--timeout)"
        result = exc.result
        if result is not None:
            return f"{text}; it was cancelled and ended with stop reason {result.stop_reason!r}"
        return f"{text}, nor within {exc.cancel_grace:g} s of being cancelled"
    text = str(exc)
    at = text.find("start() timed out after ")
    if isinstance(exc, acp_fast.AcpError) and at >= 0:
        seconds = text[at + len("start() timed out after ") :].split(" s", 1)[0]
        return f"the agent did not start within {seconds} s (--timeout)"
    return text


def report(
    exc: BaseException | str, *, tail: str = "", err: TextIO | None = None, prefix: str = "error"
) -> None:
    """``acp-fast: error: <one line>``, then the agent's last stderr lines (from the message,
    else `tail`), each on a line of its own."""
    err = err if err is not None else sys.stderr
    message, own_tail = split_tail(describe(exc))
    shown = tail_lines(own_tail or tail)
    if shown:
        # The stderr is shown below, line by line: a message that carries it too (on its own
        # lines, in another wording) keeps its first line only.
        message = message.split("\n", 1)[0]
    text = one_line(message) or (type(exc).__name__ if isinstance(exc, BaseException) else "")
    lines = [f"acp-fast: {prefix}: {text}"]
    if shown:
        lines.append("acp-fast: the agent's stderr ended with:")
        lines.extend(f"  | {line}" for line in shown)
    try:
        err.write("\n".join(lines) + "\n")
        err.flush()
    except (OSError, ValueError):
        pass


def silence_stdout() -> None:
    """After a broken stdout pipe, point fd 1 at /dev/null so the exit flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def closed_stdout(exc: BaseException) -> bool:
    """The error is our stdout's reader going away (``| head``): an exit, not a failure."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, BrokenPipeError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def stop_on(signums: Sequence[int], received: list[int]) -> dict[int, Any]:
    """SIGTERM and SIGHUP take Ctrl-C's path (the turn ends, `with client` stops the agent's
    group); a signal the caller ignores (nohup) stays ignored. Returns what to restore."""

    def stop(signum: int, frame: object) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():  # signal.signal's rule
        for signum in signums:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                previous[signum] = signal.signal(signum, stop)
    return previous


@contextmanager
def warnings_to_stderr() -> Iterator[None]:
    """Journal warnings (a torn final record) as one line each on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", journal_module.TornRecordWarning)
        try:
            yield
        finally:
            for warning in caught:
                print(f"acp-fast: warning: {one_line(str(warning.message))}", file=sys.stderr)
