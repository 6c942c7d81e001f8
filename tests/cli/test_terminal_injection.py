"""Issue 21 item 3: an agent's control sequences never reach the user's terminal. A hostile
agent puts OSC 0, CSI 2J, OSC 52, an 8-bit CSI, a bidi override, CR and BS in every field it
controls; `acp-fast run` (plain and live), `journal show` and `journal stats` run on a
pseudo-terminal, and the bytes read from its master side hold none of them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from .ptykit import Pty

HOSTILE = Path(__file__).with_name("hostile_agent.py")
AGENT = f"{sys.executable} {HOSTILE}"

# The CLI's own status line ("waiting for the agent", after a second of silence) is the only
# escape sequence the plain view writes itself.
OWN = re.compile(rb"\r\x1b\[2K")
_C1 = re.compile("[\u0080-\u009f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


class C1:
    """8-bit controls and bidi overrides, in the terminal's UTF-8 output."""

    @staticmethod
    def search(output: bytes) -> re.Match[str] | None:
        return _C1.search(output.decode("utf-8", "surrogateescape"))


def assert_no_agent_controls(output: bytes) -> None:
    own_removed = OWN.sub(b"", output)
    assert b"\x1b" not in own_removed, own_removed
    assert b"\x07" not in own_removed
    assert b"\x08" not in own_removed
    assert C1.search(own_removed) is None
    # The escaped forms are there: the fields were shown, not dropped.
    assert b"^[]0;PWNED^G" in output
    assert b"<U+009B>2J" in output


def run_on_pty(args: list[str], cwd: Path) -> tuple[int, bytes]:
    pty = Pty(args, cwd=cwd)
    status = pty.finish(timeout=60)
    return status, pty.output


def test_run_plain_and_the_journal_tools(tmp_path: Path) -> None:
    journal = tmp_path / "evil.jsonl"
    status, output = run_on_pty(
        [
            "run",
            "--view",
            "plain",
            "--fs",
            "--terminal",
            "--journal",
            str(journal),
            "--agent",
            AGENT,
            "hi",
        ],
        tmp_path,
    )
    assert status == 0, output
    assert_no_agent_controls(output)
    text = output.decode()
    # Reply text keeps its newlines and tabs (the pty shows \n as \r\n).
    assert "\r\n\tkept tab and newline" in text
    for piece in ("thought: thought", "plan: - step", "tool: title", "mode: ", "permission: perm"):
        assert piece in text, piece
    for method in ("fs/read_text_file /nowhere/", "fs/write_text_file", "terminal/create"):
        assert method in text, method

    for action in ("show", "stats"):
        status, output = run_on_pty(["journal", action, str(journal)], tmp_path)
        assert status == 0, output
        assert_no_agent_controls(output)
    status, output = run_on_pty(["journal", "show", "--envelopes", str(journal)], tmp_path)
    assert status == 0, output
    assert b"\x1b" not in output and C1.search(output) is None


def test_error_message_and_stderr_tail(tmp_path: Path) -> None:
    status, output = run_on_pty(
        ["run", "--view", "plain", "--agent", f"{AGENT} --fail", "hi"], tmp_path
    )
    assert status == 1, output
    assert_no_agent_controls(output)
    text = output.decode()
    assert "acp-fast: error: the agent answered session/new" in text
    assert "acp-fast: the agent's stderr ended with:" in text
    assert "  | agent stderr ^[]0;PWNED^G" in text


def test_live_view(tmp_path: Path) -> None:
    pytest.importorskip("rich")
    status, output = run_on_pty(
        ["run", "--view", "live", "--fs", "--terminal", "--agent", AGENT, "hi"], tmp_path
    )
    assert status == 0, output
    # rich draws with its own CSI sequences (colours, cursor moves); none of the agent's
    # reaches the terminal: no OSC at all, no clear screen, no 8-bit controls, no BEL.
    assert b"\x1b]" not in output
    assert b"\x1b[2J" not in output
    assert b"\x07" not in output and b"\x08" not in output
    assert C1.search(output) is None
    assert b"^[]0;PWNED^G" in output


def test_chat(tmp_path: Path) -> None:
    """The chat's banner, /mode listing, turn, permission question and decision."""
    pty = Pty(["chat", "--view", "plain", "--fs", "--terminal", "--agent", AGENT], cwd=tmp_path)
    try:
        pty.expect("you> ")
        pty.send("/mode\r")
        pty.expect("you> ")
        pty.send("hi\r")
        pty.expect(r"allow\? ")
        pty.send("n\r")
        pty.expect("kept tab and newline")
        pty.expect("you> ")
        pty.send("\x04")
        assert pty.finish() == 0, pty.text
    finally:
        pty.close()
    # readline switches terminal modes (CSI ? Pn h/l) and the status line erases itself:
    # neither is the agent's.
    own = re.sub(rb"\x1b\[\?\d+[hl]", b"", pty.output)
    assert_no_agent_controls(own)
    text = pty.text
    assert "acp-fast chat with evil^[]0;PWNED^G" in text
    assert "the agent asks permission: perm ^[]0;PWNED^G" in text
