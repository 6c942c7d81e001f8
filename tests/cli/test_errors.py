"""How the CLI words an error: one line, the agent's stderr under it once, every piece
printable."""

from __future__ import annotations

import io

from acp_fast.cli import errors


def report(exc: BaseException | str, tail: str = "") -> list[str]:
    err = io.StringIO()
    errors.report(exc, tail=tail, err=err)
    return err.getvalue().splitlines()


def test_the_core_s_tail_is_split_off_and_shown_once() -> None:
    message = "the agent exited\nagent stderr (last 12 bytes):\nno key\r\nbye\n"
    assert report(RuntimeError(message), tail="no key\nbye\n") == [
        "acp-fast: error: the agent exited",
        "acp-fast: the agent's stderr ended with:",
        "  | no key",
        "  | bye",
    ]


def test_a_tail_in_another_wording_is_not_shown_twice() -> None:
    message = "could not start the agent\n--- stderr ---\nno key"
    assert report(RuntimeError(message), tail="no key\n") == [
        "acp-fast: error: could not start the agent",
        "acp-fast: the agent's stderr ended with:",
        "  | no key",
    ]


def test_controls_and_long_tails() -> None:
    tail = "".join(f"line {n}\n" for n in range(100)) + "\x1b]0;title\x07\n"
    lines = report("bad \x1b[2J thing", tail=tail)
    assert lines[0] == "acp-fast: error: bad ^[[2J thing"
    assert len(lines) == 2 + errors.TAIL_LINES
    assert lines[-1] == "  | ^[]0;title^G"
    assert all("\x1b" not in line for line in lines)


def test_a_long_stderr_line_is_cut() -> None:
    lines = report("failed", tail="x" * 70_000 + "\n")
    assert lines[2] == "  | " + "x" * errors.TAIL_WIDTH + "… (69,000 more characters)"
